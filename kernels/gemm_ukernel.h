#pragma once
// The instruction-set-specific pieces of GEMM, chosen once at run time from the CPU.
// Implementations: gemm_ukernel_portable.cpp (plain C++, any x86-64 or other CPU) and
// gemm_ukernel_avx2.cpp (AVX2+FMA intrinsics; the only file built with -mavx2 -mfma).
#include <cstdint>

#include "kernels/gemm.h"

namespace hddp::detail {

// Packed micro-kernel: the MR x NR tile of C at c (row stride ldc) becomes
//   C = alpha * (a . b) + beta * C          (beta == 0: C is not read)
// a: packed A micro-panel, a[p*MR + i], p < k;  b: packed B micro-panel, b[p*NR + j];
// both 64-byte aligned (see gemm_pack.h).
template <class T>
using UKernel = void (*)(int64_t k, const T* a, const T* b, T alpha, T beta, T* c, int64_t ldc);

// Direct path for tiny products (no packing of the big kind, no threads); full gemm contract
// after argument checks and the M/N/K/alpha special cases (gemm_small.h).
template <class T>
using SmallGemm = void (*)(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha,
                           const T* A, int64_t lda, const T* B, int64_t ldb, T beta, T* C,
                           int64_t ldc);

// Transposing packer of one full micro-panel, the two packing cases that are a transpose:
//   pack_a_rows: MR rows of A stored row-major (row stride ld, contiguous in k)
//                -> dst[k*MR + i], k < kc                      (op(A) = A)
//   pack_b_rows: NR rows of B^T stored row-major (row stride ld, contiguous in k)
//                -> dst[k*NR + j], k < kc                      (op(B) = B^T)
// nullptr: the generic loops of gemm_pack.h do it.
template <class T>
using PackRows = void (*)(const T* src, int64_t ld, int64_t kc, T* dst);

template <class T>
struct KernelSet {
  UKernel<T> ukernel;
  SmallGemm<T> small;
  PackRows<T> pack_a_rows = nullptr;
  PackRows<T> pack_b_rows = nullptr;
};

struct Kernels {
  const char* name;
  KernelSet<float> s;
  KernelSet<double> d;
};

const Kernels& portable_kernels();
const Kernels& avx2_kernels();  // call only where the CPU has AVX2 and FMA

// The set for this CPU: avx2-fma where supported, else portable. HDDP_GEMM_KERNEL=portable
// forces the portable one (tests use it to check both on one machine).
const Kernels& cpu_kernels();

template <class T>
const KernelSet<T>& kernel_set(const Kernels& k);
template <>
inline const KernelSet<float>& kernel_set<float>(const Kernels& k) { return k.s; }
template <>
inline const KernelSet<double>& kernel_set<double>(const Kernels& k) { return k.d; }

}  // namespace hddp::detail
