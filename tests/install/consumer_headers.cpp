// Built with -Wall -Wextra -Wpedantic -Werror beside a file per installed header: the run kit's
// options as the guide writes them (designated initializers, the rest left to their defaults).
#include <cstdio>

#include <hddp/train/training_run.h>

int main() {
  const hddp::TrainingRunOptions o{.program = "consumer", .epochs = 2, .steps_per_epoch = 3, .checkpoint = "run.ckpt",
                                   .resume = true, .metrics = {"epoch", "train_loss"}};
  std::printf("headers: %s, %lld epochs of %lld steps\n", o.program.c_str(), (long long)o.epochs, (long long)o.steps_per_epoch);
  return o.metrics.size() == 2 ? 0 : 1;
}
