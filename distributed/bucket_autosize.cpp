#include <hddp/distributed/bucket_autosize.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include <hddp/core/loss.h>
#include <hddp/core/util.h>
#include <hddp/distributed/ddp.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/nbc_algorithm.h>
#include <hddp/kernels/check.h>

namespace hddp {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

AllreduceSamples measure_allreduce(MPI_Comm comm, int64_t max_bytes, int reps, const ReducerOptions& reducer) {
  HDDP_CHECK_ARG(reps >= 1, "measure_allreduce: reps must be >= 1");
  max_bytes = std::max<int64_t>(8, max_bytes / 4 * 4);
  const int64_t lo = std::max<int64_t>(4, std::min<int64_t>(1024, max_bytes / 16) / 4 * 4);
  AllreduceSamples s;
  for (int64_t b = lo; b < max_bytes; b *= 4) s.bytes.push_back(b);
  s.bytes.push_back(max_bytes);
  std::vector<float> grads(size_t(max_bytes / 4), 1.0f);
  const NbcAlgorithm keep_mpi_t;  // MPI_T stays initialised: each reducer's own init is then cheap
  std::vector<double> local_best(s.bytes.size()), slowest(s.bytes.size());
  ReducerOptions opt = reducer;
  opt.bucket_cap_bytes = opt.first_bucket_cap_bytes = max_bytes;  // one bucket
  for (size_t k = 0; k < s.bytes.size(); ++k) {
    const int64_t b = s.bytes[k], n = b / 4;
    Reducer red(comm, grads.data(), n, {ParamSlice{"allreduce", 0, n}}, opt);
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
      if (r >= 0) t.push_back(seconds_since(t0));
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
  model.set_backward_hook([&](size_t, int64_t from) { ev.push_back({from, seconds_since(t0)}); });
  std::vector<std::vector<double>> t(L + 1);  // per event (and the total, last), over reps
  std::vector<int64_t> offsets;
  MseLoss<float> mse(model.out_features());
  for (int r = -warmup; r < reps; ++r) {
    model.zero_grad();
    mse.forward(model.forward({x, size_t(batch * model.in_features())}, batch), target, batch);
    ev.clear();
    t0 = Clock::now();
    model.backward(mse.grad());
    const double total = seconds_since(t0);
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

std::vector<PlanTrial> trial_plans(MPI_Comm comm, Sequential<float>& model, const float* x, int64_t batch,
                                   const float* target, const std::vector<CapPair>& caps,
                                   const AutosizeOptions& options, const ReducerOptions& reducer) {
  HDDP_CHECK_ARG(options.trial_rounds >= 1 && options.trial_steps >= 1,
                 "trial_plans: trial_rounds and trial_steps must be >= 1");
  const std::vector<ParamSlice> layout = param_layout(model.param_views());
  MseLoss<float> mse(model.out_features());
  std::vector<std::vector<double>> times(caps.size());
  std::vector<PlanTrial> trials(caps.size());
  std::vector<std::unique_ptr<Reducer>> reducers;  // one per plan, made once (each sets up MPI_T)
  for (size_t k = 0; k < caps.size(); ++k) {
    ReducerOptions opt = reducer;
    opt.bucket_cap_bytes = caps[k].cap_bytes, opt.first_bucket_cap_bytes = caps[k].first_cap_bytes;
    reducers.push_back(std::make_unique<Reducer>(comm, model.grads(), model.num_params(), layout, opt));
    trials[k] = {caps[k].cap_bytes, caps[k].first_cap_bytes, reducers.back()->buckets().size(), 0};
  }
  Reducer* current = nullptr;
  model.set_backward_hook([&](size_t, int64_t from) { current->grads_ready_from(from); });
  for (int round = 0; round < options.trial_rounds; ++round)
    for (size_t k = 0; k < caps.size(); ++k) {
      Reducer& red = *reducers[k];
      current = &red;
      HDDP_MPI(MPI_Barrier(comm));
      for (int step = -1; step < options.trial_steps; ++step) {
        const auto t0 = Clock::now();
        model.zero_grad();
        mse.forward(model.forward({x, size_t(batch * model.in_features())}, batch), target, batch);
        red.begin_step();
        model.backward(mse.grad());
        red.finish();
        if (step >= 0) times[k].push_back(seconds_since(t0));
      }
    }
  model.set_backward_hook(nullptr);
  model.zero_grad();
  std::vector<double> med(caps.size()), slowest(caps.size());
  for (size_t k = 0; k < caps.size(); ++k) med[k] = median(times[k]);
  HDDP_MPI(MPI_Allreduce(med.data(), slowest.data(), static_cast<int>(caps.size()), MPI_DOUBLE, MPI_MAX, comm));
  for (size_t k = 0; k < caps.size(); ++k) trials[k].step_s = slowest[k];
  return trials;
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
  r.trials = trial_plans(comm, model, x, batch, target, trial_caps(layout, sizeof(float), options), options, reducer);
  int64_t caps[2] = {0, 0};
  if (rank == 0) {
    std::vector<PlanScore> scores;
    for (const PlanTrial& t : r.trials) scores.push_back({t.step_s, t.num_buckets, t.cap_bytes, t.first_cap_bytes});
    const PlanTrial& best = r.trials[pick_least(scores, options.tie_abs, options.trial_tie_rel)];
    caps[0] = best.cap_bytes, caps[1] = best.first_cap_bytes;
  }
  HDDP_MPI(MPI_Bcast(caps, 2, MPI_INT64_T, 0, comm));
  r.plan = predict_buckets(layout, sizeof(float), r.profile, r.model, caps[0], caps[1]);
  for (const PlanTrial& t : r.trials)
    if (t.cap_bytes == caps[0] && t.first_cap_bytes == caps[1]) r.step_s = t.step_s;
  r.measure_seconds = seconds_since(t0);
  return r;
}

}  // namespace hddp
