// A downstream user of hddp::distributed: the sharding and the pure bucket planner (no MPI
// initialisation needed), and an MPI singleton's environment.
#include <cstdio>

#include <hddp/data/sampler.h>
#include <hddp/distributed/bucket_plan.h>
#include <hddp/distributed/mpi_env.h>

int main(int argc, char** argv) {
  const hddp::Shard s = hddp::shard_of(10, 1, 3);  // rows 4..6 of 10 over 3 ranks
  const std::vector<hddp::Bucket> b = hddp::assign_buckets({{"w", 0, 300}, {"b", 300, 20}}, 4, 1024, 1024);
  hddp::mpi::Env env(&argc, &argv);
  const bool ok = s.begin == 4 && s.count == 3 && b.size() == 2 && env.size() == 1;
  std::printf("consumer_distributed: shard [%lld, +%lld), %zu buckets, %d rank: %s\n", (long long)s.begin,
              (long long)s.count, b.size(), env.size(), ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
