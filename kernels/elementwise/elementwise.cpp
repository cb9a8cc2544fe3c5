#include <hddp/kernels/elementwise.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/kernels/bf16.h>
#include <hddp/kernels/check.h>
#include <hddp/kernels/cpu_isa.h>
#include <hddp/kernels/elementwise/elementwise_ukernel.h>

namespace hddp {
namespace {

// body(lo, hi) over [0, n). Below kParallelMin units of work it runs directly, with no OpenMP
// region at all: even `omp parallel if (0)` makes libgomp allocate and free a team, which
// was half of the tutorial's training step. Above, each thread takes one contiguous static
// slice. Each element's result never depends on the split.
template <class F>
inline void for_range(int64_t n, int64_t work, const F& body) {
  if (work < kParallelMin) {
    body(int64_t(0), n);
    return;
  }
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
    if (lo < hi) body(lo, hi);
  }
}

template <class T>
const detail::EltLoops<T>& L() {
  static const detail::EltKernels& k = detail::cpu_elementwise();
  return detail::loops<T>(k);
}

}  // namespace

namespace detail {

namespace {
constexpr IsaTable<EltKernels> kElementwiseSets{
    kElementwiseIsa, {elementwise_kernels_avx512, elementwise_kernels_avx2, elementwise_kernels_portable}};
}

const EltKernels* elementwise_by_name(const std::string& name) { return kElementwiseSets.find(name); }

const EltKernels& cpu_elementwise() {
  static const EltKernels& k = kElementwiseSets.chosen();
  return k;
}

}  // namespace detail

const char* elementwise_kernel_name() { return detail::cpu_elementwise().name; }

template <class T>
void add_bias_rows(int64_t M, int64_t N, const T* b, T* Y, int64_t ldy) {
  for_range(M, M * N, [&](int64_t lo, int64_t hi) { L<T>().add_bias_rows(hi - lo, N, b, Y + lo * ldy, ldy); });
}

template <class T>
void col_sums(int64_t M, int64_t N, const T* X, int64_t ldx, T* out, bool accumulate) {
  // Threads split the columns in blocks; rows are added in order: the same sums for any thread count.
  constexpr int64_t JB = detail::kColBlock;
  for_range((N + JB - 1) / JB, M * N, [&](int64_t lo, int64_t hi) {
    for (int64_t jb = lo; jb < hi; ++jb) {
      const int64_t j0 = jb * JB;
      L<T>().col_sums(M, std::min(JB, N - j0), X + j0, ldx, out + j0, accumulate);
    }
  });
}

template <class T>
void tanh_forward(int64_t n, const T* x, T* y) {
  for_range(n, n * 4, [&](int64_t lo, int64_t hi) { L<T>().tanh_forward(hi - lo, x + lo, y + lo); });
}

template <class T>
void tanh_backward(int64_t n, const T* y, const T* dy, T* dx) {
  for_range(n, n, [&](int64_t lo, int64_t hi) { L<T>().tanh_backward(hi - lo, y + lo, dy + lo, dx + lo); });
}

template <class T>
void relu_forward(int64_t n, const T* x, T* y) {
  for_range(n, n, [&](int64_t lo, int64_t hi) { L<T>().relu_forward(hi - lo, x + lo, y + lo); });
}

template <class T>
void relu_backward(int64_t n, const T* y, const T* dy, T* dx) {
  for_range(n, n, [&](int64_t lo, int64_t hi) { L<T>().relu_backward(hi - lo, y + lo, dy + lo, dx + lo); });
}

template <class T>
double sum_sq_diff(int64_t n, const T* a, const T* b) {
  if (n < kParallelMin) return L<T>().sum_sq_diff(n, a, b);
  // Fixed chunks whatever the thread count; partial sums added in chunk order.
  constexpr int64_t kChunk = 8192;
  const int64_t nchunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(nchunks);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < nchunks; ++c) {
    const int64_t lo = c * kChunk, hi = std::min(n, lo + kChunk);
    partial[c] = L<T>().sum_sq_diff(hi - lo, a + lo, b + lo);
  }
  double s = 0;
  for (double p : partial) s += p;
  return s;
}

template <class T>
double sum_sq(int64_t n, const T* x) {
  if (n < kParallelMin) return L<T>().sum_sq(n, x);
  constexpr int64_t kChunk = 8192;  // as sum_sq_diff: fixed chunks, partial sums added in order
  const int64_t nchunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(nchunks);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < nchunks; ++c) {
    const int64_t lo = c * kChunk, hi = std::min(n, lo + kChunk);
    partial[c] = L<T>().sum_sq(hi - lo, x + lo);
  }
  double s = 0;
  for (double p : partial) s += p;
  return s;
}

