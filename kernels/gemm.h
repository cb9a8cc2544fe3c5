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

// Name of the micro-kernel set the Blocked backend runs for float ("avx512", "avx2" or
// "portable"), as chosen for this CPU (kernels/gemm/gemm_config.h: env HDDP_GEMM_KERNEL forces
// one, else the wisdom file gemm_tune wrote, else the built-in table; unknown or unsupported
// names and malformed wisdom throw std::invalid_argument).
const char* gemm_kernel_name();
// The whole choice in one line: set and blocking per precision and where it came from, e.g.
// "float avx512 12x32 MC 192 KC 256 NC 4096; double ...; from wisdom /root/.config/...".
std::string gemm_config_description();
// The wisdom file this process reads ("" for none): $HDDP_GEMM_WISDOM, else
// $XDG_CONFIG_HOME/hddp/gemm_wisdom.json, else $HOME/.config/hddp/gemm_wisdom.json.
std::string gemm_wisdom_path();

// OpenBLAS's name for the kernels it runs on this CPU (openblas_get_corename(): "SkylakeX",
// "Haswell", "Prescott" ...), as OPENBLAS_CORETYPE and its own detection chose them at load.
std::string openblas_core_name();

}  // namespace hddp
