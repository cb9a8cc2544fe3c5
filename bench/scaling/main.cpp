// bench/scaling: thread and rank scaling studies of hddp in one command, CSV + PDF.
// Run `scaling --help`. Design: this program is the orchestrator and, started again as
// `scaling --worker KIND` (workers.cpp), the measurement worker: one process per thread count
// (OpenMP reads OMP_NUM_THREADS / OMP_PLACES / OMP_PROC_BIND at start), or mpiexec -n P of it
// for the rank sweeps. Repetitions are interleaved rounds (round 1 of every configuration,
// then round 2, ...), so slow drifts of a shared machine's load hit every configuration alike;
// each figure is the median over rounds, with min and max kept in the CSV.
#include <CLI/CLI.hpp>
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "common.h"
#include "distributed/mpi_env.h"
#include "drivers/common/gnuplot.h"
#include "kernels/gemm.h"
#include "plots.h"
#include "workers.h"

namespace scaling {
namespace {

struct Options {
  std::string out = "scaling-out";
  std::vector<std::string> studies;  // registry names; empty: the default ones
  std::vector<int> threads;  // empty: powers of two up to max_threads, and max_threads
  int max_threads = 0;       // 0: the cores this process may use
  int ranks = 3;
  int rank_threads = 1;
  std::string rank_placement = "auto";
  std::string placement = "close";
  int reps = 3;
  double min_time = 0.2;
  int steps = 10;
  std::vector<std::string> gemm_shapes = {"fwd", "dx", "dw", "sq2048"};
  std::string poly_train;  // default: <dir of this program>/../drivers/poly_train
  std::string poly_args = "--hidden 1024,1024,1024 --batch-size 256 --epochs 20 --lr 1e-4";
  std::string mpiexec = "mpiexec";
  std::string lock = "/tmp/hddp-bench.lock";
  double lock_wait = 0;  // 0: wait for the lock as long as it takes
  double timeout = 600;
  bool plot = true, plot_only = false, tables = false, quick = false, help = false;
};

class Runner;

// One study. Its files in --out are <name>.csv (the table `run` returns) and <name>.pdf; help,
// option checks, dispatch, plots and --tables all come from studies(), so a study is added or
// renamed there only.
struct Study {
  const char* name;
  const char* help;  // --help lines, '\n' between them
  bool by_default;   // run without --studies
  Table (*run)(const Options&, Runner&);
  void (*plot)(const Table& t, const std::string& pdf, const std::string& note);
  void (*table)(const Table& t, const std::string& csv);
};
const std::vector<Study>& studies();  // in the order of --studies all, the plots and --tables

const Study* find_study(const std::string& name) {
  for (const Study& s : studies())
    if (name == s.name) return &s;
  return nullptr;
}

// "gemm<sep>step<sep>...": all studies or the default ones.
std::string study_names(bool defaults_only, const std::string& sep) {
  std::string s;
  for (const Study& st : studies())
    if (!defaults_only || st.by_default) s.append(s.empty() ? "" : sep).append(st.name);
  return s;
}

// CLI11's layout with the usage line first (it is the first line of the description), and
// one blank line, not two, between groups of options.
class Formatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override { return "\n"; }
  std::string make_group(std::string group, bool positional, std::vector<const CLI::Option*> opts) const override {
    return CLI::Formatter::make_group(std::move(group), positional, std::move(opts)).substr(1);
  }
};

int to_int(const std::string& flag, const std::string& v, int lo, int hi) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || x < lo || x > hi)
    throw UsageError(flag + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + v + "'");
  return int(x);
}
double to_pos(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || !(x > 0) || !std::isfinite(x)) throw UsageError(flag + ": expected a number > 0, got '" + v + "'");
  return x;
}
std::string shown(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

// Every option as a CLI::App (CLI11) that fills `o`; a value option's callback converts and
// checks its value as it is parsed, so a later one wins. --help is generated from it.
struct Cli {
  Options o;
  CLI::App app{"", "scaling"};
  Cli() {
    const Options d;
    std::ostringstream desc;
    desc << "Usage: scaling [options]\n"
         << "\n"
         << "Thread and rank scaling of hddp: sweeps OMP_NUM_THREADS and MPI ranks, writes one CSV per\n"
         << "study and draws PDFs with gnuplot (GFLOP/s, speedup and parallel efficiency vs threads; step\n"
         << "time vs ranks with compute and exposed communication stacked). Studies:\n";
    for (const Study& s : studies()) {
      const std::vector<std::string> lines = split(s.help, '\n');
      desc << "  " << std::left << std::setw(11) << s.name << lines[0] << "\n";
      for (size_t i = 1; i < lines.size(); ++i) desc << std::string(13, ' ') << lines[i] << "\n";
    }
    desc << "Files in --out: <study>.csv, <study>.pdf, machine.txt (and placement_affinity.txt).\n"
         << "Every run of a worker holds the lock file (--lock), as `flock FILE cmd` would. Defaults\n"
         << "are shown after '='.";
    app.description(desc.str());
    app.footer("Environment: HDDP_GNUPLOT (gnuplot program), HDDP_SCALING_SELF (command that runs this\n"
               "program, e.g. through a bundled dynamic loader; default /proc/self/exe).\n"
               "Exit codes: 0 done, 1 a measurement or plot failed (the message says which), 2 bad option.");
    app.formatter(std::make_shared<Formatter>());
    app.get_formatter()->column_width(30);
    app.get_formatter()->label("OPTIONS", "options");
    app.set_help_flag();  // --help is a flag of o: main prints help_text
    app.allow_extras(true);  // reported by parse_options in its own words
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

    const auto value = [&](const std::string& name, const std::string& type, const std::string& dflt,
                           const std::string& help, std::function<void(const std::string&, const std::string&)> set) {
      app.add_option_function<std::string>(name, [name, set](const std::string& v) { set(name, v); }, help)
          ->type_name(type)
          ->default_str(dflt)
          ->trigger_on_parse()
          ->group("Options");
    };
    const auto flag = [&](const std::string& name, bool& target, const std::string& help) {
      app.add_flag(name, target, help)->group("Options");
    };
    value("--out", "DIR", d.out, "output directory (created)", [this](auto&, auto& v) { o.out = v; });
    value("--studies", "LIST", study_names(true, ","), "comma-separated, from " + study_names(false, ",") + ", or all",
          [this](auto& f, auto& v) {
            o.studies = split(v == "all" ? study_names(false, ",") : v, ',');
            for (const std::string& s : o.studies)
              if (!find_study(s)) throw UsageError(f + ": unknown study '" + s + "' (" + study_names(false, ", ") + ", all)");
            if (o.studies.empty()) throw UsageError(f + ": empty list");
          });
    value("--threads", "LIST", "", "thread counts, e.g. 1,2,4,8,16 [1, 2, 4, ... up to --max-threads, and it]",
          [this](auto& f, auto& v) {
            o.threads.clear();
            for (const std::string& t : split(v, ',')) o.threads.push_back(to_int(f, t, 1, 4096));
            std::sort(o.threads.begin(), o.threads.end());
            o.threads.erase(std::unique(o.threads.begin(), o.threads.end()), o.threads.end());
            if (o.threads.empty()) throw UsageError(f + ": empty list");
          });
    value("--max-threads", "N", "", "largest thread count [the cores this process may use]",
          [this](auto& f, auto& v) { o.max_threads = to_int(f, v, 1, 4096); });
    value("--ranks", "R", std::to_string(d.ranks), "rank counts 1..R for ranks/poly, 2..R for buckets",
          [this](auto& f, auto& v) { o.ranks = to_int(f, v, 1, 4096); });
    value("--rank-threads", "N", std::to_string(d.rank_threads), "OpenMP threads per rank in the rank sweeps",
          [this](auto& f, auto& v) { o.rank_threads = to_int(f, v, 1, 4096); });
    value("--rank-placement", "P", d.rank_placement,
          "auto | close | none | omp-only: close = mpiexec --map-by slot:PE=N\n"
          "--bind-to core and OMP_PLACES=cores OMP_PROC_BIND=close; none =\n"
          "--bind-to none, OMP variables unset; omp-only = --bind-to none with\n"
          "the OMP variables; auto = close when ranks x threads fit the cores,\n"
          "else none",
          [this](auto& f, auto& v) {
            if (v != "auto" && v != "close" && v != "none" && v != "omp-only")
              throw UsageError(f + ": expected auto, close, none or omp-only, got '" + v + "'");
            o.rank_placement = v;
          });
    value("--placement", "P", d.placement, "close | none, for the thread sweeps", [this](auto& f, auto& v) {
      if (v != "close" && v != "none") throw UsageError(f + ": expected close or none, got '" + v + "'");
      o.placement = v;
    });
    value("--reps", "N", std::to_string(d.reps), "interleaved rounds; figures are medians",
          [this](auto& f, auto& v) { o.reps = to_int(f, v, 1, 1000); });
    value("--min-time", "S", shown(d.min_time), "seconds each GEMM / step measurement loops",
          [this](auto& f, auto& v) { o.min_time = to_pos(f, v); });
    value("--steps", "N", std::to_string(d.steps), "timed data-parallel steps per model and round (+2 warm-up)",
          [this](auto& f, auto& v) { o.steps = to_int(f, v, 1, 100000); });
    value("--gemm-shapes", "LIST", "fwd,dx,dw,sq2048", "fwd, dx, dw, sq2048 or MxNxK[:NN|NT|TN]",
          [this](auto& f, auto& v) {
            o.gemm_shapes = split(v, ',');
            for (const std::string& s : o.gemm_shapes) parse_shape(s);  // validates
            if (o.gemm_shapes.empty()) throw UsageError(f + ": empty list");
          });
    value("--poly-train", "PATH", "", "the driver [<this program's dir>/../drivers/poly_train]",
          [this](auto&, auto& v) { o.poly_train = v; });
    value("--poly-args", "\"ARGS\"", "\"" + d.poly_args + "\"", "poly_train arguments",
          [this](auto&, auto& v) { o.poly_args = v; });
    value("--mpiexec", "PATH", d.mpiexec, "MPI launcher", [this](auto&, auto& v) { o.mpiexec = v; });
    value("--lock", "FILE", d.lock, "lock held around every measurement; '' for none",
          [this](auto&, auto& v) { o.lock = v; });
    value("--lock-wait", "S", "0",
          "wait at most S s for the lock per run, then measure without it\n"
          "(tests; 0 = as long as it takes)",
          [this](auto& f, auto& v) { o.lock_wait = to_pos(f, v); });
    value("--timeout", "S", shown(d.timeout), "seconds before a worker run is killed",
          [this](auto& f, auto& v) { o.timeout = to_pos(f, v); });
    app.add_flag_callback("--no-plot", [this] { o.plot = false; }, "CSVs only")->group("Options");
    flag("--plot-only", o.plot_only, "redraw the PDFs from the CSVs already in --out");
    flag("--tables", o.tables, "print the CSVs in --out as markdown tables (bench/RESULTS.md)");
    flag("--quick", o.quick, "smallest sweep (tests): --reps 1 --min-time 0.02 --steps 2, poly 3 epochs");
    flag("--help", o.help, "this text");
  }
};

std::string help_text() { return Cli().app.help(); }

Options parse_options(int argc, char** argv) {
  Cli cli;
  // As CLI11 is to see them: "--name=VALUE" of a value option as "--name", "VALUE" (so
  // "--lock=" is the empty value, not the next argument); a value option's next argument is
  // its value whatever it looks like (--poly-args "--epochs 5").
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") throw UsageError("unknown option '--'");  // not CLI11's end of options
    const size_t eq = a.rfind("--", 0) == 0 ? a.find('=') : std::string::npos;
    const CLI::Option* opt = a.rfind("--", 0) == 0 ? cli.app.get_option_no_throw(a.substr(0, eq)) : nullptr;
    if (!opt || opt->get_expected_max() == 0) {
      args.push_back(a.substr(0, opt ? eq : std::string::npos));  // a flag's value is ignored
    } else if (eq != std::string::npos) {
      args.push_back(a.substr(0, eq)), args.push_back(a.substr(eq + 1));
    } else {
      if (i + 1 >= argc) throw UsageError(a + ": missing value");
      args.push_back(a), args.push_back(argv[++i]);
    }
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes them from the back
  try {
    cli.app.parse(args);
  } catch (const CLI::Error& e) {
    throw UsageError(e.what());
  }
  for (const std::string& r : cli.app.remaining())
    throw UsageError("unknown option '" + r.substr(0, r.rfind("--", 0) == 0 ? r.find('=') : std::string::npos) + "'");
  Options o = cli.o;
  if (o.quick) {
    if (!cli.app.count("--reps")) o.reps = 1;
    if (!cli.app.count("--min-time")) o.min_time = 0.02;
    if (!cli.app.count("--steps")) o.steps = 2;
    o.poly_args += " --epochs 3";
  }
  if (o.out.empty()) throw UsageError("--out: must not be empty");
  if (o.studies.empty()) o.studies = split(study_names(true, ","), ',');
  if (o.threads.empty()) {
    const int top = o.max_threads > 0 ? o.max_threads : available_cores();
    for (int t = 1; t < top; t *= 2) o.threads.push_back(t);
    o.threads.push_back(top);
  } else if (o.max_threads > 0) {
    throw UsageError("--threads and --max-threads: give one of them");
  }
  return o;
}

using Env = std::vector<std::pair<std::string, std::string>>;
const std::vector<std::string> kOmpPlacementVars = {"OMP_PLACES", "OMP_PROC_BIND", "GOMP_CPU_AFFINITY"};

struct Samples {
  std::vector<double> v;
  void add(double x) { v.push_back(x); }
  double med() const {
    if (v.empty()) return NAN;
    std::vector<double> s = v;
    std::sort(s.begin(), s.end());
    return s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
  }
  double min() const { return v.empty() ? NAN : *std::min_element(v.begin(), v.end()); }
  double max() const { return v.empty() ? NAN : *std::max_element(v.begin(), v.end()); }
};

class Runner {
 public:
  Runner(const Options& o, std::vector<std::string> self) : o_(o), self_(std::move(self)), lock_(o.lock, o.lock_wait) {}

  // One measurement run: holds the lock, checks the exit code, returns the @row lines.
  std::vector<Row> run(const std::vector<std::string>& argv, const Env& set, const std::vector<std::string>& unset,
                       const std::string& what) {
    lock_.lock();
    load_.add(load_average());
    const auto t0 = std::chrono::steady_clock::now();
    ProcResult r;
    try {
      r = run_process(argv, set, unset, o_.timeout);
    } catch (...) {
      lock_.unlock();
      throw;
    }
    lock_.unlock();
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r.timed_out || r.exit_code != 0) {
      std::string cmd;
      for (const std::string& a : argv) cmd.append(cmd.empty() ? "" : " ").append(a);
      std::string tail = r.err.size() > 3000 ? r.err.substr(r.err.size() - 3000) : r.err;
      if (tail.empty()) tail = r.out.size() > 2000 ? r.out.substr(r.out.size() - 2000) : r.out;
      throw Failure(what + ": " + (r.timed_out ? "timed out after " + fmt(o_.timeout, 4) + " s" : "exit code " + std::to_string(r.exit_code)) +
                    "\n  command: " + cmd + "\n  output:\n" + tail);
    }
    std::printf("  %-60s %6.2f s\n", what.c_str(), el);
    std::fflush(stdout);
    return parse_rows(r.out);
  }

  // `scaling --worker KIND args` with OMP_NUM_THREADS and the placement variables.
  std::vector<Row> worker(const std::string& kind, const std::vector<std::string>& args, int threads,
                          const std::string& placement, const std::string& what) {
    std::vector<std::string> argv = self_;
    argv.insert(argv.end(), {"--worker", kind});
    argv.insert(argv.end(), args.begin(), args.end());
    Env set{{"OMP_NUM_THREADS", std::to_string(threads)}};
    std::vector<std::string> unset;
    place(placement, set, unset);
    return run(argv, set, unset, what);
  }

  // mpiexec -n P with the rank placement: close | none | omp-only | pcore (close, OpenMP on
  // threads-1 cores and the reducer's progress thread on the last).
  std::vector<Row> mpi(int P, int threads, const std::string& placement, const std::vector<std::string>& cmd,
                       const std::string& what) {
    std::vector<std::string> argv = {o_.mpiexec, "-n", std::to_string(P)};
    Env set;
    std::vector<std::string> unset;
    if (placement == "close" || placement == "pcore") {
      argv.insert(argv.end(), {"--map-by", "slot:PE=" + std::to_string(threads), "--bind-to", "core"});
      place("close", set, unset);
    } else {
      argv.insert(argv.end(), {"--oversubscribe", "--bind-to", "none"});
      place(placement == "omp-only" ? "close" : "none", set, unset);
    }
    set.emplace_back("OMP_NUM_THREADS", std::to_string(placement == "pcore" ? threads - 1 : threads));
    for (const auto& [k, v] : set) argv.insert(argv.end(), {"-x", k});
    if (geteuid() == 0) set.insert(set.end(), {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}});
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return run(argv, set, unset, what);
  }

  std::vector<std::string> self_worker(const std::string& kind, const std::vector<std::string>& args) const {
    std::vector<std::string> v = self_;
    v.insert(v.end(), {"--worker", kind});
    v.insert(v.end(), args.begin(), args.end());
    return v;
  }

  // The placement a rank sweep uses for P ranks.
  std::string rank_placement(int P, int threads) const {
    if (o_.rank_placement != "auto") return o_.rank_placement;
    int nodes = 1;
    if (const char* n = std::getenv("SLURM_JOB_NUM_NODES")) nodes = std::max(1, std::atoi(n));
    return int64_t(P) * threads <= int64_t(available_cores()) * nodes ? "close" : "none";
  }

  double load_med() const { return load_.med(); }
  void reset_load() { load_ = Samples{}; }

 private:
  static void place(const std::string& placement, Env& set, std::vector<std::string>& unset) {
    if (placement == "close") {
      set.insert(set.end(), {{"OMP_PLACES", "cores"}, {"OMP_PROC_BIND", "close"}});
    } else {
      unset.insert(unset.end(), kOmpPlacementVars.begin(), kOmpPlacementVars.end());
    }
  }

  const Options& o_;
  std::vector<std::string> self_;
  BenchLock lock_;
  Samples load_;
};

