#include <hddp/distributed/bucket_plan.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <hddp/kernels/check.h>

namespace hddp {

AllreduceModel fit_alpha_beta(const std::vector<int64_t>& bytes, const std::vector<double>& seconds) {
  HDDP_CHECK_ARG(bytes.size() == seconds.size(),
                 "fit_alpha_beta: " << bytes.size() << " sizes but " << seconds.size() << " times");
  for (size_t i = 0; i < bytes.size(); ++i) {
    HDDP_CHECK_ARG(bytes[i] >= 0, "fit_alpha_beta: negative size " << bytes[i]);
    HDDP_CHECK_ARG(seconds[i] > 0 && std::isfinite(seconds[i]),
                   "fit_alpha_beta: time " << seconds[i] << " for " << bytes[i] << " bytes must be finite and > 0");
  }
  const bool distinct = std::any_of(bytes.begin(), bytes.end(), [&](int64_t b) { return b != bytes.front(); });
  HDDP_CHECK_ARG(!bytes.empty() && distinct, "fit_alpha_beta: needs at least two distinct sizes");

  // Weighted least squares, weights 1/t^2, sizes in MiB for conditioning.
  double sw = 0, swb = 0, swbb = 0, swt = 0, swbt = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const double w = 1.0 / (seconds[i] * seconds[i]), b = double(bytes[i]) / 1048576.0, t = seconds[i];
    sw += w, swb += w * b, swbb += w * b * b, swt += w * t, swbt += w * b * t;
  }
  auto residual = [&](double a, double bm) {  // sum of squared relative errors, bm per MiB
    double r = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
      const double e = (a + bm * double(bytes[i]) / 1048576.0 - seconds[i]) / seconds[i];
      r += e * e;
    }
    return r;
  };
  const double det = sw * swbb - swb * swb;
  double a = (swt * swbb - swb * swbt) / det, bm = (sw * swbt - swb * swt) / det;
  if (!(a >= 0 && bm >= 0)) {
    // The constrained optimum lies on an edge: alpha = 0 or beta = 0 (whichever fits better).
    const double b_only = std::max(0.0, swbt / swbb), a_only = std::max(0.0, swt / sw);
    if (residual(0, b_only) <= residual(a_only, 0)) a = 0, bm = b_only;
    else a = a_only, bm = 0;
  }
  return {a, bm / 1048576.0};
}

namespace {

void check_profile(const BackwardProfile& p) {
  double prev_t = 0;
  for (size_t i = 0; i < p.events.size(); ++i) {
    const ReadyEvent& e = p.events[i];
    HDDP_CHECK_ARG(std::isfinite(e.t) && e.t >= prev_t,
                   "backward profile: event " << i << " at t = " << e.t << " s is before the previous one (" << prev_t << " s)");
    HDDP_CHECK_ARG(i == 0 || e.ready_from <= p.events[i - 1].ready_from,
                   "backward profile: event " << i << " has ready offset " << e.ready_from
                                              << " above the previous one (" << p.events[i - 1].ready_from << ")");
    prev_t = e.t;
  }
  HDDP_CHECK_ARG(std::isfinite(p.total) && p.total >= prev_t,
                 "backward profile: total " << p.total << " s is before the last event (" << prev_t << " s)");
}

BucketPlan predict_checked(const std::vector<ParamSlice>& layout, int64_t elem_bytes, const BackwardProfile& profile,
                           const AllreduceModel& model, int64_t cap, int64_t first_cap) {
  const std::vector<Bucket> buckets = assign_buckets(layout, elem_bytes, cap, first_cap);
  const std::vector<double> launch = bucket_launch_times(buckets, profile);
  BucketPlan plan;
  plan.cap_bytes = cap, plan.first_cap_bytes = first_cap, plan.num_buckets = buckets.size();
  double end = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const double d = model.predict(buckets[b].size() * elem_bytes);
    end = std::max(launch[b], end) + d;
    plan.comm += d;
  }
  plan.comm_end = end;
  plan.exposed = std::max(0.0, end - profile.total);
  return plan;
}

}  // namespace

std::vector<double> bucket_launch_times(const std::vector<Bucket>& buckets, const BackwardProfile& profile) {
  std::vector<double> launch;
  launch.reserve(buckets.size());
  size_t e = 0;
  for (const Bucket& bk : buckets) {
    while (e < profile.events.size() && profile.events[e].ready_from > bk.begin) ++e;
    launch.push_back(e < profile.events.size() ? profile.events[e].t : profile.total);
  }
  return launch;
}

size_t pick_least(const std::vector<PlanScore>& s, double tie_abs, double tie_rel) {
  HDDP_CHECK_ARG(!s.empty(), "pick_least: no candidates");
  double best = INFINITY;
  for (const PlanScore& p : s) best = std::min(best, p.cost);
  const double limit = best + std::max(tie_abs, tie_rel * best);
  size_t pick = s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    const PlanScore& p = s[i];
    if (p.cost > limit) continue;
    if (pick == s.size()) { pick = i; continue; }
    const PlanScore& q = s[pick];
    if (p.num_buckets < q.num_buckets ||
        (p.num_buckets == q.num_buckets &&
         (p.cap_bytes > q.cap_bytes || (p.cap_bytes == q.cap_bytes && p.first_cap_bytes > q.first_cap_bytes))))
      pick = i;
  }
  return pick;
}

