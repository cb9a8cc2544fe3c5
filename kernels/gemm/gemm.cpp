// Public gemm(): dispatch to the selected backend.
#include <hddp/kernels/gemm.h>
#include <hddp/kernels/gemm/gemm_backends.h>

#include <atomic>
#include <cstdlib>

#include <hddp/kernels/check.h>
#include <hddp/kernels/gemm/gemm_config.h>
#include <hddp/kernels/gemm/gemm_ukernel.h>

namespace hddp {
namespace {

// -1: not chosen yet (read HDDP_GEMM on first use); otherwise a GemmBackend value.
std::atomic<int> g_backend{-1};

GemmBackend current_backend() {
  int b = g_backend.load(std::memory_order_relaxed);
  if (b < 0) {
    const char* env = std::getenv("HDDP_GEMM");
    const GemmBackend chosen = env ? parse_gemm_backend(env) : GemmBackend::Blocked;
    int expected = -1;
    g_backend.compare_exchange_strong(expected, static_cast<int>(chosen));
    b = g_backend.load();
  }
  return static_cast<GemmBackend>(b);
}

template <class T>
void dispatch(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
              int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  switch (current_backend()) {
    case GemmBackend::Blocked: return gemm_blocked(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    case GemmBackend::OpenBLAS: return gemm_openblas(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    case GemmBackend::Naive: return gemm_naive(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

}  // namespace

void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  dispatch(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
          int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  dispatch(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void set_gemm_backend(GemmBackend b) { g_backend.store(static_cast<int>(b)); }

GemmBackend gemm_backend() { return current_backend(); }

GemmBackend parse_gemm_backend(const std::string& name) {
  if (name == "blocked") return GemmBackend::Blocked;
  if (name == "openblas") return GemmBackend::OpenBLAS;
  if (name == "naive") return GemmBackend::Naive;
  HDDP_CHECK_ARG(false, "unknown GEMM backend '" << name
                        << "' (HDDP_GEMM / --gemm): expected blocked, openblas or naive");
}

const char* to_string(GemmBackend b) {
  switch (b) {
    case GemmBackend::Blocked: return "blocked";
    case GemmBackend::OpenBLAS: return "openblas";
    case GemmBackend::Naive: return "naive";
  }
  return "?";
}

const char* gemm_kernel_name() { return detail::gemm_config().set_s; }

std::string gemm_config_description() {
  const detail::GemmConfig& c = detail::gemm_config();
  return "float " + detail::describe(c.set_s, c.kernels.s.blocking) + "; double " +
         detail::describe(c.set_d, c.kernels.d.blocking) + "; from " + c.source;
}

std::string gemm_wisdom_path() { return detail::wisdom_path(); }

}  // namespace hddp