bool has(const Options& o, const std::string& s) { return std::find(o.studies.begin(), o.studies.end(), s) != o.studies.end(); }

// Thread counts of round r: ascending on even rounds, descending on odd ones.
std::vector<int> round_order(const std::vector<int>& v, int r) {
  std::vector<int> o = v;
  if (r % 2) std::reverse(o.begin(), o.end());
  return o;
}

// Speedup and efficiency against the smallest thread count t0: speedup(t) = t0 time(t0) / time(t).
void add_scaling(Table& t, const std::vector<std::string>& group_cols) {
  std::map<std::string, std::pair<int, double>> base;  // group -> (t0, time(t0))
  auto group = [&](size_t i) {
    std::string g;
    for (const std::string& c : group_cols) g += t.str(i, c) + "|";
    return g;
  };
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const int th = int(t.num(i, "threads"));
    auto [it, fresh] = base.try_emplace(group(i), th, t.num(i, "time_s"));
    if (!fresh && th < it->second.first) it->second = {th, t.num(i, "time_s")};
  }
  const int cs = t.col("speedup"), ce = t.col("efficiency");
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const auto [t0, time0] = base[group(i)];
    const double s = double(t0) * time0 / t.num(i, "time_s");
    t.rows[i][size_t(cs)] = fmt(s, 4);
    t.rows[i][size_t(ce)] = fmt(s / t.num(i, "threads"), 4);
  }
}

