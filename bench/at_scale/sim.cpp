// at_scale_sim / at_scale_mpi: one MPI program, built twice from this file.
//   at_scale_sim  with SimGrid's smpicxx (-DHDDP_SMPI): ranks on a simulated cluster (smpirun)
//   at_scale_mpi  with Open MPI: the same measurements on a real machine or cluster (mpiexec, srun)
// Modes (rank 0 writes the CSV; `MODE --help` for the options):
//   allreduce  the allreduce table of bench/at_scale/step_replay.h (op,ranks,bytes,seconds,
//              reduction_charged): MPI_Allreduce ("allreduce") and the nonblocking schedule
//              waited at once ("iallreduce": libnbc's MPI_Iallreduce with its rabenseifner
//              algorithm under Open MPI; under SMPI, whose MPI_Iallreduce is no model of libnbc,
//              the libnbc-like schedule below)
//   step       the reducer's step over a model profile: compute injected per layer (SMPI:
//              smpi_execute_benched; Open MPI: a spin), buckets from assign_buckets, blocking
//              (MPI_Allreduce per bucket after backward) or overlapped (the libnbc-like
//              Rabenseifner schedule, one round per progress call, polled every poll interval
//              of compute and after each layer, reductions charged to the caller); writes the
//              timeline CSV of step_replay.h. --check-sums runs it on real data and checks every
//              bucket's sum on every rank.
// SMPI charges no time for the reductions inside its collectives nor for the compute of a
// rank unless told (SimGrid 3.32 does not charge it): reductions are charged explicitly here, at the
// reduction bandwidth (--reduce-gbps), and SMPI's automatic benchmarking is left off by run.sh.
#ifdef exit
#undef exit  // SMPI's exit() wrapper clashes with CLI11's App::exit; nothing here calls exit()
#endif
#include <CLI/CLI.hpp>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <string>
#include <vector>

#include "bench/at_scale/profile_args.h"
#include "bench/at_scale/step_replay.h"
#include "bench/mpi_world.h"
#include <hddp/distributed/buckets.h>
#include <hddp/kernels/check.h>
#ifndef HDDP_SMPI
#include <hddp/distributed/nbc_algorithm.h>
#endif

namespace {

using namespace hddp;

#ifdef HDDP_SMPI
constexpr bool kSimulated = true;
void compute(double seconds) {
  if (seconds > 0) smpi_execute_benched(seconds);
}
void* shared_alloc(size_t bytes) { return SMPI_SHARED_MALLOC(std::max<size_t>(bytes, 64)); }
void shared_free(void* p) { SMPI_SHARED_FREE(p); }
#else
constexpr bool kSimulated = false;
void compute(double seconds) {  // a spin: the rank is busy, as it would be computing
  const double end = MPI_Wtime() + seconds;
  while (MPI_Wtime() < end) {
  }
}
void* shared_alloc(size_t bytes) { return std::calloc(std::max<size_t>(bytes, 64), 1); }
void shared_free(void* p) { std::free(p); }
#endif

#define MPI_OK(call) hddp::bench::mpi_ok((call), #call)
using hddp::bench::max_over_ranks;

// SMPI runs the reductions of its collectives for real but charges them nothing; a no-op
// operation saves the host's time (SMPI's smpi/op-apply-cost). Real data (--check-sums) and a
// real MPI use MPI_SUM.
void noop(void*, void*, int*, MPI_Datatype*) {}

// Rank 0's output: a file, or stdout for "-".
void write_out(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    return;
  }
  std::ofstream f(path);
  f << text;
  HDDP_CHECK(f.good(), "cannot write '" << path << "'");
}

