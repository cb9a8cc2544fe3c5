// bench/scaling: thread and rank scaling studies of hddp in one command, CSV + PDF.
// Run `scaling --help`. Design: this program is the orchestrator and, started again as
// `scaling --worker KIND` (workers.cpp), the measurement worker: one process per thread count
// (OpenMP reads OMP_NUM_THREADS / OMP_PLACES / OMP_PROC_BIND at start), or mpiexec -n P of it
// for the rank sweeps. The studies are in studies.cpp, the PDFs and tables in plots.cpp; this
// file is the command line and the run of the chosen studies.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common.h"
#include <hddp/core/util.h>
#include <hddp/distributed/mpi_env.h>
#include "common/gnuplot.h"
#include "common/options.h"
#include <hddp/kernels/gemm.h>
#include "plots.h"
#include "studies.h"
#include "workers.h"

namespace scaling {
namespace {

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
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Failure("--out: cannot create '" + dir + "': " + ec.message());
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
