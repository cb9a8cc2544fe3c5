#pragma once
// GEMM with bf16 inputs, float accumulation and float output, row-major, BLAS semantics:
//   C(M x N) = alpha * op(A)(M x K) * op(B)(K x N) + beta * C
// The products of bf16 values are exact in float; only the sums round, so the result is the
// float GEMM of the bf16-rounded inputs up to the order of the additions. The float-input form
// rounds A and B to bf16 (round to nearest even, bf16.h) as it packs them: the product
// PyTorch's autocast computes for a float tensor, without a converted copy.
// Argument rules as gemm() (gemm.h); bitwise identical for any OpenMP thread count.
//
// Kernel sets, chosen once per process: HDDP_GEMM_BF16_KERNEL forces one; unset, the set of the
// bf16 unit measured fastest on this CPU (units.h: amx, avx512bf16, or portable where neither
// runs at least 1.25x the float FMA):
//   amx         AMX tiles (tdpbf16ps: 16x16 float tiles, 1024 flop per cycle per core on
//               Sapphire/Emerald/Granite Rapids); Linux's permission is asked once per process
//   avx512bf16  AVX512_BF16 (vdpbf16ps: 2 bf16 pairs per float lane; 1.84x the float FMA on
//               Zen 5, 0.5x on Intel's Xeons)
//   portable    the inputs rounded to bf16 in float copies, then the float gemm()
#include <cstdint>
#include <string>

#include <hddp/kernels/bf16.h>
#include <hddp/kernels/gemm.h>

namespace hddp {

void gemm_bf16(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const bf16* A, int64_t lda,
               const bf16* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm_bf16(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Whether a float product of this size is faster through gemm_bf16 on this CPU's bf16 unit than
// through gemm(): a bf16 unit (units.h: not Float) and 2*M*N*K >= kBf16MinFlops. Below that,
// converting and packing the operands costs more than the unit saves (measured on AMX, one
// thread: 32x20x20 0.19x, 64^3 0.96x, 64x128x64 1.16x, 128^3 1.80x the float GEMM's speed).
// Core's Precision::Bf16 runs the smaller products in float.
inline constexpr int64_t kBf16MinFlops = int64_t(1) << 20;
bool bf16_product_pays(int64_t M, int64_t N, int64_t K);

// The set gemm_bf16 runs here: "amx", "avx512bf16" or "portable" (an unknown or unsupported
// HDDP_GEMM_BF16_KERNEL throws std::invalid_argument saying what to do).
const char* gemm_bf16_kernel_name();
// Why the set `name` cannot run on this CPU ("" when it can); unknown names throw.
std::string gemm_bf16_unsupported_reason(const std::string& name);

}  // namespace hddp
