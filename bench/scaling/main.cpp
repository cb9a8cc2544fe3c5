// bench/scaling: thread and rank scaling studies of hddp in one command, CSV + PDF.
// Run `scaling --help`. Design: this program is the orchestrator and, started again as
// `scaling --worker KIND` (workers.cpp), the measurement worker: one process per thread count
// (OpenMP reads OMP_NUM_THREADS / OMP_PLACES / OMP_PROC_BIND at start), or mpiexec -n P of it
// for the rank sweeps. Every study is one sweep(): a list of runs repeated in interleaved
// rounds (round 1 of every run, then round 2, ... in reverse order on odd rounds), so slow
// drifts of a shared machine's load hit every run alike; each figure is the median over
// rounds, with min and max kept in the CSV.
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "common.h"
#include "core/util.h"
#include "distributed/mpi_env.h"
#include "drivers/common/gnuplot.h"
#include "drivers/common/options.h"
#include "kernels/gemm.h"
#include "plots.h"
#include "workers.h"

namespace scaling {
namespace {

// Where the threads of a run may go. Close: OMP_PLACES=cores OMP_PROC_BIND=close (under
// mpiexec also --map-by slot:PE=N --bind-to core); None: the OMP variables unset (mpiexec
// --bind-to none); OmpOnly: mpiexec --bind-to none with the OMP variables; Pcore: Close, with
// OpenMP on threads-1 cores and the reducer's progress thread on the last; Auto (--rank-placement
// only): Close when ranks x threads fit the cores, else None.
enum class Placement { Auto, Close, None, OmpOnly, Pcore };
const char* to_string(Placement p) {
  const char* names[] = {"auto", "close", "none", "omp-only", "pcore"};
  return names[int(p)];
}

struct Options {
  std::string out = "scaling-out";
  std::vector<std::string> studies;  // empty: the default ones
  std::vector<int> threads;          // empty: powers of two up to max_threads, and max_threads
  int max_threads = 0;               // 0: the cores this process may use
  int ranks = 3, rank_threads = 1, reps = 3, steps = 10;
  Placement rank_placement = Placement::Auto, placement = Placement::Close;
  double min_time = 0.2, lock_wait = 0, timeout = 600;
  std::vector<std::string> gemm_shapes = {"fwd", "dx", "dw", "sq2048"};
  std::string poly_train;  // default: <dir of this program>/../drivers/poly_train
  std::string poly_args = "--hidden 1024,1024,1024 --batch-size 256 --epochs 20 --lr 1e-4";
  std::string mpiexec = "mpiexec", lock = "/tmp/hddp-bench.lock";
  bool plot = true, plot_only = false, tables = false, quick = false, help = false;
};

std::string join(const std::vector<std::string>& v, const std::string& sep = ",") {
  std::string s;
  for (const std::string& x : v) s.append(s.empty() ? "" : sep).append(x);
  return s;
}
std::string join(const std::vector<int>& v) {
  std::vector<std::string> s;
  for (int x : v) s.push_back(std::to_string(x));
  return join(s);
}

// One measurement: `scaling --worker ...` as a process (ranks 0) or under mpiexec -n ranks, or
// another program under mpiexec (poly_train).
struct Run {
  std::vector<std::string> argv;
  int ranks = 0, threads = 1;
  Placement placement = Placement::Close;
  std::string what;  // progress line: "2 thread(s)"
};

// Figures of one configuration over the rounds.
struct Samples {
  std::vector<double> v;
  void add(double x) { v.push_back(x); }
  double med() const { return hddp::median(v); }
  double min() const { return v.empty() ? NAN : *std::min_element(v.begin(), v.end()); }
  double max() const { return v.empty() ? NAN : *std::max_element(v.begin(), v.end()); }
  std::vector<std::string> med_min_max() const { return {fmt(med()), fmt(min()), fmt(max())}; }
};

// A CSV row from groups of cells.
std::vector<std::string> cells(std::initializer_list<std::vector<std::string>> groups) {
  std::vector<std::string> r;
  for (const auto& g : groups) r.insert(r.end(), g.begin(), g.end());
  return r;
}

class Runner {
 public:
  Runner(const Options& o, std::vector<std::string> self) : o_(o), self_(std::move(self)), lock_(o.lock, o.lock_wait) {}

  Run worker(const std::string& kind, std::vector<std::string> args, int ranks, int threads, Placement pl,
             std::string what) const {
    std::vector<std::string> argv = self_;
    argv.insert(argv.end(), {"--worker", kind});
    argv.insert(argv.end(), args.begin(), args.end());
    return {argv, ranks, threads, pl, std::move(what)};
  }

