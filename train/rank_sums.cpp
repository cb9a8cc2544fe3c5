#include <hddp/train/rank_sums.h>

#include <hddp/core/util.h>
#include <hddp/kernels/check.h>

namespace hddp {
namespace {

void allreduce(const mpi::Env& env, Watchdog* watchdog, void* v, int n, MPI_Datatype type, const char* what) {
  MPI_Request req;
  HDDP_MPI(MPI_Iallreduce(MPI_IN_PLACE, v, n, type, MPI_SUM, env.comm(), &req));
  if (watchdog) watchdog->wait(&req, what);
  else HDDP_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
}

}  // namespace

RankSums::Totals RankSums::reduce(const mpi::Env& env, Watchdog* watchdog, const char* what) {
  // The names must agree before the values travel (a different count would mismatch the
  // collective): their hash, as min of h and of ~h over the ranks.
  uint64_t h = fnv1a64(nullptr, 0);
  for (const auto& [name, x] : local_) h = fnv1a64(name.data(), name.size() + 1, h);
  uint64_t lo_hi[2] = {h, ~h};
  MPI_Request req;
  HDDP_MPI(MPI_Iallreduce(MPI_IN_PLACE, lo_hi, 2, MPI_UINT64_T, MPI_MIN, env.comm(), &req));
  if (watchdog) watchdog->wait(&req, what);
  else HDDP_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
  HDDP_CHECK(lo_hi[0] == h && ~lo_hi[1] == h, "RankSums: the ranks reduced different metric names (" << what << ")");
  std::vector<double> v;
  for (const auto& [name, x] : local_) v.push_back(x);
  allreduce(env, watchdog, v.data(), int(v.size()), MPI_DOUBLE, what);
  Totals t;
  size_t i = 0;
  for (const auto& [name, x] : local_) t[name] = v[i++];
  local_.clear();
  return t;
}

void sum_over_ranks(const mpi::Env& env, Watchdog* watchdog, std::vector<int64_t>& v, const char* what) {
  allreduce(env, watchdog, v.data(), int(v.size()), MPI_INT64_T, what);
}

void sum_over_ranks(const mpi::Env& env, Watchdog* watchdog, std::vector<double>& v, const char* what) {
  allreduce(env, watchdog, v.data(), int(v.size()), MPI_DOUBLE, what);
}

}  // namespace hddp
