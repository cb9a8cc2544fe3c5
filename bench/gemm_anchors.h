#pragma once
// The libraries hddp's GEMM is measured against (bench_gemm, gemm_tune), each behind the gemm
// signature of kernels/gemm.h, and an oracle every result is checked by before it is timed.
//   openblas  linked (OpenMP build); its kernel is whatever OPENBLAS_CORETYPE or its detection
//             chose at load: run the process once per setting to compare them (gemm_table.sh)
//   blis      Debian's libblis4-openmp, opened with dlopen(RTLD_LOCAL) so that its BLAS and
//             CBLAS symbols never meet OpenBLAS's; called through its typed API (bli_?gemm,
//             row and column strides, so row-major needs no transposition trick)
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/kernels/gemm.h>
#include <hddp/kernels/gemm/gemm_backends.h>

namespace hddp::bench {

using hddp::GemmFn;

struct Anchor {
  std::string name;    // "openblas", "blis"
  std::string kernel;  // what it runs here: OpenBLAS's core name, BLIS's configuration
  GemmFn<float> s;
  GemmFn<double> d;
};

// The anchors this build and machine have; `absent` gets a line per anchor that is not
// (why, and what to install).
std::vector<Anchor> gemm_anchors(std::vector<std::string>& absent);

// "" when C (M x N, row stride ldc) holds alpha*op(A)*op(B) (beta 0) at 97 sampled entries
// computed in double, within a relative 1e-4 (float) / 1e-12 (double) of the row's magnitude
// sum; else a description of the first wrong entry.
template <class T>
std::string oracle_mismatch(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha,
                            const T* A, int64_t lda, const T* B, int64_t ldb, const T* C,
                            int64_t ldc);

}  // namespace hddp::bench
