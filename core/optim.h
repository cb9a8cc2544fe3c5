#pragma once
// Optimizers over a flat parameter array (a ParamArena): one step is one flat loop of the
// element-wise kernels adam_update / adamw_update / sgd_update (kernels/elementwise.h), which
// implement PyTorch 1.13's torch.optim.Adam, AdamW and SGD updates (see there: Adam and AdamW
// to the bit).
//
//   Adam<float> adam(model.num_params(), {.lr = 1e-3});
//   adam.step(model.params(), model.grads());
//
// With a learning-rate schedule (core/schedule.h) and gradient clipping, one training step:
//   schedule.apply(opt);                       // opt.set_lr(schedule.lr_at(opt.steps()))
//   clip_grad_norm(n, grads, max_norm);        // after the gradients' allreduce, if any
//   opt.step(params, grads);
//
// State for save/load (core/serialize.h): steps() (the step counter t) and state(), the named
// per-value buffers (Adam and AdamW: "exp_avg", "exp_avg_sq"; SGD with momentum:
// "momentum_buffer"), each of size(), in the arena's layout. The learning rate is not state: a
// schedule recomputes it from steps().
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/core/arena.h>
#include <hddp/kernels/elementwise.h>

namespace hddp {

template <class T>
struct StateBuffer {
  std::string name;
  T* data;
  int64_t size;
};

template <class T>
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One step over size() values: params -= f(grads, state). Increments steps() first (the
  // first step is t = 1, as in PyTorch).
  virtual void step(T* params, const T* grads) = 0;
  // Same over a whole arena; throws if its size differs from size().
  void step(ParamArena<T>& arena);

  virtual const char* kind() const = 0;  // "adam", "adamw", "sgd"
  // Every setting, doubles in shortest round-trip form ("adam lr=0.001 beta1=0.9 ..."): a
  // checkpoint's run identity. The default names kind() and lr().
  virtual std::string describe() const;
  virtual std::vector<StateBuffer<T>> state() = 0;

  // The learning rate of the next steps. set_lr validates it as the constructor does
  // (std::invalid_argument, the optimizer unchanged).
  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;

  int64_t size() const { return n_; }
  int64_t steps() const { return steps_; }
  void set_steps(int64_t t);  // for load; t >= 0

 protected:
  explicit Optimizer(int64_t n);
  int64_t n_ = 0, steps_ = 0;
};

// Throws std::invalid_argument naming the parameter: lr <= 0, beta1/beta2 outside [0, 1),
// eps < 0, weight_decay < 0 (NaN fails every check).
void validate(const AdamHyper& h);
// Throws for lr <= 0, momentum < 0, weight_decay < 0, nesterov without momentum.
void validate(const SgdHyper& h);
// Throws std::invalid_argument naming the parameter: lr not finite and > 0, beta1/beta2 outside
// [0, 1), eps not finite and >= 0, weight_decay not finite and >= 0, lr * weight_decay >= 1 (the
// factor 1 - lr * weight_decay on the parameters would be <= 0).
void validate(const AdamWHyper& h);

// PyTorch's torch.optim.Adam (Hyper = AdamHyper: L2 weight decay) and torch.optim.AdamW
// (Hyper = AdamWHyper: decoupled weight decay): one class, the update kernel chosen by the
// hyper-parameters' type (kernels/elementwise.h). Their state buffers have the same names,
// their kinds differ ("adam", "adamw"): a checkpoint of one does not load into the other
// (load_state names both kinds).
template <class T, class Hyper>
class AdamFamily final : public Optimizer<T> {
 public:
  AdamFamily(int64_t n, const Hyper& h = {});
  void step(T* params, const T* grads) override;
  using Optimizer<T>::step;
  const char* kind() const override;
  std::string describe() const override;
  std::vector<StateBuffer<T>> state() override;
  const Hyper& hyper() const { return h_; }
  double lr() const override { return h_.lr; }
  void set_lr(double lr) override;
  std::vector<T>& exp_avg() { return m_; }
  std::vector<T>& exp_avg_sq() { return v_; }

