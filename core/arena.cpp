#include <hddp/core/arena.h>

#include <algorithm>

#include <hddp/kernels/check.h>

namespace hddp {

const ParamView* view_containing(const std::vector<ParamView>& views, int64_t offset) {
  for (const ParamView& v : views)
    if (offset >= v.offset && offset < v.offset + v.size()) return &v;
  return nullptr;
}

template <class T>
size_t ParamArena<T>::add(std::string name, int64_t rows, int64_t cols, std::vector<int64_t> shape, bool decay) {
  HDDP_CHECK_ARG(!name.empty(), "ParamArena::add: empty parameter name");
  HDDP_CHECK_ARG(rows > 0 && cols > 0,
                 "ParamArena::add: parameter '" << name << "' has shape " << rows << "x" << cols
                                                << "; both must be positive");
  HDDP_CHECK_ARG(!find(name), "ParamArena::add: duplicate parameter name '" << name << "'");
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  HDDP_CHECK_ARG(shape.empty() || n == rows * cols,
                 "ParamArena::add: parameter '" << name << "': its shape holds " << n << " values, not " << rows * cols);
  const int64_t offset = size();
  views_.push_back({std::move(name), offset, rows, cols, std::move(shape), decay});
  params_.resize(size_t(offset + rows * cols), T(0));
  grads_.resize(params_.size(), T(0));
  return views_.size() - 1;
}

template <class T>
std::optional<size_t> ParamArena<T>::find(std::string_view name) const {
  for (size_t i = 0; i < views_.size(); ++i)
    if (views_[i].name == name) return i;
  return std::nullopt;
}

template <class T>
void ParamArena<T>::zero_grad() {
  std::fill(grads_.begin(), grads_.end(), T(0));
}

template class ParamArena<float>;
template class ParamArena<double>;

}  // namespace hddp
