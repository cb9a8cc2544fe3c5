#include "common/run_options.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include <hddp/core/util.h>  // exact_string, user_message
#include <hddp/kernels/units.h>
#include "common/driver_setup.h"

namespace hddp::cli {
namespace {

// The names of `values` (their to_string) for one_of: one spelling, kept by the enum.
template <class E>
CLI::Validator named(std::initializer_list<E> values) {
  std::vector<std::pair<std::string, E>> v;
  for (E e : values) v.emplace_back(to_string(e), e);
  return one_of(v);
}

}  // namespace

const char* to_string(OptimizerKind k) {
  return k == OptimizerKind::Sgd ? "sgd" : k == OptimizerKind::AdamW ? "adamw" : "adam";
}

void add_precision_option(CLI::App& app, Precision& p, const std::string& group) {
  app.add_option("--precision", p, "float | bf16: the Linear and Conv2d products read their inputs\n"
                                              "and weights rounded to bf16 and sum in float (PyTorch's CPU\n"
                                              "autocast); activations, loss, optimizer and master weights stay\n"
                                              "float. The products run on the unit measured fastest at start-up,\n"
                                              "AMX or AVX512_BF16 where it beats the float FMA by 1.25x; those no\n"
                                              "bf16 unit takes stay float (HDDP_BF16_UNIT=amx|avx512bf16|float\n"
                                              "forces one); the run prints the unit and its measured rates")
      ->transform(named({Precision::Float, Precision::Bf16}))->default_str(to_string(p))
      ->type_name("NAME")->group(group);
}

void add_training_options(CLI::App& app, TrainingOptions& o, int64_t max_epochs, const std::string& batch_help) {
  const std::string g = "Training";
  app.add_option("--epochs", o.epochs, "epochs (counted from 1 in messages)")->check(integer(1, max_epochs))->type_name("N")->group(g);
  app.add_option("--batch-size", o.batch_size, batch_help)->check(integer(1, int64_t(1) << 24))->type_name("N")->group(g);
  app.add_option("--lr", o.lr, "learning rate")->check(positive())->type_name("X")->group(g);
  app.add_option("--optimizer", o.optimizer, "adam | adamw (decoupled weight decay) | sgd")
      ->transform(named({OptimizerKind::Adam, OptimizerKind::AdamW, OptimizerKind::Sgd}))->default_str(to_string(o.optimizer))
      ->type_name("NAME")->group(g);
  app.add_option("--momentum", o.momentum, "SGD momentum")
      ->check(number_where([](double x) { return x >= 0 && x < 1; }, "in [0, 1)"))->type_name("X")->group(g);
  app.add_option("--weight-decay", o.weight_decay, "weight decay: adamw's decoupled one (default 0.01), adam's and\n"
                                                    "sgd's L2 term (default 0)")
      ->check(number(0, 1))->type_name("X")->group(g);
  app.add_option("--lr-schedule", o.lr_schedule, "constant | step:STEP_SIZE:GAMMA | cosine[:ETA_MIN] (to 0 or\n"
                                                  "ETA_MIN over the run's steps after the warmup)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            try {
              parse_lr_schedule(v, 1.0, int64_t(1) << 40, 0);
              return "";
            } catch (const std::invalid_argument& e) {
              return user_message(e.what());
            }
          },
          ""))
      ->type_name("SPEC")->group(g);
  app.add_option("--warmup", o.warmup, "steps of linear warmup from lr/3 to lr before the schedule")
      ->check(integer(0, int64_t(1) << 40))->type_name("N")->group(g);
  app.add_option("--clip-grad-norm", o.clip_grad_norm, "clip the averaged gradients to this global 2-norm (0: off;\n"
                                                        "PyTorch's clip_grad_norm_ after DDP's allreduce)")
      ->check(number(0, 1e30))->type_name("X")->group(g);
  add_precision_option(app, o.precision, g);
  app.add_option("--seed", o.seed, "seed of the weights and the samples")->check(integer(0, INT64_MAX))->type_name("N")->group(g);
}