std::string threads_list(const std::vector<int>& v) {
  std::string s;
  for (int t : v) s.append(s.empty() ? "" : ",").append(std::to_string(t));
  return s;
}

std::string dir_of_self() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, size_t(n));
  return p.substr(0, p.find_last_of('/'));
}

// ---- studies ----

Table study_gemm(const Options& o, Runner& run) {
  std::printf("[gemm] %zu shapes x hddp/openblas, threads %s, %d round(s), placement %s\n", o.gemm_shapes.size(),
              threads_list(o.threads).c_str(), o.reps, o.placement.c_str());
  std::map<std::string, Row> info;  // key -> fields
  std::map<std::string, Samples> time, util;
  std::vector<std::string> order;
  std::string shapes;
  for (const std::string& s : o.gemm_shapes) shapes.append(shapes.empty() ? "" : ",").append(s);
  run.reset_load();
  for (int r = 0; r < o.reps; ++r)
    for (int t : round_order(o.threads, r)) {
      const auto rows = run.worker("gemm", {"--shapes", shapes, "--min-time", fmt(o.min_time)}, t, o.placement,
                                   "gemm round " + std::to_string(r + 1) + "/" + std::to_string(o.reps) + ", " +
                                       std::to_string(t) + " thread(s)");
      for (const Row& row : rows) {
        if (row.at("kind") != "gemm") continue;
        if (int(num(row, "threads")) != t)
          throw Failure("gemm worker ran " + row.at("threads") + " threads, asked for " + std::to_string(t));
        const std::string key = row.at("shape") + "|" + row.at("backend") + "|" + std::to_string(t);
        if (!info.count(key)) order.push_back(key), info[key] = row;
        time[key].add(num(row, "time_s"));
        util[key].add(num(row, "cpu_util"));
      }
    }
  Table tab;
  tab.header = {"shape", "trans", "M", "N", "K", "backend", "placement", "threads", "reps", "time_s", "time_min_s",
                "time_max_s", "gflops", "speedup", "efficiency", "cpu_util", "load"};
  for (const std::string& k : order) {
    const Row& i = info[k];
    const double flops = 2.0 * num(i, "M") * num(i, "N") * num(i, "K");
    tab.rows.push_back({i.at("shape"), i.at("trans"), i.at("M"), i.at("N"), i.at("K"), i.at("backend"), o.placement,
                        i.at("threads"), std::to_string(time[k].v.size()), fmt(time[k].med()), fmt(time[k].min()),
                        fmt(time[k].max()), fmt(flops / time[k].med() * 1e-9, 5), "", "", fmt(util[k].med(), 3),
                        fmt(run.load_med(), 3)});
  }
  std::stable_sort(tab.rows.begin(), tab.rows.end(), [&](const auto& a, const auto& b) {
    return std::tie(a[0], a[5]) < std::tie(b[0], b[5]) || (std::tie(a[0], a[5]) == std::tie(b[0], b[5]) && std::stoi(a[7]) < std::stoi(b[7]));
  });
  add_scaling(tab, {"shape", "backend", "placement"});
  return tab;
}

