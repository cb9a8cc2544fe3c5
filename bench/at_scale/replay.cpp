// at_scale_replay: the reducer's step replayed at P nodes (bench/at_scale/step_replay.h) for a
// model profile and an allreduce table t(bytes, P); one CSV row per P and mode:
//   blocking          MPI_Allreduce per bucket after backward, at --cap-mib
//   overlapped        Test mode (libnbc-like rounds, one per MPI call) at --cap-mib
//   overlapped_best   Test mode at the best cap for that P (first cap min(cap, --first-cap-mib))
// Columns: bench/at_scale/step_replay.h kTimelineCsvHeader. Bad input: exit 2, the file and line named.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "bench/at_scale/profile_args.h"
#include "bench/at_scale/step_replay.h"
#include <hddp/core/util.h>

namespace {

using namespace hddp;

std::vector<int> parse_ranks(const std::string& s, const AllreduceTable& t, const ReplayOptions& o) {
  std::vector<int> ranks;
  if (s == "all") {
    for (int p : t.ranks(o.overlapped_op))
      if (t.has(o.blocking_op, p)) ranks.push_back(p);
    if (ranks.empty()) throw ProfileArgsError("the table has no rank count with both allreduce and iallreduce rows");
    return ranks;
  }
  std::istringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    int p = 0;
    try {
      p = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || p < 1) throw ProfileArgsError("--ranks: '" + item + "' is not a rank count >= 1");
    if (p > 1 && !(t.has(o.blocking_op, p) && t.has(o.overlapped_op, p)))
      throw ProfileArgsError("--ranks: the table has no allreduce and iallreduce rows at " + std::to_string(p) +
                             " ranks; give --ranks from the table (or all)");
    ranks.push_back(p);
  }
  return ranks;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("at_scale_replay: a training step replayed at P nodes from a model profile and an allreduce table "
               "(bench/at_scale/README.md)");
  ProfileArgs pa;
  std::string table_path, ranks_arg = "all", out = "-";
  double cap_mib = 25, first_cap_mib = 1, poll_us = 50, reduce_gbps = 10;
  bool no_best = false;
  add_profile_options(app, pa);
  app.add_option("--table", table_path, "allreduce table CSV: " + std::string(kAllreduceTableHeader))->required();
  app.add_option("--ranks", ranks_arg, "node counts, comma-separated, or all (every count in the table)")->capture_default_str();
  app.add_option("--cap-mib", cap_mib, "bucket cap (MiB)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--first-cap-mib", first_cap_mib, "first bucket's cap (MiB)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--poll-us", poll_us, "compute between MPI_Test calls (us)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--reduce-gbps", reduce_gbps, "reduction bandwidth on the compute thread (GB/s; at_scale_measure)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--no-best-cap", no_best, "skip the best-cap sweep");
  app.add_option("--out", out, "CSV file, - for stdout")->capture_default_str();
  app.set_config("--config", "", "TOML/INI file of these options (at_scale_measure --config-out writes one)");
  if (const int rc = parse_args(app, argc, argv); rc >= 0) return rc;
  try {
    ModelProfile m = load_profile(pa);
    AllreduceTable table;
    try {
      table = read_allreduce_table(table_path);
    } catch (const Error& e) {
      throw ProfileArgsError(e.what());
    }
    ReplayOptions o;
    o.cap_bytes = int64_t(cap_mib * 1048576), o.first_cap_bytes = int64_t(first_cap_mib * 1048576);
    o.poll_interval = poll_us * 1e-6, o.reduce_bandwidth = reduce_gbps * 1e9;
    std::string csv = std::string(kTimelineCsvHeader) + "\n";
    std::fprintf(stderr, "%-10s %6s %11s %11s %6s %11s %11s %6s %11s %11s\n", "model", "nodes", "compute_ms", "blocking_ms",
                 "eff", "overlap_ms", "exposed_ms", "eff", "best_cap", "best_ms");
    for (int p : parse_ranks(ranks_arg, table, o)) {
      o.ranks = p;
      const StepTimeline b = replay_blocking(m, table, o), v = replay_overlapped(m, table, o);
      const int64_t first = std::min(o.first_cap_bytes, o.cap_bytes);
      csv += timeline_csv_row(m.name, p, "blocking", o.cap_bytes, first, b);
      csv += timeline_csv_row(m.name, p, "overlapped", o.cap_bytes, first, v);
      BestCap best{o.cap_bytes, v};
      if (!no_best) {
        best = best_overlapped_cap(m, table, o);
        csv += timeline_csv_row(m.name, p, "overlapped_best", best.cap_bytes, std::min(o.first_cap_bytes, best.cap_bytes),
                                best.timeline);
      }
      std::fprintf(stderr, "%-10s %6d %11.4g %11.4g %5.1f%% %11.4g %11.4g %5.1f%% %11s %11.4g\n", m.name.c_str(), p,
                   b.compute() * 1e3, b.step * 1e3, 100 * b.efficiency(), v.step * 1e3, v.exposed * 1e3,
                   100 * v.efficiency(), format_bytes(best.cap_bytes).c_str(), best.timeline.step * 1e3);
    }
    if (out == "-") std::fputs(csv.c_str(), stdout);
    else write_file_atomic(out, csv);
  } catch (const ProfileArgsError& e) {
    std::fprintf(stderr, "at_scale_replay: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "at_scale_replay: %s\n", e.what());
    return 1;
  }
  return 0;
}
