#include <hddp/distributed/watchdog.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdarg>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>

#include <hddp/core/util.h>
#include <hddp/distributed/mpi_env.h>

namespace hddp {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kAsk = 1, kAnswer = 2;   // roll-call tags on the private communicator
constexpr double kProbeAfter = 1e-3;   // a wait answers roll calls once it has lasted this long

// SIGCONT count (async-signal-safe: a lock-free atomic), see Watchdog::wait.
std::atomic<int> g_continued{0};
extern "C" void on_sigcont(int) { g_continued.fetch_add(1, std::memory_order_relaxed); }

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

// Answers a roll call from rank `to` with `mine`. The send buffers must live until MPI is done
// with them; roll calls are rare (a stall, a SIGCONT), so the buffers are simply kept (a deque
// keeps their addresses) and the sends are never waited on.
void reply(MPI_Comm comm, int to, const RankPosition& mine) {
  static std::deque<RankPosition> sent;
  sent.push_back(mine);
  MPI_Request r;
  HDDP_MPI(MPI_Isend(&sent.back(), sizeof mine, MPI_BYTE, to, kAnswer, comm, &r));
  HDDP_MPI(MPI_Request_free(&r));
}

// "at epoch 3", or "at start-up" before the driver names an epoch (a resume's broadcast).
std::string when(int64_t epoch) {
  return epoch >= 1 ? fmt("at epoch %lld", static_cast<long long>(epoch)) : std::string("at start-up");
}

}  // namespace

std::string stall_report(int me, const std::vector<char>& answered, const std::vector<RankPosition>& where,
                         const std::vector<std::string>& node, double timeout_s, double grace_s) {
  const int size = static_cast<int>(answered.size());
  std::vector<int> missing;
  for (int r = 0; r < size; ++r)
    if (!answered[r]) missing.push_back(r);
  const RankPosition& mine = where[me];
  std::string s = fmt("stall: rank %d (node %s) waited %.1f s (timeout %g s) for %s %s; ", me, node[me].c_str(),
                      mine.waited_s, timeout_s, mine.what, when(mine.epoch).c_str());
  if (missing.empty())
    s += "every rank answered the roll call, but the collective did not complete (an MPI or network fault?)";
  else
    s += std::string(missing.size() > 1 ? "ranks " : "rank ") + mpi::rank_list(missing) +
         fmt(" did not arrive or stopped responding (no answer to the roll call within %.1f s: stopped, hung, dead, "
             "or far behind)", grace_s);
  for (int r : missing) s += fmt("\n  rank %d (node %s): no answer", r, node[r].c_str());
  // The ranks that answered, grouped by where they wait (rank `me` among them).
  std::vector<char> told(size, 0);
  for (int r = 0; r < size; ++r) {
    if (!answered[r] || told[r]) continue;
    std::vector<int> same;
    for (int q = r; q < size; ++q)
      if (answered[q] && !told[q] && where[q].epoch == where[r].epoch && !std::strcmp(where[q].what, where[r].what))
        same.push_back(q), told[q] = 1;
    s += fmt("\n  waiting for %s %s: rank%s ", where[r].what, when(where[r].epoch).c_str(), same.size() > 1 ? "s" : "") +
         mpi::rank_list(same);
  }
  return s;
}

