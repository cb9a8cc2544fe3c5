// at_scale_comm_check: the communication model checked against the real reducer.
//
// On P ranks of this MPI, in R interleaved rounds, every round measures:
//   compute   the model's compute alone: a spin per layer (forward, then backward in reverse)
//   steps     for every bucket cap, the reducer's step (distributed/reducer.h) over the same spin
//             compute, in Blocking and in Test mode (MPI_Test every poll interval of compute and
//             after each layer, as the GEMM hook and the layer hook do in training)
//   table     at every bucket size those caps produce, the calls the reducer makes: MPI_Allreduce
//             in place, and libnbc's rabenseifner MPI_Iallreduce in place + MPI_Wait
//   reduce    float a += b over the largest bucket (the reduction bandwidth)
// Each figure is the slowest rank's, kept per round. Then the replay (bench/at_scale/step_replay.h)
// of the same steps from that table and bandwidth, and
//   measured communication = step - compute  (blocking: the whole allreduce time; Test mode:
//                                             the exposed time)
//   replayed communication = the replay's exposed time
// Every figure is paired with the others of its round: the replay of round r uses round r's
// table, bandwidth and compute, and the reported ratio is the median over rounds. Rank 0 writes
// one row per (cap, mode) and, with --raw-out, every round's measurements as JSON; --from-raw
// re-checks such a file with this build's replay, without MPI (tests/bench/test_comm_model.sh
// checks the kept ones: a change to the model that the measurements contradict fails there).
// Exit 1 when a median ratio replayed / measured is outside 1 +- --tolerance (each such row
// named), 2 on bad input.
// The compute is a spin, not a GEMM: it is known exactly, the same on every rank, and it makes
// the configuration as communication-bound as --compute-ms says.
#include <CLI/CLI.hpp>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/at_scale/profile_args.h"
#include "bench/at_scale/step_replay.h"
#include "bench/mpi_world.h"
#include <hddp/core/util.h>
#include <hddp/kernels/cpu_isa.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/nbc_algorithm.h>
#include <hddp/distributed/reduction_op.h>
#include <hddp/distributed/reducer.h>

namespace {

using namespace hddp;

void spin(double seconds) {  // busy, as the rank would be computing
  const double end = MPI_Wtime() + seconds;
  while (MPI_Wtime() < end) {
  }
}

// `seconds` of compute; with a reducer, progress() every poll interval of it (the time inside
// progress() is not compute: it stretches the step, as MPI_Test does in training).
void compute(double seconds, Reducer* red, double poll) {
  while (seconds > 0) {
    const double chunk = red ? std::min(seconds, poll) : seconds;
    spin(chunk);
    seconds -= chunk;
    if (red) red->progress();
  }
}

double slowest(double t) { return hddp::bench::max_over_ranks(t); }

// One step: forward, then backward layer by layer in reverse with the reducer's hook after
// each layer (grads_ready_from the layer's first parameter), then finish(). Without a reducer:
// the compute alone. Returns the slowest rank's seconds.
double step(const ModelProfile& m, const std::vector<int64_t>& first_param, Reducer* red, double poll) {
  HDDP_MPI(MPI_Barrier(MPI_COMM_WORLD));
  const double t0 = MPI_Wtime();
  for (const LayerProfile& l : m.layers) compute(l.forward, nullptr, poll);
  if (red) red->begin_step();
  for (size_t i = m.layers.size(); i-- > 0;) {
    compute(m.layers[i].backward, red, poll);
    if (red) red->grads_ready_from(first_param[i]);
  }
  if (red) red->finish();
  return slowest(MPI_Wtime() - t0);
}

// One table entry: the call the reducer makes for a bucket of n floats, with its op and, for
// MPI_Iallreduce, libnbc's rabenseifner set right before the call as the reducer sets it (a
// reducer's own launch restores libnbc's choice after it: set once, the table measured the
// binomial tree after the first reducer step). The slowest rank's seconds.
double allreduce_once(bool nonblocking, float* buf, int64_t n, MPI_Op op, NbcAlgorithm& algorithm) {
  if (nonblocking) algorithm.set(kNbcRabenseifner);
  HDDP_MPI(MPI_Barrier(MPI_COMM_WORLD));
  const double t0 = MPI_Wtime();
  if (nonblocking) {
    MPI_Request req;
    HDDP_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, int(n), MPI_FLOAT, op, MPI_COMM_WORLD, &req));
    HDDP_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
  } else {
    HDDP_MPI(MPI_Allreduce(MPI_IN_PLACE, buf, int(n), MPI_FLOAT, op, MPI_COMM_WORLD));
  }
  return slowest(MPI_Wtime() - t0);
}