Table study_step(const Options& o, Runner& run) {
  std::printf("[step] wide MLP step, hddp/openblas GEMM, threads %s, %d round(s), placement %s\n",
              threads_list(o.threads).c_str(), o.reps, o.placement.c_str());
  std::map<std::string, Samples> time, util;
  std::map<std::string, std::string> gflop;
  run.reset_load();
  for (int r = 0; r < o.reps; ++r)
    for (int t : round_order(o.threads, r)) {
      const auto rows = run.worker("step", {"--min-time", fmt(std::max(o.min_time, 0.01) * 1.5)}, t, o.placement,
                                   "step round " + std::to_string(r + 1) + "/" + std::to_string(o.reps) + ", " +
                                       std::to_string(t) + " thread(s)");
      for (const Row& row : rows) {
        if (row.at("kind") != "step") continue;
        const std::string key = row.at("backend") + "|" + std::to_string(t);
        time[key].add(num(row, "time_s"));
        util[key].add(num(row, "cpu_util"));
        gflop[key] = row.at("gflop");
      }
    }
  Table tab;
  tab.header = {"model", "backend", "placement", "threads", "reps", "time_s", "time_min_s", "time_max_s", "gflops",
                "speedup", "efficiency", "cpu_util", "load"};
  for (const std::string b : {"hddp", "openblas"})
    for (int t : o.threads) {
      const std::string k = b + "|" + std::to_string(t);
      if (!time.count(k)) throw Failure("step worker reported nothing for " + k);
      tab.rows.push_back({"wide", b, o.placement, std::to_string(t), std::to_string(time[k].v.size()), fmt(time[k].med()),
                          fmt(time[k].min()), fmt(time[k].max()), fmt(std::stod(gflop[k]) / time[k].med(), 5), "", "",
                          fmt(util[k].med(), 3), fmt(run.load_med(), 3)});
    }
  add_scaling(tab, {"backend", "placement"});
  return tab;
}

