#pragma once
// What every GEMM backend does first: check the arguments (once, at the public boundary,
// never in the loops) and handle the cases that need no multiplication.
#include <algorithm>
#include <cstdint>

#include <hddp/kernels/check.h>
#include <hddp/kernels/gemm.h>
#include <hddp/kernels/gemm/gemm_backends.h>

namespace hddp::detail {

// Returns true when the call is complete (M or N is 0, or alpha == 0 or K == 0).
// S: the inputs' type (T, or bf16 for gemm_bf16).
template <class T, class S>
bool gemm_prologue(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const S* A,
                   int64_t lda, const S* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  HDDP_CHECK_ARG(M >= 0, "gemm: M must be >= 0, got " << M);
  HDDP_CHECK_ARG(N >= 0, "gemm: N must be >= 0, got " << N);
  HDDP_CHECK_ARG(K >= 0, "gemm: K must be >= 0, got " << K);
  // Row-major: a row of the stored matrix holds its number of columns.
  const int64_t a_cols = ta == Trans::No ? K : M, b_cols = tb == Trans::No ? N : K;
  HDDP_CHECK_ARG(lda >= std::max<int64_t>(1, a_cols),
                 "gemm: lda must be >= max(1, " << a_cols << "), got " << lda);
  HDDP_CHECK_ARG(ldb >= std::max<int64_t>(1, b_cols),
                 "gemm: ldb must be >= max(1, " << b_cols << "), got " << ldb);
  HDDP_CHECK_ARG(ldc >= std::max<int64_t>(1, N), "gemm: ldc must be >= max(1, " << N << "), got " << ldc);
  if (M == 0 || N == 0) return true;
  HDDP_CHECK_ARG(C != nullptr, "gemm: C is null");
  const bool multiply = alpha != T(0) && K > 0;
  if (multiply) {
    HDDP_CHECK_ARG(A != nullptr, "gemm: A is null");
    HDDP_CHECK_ARG(B != nullptr, "gemm: B is null");
    return false;
  }
  for (int64_t i = 0; i < M; ++i) {  // C = beta * C; beta == 0 overwrites NaN/Inf
    T* c = C + i * ldc;
    if (beta == T(0)) std::fill(c, c + N, T(0));
    else if (beta != T(1)) for (int64_t j = 0; j < N; ++j) c[j] *= beta;
  }
  return true;
}

}  // namespace hddp::detail
