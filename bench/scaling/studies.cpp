#include "studies.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include <hddp/core/util.h>
#include "common/options.h"
#include "plots.h"
#include "workers.h"

namespace scaling {

const char* to_string(Placement p) {
  const char* names[] = {"auto", "close", "none", "omp-only", "pcore"};
  return names[int(p)];
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (const std::string& x : v) s.append(s.empty() ? "" : sep).append(x);
  return s;
}
std::string join(const std::vector<int>& v) {
  std::vector<std::string> s;
  for (int x : v) s.push_back(std::to_string(x));
  return join(s);
}

Run Runner::worker(const std::string& kind, std::vector<std::string> args, int ranks, int threads, Placement pl,
                   std::string what) const {
  std::vector<std::string> argv = self_;
  argv.insert(argv.end(), {"--worker", kind});
  argv.insert(argv.end(), args.begin(), args.end());
  return {argv, ranks, threads, pl, std::move(what)};
}

Placement Runner::rank_placement(int P, int threads) const {
  if (o_.rank_placement != Placement::Auto) return o_.rank_placement;
  int nodes = 1;
  if (const char* n = std::getenv("SLURM_JOB_NUM_NODES")) nodes = std::max(1, std::atoi(n));
  return int64_t(P) * threads <= int64_t(available_cores()) * nodes ? Placement::Close : Placement::None;
}

std::vector<Row> Runner::run(const Run& r, const std::string& what) {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> set;
  std::vector<std::string> unset;
  const bool close = r.placement == Placement::Close || r.placement == Placement::Pcore;
  if (close || r.placement == Placement::OmpOnly) set.insert(set.end(), {{"OMP_PLACES", "cores"}, {"OMP_PROC_BIND", "close"}});
  else unset = {"OMP_PLACES", "OMP_PROC_BIND", "GOMP_CPU_AFFINITY"};
  set.emplace_back("OMP_NUM_THREADS", std::to_string(r.placement == Placement::Pcore ? r.threads - 1 : r.threads));
  if (r.ranks > 0) {
    argv = {o_.mpiexec, "-n", std::to_string(r.ranks)};
    if (close) argv.insert(argv.end(), {"--map-by", "slot:PE=" + std::to_string(r.threads), "--bind-to", "core"});
    else argv.insert(argv.end(), {"--oversubscribe", "--bind-to", "none"});
    for (const auto& [k, v] : set) argv.insert(argv.end(), {"-x", k});
    if (geteuid() == 0) set.insert(set.end(), {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}});
  }
  argv.insert(argv.end(), r.argv.begin(), r.argv.end());
  ProcResult p;
  const auto t0 = std::chrono::steady_clock::now();
  {
    const BenchLock::Held held = lock_.hold();
    load.add(load_average());
    p = run_process(argv, set, unset, o_.timeout);
  }
  if (p.timed_out || p.exit_code != 0) {
    std::string tail = p.err.size() > 3000 ? p.err.substr(p.err.size() - 3000) : p.err;
    if (tail.empty()) tail = p.out.size() > 2000 ? p.out.substr(p.out.size() - 2000) : p.out;
    throw Failure(what + ": " + (p.timed_out ? "timed out after " + fmt(o_.timeout, 4) + " s" : "exit code " + std::to_string(p.exit_code)) +
                  "\n  command: " + join(argv, " ") + "\n  output:\n" + tail);
  }
  std::printf("  %-60s %6.2f s\n", what.c_str(), hddp::seconds_since(t0));
  std::fflush(stdout);
  return parse_rows(p.out);
}