// The data-parallel rows of one worker run, averaged over its ranks, per cap.
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
      if (k.size() > 2 && k.compare(k.size() - 2, 2, "_s") == 0) f[k].add(num(r, k));
    if (r.count("beta_s_per_byte")) f["beta_s_per_byte"].add(num(r, "beta_s_per_byte"));
    caps_seen.insert(r.at("cap_bytes") + "/" + r.at("first_cap_bytes"));
    f["compute_s"].add(num(r, "step_s") - num(r, "exposed_s"));
  }
  std::vector<std::string> row(const std::string& placement, double load) const {
    auto med = [&](const std::string& k) { return f.count(k) ? fmt(f.at(k).med()) : std::string("nan"); };
    std::string seen;
    for (const std::string& c : caps_seen) seen.append(seen.empty() ? "" : ";").append(c);
    // The caps of the round with the median step are not tracked; report the first round's
    // (auto may pick different caps in different rounds: caps_seen lists them all).
    return {"wide", first.at("ranks"), first.at("threads"), placement, first.at("progress"), first.at("cap"),
            first.at("cap_bytes"), first.at("first_cap_bytes"), first.at("buckets"),
            std::to_string(f.at("step_s").v.size()), first.at("steps"), med("step_s"), fmt(f.at("step_s").min()),
            fmt(f.at("step_s").max()), med("compute_s"), med("exposed_s"), fmt(f.at("exposed_s").min()),
            fmt(f.at("exposed_s").max()), med("comm_s"), med("forward_s"), med("backward_s"), med("optim_s"),
            med("predicted_exposed_s"), med("predicted_comm_s"), med("alpha_s"), med("beta_s_per_byte"), seen, fmt(load, 3)};
  }
};

Table study_ranks(const Options& o, Runner& run) {
  std::printf("[ranks] data-parallel wide-MLP step, ranks 1..%d x %d thread(s), 25 MiB buckets, %d round(s)\n", o.ranks,
              o.rank_threads, o.reps);
  std::map<int, DdpAgg> agg;
  run.reset_load();
  for (int r = 0; r < o.reps; ++r)
    for (int P = 1; P <= o.ranks; ++P) {
      const std::string pl = run.rank_placement(P, o.rank_threads);
      const auto rows = run.mpi(P, o.rank_threads, pl,
                                run.self_worker("ddp", {"--caps", "25", "--steps", std::to_string(o.steps)}),
                                "ranks round " + std::to_string(r + 1) + "/" + std::to_string(o.reps) + ", " +
                                    std::to_string(P) + " rank(s) (" + pl + ")");
      for (const auto& [cap, m] : ddp_rank_means(rows)) agg[P].add(m);
    }
  Table tab;
  tab.header = kDdpHeader;
  for (int P = 1; P <= o.ranks; ++P) {
    if (!agg.count(P)) throw Failure("ddp worker reported nothing for " + std::to_string(P) + " rank(s)");
    tab.rows.push_back(agg[P].row(run.rank_placement(P, o.rank_threads), run.load_med()));
  }
  return tab;
}

