// bench_peak: the FMA-throughput probe as a table, per instruction set and precision, on one
// thread and on all of OMP_NUM_THREADS. Usage: OMP_NUM_THREADS=16 build/bench/bench_peak
#include <omp.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <vector>

#include "peak.h"

int main(int argc, char** argv) {
  using namespace hddp::bench;
  CLI::App app("Measures the FMA throughput (GFLOP/s, an FMA = 2 flops) per instruction set and precision\n"
               "on 1 thread and on OMP_NUM_THREADS threads; bench_gemm's peak_pct column divides by the\n"
               "widest instruction set's figure.",
               "bench_peak");
  double seconds = 0.5;
  app.add_option("--seconds", seconds, "time per measurement")->capture_default_str()->check(CLI::Range(0.01, 60.0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // --help: the text, 0; bad input: the message, 106 and up
    return rc == 0 ? 0 : 2;
  }
  std::vector<int> threads{1};
  if (omp_get_max_threads() > 1) threads.push_back(omp_get_max_threads());
  std::printf("| isa | precision | threads | GFLOP/s | per thread |\n|---|---|---|---|---|\n");
  for (Isa isa : std::vector<Isa>{Isa::Avx2, Isa::Avx512})
    for (bool dbl : std::vector<bool>{false, true})
      for (int t : threads) {
        if (!isa_supported(isa)) {
          std::printf("| %s | %s | %d | not supported by this CPU | |\n", to_string(isa), dbl ? "double" : "float", t);
          continue;
        }
        const double g = fma_peak_gflops(isa, dbl, t, seconds);
        std::printf("| %s | %s | %d | %.1f | %.1f |\n", to_string(isa), dbl ? "double" : "float", t, g, g / t);
      }
  return 0;
}
