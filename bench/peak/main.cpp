// bench_peak: the FMA-throughput probe as a table, per instruction set and precision, on one
// thread and on all of OMP_NUM_THREADS. Usage: OMP_NUM_THREADS=16 build/bench/bench_peak
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "peak.h"

int main(int argc, char** argv) {
  using namespace hddp::bench;
  if (argc > 1) {
    const bool help = !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h");
    std::fprintf(help ? stdout : stderr,
                 "usage: bench_peak\n"
                 "  Measures the FMA throughput (GFLOP/s, an FMA = 2 flops) per instruction set\n"
                 "  and precision on 1 thread and on OMP_NUM_THREADS threads; bench_gemm's\n"
                 "  peak_pct column divides by the widest instruction set's figure.\n");
    return help ? 0 : 2;
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
        const double g = fma_peak_gflops(isa, dbl, t, 0.5);
        std::printf("| %s | %s | %d | %.1f | %.1f |\n", to_string(isa), dbl ? "double" : "float", t, g, g / t);
      }
  return 0;
}