namespace {

// A CSV row from groups of cells.
std::vector<std::string> cells(std::initializer_list<std::vector<std::string>> groups) {
  std::vector<std::string> r;
  for (const auto& g : groups) r.insert(r.end(), g.begin(), g.end());
  return r;
}

// Every run of `runs` in o.reps interleaved rounds (reverse order on odd rounds); take(i, rows)
// receives run i's rows. The runner's load samples start afresh.
void sweep(Runner& run, const Options& o, const std::string& study, const std::vector<Run>& runs,
           const std::function<void(size_t, const std::vector<Row>&)>& take) {
  run.load = Samples{};
  for (int r = 0; r < o.reps; ++r)
    for (size_t k = 0; k < runs.size(); ++k) {
      const size_t i = r % 2 ? runs.size() - 1 - k : k;
      take(i, run.run(runs[i], study + " round " + std::to_string(r + 1) + "/" + std::to_string(o.reps) + ", " + runs[i].what));
    }
}

// Samples of named fields per key, and the first row seen with the key (in first-seen order).
template <class Key>
struct Collect {
  std::vector<Key> order;
  std::map<Key, Row> first;
  std::map<Key, std::map<std::string, Samples>> f;
  void add(const Key& k, const Row& row, std::initializer_list<const char*> fields) {
    if (first.emplace(k, row).second) order.push_back(k);
    for (const char* n : fields) f[k][n].add(num(row, n));
  }
};

// Speedup and efficiency against the smallest thread count t0 of each group (rows with the
// same group_cols): speedup(t) = t0 time(t0) / time(t).
void add_scaling(Table& t, const std::vector<std::string>& group_cols, const std::string& time_col = "time_s") {
  std::map<std::vector<std::string>, std::pair<double, double>> base;  // group -> (t0, time(t0))
  auto group = [&](size_t i) {
    std::vector<std::string> g;
    for (const std::string& c : group_cols) g.push_back(t.str(i, c));
    return g;
  };
  for (size_t i = 0; i < t.rows.size(); ++i) {
    auto [it, fresh] = base.try_emplace(group(i), t.num(i, "threads"), t.num(i, time_col));
    if (!fresh && t.num(i, "threads") < it->second.first) it->second = {t.num(i, "threads"), t.num(i, time_col)};
  }
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const auto it = base.find(group(i));
    if (it == base.end()) continue;
    const double s = it->second.first * it->second.second / t.num(i, time_col);
    t.rows[i][size_t(t.col("speedup"))] = fmt(s, 4);
    t.rows[i][size_t(t.col("efficiency"))] = fmt(s / t.num(i, "threads"), 4);
  }
}

// ---- the studies: runs, then the table of their medians ----

Table study_gemm(const Options& o, Runner& run) {
  std::printf("[gemm] %zu shapes x hddp/openblas, threads %s, %d round(s), placement %s\n", o.gemm_shapes.size(),
              join(o.threads).c_str(), o.reps, to_string(o.placement));
  std::vector<Run> runs;
  for (int t : o.threads)
    runs.push_back(run.worker("gemm", {"--shapes", join(o.gemm_shapes), "--min-time", fmt(o.min_time)}, 0, t, o.placement,
                              std::to_string(t) + " thread(s)"));
  Collect<std::tuple<std::string, std::string, int>> c;  // shape, backend, threads
  sweep(run, o, "gemm", runs, [&](size_t i, const std::vector<Row>& rows) {
    for (const Row& row : rows) {
      if (row.at("kind") != "gemm") continue;
      if (int(num(row, "threads")) != runs[i].threads)
        throw Failure("gemm worker ran " + row.at("threads") + " threads, asked for " + std::to_string(runs[i].threads));
      c.add({row.at("shape"), row.at("backend"), runs[i].threads}, row, {"time_s", "cpu_util"});
    }
  });
  Table tab{{"shape", "trans", "M", "N", "K", "backend", "placement", "threads", "reps", "time_s", "time_min_s",
             "time_max_s", "gflops", "speedup", "efficiency", "cpu_util", "load"}, {}};
  for (const auto& [k, r] : c.first) {  // by shape, backend, threads
    const Samples& time = c.f[k]["time_s"];
    const double flops = 2.0 * num(r, "M") * num(r, "N") * num(r, "K");
    tab.rows.push_back(cells({{r.at("shape"), r.at("trans"), r.at("M"), r.at("N"), r.at("K"), r.at("backend"),
                               to_string(o.placement), r.at("threads"), std::to_string(time.v.size())},
                              time.med_min_max(),
                              {fmt(flops / time.med() * 1e-9, 5), "", "", fmt(c.f[k]["cpu_util"].med(), 3), fmt(run.load.med(), 3)}}));
  }
  add_scaling(tab, {"shape", "backend", "placement"});
  return tab;
}

