#pragma once
// Residual(layers): a block that owns a chain of layers and adds its input to their output,
//   y = x + f_{n-1}(... f_0(x))
// the pre-LayerNorm transformer's two halves and, next, a ResNet block. It is one layer of a
// Sequential (core/model.h) like any other, so a model of blocks keeps the one parameter arena,
// its hooks (one call per block) and the bucketed overlap, and its checkpoints and safetensors
// name the parameters "<block>.<sub-layer>.<name>" ("1.1.weight"), as nn.Sequential nests them.
//
//   Sequential<float> gpt({T}, {Embedding(V, C, T),
//                               Residual({LayerNorm(C), Linear(C, 3 * C), CausalSelfAttention(C, H), Linear(C, C)}),
//                               Residual({LayerNorm(C), Linear(C, 4 * C), GELU(), Linear(4 * C, C)}),
//                               LayerNorm(C), TiedLinear("0.wte", C, V)}, batch, rng);
//
// Inside, every sub-layer writes its own buffer (in the block's saved values: no sub-layer runs
// in place), except that the last writes the block's output directly where its backward does
// not read it, and that a layer which recompute_output()s (GELU) writes to the block's scratch
// and runs again in backward (a GPT's MLP keeps 4 C fewer values per position). Backward runs
// the chain in reverse over two gradient buffers in the block's scratch and adds dy to the
// chain's input gradient. The chain must give back the input's shape;
// sub-layers may not tie parameters (TiedLinear).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <hddp/core/layer.h>

namespace hddp {
namespace layers {

template <class T>
class Residual final : public Layer<T> {
 public:
  explicit Residual(std::vector<LayerSpec> layers);
  std::string name() const override;
  Shape setup(const Shape& in) override;
  std::vector<ParamSpec> parameters() const override;
  void reset_parameters(Rng& rng, T* const* params) const override;
  int64_t saved_size(int64_t batch) const override;
  int64_t scratch_size(int64_t batch) const override;
  void forward(const Forward<T>& f) const override;
  void backward(const Backward<T>& b) const override;
  double flops(int64_t batch) const override;

  size_t size() const { return subs_.size(); }
  const Layer<T>& layer(size_t j) const { return *subs_.at(j).layer; }

 private:
  struct Sub {
    std::shared_ptr<Layer<T>> layer;
    int64_t out_size = 0;  // values per sample
    size_t p_at = 0;       // index of its first parameter pointer
    size_t n_params = 0;
    bool recompute = false;  // its output lives in the scratch and is recomputed for backward
  };
  bool own_last() const;  // the last sub-layer keeps a buffer of its own (its backward reads it)
  // Offsets in the saved values of sub-layer j's output and saved values, for `batch` samples.
  int64_t out_at(size_t j, int64_t batch) const;
  int64_t saved_at(size_t j, int64_t batch) const;
  // The scratch: two gradient buffers, the recomputed output (if any), then the sub-layers'.
  int64_t sub_scratch_at(int64_t batch) const { return (any_recompute_ ? 3 : 2) * batch * widest_; }

  std::vector<LayerSpec> specs_;
  std::vector<Sub> subs_;
  int64_t n_ = 0, widest_ = 0;  // values per sample: the input (= output), the widest activation
  bool any_recompute_ = false;
  size_t n_params_ = 0;
};

extern template class Residual<float>;
extern template class Residual<double>;

}  // namespace layers

inline LayerSpec Residual(std::vector<LayerSpec> layers) { return LayerSpec::of<layers::Residual>(std::move(layers)); }

}  // namespace hddp