double add_seconds(std::vector<float>& a, const std::vector<float>& b) {
  const double t0 = MPI_Wtime();
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return MPI_Wtime() - t0;
}

struct Config {
  ProfileArgs profile;
  std::vector<double> caps_mib{0.25, 1, 4};
  double first_cap_mib = 1, poll_us = 50, tolerance = 0.25;
  double network_scale = 1;  // a deliberate model error, for the test that the check can fail
  int rounds = 15;
  std::string out = "-", raw_out, from_raw;
};

// What one run measured, round by round (rounds.size() samples each): the verdict is computed
// from this alone, so a kept file re-checks the model without MPI (--from-raw).
struct Raw {
  std::string cpu, profile_csv;  // the profile in seconds (step_replay.h's CSV)
  int ranks = 0;
  bool shared_memory = false;
  double poll_us = 50, first_cap_mib = 1;
  int64_t add_bytes = 0;
  std::vector<double> compute, add;
  struct Step {
    std::string mode;  // blocking | overlapped
    int64_t cap = 0;
    std::vector<double> seconds;
  };
  std::vector<Step> steps;
  std::map<int64_t, std::vector<double>> allreduce, iallreduce;  // bytes -> seconds per round
};

void to_json(nlohmann::json& j, const Raw::Step& s) { j = {{"mode", s.mode}, {"cap_bytes", s.cap}, {"seconds", s.seconds}}; }
void from_json(const nlohmann::json& j, Raw::Step& s) {
  j.at("mode").get_to(s.mode), j.at("cap_bytes").get_to(s.cap), j.at("seconds").get_to(s.seconds);
}
nlohmann::json rows_json(const std::map<int64_t, std::vector<double>>& rows) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [bytes, t] : rows) j.push_back({{"bytes", bytes}, {"seconds", t}});
  return j;
}
std::map<int64_t, std::vector<double>> rows_of(const nlohmann::json& j) {
  std::map<int64_t, std::vector<double>> rows;
  for (const auto& r : j) rows[r.at("bytes").get<int64_t>()] = r.at("seconds").get<std::vector<double>>();
  return rows;
}
std::string raw_json(const Raw& r) {
  nlohmann::json j = {{"format", "hddp-comm-check-1"}, {"cpu", r.cpu}, {"ranks", r.ranks},
                      {"shared_memory", r.shared_memory}, {"poll_us", r.poll_us}, {"first_cap_mib", r.first_cap_mib},
                      {"profile_csv", r.profile_csv}, {"add_bytes", r.add_bytes}, {"compute_seconds", r.compute},
                      {"add_seconds", r.add}, {"steps", r.steps}, {"allreduce", rows_json(r.allreduce)},
                      {"iallreduce", rows_json(r.iallreduce)}};
  return j.dump(1) + "\n";
}
Raw read_raw(const std::string& path) {
  try {
    const nlohmann::json j = nlohmann::json::parse(read_file(path));
    HDDP_CHECK(j.at("format") == "hddp-comm-check-1", "not an at_scale_comm_check raw file (format " << j.at("format") << ")");
    Raw r;
    j.at("cpu").get_to(r.cpu), j.at("ranks").get_to(r.ranks), j.at("shared_memory").get_to(r.shared_memory);
    j.at("poll_us").get_to(r.poll_us), j.at("first_cap_mib").get_to(r.first_cap_mib);
    j.at("profile_csv").get_to(r.profile_csv), j.at("add_bytes").get_to(r.add_bytes);
    j.at("compute_seconds").get_to(r.compute), j.at("add_seconds").get_to(r.add), j.at("steps").get_to(r.steps);
    r.allreduce = rows_of(j.at("allreduce")), r.iallreduce = rows_of(j.at("iallreduce"));
    const size_t n = r.compute.size();
    bool same = n > 0 && r.add.size() == n && !r.steps.empty() && !r.allreduce.empty() && r.ranks >= 2;
    for (const auto& s : r.steps) same = same && s.seconds.size() == n;
    for (const auto* rows : {&r.allreduce, &r.iallreduce})
      for (const auto& [bytes, t] : *rows) same = same && t.size() == n;
    HDDP_CHECK(same, "every series must have one value per round, and 2 or more ranks");
    return r;
  } catch (const std::exception& e) {
    throw ProfileArgsError(path + ": " + e.what());
  }
}