Table study_step(const Options& o, Runner& run) {
  std::printf("[step] 1-1024x3-1 MLP step, hddp/openblas GEMM, threads %s, %d round(s), placement %s\n",
              join(o.threads).c_str(), o.reps, to_string(o.placement));
  std::vector<Run> runs;
  for (int t : o.threads)
    runs.push_back(run.worker("step", {"--min-time", fmt(std::max(o.min_time, 0.01) * 1.5)}, 0, t, o.placement,
                              std::to_string(t) + " thread(s)"));
  Collect<std::tuple<std::string, int>> c;  // backend, threads
  sweep(run, o, "step", runs, [&](size_t i, const std::vector<Row>& rows) {
    for (const Row& row : rows)
      if (row.at("kind") == "step") c.add({row.at("backend"), runs[i].threads}, row, {"time_s", "cpu_util"});
  });
  Table tab{{"model", "backend", "placement", "threads", "reps", "time_s", "time_min_s", "time_max_s", "gflops",
             "speedup", "efficiency", "cpu_util", "load"}, {}};
  for (const std::string b : {"hddp", "openblas"})
    for (int t : o.threads) {
      if (!c.first.count({b, t})) throw Failure("step worker reported nothing for " + b + " at " + std::to_string(t) + " thread(s)");
      const Samples& time = c.f[{b, t}]["time_s"];
      tab.rows.push_back(cells({{"wide", b, to_string(o.placement), std::to_string(t), std::to_string(time.v.size())},
                                time.med_min_max(),
                                {fmt(num(c.first[{b, t}], "gflop") / time.med(), 5), "", "", fmt(c.f[{b, t}]["cpu_util"].med(), 3),
                                 fmt(run.load.med(), 3)}}));
    }
  add_scaling(tab, {"backend", "placement"});
  return tab;
}

// The data-parallel rows of one ddp worker run, averaged over its ranks, per cap.
std::map<std::string, Row> ddp_rank_means(const std::vector<Row>& rows) {
  std::map<std::string, std::vector<const Row*>> by_cap;
  for (const Row& r : rows)
    if (r.at("kind") == "ddp") by_cap[r.at("cap")].push_back(&r);
  std::map<std::string, Row> out;
  for (const auto& [cap, rs] : by_cap) {
    Row m = *rs.front();
    for (const char* f : {"forward_s", "backward_s", "optim_s", "step_s", "comm_s", "exposed_s"}) {
      double s = 0;
      for (const Row* r : rs) s += num(*r, f);
      m[f] = fmt(s / double(rs.size()), 6);
    }
    out[cap] = m;
  }
  return out;
}

// ranks.csv and buckets.csv: one row per (ranks, cap), medians over the rounds.
const std::vector<std::string> kDdpHeader = {
    "model", "ranks", "threads", "placement", "progress", "cap", "cap_bytes", "first_cap_bytes", "buckets", "reps",
    "steps", "step_s", "step_min_s", "step_max_s", "compute_s", "exposed_s", "exposed_min_s", "exposed_max_s", "comm_s",
    "forward_s", "backward_s", "optim_s", "predicted_exposed_s", "predicted_comm_s", "alpha_s", "beta_s_per_byte",
    "caps_seen", "load"};

