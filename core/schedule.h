#pragma once
// Learning-rate schedules: the learning rate of each optimizer step as a pure function of the
// step count, so that a resumed run gets the same rates from the optimizer's own counter
// (Optimizer::steps(), which checkpoints save) and nothing else.
//
//   LrSchedule s = LrSchedule::cosine(1e-3, total_steps - 100).with_warmup(100);
//   for (...) {
//     s.apply(opt);  // opt.set_lr(s.lr_at(opt.steps())): t = steps done before this one
//     opt.step(params, grads);
//   }
//
// An optional linear warmup of W steps, then the main schedule, whose own count starts at 0 at
// step W. PyTorch 1.13 equivalents, for an optimizer built with lr = base_lr:
//   warmup     LinearLR(start_factor, end_factor=1.0, total_iters=W)
//   constant   none (LambdaLR(lambda k: 1.0))
//   step       StepLR(step_size, gamma)
//   cosine     CosineAnnealingLR(T_max, eta_min)
//   both       SequentialLR(schedulers=[warmup, main], milestones=[W])
// stepped once after each optimizer step; the rate of step t (0-based) is the optimizer's lr
// after t scheduler steps.
//
// lr_at uses the closed forms (the _get_closed_form_lr of each PyTorch scheduler, in the same
// order of double operations):
//   warmup, t < W:  base_lr * (start_factor + ((1 - start_factor) * t) / W)
//   constant:       base_lr
//   step:           base_lr * gamma ** (k / step_size)                  (k = t - W; C's pow)
//   cosine:         eta_min + ((base_lr - eta_min) * (1 + cos((pi * k) / T_max))) / 2
// PyTorch steps its schedulers in the chainable form instead: each rate is the previous one
// times a factor (warmup: 1 + (1 - s) / (W s + (k - 1)(1 - s)); step: gamma every step_size
// steps; cosine: (1 + cos(pi k / T)) / (1 + cos(pi (k - 1) / T)), shifted by eta_min), except at
// the milestone, where SequentialLR restarts the main scheduler from its closed form. The two
// agree up to the rounding the chain accumulates (a random walk of an ulp or two per step):
// measured against PyTorch's trajectories, at most 4 ulps of double over 25 steps, 181 of 325
// rates equal. Cosine past T_max rises again, as PyTorch's does
// (periodic in k, period 2 T_max); there PyTorch's chain restarts from its own (2k+1) T_max
// formula, 34 ulps from the closed form. At k = T_max the rate is eta_min, which with
// eta_min = 0 an optimizer refuses (lr must be > 0): parse_lr_schedule's T_max is the run's
// length, so the run's own steps never reach it.
#include <cstdint>
#include <string>

#include <hddp/core/optim.h>

namespace hddp {

class LrSchedule {
 public:
  enum class Kind { Constant, Step, Cosine };

  // Each throws std::invalid_argument naming the value: base_lr not finite and > 0,
  // step_size < 1, gamma not finite and > 0, t_max < 1, eta_min outside [0, base_lr).
  static LrSchedule constant(double base_lr);
  static LrSchedule step(double base_lr, int64_t step_size, double gamma);
  static LrSchedule cosine(double base_lr, int64_t t_max, double eta_min = 0.0);
  // The same schedule after a linear warmup of `steps` steps from base_lr * start_factor
  // (PyTorch's LinearLR default 1/3) towards base_lr; steps = 0: none. Throws for steps < 0 or
  // start_factor outside (0, 1].
  LrSchedule with_warmup(int64_t steps, double start_factor = 1.0 / 3) const;
  // A whole run of total_steps steps: `warmup` warmup steps, then the cosine over the rest
  // (cosine(base_lr, total_steps - warmup, eta_min).with_warmup(warmup)). Throws
  // std::invalid_argument unless 0 <= warmup < total_steps.
  static LrSchedule warmup_cosine(double base_lr, int64_t warmup, int64_t total_steps, double eta_min = 0.0);

  // The learning rate of the step that follows t steps (t >= 0, else std::invalid_argument).
  double lr_at(int64_t t) const;
  // opt.set_lr(lr_at(opt.steps())): call before each opt.step().
  template <class T>
  void apply(Optimizer<T>& opt) const {
    opt.set_lr(lr_at(opt.steps()));
  }

  Kind kind() const { return kind_; }
  double base_lr() const { return base_lr_; }
  int64_t warmup_steps() const { return warmup_; }
  double warmup_start_factor() const { return start_factor_; }
  int64_t step_size() const { return step_size_; }  // Step
  double gamma() const { return gamma_; }           // Step
  int64_t t_max() const { return t_max_; }          // Cosine
  double eta_min() const { return eta_min_; }       // Cosine

  bool operator==(const LrSchedule&) const = default;

 private:
  LrSchedule() = default;
  Kind kind_ = Kind::Constant;
  double base_lr_ = 1e-3;
  int64_t warmup_ = 0;
  double start_factor_ = 1.0 / 3;
  int64_t step_size_ = 1;
  double gamma_ = 1.0;
  int64_t t_max_ = 1;
  double eta_min_ = 0.0;
};

// One line naming every setting, with doubles in shortest round-trip form, e.g.
// "cosine base_lr=0.001 t_max=900 eta_min=0 warmup=100 start_factor=0.3333333333333333": for
// logs and a checkpoint's run identity (equal schedules, equal text).
std::string to_string(const LrSchedule& s);

// The command line's schedule: spec is one of
//   "constant"
//   "step:STEP_SIZE:GAMMA"     StepLR(STEP_SIZE, GAMMA): integer >= 1, number > 0
//   "cosine"                   CosineAnnealingLR(T_max = total_steps - warmup_steps, eta_min 0)
//   "cosine:ETA_MIN"           the same with eta_min = ETA_MIN (a learning rate, in [0, base_lr))
// after a warmup of warmup_steps (0: none; start factor 1/3). total_steps (>= 1) is the run's
// number of optimizer steps; cosine needs warmup_steps < total_steps. Throws
// std::invalid_argument whose message names the spec and what is wrong with it.
LrSchedule parse_lr_schedule(const std::string& spec, double base_lr, int64_t total_steps, int64_t warmup_steps);

}  // namespace hddp
