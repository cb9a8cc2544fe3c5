#include <hddp/distributed/affinity.h>

#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <hddp/core/util.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/kernels/check.h>

namespace hddp {

namespace {

std::vector<int> mask_cpus(const cpu_set_t& set) {
  std::vector<int> v;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) v.push_back(c);
  return v;
}

std::vector<int> merge(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> u;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(u));
  return u;
}

// Gather encoding, one rank per string (host names hold no tab, CPU lists no ':' or ';'):
//   rank \t host \t node \t usable_cpus \t cpus \t thread:cpu:allowed;thread:cpu:allowed...
std::string encode(const RankPlacement& p) {
  std::ostringstream s;
  s << p.rank << '\t' << p.host << '\t' << p.node << '\t' << p.usable_cpus << '\t' << cpu_list(p.cpus) << '\t';
  for (size_t i = 0; i < p.threads.size(); ++i)
    s << (i ? ";" : "") << p.threads[i].thread << ':' << p.threads[i].cpu << ':' << cpu_list(p.threads[i].allowed);
  return s.str();
}

RankPlacement decode(const std::string& s) {
  const std::vector<std::string> f = split(s, '\t');
  HDDP_CHECK(f.size() == 6, "gather_placement: malformed record '" + s + "'");
  RankPlacement p;
  p.rank = std::stoi(f[0]), p.host = f[1], p.node = f[2], p.usable_cpus = std::stoi(f[3]);
  p.cpus = parse_cpu_list(f[4]);
  if (!f[5].empty())
    for (const std::string& t : split(f[5], ';')) {
      const std::vector<std::string> g = split(t, ':');
      HDDP_CHECK(g.size() == 3, "gather_placement: malformed thread record '" + t + "'");
      p.threads.push_back({std::stoi(g[0]), std::stoi(g[1]), parse_cpu_list(g[2])});
    }
  return p;
}

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// The CPUs this process's cpuset allows: the cgroup's (v2: cpuset.cpus.effective; v1:
// cpuset.effective_cpus), else the host's online CPUs. taskset, Open MPI and OpenMP restrict a
// process within this set; a container or a Slurm job's cgroup restricts the set itself.
std::vector<int> usable_cpu_list() {
  std::ifstream cg("/proc/self/cgroup");
  for (std::string line; std::getline(cg, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::string file;
    if (controllers.empty()) file = "/sys/fs/cgroup" + path + "/cpuset.cpus.effective";
    else if (("," + controllers + ",").find(",cpuset,") != std::string::npos)
      file = "/sys/fs/cgroup/cpuset" + path + "/cpuset.effective_cpus";
    else continue;
    try {
      const std::vector<int> cpus = parse_cpu_list(read_line(file));
      if (!cpus.empty()) return cpus;
    } catch (const Error&) {
    }
  }
  try {
    const std::vector<int> online = parse_cpu_list(read_line("/sys/devices/system/cpu/online"));
    if (!online.empty()) return online;
  } catch (const Error&) {
  }
  std::vector<int> all;
  for (int c = 0; c < int(sysconf(_SC_NPROCESSORS_ONLN)); ++c) all.push_back(c);
  return all;
}

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::string cpu_list(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(cpus[i]);
    if (j > i) s.append(1, '-').append(std::to_string(cpus[j]));
    i = j + 1;
  }
  return s;
}

std::vector<int> parse_cpu_list(const std::string& s) {
  std::set<int> cpus;
  if (s.empty()) return {};
  for (const std::string& part : split(s, ',')) {
    const size_t dash = part.find('-');
    auto number = [&](const std::string& t) {
      HDDP_CHECK(!t.empty() && t.size() <= 6 && t.find_first_not_of("0123456789") == std::string::npos,
                 "not a CPU list: '" + s + "' (expected e.g. 0-3,8)");
      return std::stoi(t);
    };
    const int lo = number(part.substr(0, dash));
    const int hi = dash == std::string::npos ? lo : number(part.substr(dash + 1));
    HDDP_CHECK(lo <= hi, "not a CPU list: '" + s + "' (range " + part + " runs backwards)");
    for (int c = lo; c <= hi; ++c) cpus.insert(c);
  }
  return {cpus.begin(), cpus.end()};
}

std::vector<int> RankPlacement::thread_cpus() const {
  std::vector<int> u;
  for (const ThreadPlacement& t : threads) u = merge(u, t.allowed);
  return u;
}

RankPlacement sample_placement(int rank) {
  RankPlacement p;
  p.rank = rank;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  p.host = host;
  const char* node = std::getenv("SLURMD_NODENAME");
  p.node = node && *node ? node : p.host;
  p.usable_cpus = int(usable_cpu_list().size());
  // The rank's CPUs: with OMP_PROC_BIND, libgomp has already bound this (initial) thread to one
  // place at start-up, so its mask is no longer the rank's; the places, built from the mask the
  // rank was started with, still cover all of it.
  for (int pl = 0; pl < omp_get_num_places(); ++pl) {
    std::vector<int> ids(static_cast<size_t>(omp_get_place_num_procs(pl)));
    omp_get_place_proc_ids(pl, ids.data());
    std::sort(ids.begin(), ids.end());
    p.cpus = merge(p.cpus, ids);
  }
  if (p.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) p.cpus = mask_cpus(set);
  }
  // One entry per thread of the team the program's parallel regions get; the team can come out
  // smaller than asked (OMP_DYNAMIC, OMP_THREAD_LIMIT), so the entries are trimmed to it.
  p.threads.resize(static_cast<size_t>(omp_get_max_threads()));
  int team = 0;