struct DdpAgg {
  Row first;
  std::map<std::string, Samples> f;
  std::set<std::string> caps_seen;
  void add(const Row& r) {
    if (first.empty()) first = r;
    for (const auto& [k, v] : r)
      if (k.ends_with("_s") || k == "beta_s_per_byte") f[k].add(num(r, k));
    f["compute_s"].add(num(r, "step_s") - num(r, "exposed_s"));
    caps_seen.insert(r.at("cap_bytes") + "/" + r.at("first_cap_bytes"));
  }
  // The caps of the round with the median step are not tracked; the first round's are reported
  // (auto may pick different caps in different rounds: caps_seen lists them all).
  std::vector<std::string> row(Placement placement, double load) const {
    auto med = [&](const std::string& k) { return f.count(k) ? fmt(f.at(k).med()) : std::string("nan"); };
    const Row& r = first;
    return {"wide", r.at("ranks"), r.at("threads"), to_string(placement), r.at("progress"), r.at("cap"), r.at("cap_bytes"),
            r.at("first_cap_bytes"), r.at("buckets"), std::to_string(f.at("step_s").v.size()), r.at("steps"),
            med("step_s"), fmt(f.at("step_s").min()), fmt(f.at("step_s").max()), med("compute_s"), med("exposed_s"),
            fmt(f.at("exposed_s").min()), fmt(f.at("exposed_s").max()), med("comm_s"), med("forward_s"),
            med("backward_s"), med("optim_s"), med("predicted_exposed_s"), med("predicted_comm_s"), med("alpha_s"),
            med("beta_s_per_byte"), join(std::vector<std::string>(caps_seen.begin(), caps_seen.end()), ";"), fmt(load, 3)};
  }
};

// The ddp worker at ranks from..R with `caps`: one row per (ranks, cap).
Table ddp_sweep(const Options& o, Runner& run, const std::string& study, int from, const std::vector<std::string>& caps) {
  std::vector<Run> runs;
  for (int P = from; P <= o.ranks; ++P) {
    const Placement pl = run.rank_placement(P, o.rank_threads);
    runs.push_back(run.worker("ddp", {"--caps", join(caps), "--steps", std::to_string(o.steps)}, P, o.rank_threads, pl,
                              std::to_string(P) + (study == "ranks" ? " rank(s) (" : " ranks (") + to_string(pl) + ")"));
  }
  std::map<std::pair<int, std::string>, DdpAgg> agg;  // ranks, cap
  sweep(run, o, study, runs, [&](size_t i, const std::vector<Row>& rows) {
    for (const auto& [cap, m] : ddp_rank_means(rows)) agg[{runs[i].ranks, cap}].add(m);
  });
  Table tab{kDdpHeader, {}};
  for (const Run& r : runs)
    for (const std::string& c : caps) {
      if (!agg.count({r.ranks, c})) throw Failure("ddp worker reported nothing for cap " + c + " at " + std::to_string(r.ranks) + " rank(s)");
      tab.rows.push_back(agg[{r.ranks, c}].row(r.placement, run.load.med()));
    }
  return tab;
}

Table study_ranks(const Options& o, Runner& run) {
  std::printf("[ranks] data-parallel 1-1024x3-1 MLP step, ranks 1..%d x %d thread(s), 25 MiB buckets, %d round(s)\n",
              o.ranks, o.rank_threads, o.reps);
  return ddp_sweep(o, run, "ranks", 1, {"25"});
}

Table study_buckets(const Options& o, Runner& run) {
  if (o.ranks < 2) throw hddp::cli::UsageError("--studies buckets needs --ranks 2 or more");
  std::printf("[buckets] 1-1024x3-1 MLP step, caps auto/1/25 MiB, ranks 2..%d x %d thread(s), %d round(s)\n", o.ranks,
              o.rank_threads, o.reps);
  return ddp_sweep(o, run, "buckets", 2, {"auto", "1", "25"});
}