Watchdog::Watchdog(MPI_Comm comm, WatchdogOptions options) : opt_(options) {
  HDDP_CHECK_ARG(opt_.timeout_s >= 0 && opt_.grace_s > 0, "Watchdog: timeout must be >= 0 s and grace > 0 s");
  opt_.grace_s = opt_.timeout_s > 0 ? std::min(opt_.grace_s, opt_.timeout_s) : opt_.grace_s;
  parent_ = comm;
  HDDP_MPI(MPI_Comm_dup(comm, &comm_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  HDDP_MPI(MPI_Comm_rank(comm_, &rank_));
  HDDP_MPI(MPI_Comm_size(comm_, &size_));
  // Node names: Slurm's name for the node (n1, n2 ... also where emulated nodes share a host),
  // else the host name.
  char mine[64] = {0};
  if (const char* n = std::getenv("SLURMD_NODENAME")) std::snprintf(mine, sizeof mine, "%s", n);
  else gethostname(mine, sizeof mine - 1);
  std::vector<char> all(64 * size_t(size_));
  HDDP_MPI(MPI_Allgather(mine, 64, MPI_CHAR, all.data(), 64, MPI_CHAR, comm_));
  for (int r = 0; r < size_; ++r) node_.emplace_back(all.data() + 64 * r, strnlen(all.data() + 64 * r, 64));
  // Count SIGCONTs, unless the program handles SIGCONT itself.
  struct sigaction old{};
  if (enabled() && sigaction(SIGCONT, nullptr, &old) == 0 && old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO)) {
    struct sigaction sa{};
    sa.sa_handler = on_sigcont;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigcont_installed_ = sigaction(SIGCONT, &sa, nullptr) == 0;
  }
  continued_seen_ = g_continued.load();
}

Watchdog::~Watchdog() {
  if (sigcont_installed_) signal(SIGCONT, SIG_DFL);
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void Watchdog::wait(MPI_Request* req, const char* what, int index) {
  if (!enabled()) {
    HDDP_MPI(MPI_Wait(req, MPI_STATUS_IGNORE));
    return;
  }
  auto t0 = Clock::now();
  RankPosition mine;  // filled in once the wait is long enough to be asked about
  int flag = 0;
  HDDP_MPI(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
  while (!flag) {
    const double waited = seconds_since(t0);
    if (waited > kProbeAfter) {
      if (mine.epoch < 0) {
        mine.epoch = epoch_;
        if (index >= 0) std::snprintf(mine.what, sizeof mine.what, "%s %d", what, index);
        else std::snprintf(mine.what, sizeof mine.what, "%s", what);
      }
      mine.waited_s = waited;
      const int continued = g_continued.load(std::memory_order_relaxed);
      if (continued != continued_seen_) {
        continued_seen_ = continued;
        check_after_continue();
        t0 = Clock::now();  // the time stopped is no waiting time
      } else {
        answer_roll_calls(mine);
        if (waited > opt_.timeout_s) {
          const RollCall rc = roll_call(mine);
          // Every rank answered: the collective should complete now. If it does, the delay
          // was this rank's own (descheduled past the timeout): not a stall.
          for (const auto t1 = Clock::now(); rc.count == size_ && seconds_since(t1) < opt_.grace_s;) {
            HDDP_MPI(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
            if (flag) return;
            answer_roll_calls(mine);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
          end_job(rc, mine);
        }
      }
    }
    HDDP_MPI(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
  }
}

void Watchdog::answer_roll_calls(const RankPosition& mine) {
  int flag = 1;
  while (flag) {
    MPI_Status st;
    HDDP_MPI(MPI_Iprobe(MPI_ANY_SOURCE, kAsk, comm_, &flag, &st));
    if (!flag) return;
    RankPosition asker;
    HDDP_MPI(MPI_Recv(&asker, sizeof asker, MPI_BYTE, st.MPI_SOURCE, kAsk, comm_, MPI_STATUS_IGNORE));
    reply(comm_, st.MPI_SOURCE, mine);
  }
}

void Watchdog::check_after_continue() {
  // A roll call waiting for this rank: another rank timed out on it while it was stopped and is
  // ending the job. It leaves without answering, so that their report names it. (Missing
  // answers are not asked for here: SIGCONT also comes from Slurm before SIGTERM and from
  // suspend/resume, when a healthy peer may be computing or writing for longer than a grace.)
  MPI_Status st;
  int asked = 0;
  HDDP_MPI(MPI_Iprobe(MPI_ANY_SOURCE, kAsk, comm_, &asked, &st));
  if (!asked) return;
  std::fprintf(stderr, "[rank %d] stall: this rank was stopped past the timeout; rank %d timed out waiting for it "
               "and ends the job; exiting (code %d)\n", rank_, st.MPI_SOURCE, opt_.exit_code);
  std::fflush(stderr);
  std::_Exit(opt_.exit_code);
}

Watchdog::RollCall Watchdog::roll_call(const RankPosition& mine) {
  RollCall rc;
  rc.answered.assign(size_, 0);
  rc.where.assign(size_, RankPosition{});
  rc.answered[rank_] = 1, rc.where[rank_] = mine;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request ask;
    HDDP_MPI(MPI_Isend(&rc.where[rank_], sizeof mine, MPI_BYTE, r, kAsk, comm_, &ask));
    HDDP_MPI(MPI_Request_free(&ask));
  }
  // Answers for up to the grace. This rank joins no collective meanwhile, so every live rank
  // soon blocks waiting for it, and answers. Asks from others are answered, not counted: an
  // ask may be stale (sent by a rank that has exited since).
  for (const auto t0 = Clock::now(); rc.count < size_ && seconds_since(t0) < opt_.grace_s;) {
    for (int more = 1; more;) {
      MPI_Status st;
      HDDP_MPI(MPI_Iprobe(MPI_ANY_SOURCE, kAnswer, comm_, &more, &st));
      if (!more) break;
      RankPosition p;
      HDDP_MPI(MPI_Recv(&p, sizeof p, MPI_BYTE, st.MPI_SOURCE, kAnswer, comm_, MPI_STATUS_IGNORE));
      if (!rc.answered[st.MPI_SOURCE]) ++rc.count;
      rc.answered[st.MPI_SOURCE] = 1, rc.where[st.MPI_SOURCE] = p;
    }
    answer_roll_calls(mine);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return rc;
}

void Watchdog::end_job(const RollCall& rc, RankPosition mine) {
  // One report: the lowest rank that answered prints it and aborts the job. It may not have
  // timed out yet (its wait began later), so the others keep answering roll calls while they
  // wait for its abort - its roll call must find them - and report themselves if it does not
  // come within the timeout and two graces (the reporter died too).
  const int reporter = static_cast<int>(std::find(rc.answered.begin(), rc.answered.end(), 1) - rc.answered.begin());
  std::fflush(stdout);
  if (rank_ != reporter) {
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r)
      if (!rc.answered[r]) missing.push_back(r);
    std::fprintf(stderr, "[rank %d] stall: rank%s %s did not answer the roll call; rank %d reports\n", rank_,
                 missing.size() > 1 ? "s" : "", mpi::rank_list(missing).c_str(), reporter);
    std::fflush(stderr);
    for (const auto t0 = Clock::now(); seconds_since(t0) < opt_.timeout_s + 2 * opt_.grace_s;) {
      answer_roll_calls(mine);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::vector<RankPosition> where = rc.where;
  where[rank_] = mine;
  std::string msg = stall_report(rank_, rc.answered, where, node_, opt_.timeout_s, opt_.grace_s);
  msg += fmt("\n  ending the job (MPI_Abort, exit code %d)", opt_.exit_code);
  if (note_) msg += note_();
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::fflush(stderr);
  MPI_Abort(parent_, opt_.exit_code);
  std::_Exit(opt_.exit_code);
}

}  // namespace hddp
