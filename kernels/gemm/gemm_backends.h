#pragma once
// The GEMM backends themselves, callable directly: internal to the project (not installed),
// for the tests and benchmarks that compare them side by side. Same contract as gemm()
// (kernels/gemm.h); arguments are checked by each.
#include <cstdint>

#include <hddp/kernels/gemm.h>

namespace hddp {

// The signature every backend shares (held as values).
template <class T>
using GemmFn = void (*)(Trans, Trans, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*,
                        int64_t, T, T*, int64_t);

template <class T>
void gemm_blocked(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                  int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);
template <class T>
void gemm_openblas(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                   int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);
template <class T>
void gemm_naive(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

}  // namespace hddp
