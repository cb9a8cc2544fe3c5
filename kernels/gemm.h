#pragma once
// General matrix multiply, row-major, BLAS semantics:
//   C(M x N) = alpha * op(A)(M x K) * op(B)(K x N) + beta * C
// lda/ldb/ldc are row strides (elements). op(X) = X or X^T by Trans.
// - beta == 0 overwrites C (NaN/Inf in C are not propagated); alpha == 0 or K == 0 only
//   scales C by beta; M == 0 or N == 0 does nothing.
// - Negative sizes, too-small leading dimensions or null pointers throw std::invalid_argument
//   naming the argument.
// - Results are bitwise identical for any OpenMP thread count.
#include <cstdint>
#include <string>

namespace hddp {

enum class Trans : char { No, Yes };

void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
          int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc);

// Which implementation gemm() dispatches to.
//   Blocked  - hddp's packed Goto/BLIS GEMM (default)
//   OpenBLAS - cblas_?gemm from the OpenMP build of OpenBLAS
//   Naive    - triple loop, the oracle the others are tested against
enum class GemmBackend { Blocked, OpenBLAS, Naive };

// The first call to gemm() reads env HDDP_GEMM=blocked|openblas|naive (unset: blocked);
// an unknown value throws. set_gemm_backend() overrides it for the whole process.
void set_gemm_backend(GemmBackend b);
GemmBackend gemm_backend();
GemmBackend parse_gemm_backend(const std::string& name);  // throws std::invalid_argument
const char* to_string(GemmBackend b);

// Name of the micro-kernel set the Blocked backend runs ("avx512", "avx2" or "portable"):
// the widest this CPU supports, or the one forced by env HDDP_GEMM_KERNEL (unknown or
// unsupported names throw std::invalid_argument).
const char* gemm_kernel_name();

// The backends themselves, callable directly (tests and benchmarks compare them side by
// side). Same contract as gemm(); arguments are checked by each.
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
