#include "kernels/elementwise.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

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

}  // namespace

template <class T>
void add_bias_rows(int64_t M, int64_t N, const T* b, T* Y, int64_t ldy) {
  for_range(M, M * N, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      T* y = Y + i * ldy;
      for (int64_t j = 0; j < N; ++j) y[j] += b[j];
    }
  });
}

template <class T>
void col_sums(int64_t M, int64_t N, const T* X, int64_t ldx, T* out, bool accumulate) {
  // Rows in order for each column: the same sums for any thread count (threads split columns).
  constexpr int64_t JB = 64;
  const int64_t nb = (N + JB - 1) / JB;
  for_range(nb, M * N, [&](int64_t lo, int64_t hi) {
    for (int64_t jb = lo; jb < hi; ++jb) {
      const int64_t j0 = jb * JB, jn = std::min(JB, N - j0);
      T acc[JB];
      for (int64_t j = 0; j < jn; ++j) acc[j] = accumulate ? out[j0 + j] : T(0);
      for (int64_t i = 0; i < M; ++i) {
        const T* x = X + i * ldx + j0;
        for (int64_t j = 0; j < jn; ++j) acc[j] += x[j];
      }
      for (int64_t j = 0; j < jn; ++j) out[j0 + j] = acc[j];
    }
  });
}

template <class T>
void tanh_forward(int64_t n, const T* x, T* y) {
  for_range(n, n * 16, [&](int64_t lo, int64_t hi) {  // tanh costs ~16 simple operations
    for (int64_t i = lo; i < hi; ++i) y[i] = std::tanh(x[i]);
  });
}

template <class T>
void tanh_backward(int64_t n, const T* y, const T* dy, T* dx) {
  for_range(n, n, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) dx[i] = dy[i] * (T(1) - y[i] * y[i]);
  });
}

template <class T>
void relu_forward(int64_t n, const T* x, T* y) {
  for_range(n, n, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
  });
}

template <class T>
void relu_backward(int64_t n, const T* y, const T* dy, T* dx) {
  for_range(n, n, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
  });
}

template <class T>
double sum_sq_diff(int64_t n, const T* a, const T* b) {
  auto part = [a, b](int64_t lo, int64_t hi) {
    double s = 0;
    for (int64_t i = lo; i < hi; ++i) {
      const double d = double(a[i]) - double(b[i]);
      s += d * d;
    }
    return s;
  };
  if (n < kParallelMin) return part(0, n);
  // Fixed chunks whatever the thread count; partial sums added in chunk order.
  constexpr int64_t kChunk = 8192;
  const int64_t nchunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(nchunks);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < nchunks; ++c) partial[c] = part(c * kChunk, std::min(n, (c + 1) * kChunk));
  double s = 0;
  for (double p : partial) s += p;
  return s;
}

template <class T>
void scaled_diff(int64_t n, T s, const T* a, const T* b, T* out) {
  for_range(n, n, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) out[i] = s * (a[i] - b[i]);
  });
}

template <class T>
void axpy(int64_t n, T a, const T* x, T* y) {
  for_range(n, n, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i] += a * x[i];
  });
}

template <class T>
bool all_finite(int64_t n, const T* x) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  constexpr U kMagnitude = ~U(0) >> 1;                                    // all but the sign
  constexpr U kExponent = sizeof(T) == 4 ? U(0x7f800000u) : U(0x7ff0000000000000ull);
  U m = 0;
  for (int64_t i = 0; i < n; ++i) {
    U b;
    std::memcpy(&b, x + i, sizeof b);
    m = std::max(m, U(b & kMagnitude));
  }
  return m < kExponent;
}

template <class T>
void scale(int64_t n, T a, T* x) {
  for_range(n, n, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) x[i] *= a;
  });
}

template <class T>
void adam_update(int64_t n, T* param, const T* grad, T* m, T* v, int64_t step, const AdamHyper& h) {
  // Scalars in double, as PyTorch computes them in Python before the tensor ops.
  const double bc1 = 1.0 - std::pow(h.beta1, double(step));
  const double bc2 = 1.0 - std::pow(h.beta2, double(step));
  const T step_size = T(h.lr / bc1), bc2_sqrt = T(std::sqrt(bc2));
  const T b1 = T(h.beta1), b2 = T(h.beta2), eps = T(h.eps), wd = T(h.weight_decay);
  const T one_b1 = T(1.0 - h.beta1), one_b2 = T(1.0 - h.beta2);
  for_range(n, n * 8, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const T g = wd != T(0) ? grad[i] + wd * param[i] : grad[i];
      m[i] = m[i] * b1 + one_b1 * g;
      v[i] = v[i] * b2 + one_b2 * g * g;
      const T denom = std::sqrt(v[i]) / bc2_sqrt + eps;
      param[i] -= step_size * (m[i] / denom);
    }
  });
}

template <class T>
void sgd_update(int64_t n, T* param, const T* grad, T* buf, int64_t step, const SgdHyper& h) {
  const T lr = T(h.lr), mom = T(h.momentum), wd = T(h.weight_decay);
  const bool first = step <= 1;
  const bool nesterov = h.nesterov;
  for_range(n, n, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      T g = wd != T(0) ? grad[i] + wd * param[i] : grad[i];
      if (mom != T(0)) {
        buf[i] = first ? g : mom * buf[i] + g;
        g = nesterov ? g + mom * buf[i] : buf[i];
      }
      param[i] -= lr * g;
    }
  });
}

#define HDDP_INSTANTIATE(T)                                                              \
  template void add_bias_rows<T>(int64_t, int64_t, const T*, T*, int64_t);               \
  template void col_sums<T>(int64_t, int64_t, const T*, int64_t, T*, bool);              \
  template void tanh_forward<T>(int64_t, const T*, T*);                                  \
  template void tanh_backward<T>(int64_t, const T*, const T*, T*);                       \
  template void relu_forward<T>(int64_t, const T*, T*);                                  \
  template void relu_backward<T>(int64_t, const T*, const T*, T*);                       \
  template double sum_sq_diff<T>(int64_t, const T*, const T*);                           \
  template void scaled_diff<T>(int64_t, T, const T*, const T*, T*);                      \
  template void axpy<T>(int64_t, T, const T*, T*);                                       \
  template void scale<T>(int64_t, T, T*);                                                \
  template bool all_finite<T>(int64_t, const T*);                                        \
  template void adam_update<T>(int64_t, T*, const T*, T*, T*, int64_t, const AdamHyper&); \
  template void sgd_update<T>(int64_t, T*, const T*, T*, int64_t, const SgdHyper&);
HDDP_INSTANTIATE(float)
HDDP_INSTANTIATE(double)

}  // namespace hddp
