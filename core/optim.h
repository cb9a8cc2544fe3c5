#pragma once
// Optimizers over a flat parameter array (a ParamArena): one step is one flat loop of the
// element-wise kernels adam_update / sgd_update (kernels/elementwise.h), which implement
// PyTorch 1.13's torch.optim.Adam and torch.optim.SGD updates exactly (see there).
//
//   Adam<float> adam(model.num_params(), {.lr = 1e-3});
//   adam.step(model.params(), model.grads());
//
// State for save/load (core/serialize.h): steps() (the step counter t) and state(), the named
// per-value buffers (Adam: "exp_avg", "exp_avg_sq"; SGD with momentum: "momentum_buffer"),
// each of size(), in the arena's layout.
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

  virtual const char* kind() const = 0;  // "adam", "sgd"
  virtual std::vector<StateBuffer<T>> state() = 0;

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

template <class T>
class Adam final : public Optimizer<T> {
 public:
  Adam(int64_t n, const AdamHyper& h = {});
  void step(T* params, const T* grads) override;
  using Optimizer<T>::step;
  const char* kind() const override { return "adam"; }
  std::vector<StateBuffer<T>> state() override;
  const AdamHyper& hyper() const { return h_; }
  void set_lr(double lr);  // validated
  std::vector<T>& exp_avg() { return m_; }
  std::vector<T>& exp_avg_sq() { return v_; }

 private:
  AdamHyper h_;
  std::vector<T> m_, v_;
};

template <class T>
class SGD final : public Optimizer<T> {
 public:
  SGD(int64_t n, const SgdHyper& h);
  void step(T* params, const T* grads) override;
  using Optimizer<T>::step;
  const char* kind() const override { return "sgd"; }
  std::vector<StateBuffer<T>> state() override;  // empty without momentum
  const SgdHyper& hyper() const { return h_; }
  void set_lr(double lr);
  std::vector<T>& momentum_buffer() { return buf_; }

 private:
  SgdHyper h_;
  std::vector<T> buf_;  // empty without momentum
};

extern template class Optimizer<float>;
extern template class Optimizer<double>;
extern template class Adam<float>;
extern template class Adam<double>;
extern template class SGD<float>;
extern template class SGD<double>;

}  // namespace hddp
