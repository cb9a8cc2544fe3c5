#pragma once
// A replay of the reducer's timeline at P nodes, free of MPI (bench/at_scale): from a
// model's parameter layout and per-layer compute times on one node, the bucket caps, the poll
// interval, the reduction bandwidth and a table t(bytes, P) of allreduce times, it computes one
// training step's timeline in Blocking and overlapped (Test) mode, and the best bucket cap.
// A bench model, not the runtime: library hddp::step_replay (bench/at_scale/CMakeLists.txt), not
// installed.
// It shares the bucket planner's code (distributed/bucket_plan.h): the buckets come from
// assign_buckets, their launch times from bucket_launch_times, the candidate caps from
// candidate_caps and the choice among them from pick_least.
//
// The overlapped step follows what Open MPI's libnbc does on the compute thread (measured on Open MPI 4.1,
// bench/results/at_scale.md): a bucket's MPI_Iallreduce is a Rabenseifner schedule of
// R = 2 ceil(log2 P) rounds (recursive halving, then doubling); a round advances only inside an
// MPI call, one round per call: the hook after each layer and every poll interval of compute
// while a bucket is in flight (Test mode), continuously in finish(). A halving round's reduction
// (the bytes received, at the reduction bandwidth) runs inside that call, on the compute thread:
// backward is stretched by it; on shared memory the round's transfer too (transfers_on_caller). Buckets run one after another (as in bucket_plan.h).
// Each round's network time is the table's iallreduce time for the bucket split over the
// rounds: the latency (alpha of an alpha-beta fit of the table at P) evenly, the rest in
// proportion to the round's bytes.
//
//   blocking step   = forward + backward + sum_b (t_allreduce(bytes_b, P) + reduction_b + average_b) + other
//   overlapped step = forward + backward stretched by reductions + wait in finish() + other
//   exposed         = step - (forward + backward + other);   efficiency = (forward + backward + other) / step
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/distributed/bucket_plan.h>
#include <hddp/distributed/buckets.h>

namespace hddp {

// ---- Inputs ----

// One layer: its parameter tensors (element counts, forward order; none for an activation)
// and its compute per step on one node, in seconds (or flop, see ModelProfile::flop).
struct LayerProfile {
  std::string name;
  std::vector<int64_t> params;
  double forward = 0, backward = 0;
};

struct ModelProfile {
  std::string name;
  std::vector<LayerProfile> layers;  // forward order
  bool flop = false;                 // forward/backward are flop counts, not seconds
  double other = 0;                  // seconds per step outside forward/backward (loss, optimizer)
  double compute() const;            // sum of forward + backward over the layers
  int64_t num_params() const;
};

// Reads a profile CSV (errors name path:line; '#' starts a comment line):
//   layer,params,forward_s,backward_s         seconds per step on one node
//   layer,params,forward_flop,backward_flop   flop per step on one node
// `params` is the layer's tensors' element counts joined by '+' ("1048576+1024"), 0 for none.
// Throws hddp::Error on an unreadable file, a bad header, a malformed or negative field, a
// duplicate layer name, or no parameters at all.
ModelProfile read_model_profile(const std::string& path);
ModelProfile parse_model_profile(const std::string& text, const std::string& path = "<profile>");
std::string model_profile_csv(const ModelProfile& m);  // the same format back

// Seconds from flop (flop / rate) or a rescale of seconds so that compute() == seconds.
// Throws std::invalid_argument on a non-positive argument.
void profile_to_seconds(ModelProfile& m, double flop_per_second);
void profile_scale_to(ModelProfile& m, double compute_seconds);

// The parameter layout the profile describes: "<layer>.<k>" tensors tiling one arena.
std::vector<ParamSlice> profile_layout(const ModelProfile& m);

// Allreduce times per operation ("allreduce": blocking MPI_Allreduce, "iallreduce": the
// nonblocking schedule waited at once), node count and message size. CSV (errors name
// path:line; '#' comment lines):
//   op,ranks,bytes,seconds,reduction_charged
// reduction_charged is 1 where the time includes the reductions (a real MPI) and 0 where it
// does not (SimGrid SMPI does not charge them): the replay then adds them at the reduction
// bandwidth. Written by bench/at_scale's at_scale_sim (simulated) and at_scale_mpi (measured).
struct AllreduceTable {
  struct Row {
    std::string op;
    int ranks = 0;
    int64_t bytes = 0;
    double seconds = 0;
    bool reduction_charged = false;
  };
  std::vector<Row> rows;

