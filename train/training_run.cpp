#include <hddp/train/training_run.h>

#include <cmath>
#include <cstdio>

#include <hddp/core/serialize.h>
#include <hddp/core/util.h>
#include <hddp/kernels/check.h>
#include <hddp/train/rank_sums.h>

namespace hddp {

namespace {

// The program's identity, plus the optimizer's settings and the schedule: a run resumed with
// another learning rate, optimizer or schedule (a cosine over other epochs) is another run.
RunFileOptions run_file_options(const TrainingRunOptions& o, const Optimizer<float>& opt) {
  std::map<std::string, std::string> id = o.identity;
  id["run.optimizer"] = opt.describe();
  if (o.schedule) id["run.lr_schedule"] = to_string(*o.schedule);
  return {.path = o.checkpoint, .resume = o.resume, .identity = id, .total_steps = o.epochs * o.steps_per_epoch,
          .names = o.names, .unit = o.steps_per_epoch == 1 ? "epochs" : "steps"};
}

// The kit's checkpoint records.
constexpr const char* kEpochSums = "run.epoch_sums";  // every rank's (loss x rows, rows) of the epoch under way
constexpr const char* kMetrics = "run.metrics";
constexpr const char* kState = "run.state";           // the program's RunState
constexpr const char* kTrainSeconds = "run.train_seconds";

}  // namespace

TrainingRun::TrainingRun(const mpi::Env& env, Module<float>& model, Optimizer<float>& opt, TrainingRunOptions options)
    : env_(env),
      model_(model),
      opt_(opt),
      o_(std::move(options)),
      watchdog_(env.comm(), WatchdogOptions{.timeout_s = o_.timeout_s, .exit_code = code(Exit::Stall)}),
      run_file_(env, watchdog_, run_file_options(o_, opt)),
      log_(stdout) {
  if (!o_.metrics.empty()) metrics_.emplace(o_.metrics);
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
  if (std::string err = start_ > 0 ? restore_records() : ""; !err.empty())  // the same bytes everywhere: the same verdict
    return o_.names.resume_or("resume") + ": cannot use checkpoint '" + run_file_.resumed_from() + "': " + err;
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

std::string TrainingRun::restore_records() {
  const std::map<std::string, std::string>& rec = run_file_.records();
  try {
    if (rec.count(kTrainSeconds)) train_s_ = decode_doubles(rec.at(kTrainSeconds), "its training time").at(0);
    HDDP_CHECK(rec.count(kEpochSums), "it holds no loss sums (not a checkpoint of this program)");
    const std::vector<double> all = decode_doubles(rec.at(kEpochSums), "its loss sums");
    HDDP_CHECK(all.size() == 2 * size_t(env_.size()), "it holds " << all.size() << " loss sums, not 2 for each of " << env_.size() << " ranks");
    loss_rows_ = all[2 * size_t(env_.rank())], rows_ = all[2 * size_t(env_.rank()) + 1];
    HDDP_CHECK(bool(metrics_) == bool(rec.count(kMetrics)),
               (metrics_ ? "it holds no metrics table" : "it holds a metrics table this program does not keep"));
    if (metrics_) {
      *metrics_ = MetricsTable::decode(rec.at(kMetrics), o_.metrics, "its metrics");
      const int64_t epochs = start_ / o_.steps_per_epoch;
      HDDP_CHECK(int64_t(metrics_->size()) == epochs, "it holds " << metrics_->size() << " rows of metrics for " << epochs << " epochs done");
    }
    HDDP_CHECK(bool(o_.state) == bool(rec.count(kState)),
               (o_.state ? "it holds none of this program's state" : "it holds a state this program does not keep"));
    if (o_.state) o_.state->restore(rec.at(kState), start_);
  } catch (const std::exception& e) {
    return user_message(e.what());
  }
  return "";
}

DistributedModel& TrainingRun::ddp() {
  HDDP_CHECK(ddp_, "TrainingRun::ddp(): the data-parallel model is built by begin(): call run.begin() first");
  return *ddp_;
}

MetricsTable& TrainingRun::metrics() {
  HDDP_CHECK(metrics_, "TrainingRun::metrics(): this run keeps no metrics table: name its columns in TrainingRunOptions::metrics");
  return *metrics_;
}

EpochEnd TrainingRun::reduce_epoch(int64_t epoch) {
  EpochEnd e{.epoch = epoch, .train_loss = std::nan(""), .samples = 0};
  if (o_.epoch_loss) {
    std::vector<double> sums = {loss_rows_, rows_};
    sum_over_ranks(env_, &watchdog_, sums, "the epoch's training loss");
    e.train_loss = sums[0] / sums[1], e.samples = int64_t(sums[1]);
  }
  loss_rows_ = 0, rows_ = 0;
  return e;
}

double TrainingRun::train_seconds() const {
  return train_s_ + seconds_since(t0_) - paused_s_ - (paused_ ? seconds_since(*paused_) : 0.0);
}

std::optional<int> TrainingRun::end_step(int64_t step, double loss, int64_t rows,
                                         const std::function<void(const EpochEnd&)>& on_epoch_end) {
  HDDP_CHECK(ddp_, "TrainingRun::end_step(): call run.begin() first");
  HDDP_CHECK_ARG(rows >= 1, "TrainingRun::end_step(): rows must be >= 1 (the samples of the step on this rank), got " << rows);
  loss_rows_ += loss * double(rows), rows_ += double(rows);
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
  if (epoch_end) {
    const EpochEnd e = reduce_epoch(step / o_.steps_per_epoch);
    if (on_epoch_end) on_epoch_end(e);
    if (metrics_)
      HDDP_CHECK(int64_t(metrics_->size()) == e.epoch + 1,
                 "the metrics table has " << metrics_->size() << " rows after epoch " << e.epoch + 1 << ": add one row per epoch");
  }
  const bool saved = (due || stop) && save(step + 1);
  paused_s_ += seconds_since(*paused_);
  paused_.reset();
  if ((due || stop) && run_file_.enabled() && !saved) return finish(Exit::NonFinite);
  if (!stop) {
    watchdog_.set_epoch((step + 1) / o_.steps_per_epoch + 1);  // what a stall report names
    return std::nullopt;
  }
  // 5. The signal's stop: after the epoch's lines already logged.
  log_.flush();
  if (env_.root()) {
    const std::string after = o_.steps_per_epoch == 1 ? std::to_string(step + 1) + " of " + std::to_string(o_.epochs) + " epochs"
                                                      : where(step);
    std::fprintf(stderr, "%s: %s: all ranks stopped after %s; %s (exit code %d)\n", o_.program.c_str(), signal_name(v.signal),
                 after.c_str(),
                 run_file_.enabled() ? ("checkpoint '" + o_.checkpoint + "' written: " + run_file_.continue_hint()).c_str()
                                     : ("no " + o_.names.checkpoint_or("checkpoint") + ", so the progress is lost").c_str(),
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
  std::map<std::string, std::string> rec;
  if (o_.state) rec[kState] = o_.state->save(done, watchdog_);
  if (metrics_) rec[kMetrics] = metrics_->encode();
  const double mine[2] = {loss_rows_, rows_};
  std::vector<double> all(env_.root() ? 2 * size_t(env_.size()) : 0);
  MPI_Request req;
  HDDP_MPI(MPI_Igather(mine, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, 0, env_.comm(), &req));
  watchdog_.wait(&req, "the checkpoint's gather of the ranks' loss sums");
  rec[kEpochSums] = encode_doubles(all);
  if (o_.keep_train_seconds) rec[kTrainSeconds] = encode_doubles({train_seconds()});
  run_file_.save(done, model_.arena(), opt_, o_.rng, rec);
  return true;
}

int TrainingRun::finish(Exit c) {
  log_.flush();
  return finish_together(env_, watchdog_, c);
}

}  // namespace hddp
