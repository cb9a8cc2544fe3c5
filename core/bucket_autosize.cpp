#include "core/bucket_autosize.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "core/ddp.h"
#include "core/mpi_env.h"
#include "kernels/check.h"

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
  BucketPlan plan;
  plan.cap_bytes = cap, plan.first_cap_bytes = first_cap, plan.num_buckets = buckets.size();
  size_t e = 0;
  double end = 0;
  for (const Bucket& bk : buckets) {
    // Launched by the first hook call that reports it complete (the reducer launches buckets
    // in order, and ready offsets only decrease), else in finish() at the end of backward.
    while (e < profile.events.size() && profile.events[e].ready_from > bk.begin) ++e;
    const double launch = e < profile.events.size() ? profile.events[e].t : profile.total;
    const double d = model.predict(bk.size() * elem_bytes);
    end = std::max(launch, end) + d;
    plan.comm += d;
  }
  plan.comm_end = end;
  plan.exposed = std::max(0.0, end - profile.total);
  return plan;
}

}  // namespace

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
  plans.reserve(caps.size() * firsts.size());
  double best = INFINITY;
  for (int64_t f : firsts)
    for (int64_t c : caps) {
      plans.push_back(predict_checked(layout, elem_bytes, profile, model, c, f));
      best = std::min(best, plans.back().exposed);
    }
  const double limit = best + std::max(options.tie_abs, options.tie_rel * best);
  const BucketPlan* pick = nullptr;
  for (const BucketPlan& p : plans) {
    if (p.exposed > limit) continue;
    if (!pick || p.num_buckets < pick->num_buckets ||
        (p.num_buckets == pick->num_buckets &&
         (p.cap_bytes > pick->cap_bytes || (p.cap_bytes == pick->cap_bytes && p.first_cap_bytes > pick->first_cap_bytes))))
      pick = &p;
  }
  return *pick;
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

// ---- MPI ----

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

AllreduceSamples measure_allreduce(MPI_Comm comm, int64_t max_bytes, int reps, const ReducerOptions& reducer) {
  HDDP_CHECK_ARG(reps >= 1, "measure_allreduce: reps must be >= 1");
  max_bytes = std::max<int64_t>(8, max_bytes / 4 * 4);
  const int64_t lo = std::max<int64_t>(4, std::min<int64_t>(1024, max_bytes / 16) / 4 * 4);
  AllreduceSamples s;
  for (int64_t b = lo; b < max_bytes; b *= 4) s.bytes.push_back(b);
  s.bytes.push_back(max_bytes);
  std::vector<float> params(size_t(max_bytes / 4), 0.0f), grads(size_t(max_bytes / 4), 1.0f);
  std::vector<double> local_best(s.bytes.size()), slowest(s.bytes.size());
  ReducerOptions opt = reducer;
  opt.bucket_cap_bytes = opt.first_bucket_cap_bytes = max_bytes;  // one bucket
  for (size_t k = 0; k < s.bytes.size(); ++k) {
    const int64_t b = s.bytes[k], n = b / 4;
    Reducer red(comm, params.data(), grads.data(), n, {ParamSlice{"allreduce", 0, n}}, opt);
    // Small messages are cheap and the most disturbed by a descheduled peer: more repetitions.
    const int r_here = b <= (int64_t(256) << 10) ? std::max(reps, 9) : reps;
    std::vector<double> t;
    for (int r = -1; r < r_here; ++r) {
      std::fill(grads.begin(), grads.begin() + n, 1.0f);  // finish() averages: no denormals
      HDDP_MPI(MPI_Barrier(comm));
      const auto t0 = Clock::now();
      red.begin_step();
      red.grads_ready_from(0);
      red.finish();
      if (r >= 0) t.push_back(since(t0));
    }
    local_best[k] = *std::min_element(t.begin(), t.end());
  }
  // Each rank's least time, then the slowest rank's. The least, not the median: on a shared
  // machine most repetitions can include a peer that was descheduled for a time slice, which
  // says nothing about the collective (measured: medians of 2.4 us and 24 ms for 12 and 48
  // bytes in the same run, with the load average at 8 on 2 cores).
  HDDP_MPI(MPI_Allreduce(local_best.data(), slowest.data(), static_cast<int>(s.bytes.size()), MPI_DOUBLE, MPI_MAX, comm));
  for (double v : slowest) s.seconds.push_back(std::max(1e-9, v));
  return s;
}

BackwardProfile measure_backward(MPI_Comm comm, Sequential<float>& model, const float* x, int64_t batch,
                                 const float* target, int warmup, int reps) {
  HDDP_CHECK_ARG(warmup >= 0 && reps >= 1, "measure_backward: warmup must be >= 0 and reps >= 1");
  const size_t L = model.num_layers();
  std::vector<ReadyEvent> ev;
  ev.reserve(L);
  Clock::time_point t0;
  model.set_backward_hook([&](size_t, int64_t from) { ev.push_back({from, since(t0)}); });
  std::vector<std::vector<double>> t(L + 1);  // per event (and the total, last), over reps
  std::vector<int64_t> offsets;
  for (int r = -warmup; r < reps; ++r) {
    model.zero_grad();
    model.forward(x, batch);
    ev.clear();
    t0 = Clock::now();
    model.backward(target);
    const double total = since(t0);
    HDDP_CHECK(ev.size() == L, "measure_backward: expected " << L << " hook calls, got " << ev.size());
    if (r < 0) continue;
    offsets.resize(L);
    for (size_t i = 0; i < L; ++i) t[i].push_back(ev[i].t), offsets[i] = ev[i].ready_from;
    t[L].push_back(total);
  }
  model.set_backward_hook(nullptr);
  model.zero_grad();
  std::vector<double> med(L + 1), slowest(L + 1);
  for (size_t i = 0; i <= L; ++i) med[i] = median(t[i]);
  HDDP_MPI(MPI_Allreduce(med.data(), slowest.data(), static_cast<int>(L + 1), MPI_DOUBLE, MPI_MAX, comm));
  BackwardProfile p;
  for (size_t i = 0; i < L; ++i) p.events.push_back({offsets[i], slowest[i]});
  p.total = slowest[L];
  return p;
}

AutosizeResult autosize_buckets(MPI_Comm comm, Sequential<float>& model, const float* x, int64_t batch,
                                const float* target, const AutosizeOptions& options, const ReducerOptions& reducer) {
  const auto t0 = Clock::now();
  int rank = 0;
  HDDP_MPI(MPI_Comm_rank(comm, &rank));
  AutosizeResult r;
  const std::vector<ParamSlice> layout = param_layout(model.param_views());
  r.profile = measure_backward(comm, model, x, batch, target);
  // Sizes up to the whole gradient arena (at most 256 MiB: beyond, the fit extrapolates).
  r.samples = measure_allreduce(comm, std::min<int64_t>(model.num_params() * int64_t(sizeof(float)), int64_t(256) << 20),
                                5, reducer);
  r.model = fit_alpha_beta(r.samples.bytes, r.samples.seconds);
  int64_t caps[2] = {0, 0};
  if (rank == 0) {
    const BucketPlan p = choose_bucket_caps(layout, sizeof(float), r.profile, r.model, options);
    caps[0] = p.cap_bytes, caps[1] = p.first_cap_bytes;
  }
  HDDP_MPI(MPI_Bcast(caps, 2, MPI_INT64_T, 0, comm));
  r.plan = predict_buckets(layout, sizeof(float), r.profile, r.model, caps[0], caps[1]);
  r.measure_seconds = since(t0);
  return r;
}

}  // namespace hddp