// poly_train's --stats-json file (drivers/poly_train/report.cpp): JSON lines, the last one the
// summary, whose per_rank[r][kPolyTimes[i]] are rank r's seconds over its `epochs` trained
// epochs. Returns epochs and the per-epoch means over the ranks, in kPolyTimes' order.
constexpr const char* kPolySchema = "hddp.poly_train.stats/1";
constexpr const char* kPolyTimes[] = {"forward_s", "backward_s", "optim_s", "total_s", "comm_s", "exposed_s"};
std::pair<double, std::vector<double>> read_poly_stats(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Failure("poly study: poly_train wrote no '" + path + "'");
  std::string line, last;
  while (std::getline(f, line))
    if (!line.empty()) last = line;
  try {
    const nlohmann::json j = nlohmann::json::parse(last);
    const auto schema = j.find("schema");
    if (schema == j.end() || *schema != kPolySchema)
      throw Failure("poly study: '" + path + "' has schema " + (schema == j.end() ? "(none)" : schema->dump()) +
                    ", expected \"" + kPolySchema + "\"");
    if (j.value("type", "") != "summary") throw Failure("poly study: '" + path + "' ends without its summary line");
    const double epochs = j.at("epochs").get<double>();
    const nlohmann::json& ranks = j.at("per_rank");
    if (!(epochs > 0) || !ranks.is_array() || ranks.empty())
      throw Failure("poly study: '" + path + "' has no epochs or no per_rank rows");
    std::vector<double> m(std::size(kPolyTimes));
    for (const nlohmann::json& r : ranks)
      for (size_t i = 0; i < m.size(); ++i) m[i] += r.at(kPolyTimes[i]).get<double>() / double(ranks.size()) / epochs;
    return {epochs, m};
  } catch (const nlohmann::json::exception& e) {
    throw Failure("poly study: cannot read '" + path + "': " + e.what());
  }
}

Table study_poly(const Options& o, Runner& run) {
  const std::string poly_train = o.poly_train.empty() ? std::filesystem::read_symlink("/proc/self/exe").parent_path().string() + "/../drivers/poly_train" : o.poly_train;
  if (access(poly_train.c_str(), X_OK) != 0)
    throw Failure("poly study: no poly_train at '" + poly_train + "' (build it, or pass --poly-train PATH)");
  std::printf("[poly] poly_train %s: threads %s at 1 rank, ranks 1..%d x %d thread(s), %d round(s)\n", o.poly_args.c_str(),
              join(o.threads).c_str(), o.ranks, o.rank_threads, o.reps);
  const std::string scratch = o.out + "/poly-run", stats = scratch + "/stats.json";
  mkdir(scratch.c_str(), 0755);
  // Threads at 1 rank, then ranks at --rank-threads.
  std::vector<Run> runs;
  auto add = [&](int P, int t) {
    for (const Run& r : runs)
      if (r.ranks == P && r.threads == t) return;
    std::vector<std::string> cmd = {poly_train, "--log-every", "1000000000"};
    std::istringstream in(o.poly_args);
    for (std::string w; in >> w;) cmd.push_back(w);
    cmd.insert(cmd.end(), {"--threads", std::to_string(t), "--stats-json", stats, "--no-plot", "--out", scratch});
    runs.push_back({cmd, P, t, P == 1 && t == 1 ? o.placement : run.rank_placement(P, t),
                    std::to_string(P) + " rank(s) x " + std::to_string(t) + " thread(s)"});
  };
  for (int t : o.threads) add(1, t);
  for (int P = 1; P <= o.ranks; ++P) add(P, o.rank_threads);
  std::vector<std::map<std::string, Samples>> agg(runs.size());
  sweep(run, o, "poly", runs, [&](size_t i, const std::vector<Row>&) {
    const auto [epochs, m] = read_poly_stats(stats);
    std::remove(stats.c_str());  // no stale file for the next run
    auto& a = agg[i];
    a["forward_s"].add(m[0]), a["backward_s"].add(m[1]), a["optim_s"].add(m[2]), a["step_s"].add(m[3]);
    a["comm_s"].add(m[4]), a["exposed_s"].add(m[5]), a["compute_s"].add(m[3] - m[5]), a["epochs"].add(epochs);
  });
  Table tab{{"ranks", "threads", "placement", "reps", "epochs", "step_s", "step_min_s", "step_max_s", "compute_s",
             "exposed_s", "comm_s", "forward_s", "backward_s", "optim_s", "speedup", "efficiency", "load"}, {}};
  for (size_t i = 0; i < runs.size(); ++i) {
    auto& a = agg[i];
    tab.rows.push_back(cells({{std::to_string(runs[i].ranks), std::to_string(runs[i].threads), to_string(runs[i].placement),
                               std::to_string(a["step_s"].v.size()), fmt(a["epochs"].med())},
                              a["step_s"].med_min_max(),
                              {fmt(a["compute_s"].med()), fmt(a["exposed_s"].med()), fmt(a["comm_s"].med()), fmt(a["forward_s"].med()),
                               fmt(a["backward_s"].med()), fmt(a["optim_s"].med()), "", "", fmt(run.load.med(), 3)}}));
  }
  Table ones = tab;  // speedup / efficiency over the 1-rank thread sweep only
  std::erase_if(ones.rows, [&](const auto& r) { return r[0] != "1"; });
  add_scaling(ones, {"ranks"}, "step_s");
  for (size_t i = 0, j = 0; i < tab.rows.size(); ++i)
    if (tab.rows[i][0] == "1") tab.rows[i] = ones.rows[j++];
  for (const char* f : {"/eval.csv", "/loss.csv", "/stats.json"}) std::remove((scratch + f).c_str());
  rmdir(scratch.c_str());
  return tab;
}

