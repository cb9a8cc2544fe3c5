#include "mnist_train/options.h"

#include <algorithm>
#include <utility>

#include <hddp/core/conv.h>
#include <hddp/core/layers.h>
#include <hddp/train/exit_code.h>

namespace mnist {

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

std::map<std::string, std::string> run_identity(const Options& o, const hddp::Sequential<float>& model,
                                                const hddp::Dataset& train, const hddp::Dataset& test) {
  std::map<std::string, std::string> id = hddp::cli::identity_of(o);
  id["layers"] = model.describe();
  id["data"] = std::to_string(train.count) + " training, " + std::to_string(test.count) + " test images";
  return id;
}

}  // namespace mnist
