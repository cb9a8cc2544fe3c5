// mnist_train: a Fashion-MNIST classifier trained data-parallel over MPI ranks, OpenMP inside
// each rank. The model (--model): an MLP (Linear, ReLU per --hidden width, Linear(W, 10)) or the
// CNN (two Conv2d-ReLU-MaxPool2d blocks, Linear, ReLU, Linear: options.cpp, build_layers);
// softmax cross-entropy; Adam, AdamW or SGD. Each epoch every rank walks its shard of a shuffle
// all ranks agree on (PyTorch's DistributedSampler, data/sampler.h), a batch per step: forward,
// loss, backward (gradient buckets reduced by MPI_Iallreduce while backward continues), the
// stop guard's verdict, optimizer step. After each epoch the test set is evaluated, sharded over the ranks and
// reduced. Run `mnist_train --help`.
//
// A step is one batch per rank; the run kit (train/training_run.h) keeps the epoch's loss sums
// and the metrics table in every checkpoint, so a run stopped inside an epoch resumes bitwise.
// Exit codes: hddp::Exit (train/exit_code.h).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <hddp/core/loss.h>
#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/core/schedule.h>
#include <hddp/core/util.h>
#include <hddp/data/idx.h>
#include <hddp/data/sampler.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/train/all_ranks.h>
#include <hddp/train/evaluate.h>
#include <hddp/train/json_lines.h>
#include <hddp/train/line_log.h>
#include <hddp/train/metrics_table.h>
#include <hddp/train/stop_guard.h>
#include <hddp/train/training_run.h>
#include "common/driver_setup.h"
#include "mnist_train/options.h"
#include "mnist_train/report.h"