  // The placement a rank sweep uses for P ranks of `threads` threads.
  Placement rank_placement(int P, int threads) const {
    if (o_.rank_placement != Placement::Auto) return o_.rank_placement;
    int nodes = 1;
    if (const char* n = std::getenv("SLURM_JOB_NUM_NODES")) nodes = std::max(1, std::atoi(n));
    return int64_t(P) * threads <= int64_t(available_cores()) * nodes ? Placement::Close : Placement::None;
  }

  // Runs r holding the lock; checks the exit code; returns its @row lines.
  std::vector<Row> run(const Run& r, const std::string& what) {
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

  Samples load;  // the 1-minute load average at every run of the current study

 private:
  const Options& o_;
  std::vector<std::string> self_;
  BenchLock lock_;
};

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

std::string dir_of_self() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n <= 0 ? "." : std::string(buf, size_t(n)).substr(0, std::string(buf, size_t(n)).find_last_of('/'));
}

Table study_poly(const Options& o, Runner& run) {
  const std::string poly_train = o.poly_train.empty() ? dir_of_self() + "/../drivers/poly_train" : o.poly_train;
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

// One study: <name>.csv (the table `run` returns) and <name>.pdf in --out. Help, option
// checks, dispatch, plots and --tables all come from this list.
struct Study {
  const char* name;
  const char* help;  // --help lines, '\n' between them
  bool by_default;   // run without --studies
  Table (*run)(const Options&, Runner&);
  void (*plot)(const Table& t, const std::string& pdf, const std::string& note);
  void (*table)(const Table& t, const std::string& csv);
};
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

// ---- the command line ----

void define_options(CLI::App& app, Options& o) {
  using hddp::cli::integer, hddp::cli::positive, hddp::cli::one_of;
  std::ostringstream desc;
  desc << "Usage: scaling [options]\n\n"
       << "Thread and rank scaling of hddp: sweeps OMP_NUM_THREADS and MPI ranks, writes one CSV per\n"
       << "study and draws PDFs with gnuplot (GFLOP/s, speedup and parallel efficiency vs threads; step\n"
       << "time vs ranks with compute and exposed communication stacked). Studies:\n";
  for (const Study& s : kStudies) {
    const std::vector<std::string> lines = split(s.help, '\n');
    desc << "  " << s.name << std::string(11 - std::string(s.name).size(), ' ') << lines[0] << "\n";
    for (size_t i = 1; i < lines.size(); ++i) desc << std::string(13, ' ') << lines[i] << "\n";
  }
  desc << "Files in --out: <study>.csv, <study>.pdf, machine.txt (and placement_affinity.txt).\n"
       << "Every run of a worker holds the lock file (--lock), as `flock FILE cmd` would. Defaults\n"
       << "are shown after '='.";
  hddp::cli::house_style(app, desc.str(),
                         "Environment: HDDP_GNUPLOT (gnuplot program), HDDP_SCALING_SELF (command that runs this\n"
                         "program, e.g. through a bundled dynamic loader; default /proc/self/exe).\n"
                         "Exit codes: 0 done, 1 a measurement or plot failed (the message says which), 2 bad option.",
                         30, o.help);
  const std::vector<std::string> all = study_names(false);
  const auto pl = [](std::initializer_list<Placement> ps) {
    std::vector<std::pair<std::string, Placement>> v;
    for (Placement p : ps) v.emplace_back(to_string(p), p);
    return one_of(v);
  };
  app.add_option("--out", o.out, "output directory (created)")->check(hddp::cli::non_empty())->type_name("DIR");
  app.add_option("--studies", o.studies, "comma-separated, from " + join(all) + ", or all")
      ->delimiter(',')->check(CLI::Validator([all](std::string& s) -> std::string {
        if (s == "all" || std::find(all.begin(), all.end(), s) != all.end()) return "";
        return "unknown study '" + s + "' (" + join(all, ", ") + ", all)";
      }, ""))->default_str(join(study_names(true)))->type_name("LIST");
  app.add_option("--threads", o.threads, "thread counts, e.g. 1,2,4,8,16 [1, 2, 4, ... up to --max-threads, and it]")
      ->delimiter(',')->check(integer(1, 4096))->default_str("")->type_name("LIST");
  app.add_option("--max-threads", o.max_threads, "largest thread count [the cores this process may use]")
      ->check(integer(1, 4096))->default_str("")->type_name("N");
  app.add_option("--ranks", o.ranks, "rank counts 1..R for ranks/poly, 2..R for buckets")->check(integer(1, 4096))->type_name("R");
  app.add_option("--rank-threads", o.rank_threads, "OpenMP threads per rank in the rank sweeps")->check(integer(1, 4096))->type_name("N");
  app.add_option("--rank-placement", o.rank_placement,
                 "auto | close | none | omp-only: close = mpiexec --map-by slot:PE=N\n"
                 "--bind-to core and OMP_PLACES=cores OMP_PROC_BIND=close; none =\n"
                 "--bind-to none, OMP variables unset; omp-only = --bind-to none with\n"
                 "the OMP variables; auto = close when ranks x threads fit the cores,\n"
                 "else none")
      ->transform(pl({Placement::Auto, Placement::Close, Placement::None, Placement::OmpOnly}))->default_str("auto")->type_name("P");
  app.add_option("--placement", o.placement, "close | none, for the thread sweeps")
      ->transform(pl({Placement::Close, Placement::None}))->default_str("close")->type_name("P");
  app.add_option("--reps", o.reps, "interleaved rounds; figures are medians")->check(integer(1, 1000))->type_name("N");
  app.add_option("--min-time", o.min_time, "seconds each GEMM / step measurement loops")->check(positive())->type_name("S");
  app.add_option("--steps", o.steps, "timed data-parallel steps per model and round (+2 warm-up)")
      ->check(integer(1, 100000))->type_name("N");
  app.add_option("--gemm-shapes", o.gemm_shapes, "fwd, dx, dw, sq2048 or MxNxK[:NN|NT|TN]")
      ->delimiter(',')->check(CLI::Validator([](std::string& s) -> std::string {
        try {
          parse_shape(s);
          return "";
        } catch (const std::exception& e) {
          return e.what();  // "'12x3' is not ..."
        }
      }, ""))->default_str("fwd,dx,dw,sq2048")->type_name("LIST");
  app.add_option("--poly-train", o.poly_train, "the driver [<this program's dir>/../drivers/poly_train]")->type_name("PATH");
  app.add_option("--poly-args", o.poly_args, "poly_train arguments")->default_str("\"" + o.poly_args + "\"")->type_name("\"ARGS\"");
  app.add_option("--mpiexec", o.mpiexec, "MPI launcher")->type_name("PATH");
  app.add_option("--lock", o.lock, "lock held around every measurement; '' for none")->type_name("FILE");
  app.add_option("--lock-wait", o.lock_wait, "wait at most S s for the lock per run, then measure without it\n"
                                             "(tests; 0 = as long as it takes)")->check(positive())->type_name("S");
  app.add_option("--timeout", o.timeout, "seconds before a worker run is killed")->check(positive())->type_name("S");
  app.add_flag("!--no-plot", o.plot, "CSVs only");
  app.add_flag("--plot-only", o.plot_only, "redraw the PDFs from the CSVs already in --out");
  app.add_flag("--tables", o.tables, "print the CSVs in --out as markdown tables (bench/RESULTS.md)");
  app.add_flag("--quick", o.quick, "smallest sweep (tests): --reps 1 --min-time 0.02 --steps 2, poly 3 epochs");
  for (CLI::Option* opt : app.get_options()) opt->group("Options");
}

Options parse_options(int argc, char** argv) {
  Options o;
  CLI::App app("", "scaling");
  define_options(app, o);
  hddp::cli::parse(app, argc - 1, argv + 1);
  if (o.quick) {
    if (!app.count("--reps")) o.reps = 1;
    if (!app.count("--min-time")) o.min_time = 0.02;
    if (!app.count("--steps")) o.steps = 2;
    o.poly_args += " --epochs 3";
  }
  if (o.studies.empty()) o.studies = study_names(true);
  if (std::find(o.studies.begin(), o.studies.end(), "all") != o.studies.end()) o.studies = study_names(false);
  if (!o.threads.empty() && o.max_threads > 0) throw hddp::cli::UsageError("--threads and --max-threads: give one of them");
  std::sort(o.threads.begin(), o.threads.end());
  o.threads.erase(std::unique(o.threads.begin(), o.threads.end()), o.threads.end());
  if (o.threads.empty()) {
    const int top = o.max_threads > 0 ? o.max_threads : available_cores();
    for (int t = 1; t < top; t *= 2) o.threads.push_back(t);
    o.threads.push_back(top);
  }
  return o;
}

// ---- the run ----

std::vector<std::string> self_command() {
  if (const char* s = std::getenv("HDDP_SCALING_SELF"); s && *s) {
    std::vector<std::string> v;
    std::istringstream in(s);
    for (std::string w; in >> w;) v.push_back(w);
    return v;
  }
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw Failure("cannot read /proc/self/exe; set HDDP_SCALING_SELF to this program's path");
  return {std::string(buf, size_t(n))};
}

void mkdirs(const std::string& dir) {
  std::string cur;
  for (const std::string& part : split(dir, '/')) {
    cur += part + "/";
    if (!part.empty() && mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) throw Failure("--out: cannot create '" + cur + "'");
  }
  if (access(dir.c_str(), W_OK) != 0) throw Failure("--out: '" + dir + "' is not a writable directory");
}

std::string machine_note() {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  return cpu_model() + ", " + std::to_string(available_cores()) + " cores (" + host + "), hddp kernel " +
         hddp::gemm_kernel_name();
}

bool chosen(const Options& o, const std::string& s) { return std::find(o.studies.begin(), o.studies.end(), s) != o.studies.end(); }

void draw(const Options& o, const std::string& note) {
  if (!hddp::gnuplot::available()) {
    std::fprintf(stderr, "scaling: warning: gnuplot not found (HDDP_GNUPLOT or PATH): no PDFs; the CSVs hold the results. "
                         "Redraw later with --plot-only --out %s\n", o.out.c_str());
    return;
  }
  for (const Study& s : kStudies) {
    const std::string csv = o.out + "/" + s.name + ".csv";
    if (!file_exists(csv) || (!o.plot_only && !chosen(o, s.name))) continue;
    s.plot(read_csv(csv), o.out + "/" + s.name + ".pdf", note);
    std::printf("[%s] wrote %s/%s.pdf\n", s.name, o.out.c_str(), s.name);
  }
}

int orchestrate(const Options& o) {
  if (o.tables) {  // the CSVs in --out as markdown tables on stdout
    int n = 0;
    for (const Study& s : kStudies)
      if (file_exists(o.out + "/" + s.name + ".csv")) s.table(read_csv(o.out + "/" + s.name + ".csv"), s.name + std::string(".csv")), ++n;
    if (n == 0) throw Failure("--tables: no study CSVs in '" + o.out + "'");
    return 0;
  }
  mkdirs(o.out);
  std::string note = machine_note();
  if (o.plot_only) {  // the note of the machine that measured
    std::ifstream m(o.out + "/machine.txt");
    std::string first;
    if (std::getline(m, first) && first.rfind("machine: ", 0) == 0) note = first.substr(9);
    draw(o, note);
    return 0;
  }
  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", std::localtime(&now));
  std::ostringstream machine;
  machine << "machine: " << note << "\ndate: " << date << "\nload average at start: " << load_average()
          << "\nthreads: " << join(o.threads) << "; ranks 1.." << o.ranks << " x " << o.rank_threads << " thread(s)\n"
          << "reps: " << o.reps << ", min-time " << o.min_time << " s, steps " << o.steps << "\n";
  hddp::write_file_atomic(o.out + "/machine.txt", machine.str());
  Runner run(o, self_command());
  std::printf("scaling: %s\nscaling: studies %s -> %s\n", note.c_str(), join(o.studies, " ").c_str(), o.out.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  for (const std::string& name : o.studies) {
    const Study& s = *std::find_if(kStudies.begin(), kStudies.end(), [&](const Study& x) { return name == x.name; });
    const Table tab = s.run(o, run);
    write_csv(o.out + "/" + name + ".csv", tab);
    std::printf("[%s] wrote %s/%s.csv (%zu rows)\n", s.name, o.out.c_str(), s.name, tab.rows.size());
  }
  machine << "load average at end: " << load_average() << "\n";
  hddp::write_file_atomic(o.out + "/machine.txt", machine.str());
  if (o.plot) draw(o, note);
  std::printf("scaling: done in %.1f s\n", hddp::seconds_since(t0));
  return 0;
}

}  // namespace
}  // namespace scaling

int main(int argc, char** argv) {
  using namespace scaling;
  if (argc >= 2 && std::string(argv[1]) == "--worker") {
    try {
      return worker_main(argc, argv);
    } catch (const std::exception& e) {
      int init = 0, fin = 0;
      MPI_Initialized(&init);
      MPI_Finalized(&fin);
      if (init && !fin) hddp::mpi::abort_all(1, e.what());
      std::fprintf(stderr, "scaling worker: error: %s\n", e.what());
      return 1;
    }
  }
  unbind_self();  // before anything reads the affinity mask or starts a child
  try {
    const Options o = parse_options(argc, argv);
    if (o.help) {
      Options d;
      CLI::App app("", "scaling");
      define_options(app, d);
      std::fputs(app.help().c_str(), stdout);
      return 0;
    }
    return orchestrate(o);
  } catch (const hddp::cli::UsageError& e) {
    std::fprintf(stderr, "scaling: error: %s\nTry 'scaling --help'.\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scaling: error: %s\n", e.what());
    return 1;
  }
}
