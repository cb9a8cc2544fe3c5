// mnist_train: a Fashion-MNIST classifier trained data-parallel over MPI ranks, OpenMP inside
// each rank. The model: Linear(784, W1), ReLU, ..., Linear(Wn, 10); softmax cross-entropy; Adam
// or SGD. Each epoch every rank walks its shard of a shuffle all ranks agree on (PyTorch's
// DistributedSampler, data/sampler.h), a batch per step: forward, loss, backward (gradient
// buckets reduced by MPI_Iallreduce while backward continues), the stop guard's verdict,
// optimizer step. After each epoch the test set is evaluated, sharded over the ranks and
// reduced. Run `mnist_train --help`.
//
// A step is one batch per rank; a checkpoint can fall inside an epoch (a signal), so it holds
// each rank's partial loss sum of that epoch as well as the metrics so far: a resumed run ends
// bitwise where an uninterrupted one ends. Exit codes: hddp::Exit (train/exit_code.h).
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <hddp/core/conv.h>
#include <hddp/core/layers.h>
#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/schedule.h>
#include <hddp/core/rng.h>
#include <hddp/core/safetensors.h>
#include <hddp/core/util.h>
#include <hddp/data/idx.h>
#include <hddp/data/sampler.h>
#include <hddp/distributed/ddp.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/watchdog.h>
#include <hddp/kernels/gemm_bf16.h>
#include <hddp/train/exit_code.h>
#include <hddp/train/line_log.h>
#include <hddp/train/metrics.h>
#include <hddp/train/plot.h>
#include <hddp/train/run_file.h>
#include <hddp/train/run_log.h>
#include <hddp/train/stop_guard.h>
#include "common/driver_setup.h"
#include "common/options.h"
#include "common/run_options.h"