namespace mnist {
namespace {

using hddp::Exit;
using hddp::mpi::Env;

constexpr double kProgressEvery = 10.0;  // seconds between progress lines inside a long epoch
const std::vector<std::string> kMetricColumns = {"epoch", "train_loss", "test_loss", "test_accuracy", "train_s",
                                                 "elapsed_train_s"};


int usage_error(const Env& env, const std::string& err) {  // every rank gets here together
  if (env.root()) std::fprintf(stderr, "mnist_train: error: %s\n", err.c_str());
  return hddp::code(Exit::Usage);
}


// Every rank reads the files (bytes, 55 MB); "" or the error of any rank, the same everywhere.
std::string read_data(const Env& env, const Options& o, hddp::Dataset& train, hddp::Dataset& test) {
  std::string err;
  try {
    train = hddp::read_mnist(o.data, "train").head(o.limit_train);
    test = hddp::read_mnist(o.data, "test").head(o.limit_test);
    // One model, built for the training images, reads both.
    hddp::check_sample_shape(test, train.shape, o.data + ": the test images, for a model built for the training images");
    hddp::check_class_count(train, kClasses, o.data + ": the training labels");
    hddp::check_class_count(test, kClasses, o.data + ": the test labels");
  } catch (const hddp::Error& e) {
    err = hddp::user_message(e.what());
  } catch (const std::bad_alloc&) {  // a node with a memory cap: the same exit 2 on every rank
    err = o.data + ": out of memory while reading the images (every rank holds both sets in memory)";
  }
  err = hddp::agree_on_error(env, err);
  if (err.empty() && env.root())
    std::printf("data: %lld training and %lld test images of %lld pixels from %s\n", (long long)train.count,
                (long long)test.count, (long long)train.features(), o.data.c_str());
  return err;
}

// What the step loop works on: the run kit, the model and data.
struct Run {
  hddp::TrainingRun& run;
  hddp::Sequential<float>& model;
  const hddp::DistributedSampler& sampler;
  const hddp::Dataset &train, &test;
  hddp::JsonLines* stats;
};
int train_steps(const Env& env, const Options& o, Run r);

// The data, the model, the optimizer and the run kit; a resumed checkpoint's records.
int run(Env& env, const Options& o) {
  const int rank = env.rank(), size = env.size();
  const int threads = hddp::drivers::resolve_threads(o.threads);
  omp_set_num_threads(threads);
  if (o.inject_nan.rank >= size && o.inject_nan.epoch > 0)
    return usage_error(env, "--debug-inject-nan: rank " + std::to_string(o.inject_nan.rank) + " does not exist (" +
                                std::to_string(size) + " rank(s))");
  hddp::Dataset train, test;
  if (const std::string err = read_data(env, o, train, test); !err.empty()) return usage_error(env, err);
  hddp::Rng init(o.seed, 0);
  std::unique_ptr<hddp::Sequential<float>> net;
  try {
    net = std::make_unique<hddp::Sequential<float>>(train.shape, build_layers(o, train.shape), o.batch_size, init);
  } catch (const std::invalid_argument& e) {  // a layer that does not fit the images: the same on every rank
    return usage_error(env, "--model " + o.model + " on " + hddp::to_string(train.shape) + " images: " + hddp::user_message(e.what()));
  }
  hddp::Sequential<float>& model = *net;
  model.set_precision(o.precision);
  std::string unit;
  try {
    unit = hddp::cli::precision_report(o);
  } catch (const hddp::cli::UsageError& e) {
    return usage_error(env, e.what());
  }
  const std::unique_ptr<hddp::Optimizer<float>> opt = hddp::cli::make_optimizer(o, model.num_params());
  const hddp::DistributedSampler sampler(train.count, o.seed, rank, size);
  const int64_t spe = sampler.steps(o.batch_size);
  hddp::LrSchedule schedule = hddp::LrSchedule::constant(o.lr);
  try {
    schedule = hddp::cli::make_schedule(o, o.epochs * spe);
  } catch (const hddp::cli::UsageError& e) {
    return usage_error(env, e.what());
  }
  // The run: the kit keeps the metrics table and the epoch's loss sums in every checkpoint.
  hddp::TrainingRunOptions ro = hddp::drivers::training_run_options(o, o, o);
  ro.program = "mnist_train", ro.steps_per_epoch = spe, ro.identity = run_identity(o, model, train, test), ro.schedule = &schedule;
  ro.metrics = kMetricColumns;
  ro.keep_train_seconds = true;  // metrics.csv's elapsed_train_s goes on after a resume
  std::optional<hddp::AutosizeResult> autosized;
  if (!o.bucket_mb) autosized = hddp::drivers::autosize(env, model, o.batch_size, o.seed, !o.first_bucket_mb, ro.reducer);
  hddp::TrainingRun run(env, model, *opt, ro);
  if (const std::string err = run.begin(); !err.empty()) return usage_error(env, err);
  if (env.root())
    std::printf("model: %s (%lld parameters); %d rank(s) x %d thread(s), batch %lld per rank, %lld steps per epoch\n",
                model.describe().c_str(), (long long)model.num_params(), size, threads, (long long)o.batch_size, (long long)spe);
  if (env.root() && !unit.empty()) std::printf("precision: %s\n", unit.c_str());
  std::unique_ptr<hddp::JsonLines> stats;
  if (env.root() && !o.stats_json.empty()) stats = std::make_unique<hddp::JsonLines>(o.stats_json);
  if (stats && autosized) stats->write_line(hddp::drivers::autosize_json(*autosized));
  return train_steps(env, o, {run, model, sampler, train, test, stats.get()});
}

// The step loop and the epoch's end, then the results.
int train_steps(const Env& env, const Options& o, Run r) {
  const int rank = env.rank(), size = env.size();
  hddp::TrainingRun& run = r.run;
  hddp::Sequential<float>& model = r.model;
  hddp::MetricsTable& metrics = run.metrics();
  const int64_t spe = run.steps_per_epoch(), start = run.first_step(), total = run.total_steps();
  // The epoch's end, after its last step's update: the kit's training loss, the test set.
  hddp::Evaluation last;
  const auto epoch_end = [&](const hddp::EpochEnd& e) {
    const int64_t epoch = e.epoch;
    const double train_loss = e.train_loss;
    last = hddp::evaluate_classifier(env, run.watchdog(), model, r.test);
    const double elapsed = run.train_seconds(), train_s = elapsed - (metrics.size() ? metrics.rows().back()[5] : 0.0);
    metrics.add({double(epoch + 1), train_loss, last.loss, last.accuracy, train_s, elapsed});
    if (!env.root()) return;
    run.log().line("epoch %lld/%lld: train loss %.4f, test loss %.4f, test accuracy %.2f %%, %.2f s (%s)\n",
                   (long long)(epoch + 1), (long long)o.epochs, train_loss, last.loss, 100.0 * last.accuracy, train_s,
                   hddp::eta(elapsed, (epoch + 1) * spe - start, total - (epoch + 1) * spe).c_str());
    if (r.stats)
      r.stats->write({{"type", "epoch"}, {"epoch", epoch + 1}, {"train_loss", train_loss}, {"test_loss", last.loss},
                    {"test_accuracy", last.accuracy}, {"train_s", train_s}});
  };
  // The steps: forward, loss, backward (buckets reduced while it runs), then the run kit ends
  // the step (verdict, update, epoch end, checkpoint, stop).
  const hddp::Dataset& train = r.train;
  std::vector<float> x(size_t(o.batch_size * train.features()));
  std::vector<int32_t> y(static_cast<size_t>(o.batch_size));
  std::vector<int64_t> order;
  hddp::SoftmaxCrossEntropy<float> xent(kClasses);
  double t_progress = run.train_seconds();
  if (start == total) last = hddp::evaluate_classifier(env, run.watchdog(), model, r.test);  // nothing left to train
  for (int64_t step = start; step < total; ++step) {
    const int64_t epoch = step / spe, s = step % spe, b0 = s * o.batch_size;
    if (s == 0 || order.empty()) order = r.sampler.order(epoch + 1);  // streams from 1: 0 is the weights'
    const int64_t rows = std::min(o.batch_size, r.sampler.per_rank() - b0);
    train.gather(order.data() + b0, rows, x.data(), y.data());
    if (s == 0 && epoch + 1 == o.inject_nan.epoch && rank == o.inject_nan.rank) x[0] = std::nanf("");
    model.set_seed(hddp::derive_seed(o.seed, uint64_t(rank), uint64_t(step)));  // Dropout's mask: per rank and step
    model.zero_grad();
    const double loss = xent.forward(model.forward(std::span(x).first(size_t(rows * train.features())), rows), y.data(), rows);
    run.ddp().backward(xent.grad());
    if (env.root() && run.train_seconds() - t_progress > kProgressEvery) {
      t_progress = run.train_seconds();
      run.log().line("epoch %lld/%lld: step %lld/%lld, loss %.4f, %s\n", (long long)(epoch + 1), (long long)o.epochs,
                     (long long)(s + 1), (long long)spe, loss, hddp::eta(t_progress, step + 1 - start, total - step - 1).c_str());
    }
    if (const std::optional<int> exit = run.end_step(step, loss, rows, epoch_end)) return *exit;
  }
  run.log().flush();
  if (env.root())
    write_results(o, metrics, last, run.train_seconds(), total, size, omp_get_max_threads(), model, run.ddp(), r.stats);
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace mnist

int main(int argc, char** argv) {
  using namespace mnist;
  Options o;
  CLI::App app("", "mnist_train");
  define_options(app, o);
  hddp::drivers::Parsed p{"mnist_train"};
  try {
    p.source_hash = hddp::cli::parse(app, argc - 1, argv + 1);
    hddp::cli::check_options(app, o, o);
  } catch (const hddp::cli::UsageError& e) {
    p.error = e.what();
  }
  p.help = o.help, p.thread_level = hddp::required_thread_level(o.mode);
  if (p.help) p.help_text = app.help();
  const auto checks = [&](const Env& env) {
    std::string err = hddp::drivers::check_out_dir(env, o.out);
    return err.empty() ? hddp::drivers::check_output_files(env, {{"--stats-json", o.stats_json}, {"--export", o.export_path}}) : err;
  };
  return hddp::drivers::driver_main(p, &argc, &argv, checks, [&](Env& env) {
    hddp::install_stop_handlers();  // after MPI_Init, so nothing Open MPI installs can replace them
    return run(env, o);
  });
}
