#pragma once
// The instruction-set-specific pieces of GEMM, chosen once at run time from the CPU.
// Implementations, one file per instruction set, each the only file built with its flags:
//   gemm_portable.cpp  plain C++, any CPU
//   gemm_avx2.cpp      AVX2+FMA intrinsics (-mavx2 -mfma), also the transposing packers and
//                      the direct path that the AVX-512 set reuses
//   gemm_avx512.cpp    AVX-512F micro-kernels (-mavx512f)
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include <hddp/kernels/cpu_isa.h>  // cpu_has_avx2_fma, cpu_has_avx512
#include <hddp/kernels/gemm.h>
#include <hddp/kernels/gemm/gemm_blocking.h>

namespace hddp::detail {

// Micro-kernel: the MR x NR tile (MR, NR from the tile's Blocking) of C at c (row stride ldc) becomes
//   C = alpha * (a . b) + beta * C          (beta == 0: C is not read)
// over p < k, with A's element (i, p) at a[i*rsa + p*csa] and B's (p, j) at b[p*rsb + j]:
// a packed A micro-panel has rsa = 1, csa = MR; a packed B micro-panel rsb = NR (both 64-byte
// aligned, gemm_pack.h); an operand read in place has its own strides (gemm_blocked.cpp).
template <class T>
using UKernel = void (*)(int64_t k, const T* a, int64_t rsa, int64_t csa, const T* b, int64_t rsb, T alpha, T beta,
                         T* c, int64_t ldc);

// Direct path for tiny products (no packing of the big kind, no threads); full gemm contract
// after argument checks and the M/N/K/alpha special cases (gemm_small.h). Returns false,
// having done nothing, where the product is too big for it.
template <class T>
using SmallGemm = bool (*)(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha,
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

// One micro-tile of a set: its blocking (MR x NR and MC/KC/NC), kernel and transposing packers.
template <class T>
struct Tile {
  Blocking blocking;
  UKernel<T> ukernel = nullptr;
  PackRows<T> pack_a_rows = nullptr;
  PackRows<T> pack_b_rows = nullptr;
};

// A set for one precision. The tile it inherits runs the general shape class, `narrow`, `thin`
// and `long_k` the others (gemm_blocking.h, shape_class); `tiles` lists every micro-tile the set
// has, each with its own row of gemm_blocking.h, for gemm_config and gemm_tune to choose from.
template <class T>
struct KernelSet : Tile<T> {
  SmallGemm<T> small = nullptr;
  Tile<T> narrow, thin, long_k;
  std::span<const Tile<T>> tiles;

  Tile<T>& tile(ShapeClass c) {
    return c == ShapeClass::Narrow ? narrow : c == ShapeClass::Thin ? thin : c == ShapeClass::LongK ? long_k : *this;
  }
  const Tile<T>& tile(ShapeClass c) const { return const_cast<KernelSet*>(this)->tile(c); }
  ClassBlocking blockings() const { return {this->blocking, narrow.blocking, thin.blocking, long_k.blocking}; }
};

struct Kernels {
  const char* name;
  KernelSet<float> s;
  KernelSet<double> d;
};

// The tile with this MR x NR (with its own blocking), or nullptr.
template <class T>
const Tile<T>* find_tile(std::span<const Tile<T>> tiles, int64_t MR, int64_t NR) {
  for (const Tile<T>& t : tiles)
    if (t.blocking.MR == MR && t.blocking.NR == NR) return &t;
  return nullptr;
}

// A set from its tiles: each class's by its MR x NR (which must be one of them), with its blocking.
template <class T>
KernelSet<T> make_kernel_set(std::span<const Tile<T>> tiles, const ClassBlocking& b, SmallGemm<T> small) {
  KernelSet<T> ks;
  ks.small = small;
  ks.tiles = tiles;
  for (ShapeClass c : kShapeClasses) {
    ks.tile(c) = *find_tile(tiles, b[c].MR, b[c].NR);
    ks.tile(c).blocking = b[c];
  }
  return ks;
}

// The tile a product of this shape runs on.
template <class T>
const Tile<T>& tile_for(const KernelSet<T>& ks, int64_t M, int64_t N, int64_t K) {
  return ks.tile(shape_class(M, N, K));
}

const Kernels& gemm_kernels_portable();
const Kernels& gemm_kernels_avx2();    // call only where cpu_has_avx2_fma()
const Kernels& gemm_kernels_avx512();  // call only where cpu_has_avx512()

// The AVX2 transposing packers for a micro-panel of width w (MR for A, NR for B), or nullptr
// where there is none for that width; they serve the AVX-512 set too.
template <class T>
PackRows<T> avx2_pack_a_rows(int64_t w);
template <class T>
PackRows<T> avx2_pack_b_rows(int64_t w);

// The sets gemm_blocked runs, with their blocking, chosen on first use (gemm_config.h:
// HDDP_GEMM_KERNEL, the wisdom file, the built-in table; a bad value throws
// std::invalid_argument). Its float and double halves may come from different sets.
const Kernels& cpu_kernels();
// The set of that name if this CPU can execute it, else nullptr; throws on an unknown name.
const Kernels* kernels_by_name(const std::string& name);
// Why a kernel cannot run here ("" when it can): for messages and skipped tests.
std::string kernel_unsupported_reason(const std::string& name);

// gemm_blocked on a given set (benchmarks compare the sets side by side in one run).
template <class T>
void gemm_blocked_with(const Kernels& kernels, Trans ta, Trans tb, int64_t M, int64_t N, int64_t K,
                       T alpha, const T* A, int64_t lda, const T* B, int64_t ldb, T beta, T* C,
                       int64_t ldc);

template <class T>
const KernelSet<T>& kernel_set(const Kernels& k);
template <>
inline const KernelSet<float>& kernel_set<float>(const Kernels& k) { return k.s; }
template <>
inline const KernelSet<double>& kernel_set<double>(const Kernels& k) { return k.d; }
// The same, writable (gemm_config and gemm_tune set the blocking of a copy).
template <class T>
KernelSet<T>& kernel_set(Kernels& k) { return const_cast<KernelSet<T>&>(kernel_set<T>(std::as_const(k))); }

}  // namespace hddp::detail