void add_parallel_options(CLI::App& app, ParallelOptions& o) {
  const std::string g = "Parallelism";
  app.add_option("--threads", o.threads, "OpenMP threads per rank; 0: OMP_NUM_THREADS, else\n"
                                         "SLURM_CPUS_PER_TASK, else this node's cores divided among its ranks")
      ->check(integer(0, 4096))->type_name("N")->group(g);
  app.add_option("--bucket-mb", o.bucket_mb, "gradient bucket cap, MiB, or auto: at start, every distinct bucket\n"
                                              "plan runs a few real steps on this job's network and the fastest\n"
                                              "wins; rank 0 prints the caps and the times (--stats-json too). They\n"
                                              "come from a measurement, so with 3+ ranks a resumed run may not be\n"
                                              "bitwise the one it continues")
      ->transform(or_auto(positive()))->default_str(o.bucket_mb ? std::to_string(int(*o.bucket_mb)) : "auto")
      ->type_name("X|auto")->group(g);
  app.add_option("--first-bucket-mb", o.first_bucket_mb, "first bucket cap, MiB, or auto (with --bucket-mb auto)")
      ->transform(or_auto(positive()))->default_str(o.first_bucket_mb ? std::to_string(int(*o.first_bucket_mb)) : "auto")
      ->type_name("X|auto")->group(g);
  app.add_option("--reduce-mode", o.mode, "how gradient buckets are reduced: blocking (one MPI_Allreduce per\n"
                                          "bucket after backward), test (MPI_Iallreduce during backward,\n"
                                          "progressed by MPI_Test from the compute thread) or thread (the same,\n"
                                          "progressed by a helper thread)")
      ->transform(named({ReduceMode::Blocking, ReduceMode::Test, ReduceMode::Thread}))
      ->default_str(hddp::to_string(o.mode))->type_name("MODE")->group(g);
  app.add_option("--timeout", o.timeout, "stall watchdog: when a collective of a step (a bucket allreduce, the\n"
                                         "ranks' agreement, a checkpoint gather) has waited this long, the\n"
                                         "waiting ranks name the ranks that did not arrive (rank, node, epoch,\n"
                                         "bucket) and the job ends with exit code 4; the last checkpoint is\n"
                                         "kept. 0 turns it off, else 1 to 10000000. With it, --reduce-mode\n"
                                         "blocking runs each bucket as MPI_Iallreduce (libnbc's rabenseifner)\n"
                                         "instead of MPI_Allreduce: with 3+ ranks the sums may round\n"
                                         "differently than with --timeout 0")
      ->check(number_where([](double x) { return x == 0 || (x >= 1 && x <= 1e7); }, "0 (off) or in [1, 10000000]"))
      ->type_name("SECONDS")->group(g);
  app.add_option("--grad-dtype", o.bf16_grads, "float | bf16: gradient buckets travel as bf16 (half the bytes),\n"
                                                "summed in float by a user-defined MPI op, averaged in float")
      ->transform(one_of(std::vector<std::pair<std::string, bool>>{{"float", false}, {"bf16", true}}))
      ->default_str("float")->type_name("NAME")->group(g);
}

void add_checkpoint_options(CLI::App& app, CheckpointOptions& o, const std::string& contents) {
  const std::string g = "Checkpoints and faults";
  app.add_option("--checkpoint", o.checkpoint, "write a checkpoint (" + contents + ")\n"
                                               "to FILE atomically at the end, every --checkpoint-every epochs,\n"
                                               "and on SIGTERM/SIGUSR1. An existing FILE is never replaced\n"
                                               "without --resume")
      ->check(non_empty())->type_name("FILE")->group(g);
  app.add_option("--checkpoint-every", o.checkpoint_every, "also every N epochs (0: only at the end and on a signal)")
      ->check(integer(0, INT64_MAX))->type_name("N")->group(g);
  app.add_flag("--resume", o.resume, "continue from --checkpoint FILE up to --epochs (a total); start from\n"
                                     "scratch if FILE does not exist yet. Bitwise the run that was\n"
                                     "interrupted; a checkpoint of another run (rank count, model,\n"
                                     "optimizer and its settings, batch size, data, seed) is refused")->group(g);
  app.add_option("--check-every", o.check_every, "the ranks agree on signals and NaN/Inf every N steps\n"
                                                 "(0: about every 5 ms of training)")
      ->check(integer(0, int64_t(1) << 40))->type_name("N")->group(g);
}