  // Weight-decay groups, as GPT training's two param groups in PyTorch: the views whose decay
  // is false (biases, LayerNorm, embeddings: ParamSpec::decay) step with weight_decay 0, the
  // others with the optimizer's. The views must cover [0, size()) in order (an arena's do).
  void set_decay_groups(const std::vector<ParamView>& views);
  // Values that step without weight decay (0 before set_decay_groups).
  int64_t no_decay_values() const;

 private:
  Hyper h_;
  std::vector<T> m_, v_;
  struct Segment {
    int64_t begin, end;
    bool decay;
  };
  std::vector<Segment> groups_;  // empty: one group, all with decay
};
template <class T>
using Adam = AdamFamily<T, AdamHyper>;
template <class T>
using AdamW = AdamFamily<T, AdamWHyper>;

template <class T>
class SGD final : public Optimizer<T> {
 public:
  SGD(int64_t n, const SgdHyper& h);
  void step(T* params, const T* grads) override;
  using Optimizer<T>::step;
  const char* kind() const override { return "sgd"; }
  std::string describe() const override;
  std::vector<StateBuffer<T>> state() override;  // empty without momentum
  const SgdHyper& hyper() const { return h_; }
  double lr() const override { return h_.lr; }
  void set_lr(double lr) override;
  std::vector<T>& momentum_buffer() { return buf_; }

 private:
  SgdHyper h_;
  std::vector<T> buf_;  // empty without momentum
};

// Global-norm gradient clipping, PyTorch 1.13's torch.nn.utils.clip_grad_norm_(params,
// max_norm, norm_type=2) over grads[0, n) taken as one vector:
//   total_norm = sqrt(sum of grads^2)          (summed in double: kernels' sum_sq)
//   coef = min(max_norm / (total_norm + 1e-6), 1)
//   grads *= coef
// Returns total_norm, before clipping. The coefficient is computed in T as PyTorch computes it
// from its T-valued norm (T(max_norm) * (1 / (T(total_norm) + T(1e-6)))), so the clipped values
// are PyTorch's whenever its norm rounds to the same T, else within 2 ulps of T (PyTorch sums in
// T per tensor, in its own order: in float32 its norm can be an ulp off). A coefficient of 1 multiplies nothing (PyTorch multiplies
// anyway): it is 1 only when every gradient is finite, and x * 1 is x for every finite x, so the
// bits are the same. A non-finite norm clips as in PyTorch (error_if_nonfinite=False): Inf gives
// coefficient 0, NaN gives NaN gradients; check the gradients (all_finite) before stepping.
// Data parallelism: call it after the gradients' allreduce. Every rank then holds the same
// averaged gradients and computes the same norm and coefficient, with no extra communication:
// this is what PyTorch DDP does (its clip_grad_norm_ runs on the already reduced .grad).
// Throws std::invalid_argument for n < 0 or max_norm not finite and > 0.
template <class T>
double clip_grad_norm(int64_t n, T* grads, double max_norm);
// The same with total_norm = sqrt(sum_sq(n, grads)) already known (a training loop's one pass
// over the gradients gives it with its NaN/Inf check, train/stop_guard.h): the same bits.
template <class T>
void clip_grad_norm(int64_t n, T* grads, double max_norm, double total_norm);

extern template class Optimizer<float>;
extern template class Optimizer<double>;
extern template class AdamFamily<float, AdamHyper>;
extern template class AdamFamily<double, AdamHyper>;
extern template class AdamFamily<float, AdamWHyper>;
extern template class AdamFamily<double, AdamWHyper>;
extern template class SGD<float>;
extern template class SGD<double>;
extern template double clip_grad_norm<float>(int64_t, float*, double);
extern template double clip_grad_norm<double>(int64_t, double*, double);
extern template void clip_grad_norm<float>(int64_t, float*, double, double);
extern template void clip_grad_norm<double>(int64_t, double*, double, double);

}  // namespace hddp
