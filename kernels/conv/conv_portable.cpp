// The direct convolution's micro-kernels in plain C++ (conv_ukernel.h): an 8-float "vector" the
// compiler may map to whatever this build's baseline has. Any CPU.
#include <algorithm>
#include <string_view>

#include <hddp/kernels/conv/conv_ukernel.h>

namespace hddp::detail {
namespace {
struct V {
  static constexpr int L = 8;
  struct R {
    float x[L];
  };
  static R zero() { return R{}; }
  static R loadu(const float* p) {
    R r;
    for (int l = 0; l < L; ++l) r.x[l] = p[l];
    return r;
  }
  static R bcast(const float* p) {
    R r;
    for (int l = 0; l < L; ++l) r.x[l] = *p;
    return r;
  }
  static R fma(R a, R b, R c) {
    for (int l = 0; l < L; ++l) c.x[l] += a.x[l] * b.x[l];
    return c;
  }
  static R add(R a, R b) {
    for (int l = 0; l < L; ++l) a.x[l] += b.x[l];
    return a;
  }
  static R relu(R a) {
    for (int l = 0; l < L; ++l) a.x[l] = std::max(a.x[l], 0.0f);
    return a;
  }
  static R load_n(const float* p, int n) {
    R r{};
    for (int l = 0; l < n; ++l) r.x[l] = p[l];
    return r;
  }
  static void store_n(float* p, R r, int n) {
    for (int l = 0; l < n; ++l) p[l] = r.x[l];
  }
};
}  // namespace
}  // namespace hddp::detail

#include "conv_ukernel_impl.h"

namespace hddp::detail {
const ConvKernels& conv_kernels_portable() {
  static const ConvKernels k = make_kernels<row_of("portable")>();
  return k;
}
}  // namespace hddp::detail
