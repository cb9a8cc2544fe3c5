// Proves the sanitizer build catches what it is there to catch (test_sanitizer_canary, built
// only with -DHDDP_SANITIZE=ON): MPI is initialised as in every driver, so Open MPI's own
// leaks are present, then the chosen fault happens in hddp's code.
//   canary clean     nothing wrong: must exit 0 (the suppressions cover Open MPI)
//   canary overflow  heap-buffer-overflow: AddressSanitizer must stop it
//   canary leak      a leak in hddp's code: LeakSanitizer must report it (not suppressed)
//   canary ubsan     signed integer overflow: UBSan must stop it
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <hddp/distributed/mpi_env.h>

namespace {
volatile int sink = 0;  // keeps the faults from being optimised away

int* leaked = nullptr;
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "clean" && mode != "overflow" && mode != "leak" && mode != "ubsan") {
    std::fprintf(stderr, "usage: canary clean|overflow|leak|ubsan\n");
    return 2;
  }
  {
    hddp::mpi::Env env(&argc, &argv, MPI_THREAD_FUNNELED);
    std::vector<int> v(8, 1);
    if (mode == "overflow") {
      int* p = v.data();
      sink = p[v.size() + static_cast<size_t>(sink)];  // one past the end
    } else if (mode == "leak") {
      leaked = new int[64];
      std::memset(leaked, 1, 64 * sizeof(int));
      sink = leaked[3];
      leaked = nullptr;  // the last pointer to it is gone
    } else if (mode == "ubsan") {
      int big = 2147483600 + sink;
      big += 100 + static_cast<int>(v.size());  // signed overflow
      sink = big;
    }
  }
  std::printf("canary %s: done\n", mode.c_str());
  return 0;
}