#pragma omp parallel num_threads(static_cast<int>(p.threads.size()))
  {
    ThreadPlacement t;
    t.thread = omp_get_thread_num();
    t.cpu = sched_getcpu();
    cpu_set_t set;
    CPU_ZERO(&set);
    if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0) t.allowed = mask_cpus(set);
    p.threads[static_cast<size_t>(t.thread)] = t;  // each thread its own element
#pragma omp single
    team = omp_get_num_threads();
  }
  p.threads.resize(static_cast<size_t>(team));
  return p;
}

std::vector<RankPlacement> gather_placement(MPI_Comm comm, int root) {
  int rank = 0;
  HDDP_MPI(MPI_Comm_rank(comm, &rank));
  std::vector<RankPlacement> out;
  for (const std::string& s : mpi::gather_strings(encode(sample_placement(rank)), root, comm)) out.push_back(decode(s));
  return out;
}

std::string describe(const RankPlacement& p, int size) {
  std::ostringstream s;
  s << "rank " << p.rank << "/" << size << " on node " << p.node << " (host " << p.host << "): CPUs "
    << cpu_list(p.cpus) << " of " << p.usable_cpus << "; " << plural(p.threads.size(), "OpenMP thread", "OpenMP threads")
    << ":";
  for (const ThreadPlacement& t : p.threads)
    s << " t" << t.thread << " on CPU " << t.cpu << " (may use " << cpu_list(t.allowed) << ")";
  return s.str();
}

std::vector<std::string> placement_warnings(const std::vector<RankPlacement>& ranks) {
  static const char* kFix =
      "give each rank its own cores: mpiexec --map-by slot:PE=<threads per rank> --bind-to core with "
      "OMP_PLACES=cores OMP_PROC_BIND=close (slurm/run.sbatch does this; slurm/README.md, \"Placement\"); where "
      "ranks x threads exceed the CPUs, leave the ranks unbound (mpiexec --bind-to none, OMP_PLACES and "
      "OMP_PROC_BIND unset)";
  std::vector<std::string> out;

  // A rank with more threads than CPUs: its own threads take turns. One message for all such
  // ranks (1024 ranks give one line), with the first as the example.
  std::vector<int> crowded;
  for (const RankPlacement& p : ranks)
    if (p.threads.size() > p.thread_cpus().size()) crowded.push_back(p.rank);
  if (!crowded.empty()) {
    const RankPlacement& p = *std::find_if(ranks.begin(), ranks.end(), [&](const RankPlacement& r) {
      return r.rank == crowded.front();
    });
    const bool one = crowded.size() == 1;
    out.push_back((one ? "rank " : "ranks ") + mpi::rank_list(crowded) + (one ? " runs" : " run") +
                  " more OpenMP threads than " + (one ? "it has" : "they have") + " CPUs (rank " +
                  std::to_string(p.rank) + " on " + p.node + ": " + plural(p.threads.size(), "thread", "threads") +
                  " on CPUs " + cpu_list(p.thread_cpus()) + "), so the threads take turns; set OMP_NUM_THREADS to the " +
                  "CPUs per rank (Slurm: -c / --cpus-per-task), or " + kFix);
  }

  // Pinned ranks on one host whose CPUs overlap: join them into groups (union find over pairs;
  // a host holds few ranks) and warn for each group with more threads than CPUs. Ranks free to
  // use every usable CPU are left to the kernel's scheduler.
  std::map<std::string, std::vector<const RankPlacement*>> by_host;
  for (const RankPlacement& p : ranks)
    if (p.pinned()) by_host[p.host].push_back(&p);
  for (const auto& [host, on] : by_host) {
    std::vector<std::vector<int>> cpus;
    for (const RankPlacement* p : on) cpus.push_back(p->thread_cpus());
    std::vector<size_t> group(on.size());
    for (size_t i = 0; i < on.size(); ++i) group[i] = i;
    auto find = [&](size_t i) {
      while (group[i] != i) i = group[i] = group[group[i]];
      return i;
    };
    for (size_t i = 0; i < on.size(); ++i)
      for (size_t j = i + 1; j < on.size(); ++j) {
        std::vector<int> both;
        std::set_intersection(cpus[i].begin(), cpus[i].end(), cpus[j].begin(), cpus[j].end(), std::back_inserter(both));
        if (!both.empty()) group[find(i)] = find(j);
      }
    std::map<size_t, std::vector<size_t>> members;
    for (size_t i = 0; i < on.size(); ++i) members[find(i)].push_back(i);
    for (const auto& [root, m] : members) {
      if (m.size() < 2) continue;
      size_t threads = 0;
      std::vector<int> shared, rank_ids;
      for (size_t i : m) {
        threads += on[i]->threads.size();
        shared = merge(shared, cpus[i]);
        rank_ids.push_back(on[i]->rank);
      }
      if (threads <= shared.size()) continue;
      std::sort(rank_ids.begin(), rank_ids.end());
      std::string each;
      for (size_t i : m) {
        if (!each.empty()) each += ", ";
        each += "rank " + std::to_string(on[i]->rank) + " on CPUs " + cpu_list(cpus[i]);
      }
      out.push_back("ranks " + mpi::rank_list(rank_ids) + " on host " + host + " are pinned to overlapping CPUs (" + each +
                    "): " + plural(threads, "thread", "threads") + " on " + plural(shared.size(), "CPU", "CPUs") +
                    " take turns while MPI busy-polls, which can make a step hundreds of times slower; " + kFix);
    }
  }
  return out;
}

}  // namespace hddp
