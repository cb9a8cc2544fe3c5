#pragma once
// ParamArena<T>: every parameter of a model in one contiguous buffer, every gradient in a
// second buffer with the same layout. A parameter is a named view {name, offset, rows, cols}
// into both (row-major rows x cols). Consequences the rest of hddp relies on:
//   - an optimizer step is one flat loop over size() values;
//   - a gradient bucket of the distributed reducer is a slice [begin, end) of grads();
//   - Sequential adds parameters in FORWARD layer order (layer 0 first), so during backward
//     (layers in reverse) the gradients that are complete always form a suffix
//     [offset, size()) of the arena.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hddp {

struct ParamView {
  std::string name;    // e.g. "0.weight", as in a PyTorch nn.Sequential state_dict
  int64_t offset = 0;  // first element in params() / grads()
  int64_t rows = 0, cols = 0;
  std::vector<int64_t> shape;  // the tensor's shape as PyTorch holds it (a convolution's weight
                               // (out, in, k, k)); empty: rows x cols
  bool decay = true;           // AdamW's weight decay applies (ParamSpec::decay)
  int64_t size() const { return rows * cols; }
};

// The view that holds arena element `offset` (for messages naming a parameter), or nullptr.
const ParamView* view_containing(const std::vector<ParamView>& views, int64_t offset);

template <class T>
class ParamArena {
 public:
  // Appends a zero-initialised parameter (and its zero gradient) at the end and returns its
  // index. Names must be unique and non-empty, rows and cols positive, `shape` (PyTorch's, for
  // safetensors; empty: rows x cols) of rows x cols values (throws otherwise).
  // Invalidates pointers obtained earlier from params()/grads().
  size_t add(std::string name, int64_t rows, int64_t cols, std::vector<int64_t> shape = {}, bool decay = true);

  size_t num_tensors() const { return views_.size(); }
  int64_t size() const { return int64_t(params_.size()); }  // total number of values
  const std::vector<ParamView>& views() const { return views_; }
  const ParamView& view(size_t i) const { return views_.at(i); }
  std::optional<size_t> find(std::string_view name) const;

  T* params() { return params_.data(); }
  const T* params() const { return params_.data(); }
  T* grads() { return grads_.data(); }
  const T* grads() const { return grads_.data(); }
  T* param(size_t i) { return params_.data() + views_.at(i).offset; }
  const T* param(size_t i) const { return params_.data() + views_.at(i).offset; }
  T* grad(size_t i) { return grads_.data() + views_.at(i).offset; }
  const T* grad(size_t i) const { return grads_.data() + views_.at(i).offset; }

  // Gradients accumulate (+=) in backward; this clears them all.
  void zero_grad();

 private:
  std::vector<ParamView> views_;
  std::vector<T> params_, grads_;
};

extern template class ParamArena<float>;
extern template class ParamArena<double>;

}  // namespace hddp
