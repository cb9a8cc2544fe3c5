#pragma once
// Bucket auto-sizing for the data-parallel reducer (distributed/reducer.h): choose the gradient
// bucket cap that minimises the communication left exposed after backward, from
//   - an alpha-beta model of one allreduce on the communicator, t(bytes) = alpha + beta * bytes,
//     fitted by least squares to a short measurement, and
//   - the backward profile: when each layer's gradients became final during a warm-up step
//     (the model's backward hook timestamps).
//
// The pure part (fit, prediction, choice) is distributed/bucket_plan.h, free of MPI. This file
// measures both inputs at start-up, identically on every rank; rank 0 decides and broadcasts,
// so every rank builds the same buckets.
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

struct AutosizeResult {
  AllreduceSamples samples;
  AllreduceModel model;
  BackwardProfile profile;
  BucketPlan plan;          // rank 0's choice, broadcast
  double measure_seconds = 0;  // wall time the whole measurement took
};

// Both measurements, the fit and the choice; rank 0 decides and broadcasts the caps (every
// rank returns the same plan). `reducer`: the options the training's reducer will use (its caps
// are ignored). Collective on comm.
AutosizeResult autosize_buckets(MPI_Comm comm, Sequential<float>& model, const float* x, int64_t batch,
                                const float* target, const AutosizeOptions& options = {},
                                const ReducerOptions& reducer = {});

}  // namespace hddp
