#pragma once
// The pure bucket planner of bucket auto-sizing (distributed/bucket_autosize.h), free of MPI:
// an alpha-beta model of one allreduce fitted to measurements, the reducer's predicted timeline
// for a pair of bucket caps, and the choice of caps that minimises exposed communication.
//
// The prediction replays the reducer: buckets from assign_buckets (distributed/buckets.h) in
// reverse layer order; bucket b is launched at the first hook event whose ready offset is <=
// its begin (or at the end of backward, in finish(), if none is); collectives run one after
// another (libnbc progresses them in order), each taking alpha + beta * bytes:
//   start[b] = max(launch[b], end[b-1]),  end[b] = start[b] + alpha + beta * bytes[b],
//   exposed  = max(0, end[last] - backward end).
// It assumes communication proceeds while backward computes. On a machine where it does not
// (shared memory without asynchronous progress: the reduction runs inside MPI_Test calls and
// takes CPU from backward: Open MPI 4.1's libnbc on one host) the measured exposed time is
// larger than predicted, for every cap alike.
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/distributed/buckets.h>

namespace hddp {

// One allreduce of `bytes` takes alpha + beta * bytes seconds.
struct AllreduceModel {
  double alpha = 0;  // seconds
  double beta = 0;   // seconds per byte
  double predict(int64_t bytes) const { return alpha + beta * double(bytes); }
};

// Least-squares fit of alpha, beta >= 0 to (bytes[i], seconds[i]) minimising the squared
// RELATIVE error sum ((alpha + beta b_i - t_i) / t_i)^2, so that small messages (latency) count
// as much as large ones (bandwidth). If the unconstrained optimum has a negative coefficient,
// that coefficient is fixed at 0 and the other refitted. Throws std::invalid_argument unless
// the vectors have the same length, at least two distinct sizes, sizes >= 0 and times > 0.
AllreduceModel fit_alpha_beta(const std::vector<int64_t>& bytes, const std::vector<double>& seconds);

// One backward hook call: at `t` seconds after backward started, every gradient at arena
// offset >= ready_from was final.
struct ReadyEvent {
  int64_t ready_from = 0;
  double t = 0;
};
// A backward pass: hook events in call order (ready_from non-increasing, t non-decreasing)
// and the time backward ended.
struct BackwardProfile {
  std::vector<ReadyEvent> events;
  double total = 0;
};

// The reducer's predicted timeline for one pair of caps.
struct BucketPlan {
  int64_t cap_bytes = 0, first_cap_bytes = 0;
  size_t num_buckets = 0;
  double comm = 0;      // sum of the collectives' predicted durations
  double comm_end = 0;  // last collective done, seconds after backward started
  double exposed = 0;   // max(0, comm_end - profile.total)
};

// Predicts exposed communication for caps (cap_bytes, first_cap_bytes) (see the top of this
// file). Throws std::invalid_argument on a bad layout or caps (assign_buckets' checks), or an
// inconsistent profile (events out of order, negative times, total before the last event).
BucketPlan predict_buckets(const std::vector<ParamSlice>& layout, int64_t elem_bytes,
                           const BackwardProfile& profile, const AllreduceModel& model,
                           int64_t cap_bytes, int64_t first_cap_bytes);

// When each bucket is launched: at the first hook event whose ready offset is <= its begin
// (the reducer launches buckets in order, and ready offsets only decrease), else at the end of
// backward (profile.total, in finish()). Seconds after backward started, one per bucket.
// Shared by the prediction here and the project's at-scale replay of a step.
std::vector<double> bucket_launch_times(const std::vector<Bucket>& buckets, const BackwardProfile& profile);

// A candidate plan's score, and the pick among candidates: the least cost, where costs within
// max(tie_abs, tie_rel * least) count as equal; among them the fewest buckets, then the
// largest caps. Returns the chosen index; throws std::invalid_argument on an empty list.
struct PlanScore {
  double cost = 0;
  size_t num_buckets = 0;
  int64_t cap_bytes = 0, first_cap_bytes = 0;
};
size_t pick_least(const std::vector<PlanScore>& scores, double tie_abs, double tie_rel);

// Caps at which the bucket assignment can change: the byte sizes of every run of consecutive
// parameters (assign_buckets only ever compares a run's size with the cap), ascending,
// without duplicates. At most `max_candidates`: beyond that a log-spaced subset (always
// keeping the smallest and the largest, the whole arena).
std::vector<int64_t> candidate_caps(const std::vector<ParamSlice>& layout, int64_t elem_bytes,
                                    size_t max_candidates = 4096);

struct AutosizeOptions {
  bool tune_first = false;                         // also choose the first bucket's cap
  int64_t first_cap_bytes = int64_t(1) << 20;      // used when !tune_first
  // Ties: plans within max(tie_abs, tie_rel * best) of the least exposed time count as equal;
  // among them the fewest buckets win (each collective costs per-call overhead the model
  // only partly sees), then the largest caps.
  double tie_abs = 1e-6, tie_rel = 0.01;
  // The trial of plans on the link (bucket_autosize.h): at most max_trials distinct plans,
  // each run for `trial_steps` real steps in each of `trial_rounds` interleaved rounds; steps
  // within trial_tie_rel of the fastest count as equal (the measurement's noise).
  size_t max_trials = 8;
  int trial_rounds = 3, trial_steps = 3;
  double trial_tie_rel = 0.02;
};

// A pair of bucket caps: (cap_bytes, first_cap_bytes).
struct CapPair {
  int64_t cap_bytes = 0, first_cap_bytes = 0;
};

// The plans worth trying on the link: for each cap of candidate_caps, the pair (cap,
// tune_first ? cap : first_cap_bytes); a pair that gives the same buckets as a smaller one is
// left out. Ascending caps, the smallest and the whole arena always in; beyond max_plans an
// evenly spaced subset of the distinct plans. Throws std::invalid_argument on a bad layout.
std::vector<CapPair> trial_caps(const std::vector<ParamSlice>& layout, int64_t elem_bytes,
                                const AutosizeOptions& options);

// The caps minimising predicted exposed communication over candidate_caps (for the first
// cap too when tune_first). Deterministic: the same inputs give the same plan on every rank.
BucketPlan choose_bucket_caps(const std::vector<ParamSlice>& layout, int64_t elem_bytes,
                              const BackwardProfile& profile, const AllreduceModel& model,
                              const AutosizeOptions& options = {});

// "4 MiB", "1.50 MiB", "96 KiB", "244 B".
std::string format_bytes(int64_t bytes);

}  // namespace hddp
