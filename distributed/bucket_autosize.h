#pragma once
// Bucket auto-sizing for the data-parallel reducer (distributed/reducer.h): the gradient bucket
// caps that give the shortest training step on the network the job runs on, chosen by trying
// them: each distinct plan (trial_caps, bucket_plan.h) runs a few real steps - forward,
// backward with the reducer launching its buckets, finish - in interleaved rounds, and the
// fastest wins (the fewest buckets among those within the noise).
//
// Why a trial and not a model: the alpha-beta model of an allreduce (fitted below, still
// reported) and the backward profile predict exposed communication assuming the two proceed
// independently. Over TCP they do not: the kernel's copies and the progress calls take the
// rank's own cores, and how much of a transfer moves between two progress calls depends on
// the link. Measured on 2-rank links (1-25 Gbit/s; the project's benchmark results, "Over a
// network link"): at 1 Gbit/s the model's choice ran the CNN as slowly as Blocking mode (2.67 s
// an epoch against 1.87 s for the best cap); the trial was within 5 % of the best fixed
// variant at 9 of the 10 (model, link) pairs and 5.0 % off at the tenth.
//
// The pure part (fit, prediction, candidates, choice) is distributed/bucket_plan.h, free of
// MPI. This file measures at start-up, identically on every rank; the slowest rank's times
// decide, and rank 0 broadcasts the caps, so every rank builds the same buckets.
#include <mpi.h>

#include <cstdint>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/distributed/bucket_plan.h>
#include <hddp/distributed/reducer.h>

namespace hddp {

// ---- MPI: the start-up measurement (collective on comm; every rank must call) ----

// Allreduce timings on comm, through the reducer itself: a Reducer with `reducer` options (its
// libnbc algorithm, operation and progress strategy) over one bucket of each size, timed from
// begin_step to the end of finish() with nothing to overlap. Sizes from 1 KiB growing 4x up to
// max_bytes (at least two sizes, the last max_bytes), each `reps` times (at least 9 up to
// 256 KiB) after one warm-up, a barrier before each; per size the largest over ranks of each
// rank's least time (robust to descheduled peers on a shared machine). The same vectors on
// every rank.
struct AllreduceSamples {
  std::vector<int64_t> bytes;
  std::vector<double> seconds;
};
AllreduceSamples measure_allreduce(MPI_Comm comm, int64_t max_bytes, int reps = 5,
                                   const ReducerOptions& reducer = {});

// The backward profile of `model` on (x, target) (batch rows): `warmup` untimed steps, then
// `reps` timed forward+backward passes whose hook timestamps are recorded; per event the
// median over reps, then the maximum over ranks (a bucket can only complete when the slowest
// rank has launched it). Replaces the model's backward hook for the duration and clears it
// afterwards (call it before building a DistributedModel), and zeroes the gradients.
BackwardProfile measure_backward(MPI_Comm comm, Sequential<float>& model, const float* x, int64_t batch,
                                 const float* target, int warmup = 1, int reps = 3);

// One plan tried on the link: its caps, its buckets, the median step time over its trial
// steps (the slowest rank's; the same number on every rank).
struct PlanTrial {
  int64_t cap_bytes = 0, first_cap_bytes = 0;
  size_t num_buckets = 0;
  double step_s = 0;
};

// Each plan of `caps` for options.trial_steps steps in each of options.trial_rounds rounds
// (the plans interleaved within a round, so a machine that changes speed changes it for all):
// forward of (x, target) (batch rows, MSE), backward with a Reducer of `reducer`'s options and
// the plan's caps, finish. A barrier before each plan; the first step of each plan in a round
// is not timed. Uses the model's backward hook and clears it afterwards, and leaves the
// gradients zero and the parameters untouched. Collective on comm.
std::vector<PlanTrial> trial_plans(MPI_Comm comm, Sequential<float>& model, const float* x, int64_t batch,
                                   const float* target, const std::vector<CapPair>& caps,
                                   const AutosizeOptions& options = {}, const ReducerOptions& reducer = {});

struct AutosizeResult {
  AllreduceSamples samples;
  AllreduceModel model;      // fitted to samples: reported, and the prediction below uses it
  BackwardProfile profile;
  std::vector<PlanTrial> trials;  // every plan tried, ascending caps
  BucketPlan plan;           // the choice, broadcast by rank 0, with the model's prediction
  double step_s = 0;         // the chosen plan's measured step
  double measure_seconds = 0;  // wall time the whole measurement took
};

// The measurements, the fit, the trials and the choice: the least step time among the
// trials, where times within options.trial_tie_rel count as equal, and among those the fewest
// buckets, then the largest caps (pick_least); rank 0 decides and broadcasts the caps (every
// rank returns the same plan). `reducer`: the options the training's reducer will use (its caps
// are ignored). Collective on comm.
AutosizeResult autosize_buckets(MPI_Comm comm, Sequential<float>& model, const float* x, int64_t batch,
                                const float* target, const AutosizeOptions& options = {},
                                const ReducerOptions& reducer = {});

}  // namespace hddp
