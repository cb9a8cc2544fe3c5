// bench_allreduce's --table-csv output: bench/at_scale's allreduce table, the slowest rank's
// median of MPI_Allreduce and of the reducer's nonblocking call per size (reductions included).
#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "bench/allreduce/cases.h"
#include "bench/at_scale/step_replay.h"
#include <hddp/core/util.h>

namespace hddp::bench::allreduce {

namespace {

struct TableRow {
  const char* op;
  int ranks;
  int64_t bytes;
  double seconds;
};
std::map<std::pair<std::string, int64_t>, TableRow> g_table;  // the last run of each (op, bytes)

}  // namespace

void table_row(const char* op, int ranks, int64_t bytes, double seconds) {
  g_table[{op, bytes}] = {op, ranks, bytes, seconds};
}

void write_table_csv(const std::string& path) {
  std::string csv = std::string(kAllreduceTableHeader) + "\n";
  char line[128];
  for (const auto& [key, r] : g_table) {
    std::snprintf(line, sizeof line, "%s,%d,%lld,%.9g,1\n", r.op, r.ranks, (long long)r.bytes, r.seconds);
    csv += line;
  }
  write_file_atomic(path, csv);
}

}  // namespace hddp::bench::allreduce