void check_options(const CLI::App& app, const ParallelOptions& p, const CheckpointOptions& c) {
  auto fail = [](const std::string& m) { throw UsageError(m); };
  if (!p.first_bucket_mb && p.bucket_mb) fail("--first-bucket-mb auto: needs --bucket-mb auto");
  if (app.get_option("--checkpoint-every")->count() > 0 && c.checkpoint.empty())  // given, not a default
    fail("--checkpoint-every: needs --checkpoint FILE");
  if (c.resume && c.checkpoint.empty()) fail("--resume: needs --checkpoint FILE (the file to continue from)");
}

std::unique_ptr<Optimizer<float>> make_optimizer(const TrainingOptions& o, int64_t n) {
  switch (o.optimizer) {
    case OptimizerKind::Adam: return std::make_unique<Adam<float>>(n, AdamHyper{.lr = o.lr, .weight_decay = o.decay()});
    case OptimizerKind::AdamW: return std::make_unique<AdamW<float>>(n, AdamWHyper{.lr = o.lr, .weight_decay = o.decay()});
    case OptimizerKind::Sgd: break;
  }
  return std::make_unique<SGD<float>>(n, SgdHyper{.lr = o.lr, .momentum = o.momentum, .weight_decay = o.decay()});
}

LrSchedule make_schedule(const TrainingOptions& o, int64_t total_steps) {
  try {
    return parse_lr_schedule(o.lr_schedule, o.lr, total_steps, o.warmup);
  } catch (const std::invalid_argument& e) {
    throw UsageError("--lr-schedule " + o.lr_schedule + " with --warmup " + std::to_string(o.warmup) + " over " +
                     std::to_string(total_steps) + " steps: " + user_message(e.what()));
  }
}

CLI::Validator inject_spec(int64_t max_epochs) {
  return CLI::Validator(
      [max_epochs](std::string& v) -> std::string {
        const size_t colon = v.find(':');
        std::string epoch = v.substr(0, colon), err = integer(1, max_epochs)(epoch);
        if (!err.empty()) return "epoch: " + err;
        if (colon == std::string::npos) return "";
        std::string rank = v.substr(colon + 1);
        err = integer(0, int64_t(1) << 20)(rank);
        return err.empty() ? "" : "rank: " + err;
      },
      "");
}

Inject to_inject(const std::string& v) {
  const size_t colon = v.find(':');
  return {std::stoll(v.substr(0, colon)), colon == std::string::npos ? 0 : std::stoi(v.substr(colon + 1))};
}

std::map<std::string, std::string> identity_of(const TrainingOptions& o) {
  std::map<std::string, std::string> id{{"optimizer", to_string(o.optimizer)},
                                        {"lr", exact_string(o.lr)},
                                        {"batch_size", std::to_string(o.batch_size)},
                                        {"seed", std::to_string(o.seed)}};
  if (o.optimizer == OptimizerKind::Sgd) id["momentum"] = exact_string(o.momentum);
  if (o.decay() != 0) id["weight_decay"] = exact_string(o.decay());
  if (o.lr_schedule != "constant" || o.warmup > 0) id["lr_schedule"] = o.lr_schedule + ", warmup " + std::to_string(o.warmup);
  if (o.clip_grad_norm > 0) id["clip_grad_norm"] = exact_string(o.clip_grad_norm);
  if (o.precision != Precision::Float) id["precision"] = to_string(o.precision);
  return id;
}

std::string precision_report(const TrainingOptions& o) {
  if (o.precision == Precision::Float) return "";
  try {
    return "bf16 products on " + bf16_unit_report();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

}  // namespace hddp::cli

namespace hddp::drivers {

std::string autosize_json(const AutosizeResult& a) {
  nlohmann::ordered_json j{{"type", "bucket_autosize"},
                           {"cap_bytes", a.plan.cap_bytes},
                           {"first_cap_bytes", a.plan.first_cap_bytes},
                           {"buckets", a.plan.num_buckets},
                           {"step_s", a.step_s},
                           {"measure_s", a.measure_seconds},
                           {"allreduce_alpha_s", a.model.alpha},
                           {"allreduce_beta_s_per_byte", a.model.beta},
                           {"backward_s", a.profile.total}};
  nlohmann::ordered_json trials = nlohmann::ordered_json::array();
  for (const PlanTrial& t : a.trials)
    trials.push_back({{"cap_bytes", t.cap_bytes}, {"first_cap_bytes", t.first_cap_bytes}, {"buckets", t.num_buckets},
                      {"step_s", t.step_s}});
  j["trials"] = trials;
  return j.dump();
}

}  // namespace hddp::drivers
