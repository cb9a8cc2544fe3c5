#include <hddp/train/training_run.h>

#include <cmath>
#include <cstdio>

#include <hddp/core/serialize.h>
#include <hddp/core/util.h>
#include <hddp/kernels/check.h>

namespace hddp {

namespace {

RunFileOptions run_file_options(const TrainingRunOptions& o) {
  return {.path = o.checkpoint, .resume = o.resume, .identity = o.identity, .total_steps = o.epochs * o.steps_per_epoch,
          .unit = o.steps_per_epoch == 1 ? "epochs" : "steps"};
}

// Checkpoint records of the kit's own, beside the program's.
constexpr const char* kRankValues = "run.rank_values";
constexpr const char* kTrainSeconds = "run.train_seconds";

}  // namespace

TrainingRun::TrainingRun(const mpi::Env& env, Module<float>& model, Optimizer<float>& opt, TrainingRunOptions options)
    : env_(env),
      model_(model),
      opt_(opt),
      o_(std::move(options)),
      watchdog_(env.comm(), WatchdogOptions{.timeout_s = o_.timeout_s, .exit_code = code(Exit::Stall)}),
      run_file_(env, watchdog_, run_file_options(o_)),
      log_(stdout) {
  HDDP_CHECK_ARG(o_.epochs >= 1 && o_.steps_per_epoch >= 1,
                 "TrainingRun: epochs and steps_per_epoch must be >= 1, got " << o_.epochs << " and " << o_.steps_per_epoch);
  HDDP_CHECK_ARG(o_.clip_grad_norm >= 0 && std::isfinite(o_.clip_grad_norm),
                 "TrainingRun: clip_grad_norm must be finite and >= 0, got " << o_.clip_grad_norm);
}

TrainingRun::~TrainingRun() = default;

std::string TrainingRun::where(int64_t step) const {
  const int64_t spe = o_.steps_per_epoch;
  std::string w = "epoch " + std::to_string(step / spe + 1);
  if (spe > 1) w += " (step " + std::to_string(step % spe + 1) + " of " + std::to_string(spe) + ")";
  return w;
}

std::string TrainingRun::begin() {
  if (std::string err = run_file_.resume(model_.arena(), opt_, o_.rng); !err.empty()) return err;
  start_ = run_file_.start();
  std::string err;
  if (start_ > 0) try {
      const std::map<std::string, std::string>& rec = run_file_.records();
      if (rec.count(kTrainSeconds)) train_s_ = decode_doubles(rec.at(kTrainSeconds), "its training time").at(0);
      if (rec.count(kRankValues)) {
        const std::vector<double> all = decode_doubles(rec.at(kRankValues), "its per-rank values");
        HDDP_CHECK(all.size() % size_t(env_.size()) == 0,
                   "it holds " << all.size() << " per-rank values, not a multiple of " << env_.size() << " ranks");
        const size_t k = all.size() / size_t(env_.size());
        rank_values_.assign(all.begin() + ptrdiff_t(k * size_t(env_.rank())), all.begin() + ptrdiff_t(k * size_t(env_.rank() + 1)));
      }
    } catch (const std::exception& e) {
      err = o_.checkpoint + ": " + user_message(e.what());
    }
  if (!err.empty()) return "--resume: cannot use checkpoint " + err;  // the same bytes everywhere: the same verdict
  if (env_.root() && start_ > 0)
    std::fprintf(stderr, "%s: resumed from '%s' %s of %lld epochs\n", o_.program.c_str(), run_file_.resumed_from().c_str(),
                 start_ % o_.steps_per_epoch == 0 ? ("after epoch " + std::to_string(start_ / o_.steps_per_epoch)).c_str()
                                                  : ("inside " + where(start_)).c_str(),
                 (long long)o_.epochs);
  else if (env_.root() && o_.resume && run_file_.enabled())
    std::fprintf(stderr, "%s: no checkpoint '%s' yet: starting from scratch\n", o_.program.c_str(), o_.checkpoint.c_str());
  ReducerOptions r = o_.reducer;
  r.watchdog = &watchdog_;  // the buckets wait through it, so a rank that stops arriving is named
  ddp_ = std::make_unique<DistributedModel>(env_.comm(), model_, r, o_.trace);
  guard_ = std::make_unique<StopGuard>(
      env_, watchdog_,
      StopGuardOptions{.program = o_.program, .total_steps = total_steps(), .check_every = o_.check_every,
                       .where = [this](int64_t s) { return where(s); }},
      start_, [this] { return run_file_.kept_note(); });
  watchdog_.set_epoch(start_ / o_.steps_per_epoch + 1);
  t0_ = std::chrono::steady_clock::now();
  return "";
}

double TrainingRun::train_seconds() const {
  return train_s_ + seconds_since(t0_) - paused_s_ - (paused_ ? seconds_since(*paused_) : 0.0);
}

std::optional<int> TrainingRun::end_step(int64_t step, double loss, const std::function<void(int64_t)>& on_epoch_end) {
  HDDP_CHECK(ddp_, "TrainingRun::end_step: call begin() first");
  const bool epoch_end = (step + 1) % o_.steps_per_epoch == 0, last = step + 1 == total_steps();
  const int64_t epochs_done = (step + 1) / o_.steps_per_epoch;
  const bool due = epoch_end && ((o_.checkpoint_every > 0 && epochs_done % o_.checkpoint_every == 0) || last);
  // 1. The verdict: the ranks agree before a checkpoint, and at every epoch's end when an
  // epoch has several steps (a cheap moment), else when the guard's interval says.
  const StopGuard::Verdict v = guard_->check(step, loss, *ddp_, due || (epoch_end && o_.steps_per_epoch > 1));
  if (v.non_finite) return finish(Exit::NonFinite);
  // 2. The update.
  ParamArena<float>& arena = model_.arena();
  if (o_.clip_grad_norm > 0) clip_grad_norm(arena.size(), arena.grads(), o_.clip_grad_norm, std::sqrt(v.grad_sq));
  if (o_.schedule) o_.schedule->apply(opt_);
  opt_.step(arena.params(), arena.grads());
  // 3. The program's epoch end, 4. the checkpoint.
  const bool stop = v.signal != 0 && !last;  // a signal at the very end changes nothing: the run is done
  paused_ = std::chrono::steady_clock::now();
  if (epoch_end && on_epoch_end) on_epoch_end(step / o_.steps_per_epoch);
  const bool saved = (due || stop) && save(step + 1);
  paused_s_ += seconds_since(*paused_);
  paused_.reset();
  if ((due || stop) && run_file_.enabled() && !saved) return finish(Exit::NonFinite);
  if (!stop) {
    watchdog_.set_epoch((step + 1) / o_.steps_per_epoch + 1);  // what a stall report names
    return std::nullopt;
  }
  // 5. The signal's stop.
  if (env_.root()) {
    const std::string after = o_.steps_per_epoch == 1 ? std::to_string(step + 1) + " of " + std::to_string(o_.epochs) + " epochs"
                                                      : where(step);
    std::fprintf(stderr, "%s: %s: all ranks stopped after %s; %s (exit code %d)\n", o_.program.c_str(), signal_name(v.signal),
                 after.c_str(),
                 run_file_.enabled() ? ("checkpoint '" + o_.checkpoint + "' written: continue with --resume").c_str()
                                     : "no --checkpoint, so the progress is lost",
                 code(Exit::Stopped));
  }
  return finish(Exit::Stopped);
}

bool TrainingRun::save(int64_t done) {
  if (!run_file_.enabled()) return false;
  if (!RunFile::finite(model_.arena(), opt_)) {
    if (env_.root())
      std::fprintf(stderr, "%s: error: the parameters or optimizer state are not finite after %s%s\n", o_.program.c_str(),
                   where(done - 1).c_str(), run_file_.kept_note().c_str());
    return false;
  }
  std::map<std::string, std::string> rec = o_.records ? o_.records(done) : std::map<std::string, std::string>{};
  const std::vector<double> mine = o_.rank_values ? o_.rank_values() : std::vector<double>{};
  std::vector<double> all(env_.root() ? mine.size() * size_t(env_.size()) : 0);
  MPI_Request req;
  HDDP_MPI(MPI_Igather(mine.data(), int(mine.size()), MPI_DOUBLE, all.data(), int(mine.size()), MPI_DOUBLE, 0, env_.comm(), &req));
  watchdog_.wait(&req, "the checkpoint's gather of every rank's values");
  rec[kRankValues] = encode_doubles(all);
  if (o_.keep_train_seconds) rec[kTrainSeconds] = encode_doubles({train_seconds()});
  run_file_.save(done, model_.arena(), opt_, o_.rng, rec);
  return true;
}

int TrainingRun::finish(Exit c) {
  log_.flush();
  return finish_together(env_, watchdog_, c);
}

}  // namespace hddp