template <class T>
void scaled_diff(int64_t n, T s, const T* a, const T* b, T* out) {
  for_range(n, n, [&](int64_t lo, int64_t hi) { L<T>().scaled_diff(hi - lo, s, a + lo, b + lo, out + lo); });
}

template <class T>
void axpy(int64_t n, T a, const T* x, T* y) {
  for_range(n, n, [&](int64_t lo, int64_t hi) { L<T>().axpy(hi - lo, a, x + lo, y + lo); });
}

void to_bf16(int64_t n, const float* x, bf16* y) {
  const auto& k = detail::cpu_elementwise().bf16;
  for_range(n, n, [&](int64_t lo, int64_t hi) { k.to_bf16(hi - lo, x + lo, reinterpret_cast<uint16_t*>(y) + lo); });
}
void to_float(int64_t n, const bf16* x, float* y) {
  const auto& k = detail::cpu_elementwise().bf16;
  for_range(n, n, [&](int64_t lo, int64_t hi) { k.to_float(hi - lo, reinterpret_cast<const uint16_t*>(x) + lo, y + lo); });
}
void round_bf16(int64_t n, const float* x, float* y) {
  const auto& k = detail::cpu_elementwise().bf16;
  for_range(n, n, [&](int64_t lo, int64_t hi) { k.round(hi - lo, x + lo, y + lo); });
}

template <class T>
bool all_finite(int64_t n, const T* x) {
  std::atomic<bool> ok{true};  // any order of the slices gives the same answer
  for_range(n, n, [&](int64_t lo, int64_t hi) {
    if (!L<T>().all_finite(hi - lo, x + lo)) ok.store(false, std::memory_order_relaxed);
  });
  return ok.load();
}

template <class T>
void scale(int64_t n, T a, T* x) {
  for_range(n, n, [&](int64_t lo, int64_t hi) { L<T>().scale(hi - lo, a, x + lo); });
}

namespace {
// Adam's scalars in double, as PyTorch computes them in Python before the tensor ops (beta ** step
// is C's pow, as std::pow), each rounded to T where the tensor op takes it. wd: Adam's L2 term;
// decay: AdamW's factor 1 - lr * weight_decay.
template <class T>
detail::AdamScalars<T> adam_scalars(double lr, double beta1, double beta2, double eps, double wd, double decay,
                                    int64_t step) {
  const double bc1 = 1.0 - std::pow(beta1, double(step));
  const double bc2 = 1.0 - std::pow(beta2, double(step));
  return {T(beta1), T(beta2), T(1.0 - beta1), T(1.0 - beta2), T(eps), T(wd), T(lr / bc1), T(std::sqrt(bc2)), T(decay)};
}
}  // namespace

template <class T>
void adam_update(int64_t n, T* param, const T* grad, T* m, T* v, int64_t step, const AdamHyper& h) {
  const auto s = adam_scalars<T>(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, 1.0, step);
  for_range(n, n * 4, [&](int64_t lo, int64_t hi) {
    L<T>().adam(hi - lo, param + lo, grad + lo, m + lo, v + lo, s);
  });
}

template <class T>
void adamw_update(int64_t n, T* param, const T* grad, T* m, T* v, int64_t step, const AdamWHyper& h) {
  const auto s = adam_scalars<T>(h.lr, h.beta1, h.beta2, h.eps, 0.0, 1.0 - h.lr * h.weight_decay, step);
  for_range(n, n * 4, [&](int64_t lo, int64_t hi) {
    L<T>().adamw(hi - lo, param + lo, grad + lo, m + lo, v + lo, s);
  });
}

template <class T>
void sgd_update(int64_t n, T* param, const T* grad, T* buf, int64_t step, const SgdHyper& h) {
  const detail::SgdScalars<T> s{T(h.lr), T(h.momentum), T(h.weight_decay), step <= 1, h.nesterov};
  for_range(n, n, [&](int64_t lo, int64_t hi) {
    L<T>().sgd(hi - lo, param + lo, grad + lo, buf ? buf + lo : nullptr, s);
  });
}

template <class T>
void gelu_forward(int64_t n, const T* x, T* y) {
  for_range(n, n * 8, [&](int64_t lo, int64_t hi) { L<T>().gelu_forward(hi - lo, x + lo, y + lo); });
}