Table study_placement(const Options& o, Runner& run) {
  const int cores = available_cores();
  std::printf("[placement] OMP_PLACES=cores OMP_PROC_BIND=close vs unset: GEMM and step at threads %s; DDP step at 2 ranks\n",
              join(o.threads).c_str());
  // GEMM and the step at every thread count, close and none; the DDP step at 2 ranks with
  // binding none / per-rank cores / OpenMP-only and progress test / thread, and the progress
  // thread on its own core where the cores allow.
  std::vector<Run> runs;
  for (int t : o.threads)
    for (Placement pl : {Placement::Close, Placement::None}) {
      const std::string tag = std::to_string(t) + " thread(s), " + to_string(pl);
      runs.push_back(run.worker("gemm", {"--shapes", "fwd,sq2048", "--backends", "hddp", "--min-time", fmt(o.min_time)}, 0, t,
                                pl, "gemm " + tag));
      runs.push_back(run.worker("step", {"--backends", "hddp", "--min-time", fmt(o.min_time * 1.5)}, 0, t, pl, "step " + tag));
    }
  const int ddp_threads = std::max(1, std::min(o.rank_threads, cores / 2));
  auto ddp = [&](Placement pl, const std::string& mode, int threads, std::vector<std::string> extra) {
    std::vector<std::string> args = {"--caps", "25", "--steps", std::to_string(o.steps), "--reduce-mode", mode, "--show-affinity", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    runs.push_back(run.worker("ddp", args, 2, threads, pl, std::string("ddp 2 ranks, ") + to_string(pl) + ", progress " + mode));
  };
  if (o.ranks >= 2) {
    for (const std::string mode : {"test", "thread"})
      for (Placement pl : {Placement::None, Placement::Close, Placement::OmpOnly})
        if (pl != Placement::Close || 2 * ddp_threads <= cores) ddp(pl, mode, ddp_threads, {});
    if (2 * std::max(2, ddp_threads) <= cores) ddp(Placement::Pcore, "thread", std::max(2, ddp_threads), {"--progress-core", "1"});
  }
  // bench, config, placement, progress, ranks, threads
  Collect<std::tuple<std::string, std::string, std::string, std::string, std::string, std::string>> c;
  std::string affinity;  // of the first round
  std::set<size_t> seen;
  sweep(run, o, "placement", runs, [&](size_t i, const std::vector<Row>& rows) {
    const Run& r = runs[i];
    const std::string pl = to_string(r.placement), t = std::to_string(r.threads);
    for (const Row& row : rows) {
      if (row.at("kind") == "gemm") c.add({"gemm", row.at("shape") + "_hddp", pl, "", "1", t}, row, {"time_s", "cpu_util"});
      if (row.at("kind") == "step") c.add({"step", "wide_hddp", pl, "", "1", t}, row, {"time_s", "cpu_util"});
    }
    for (auto [cap, m] : ddp_rank_means(rows)) {
      const std::string mode = m.at("progress");
      if (seen.insert(i).second) {
        affinity += "# 2 ranks, placement " + pl + ", progress " + mode + ", " + t + " core(s) per rank\n";
        for (const Row& row : rows)
          if (row.at("kind") == "affinity")
            affinity += "rank " + row.at("rank") + " thread " + row.at("thread") + " cpus " + row.at("cpus") + "\n";
      }
      m["time_s"] = m.at("step_s");
      c.add({"ddp", "wide_2_ranks", pl, mode, "2", m.at("threads")}, m, {"time_s", "exposed_s"});
    }
  });
  Table tab{{"bench", "config", "placement", "progress", "ranks", "threads", "reps", "time_s", "time_min_s",
             "time_max_s", "exposed_s", "cpu_util", "load"}, {}};
  for (const auto& k : c.order) {
    auto& f = c.f[k];
    const auto [bench, config, pl, mode, ranks, threads] = k;
    tab.rows.push_back(cells({{bench, config, pl, mode, ranks, threads, std::to_string(f["time_s"].v.size())},
                              f["time_s"].med_min_max(),
                              {f.count("exposed_s") ? fmt(f["exposed_s"].med()) : "nan",
                               f.count("cpu_util") ? fmt(f["cpu_util"].med(), 3) : "nan", fmt(run.load.med(), 3)}}));
  }
  if (!affinity.empty())
    hddp::write_file_atomic(o.out + "/placement_affinity.txt",
                            "# Cpus_allowed_list of every thread of each rank (first round), /proc/self/task/*/status\n" + affinity);
  return tab;
}

}  // namespace

