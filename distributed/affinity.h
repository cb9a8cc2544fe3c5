#pragma once
// Placement: where a rank's OpenMP threads may run, and the check that ranks on one host do
// not take turns on the same cores.
//
// Why: a rank whose threads are pinned to cores another rank's threads are pinned to shares
// those cores while Open MPI busy-polls; a step then becomes hundreds of times slower, with
// nothing else to show for it (measured: two ranks per node with OMP_PLACES=cores
// OMP_PROC_BIND=close and mpiexec --bind-to none put every rank's thread on core 0: 12 ms per
// tutorial step instead of 75 us). The report says where every thread is; the warnings name the ranks and
// the fix.
//
// sample_placement() and gather_placement() look at this process; placement_warnings() and
// describe() are pure, so they are unit-tested on made-up placements.
#include <mpi.h>

#include <string>
#include <vector>

namespace hddp {

struct ThreadPlacement {
  int thread = 0;            // omp_get_thread_num()
  int cpu = -1;              // the CPU it ran on when sampled (sched_getcpu)
  std::vector<int> allowed;  // the CPUs it may run on (its affinity mask), ascending
};

struct RankPlacement {
  int rank = 0;
  std::string host;          // gethostname(): ranks with the same host share its CPUs
  std::string node;          // Slurm's node name ($SLURMD_NODENAME), else the host name
  int usable_cpus = 0;       // CPUs the rank's cpuset allows (a container's, a Slurm job's
                             // cgroup), else the host's online CPUs: what no binding restricts
  std::vector<int> cpus;     // the CPUs the rank may use: the union of its OpenMP places, or
                             // its affinity mask when OpenMP does not bind; ascending
  std::vector<ThreadPlacement> threads;  // one per thread of an OpenMP team of the default size

  std::vector<int> thread_cpus() const;  // union of the threads' allowed CPUs, ascending
  // True when the threads may not use every usable CPU (Open MPI, srun, taskset or OpenMP bound
  // them): then the kernel cannot move them off a busy core.
  bool pinned() const { return int(thread_cpus().size()) < usable_cpus; }
};

// This process, as rank `rank`: runs one OpenMP parallel region of omp_get_max_threads()
// threads (call it after omp_set_num_threads).
RankPlacement sample_placement(int rank);

// Every rank's sample_placement(), on `root` (empty elsewhere). Collective over `comm`.
std::vector<RankPlacement> gather_placement(MPI_Comm comm, int root = 0);

// "rank 1/3 on node n2 (host vm): CPUs 1; 1 OpenMP thread: t0 on CPU 1 (may use 1)"
std::string describe(const RankPlacement& p, int size);

// Problems with a placement, one message each, empty when there are none:
//   - a rank runs more OpenMP threads than it has CPUs (its threads take turns);
//   - pinned ranks on the same host whose CPUs overlap, with more threads among them than
//     those CPUs (they take turns). Ranks whose threads may use every usable CPU are not
//     pinned and take no part: the kernel spreads them (3 ranks on 2 cores under plain mpiexec
//     is a choice, not a placement error).
// Each message names the ranks, the host and the CPUs, and says what to change.
std::vector<std::string> placement_warnings(const std::vector<RankPlacement>& ranks);

// "0-3,8,10-11" <-> {0,1,2,3,8,10,11} (the kernel's cpulist format, as in
// /sys/devices/system/cpu/online and Cpus_allowed_list). parse_cpu_list throws hddp::Error on
// anything else.
std::string cpu_list(const std::vector<int>& cpus);
std::vector<int> parse_cpu_list(const std::string& s);

}  // namespace hddp
