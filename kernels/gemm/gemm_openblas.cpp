// OpenBLAS backend: cblas_?gemm from the OpenMP build, so OMP_NUM_THREADS governs it too.
#include <cblas.h>

#include <limits>

#include <hddp/kernels/gemm/gemm_common.h>

namespace hddp {
namespace {

blasint to_blasint(int64_t v, const char* name) {
  HDDP_CHECK_ARG(v <= std::numeric_limits<blasint>::max(),
                 "gemm (OpenBLAS backend): " << name << " = " << v << " exceeds blasint");
  return static_cast<blasint>(v);
}

CBLAS_TRANSPOSE cblas_trans(Trans t) { return t == Trans::No ? CblasNoTrans : CblasTrans; }

}  // namespace

std::string openblas_core_name() { return openblas_get_corename(); }

template <>
void gemm_openblas<float>(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha,
                          const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                          float* C, int64_t ldc) {
  if (detail::gemm_prologue(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
  cblas_sgemm(CblasRowMajor, cblas_trans(ta), cblas_trans(tb), to_blasint(M, "M"),
              to_blasint(N, "N"), to_blasint(K, "K"), alpha, A, to_blasint(lda, "lda"), B,
              to_blasint(ldb, "ldb"), beta, C, to_blasint(ldc, "ldc"));
}

template <>
void gemm_openblas<double>(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, double alpha,
                           const double* A, int64_t lda, const double* B, int64_t ldb,
                           double beta, double* C, int64_t ldc) {
  if (detail::gemm_prologue(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
  cblas_dgemm(CblasRowMajor, cblas_trans(ta), cblas_trans(tb), to_blasint(M, "M"),
              to_blasint(N, "N"), to_blasint(K, "K"), alpha, A, to_blasint(lda, "lda"), B,
              to_blasint(ldb, "ldb"), beta, C, to_blasint(ldc, "ldc"));
}

}  // namespace hddp
