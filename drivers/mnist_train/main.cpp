// mnist_train: a Fashion-MNIST classifier trained data-parallel over MPI ranks, OpenMP inside
// each rank. The model: Linear(784, W1), ReLU, ..., Linear(Wn, 10); softmax cross-entropy; Adam
// or SGD. Each epoch every rank walks its shard of a shuffle all ranks agree on (PyTorch's
// DistributedSampler), a batch per step: forward, loss, backward (gradient buckets reduced by
// MPI_Iallreduce while backward continues), optimizer step. After each epoch the test set is
// evaluated, sharded over the ranks and reduced. Run `mnist_train --help`.
//
// Exit codes: 0 done, 1 runtime error (every rank aborted), 2 bad input (options or data,
// on every rank, nothing trained), 3 a non-finite loss (all ranks stopped), 4 a stalled
// collective (--timeout).
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/driver_setup.h"
#include "common/gnuplot.h"
#include "common/options.h"
#include <hddp/core/checkpoint.h>
#include <hddp/core/layers.h>
#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/core/safetensors.h>
#include <hddp/core/util.h>
#include <hddp/data/sampler.h>
#include <hddp/distributed/ddp.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/reducer.h>
#include <hddp/distributed/watchdog.h>
#include "gnuplot-iostream.h"
#include "mnist_train/data.h"

