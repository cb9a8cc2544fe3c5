// gemm_bf16's naive twin (gemm_bf16_ukernel.h): what tests and benchmarks check the sets against.
#include <cstdint>

#include <hddp/kernels/gemm/gemm_common.h>
#include <hddp/kernels/gemm_bf16/gemm_bf16_ukernel.h>

namespace hddp::detail {

template <class S>
void gemm_bf16_naive(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const S* A, int64_t lda,
                     const S* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (gemm_prologue(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
  const Strides as = a_strides(ta, lda), bs = b_strides(tb, ldb);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k)
        acc += bf16_value(bf16_bits_of(A[i * as.rs + k * as.cs])) * bf16_value(bf16_bits_of(B[j * bs.rs + k * bs.cs]));
      float& c = C[i * ldc + j];
      c = beta == 0.0f ? alpha * acc : alpha * acc + beta * c;
    }
}

template void gemm_bf16_naive<float>(Trans, Trans, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                     const float*, int64_t, float, float*, int64_t);
template void gemm_bf16_naive<uint16_t>(Trans, Trans, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t,
                                        const uint16_t*, int64_t, float, float*, int64_t);

}  // namespace hddp::detail
