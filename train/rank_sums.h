#pragma once
// Metrics reduced over the ranks: each rank adds what it saw (a loss summed over its samples,
// their count, correct predictions...), reduce() sums every value over the ranks in one
// MPI_Allreduce, waited through the stall watchdog. Every rank must add the same names.
//
//   RankSums m;
//   m.add("loss", loss_sum); m.add("samples", rows); m.add("correct", hits);
//   const RankSums::Totals t = m.reduce(env, &watchdog, "the test metrics");
//   double accuracy = t.at("correct") / t.at("samples");
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/watchdog.h>

namespace hddp {

class RankSums {
 public:
  using Totals = std::map<std::string, double>;
  // Adds v to this rank's value of `name` (created at 0).
  void add(const std::string& name, double v) { local_[name] += v; }
  // Collective: every name's sum over the ranks (the same on every rank); clears this rank's
  // values. `what` names the collective in a stall report. A rank that added other names
  // than rank 0 makes it throw hddp::Error on every rank.
  Totals reduce(const mpi::Env& env, Watchdog* watchdog, const char* what);

 private:
  std::map<std::string, double> local_;
};

// Element-wise sums over the ranks, in place (counts: a confusion matrix, per-class hits).
void sum_over_ranks(const mpi::Env& env, Watchdog* watchdog, std::vector<int64_t>& v, const char* what);
void sum_over_ranks(const mpi::Env& env, Watchdog* watchdog, std::vector<double>& v, const char* what);

}  // namespace hddp
