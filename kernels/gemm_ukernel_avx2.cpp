// AVX2+FMA micro-kernels (sgemm 6x16, dgemm 6x8) and the direct path compiled for AVX2.
// The only file of hddp built with -mavx2 -mfma; it is called only after the CPU was checked.
//
// Register use per micro-tile (BLIS/Goto): 12 ymm accumulators (6 rows x 2 registers),
// 2 ymm for the current row of the B micro-panel, 1 for the broadcast element of A.
#include <immintrin.h>

#define HDDP_ISA avx2
#include "kernels/gemm_small.h"
#include "kernels/gemm_ukernel.h"

namespace hddp::detail {
namespace {

// The few vector operations the kernel needs, for float (8 lanes) and double (4 lanes).
template <class T>
struct Vec;
template <>
struct Vec<float> {
  using R = __m256;
  static R zero() { return _mm256_setzero_ps(); }
  static R load(const float* p) { return _mm256_load_ps(p); }
  static R loadu(const float* p) { return _mm256_loadu_ps(p); }
  static R bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static R set1(float x) { return _mm256_set1_ps(x); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static void storeu(float* p, R x) { _mm256_storeu_ps(p, x); }
};
template <>
struct Vec<double> {
  using R = __m256d;
  static R zero() { return _mm256_setzero_pd(); }
  static R load(const double* p) { return _mm256_load_pd(p); }
  static R loadu(const double* p) { return _mm256_loadu_pd(p); }
  static R bcast(const double* p) { return _mm256_broadcast_sd(p); }
  static R set1(double x) { return _mm256_set1_pd(x); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_pd(a, b, c); }
  static R mul(R a, R b) { return _mm256_mul_pd(a, b); }
  static void storeu(double* p, R x) { _mm256_storeu_pd(p, x); }
};

template <class T>
void ukernel_avx2(int64_t k, const T* a, const T* b, T alpha, T beta, T* c, int64_t ldc) {
  using V = Vec<T>;
  constexpr int64_t MR = Blocking<T>::MR, NR = Blocking<T>::NR, L = 32 / sizeof(T);
  static_assert(MR == 6 && NR == 2 * L, "the register layout assumes 6 x (2 registers)");
  for (int64_t i = 0; i < MR; ++i) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);

  typename V::R c00 = V::zero(), c01 = V::zero(), c10 = V::zero(), c11 = V::zero();
  typename V::R c20 = V::zero(), c21 = V::zero(), c30 = V::zero(), c31 = V::zero();
  typename V::R c40 = V::zero(), c41 = V::zero(), c50 = V::zero(), c51 = V::zero();
#pragma GCC unroll 4
  for (int64_t p = 0; p < k; ++p) {
    const typename V::R b0 = V::load(b), b1 = V::load(b + L);
    typename V::R ai = V::bcast(a + 0);
    c00 = V::fma(ai, b0, c00), c01 = V::fma(ai, b1, c01);
    ai = V::bcast(a + 1);
    c10 = V::fma(ai, b0, c10), c11 = V::fma(ai, b1, c11);
    ai = V::bcast(a + 2);
    c20 = V::fma(ai, b0, c20), c21 = V::fma(ai, b1, c21);
    ai = V::bcast(a + 3);
    c30 = V::fma(ai, b0, c30), c31 = V::fma(ai, b1, c31);
    ai = V::bcast(a + 4);
    c40 = V::fma(ai, b0, c40), c41 = V::fma(ai, b1, c41);
    ai = V::bcast(a + 5);
    c50 = V::fma(ai, b0, c50), c51 = V::fma(ai, b1, c51);
    a += MR;
    b += NR;
  }

  const typename V::R va = V::set1(alpha);
  const typename V::R acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                                    {c30, c31}, {c40, c41}, {c50, c51}};
  if (beta == T(0)) {  // overwrite: C is never read, so NaN/Inf in C do not propagate
    for (int64_t i = 0; i < MR; ++i) {
      V::storeu(c + i * ldc, V::mul(va, acc[i][0]));
      V::storeu(c + i * ldc + L, V::mul(va, acc[i][1]));
    }
  } else {
    const typename V::R vb = V::set1(beta);
    for (int64_t i = 0; i < MR; ++i) {
      T* ci = c + i * ldc;
      V::storeu(ci, V::fma(va, acc[i][0], V::mul(vb, V::loadu(ci))));
      V::storeu(ci + L, V::fma(va, acc[i][1], V::mul(vb, V::loadu(ci + L))));
    }
  }
}

}  // namespace

const Kernels& avx2_kernels() {
  static const Kernels k{"avx2-fma",
                         {&ukernel_avx2<float>, &avx2::gemm_small<float>},
                         {&ukernel_avx2<double>, &avx2::gemm_small<double>}};
  return k;
}

}  // namespace hddp::detail