// ---- Measuring (MPI) ----

Raw measure(const Config& c) {
  const ModelProfile m = load_profile(c.profile);
  const std::vector<ParamSlice> layout = profile_layout(m);
  std::vector<int64_t> first_param(m.layers.size());
  int64_t n = 0;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    first_param[i] = n;
    for (int64_t p : m.layers[i].params) n += p;
  }
  Raw raw;
  raw.cpu = detail::cpu_model_key(), raw.profile_csv = model_profile_csv(m);
  raw.poll_us = c.poll_us, raw.first_cap_mib = c.first_cap_mib;
  MPI_Comm_size(MPI_COMM_WORLD, &raw.ranks);
  // Every rank on one host: Open MPI moves the messages through shared memory, by CPU copies
  // inside the MPI calls (ReplayOptions::transfers_on_caller).
  MPI_Comm node;
  HDDP_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int here = 0;
  MPI_Comm_size(node, &here);
  MPI_Comm_free(&node);
  raw.shared_memory = here == raw.ranks;
  const double poll = c.poll_us * 1e-6;
  std::vector<float> grads(size_t(n), 1.0f);

  // One reducer per (cap, mode); the table's sizes are every bucket they make.
  std::vector<std::unique_ptr<Reducer>> reducers;
  for (double mib : c.caps_mib) {
    for (ReduceMode mode : {ReduceMode::Blocking, ReduceMode::Test}) {
      ReducerOptions o;
      o.bucket_cap_bytes = int64_t(mib * 1048576);
      o.first_bucket_cap_bytes = std::min(o.bucket_cap_bytes, int64_t(c.first_cap_mib * 1048576));
      o.mode = mode, o.poll_interval_us = c.poll_us;
      reducers.push_back(std::make_unique<Reducer>(MPI_COMM_WORLD, grads.data(), n, layout, o));
      raw.steps.push_back({mode == ReduceMode::Blocking ? "blocking" : "overlapped", o.bucket_cap_bytes, {}});
      for (const Bucket& b : reducers.back()->buckets()) raw.allreduce[b.size() * 4], raw.iallreduce[b.size() * 4];
    }
  }
  const int64_t largest = raw.allreduce.rbegin()->first / 4;
  raw.add_bytes = largest * 4;
  std::vector<float> buf(size_t(largest), 1.0f), a(size_t(largest), 1.0f), b(size_t(largest), 0.5f);
  MPI_Op op = make_reduction_op(raw.ranks);  // the reducer's: with 2 ranks the mean of two
  NbcAlgorithm algorithm;  // libnbc's rabenseifner for the table's MPI_Iallreduce calls (allreduce_once)

  for (int r = 0; r <= c.rounds; ++r) {  // round 0 warms up
    const bool keep = r > 0;
    const double tc = step(m, first_param, nullptr, poll);
    if (keep) raw.compute.push_back(tc);
    for (size_t k = 0; k < reducers.size(); ++k) {
      const double t = step(m, first_param, reducers[k].get(), poll);
      if (keep) raw.steps[k].seconds.push_back(t);
    }
    for (auto& [bytes, t] : raw.allreduce) {
      const double s = allreduce_once(false, buf.data(), bytes / 4, op, algorithm);
      if (keep) t.push_back(s);
    }
    for (auto& [bytes, t] : raw.iallreduce) {
      const double s = allreduce_once(true, buf.data(), bytes / 4, op, algorithm);
      if (keep) t.push_back(s);
    }
    const double s = slowest(add_seconds(a, b));
    if (keep) raw.add.push_back(s);
  }
  free_reduction_op(op);
  return raw;
}

