// cnn_classifier: a Fashion-MNIST CNN with a layer of its own (PReLU), trained data-parallel
// with AdamW, a warmup then a cosine learning rate, checkpoints (SIGTERM/SIGUSR1 inside an epoch
// -> checkpoint -> exit 75; run it again to resume) and the test accuracy over the ranks after
// every epoch (OUT/metrics.csv).
//   mpiexec -n 2 cnn_classifier OUT [EPOCHS [TRAIN_IMAGES]]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <hddp/core/conv.h>
#include <hddp/core/loss.h>
#include <hddp/core/model.h>
#include <hddp/data/idx.h>
#include <hddp/data/sampler.h>
#include <hddp/train/all_ranks.h>
#include <hddp/train/evaluate.h>
#include <hddp/train/metrics_table.h>
#include <hddp/train/training_run.h>

using namespace hddp;

// PyTorch's nn.PReLU(): y = x for x > 0, a x otherwise; one slope "weight" (1 x 1), 0.25 at start.
// Element-wise, so any memory layout will do: reads_nhwc and keeps_layout say so, and the
// convolutions around it stay channels-last (without them Sequential converts the activations
// to NCHW and back around this layer, the same bits at a higher cost than the layer's own).
template <class T>
class PReLU final : public Layer<T> {
 public:
  std::string name() const override { return "PReLU()"; }
  bool reads_nhwc() const override { return true; }
  bool keeps_layout() const override { return true; }
  Shape setup(const Shape& in) override { return n_ = numel(in), in; }
  std::vector<ParamSpec> parameters() const override { return {{"weight", 1, 1}}; }
  void reset_parameters(Rng&, T* const* p) const override { p[0][0] = T(0.25); }
  void forward(const Forward<T>& f) const override {
    for (int64_t i = 0; i < f.batch * n_; ++i) f.y[i] = f.x[i] > 0 ? f.x[i] : f.params[0][0] * f.x[i];
  }
  void backward(const Backward<T>& b) const override {  // reads x: not in place
    T da = 0;
    for (int64_t i = 0; i < b.batch * n_; ++i) {
      if (b.x[i] <= 0) da += b.dy[i] * b.x[i];
      if (b.dx) b.dx[i] = b.x[i] > 0 ? b.dy[i] : b.params[0][0] * b.dy[i];
    }
    b.grads[0][0] = (b.accumulate ? b.grads[0][0] : T(0)) + da;
  }

 private:
  int64_t n_ = 0;
};

int train(mpi::Env& env, int argc, char** argv) {
  const int64_t batch = 64, epochs = argc > 2 ? std::atoll(argv[2]) : 3, limit = argc > 3 ? std::atoll(argv[3]) : 0;
  std::string err = argc < 2 || epochs < 1 || limit < 0 ? "usage: cnn_classifier OUT [EPOCHS [TRAIN_IMAGES]]" : "";
  Dataset tr, te;  // every rank reads both sets; the test set is evaluated in shards
  if (err.empty()) try {
      tr = read_mnist(kFashionMnistDir, "train").head(limit), te = read_mnist(kFashionMnistDir, "test").head(limit / 6);
      check_class_count(tr, 10, "the training set"), check_class_count(te, 10, "the test set");  // the model's 10 outputs
    } catch (const Error& e) {
      err = user_message(e.what());
    }
  const auto usage = [&](const std::string& e) {  // every rank, nothing trained: exit 2
    if (env.root()) std::fprintf(stderr, "cnn_classifier: %s\n", e.c_str());
    return code(Exit::Usage);
  };
  if (!(err = agree_on_error(env, err)).empty()) return usage(err);
  Rng init(1);
  Sequential<float> model(tr.shape, {Conv2d(1, 16, 3, 1, 1), layer<PReLU>(), MaxPool2d(2), Conv2d(16, 32, 3, 1, 1), ReLU(),
                                     MaxPool2d(2), Flatten(), Linear(32 * 7 * 7, 10)}, batch, init);
  AdamW<float> opt(model.num_params(), {.lr = 2e-3, .weight_decay = 0.01});
  const DistributedSampler sampler(tr.count, 7, env.rank(), env.size());
  const int64_t steps = sampler.steps(batch);
  const LrSchedule lr = LrSchedule::warmup_cosine(opt.lr(), steps, epochs * steps);  // one epoch of warmup
  const std::string out = argv[1];
  // The kit keeps the metrics and the epoch's loss sums in the checkpoint; the optimizer's
  // settings and the schedule (its length: the epochs) are part of the run's identity.
  TrainingRun run(env, model, opt,
                  {.program = "cnn_classifier", .epochs = epochs, .steps_per_epoch = steps, .checkpoint = out + "/run.ckpt",
                   .resume = true, .identity = {{"model", model.describe()}, {"images", std::to_string(tr.count)}},
                   .checkpoint_every = 1, .metrics = {"epoch", "train_loss", "test_accuracy"}, .schedule = &lr});
  if (!(err = run.begin()).empty()) return usage(err);
  const auto epoch_end = [&](const EpochEnd& e) {  // after the epoch's last update, on every rank
    const Evaluation test = evaluate_classifier(env, run.watchdog(), model, te);
    run.metrics().add({double(e.epoch + 1), e.train_loss, test.accuracy});
    if (env.root())
      run.log().line("epoch %lld/%lld: train loss %.4f, test accuracy %.2f %%\n", (long long)(e.epoch + 1), (long long)epochs,
                     e.train_loss, 100 * test.accuracy);
  };
  SoftmaxCrossEntropy<float> xent(10);
  std::vector<float> x(size_t(batch * tr.features()));
  std::vector<int32_t> y(static_cast<size_t>(batch));
  std::vector<int64_t> order;
  for (int64_t step = run.first_step(); step < run.total_steps(); ++step) {
    const int64_t s = step % steps, rows = std::min(batch, sampler.per_rank() - s * batch);
    if (s == 0 || order.empty()) order = sampler.order(step / steps + 1);  // epochs from 1: stream 0 drew the weights
    tr.gather(order.data() + s * batch, rows, x.data(), y.data());
    model.zero_grad();
    const double loss = xent.forward(model.forward(std::span(x).first(size_t(rows * tr.features())), rows), y.data(), rows);
    run.ddp().backward(xent.grad());  // gradients averaged over the ranks
    if (const std::optional<int> exit = run.end_step(step, loss, rows, epoch_end)) return *exit;
  }
  run.log().flush();
  if (env.root()) run.metrics().write_csv(out + "/metrics.csv"), std::printf("wrote %s/metrics.csv\n", out.c_str());
  return 0;
}

int main(int argc, char** argv) {
  mpi::Env env(&argc, &argv);
  install_stop_handlers();  // SIGTERM, SIGUSR1: finish the step, checkpoint, exit 75
  try {
    return train(env, argc, argv);
  } catch (const std::exception& e) {
    mpi::abort_all(code(Exit::Error), user_message(e.what()));  // every rank ends: none waits for this one
  }
}