Table study_buckets(const Options& o, Runner& run) {
  if (o.ranks < 2) throw UsageError("--studies buckets needs --ranks 2 or more");
  std::printf("[buckets] wide-MLP step, caps auto/1/25 MiB, ranks 2..%d x %d thread(s), %d round(s)\n", o.ranks,
              o.rank_threads, o.reps);
  const std::vector<std::string> caps = {"auto", "1", "25"};
  std::map<std::pair<int, std::string>, DdpAgg> agg;
  run.reset_load();
  for (int r = 0; r < o.reps; ++r)
    for (int P = 2; P <= o.ranks; ++P) {
      const std::string pl = run.rank_placement(P, o.rank_threads);
      const auto rows = run.mpi(P, o.rank_threads, pl,
                                run.self_worker("ddp", {"--caps", "auto,1,25", "--steps", std::to_string(o.steps)}),
                                "buckets round " + std::to_string(r + 1) + "/" + std::to_string(o.reps) + ", " +
                                    std::to_string(P) + " ranks (" + pl + ")");
      for (const auto& [cap, m] : ddp_rank_means(rows)) agg[{P, cap}].add(m);
    }
  Table tab;
  tab.header = kDdpHeader;
  for (int P = 2; P <= o.ranks; ++P)
    for (const std::string& c : caps) {
      if (!agg.count({P, c})) throw Failure("ddp worker reported nothing for cap " + c + " at " + std::to_string(P) + " ranks");
      tab.rows.push_back(agg[{P, c}].row(run.rank_placement(P, o.rank_threads), run.load_med()));
    }
  return tab;
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
  const std::string poly_train = o.poly_train.empty() ? dir_of_self() + "/../drivers/poly_train" : o.poly_train;
  if (access(poly_train.c_str(), X_OK) != 0)
    throw Failure("poly study: no poly_train at '" + poly_train + "' (build it, or pass --poly-train PATH)");
  // Threads at 1 rank, then ranks at --rank-threads.
  std::vector<std::pair<int, int>> runs;
  for (int t : o.threads) runs.emplace_back(1, t);
  for (int P = 1; P <= o.ranks; ++P)
    if (std::find(runs.begin(), runs.end(), std::make_pair(P, o.rank_threads)) == runs.end()) runs.emplace_back(P, o.rank_threads);
  std::printf("[poly] poly_train %s: threads %s at 1 rank, ranks 1..%d x %d thread(s), %d round(s)\n", o.poly_args.c_str(),
              threads_list(o.threads).c_str(), o.ranks, o.rank_threads, o.reps);
  const std::string scratch = o.out + "/poly-run", stats = scratch + "/stats.json";
  mkdir(scratch.c_str(), 0755);
  std::map<std::pair<int, int>, std::map<std::string, Samples>> agg;
  run.reset_load();
  for (int r = 0; r < o.reps; ++r)
    for (const auto& [P, t] : r % 2 ? std::vector<std::pair<int, int>>(runs.rbegin(), runs.rend()) : runs) {
      std::vector<std::string> cmd = {poly_train, "--log-every", "1000000000"};
      std::istringstream in(o.poly_args);
      for (std::string w; in >> w;) cmd.push_back(w);
      cmd.insert(cmd.end(), {"--threads", std::to_string(t), "--stats-json", stats, "--no-plot", "--out", scratch});
      const std::string pl = P == 1 && t == 1 ? o.placement : run.rank_placement(P, t);
      std::remove(stats.c_str());  // no stale file from the previous run
      run.mpi(P, t, pl, cmd,
              "poly round " + std::to_string(r + 1) + "/" + std::to_string(o.reps) + ", " + std::to_string(P) +
                  " rank(s) x " + std::to_string(t) + " thread(s)");
      const auto [epochs, m] = read_poly_stats(stats);
      auto& a = agg[{P, t}];
      a["forward_s"].add(m[0]), a["backward_s"].add(m[1]), a["optim_s"].add(m[2]), a["step_s"].add(m[3]);
      a["comm_s"].add(m[4]), a["exposed_s"].add(m[5]), a["compute_s"].add(m[3] - m[5]), a["epochs"].add(epochs);
    }
  Table tab;
  tab.header = {"ranks", "threads", "placement", "reps", "epochs", "step_s", "step_min_s", "step_max_s", "compute_s",
                "exposed_s", "comm_s", "forward_s", "backward_s", "optim_s", "speedup", "efficiency", "load"};
  for (const auto& [P, t] : runs) {
    auto& a = agg[{P, t}];
    tab.rows.push_back({std::to_string(P), std::to_string(t), P == 1 && t == 1 ? o.placement : run.rank_placement(P, t),
                        std::to_string(a["step_s"].v.size()), fmt(a["epochs"].med()), fmt(a["step_s"].med()),
                        fmt(a["step_s"].min()), fmt(a["step_s"].max()), fmt(a["compute_s"].med()), fmt(a["exposed_s"].med()),
                        fmt(a["comm_s"].med()), fmt(a["forward_s"].med()), fmt(a["backward_s"].med()),
                        fmt(a["optim_s"].med()), "", "", fmt(run.load_med(), 3)});
  }
  // Speedup / efficiency over the 1-rank thread sweep only.
  double t0 = 0, time0 = 0;
  for (size_t i = 0; i < tab.rows.size(); ++i)
    if (tab.num(i, "ranks") == 1 && (t0 == 0 || tab.num(i, "threads") < t0)) t0 = tab.num(i, "threads"), time0 = tab.num(i, "step_s");
  for (size_t i = 0; i < tab.rows.size(); ++i)
    if (tab.num(i, "ranks") == 1) {
      const double s = t0 * time0 / tab.num(i, "step_s");
      tab.rows[i][size_t(tab.col("speedup"))] = fmt(s, 4);
      tab.rows[i][size_t(tab.col("efficiency"))] = fmt(s / tab.num(i, "threads"), 4);
    }
  for (const char* f : {"/eval.csv", "/loss.csv", "/stats.json"}) std::remove((scratch + f).c_str());
  rmdir(scratch.c_str());
  return tab;
}

