// bench_peak: the FMA-throughput probe as a table, per instruction set and precision, on one
// thread and on all of OMP_NUM_THREADS; the bf16 dot-product rows (AVX512_BF16, AMX-BF16) beside
// the float ones. Usage: OMP_NUM_THREADS=16 build/bench/bench_peak
#include <omp.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "peak.h"

int main(int argc, char** argv) {
  using namespace hddp::bench;
  CLI::App app("Measures the FMA throughput (GFLOP/s, an FMA = 2 flops) per instruction set and precision\n"
               "on 1 thread and on OMP_NUM_THREADS threads; bench_gemm's peak_pct column divides by the\n"
               "widest instruction set's figure. The bf16 rows: vdpbf16ps (avx512bf16) and tdpbf16ps\n"
               "(amx-bf16), bf16 pairs into float accumulators, a product and its add = 2 flops.",
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
  for (Isa isa : std::vector<Isa>{Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16, Isa::AmxBf16}) {
    const std::vector<const char*> precisions =
        is_bf16(isa) ? std::vector<const char*>{"bf16"} : std::vector<const char*>{"float", "double"};
    for (const char* prec : precisions)
      for (int t : threads) {
        const std::string why = isa_unsupported_reason(isa);
        if (!why.empty()) {
          std::printf("| %s | %s | %d | %s | |\n", to_string(isa), prec, t, why.c_str());
          continue;
        }
        const double g = fma_peak_gflops(isa, std::string(prec) == "double", t, seconds);
        std::printf("| %s | %s | %d | %.1f | %.1f |\n", to_string(isa), prec, t, g, g / t);
      }
  }
  return 0;
}
