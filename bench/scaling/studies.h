#pragma once
// bench/scaling's studies (studies.cpp): each is a list of runs that sweep() repeats in
// interleaved rounds (round 1 of every run, then round 2, ..., in reverse order on odd rounds,
// so slow drifts of a shared machine's load hit every run alike), and the table of their
// medians over the rounds (min and max kept), written as <study>.csv. The orchestrator
// (main.cpp) parses the options, runs the chosen studies and draws their PDFs (plots.h).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common.h"

namespace scaling {

// Where the threads of a run may go. Close: OMP_PLACES=cores OMP_PROC_BIND=close (under
// mpiexec also --map-by slot:PE=N --bind-to core); None: the OMP variables unset (mpiexec
// --bind-to none); OmpOnly: mpiexec --bind-to none with the OMP variables; Pcore: Close, with
// OpenMP on threads-1 cores and the reducer's progress thread on the last; Auto (--rank-placement
// only): Close when ranks x threads fit the cores, else None.
enum class Placement { Auto, Close, None, OmpOnly, Pcore };
const char* to_string(Placement p);  // "auto" | "close" | "none" | "omp-only" | "pcore"

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

// "a,b,c"
std::string join(const std::vector<std::string>& v, const std::string& sep = ",");
std::string join(const std::vector<int>& v);

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

// Starts the runs of the studies, one at a time, each holding the bench lock (--lock).
class Runner {
 public:
  Runner(const Options& o, std::vector<std::string> self) : o_(o), self_(std::move(self)), lock_(o.lock, o.lock_wait) {}
  // `scaling --worker kind args` as a process (ranks 0) or under mpiexec -n ranks.
  Run worker(const std::string& kind, std::vector<std::string> args, int ranks, int threads, Placement pl,
             std::string what) const;
  Placement rank_placement(int P, int threads) const;  // --rank-placement, auto resolved for P x threads
  // Runs r; checks the exit code (a Failure naming `what`, the command and its output); returns
  // its @row lines.
  std::vector<Row> run(const Run& r, const std::string& what);

  Samples load;  // the 1-minute load average at every run of the current study

 private:
  const Options& o_;
  std::vector<std::string> self_;
  BenchLock lock_;
};

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
extern const std::vector<Study> kStudies;  // in the order of --studies all, the plots and --tables
std::vector<std::string> study_names(bool defaults_only);  // all, or the ones run without --studies

}  // namespace scaling