// ---- The libnbc-like schedule: one bucket's allreduce as Rabenseifner rounds ----
// Recursive halving (round k exchanges half of the current segment with rank ^ (P >> (k+1))
// and reduces what it keeps), then recursive doubling back. P must be a power of two.
// advance() moves at most one round, as libnbc does per progress call.
class Rabenseifner {
 public:
  Rabenseifner(float* data, float* tmp, int64_t n, bool real_data, double reduce_bw)
      : data_(data), tmp_(tmp), n_(n), real_(real_data), bw_(reduce_bw), rank_(hddp::bench::world_rank()),
        p_(hddp::bench::world_size()) {
    while ((1 << steps_) < p_) ++steps_;
    HDDP_CHECK((1 << steps_) == p_, "the libnbc-like schedule needs a power-of-two number of ranks, got " << p_);
    seg_.push_back({0, n_});
  }
  // Posts round 0. Returns true when there is nothing to do (one rank, or an empty bucket).
  bool start() {
    if (p_ == 1 || n_ == 0) return done_ = true;
    post();
    return false;
  }
  // One progress call: if the round's messages are complete, finish it (reduction) and post
  // the next. Blocks in MPI_Waitall when `wait`. Returns true when the allreduce is complete.
  bool advance(bool wait) {
    if (done_) return true;
    int flag = 1;
    if (wait) MPI_OK(MPI_Waitall(2, req_, MPI_STATUSES_IGNORE));
    else MPI_OK(MPI_Testall(2, req_, &flag, MPI_STATUSES_IGNORE));
    if (!flag) return false;
    if (round_ < steps_) {  // halving: reduce the received half into the kept one
      const Seg keep = seg_.back();
      if (real_)
        for (int64_t i = 0; i < keep.size(); ++i) data_[keep.lo + i] += tmp_[i];
      compute(double(keep.size()) * sizeof(float) / bw_);
    }
    if (++round_ == 2 * steps_) return done_ = true;
    post();
    return false;
  }

 private:
  struct Seg {
    int64_t lo = 0, hi = 0;
    int64_t size() const { return hi - lo; }
  };
  void post() {
    const int tag = 7000 + round_;
    if (round_ < steps_) {  // halving round: keep one half of the segment, send the other
      const int mask = p_ >> (round_ + 1), partner = rank_ ^ mask;
      const Seg s = seg_.back();
      const int64_t mid = s.lo + s.size() / 2;
      const bool low = (rank_ & mask) == 0;
      const Seg keep = low ? Seg{s.lo, mid} : Seg{mid, s.hi}, give = low ? Seg{mid, s.hi} : Seg{s.lo, mid};
      seg_.push_back(keep);
      MPI_OK(MPI_Irecv(tmp_, int(keep.size()), MPI_FLOAT, partner, tag, MPI_COMM_WORLD, &req_[0]));
      MPI_OK(MPI_Isend(data_ + give.lo, int(give.size()), MPI_FLOAT, partner, tag, MPI_COMM_WORLD, &req_[1]));
    } else {  // doubling round: send the part this rank owns, receive the partner's
      const int k = 2 * steps_ - 1 - round_, mask = p_ >> (k + 1), partner = rank_ ^ mask;
      const Seg mine = seg_.back();
      seg_.pop_back();
      const Seg whole = seg_.back();
      const Seg theirs = mine.lo == whole.lo ? Seg{mine.hi, whole.hi} : Seg{whole.lo, mine.lo};
      MPI_OK(MPI_Irecv(data_ + theirs.lo, int(theirs.size()), MPI_FLOAT, partner, tag, MPI_COMM_WORLD, &req_[0]));
      MPI_OK(MPI_Isend(data_ + mine.lo, int(mine.size()), MPI_FLOAT, partner, tag, MPI_COMM_WORLD, &req_[1]));
    }
  }
  float* data_;
  float* tmp_;
  int64_t n_;
  bool real_;
  double bw_;
  int rank_, p_, steps_ = 0, round_ = 0;
  bool done_ = false;
  std::vector<Seg> seg_;  // the segment owned after each halving round
  MPI_Request req_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

// ---- allreduce ----
int run_allreduce(int64_t min_bytes, int64_t max_bytes, int reps, double reduce_bw, const std::string& out) {
  const int rank = hddp::bench::world_rank(), p = hddp::bench::world_size();
  const int64_t n_max = max_bytes / int64_t(sizeof(float));
  float* send = static_cast<float*>(shared_alloc(size_t(max_bytes)));
  float* recv = static_cast<float*>(shared_alloc(size_t(max_bytes)));
  float* tmp = static_cast<float*>(shared_alloc(size_t(max_bytes / 2 + 64)));
  MPI_Op op = MPI_SUM;
  if (kSimulated) MPI_OK(MPI_Op_create(&noop, 1, &op));
#ifndef HDDP_SMPI
  // libnbc's rabenseifner for the MPI_Iallreduce rows, as the reducer sets it; set once, out
  // of the timed calls (MPI_T's set-up costs ~0.2 s).
  NbcAlgorithm algorithm;
  algorithm.set(kNbcRabenseifner);
#endif
  char line[160];
  std::string csv = std::string(kAllreduceTableHeader) + "\n";
  for (const char* kind : {"allreduce", "iallreduce"}) {
    for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
      const int64_t n = std::min(n_max, bytes / int64_t(sizeof(float)));
      std::vector<double> t;
      for (int r = 0; r < reps + 1; ++r) {  // the first is a warm-up
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        const double t0 = MPI_Wtime();
        if (std::strcmp(kind, "allreduce") == 0) {
          // In place on a real MPI, as the reducer calls it; SMPI makes a private copy per
          // in-place call (measured), so the simulation uses two buffers.
          MPI_OK(MPI_Allreduce(kSimulated ? static_cast<const void*>(send) : MPI_IN_PLACE, recv, int(n), MPI_FLOAT, op,
                               MPI_COMM_WORLD));
        } else if (kSimulated) {
          Rabenseifner s(recv, tmp, n, false, reduce_bw);  // network only: reduce_bw charges below
          if (!s.start())
            while (!s.advance(true)) {
            }
        } else {
#ifndef HDDP_SMPI
          MPI_Request req;
          MPI_OK(MPI_Iallreduce(MPI_IN_PLACE, recv, int(n), MPI_FLOAT, op, MPI_COMM_WORLD, &req));
          MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
#endif
        }
        if (r > 0) t.push_back(max_over_ranks(MPI_Wtime() - t0));
      }
      std::sort(t.begin(), t.end());
      // Simulated: the schedule charged its reductions through compute(); the table keeps
      // network time only (reduction_charged 0), so the replay adds them once.
      double s = t[t.size() / 2];
      if (kSimulated && std::strcmp(kind, "iallreduce") == 0) {
        s = std::max(s - rabenseifner_reduced(n * int64_t(sizeof(float)), p) / reduce_bw, 1e-12);
      }
      std::snprintf(line, sizeof line, "%s,%d,%lld,%.9g,%d\n", kind, p, (long long)(n * int64_t(sizeof(float))), s,
                    kSimulated ? 0 : 1);
      csv += line;
    }
  }
  if (op != MPI_SUM) MPI_OK(MPI_Op_free(&op));
  shared_free(send), shared_free(recv), shared_free(tmp);
  if (rank == 0) write_out(out, csv);
  return 0;
}

