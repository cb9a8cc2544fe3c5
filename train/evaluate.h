#pragma once
// A classifier's evaluation over the ranks: each rank runs the model on its shard of a labelled
// data set (data/sampler.h, shard_of), in chunks of the model's max_batch, with training off
// (no Dropout); the loss sum, the confusion matrix and so the accuracy are summed over the
// ranks through the watchdog. Collective: every rank gets the same Evaluation.
//
//   const Evaluation e = evaluate_classifier(env, run.watchdog(), model, test);
//   std::printf("test accuracy %.2f %%\n", 100 * e.accuracy);
#include <cstdint>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/data/dataset.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/watchdog.h>

namespace hddp {

struct Evaluation {
  double loss = 0;      // softmax cross-entropy, the mean over the set
  double accuracy = 0;  // predictions equal to the label, over the set
  int64_t samples = 0;
  int64_t classes = 0;  // the model's outputs
  std::vector<int64_t> confusion;  // classes x classes: [true][predicted]
};

// The model's outputs are the logits of its classes; data's labels must be among them
// (check_class_count, data/dataset.h: data.num_classes <= outputs; a set that lacks the last
// classes is fine). Else std::invalid_argument, before any collective: check where the data
// are loaded instead, so that a run does not stop after its first epoch.
Evaluation evaluate_classifier(const mpi::Env& env, Watchdog& watchdog, Sequential<float>& model, const Dataset& data);

}  // namespace hddp