namespace mnist {
namespace {

using Clock = std::chrono::steady_clock;
using hddp::mpi::Env;

constexpr int kExitUsage = 2, kExitNonFinite = 3, kExitStall = 4;
constexpr int64_t kEvalBatch = 1000;
const char* const kClassNames[kClasses] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                           "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

struct Options {
  std::string data = kDefaultData, out = "out-mnist", stats_json, export_path, checkpoint;
  int64_t epochs = 10, batch_size = 64, seed = 0, limit_train = 0, limit_test = 0, checkpoint_every = 1;
  std::vector<int64_t> hidden{256, 256};
  double lr = 1e-3, momentum = 0.0, bucket_mb = 25.0, first_bucket_mb = 1.0, timeout = 300.0, target = 0.87;
  std::string optimizer = "adam";
  hddp::ReduceMode mode = hddp::ReduceMode::Test;
  int threads = 0;
  bool plot = true, resume = false, help = false;
};

// The command line: one CLI11 call per option, its check beside it (drivers/common/options.h).
void define_options(CLI::App& app, Options& o) {
  using hddp::cli::integer, hddp::cli::number, hddp::cli::positive, hddp::cli::one_of;
  hddp::cli::house_style(app,
                         "mnist_train: a Fashion-MNIST classifier trained data-parallel (MPI ranks x OpenMP threads)\n"
                         "  mpiexec -n 2 mnist_train [--epochs 10] [--hidden 256,256] [--out DIR]\n"
                         "Writes metrics.csv, confusion.csv and training.pdf into --out (rank 0).",
                         "", 34, o.help, "read options from FILE (TOML/INI, keys the long options without dashes)");
  const auto count = integer(0, int64_t(1) << 40), positive_count = integer(1, int64_t(1) << 40);
  app.add_option("--data", o.data, "folder of the IDX files (train-images-idx3-ubyte[.gz], ...)")->type_name("DIR")->group("Data");
  app.add_option("--limit-train", o.limit_train, "use only the first N training images (0: all)")->check(count)->type_name("N")->group("Data");
  app.add_option("--limit-test", o.limit_test, "use only the first N test images (0: all)")->check(count)->type_name("N")->group("Data");
  app.add_option("--epochs", o.epochs, "passes over the training set")->check(positive_count)->type_name("N")->group("Training");
  app.add_option("--batch-size", o.batch_size, "samples per rank per step")->check(positive_count)->type_name("N")->group("Training");
  app.add_option("--hidden", o.hidden, "hidden widths, ReLU after each")->delimiter(',')
      ->check(integer(1, int64_t(1) << 20))->default_str("256,256")->type_name("W[,W...]")->group("Training");
  app.add_option("--optimizer", o.optimizer, "adam | sgd")
      ->check(one_of(std::vector<std::pair<std::string, int>>{{"adam", 0}, {"sgd", 1}}))->type_name("NAME")->group("Training");
  app.add_option("--lr", o.lr, "learning rate")->check(positive())->type_name("X")->group("Training");
  app.add_option("--momentum", o.momentum, "SGD momentum")->check(number(0, 1))->type_name("X")->group("Training");
  app.add_option("--seed", o.seed, "seed of the weights and the shuffles")->check(integer(0, INT64_MAX))->type_name("N")->group("Training");
  app.add_option("--target-accuracy", o.target, "report when the test accuracy first reaches this")
      ->check(number(0, 1))->type_name("X")->group("Training");
  app.add_option("--threads", o.threads, "OpenMP threads per rank (0: OMP_NUM_THREADS, else\n"
                                         "SLURM_CPUS_PER_TASK, else this node's cores / its ranks)")
      ->check(integer(0, 4096))->type_name("N")->group("Parallelism");
  app.add_option("--bucket-mb", o.bucket_mb, "gradient bucket cap, MiB")->check(number(1e-6, 1e6))->type_name("X")->group("Parallelism");
  app.add_option("--first-bucket-mb", o.first_bucket_mb, "first bucket cap, MiB")->check(number(1e-6, 1e6))
      ->type_name("X")->group("Parallelism");
  app.add_option("--reduce-mode", o.mode, "blocking | test | thread (as poly_train)")
      ->transform(one_of(std::vector<std::pair<std::string, hddp::ReduceMode>>{
          {"blocking", hddp::ReduceMode::Blocking}, {"test", hddp::ReduceMode::Test}, {"thread", hddp::ReduceMode::Thread}}))
      ->default_str(hddp::to_string(o.mode))->type_name("MODE")->group("Parallelism");
  app.add_option("--timeout", o.timeout, "stall watchdog, seconds (0: off)")->check(number(0, 1e9))->type_name("SECONDS")->group("Parallelism");
  app.add_option("--out", o.out, "folder for metrics.csv, confusion.csv, training.pdf")
      ->check(hddp::cli::non_empty())->type_name("DIR")->group("Output");
  app.add_flag("--plot,!--no-plot", o.plot, "draw training.pdf with gnuplot")->group("Output");
  app.add_option("--stats-json", o.stats_json, "JSON lines: one object per epoch, then a summary")->type_name("FILE")->group("Output");
  app.add_option("--export", o.export_path, "write the trained weights to FILE (safetensors, PyTorch's names)")
      ->type_name("FILE")->group("Output");
  app.add_option("--checkpoint", o.checkpoint, "write a checkpoint (weights, optimizer state, epochs done, the\n"
                                               "metrics so far) to FILE atomically after every --checkpoint-every\n"
                                               "epochs and at the end; an existing FILE needs --resume")
      ->type_name("FILE")->group("Checkpoints");
  app.add_option("--checkpoint-every", o.checkpoint_every, "epochs between checkpoints")->check(positive_count)
      ->type_name("N")->group("Checkpoints");
  app.add_flag("--resume", o.resume, "continue from --checkpoint FILE up to --epochs (a total), bitwise the\n"
                                     "run that never stopped; start from scratch if FILE does not exist;\n"
                                     "a checkpoint of another run (model, optimizer, batch, seed, data,\n"
                                     "rank count) is refused")
      ->group("Checkpoints");
}

std::vector<hddp::LayerSpec> build_layers(int64_t pixels, const std::vector<int64_t>& hidden) {
  std::vector<hddp::LayerSpec> l;
  int64_t in = pixels;
  for (int64_t w : hidden) {
    l.push_back(hddp::Linear(in, w));
    l.push_back(hddp::ReLU());
    in = w;
  }
  l.push_back(hddp::Linear(in, kClasses));
  return l;
}

// Test loss, accuracy and the confusion matrix, the test set sharded over the ranks and reduced.
struct Eval {
  double loss = 0, accuracy = 0;
  std::vector<int64_t> confusion = std::vector<int64_t>(kClasses * kClasses, 0);  // [true][predicted]
};

Eval evaluate(const Env& env, hddp::Sequential<float>& model, const Split& test) {
  const hddp::Shard sh = hddp::shard_of(test.count, env.rank(), env.size());
  std::vector<float> x(size_t(kEvalBatch * test.pixels)), p(size_t(kEvalBatch * kClasses));
  std::vector<int32_t> y(static_cast<size_t>(kEvalBatch));
  std::vector<int64_t> idx(static_cast<size_t>(kEvalBatch));
  Eval e;
  double loss_sum = 0;
  for (int64_t b = sh.begin; b < sh.begin + sh.count; b += kEvalBatch) {
    const int64_t rows = std::min(kEvalBatch, sh.begin + sh.count - b);
    for (int64_t i = 0; i < rows; ++i) idx[size_t(i)] = b + i;
    gather(test, idx.data(), rows, x.data(), y.data());
    const float* logits = model.forward(x.data(), rows);
    loss_sum += hddp::softmax_xent_forward(rows, kClasses, logits, y.data(), p.data()) * double(rows);
    for (int64_t i = 0; i < rows; ++i) {
      const float* r = p.data() + i * kClasses;
      const int64_t pred = std::max_element(r, r + kClasses) - r;
      ++e.confusion[size_t(y[size_t(i)] * kClasses + pred)];
    }
  }
  HDDP_MPI(MPI_Allreduce(MPI_IN_PLACE, &loss_sum, 1, MPI_DOUBLE, MPI_SUM, env.comm()));
  HDDP_MPI(MPI_Allreduce(MPI_IN_PLACE, e.confusion.data(), kClasses * kClasses, MPI_INT64_T, MPI_SUM, env.comm()));
  int64_t correct = 0;
  for (int c = 0; c < kClasses; ++c) correct += e.confusion[size_t(c * kClasses + c)];
  e.loss = loss_sum / double(test.count);
  e.accuracy = double(correct) / double(test.count);
  return e;
}

struct EpochRow {
  int64_t epoch;
  double train_loss, test_loss, test_accuracy, train_s, elapsed_s;
};

std::string metrics_csv(const std::vector<EpochRow>& rows) {
  std::ostringstream os;
  os.precision(9);
  os << "epoch,train_loss,test_loss,test_accuracy,train_s,elapsed_train_s\n";
  for (const EpochRow& r : rows)
    os << r.epoch << ',' << r.train_loss << ',' << r.test_loss << ',' << r.test_accuracy << ',' << r.train_s << ','
       << r.elapsed_s << '\n';
  return os.str();
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
void plot_training(const std::string& path, const std::vector<EpochRow>& rows, int ranks) {
  const std::string tmp = path + ".tmp";
  std::vector<std::pair<double, double>> train, test, acc;
  for (const EpochRow& r : rows) {
    train.emplace_back(double(r.epoch), r.train_loss);
    test.emplace_back(double(r.epoch), r.test_loss);
    acc.emplace_back(double(r.epoch), 100.0 * r.test_accuracy);
  }
  {
    Gnuplot gp(hddp::gnuplot::command());
    gp << "set terminal pdfcairo size 11in,4in font 'Sans,10'\n"
       << "set output '" << tmp << "'\n"
       << "set multiplot layout 1,2 title 'Fashion-MNIST, " << ranks << " rank(s)'\n"
       << "set grid\nset xlabel 'epoch'\nset key top right\n"
       << "set title 'Cross-entropy loss'\nset ylabel 'loss'\n"
       << "plot '-' with linespoints lw 2 pt 7 lc rgb '#1f77b4' title 'training (mean over the epoch)', "
          "'-' with linespoints lw 2 pt 7 lc rgb '#ff7f0e' title 'test'\n";
    gp.send1d(train);
    gp.send1d(test);
    gp << "set title 'Test accuracy'\nset ylabel 'accuracy (%)'\nset key bottom right\n"
       << "plot '-' with linespoints lw 2 pt 7 lc rgb '#2ca02c' title 'test accuracy'\n";
    gp.send1d(acc);
    gp << "unset multiplot\nset output\n";
  }
  struct stat st{};
  HDDP_CHECK(stat(tmp.c_str(), &st) == 0 && st.st_size > 0,
             "gnuplot did not write '" << tmp << "' (Debian: gnuplot-nox has the pdfcairo terminal)");
  HDDP_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '" << tmp << "' to '" << path << "'");
}

// What a checkpoint must match to be resumed (with the rank count): everything that decides the
// sequence of steps.
std::map<std::string, std::string> run_identity(const Options& o, const std::vector<hddp::LayerSpec>& layers,
                                                const Dataset& d) {
  std::string l;
  for (const hddp::LayerSpec& s : layers) l += (l.empty() ? "" : " -> ") + s.name();
  char opt[96];
  std::snprintf(opt, sizeof opt, "%s lr %.17g momentum %.17g", o.optimizer.c_str(), o.lr, o.momentum);
  return {{"layers", l},
          {"optimizer", opt},
          {"batch_size", std::to_string(o.batch_size)},
          {"seed", std::to_string(o.seed)},
          {"data", std::to_string(d.train.count) + " training, " + std::to_string(d.test.count) + " test images"}};
}

// The rows of a metrics.csv (as metrics_csv writes them).
std::vector<EpochRow> parse_metrics(const std::string& csv) {
  std::vector<EpochRow> rows;
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    EpochRow r{};
    long long e = 0;
    HDDP_CHECK(std::sscanf(line.c_str(), "%lld,%lf,%lf,%lf,%lf,%lf", &e, &r.train_loss, &r.test_loss,
                           &r.test_accuracy, &r.train_s, &r.elapsed_s) == 6,
               "the checkpoint's metrics are malformed at '" << line << "'");
    r.epoch = e;
    rows.push_back(r);
  }
  return rows;
}

// --resume: rank 0 reads the file (if any) and every rank restores from the same bytes.
// Returns "" (rows holds the epochs done, possibly none) or the error, the same on every rank.
std::string resume(const Env& env, const Options& o, const std::map<std::string, std::string>& identity,
                   hddp::Sequential<float>& model, hddp::Optimizer<float>& opt, std::vector<EpochRow>& rows) {
  std::string bytes, err;
  int exists = 0;
  if (env.root()) {
    exists = hddp::file_exists(o.checkpoint);
    try {
      if (exists && !o.resume)
        err = "--checkpoint: '" + o.checkpoint + "' exists; pass --resume to continue from it, or remove it";
      else if (exists)
        bytes = hddp::read_file(o.checkpoint);
    } catch (const hddp::Error& e) {
      err = e.what();
    }
  }
  if ((err = hddp::mpi::bcast_string(err, 0, env.comm())) != "") return err;
  HDDP_MPI(MPI_Bcast(&exists, 1, MPI_INT, 0, env.comm()));
  if (!exists) return "";
  bytes = hddp::mpi::bcast_string(bytes, 0, env.comm());
  try {
    const hddp::Checkpoint c = hddp::parse_checkpoint(bytes, o.checkpoint);
    const std::string diff = hddp::identity_diff(c.state, env.size(), identity);
    HDDP_CHECK(diff.empty(), "--resume: '" << o.checkpoint << "' is from another run: " << diff);
    HDDP_CHECK(c.state.epoch <= o.epochs, "--resume: '" << o.checkpoint << "' has " << c.state.epoch
                                                         << " epochs done, more than --epochs " << o.epochs);
    const auto rec = c.state.records.find("metrics");
    HDDP_CHECK(rec != c.state.records.end(), "--resume: '" << o.checkpoint << "' has no metrics record (not mnist_train's)");
    std::vector<EpochRow> saved = parse_metrics(rec->second);
    HDDP_CHECK(int64_t(saved.size()) == c.state.epoch, "--resume: '" << o.checkpoint << "' holds " << saved.size()
                                                                      << " metrics rows for " << c.state.epoch << " epochs");
    hddp::restore_checkpoint(c, o.checkpoint, model.arena(), opt);
    rows = std::move(saved);
  } catch (const hddp::Error& e) {
    err = e.what();
  }
  return hddp::drivers::agree_on_error(env, err);
}

// Rank 0 writes the checkpoint of `rows.size()` epochs (the ranks' weights and optimizer states
// are the same: every rank applied the same averaged gradients).
void save(const Env& env, const Options& o, const std::map<std::string, std::string>& identity,
          const hddp::Sequential<float>& model, hddp::Optimizer<float>& opt, const std::vector<EpochRow>& rows) {
  if (!env.root()) return;
  hddp::TrainState st;
  st.epoch = int64_t(rows.size());
  st.world_size = env.size();
  st.rng.assign(size_t(env.size()), hddp::Rng(uint64_t(o.seed), 0).state());  // unused: the order is (seed, epoch)
  for (int r = 0; r < env.size(); ++r)
    for (const EpochRow& row : rows) st.losses.push_back(float(row.train_loss));
  st.identity = identity;
  st.records["metrics"] = metrics_csv(rows);
  hddp::save_checkpoint(o.checkpoint, model.arena(), opt, st);
}

int run(Env& env, const Options& o) {
  const int rank = env.rank(), size = env.size();
  const int threads = hddp::drivers::resolve_threads(o.threads);
  omp_set_num_threads(threads);

  // Every rank reads the files (bytes, 55 MB); a problem on any rank stops all with exit 2.
  Dataset d;
  std::string err;
  try {
    d = load(o.data, o.limit_train, o.limit_test);
  } catch (const hddp::Error& e) {
    err = e.what();
  }
  if (const std::string all = hddp::drivers::agree_on_error(env, err); !all.empty()) {
    if (env.root()) std::fprintf(stderr, "mnist_train: error: %s\n", all.c_str());
    return kExitUsage;
  }
  if (env.root())
    std::printf("data: %lld training and %lld test images of %lld pixels from %s\n", (long long)d.train.count,
                (long long)d.test.count, (long long)d.train.pixels, o.data.c_str());

  const std::vector<hddp::LayerSpec> layers = build_layers(d.train.pixels, o.hidden);
  hddp::Rng init(uint64_t(o.seed), 0);
  hddp::Sequential<float> model(layers, std::max(o.batch_size, kEvalBatch), init);
  std::unique_ptr<hddp::Optimizer<float>> opt;
  if (o.optimizer == "adam") opt = std::make_unique<hddp::Adam<float>>(model.num_params(), hddp::AdamHyper{.lr = o.lr});
  else opt = std::make_unique<hddp::SGD<float>>(model.num_params(), hddp::SgdHyper{.lr = o.lr, .momentum = o.momentum});

  hddp::Watchdog watchdog(env.comm(), hddp::WatchdogOptions{.timeout_s = o.timeout, .exit_code = kExitStall});
  hddp::ReducerOptions ropt;
  ropt.bucket_cap_bytes = std::max<int64_t>(4, int64_t(o.bucket_mb * 1048576.0));
  ropt.first_bucket_cap_bytes = std::max<int64_t>(4, int64_t(o.first_bucket_mb * 1048576.0));
  ropt.mode = o.mode;
  ropt.progress_cpu = hddp::spare_progress_cpu();
  ropt.watchdog = &watchdog;
  hddp::DistributedModel ddp(env.comm(), model, ropt);  // rank 0's weights everywhere
  const std::map<std::string, std::string> identity = run_identity(o, layers, d);
  std::vector<EpochRow> rows;
  if (!o.checkpoint.empty())
    if (const std::string e = resume(env, o, identity, model, *opt, rows); !e.empty()) {
      if (env.root()) std::fprintf(stderr, "mnist_train: error: %s\n", e.c_str());
      return kExitUsage;
    }
  const int64_t start = int64_t(rows.size());
  if (env.root() && start > 0)
    std::printf("resumed from '%s' after epoch %lld of %lld\n", o.checkpoint.c_str(), (long long)start, (long long)o.epochs);

  std::unique_ptr<std::ofstream> stats;
  if (env.root() && !o.stats_json.empty()) {
    stats = std::make_unique<std::ofstream>(o.stats_json, std::ios::trunc);
    HDDP_CHECK(*stats, "--stats-json: cannot write '" << o.stats_json << "'");
  }
  const int64_t per_rank = (d.train.count + size - 1) / size;
  const int64_t steps = (per_rank + o.batch_size - 1) / o.batch_size;
  if (env.root()) {
    std::string l;
    for (const hddp::LayerSpec& s : layers) l += (l.empty() ? "" : " -> ") + s.name();
    std::printf("model: %s (%lld parameters); %d rank(s) x %d thread(s), batch %lld per rank, %lld steps per epoch\n",
                l.c_str(), (long long)model.num_params(), size, threads, (long long)o.batch_size, (long long)steps);
    std::fflush(stdout);
  }

  std::vector<float> x(size_t(o.batch_size * d.train.pixels)), dlogits(size_t(o.batch_size * kClasses));
  std::vector<int32_t> y(static_cast<size_t>(o.batch_size));
  Eval last;
  double elapsed = rows.empty() ? 0.0 : rows.back().elapsed_s, reached_at = -1;
  int64_t reached_epoch = -1;
  for (const EpochRow& r : rows)
    if (reached_epoch < 0 && r.test_accuracy >= o.target) reached_epoch = r.epoch, reached_at = r.elapsed_s;
  if (start == o.epochs) last = evaluate(env, model, d.test);  // nothing left to train: the final evaluation
  for (int64_t epoch = start + 1; epoch <= o.epochs; ++epoch) {
    watchdog.set_epoch(epoch);
    const std::vector<int64_t> order = epoch_order(d.train.count, uint64_t(o.seed), epoch, rank, size);
    double loss_sum = 0;
    const auto t0 = Clock::now();
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t b0 = s * o.batch_size, rows_here = std::min(o.batch_size, per_rank - b0);
      gather(d.train, order.data() + b0, rows_here, x.data(), y.data());
      model.zero_grad();
      const float* logits = model.forward(x.data(), rows_here);
      loss_sum += hddp::softmax_xent_forward(rows_here, kClasses, logits, y.data(), dlogits.data());
      hddp::softmax_xent_backward(rows_here, kClasses, dlogits.data(), y.data(), dlogits.data());
      ddp.backward_from(dlogits.data());
      opt->step(model.params(), model.grads());
    }
    const double train_s = hddp::seconds_since(t0);
    elapsed += train_s;
    HDDP_MPI(MPI_Allreduce(MPI_IN_PLACE, &loss_sum, 1, MPI_DOUBLE, MPI_SUM, env.comm()));
    const double train_loss = loss_sum / double(steps * size);
    if (!std::isfinite(train_loss)) {
      if (env.root())
        std::fprintf(stderr, "mnist_train: error: the training loss is not finite in epoch %lld (lower --lr?); all "
                             "ranks stopped\n", (long long)epoch);
      return kExitNonFinite;
    }
    last = evaluate(env, model, d.test);
    rows.push_back({epoch, train_loss, last.loss, last.accuracy, train_s, elapsed});
    if (reached_epoch < 0 && last.accuracy >= o.target) reached_epoch = epoch, reached_at = elapsed;
    if (!o.checkpoint.empty() && (epoch % o.checkpoint_every == 0 || epoch == o.epochs))
      save(env, o, identity, model, *opt, rows);
    if (env.root()) {
      std::printf("epoch %lld/%lld: train loss %.4f, test loss %.4f, test accuracy %.2f %%, %.2f s (ETA %.0f s)\n",
                  (long long)epoch, (long long)o.epochs, train_loss, last.loss, 100.0 * last.accuracy, train_s,
                  elapsed / double(epoch) * double(o.epochs - epoch));
      std::fflush(stdout);
      if (stats)
        *stats << nlohmann::ordered_json{{"type", "epoch"},       {"epoch", epoch},
                                         {"train_loss", train_loss}, {"test_loss", last.loss},
                                         {"test_accuracy", last.accuracy}, {"train_s", train_s}}
                      .dump()
               << '\n';
    }
  }

