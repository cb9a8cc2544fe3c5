#include <hddp/train/stop_guard.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>

#include <hddp/core/util.h>
#include <hddp/kernels/elementwise.h>

namespace hddp {
namespace {

// The stop request: the signal number, set by the handler (a lock-free atomic is
// async-signal-safe, and, unlike a volatile sig_atomic_t, also well defined when the signal
// lands on another thread, e.g. an OpenMP worker or Open MPI's progress thread).
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);
extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig, std::memory_order_relaxed); }

// check_every 0: agree about every kCheckPeriod seconds of training, at most every
// kMaxCheckInterval steps (one MPI_Allreduce of 3 int64 costs 1-30 us with 3 ranks on 2 cores;
// a tutorial step 45 us).
constexpr double kCheckPeriod = 0.005;
constexpr int64_t kMaxCheckInterval = 1000;

}  // namespace

void install_stop_handlers() {
  struct sigaction sa{};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGUSR1}) HDDP_CHECK(sigaction(sig, &sa, nullptr) == 0, "sigaction: " << std::strerror(errno));
}

int stop_signal() { return g_stop_signal.load(std::memory_order_relaxed); }

const char* signal_name(int sig) { return sig == SIGTERM ? "SIGTERM" : sig == SIGUSR1 ? "SIGUSR1" : "a signal"; }

StopGuard::StopGuard(const mpi::Env& env, Watchdog& watchdog, StopGuardOptions options, int64_t start,
                     std::function<std::string()> kept)
    : env_(env),
      watchdog_(watchdog),
      o_(std::move(options)),
      kept_(std::move(kept)),
      local_bad_(INT64_MAX),
      next_check_(start),
      last_check_(start - 1),
      t_check_(std::chrono::steady_clock::now()) {}

std::string StopGuard::where(int64_t step) const { return o_.where ? o_.where(step) : "step " + std::to_string(step + 1); }

void StopGuard::note_local(int64_t step, double loss, DistributedModel& ddp) {
  if (local_bad_ != INT64_MAX || (std::isfinite(loss) && ddp.non_finite_at() < 0)) return;
  local_bad_ = step * env_.size() + env_.rank();
  char why[200];
  if (!std::isfinite(loss)) {
    std::snprintf(why, sizeof why, "loss = %g", loss);
  } else {
    const ParamView* v = view_containing(ddp.module().arena().views(), ddp.non_finite_at());
    std::snprintf(why, sizeof why, "gradient of '%s' not finite", v ? v->name.c_str() : "?");
  }
  local_reason_ = why;
}

// Each rank proposes the next interval (fixed, or about kCheckPeriod of its own recent
// training time); everyone takes the smallest, so the next agreement is at the same step
// everywhere.
int64_t StopGuard::next_interval(int64_t step) const {
  if (o_.check_every > 0) return o_.check_every;
  const double since = seconds_since(t_check_);
  const double per_step = since / double(step - last_check_);
  return per_step > 0 ? int64_t(std::clamp(kCheckPeriod / per_step, 1.0, double(kMaxCheckInterval))) : kMaxCheckInterval;
}

StopGuard::Verdict StopGuard::check(int64_t step, double loss, DistributedModel& ddp, bool agree_now) {
  note_local(step, loss, ddp);
  const ParamArena<float>& arena = ddp.module().arena();
  Verdict v;
  v.grad_sq = sum_sq(arena.size(), arena.grads());  // the one pass: NaN/Inf anywhere makes it so
  const bool averaged_bad = !std::isfinite(v.grad_sq);
  if (!(averaged_bad || agree_now || step == next_check_ || step + 1 == o_.total_steps)) return v;
  int64_t in[3] = {-int64_t(stop_signal()), local_bad_, next_interval(step)}, out[3];
  MPI_Request req;
  HDDP_MPI(MPI_Iallreduce(in, out, 3, MPI_INT64_T, MPI_MIN, env_.comm(), &req));
  watchdog_.wait(&req, "the ranks' agreement (signals, NaN)");
  next_check_ = step + out[2], last_check_ = step, t_check_ = std::chrono::steady_clock::now();
  v.signal = int(-out[0]);
  v.non_finite = out[1] != INT64_MAX || averaged_bad;
  if (v.non_finite) report_non_finite(step, out[1]);
  return v;
}

void StopGuard::report_non_finite(int64_t step, int64_t first_bad) const {
  const int size = env_.size();
  if (local_bad_ != INT64_MAX)
    std::fprintf(stderr, "[rank %d] non-finite value at %s: %s\n", env_.rank(), where(local_bad_ / size).c_str(),
                 local_reason_.c_str());
  if (!env_.root()) return;
  if (first_bad != INT64_MAX)
    std::fprintf(stderr,
                 "%s: error: NaN/Inf at %s on rank %lld (its loss or own gradients); "
                 "all ranks stopped before the optimizer step of %s%s\n",
                 o_.program.c_str(), where(first_bad / size).c_str(), (long long)(first_bad % size), where(step).c_str(),
                 kept_().c_str());
  else
    std::fprintf(stderr,
                 "%s: error: NaN/Inf in the gradients averaged over the ranks at %s (every "
                 "rank's loss was finite: a gradient of a rank's own, or their sum, was not); all ranks stopped%s\n",
                 o_.program.c_str(), where(step).c_str(), kept_().c_str());
}

}  // namespace hddp
