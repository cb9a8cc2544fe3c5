#include <hddp/train/evaluate.h>

#include <algorithm>
#include <span>

#include <hddp/core/loss.h>
#include <hddp/data/sampler.h>
#include <hddp/kernels/check.h>
#include <hddp/train/rank_sums.h>

namespace hddp {

Evaluation evaluate_classifier(const mpi::Env& env, Watchdog& watchdog, Sequential<float>& model, const Dataset& data) {
  const int64_t C = model.out_features();
  HDDP_CHECK_ARG(!data.labels.empty() || data.count == 0, "evaluate_classifier: the data set holds no class labels");
  HDDP_CHECK_ARG(data.num_classes <= C, "evaluate_classifier: labels up to " << data.num_classes - 1 << ", but the model has "
                                                                             << C << " outputs");
  const Shard sh = shard_of(data.count, env.rank(), env.size());
  // Chunks of the training batch: the model's buffers are sized for it.
  const int64_t chunk = model.max_batch();
  std::vector<float> x(size_t(chunk * data.features()));
  std::vector<int32_t> y(static_cast<size_t>(chunk));
  std::vector<int64_t> idx(static_cast<size_t>(chunk));
  SoftmaxCrossEntropy<float> xent(C);
  Evaluation e{.samples = data.count, .classes = C, .confusion = std::vector<int64_t>(size_t(C * C), 0)};
  double loss_sum = 0;
  const bool training = model.training();
  model.set_training(false);
  for (int64_t b = sh.begin; b < sh.begin + sh.count; b += chunk) {
    const int64_t rows = std::min(chunk, sh.begin + sh.count - b);
    for (int64_t i = 0; i < rows; ++i) idx[size_t(i)] = b + i;
    data.gather(idx.data(), rows, x.data(), y.data());
    const float* logits = model.forward(std::span(x).first(size_t(rows * data.features())), rows);
    loss_sum += xent.forward(logits, y.data(), rows) * double(rows);
    for (int64_t i = 0; i < rows; ++i) ++e.confusion[size_t(y[size_t(i)] * C + xent.predicted(i))];
  }
  model.set_training(training);
  RankSums sums;
  sums.add("loss", loss_sum);
  e.loss = sums.reduce(env, &watchdog, "the evaluation's loss").at("loss") / double(std::max<int64_t>(data.count, 1));
  sum_over_ranks(env, &watchdog, e.confusion, "the confusion matrix");
  int64_t correct = 0;
  for (int64_t c = 0; c < C; ++c) correct += e.confusion[size_t(c * C + c)];
  e.accuracy = double(correct) / double(std::max<int64_t>(data.count, 1));
  return e;
}

}  // namespace hddp
