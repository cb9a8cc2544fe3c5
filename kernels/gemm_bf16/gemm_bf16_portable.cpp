// gemm_bf16's portable set (gemm_bf16_ukernel.h), plain C++ for any CPU: op(A) and op(B)
// rounded to bf16 into float copies, then the float gemm().
#include <cstdint>
#include <vector>

#include <hddp/kernels/gemm/gemm_common.h>
#include <hddp/kernels/gemm_bf16/gemm_bf16_ukernel.h>

namespace hddp::detail {

template <class S>
void gemm_bf16_portable(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const S* A, int64_t lda,
                        const S* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (gemm_prologue(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
  const Strides as = a_strides(ta, lda), bs = b_strides(tb, ldb);
  std::vector<float> a(size_t(M * K)), b(size_t(K * N));
#pragma omp parallel for if (M * K + K * N >= (int64_t(1) << 16))
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) a[size_t(i * K + k)] = bf16_value(bf16_bits_of(A[i * as.rs + k * as.cs]));
#pragma omp parallel for if (M * K + K * N >= (int64_t(1) << 16))
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) b[size_t(k * N + j)] = bf16_value(bf16_bits_of(B[j * bs.rs + k * bs.cs]));
  gemm(Trans::No, Trans::No, M, N, K, alpha, a.data(), K, b.data(), N, beta, C, ldc);
}

const Bf16Kernels& gemm_bf16_kernels_portable() {
  static const Bf16Kernels k{"portable", {}, nullptr, nullptr, nullptr, nullptr, nullptr};
  return k;
}

template void gemm_bf16_portable<float>(Trans, Trans, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                        const float*, int64_t, float, float*, int64_t);
template void gemm_bf16_portable<uint16_t>(Trans, Trans, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t,
                                           const uint16_t*, int64_t, float, float*, int64_t);

}  // namespace hddp::detail
