#include "mnist_train/report.h"

#include <cstdio>
#include <sstream>

#include <hddp/core/safetensors.h>
#include <hddp/core/util.h>
#include <hddp/kernels/gemm_bf16.h>
#include <hddp/kernels/units.h>
#include <hddp/train/plot.h>

namespace mnist {
namespace {

const char* const kClassNames[kClasses] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                           "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

void write_confusion(const std::string& path, const hddp::Evaluation& e) {
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

}  // namespace

// Rank 0, after the last epoch: the files, the summary lines and JSON, the weights, the plot.
void write_results(const Options& o, const hddp::MetricsTable& metrics, const hddp::Evaluation& last, double train_s,
                   int64_t steps, int size, int threads, hddp::Sequential<float>& model, hddp::DistributedModel& ddp,
                   hddp::JsonLines* stats) {
  const std::string dir = o.out + "/";
  metrics.write_csv(dir + "metrics.csv");
  write_confusion(dir + "confusion.csv", last);
  int64_t reached = -1;
  for (size_t r = 0; r < metrics.size() && reached < 0; ++r)
    if (metrics.at(r, "test_accuracy") >= o.target) reached = int64_t(r);
  std::printf("training: %lld epochs in %.2f s (%.3f s per epoch), %d rank(s) x %d thread(s); test accuracy %.2f %%\n",
              (long long)o.epochs, train_s, train_s / double(o.epochs), size, threads, 100.0 * last.accuracy);
  if (!o.checkpoint.empty()) std::printf("checkpoint: %s (continue with --resume and more --epochs)\n", o.checkpoint.c_str());
  if (reached >= 0)
    std::printf("test accuracy %.1f %% first reached after epoch %lld, %.2f s of training\n", 100.0 * o.target,
                (long long)(reached + 1), metrics.at(size_t(reached), "elapsed_train_s"));
  else
    std::printf("test accuracy %.1f %% not reached in %lld epochs\n", 100.0 * o.target, (long long)o.epochs);
  std::printf("wrote %smetrics.csv, %sconfusion.csv\n", dir.c_str(), dir.c_str());
  if (stats) {
    stats->write({{"type", "summary"}, {"ranks", int64_t(size)}, {"threads", int64_t(threads)}, {"epochs", o.epochs},
                 {"train_s", train_s}, {"epoch_s", train_s / double(o.epochs)},
                 {"step_s", train_s / double(steps)}, {"steps", steps},
                 {"test_accuracy", last.accuracy}, {"target_accuracy", o.target}, {"target_epoch", reached >= 0 ? reached + 1 : int64_t(-1)},
                 {"target_train_s", reached >= 0 ? metrics.at(size_t(reached), "elapsed_train_s") : -1.0},
                 {"precision", hddp::to_string(o.precision)}, {"bf16_kernel", hddp::gemm_bf16_kernel_name()},
                 {"bf16_unit", o.precision == hddp::Precision::Bf16 ? hddp::to_string(hddp::bf16_unit()) : "none"},
                 {"grad_dtype", o.bf16_grads ? "bf16" : "float"}, {"allreduce_bytes_per_step", ddp.reducer().stats().bytes_per_step}});
    stats->close();
  }
  if (!o.export_path.empty()) {
    hddp::save_weights(o.export_path, model.arena(),
                       {{"format", "pt"}, {"hddp.layers", model.describe()}, {"hddp.input", "x / 255, 1 x 28 x 28 (NCHW)"},
                        {"hddp.test_accuracy", std::to_string(last.accuracy)}});
    std::printf("exported the weights to %s (safetensors)\n", o.export_path.c_str());
  }
  if (o.plot && hddp::gnuplot_or_warn("training.pdf", "metrics.csv")) {
    plot_training(dir + "training.pdf", metrics, size);
    std::printf("plotted the curves to %straining.pdf\n", dir.c_str());
  }
}

}  // namespace mnist