  if (!env.root()) return 0;
  const std::string dir = o.out + "/";
  hddp::write_file_atomic(dir + "metrics.csv", metrics_csv(rows));
  write_confusion(dir + "confusion.csv", last);
  std::printf("training: %lld epochs in %.2f s (%.3f s per epoch), %d rank(s) x %d thread(s); test accuracy %.2f %%\n",
              (long long)o.epochs, elapsed, elapsed / double(o.epochs), size, threads, 100.0 * last.accuracy);
  if (!o.checkpoint.empty()) std::printf("checkpoint: %s (continue with --resume and more --epochs)\n", o.checkpoint.c_str());
  if (reached_epoch > 0)
    std::printf("test accuracy %.1f %% first reached after epoch %lld, %.2f s of training\n", 100.0 * o.target,
                (long long)reached_epoch, reached_at);
  else
    std::printf("test accuracy %.1f %% not reached in %lld epochs\n", 100.0 * o.target, (long long)o.epochs);
  std::printf("wrote %smetrics.csv, %sconfusion.csv\n", dir.c_str(), dir.c_str());
  if (stats) {
    *stats << nlohmann::ordered_json{{"type", "summary"},        {"ranks", size},
                                     {"threads", threads},        {"epochs", o.epochs},
                                     {"train_s", elapsed},        {"epoch_s", elapsed / double(o.epochs)},
                                     {"test_accuracy", last.accuracy}, {"target_accuracy", o.target},
                                     {"target_epoch", reached_epoch}, {"target_train_s", reached_at}}
                  .dump()
           << '\n';
    stats->close();
    HDDP_CHECK(!stats->fail(), "--stats-json: error writing '" << o.stats_json << "'");
  }
  if (!o.export_path.empty()) {
    std::string l;
    for (const hddp::LayerSpec& s : layers) l += (l.empty() ? "" : " -> ") + s.name();
    hddp::save_weights(o.export_path, model.arena(),
                       {{"format", "pt"}, {"hddp.layers", l}, {"hddp.input", "x / 255, 28 x 28 row-major"},
                        {"hddp.test_accuracy", std::to_string(last.accuracy)}});
    std::printf("exported the weights to %s (safetensors)\n", o.export_path.c_str());
  }
  if (o.plot) {
    if (!hddp::gnuplot::available()) {
      std::fprintf(stderr, "warning: gnuplot not found (HDDP_GNUPLOT or PATH); training.pdf not drawn (metrics.csv "
                           "holds the results). Install it (Debian: apt-get install gnuplot-nox) or pass --no-plot.\n");
    } else {
      plot_training(dir + "training.pdf", rows, size);
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
  } catch (const hddp::cli::UsageError& e) {
    p.error = e.what();
  }
  p.help = o.help, p.thread_level = hddp::required_thread_level(o.mode);
  if (p.help) p.help_text = app.help();
  const auto checks = [&](const Env& env) {
    if (o.resume && o.checkpoint.empty()) return std::string("--resume needs --checkpoint FILE");
    std::string err = hddp::drivers::check_out_dir(env, o.out);
    for (const std::string* path : {&o.stats_json, &o.export_path, &o.checkpoint}) {
      const size_t slash = path->find_last_of('/');
      const std::string d = slash == std::string::npos ? "." : path->substr(0, slash + 1);
      if (err.empty() && !path->empty() && env.root() && access(d.c_str(), W_OK | X_OK) != 0)
        err = "cannot write '" + *path + "': directory '" + d + "' is not writable";
      err = hddp::mpi::bcast_string(err, 0, env.comm());
    }
    return err;
  };
  return hddp::drivers::driver_main(p, &argc, &argv, checks, [&](Env& env) { return run(env, o); });
}