namespace mnist {
namespace {

using Clock = std::chrono::steady_clock;
using hddp::Exit;
using hddp::mpi::Env;

constexpr int kClasses = 10;
constexpr double kProgressEvery = 10.0;  // seconds between progress lines inside a long epoch
const char* const kClassNames[kClasses] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                           "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
const std::vector<std::string> kMetricColumns = {"epoch", "train_loss", "test_loss", "test_accuracy", "train_s",
                                                 "elapsed_train_s"};

// The shared groups (drivers/common/run_options.h) with this driver's defaults, and its own.
struct Options : hddp::cli::TrainingOptions, hddp::cli::ParallelOptions, hddp::cli::CheckpointOptions {
  Options() { checkpoint_every = 1; }  // an epoch is long: a checkpoint after each (when --checkpoint)
  std::string data = hddp::kFashionMnistDir, out = "out-mnist", stats_json, export_path;
  int64_t limit_train = 0, limit_test = 0;
  std::string model = "mlp";
  std::vector<int64_t> hidden{256, 256};
  double dropout = 0;
  double target = 0.87;
  bool plot = true, help = false;
  hddp::cli::Inject inject_nan;  // --debug-inject-nan (tests)
};

void define_options(CLI::App& app, Options& o) {
  using hddp::cli::integer, hddp::cli::number;
  hddp::cli::house_style(app,
                         "mnist_train: a Fashion-MNIST classifier trained data-parallel (MPI ranks x OpenMP threads)\n"
                         "  mpiexec -n 2 mnist_train [--epochs 10] [--hidden 256,256] [--out DIR]\n"
                         "Writes metrics.csv, confusion.csv and training.pdf into --out (rank 0).",
                         "SIGTERM or SIGUSR1: every rank finishes its step, rank 0 writes the checkpoint (inside\n"
                         "an epoch too), all exit with 75; --resume continues bitwise. Epochs are counted from 1.\n" +
                             hddp::exit_codes_help(),
                         34, o.help, "read options from FILE (TOML/INI, keys the long options without dashes)");
  const auto count = integer(0, int64_t(1) << 40);
  app.add_option("--data", o.data, "folder of the IDX files (train-images-idx3-ubyte[.gz], ...)")->type_name("DIR")->group("Data");
  app.add_option("--limit-train", o.limit_train, "use only the first N training images (0: all)")->check(count)->type_name("N")->group("Data");
  app.add_option("--limit-test", o.limit_test, "use only the first N test images (0: all)")->check(count)->type_name("N")->group("Data");
  hddp::cli::add_training_options(app, o, int64_t(1) << 20, "samples per rank per step");
  app.add_option("--model", o.model, "mlp: Linear, ReLU per --hidden width, Linear(W, 10);\n"
                                      "cnn: Conv2d(1,32,3,pad 1) ReLU MaxPool2d(2) Conv2d(32,64,3,pad 1)\n"
                                      "ReLU MaxPool2d(2) Flatten Linear(64*H/4*W/4, 128) ReLU Linear(128, 10)")
      ->check(hddp::cli::one_of(std::vector<std::pair<std::string, int>>{{"mlp", 0}, {"cnn", 1}}))->type_name("NAME")->group("Training");
  app.add_option("--hidden", o.hidden, "mlp: hidden widths, ReLU after each")->delimiter(',')
      ->check(integer(1, int64_t(1) << 20))->default_str("256,256")->type_name("W[,W...]")->group("Training");
  app.add_option("--dropout", o.dropout, "Dropout(P) before the last Linear (0: none), in training only")
      ->check(hddp::cli::number_where([](double x) { return x >= 0 && x < 1; }, "in [0, 1)"))->type_name("P")->group("Training");
  app.add_option("--target-accuracy", o.target, "report when the test accuracy first reaches this")
      ->check(number(0, 1))->type_name("X")->group("Training");
  hddp::cli::add_parallel_options(app, o);
  app.add_option("--out", o.out, "folder for metrics.csv, confusion.csv, training.pdf")
      ->check(hddp::cli::non_empty())->type_name("DIR")->group("Output");
  app.add_flag("--plot,!--no-plot", o.plot, "draw training.pdf with gnuplot")->group("Output");
  app.add_option("--stats-json", o.stats_json, "JSON lines: one object per epoch, then a summary")
      ->check(hddp::cli::non_empty())->type_name("FILE")->group("Output");
  app.add_option("--export", o.export_path, "write the trained weights to FILE (safetensors, PyTorch's names)")
      ->check(hddp::cli::non_empty())->type_name("FILE")->group("Output");
  hddp::cli::add_checkpoint_options(app, o, "weights, optimizer state, the step, the metrics\n"
                                            "so far, each rank's loss sum of the epoch under way");
  app.add_option_function<std::string>("--debug-inject-nan", [&o](const std::string& v) { o.inject_nan = hddp::cli::to_inject(v); },
                                       "rank RANK (default 0) sees a NaN pixel in the first step of epoch EPOCH")
      ->check(hddp::cli::inject_spec(int64_t(1) << 20))->type_name("EPOCH[:RANK]")->group("Debugging (tests)");
}

// The model for images of `shape` (C, H, W). The CNN's classifier takes the flattened size its
// two 2x2 pools leave (64 x 7 x 7 = 3136 for 28 x 28); images too small for them are refused by
// the layer that does not fit, naming it.
std::vector<hddp::LayerSpec> build_layers(const Options& o, const hddp::Shape& shape) {
  std::vector<hddp::LayerSpec> l;
  int64_t in = hddp::numel(shape);
  if (o.model == "cnn") {
    l = {hddp::Conv2d(shape[0], 32, 3, 1, 1), hddp::ReLU(), hddp::MaxPool2d(2),
         hddp::Conv2d(32, 64, 3, 1, 1),       hddp::ReLU(), hddp::MaxPool2d(2), hddp::Flatten()};
    in = 64 * (shape[1] / 2 / 2) * (shape[2] / 2 / 2);
    l.push_back(hddp::Linear(std::max<int64_t>(in, 1), 128));
    l.push_back(hddp::ReLU());
    in = 128;
  } else {
    for (int64_t w : o.hidden) {
      l.push_back(hddp::Linear(in, w));
      l.push_back(hddp::ReLU());
      in = w;
    }
  }
  if (o.dropout > 0) l.push_back(hddp::Dropout(o.dropout));
  l.push_back(hddp::Linear(in, kClasses));
  return l;
}

// Test loss, accuracy and the confusion matrix, the test set sharded over the ranks and reduced.
struct Eval {
  double loss = 0, accuracy = 0;
  std::vector<int64_t> confusion = std::vector<int64_t>(kClasses * kClasses, 0);  // [true][predicted]
};

Eval evaluate(const Env& env, hddp::Watchdog& watchdog, hddp::Sequential<float>& model, const hddp::Dataset& test) {
  const hddp::Shard sh = hddp::shard_of(test.count, env.rank(), env.size());
  // Chunks of the training batch: the model's buffers are sized for it (a CNN's activations and
  // im2col columns for 1000 images would take half a GiB).
  const int64_t chunk = model.max_batch();
  std::vector<float> x(size_t(chunk * test.features())), p(size_t(chunk * kClasses));
  std::vector<int32_t> y(static_cast<size_t>(chunk));
  std::vector<int64_t> idx(static_cast<size_t>(chunk));
  Eval e;
  hddp::RankSums sums;
  double loss_sum = 0;
  model.set_training(false);
  for (int64_t b = sh.begin; b < sh.begin + sh.count; b += chunk) {
    const int64_t rows = std::min(chunk, sh.begin + sh.count - b);
    for (int64_t i = 0; i < rows; ++i) idx[size_t(i)] = b + i;
    test.gather(idx.data(), rows, x.data(), y.data());
    const float* logits = model.forward(std::span(x).first(size_t(rows * test.features())), rows);
    loss_sum += hddp::softmax_xent_forward(rows, kClasses, logits, y.data(), p.data()) * double(rows);
    for (int64_t i = 0; i < rows; ++i) {
      const float* r = p.data() + i * kClasses;
      const int64_t pred = std::max_element(r, r + kClasses) - r;
      ++e.confusion[size_t(y[size_t(i)] * kClasses + pred)];
    }
  }
  model.set_training(true);
  sums.add("loss", loss_sum);
  e.loss = sums.reduce(env, &watchdog, "the test loss").at("loss") / double(test.count);
  hddp::sum_over_ranks(env, &watchdog, e.confusion, "the confusion matrix");
  int64_t correct = 0;
  for (int c = 0; c < kClasses; ++c) correct += e.confusion[size_t(c * kClasses + c)];
  e.accuracy = double(correct) / double(test.count);
  return e;
}

void write_confusion(const std::string& path, const Eval& e) {
  std::ostringstream os;
  os << "true\\predicted";
  for (const char* n : kClassNames) os << ',' << n;
  os << '\n';
  for (int t = 0; t < kClasses; ++t) {
    os << kClassNames[t];
    for (int p = 0; p < kClasses; ++p) os << ',' << e.confusion[size_t(t * kClasses + p)];
    os << '\n';
  }
  hddp::write_file_atomic(path, os.str());
}

// training.pdf: the losses and the test accuracy per epoch, side by side.
void plot_training(const std::string& path, const hddp::MetricsTable& m, int ranks) {
  hddp::Series train{"training (mean over the epoch)", "with linespoints lw 2 pt 7 lc rgb '#1f77b4'", {}},
      test{"test", "with linespoints lw 2 pt 7 lc rgb '#ff7f0e'", {}},
      acc{"test accuracy", "with linespoints lw 2 pt 7 lc rgb '#2ca02c'", {}};
  for (size_t r = 0; r < m.size(); ++r) {
    const double e = m.at(r, "epoch");
    train.points.emplace_back(e, m.at(r, "train_loss"));
    test.points.emplace_back(e, m.at(r, "test_loss"));
    acc.points.emplace_back(e, 100.0 * m.at(r, "test_accuracy"));
  }
  hddp::plot_pdf(path,
                 {{"Cross-entropy loss", "epoch", "loss", {train, test}, "set key top right\n", ""},
                  {"Test accuracy", "epoch", "accuracy (%)", {acc}, "set key bottom right\n", ""}},
                 "Fashion-MNIST, " + std::to_string(ranks) + " rank(s)");
}

// What a checkpoint must match to be resumed (with the rank count): everything that decides the
// sequence of steps.
std::map<std::string, std::string> run_identity(const Options& o, const hddp::Sequential<float>& model,
                                                const hddp::Dataset& train, const hddp::Dataset& test) {
  std::map<std::string, std::string> id = hddp::cli::identity_of(o);
  id["layers"] = model.describe();
  id["data"] = std::to_string(train.count) + " training, " + std::to_string(test.count) + " test images";
  return id;
}

int usage_error(const Env& env, const std::string& err) {  // every rank gets here together
  if (env.root()) std::fprintf(stderr, "mnist_train: error: %s\n", err.c_str());
  return hddp::code(Exit::Usage);
}

int run(Env& env, const Options& o) {
  const int rank = env.rank(), size = env.size();
  const int threads = hddp::drivers::resolve_threads(o.threads);
  omp_set_num_threads(threads);
  if (o.inject_nan.rank >= size && o.inject_nan.epoch > 0)
    return usage_error(env, "--debug-inject-nan: rank " + std::to_string(o.inject_nan.rank) + " does not exist (" +
                                std::to_string(size) + " rank(s))");

  // Every rank reads the files (bytes, 55 MB); a problem on any rank stops all with exit 2.
  hddp::Dataset train, test;
  std::string err;
  try {
    train = hddp::read_mnist(o.data, "train").head(o.limit_train);
    test = hddp::read_mnist(o.data, "test").head(o.limit_test);
    // One model, built for the training images, reads both.
    hddp::check_sample_shape(test, train.shape, o.data + ": the test images, for a model built for the training images");
  } catch (const hddp::Error& e) {
    err = hddp::user_message(e.what());
  } catch (const std::bad_alloc&) {  // a node with a memory cap: the same exit 2 on every rank
    err = o.data + ": out of memory while reading the images (every rank holds both sets in memory)";
  }
  if (const std::string all = hddp::agree_on_error(env, err); !all.empty()) return usage_error(env, all);
  if (env.root())
    std::printf("data: %lld training and %lld test images of %lld pixels from %s\n", (long long)train.count,
                (long long)test.count, (long long)train.features(), o.data.c_str());

  hddp::Rng init(o.seed, 0);
  std::unique_ptr<hddp::Sequential<float>> net;
  try {
    net = std::make_unique<hddp::Sequential<float>>(train.shape, build_layers(o, train.shape),
                                                    o.batch_size, init);
  } catch (const std::invalid_argument& e) {  // a layer that does not fit the images: the same on every rank
    return usage_error(env, "--model " + o.model + " on " + hddp::to_string(train.shape) + " images: " +
                                hddp::user_message(e.what()));
  }
  hddp::Sequential<float>& model = *net;
  model.set_precision(o.precision);
  const std::unique_ptr<hddp::Optimizer<float>> opt = hddp::cli::make_optimizer(o, model.num_params());
  const hddp::DistributedSampler sampler(train.count, o.seed, rank, size);
  const int64_t steps_per_epoch = sampler.steps(o.batch_size), total_steps = o.epochs * steps_per_epoch;
  std::optional<hddp::LrSchedule> schedule;  // every step's learning rate, from the optimizer's step count
  try {
    schedule = hddp::cli::make_schedule(o, total_steps);
  } catch (const hddp::cli::UsageError& e) {
    return usage_error(env, e.what());
  }

  hddp::Watchdog watchdog(env.comm(), hddp::WatchdogOptions{.timeout_s = o.timeout, .exit_code = hddp::code(Exit::Stall)});
  hddp::RunFile run_file(env, watchdog, {.path = o.checkpoint, .resume = o.resume,
                                         .identity = run_identity(o, model, train, test), .total_steps = total_steps});
  if (const std::string e = run_file.resume(model.arena(), *opt); !e.empty()) return usage_error(env, e);
  // The resumed metrics and this rank's loss sum of the epoch under way.
  hddp::MetricsTable metrics(kMetricColumns);
  double loss_sum = 0, elapsed = 0;
  const int64_t start = run_file.start();
  if (start > 0) try {
      const std::map<std::string, std::string>& rec = run_file.records();
      for (const char* k : {"metrics", "loss_sums", "elapsed"})
        HDDP_CHECK(rec.count(k), "it has no '" << k << "' record (not mnist_train's)");
      metrics = hddp::MetricsTable::decode(rec.at("metrics"), kMetricColumns, "its metrics");
      const std::vector<double> sums = hddp::decode_doubles(rec.at("loss_sums"), "its loss sums");
      HDDP_CHECK(int64_t(metrics.size()) == start / steps_per_epoch && sums.size() == size_t(size),
                 "it holds " << metrics.size() << " epochs of metrics and " << sums.size() << " loss sums for step "
                             << start << " of " << size << " ranks");
      loss_sum = sums[size_t(rank)];
      elapsed = hddp::decode_doubles(rec.at("elapsed"), "its elapsed time").at(0);
    } catch (const std::exception& e) {
      return usage_error(env, "--resume: cannot use checkpoint '" + o.checkpoint + "': " + hddp::user_message(e.what()));
    }
  const auto kept = [&] { return run_file.kept_note(); };

  hddp::ReducerOptions ropt = hddp::drivers::reducer_options(o, watchdog);
  if (!o.bucket_mb) hddp::drivers::autosize(env, model, o.batch_size, o.seed, !o.first_bucket_mb, ropt);
  hddp::DistributedModel ddp(env.comm(), model, ropt);  // rank 0's weights everywhere
  ddp.set_check_finite(true);
  auto where = [&](int64_t s) {
    return "epoch " + std::to_string(s / steps_per_epoch + 1) + " (step " + std::to_string(s % steps_per_epoch + 1) +
           " of " + std::to_string(steps_per_epoch) + ")";
  };
  hddp::StopGuard guard(env, watchdog, {.program = "mnist_train", .total_steps = total_steps, .check_every = o.check_every,
                                        .where = where},
                        start, kept);
  std::unique_ptr<hddp::JsonLines> stats;
  if (env.root() && !o.stats_json.empty()) stats = std::make_unique<hddp::JsonLines>(o.stats_json);
  hddp::LineLog log(stdout);
  if (env.root()) {
    std::printf("model: %s (%lld parameters); %d rank(s) x %d thread(s), batch %lld per rank, %lld steps per epoch\n",
                model.describe().c_str(), (long long)model.num_params(), size, threads, (long long)o.batch_size,
                (long long)steps_per_epoch);
    if (start > 0 && start % steps_per_epoch == 0)
      std::printf("resumed from '%s' after epoch %lld of %lld\n", run_file.resumed_from().c_str(), (long long)(start / steps_per_epoch),
                  (long long)o.epochs);
    else if (start > 0)
      std::printf("resumed from '%s' inside %s of %lld epochs\n", run_file.resumed_from().c_str(), where(start).c_str(), (long long)o.epochs);
    std::fflush(stdout);
  }

  auto stop_together = [&](Exit code) {
    log.flush();
    return hddp::finish_together(env, watchdog, code);
  };
  // The checkpoint after `done` steps; false (stop, exit 3) if the state is not finite.
  auto checkpoint = [&](int64_t done, double epoch_elapsed) {
    if (!run_file.enabled()) return true;
    if (!hddp::RunFile::finite(model.arena(), *opt)) {
      if (env.root())
        std::fprintf(stderr, "mnist_train: error: the parameters or optimizer state are not finite after %s%s\n",
                     where(done - 1).c_str(), kept().c_str());
      return false;
    }
    std::vector<double> sums(env.root() ? size_t(size) : 0);
    MPI_Request req;
    HDDP_MPI(MPI_Igather(&loss_sum, 1, MPI_DOUBLE, sums.data(), 1, MPI_DOUBLE, 0, env.comm(), &req));
    watchdog.wait(&req, "the checkpoint's gather of the loss sums");
    run_file.save(done, model.arena(), *opt, nullptr,
                  {{"metrics", metrics.encode()}, {"loss_sums", hddp::encode_doubles(sums)},
                   {"elapsed", hddp::encode_doubles({epoch_elapsed})}});
    return true;
  };

  // After a signal: rank 0 says where all stopped and what is kept; the exit code.
  auto stopped = [&](int signal, int64_t step) {
    if (env.root())
      std::fprintf(stderr, "mnist_train: %s: all ranks stopped after %s; %s (exit code %d)\n", hddp::signal_name(signal),
                   where(step).c_str(),
                   o.checkpoint.empty() ? "no --checkpoint, so the progress is lost"
                                        : ("checkpoint '" + o.checkpoint + "' written: continue with --resume").c_str(),
                   hddp::code(Exit::Stopped));
    return Exit::Stopped;
  };

  std::vector<float> x(size_t(o.batch_size * train.features())), dlogits(size_t(o.batch_size * kClasses));
  std::vector<int32_t> y(static_cast<size_t>(o.batch_size));
  Eval last;
  if (start == total_steps) last = evaluate(env, watchdog, model, test);  // nothing left to train: the final evaluation
  for (int64_t epoch = start / steps_per_epoch; epoch < o.epochs; ++epoch) {
    watchdog.set_epoch(epoch + 1);
    const std::vector<int64_t> order = sampler.order(epoch + 1);  // streams from 1: 0 is the weights'
    const auto t0 = Clock::now();
    const double elapsed_before = elapsed;
    auto t_progress = t0;
    int stop = 0;  // a signal agreed at the epoch's last step: checkpoint after the epoch, then stop
    for (int64_t s = std::max(start - epoch * steps_per_epoch, int64_t(0)); s < steps_per_epoch; ++s) {
      const int64_t step = epoch * steps_per_epoch + s;
      const int64_t b0 = s * o.batch_size, rows = std::min(o.batch_size, sampler.per_rank() - b0);
      train.gather(order.data() + b0, rows, x.data(), y.data());
      if (s == 0 && epoch + 1 == o.inject_nan.epoch && rank == o.inject_nan.rank) x[0] = std::nanf("");
      model.set_seed(hddp::derive_seed(o.seed, uint64_t(rank), uint64_t(step)));  // Dropout's mask: per rank and step
      model.zero_grad();
      const float* logits = model.forward(std::span(x).first(size_t(rows * train.features())), rows);
      const double loss = hddp::softmax_xent_forward(rows, kClasses, logits, y.data(), dlogits.data());
      hddp::softmax_xent_backward(rows, kClasses, dlogits.data(), y.data(), dlogits.data());
      ddp.backward_from(dlogits.data());
      const hddp::StopGuard::Verdict v = guard.check(step, loss, ddp, s + 1 == steps_per_epoch);
      if (v.non_finite) return stop_together(Exit::NonFinite);
      if (o.clip_grad_norm > 0) hddp::clip_grad_norm(model.num_params(), model.grads(), o.clip_grad_norm);
      schedule->apply(*opt);
      opt->step(model.params(), model.grads());
      loss_sum += loss;
      elapsed = elapsed_before + hddp::seconds_since(t0);
      if (v.signal && s + 1 < steps_per_epoch) {  // inside the epoch: its partial state goes in the checkpoint
        if (!checkpoint(step + 1, elapsed)) return stop_together(Exit::NonFinite);
        return stop_together(stopped(v.signal, step));
      }
      stop = v.signal;
      if (env.root() && hddp::seconds_since(t_progress) > kProgressEvery) {
        t_progress = Clock::now();
        log.line("epoch %lld/%lld: step %lld/%lld, loss %.4f, %s\n", (long long)(epoch + 1), (long long)o.epochs,
                 (long long)(s + 1), (long long)steps_per_epoch, loss,
                 hddp::eta(elapsed, step + 1 - start, total_steps - step - 1).c_str());
      }
    }
    // The epoch's end: its metrics, over every rank's steps.
    hddp::RankSums sums;
    sums.add("loss", loss_sum);
    const double train_loss = sums.reduce(env, &watchdog, "the training loss").at("loss") / double(steps_per_epoch * size);
    loss_sum = 0;
    last = evaluate(env, watchdog, model, test);
    const double train_s = elapsed - (metrics.size() ? metrics.rows().back()[5] : 0.0);
    metrics.add({double(epoch + 1), train_loss, last.loss, last.accuracy, train_s, elapsed});
    const bool final_epoch = epoch + 1 == o.epochs;  // a signal at the very end changes nothing: the run is done
    const bool due = (o.checkpoint_every > 0 && (epoch + 1) % o.checkpoint_every == 0) || final_epoch || stop;
    if (due && !checkpoint((epoch + 1) * steps_per_epoch, elapsed)) return stop_together(Exit::NonFinite);
    if (env.root()) {
      log.line("epoch %lld/%lld: train loss %.4f, test loss %.4f, test accuracy %.2f %%, %.2f s (%s)\n",
               (long long)(epoch + 1), (long long)o.epochs, train_loss, last.loss, 100.0 * last.accuracy, train_s,
               hddp::eta(elapsed, (epoch + 1) * steps_per_epoch - start, total_steps - (epoch + 1) * steps_per_epoch).c_str());
      if (stats)
        stats->write({{"type", "epoch"}, {"epoch", epoch + 1}, {"train_loss", train_loss}, {"test_loss", last.loss},
                      {"test_accuracy", last.accuracy}, {"train_s", train_s}});
    }
    if (stop && !final_epoch) return stop_together(stopped(stop, (epoch + 1) * steps_per_epoch - 1));
  }
  log.flush();

  if (!env.root()) return 0;
  const std::string dir = o.out + "/";
  metrics.write_csv(dir + "metrics.csv");
  write_confusion(dir + "confusion.csv", last);
  int64_t reached = -1;
  for (size_t r = 0; r < metrics.size() && reached < 0; ++r)
    if (metrics.at(r, "test_accuracy") >= o.target) reached = int64_t(r);
  std::printf("training: %lld epochs in %.2f s (%.3f s per epoch), %d rank(s) x %d thread(s); test accuracy %.2f %%\n",
              (long long)o.epochs, elapsed, elapsed / double(o.epochs), size, threads, 100.0 * last.accuracy);
  if (!o.checkpoint.empty()) std::printf("checkpoint: %s (continue with --resume and more --epochs)\n", o.checkpoint.c_str());
  if (reached >= 0)
    std::printf("test accuracy %.1f %% first reached after epoch %lld, %.2f s of training\n", 100.0 * o.target,
                (long long)(reached + 1), metrics.at(size_t(reached), "elapsed_train_s"));
  else
    std::printf("test accuracy %.1f %% not reached in %lld epochs\n", 100.0 * o.target, (long long)o.epochs);
  std::printf("wrote %smetrics.csv, %sconfusion.csv\n", dir.c_str(), dir.c_str());
  if (stats) {
    stats->write({{"type", "summary"}, {"ranks", int64_t(size)}, {"threads", int64_t(threads)}, {"epochs", o.epochs},
                  {"train_s", elapsed}, {"epoch_s", elapsed / double(o.epochs)},
                  {"step_s", elapsed / double(total_steps)}, {"steps", total_steps}, {"test_accuracy", last.accuracy},
                  {"target_accuracy", o.target}, {"target_epoch", reached >= 0 ? reached + 1 : int64_t(-1)},
                  {"target_train_s", reached >= 0 ? metrics.at(size_t(reached), "elapsed_train_s") : -1.0},
                  {"precision", hddp::to_string(o.precision)}, {"bf16_kernel", hddp::gemm_bf16_kernel_name()}, {"grad_dtype", o.bf16_grads ? "bf16" : "float"},
                  {"allreduce_bytes_per_step", ddp.reducer().stats().bytes_per_step}});
    stats->close();
  }
  if (!o.export_path.empty()) {
    hddp::save_weights(o.export_path, model.arena(),
                       {{"format", "pt"}, {"hddp.layers", model.describe()}, {"hddp.input", "x / 255, 1 x 28 x 28 (NCHW)"},
                        {"hddp.test_accuracy", std::to_string(last.accuracy)}});
    std::printf("exported the weights to %s (safetensors)\n", o.export_path.c_str());
  }
  if (o.plot) {
    if (!hddp::gnuplot_available()) {
      std::fprintf(stderr, "warning: gnuplot not found (HDDP_GNUPLOT or PATH); training.pdf not drawn (metrics.csv "
                           "holds the results). Install it (Debian: apt-get install gnuplot-nox) or pass --no-plot.\n");
    } else {
      plot_training(dir + "training.pdf", metrics, size);
      std::printf("plotted the curves to %straining.pdf\n", dir.c_str());
    }
  }
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
    for (const std::string* path : {&o.stats_json, &o.export_path}) {
      const size_t slash = path->find_last_of('/');
      const std::string d = slash == std::string::npos ? "." : path->substr(0, slash + 1);
      if (err.empty() && !path->empty() && env.root() && access(d.c_str(), W_OK | X_OK) != 0)
        err = "cannot write '" + *path + "': directory '" + d + "' is not writable";
      err = hddp::mpi::bcast_string(err, 0, env.comm());
    }
    return err;
  };
  return hddp::drivers::driver_main(p, &argc, &argv, checks, [&](Env& env) {
    hddp::install_stop_handlers();  // after MPI_Init, so nothing Open MPI installs can replace them
    return run(env, o);
  });
}