// ---- The verdict (no MPI) ----

// Round by round: that round's table and bandwidth, the replay of that round's steps, and the
// ratio replayed / measured; the medians over rounds are reported. Pairing each step with the
// table measured beside it keeps a busy machine's slow seconds out of the ratio. Returns the
// CSV; `off` gets a line per row outside 1 +- tolerance.
std::string verdict(const Raw& raw, const Config& c, std::vector<std::string>& off) {
  const ModelProfile m = parse_model_profile(raw.profile_csv, "<raw profile>");
  const size_t rounds = raw.compute.size();
  auto table_of = [&](size_t r) {
    std::string table = std::string(kAllreduceTableHeader) + "\n";
    char row[160];
    for (const auto& [op, rows] : {std::pair{"allreduce", &raw.allreduce}, std::pair{"iallreduce", &raw.iallreduce}})
      for (const auto& [bytes, t] : *rows) {
        std::snprintf(row, sizeof row, "%s,%d,%lld,%.9g,1\n", op, raw.ranks, (long long)bytes, t[r] * c.network_scale);
        table += row;
      }
    return table;
  };
  char line[320];
  std::string csv =
      "cpu,ranks,mode,cap_bytes,first_cap_bytes,buckets,compute_ms,measured_step_ms,measured_comm_ms,replay_comm_ms,"
      "ratio,ratio_min,ratio_max,reduce_gbps,transfers_on_caller,rounds\n";
  for (const Raw::Step& k : raw.steps) {
    std::vector<double> measured, replayed, ratio;
    ReplayOptions o;
    o.ranks = raw.ranks, o.cap_bytes = k.cap;
    o.first_cap_bytes = std::min(k.cap, int64_t(raw.first_cap_mib * 1048576));
    o.poll_interval = raw.poll_us * 1e-6, o.transfers_on_caller = raw.shared_memory;
    if (raw.shared_memory) o.overlapped_op = "allreduce";  // see ReplayOptions::transfers_on_caller
    StepTimeline s;
    for (size_t r = 0; r < rounds; ++r) {
      ModelProfile replayed_m = m;
      profile_scale_to(replayed_m, raw.compute[r]);  // the spin's real duration, overheads included
      o.reduce_bandwidth = double(raw.add_bytes) / raw.add[r];
      const AllreduceTable t = parse_allreduce_table(table_of(r), "<measured table>");
      s = k.mode == "blocking" ? replay_blocking(replayed_m, t, o) : replay_overlapped(replayed_m, t, o);
      measured.push_back(std::max(k.seconds[r] - raw.compute[r], 1e-9));
      replayed.push_back(s.exposed), ratio.push_back(s.exposed / measured.back());
    }
    const double q = median(ratio);
    std::snprintf(line, sizeof line, "\"%s\",%d,%s,%lld,%lld,%zu,%.4f,%.4f,%.4f,%.4f,%.3f,%.3f,%.3f,%.3f,%d,%zu\n",
                  raw.cpu.c_str(), raw.ranks, k.mode.c_str(), (long long)k.cap, (long long)o.first_cap_bytes,
                  s.num_buckets, median(raw.compute) * 1e3, median(k.seconds) * 1e3, median(measured) * 1e3,
                  median(replayed) * 1e3, q, *std::min_element(ratio.begin(), ratio.end()),
                  *std::max_element(ratio.begin(), ratio.end()), double(raw.add_bytes) / median(raw.add) * 1e-9,
                  int(raw.shared_memory), rounds);
    csv += line;
    if (std::fabs(q - 1) > c.tolerance) {
      std::snprintf(line, sizeof line, "%d ranks, %s, cap %lld B: replay %.3f ms, measured %.3f ms (median ratio %.2f)",
                    raw.ranks, k.mode.c_str(), (long long)k.cap, median(replayed) * 1e3, median(measured) * 1e3, q);
      off.push_back(line);
    }
  }
  return csv;
}