BucketPlan predict_buckets(const std::vector<ParamSlice>& layout, int64_t elem_bytes, const BackwardProfile& profile,
                           const AllreduceModel& model, int64_t cap_bytes, int64_t first_cap_bytes) {
  check_profile(profile);
  HDDP_CHECK_ARG(model.alpha >= 0 && model.beta >= 0, "predict_buckets: alpha and beta must be >= 0");
  return predict_checked(layout, elem_bytes, profile, model, cap_bytes, first_cap_bytes);
}

std::vector<int64_t> candidate_caps(const std::vector<ParamSlice>& layout, int64_t elem_bytes, size_t max_candidates) {
  HDDP_CHECK_ARG(elem_bytes > 0, "candidate_caps: elem_bytes must be > 0");
  HDDP_CHECK_ARG(max_candidates >= 2, "candidate_caps: max_candidates must be >= 2");
  std::vector<int64_t> c;
  for (size_t i = 0; i < layout.size(); ++i) {
    int64_t run = 0;
    for (size_t j = i; j < layout.size(); ++j) {
      run += layout[j].size * elem_bytes;
      if (run > 0) c.push_back(run);
    }
  }
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  if (c.size() > max_candidates) {
    std::vector<int64_t> thin;
    for (size_t k = 0; k < max_candidates; ++k) thin.push_back(c[k * (c.size() - 1) / (max_candidates - 1)]);
    thin.erase(std::unique(thin.begin(), thin.end()), thin.end());
    c = std::move(thin);
  }
  return c;
}

BucketPlan choose_bucket_caps(const std::vector<ParamSlice>& layout, int64_t elem_bytes, const BackwardProfile& profile,
                              const AllreduceModel& model, const AutosizeOptions& options) {
  check_profile(profile);
  HDDP_CHECK_ARG(model.alpha >= 0 && model.beta >= 0, "choose_bucket_caps: alpha and beta must be >= 0");
  HDDP_CHECK_ARG(options.tie_abs >= 0 && options.tie_rel >= 0, "choose_bucket_caps: tie tolerances must be >= 0");
  std::vector<int64_t> caps = candidate_caps(layout, elem_bytes, 512);
  HDDP_CHECK_ARG(!caps.empty(), "choose_bucket_caps: the layout has no parameters");
  std::vector<int64_t> firsts;
  if (options.tune_first) {
    // The first bucket holds a run ending at the last parameter: only those sizes matter.
    int64_t run = 0;
    for (size_t i = layout.size(); i-- > 0;) {
      run += layout[i].size * elem_bytes;
      if (run > 0 && (firsts.empty() || firsts.back() != run)) firsts.push_back(run);
    }
  } else {
    HDDP_CHECK_ARG(options.first_cap_bytes > 0, "choose_bucket_caps: first_cap_bytes must be > 0");
    firsts.push_back(options.first_cap_bytes);
  }
  std::vector<BucketPlan> plans;
  std::vector<PlanScore> scores;
  plans.reserve(caps.size() * firsts.size());
  for (int64_t f : firsts)
    for (int64_t c : caps) {
      plans.push_back(predict_checked(layout, elem_bytes, profile, model, c, f));
      const BucketPlan& p = plans.back();
      scores.push_back({p.exposed, p.num_buckets, p.cap_bytes, p.first_cap_bytes});
    }
  return plans[pick_least(scores, options.tie_abs, options.tie_rel)];
}

std::vector<CapPair> trial_caps(const std::vector<ParamSlice>& layout, int64_t elem_bytes, const AutosizeOptions& options) {
  HDDP_CHECK_ARG(options.max_trials >= 2, "trial_caps: max_trials must be >= 2");
  HDDP_CHECK_ARG(options.tune_first || options.first_cap_bytes > 0, "trial_caps: first_cap_bytes must be > 0");
  std::vector<CapPair> distinct;
  std::vector<std::vector<int64_t>> seen;  // each plan's bucket begins
  for (int64_t c : candidate_caps(layout, elem_bytes)) {
    const CapPair p{c, options.tune_first ? c : options.first_cap_bytes};
    std::vector<int64_t> begins;
    for (const Bucket& b : assign_buckets(layout, elem_bytes, p.cap_bytes, p.first_cap_bytes)) begins.push_back(b.begin);
    if (std::find(seen.begin(), seen.end(), begins) != seen.end()) continue;
    seen.push_back(std::move(begins));
    distinct.push_back(p);
  }
  if (distinct.size() <= options.max_trials) return distinct;
  std::vector<CapPair> thin;
  const size_t n = options.max_trials;
  for (size_t k = 0; k < n; ++k) thin.push_back(distinct[k * (distinct.size() - 1) / (n - 1)]);
  return thin;
}

std::string format_bytes(int64_t bytes) {
  char buf[64];
  auto fmt = [&](double v, const char* unit) {
    if (std::fabs(v - std::round(v)) < 0.005) std::snprintf(buf, sizeof buf, "%.0f %s", v, unit);
    else std::snprintf(buf, sizeof buf, "%.2f %s", v, unit);
  };
  if (bytes >= (int64_t(1) << 20)) fmt(double(bytes) / 1048576.0, "MiB");
  else if (bytes >= 1024) fmt(double(bytes) / 1024.0, "KiB");
  else std::snprintf(buf, sizeof buf, "%lld B", (long long)bytes);
  return buf;
}

}  // namespace hddp
