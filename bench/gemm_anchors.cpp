// The GEMM anchors (gemm_anchors.h).
#include "gemm_anchors.h"

#include <dlfcn.h>
#include <omp.h>

#include <cmath>
#include <cstdio>

#ifdef HDDP_BLIS_LIBRARY
#include <blis.h>
#endif

namespace hddp::bench {
namespace {

#ifdef HDDP_BLIS_LIBRARY
// BLIS's entry points, resolved from the library opened with RTLD_LOCAL.
struct Blis {
  decltype(&bli_sgemm) sgemm = nullptr;
  decltype(&bli_dgemm) dgemm = nullptr;
};
Blis g_blis;

trans_t blis_trans(Trans t) { return t == Trans::No ? BLIS_NO_TRANSPOSE : BLIS_TRANSPOSE; }

// Row-major X (rows x cols, row stride ld): BLIS row stride ld, column stride 1. op(X) is
// BLIS's trans flag on the stored matrix.
template <class T, class F>
void blis_gemm(F f, Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
               int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  f(blis_trans(ta), blis_trans(tb), M, N, K, &alpha, const_cast<T*>(A), lda, 1, const_cast<T*>(B),
    ldb, 1, &beta, C, ldc, 1);
}

bool open_blis(std::string& kernel, std::string& why) {
  void* h = dlopen(HDDP_BLIS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    why = std::string("blis: cannot open ") + HDDP_BLIS_LIBRARY + ": " + dlerror() +
          " (install libblis4-openmp: scripts/setup-deps.sh does)";
    return false;
  }
  g_blis.sgemm = reinterpret_cast<decltype(&bli_sgemm)>(dlsym(h, "bli_sgemm"));
  g_blis.dgemm = reinterpret_cast<decltype(&bli_dgemm)>(dlsym(h, "bli_dgemm"));
  auto query = reinterpret_cast<decltype(&bli_arch_query_id)>(dlsym(h, "bli_arch_query_id"));
  auto arch = reinterpret_cast<decltype(&bli_arch_string)>(dlsym(h, "bli_arch_string"));
  auto threads = reinterpret_cast<decltype(&bli_thread_set_num_threads)>(dlsym(h, "bli_thread_set_num_threads"));
  auto version = reinterpret_cast<decltype(&bli_info_get_version_str)>(dlsym(h, "bli_info_get_version_str"));
  if (!g_blis.sgemm || !g_blis.dgemm || !query || !arch || !threads || !version) {
    why = std::string("blis: ") + HDDP_BLIS_LIBRARY + " lacks bli_sgemm/bli_dgemm/bli_arch_*";
    return false;
  }
  threads(omp_get_max_threads());  // the same thread count as hddp and OpenBLAS
  kernel = std::string(arch(query())) + " (BLIS " + version() + ")";
  return true;
}
#endif

}  // namespace

std::vector<Anchor> gemm_anchors(std::vector<std::string>& absent) {
  std::vector<Anchor> out;
  out.push_back({"openblas", openblas_core_name(), &gemm_openblas<float>, &gemm_openblas<double>});
#ifdef HDDP_BLIS_LIBRARY
  std::string kernel, why;
  if (open_blis(kernel, why)) {
    out.push_back({"blis", kernel,
                   [](Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                      int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
                     blis_gemm(g_blis.sgemm, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
                   },
                   [](Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                      int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
                     blis_gemm(g_blis.dgemm, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
                   }});
  } else {
    absent.push_back(why);
  }
#else
  absent.push_back("blis: not found when this was configured (install libblis-openmp-dev, then re-run cmake)");
#endif
  return out;
}

template <class T>
std::string oracle_mismatch(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha,
                            const T* A, int64_t lda, const T* B, int64_t ldb, const T* C,
                            int64_t ldc) {
  const double tol = sizeof(T) == 4 ? 1e-4 : 1e-12;
  for (int64_t s = 0; s < 97 && M * N > 0; ++s) {
    // Spread over C, always including both corners (edge tiles).
    const int64_t idx = s == 0 ? 0 : s == 96 ? M * N - 1 : (s * 7919 * 104729) % (M * N);
    const int64_t i = idx / N, j = idx % N;
    double sum = 0, mag = 0;
    for (int64_t p = 0; p < K; ++p) {
      const double a = ta == Trans::No ? A[i * lda + p] : A[p * lda + i];
      const double b = tb == Trans::No ? B[p * ldb + j] : B[j * ldb + p];
      sum += a * b;
      mag += std::fabs(a * b);
    }
    const double want = double(alpha) * sum, got = C[i * ldc + j];
    if (!(std::fabs(got - want) <= tol * (std::fabs(double(alpha)) * mag + 1e-30))) {
      char msg[160];
      std::snprintf(msg, sizeof msg, "C[%lld][%lld] = %.9g, expected %.9g", static_cast<long long>(i),
                    static_cast<long long>(j), got, want);
      return msg;
    }
  }
  return "";
}

template std::string oracle_mismatch<float>(Trans, Trans, int64_t, int64_t, int64_t, float, const float*,
                                            int64_t, const float*, int64_t, const float*, int64_t);
template std::string oracle_mismatch<double>(Trans, Trans, int64_t, int64_t, int64_t, double, const double*,
                                             int64_t, const double*, int64_t, const double*, int64_t);

}  // namespace hddp::bench
