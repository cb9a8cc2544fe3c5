#pragma once
// Packing for the blocked GEMM (BLIS layout). Edge micro-panels are zero-padded so the
// micro-kernel always runs full MR x NR tiles. MR and NR come from the kernel set's Blocking;
// the transposing cases of full micro-panels go to the set's instruction-set packer.
#include <algorithm>
#include <cstdint>

#include "kernels/gemm.h"

namespace hddp::detail {

// dst[k*W + j] = src[k*ld + j] for k < rows, j < W.
template <int64_t W, class T>
inline void copy_rows(const T* __restrict src, int64_t ld, int64_t rows, T* __restrict dst) {
  for (int64_t k = 0; k < rows; ++k)
    for (int64_t j = 0; j < W; ++j) dst[k * W + j] = src[k * ld + j];
}

// The same for a width known only at run time: the widths of the table get a loop the
// compiler unrolls and vectorises.
template <class T>
inline void copy_rows(int64_t w, const T* __restrict src, int64_t ld, int64_t rows, T* __restrict dst) {
  switch (w) {
    case 6: return copy_rows<6>(src, ld, rows, dst);
    case 8: return copy_rows<8>(src, ld, rows, dst);
    case 14: return copy_rows<14>(src, ld, rows, dst);
    case 16: return copy_rows<16>(src, ld, rows, dst);
    case 32: return copy_rows<32>(src, ld, rows, dst);
    default:
      for (int64_t k = 0; k < rows; ++k)
        for (int64_t j = 0; j < w; ++j) dst[k * w + j] = src[k * ld + j];
  }
}

// op(A)(i, k) for i < mc, k < kc, starting at (i0, k0), into ceil(mc/MR) micro-panels:
// dst[(i/MR)*MR*kc + k*MR + i%MR].
// rows: the instruction-set packer for full micro-panels of a transposing case (or nullptr).
template <class T>
void pack_a(int64_t MR, Trans ta, const T* A, int64_t lda, int64_t i0, int64_t k0, int64_t mc, int64_t kc,
            T* dst, void (*rows)(const T*, int64_t, int64_t, T*) = nullptr) {
  for (int64_t ir = 0; ir < mc; ir += MR) {
    const int64_t mr = std::min(MR, mc - ir);
    T* d = dst + ir * kc;
    if (ta == Trans::No) {  // row i of A is contiguous in k
      const T* a = A + (i0 + ir) * lda + k0;
      if (rows && mr == MR) {
        rows(a, lda, kc, d);
        continue;
      }
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t i = 0; i < mr; ++i) d[k * MR + i] = a[i * lda + k];
        for (int64_t i = mr; i < MR; ++i) d[k * MR + i] = T(0);
      }
    } else {  // A is stored K x M: op(A)(i, k) = A[k*lda + i], contiguous in i
      const T* a = A + k0 * lda + i0 + ir;
      if (mr == MR) {
        copy_rows(MR, a, lda, kc, d);
        continue;
      }
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t i = 0; i < mr; ++i) d[k * MR + i] = a[k * lda + i];
        for (int64_t i = mr; i < MR; ++i) d[k * MR + i] = T(0);
      }
    }
  }
}

// op(B)(k, j) for k < kc, j < nc, starting at (k0, j0), into ceil(nc/NR) micro-panels:
// dst[(j/NR)*NR*kc + k*NR + j%NR].
template <class T>
void pack_b(int64_t NR, Trans tb, const T* B, int64_t ldb, int64_t k0, int64_t j0, int64_t kc, int64_t nc,
            T* dst, void (*rows)(const T*, int64_t, int64_t, T*) = nullptr) {
  for (int64_t jr = 0; jr < nc; jr += NR) {
    const int64_t nr = std::min(NR, nc - jr);
    T* d = dst + jr * kc;
    if (tb == Trans::No) {  // row k of B is contiguous in j
      const T* b = B + k0 * ldb + j0 + jr;
      if (nr == NR) {  // a straight copy of NR-wide rows (restrict: lets it vectorise)
        copy_rows(NR, b, ldb, kc, d);
        continue;
      }
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t j = 0; j < nr; ++j) d[k * NR + j] = b[k * ldb + j];
        for (int64_t j = nr; j < NR; ++j) d[k * NR + j] = T(0);
      }
    } else {  // B is stored N x K: op(B)(k, j) = B[j*ldb + k]
      const T* b = B + (j0 + jr) * ldb + k0;
      if (rows && nr == NR) {
        rows(b, ldb, kc, d);
        continue;
      }
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t j = 0; j < nr; ++j) d[k * NR + j] = b[j * ldb + k];
        for (int64_t j = nr; j < NR; ++j) d[k * NR + j] = T(0);
      }
    }
  }
}

}  // namespace hddp::detail