Table study_placement(const Options& o, Runner& run) {
  const int cores = available_cores();
  std::printf("[placement] OMP_PLACES=cores OMP_PROC_BIND=close vs unset: GEMM and step at threads %s; DDP step at 2 ranks\n",
              threads_list(o.threads).c_str());
  std::map<std::string, Samples> time, util, exposed;
  std::map<std::string, std::vector<std::string>> info;  // key -> bench, config, placement, progress, ranks, threads
  std::vector<std::string> order;
  auto note = [&](const std::string& key, std::vector<std::string> fields) {
    if (!info.count(key)) order.push_back(key), info[key] = std::move(fields);
  };
  std::string affinity;
  run.reset_load();
  const int ddp_threads = std::max(1, std::min(o.rank_threads, cores / 2));
  for (int r = 0; r < o.reps; ++r) {
    for (int t : round_order(o.threads, r))
      for (const std::string pl : {"close", "none"}) {
        const std::string tag = "round " + std::to_string(r + 1) + "/" + std::to_string(o.reps) + ", " + std::to_string(t) +
                                " thread(s), " + pl;
        for (const Row& row : run.worker("gemm", {"--shapes", "fwd,sq2048", "--backends", "hddp", "--min-time", fmt(o.min_time)},
                                         t, pl, "placement gemm " + tag)) {
          const std::string key = "gemm|" + row.at("shape") + "|" + pl + "|" + std::to_string(t);
          note(key, {"gemm", row.at("shape") + "_hddp", pl, "", "1", std::to_string(t)});
          time[key].add(num(row, "time_s")), util[key].add(num(row, "cpu_util"));
        }
        for (const Row& row : run.worker("step", {"--backends", "hddp", "--min-time", fmt(o.min_time * 1.5)}, t, pl,
                                         "placement step " + tag)) {
          const std::string key = "step|" + pl + "|" + std::to_string(t);
          note(key, {"step", "wide_hddp", pl, "", "1", std::to_string(t)});
          time[key].add(num(row, "time_s")), util[key].add(num(row, "cpu_util"));
        }
      }
    // Data parallel at 2 ranks: binding none / per-rank cores / OpenMP-only, progress test and
    // thread; the progress thread on its own core needs 2 cores per rank.
    if (o.ranks >= 2) {
      std::vector<std::pair<std::string, std::string>> cfgs;
      for (const std::string pr : {"test", "thread"})
        for (const std::string pl : {"none", "close", "omp-only"})
          if (pl != "close" || 2 * ddp_threads <= cores) cfgs.emplace_back(pl, pr);
      if (2 * std::max(2, ddp_threads) <= cores) cfgs.emplace_back("pcore", "thread");
      for (const auto& [pl, pr] : cfgs) {
        const int th = pl == "pcore" ? std::max(2, ddp_threads) : ddp_threads;
        std::vector<std::string> args = {"--caps", "25", "--steps", std::to_string(o.steps), "--progress", pr,
                                         "--show-affinity", r == 0 ? "1" : "0"};
        if (pl == "pcore") args.insert(args.end(), {"--progress-core", "1"});
        const auto rows = run.mpi(2, th, pl, run.self_worker("ddp", args),
                                  "placement ddp round " + std::to_string(r + 1) + "/" + std::to_string(o.reps) + ", 2 ranks, " +
                                      pl + ", progress " + pr);
        if (r == 0) {
          affinity += "# 2 ranks, placement " + pl + ", progress " + pr + ", " + std::to_string(th) + " core(s) per rank\n";
          for (const Row& row : rows)
            if (row.at("kind") == "affinity")
              affinity += "rank " + row.at("rank") + " thread " + row.at("thread") + " cpus " + row.at("cpus") + "\n";
        }
        for (const auto& [cap, m] : ddp_rank_means(rows)) {
          const std::string key = "ddp|" + pl + "|" + pr;
          note(key, {"ddp", "wide_2_ranks", pl, pr, "2", m.at("threads")});
          time[key].add(num(m, "step_s")), exposed[key].add(num(m, "exposed_s"));
        }
      }
    }
  }
  Table tab;
  tab.header = {"bench", "config", "placement", "progress", "ranks", "threads", "reps", "time_s", "time_min_s",
                "time_max_s", "exposed_s", "cpu_util", "load"};
  for (const std::string& k : order) {
    std::vector<std::string> row = info[k];
    row.insert(row.end(), {std::to_string(time[k].v.size()), fmt(time[k].med()), fmt(time[k].min()), fmt(time[k].max()),
                           exposed.count(k) ? fmt(exposed[k].med()) : "nan", util.count(k) ? fmt(util[k].med(), 3) : "nan",
                           fmt(run.load_med(), 3)});
    tab.rows.push_back(row);
  }
  if (!affinity.empty()) {
    std::ofstream f(o.out + "/placement_affinity.txt");
    f << "# Cpus_allowed_list of every thread of each rank (first round), /proc/self/task/*/status\n" << affinity;
  }
  return tab;
}