  bool has(const std::string& op, int ranks) const;
  std::vector<int> ranks(const std::string& op) const;  // ascending, distinct
  // Seconds for `bytes` at `ranks`: linear between the two nearest sizes measured, the
  // smallest size's time below it, the last segment's slope beyond the largest. Throws
  // hddp::Error when the table has no row for (op, ranks).
  double seconds(const std::string& op, int ranks, int64_t bytes) const;
  bool reduction_charged(const std::string& op, int ranks) const;
  // fit_alpha_beta over the rows of (op, ranks); alpha 0 with fewer than two sizes.
  AllreduceModel fit(const std::string& op, int ranks) const;
};
AllreduceTable read_allreduce_table(const std::string& path);
AllreduceTable parse_allreduce_table(const std::string& text, const std::string& path = "<table>");
inline constexpr const char* kAllreduceTableHeader = "op,ranks,bytes,seconds,reduction_charged";

// ---- The replay ----

struct ReplayOptions {
  int ranks = 1;
  int64_t cap_bytes = int64_t(25) << 20, first_cap_bytes = int64_t(1) << 20;
  double poll_interval = 50e-6;     // seconds of compute between MPI_Test calls (Test mode)
  double reduce_bandwidth = 10e9;   // bytes/s of `a += b` (float) on the compute thread
  std::string blocking_op = "allreduce", overlapped_op = "iallreduce";  // table rows used
  // Shared memory (every rank on one host, Open MPI's vader): a round's transfer is copies the
  // CPU makes inside the MPI call that progresses it, not a network working in the background,
  // so the overlapped replay charges it to the calling (compute) thread like the reductions.
  // Measured: without it the replay put 25-67 % of the 2-rank exposed time here (at_scale_comm_check).
  bool transfers_on_caller = false;
};

// Rabenseifner's schedule of one bucket of `bytes` at P ranks: R = 2 ceil(log2 P) rounds;
// bytes exchanged per round (halving: bytes/2, bytes/4, ...; doubling: the same mirrored) and
// bytes reduced after it (the halving rounds'). Empty for P = 1.
struct Round {
  int64_t bytes = 0, reduced = 0;
};
std::vector<Round> rabenseifner_rounds(int64_t bytes, int ranks);
// Bytes one rank reduces in the whole schedule: the sum of the rounds' `reduced`,
// bytes (P - 1) / P for a power of two.
double rabenseifner_reduced(int64_t bytes, int ranks);

struct StepTimeline {
  double forward = 0, backward = 0, other = 0;  // compute, seconds
  double backward_stretched = 0;  // backward plus the reductions run inside MPI calls during it
  double comm_span = 0;           // first bucket launched -> last bucket complete
  double exposed = 0;             // step - (forward + backward + other)
  double step = 0;
  size_t num_buckets = 0;
  double compute() const { return forward + backward + other; }
  double efficiency() const { return step > 0 ? compute() / step : 1.0; }  // weak scaling
};

// One step of `m` (seconds, not flop) at options.ranks nodes. Throws std::invalid_argument on
// a flop profile, bad options or caps, and hddp::Error when the table lacks the rows needed.
StepTimeline replay_blocking(const ModelProfile& m, const AllreduceTable& t, const ReplayOptions& o);
StepTimeline replay_overlapped(const ModelProfile& m, const AllreduceTable& t, const ReplayOptions& o);

// The cap giving the shortest overlapped step, over candidate_caps (at most max_candidates),
// the first bucket capped at min(cap, o.first_cap_bytes); ties as choose_bucket_caps on the
// exposed time (AutosizeOptions: within tolerance, the fewest buckets, then the largest cap).
struct BestCap {
  int64_t cap_bytes = 0;
  StepTimeline timeline;
};
BestCap best_overlapped_cap(const ModelProfile& m, const AllreduceTable& t, const ReplayOptions& o,
                            size_t max_candidates = 96, const AutosizeOptions& ties = {});

// One timeline as a CSV row (times in ms), written by the replay (at_scale_replay) and the
// in-simulator step (at_scale_sim step) alike, so the two compare column by column.
inline constexpr const char* kTimelineCsvHeader =
    "model,ranks,mode,cap_bytes,first_cap_bytes,buckets,forward_ms,backward_ms,other_ms,"
    "backward_stretched_ms,comm_span_ms,exposed_ms,step_ms,efficiency";
std::string timeline_csv_row(const std::string& model, int ranks, const std::string& mode, int64_t cap_bytes,
                             int64_t first_cap_bytes, const StepTimeline& s);

}  // namespace hddp