template <class T>
void gelu_backward(int64_t n, const T* x, const T* dy, T* dx) {
  for_range(n, n * 8, [&](int64_t lo, int64_t hi) { L<T>().gelu_backward(hi - lo, x + lo, dy + lo, dx + lo); });
}

template <class T>
void layernorm_forward(int64_t rows, int64_t C, const T* X, const T* w, const T* b, double eps, T* Y, T* mean,
                       T* rstd) {
  HDDP_CHECK_ARG(rows >= 0 && C > 0 && eps >= 0, "layernorm_forward: need rows >= 0, C > 0, eps >= 0; got rows="
                                                     << rows << " C=" << C << " eps=" << eps);
  for_range(rows, rows * C * 2, [&](int64_t lo, int64_t hi) {
    L<T>().layernorm_forward(hi - lo, C, X + lo * C, w, b, eps, Y + lo * C, mean + lo, rstd + lo);
  });
}

namespace {
constexpr int64_t kLnChunk = 32;  // rows whose dw, db partial sums one chunk keeps
}

int64_t layernorm_backward_scratch(int64_t rows, int64_t C) { return (rows + kLnChunk - 1) / kLnChunk * 2 * C; }

template <class T>
void layernorm_backward(int64_t rows, int64_t C, const T* X, const T* w, const T* mean, const T* rstd, const T* dY,
                        T* dX, T* dw, T* db, bool accumulate, T* scratch) {
  HDDP_CHECK_ARG(rows >= 0 && C > 0, "layernorm_backward: need rows >= 0 and C > 0; got rows=" << rows << " C=" << C);
  const int64_t chunks = (rows + kLnChunk - 1) / kLnChunk;
  for_range(chunks, rows * C * 4, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      T* part = scratch + k * 2 * C;
      std::fill(part, part + 2 * C, T(0));
      const int64_t r0 = k * kLnChunk, n = std::min(kLnChunk, rows - r0);
      L<T>().layernorm_backward(n, C, X + r0 * C, w, mean + r0, rstd + r0, dY + r0 * C, dX ? dX + r0 * C : nullptr,
                                part, part + C);
    }
  });
  for (int64_t j = 0; j < C; ++j) {  // chunk partials in chunk order
    T sw = accumulate ? dw[j] : T(0), sb = accumulate ? db[j] : T(0);
    for (int64_t k = 0; k < chunks; ++k) sw += scratch[k * 2 * C + j], sb += scratch[k * 2 * C + C + j];
    dw[j] = sw, db[j] = sb;
  }
}

template <class T>
double exp_shifted(int64_t n, const T* x, double shift, T* p) {
  return L<T>().exp_shifted(n, x, shift, p);
}

#define HDDP_INSTANTIATE(T)                                                              \
  template void add_bias_rows<T>(int64_t, int64_t, const T*, T*, int64_t);               \
  template void col_sums<T>(int64_t, int64_t, const T*, int64_t, T*, bool);              \
  template void tanh_forward<T>(int64_t, const T*, T*);                                  \
  template void tanh_backward<T>(int64_t, const T*, const T*, T*);                       \
  template void relu_forward<T>(int64_t, const T*, T*);                                  \
  template void relu_backward<T>(int64_t, const T*, const T*, T*);                       \
  template double sum_sq_diff<T>(int64_t, const T*, const T*);                           \
  template double sum_sq<T>(int64_t, const T*);                                          \
  template void scaled_diff<T>(int64_t, T, const T*, const T*, T*);                      \
  template void axpy<T>(int64_t, T, const T*, T*);                                       \
  template void scale<T>(int64_t, T, T*);                                                \
  template bool all_finite<T>(int64_t, const T*);                                        \
  template void adam_update<T>(int64_t, T*, const T*, T*, T*, int64_t, const AdamHyper&); \
  template void adamw_update<T>(int64_t, T*, const T*, T*, T*, int64_t, const AdamWHyper&); \
  template void sgd_update<T>(int64_t, T*, const T*, T*, int64_t, const SgdHyper&);      \
  template double exp_shifted<T>(int64_t, const T*, double, T*);                        \
  template void gelu_forward<T>(int64_t, const T*, T*);                                  \
  template void gelu_backward<T>(int64_t, const T*, const T*, T*);                       \
  template void layernorm_forward<T>(int64_t, int64_t, const T*, const T*, const T*, double, T*, T*, T*); \
  template void layernorm_backward<T>(int64_t, int64_t, const T*, const T*, const T*, const T*, const T*, T*, T*, \
                                      T*, bool, T*);
HDDP_INSTANTIATE(float)
HDDP_INSTANTIATE(double)

}  // namespace hddp