const std::vector<Study>& studies() {
  static const std::vector<Study> v = {
      {"gemm",
       "GEMM at the wide MLP's linear-layer shapes, hddp vs OpenBLAS, vs threads:\n"
       "fwd (256,1024,1024) NT, dx (256,1024,1024) NN, dw (1024,1024,256) TN, sq2048",
       true, study_gemm, plot_gemm, table_gemm},
      {"step",
       "one training step of the wide MLP (1-1024-1024-1024-1, tanh, batch 256, Adam),\n"
       "hddp vs OpenBLAS GEMM, vs threads",
       true, study_step, plot_step, table_step},
      {"ranks",
       "the wide-MLP step data-parallel, mpiexec -n 1..R (batch 256 per rank, 25 MiB\n"
       "buckets): compute and exposed communication per step",
       true, study_ranks, plot_ranks, table_ranks},
      {"poly", "poly_train --stats-json (--poly-args): threads at 1 rank, then ranks 1..R", true, study_poly, plot_poly,
       table_poly},
      {"buckets",
       "the data-parallel wide-MLP step at ranks 2..R with bucket caps auto, 1 MiB and\n"
       "25 MiB, one model each, steps in rotating order: exposed communication, step\n"
       "time, and the auto-sizer's prediction",
       true, study_buckets, plot_buckets, table_buckets},
      {"placement",
       "OMP_PLACES=cores OMP_PROC_BIND=close vs unset for GEMM and the step at every\n"
       "thread count; the DDP step at 2 ranks with --progress test|thread under\n"
       "mpiexec binding none / per-rank cores / OpenMP binding only, and with the\n"
       "progress thread on its own core where the cores allow",
       false, study_placement, plot_placement, table_placement},
  };
  return v;
}

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
    if (part.empty()) continue;
    if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) throw Failure("--out: cannot create '" + cur + "'");
  }
  if (access(dir.c_str(), W_OK) != 0) throw Failure("--out: '" + dir + "' is not a writable directory");
}

std::string machine_note() {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  return cpu_model() + ", " + std::to_string(available_cores()) + " cores (" + host + "), hddp kernel " +
         hddp::gemm_kernel_name();
}

void draw(const Options& o, const std::string& note) {
  if (!hddp::gnuplot::available()) {
    std::fprintf(stderr, "scaling: warning: gnuplot not found (HDDP_GNUPLOT or PATH): no PDFs; the CSVs hold the results. "
                         "Redraw later with --plot-only --out %s\n", o.out.c_str());
    return;
  }
  for (const Study& s : studies()) {
    const std::string csv = o.out + "/" + s.name + ".csv";
    if (!file_exists(csv) || (!o.plot_only && !has(o, s.name))) continue;
    s.plot(read_csv(csv), o.out + "/" + s.name + ".pdf", note);
    std::printf("[%s] wrote %s/%s.pdf\n", s.name, o.out.c_str(), s.name);
  }
}

// The CSVs in dir as markdown tables on stdout (--tables).
void print_tables(const std::string& dir) {
  int n = 0;
  for (const Study& s : studies()) {
    const std::string csv = std::string(s.name) + ".csv";
    if (!file_exists(dir + "/" + csv)) continue;
    s.table(read_csv(dir + "/" + csv), csv);
    ++n;
  }
  if (n == 0) throw Failure("--tables: no study CSVs in '" + dir + "'");
}

int orchestrate(const Options& o) {
  if (o.tables) {
    print_tables(o.out);
    return 0;
  }
  mkdirs(o.out);
  if (o.plot_only) {
    std::string note = machine_note();
    std::ifstream m(o.out + "/machine.txt");
    std::string first;
    if (std::getline(m, first) && first.rfind("machine: ", 0) == 0) note = first.substr(9);
    draw(o, note);
    return 0;
  }
  const std::string note = machine_note();
  {
    std::ofstream m(o.out + "/machine.txt");
    const std::time_t now = std::time(nullptr);
    char date[64];
    std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", std::localtime(&now));
    m << "machine: " << note << "\n"
      << "date: " << date << "\n"
      << "load average at start: " << load_average() << "\n"
      << "threads: " << threads_list(o.threads) << "; ranks 1.." << o.ranks << " x " << o.rank_threads << " thread(s)\n"
      << "reps: " << o.reps << ", min-time " << o.min_time << " s, steps " << o.steps << "\n";
  }
  Runner run(o, self_command());
  std::printf("scaling: %s\nscaling: studies", note.c_str());
  for (const std::string& s : o.studies) std::printf(" %s", s.c_str());
  std::printf(" -> %s\n", o.out.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  for (const std::string& name : o.studies) {
    const Table tab = find_study(name)->run(o, run);
    write_csv(o.out + "/" + name + ".csv", tab);
    std::printf("[%s] wrote %s/%s.csv (%zu rows)\n", name.c_str(), o.out.c_str(), name.c_str(), tab.rows.size());
  }
  {
    std::ofstream m(o.out + "/machine.txt", std::ios::app);
    m << "load average at end: " << load_average() << "\n";
  }
  if (o.plot) draw(o, note);
  std::printf("scaling: done in %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
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
  Options o;
  try {
    o = parse_options(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "scaling: error: %s\nTry 'scaling --help'.\n", e.what());
    return 2;
  }
  if (o.help) {
    std::fputs(help_text().c_str(), stdout);
    return 0;
  }
  try {
    return orchestrate(o);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "scaling: error: %s\nTry 'scaling --help'.\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scaling: error: %s\n", e.what());
    return 1;
  }
}
