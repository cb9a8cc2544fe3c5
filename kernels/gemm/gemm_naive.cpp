// The naive twin of every GEMM backend: three loops, the oracle of tests and benchmarks.
#include <hddp/kernels/gemm/gemm_common.h>

namespace hddp {

template <class T>
void gemm_naive(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  if (detail::gemm_prologue(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      T acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const T a = ta == Trans::No ? A[i * lda + k] : A[k * lda + i];
        const T b = tb == Trans::No ? B[k * ldb + j] : B[j * ldb + k];
        acc += a * b;
      }
      T& c = C[i * ldc + j];
      c = beta == T(0) ? alpha * acc : alpha * acc + beta * c;
    }
}

template void gemm_naive<float>(Trans, Trans, int64_t, int64_t, int64_t, float, const float*,
                                int64_t, const float*, int64_t, float, float*, int64_t);
template void gemm_naive<double>(Trans, Trans, int64_t, int64_t, int64_t, double, const double*,
                                 int64_t, const double*, int64_t, double, double*, int64_t);

}  // namespace hddp