// ---- step ----
struct StepArgs {
  ProfileArgs profile;
  std::string mode = "overlapped", out = "-";
  double cap_mib = 25, first_cap_mib = 1, poll_us = 50, reduce_gbps = 10;
  int steps = 2;
  bool check_sums = false;
};

int run_step(const StepArgs& a) {
  const int rank = hddp::bench::world_rank(), p = hddp::bench::world_size();
  const ModelProfile m = load_profile(a.profile);
  const double bw = a.reduce_gbps * 1e9, poll = a.poll_us * 1e-6;
  const int64_t cap = int64_t(a.cap_mib * 1048576), first_cap = int64_t(a.first_cap_mib * 1048576);
  const std::vector<Bucket> buckets = assign_buckets(profile_layout(m), sizeof(float), cap, first_cap);
  const int64_t n = m.num_params();
  int64_t largest = 0;
  for (const Bucket& b : buckets) largest = std::max(largest, b.size());
  HDDP_CHECK(largest <= INT32_MAX, "a bucket holds more than 2^31 floats: lower --cap-mib");
  const bool overlapped = a.mode == "overlapped";
  // Real data: every rank's private buffers, gradients g_i = (rank + 1) + (i % 5), whose sum
  // over ranks is P (P + 1) / 2 + P (i % 5), exact in float for the P tested.
  float* grads = a.check_sums ? static_cast<float*>(std::calloc(size_t(n), sizeof(float)))
                              : static_cast<float*>(shared_alloc(size_t(n) * sizeof(float)));
  float* tmp = a.check_sums ? static_cast<float*>(std::calloc(size_t(largest / 2 + 16), sizeof(float)))
                            : static_cast<float*>(shared_alloc(size_t(largest / 2 + 16) * sizeof(float)));
  float* send = a.check_sums || overlapped ? nullptr : static_cast<float*>(shared_alloc(size_t(largest) * sizeof(float)));
  MPI_Op op = MPI_SUM;
  if (kSimulated && !a.check_sums) MPI_OK(MPI_Op_create(&noop, 1, &op));

  // The hook's ready offsets: after layer i, every gradient at >= the layer's first offset.
  std::vector<int64_t> first(m.layers.size());
  for (size_t i = 0, off = 0; i < m.layers.size(); ++i) {
    first[i] = int64_t(off);
    for (int64_t x : m.layers[i].params) off += size_t(x);
  }
  StepTimeline line;
  for (int step = 0; step < a.steps; ++step) {
    if (a.check_sums)
      for (int64_t i = 0; i < n; ++i) grads[i] = float(rank + 1 + int(i % 5));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    const double t0 = MPI_Wtime();
    double fwd = 0, first_launch = -1, last_complete = 0;
    for (const LayerProfile& l : m.layers) fwd += l.forward;
    compute(fwd);
    std::deque<Rabenseifner> flight;  // launched, not complete; only the front advances
    size_t launched = 0;
    auto launch_ready = [&](int64_t ready_from) {
      while (launched < buckets.size() && buckets[launched].begin >= ready_from) {
        const Bucket& b = buckets[launched++];
        flight.emplace_back(grads + b.begin, tmp, b.size(), a.check_sums, bw);
        if (first_launch < 0) first_launch = MPI_Wtime() - t0;
        if (flight.size() == 1 && flight.front().start()) flight.pop_front(), last_complete = MPI_Wtime() - t0;
      }
    };
    auto progress = [&](bool wait) {  // one MPI call: the front bucket advances one round
      if (flight.empty() || !flight.front().advance(wait)) return;
      flight.pop_front();
      last_complete = MPI_Wtime() - t0;
      while (!flight.empty() && flight.front().start()) flight.pop_front();
    };
    const double bwd_start = MPI_Wtime();
    int64_t ready = n;
    for (size_t i = m.layers.size(); i-- > 0;) {
      double remaining = m.layers[i].backward;
      if (!overlapped) compute(remaining), remaining = 0;
      while (remaining > 0) {
        if (flight.empty()) {
          compute(remaining);
          break;
        }
        const double c = std::min(poll, remaining);
        compute(c), remaining -= c;
        if (remaining > 0 || c == poll) progress(false);  // a poll falls at the chunk's end
      }
      if (!m.layers[i].params.empty()) ready = first[i];
      if (overlapped) {
        launch_ready(ready);
        progress(false);  // the hook's MPI_Test
      }
    }
    line.backward_stretched = MPI_Wtime() - bwd_start;
    if (overlapped) {
      launch_ready(0);
      while (!flight.empty()) progress(true);
    } else if (p > 1) {
      first_launch = MPI_Wtime() - t0;
      for (const Bucket& b : buckets) {
        const int64_t bytes = b.size() * int64_t(sizeof(float));
        MPI_OK(MPI_Allreduce(a.check_sums ? MPI_IN_PLACE : static_cast<const void*>(send), grads + b.begin,
                             int(b.size()), MPI_FLOAT, op, MPI_COMM_WORLD));
        // SMPI charged nothing for the reduction, a real MPI did; then the averaging pass.
        const double reduced = kSimulated ? rabenseifner_reduced(bytes, p) : 0.0;
        compute((reduced + (p > 2 ? double(bytes) : 0.0)) / bw);
      }
      last_complete = MPI_Wtime() - t0;
    }
    if (overlapped && p > 2)  // the averaging pass over the arena (the reducer's finish())
      compute(double(n) * sizeof(float) / bw);
    compute(m.other);
    line.step = max_over_ranks(MPI_Wtime() - t0);
    line.backward_stretched = max_over_ranks(line.backward_stretched);
    line.comm_span = max_over_ranks(first_launch < 0 ? 0.0 : last_complete - first_launch);
    if (a.check_sums && p > 1) {  // every element on every rank: P (P + 1) / 2 + P (i % 5)
      int64_t bad = -1;
      for (int64_t i = 0; i < n && bad < 0; ++i)
        if (grads[i] != float(p * (p + 1) / 2 + p * int(i % 5))) bad = i;
      const double worst = max_over_ranks(double(bad));
      HDDP_CHECK(worst < 0, "rank " << rank << ": wrong sum at element " << (bad < 0 ? int64_t(worst) : bad)
                                    << " after step " << step);
    }
  }
  line.num_buckets = buckets.size();
  for (const LayerProfile& l : m.layers) line.forward += l.forward, line.backward += l.backward;
  line.other = m.other;
  line.exposed = line.step - line.compute();
  if (rank == 0)
    write_out(a.out, std::string(kTimelineCsvHeader) + "\n" +
                         timeline_csv_row(m.name, p, overlapped ? "overlapped" : "blocking", cap,
                                          std::min(first_cap, cap), line));
  if (op != MPI_SUM) MPI_OK(MPI_Op_free(&op));
  if (a.check_sums) std::free(grads), std::free(tmp);
  else shared_free(grads), shared_free(tmp);
  if (send) shared_free(send);
  return 0;
}