// Writes the verdict (and the raw file); 0 when every row is within the tolerance, else 1.
int report(const Raw& raw, const Config& c) {
  std::vector<std::string> off;
  const std::string csv = verdict(raw, c, off);
  if (c.out == "-") std::fputs(csv.c_str(), stdout);
  else write_file_atomic(c.out, csv);
  if (!c.raw_out.empty()) write_file_atomic(c.raw_out, raw_json(raw));
  for (const std::string& o : off)
    std::fprintf(stderr, "at_scale_comm_check: communication model off by more than %.0f %%: %s\n", c.tolerance * 100,
                 o.c_str());
  return off.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app("at_scale_comm_check: the replay's communication against the reducer's, measured on this MPI "
               "(bench/at_scale/README.md, \"Validation\")");
  add_profile_options(app, c.profile);
  app.get_option("--profile")->required(false);  // not with --from-raw
  app.add_option("--caps-mib", c.caps_mib, "bucket caps (MiB), one reducer each")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->delimiter(',');
  app.add_option("--first-cap-mib", c.first_cap_mib, "first bucket's cap (MiB)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--poll-us", c.poll_us, "compute between MPI_Test calls (us)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--rounds", c.rounds, "interleaved rounds (medians)")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--tolerance", c.tolerance, "exit 1 when replayed / measured is outside 1 +- this")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10.0));
  app.add_option("--network-scale", c.network_scale, "multiply the measured table by this before the replay (a model "
                 "error on purpose: the check must then fail)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--out", c.out, "CSV, - for stdout")->capture_default_str();
  app.add_option("--raw-out", c.raw_out, "every round's measurements (JSON): --from-raw re-checks them");
  app.add_option("--from-raw", c.from_raw, "re-check a kept raw file with this build's replay (no MPI, no measuring)");
  // Every rank parses (the same argv): bad input exits 2 everywhere, before MPI starts.
  if (const int rc = parse_args(app, argc, argv); rc >= 0) return rc;
  try {
    if (!c.from_raw.empty()) return report(read_raw(c.from_raw), c);
    if (c.profile.path.empty()) {
      std::fprintf(stderr, "at_scale_comm_check: give --profile (to measure) or --from-raw (to re-check)\n");
      return 2;
    }
    mpi::Env env(&argc, &argv, MPI_THREAD_FUNNELED);
    if (env.size() < 2) {
      if (env.root()) std::fprintf(stderr, "at_scale_comm_check: needs 2 or more ranks (mpiexec -n 2 ...)\n");
      return 2;
    }
    const Raw raw = measure(c);
    // The same medians on every rank: the exit code is the same everywhere; rank 0 writes.
    std::vector<std::string> off;
    verdict(raw, c, off);
    if (!env.root()) return off.empty() ? 0 : 1;
    return report(raw, c);
  } catch (const ProfileArgsError& e) {
    std::fprintf(stderr, "at_scale_comm_check: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "at_scale_comm_check: %s\n", e.what());
    if (c.from_raw.empty()) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}