const std::vector<Study> kStudies = {
    {"gemm",
     "GEMM at the 1-1024x3-1 MLP's linear-layer shapes, hddp vs OpenBLAS, vs threads:\n"
     "fwd (256,1024,1024) NT, dx (256,1024,1024) NN, dw (1024,1024,256) TN, sq2048",
     true, study_gemm, plot_gemm, table_gemm},
    {"step",
     "one training step of the 1-1024x3-1 MLP (tanh, batch 256, Adam), hddp vs\n"
     "OpenBLAS GEMM, vs threads",
     true, study_step, plot_step, table_step},
    {"ranks",
     "that step data-parallel, mpiexec -n 1..R (batch 256 per rank, 25 MiB buckets):\n"
     "compute and exposed communication per step",
     true, study_ranks, plot_ranks, table_ranks},
    {"poly", "poly_train --stats-json (--poly-args): threads at 1 rank, then ranks 1..R", true, study_poly, plot_poly,
     table_poly},
    {"buckets",
     "the data-parallel step at ranks 2..R with bucket caps auto, 1 MiB and 25 MiB,\n"
     "one model each, steps in rotating order: exposed communication, step time, and\n"
     "the auto-sizer's prediction",
     true, study_buckets, plot_buckets, table_buckets},
    {"placement",
     "OMP_PLACES=cores OMP_PROC_BIND=close vs unset for GEMM and the step at every\n"
     "thread count; the DDP step at 2 ranks with --reduce-mode test|thread under\n"
     "mpiexec binding none / per-rank cores / OpenMP binding only, and with the\n"
     "progress thread on its own core where the cores allow",
     false, study_placement, plot_placement, table_placement},
};

std::vector<std::string> study_names(bool defaults_only) {
  std::vector<std::string> v;
  for (const Study& s : kStudies)
    if (!defaults_only || s.by_default) v.push_back(s.name);
  return v;
}

}  // namespace scaling