int run(int argc, char** argv) {
  CLI::App app(kSimulated ? "at_scale_sim: allreduce tables and the reducer's step on a simulated cluster (SimGrid SMPI)"
                          : "at_scale_mpi: allreduce tables and the reducer's step on this MPI (see bench/at_scale/README.md)");
  app.require_subcommand(1);
  std::string out = "-";
  int reps = kSimulated ? 1 : 20;
  double max_mib = 64, min_kib = 4, reduce_gbps = 10;
  CLI::App* ar = app.add_subcommand("allreduce", "the allreduce table: " + std::string(kAllreduceTableHeader));
  ar->add_option("--min-kib", min_kib, "smallest message (KiB); sizes grow 4x")->capture_default_str()->check(CLI::PositiveNumber);
  ar->add_option("--max-mib", max_mib, "largest message (MiB)")->capture_default_str()->check(CLI::PositiveNumber);
  ar->add_option("--reps", reps, "timed repetitions per size (median)")->capture_default_str()->check(CLI::PositiveNumber);
  ar->add_option("--reduce-gbps", reduce_gbps, "reduction bandwidth charged by the simulated schedule (GB/s)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  ar->add_option("--out", out, "CSV file, - for stdout")->capture_default_str();
  StepArgs sa;
  CLI::App* st = app.add_subcommand("step", "the reducer's step over a model profile: the timeline CSV");
  add_profile_options(*st, sa.profile);
  st->add_option("--mode", sa.mode, "blocking | overlapped")->capture_default_str()->check(CLI::IsMember({"blocking", "overlapped"}));
  st->add_option("--cap-mib", sa.cap_mib, "bucket cap (MiB)")->capture_default_str()->check(CLI::PositiveNumber);
  st->add_option("--first-cap-mib", sa.first_cap_mib, "first bucket's cap (MiB)")->capture_default_str()->check(CLI::PositiveNumber);
  st->add_option("--poll-us", sa.poll_us, "compute between MPI_Test calls (us)")->capture_default_str()->check(CLI::PositiveNumber);
  st->add_option("--reduce-gbps", sa.reduce_gbps, "reduction bandwidth on the compute thread (GB/s)")->capture_default_str()->check(CLI::PositiveNumber);
  st->add_option("--steps", sa.steps, "steps (the last is reported)")->capture_default_str()->check(CLI::PositiveNumber);
  st->add_flag("--check-sums", sa.check_sums, "real data: check every bucket's sum on every rank");
  st->add_option("--out", sa.out, "CSV file, - for stdout")->capture_default_str();
  if (const int rc = parse_args(app, argc, argv); rc >= 0) return rc;
  try {
    if (*ar) return run_allreduce(int64_t(min_kib * 1024), int64_t(max_mib * 1048576), reps, reduce_gbps * 1e9, out);
    return run_step(sa);
  } catch (const ProfileArgsError& e) {
    std::fprintf(stderr, "at_scale: %s\n", e.what());
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  try {
    rc = run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "at_scale: rank %d: %s\n", hddp::bench::world_rank(), e.what());
    rc = 1;
  }
  // Bad input is found identically on every rank (same arguments, same files), so every rank
  // returns the same code; a failure on one rank alone ends the job. Under SMPI every rank is
  // a thread of the one simulator process, and smpirun exits 0 after MPI_Abort: end the
  // process itself with the code.
  if (rc == 1) {
#ifdef HDDP_SMPI
    std::fflush(nullptr);
    std::_Exit(1);
#else
    MPI_Abort(MPI_COMM_WORLD, 1);
#endif
  }
  MPI_Finalize();
  return rc;
}
