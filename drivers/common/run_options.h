#pragma once
// The option groups every driver shares, each option defined once with its check: training,
// parallelism, checkpoints. A driver sets its own defaults in the structs before adding them
// (poly_train: 1000 epochs of 32 samples; mnist_train: 10 epochs of 64), and adds its own
// options beside them. What they mean is the same in every driver:
//   --epochs N            epochs, counted from 1 in every message
//   --checkpoint-every N  epochs between checkpoints; 0: only at the end and on a signal
//   --timeout S           0 (off) or [1, 1e7]: below a second a roll call's grace would be
//                         shorter than a busy machine's scheduling delays
//   --bucket-mb X|auto    auto: chosen at start from a measurement (bucket_autosize.h)
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <hddp/core/layer.h>
#include <hddp/core/optim.h>
#include <hddp/core/schedule.h>
#include <hddp/distributed/reducer.h>
#include "common/options.h"

namespace hddp::cli {

enum class OptimizerKind { Adam, AdamW, Sgd };
const char* to_string(OptimizerKind k);  // "adam" | "adamw" | "sgd"

struct TrainingOptions {
  int64_t epochs = 10;
  int64_t batch_size = 64;  // samples per rank per step
  double lr = 1e-3;
  OptimizerKind optimizer = OptimizerKind::Adam;
  double momentum = 0.9;    // sgd only
  std::optional<double> weight_decay;  // none: the optimizer's default (adamw 0.01, else 0)
  std::string lr_schedule = "constant";
  int64_t warmup = 0;       // steps of linear warmup before the schedule
  double clip_grad_norm = 0;  // 0: off
  uint64_t seed = 0;
  Precision precision = Precision::Float;  // --precision: the Linear products in bf16
  double decay() const { return weight_decay.value_or(optimizer == OptimizerKind::AdamW ? 1e-2 : 0.0); }
};

struct ParallelOptions {
  int threads = 0;  // 0: OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, else this node's cores / its ranks
  std::optional<double> bucket_mb = 1, first_bucket_mb = 1;  // MiB; none: "auto"
  ReduceMode mode = ReduceMode::Test;
  double timeout = 300;     // the stall watchdog's seconds; 0: off
  bool bf16_grads = false;  // --grad-dtype bf16: buckets sent as bf16
};

struct CheckpointOptions {
  std::string checkpoint;       // "" : none
  int64_t checkpoint_every = 0; // epochs; 0: only at the end and on a signal
  bool resume = false;
  int64_t check_every = 0;      // steps between the ranks' agreement on signals and NaN; 0: ~5 ms
};

// "Training": --epochs --batch-size --lr --optimizer --momentum --weight-decay --lr-schedule
// --warmup --clip-grad-norm --seed. `batch_help` says what a batch is in this driver.
void add_training_options(CLI::App& app, TrainingOptions& o, int64_t max_epochs, const std::string& batch_help);
// --precision float|bf16 into p (add_training_options adds it; a driver with training options
// of its own adds it alone).
void add_precision_option(CLI::App& app, Precision& p, const std::string& group);
// "Parallelism": --threads --bucket-mb --first-bucket-mb --reduce-mode --timeout.
void add_parallel_options(CLI::App& app, ParallelOptions& o);
// "Checkpoints and faults": --checkpoint --checkpoint-every --resume --check-every. `contents`
// says what the checkpoint holds in this driver.
void add_checkpoint_options(CLI::App& app, CheckpointOptions& o, const std::string& contents);
// The checks across options of these groups, after parsing into `app`; throws UsageError.
void check_options(const CLI::App& app, const ParallelOptions& p, const CheckpointOptions& c);

// The optimizer the options ask for, over n values.
std::unique_ptr<Optimizer<float>> make_optimizer(const TrainingOptions& o, int64_t n);
// --precision bf16: "bf16 products on <unit> (<why>)" (kernels/units.h, the unit chosen by the
// measured rates or HDDP_BF16_UNIT); float: "". A bad HDDP_BF16_UNIT throws UsageError.
std::string precision_report(const TrainingOptions& o);
// The learning rate of every step of a run of total_steps optimizer steps (--lr, --lr-schedule,
// --warmup); throws UsageError naming the option when they do not fit that length.
LrSchedule make_schedule(const TrainingOptions& o, int64_t total_steps);
// Fault injection for the tests (--debug-inject-nan, poly_train's --debug-throw): rank `rank`
// sees a NaN input, or throws, at epoch `epoch` (1-based, as in every message; -1: off).
struct Inject {
  int64_t epoch = -1;
  int rank = 0;
};
// EPOCH[:RANK], EPOCH in [1, max_epochs], RANK >= 0 (0 when left out); to_inject reads a value
// it accepted.
CLI::Validator inject_spec(int64_t max_epochs);
Inject to_inject(const std::string& v);

// What a resumed checkpoint must match of these options: optimizer and its settings, batch
// size, seed (each driver adds its own: the model, the data...).
std::map<std::string, std::string> identity_of(const TrainingOptions& o);

}  // namespace hddp::cli
