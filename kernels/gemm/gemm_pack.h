#pragma once
// Packing for the blocked GEMM (BLIS layout). Edge micro-panels are zero-padded so the
// micro-kernel always runs full MR x NR tiles. MR and NR come from the kernel set's Blocking.
// The operand whose rows run along the micro-panels is packed in groups of rows (pack_along);
// the transposing cases go a micro-panel at a time, full ones to the set's instruction-set packer.
#include <algorithm>
#include <cstdint>

#include <hddp/kernels/gemm.h>

namespace hddp::detail {

// dst[k*W + j] = src[k*ld + j] for k < rows, j < w (<= W); columns w..W are zero.
template <int64_t W, class T>
inline void copy_rows(const T* __restrict src, int64_t ld, int64_t rows, int64_t w, T* __restrict dst) {
  if (w == W) {
    for (int64_t k = 0; k < rows; ++k)
      for (int64_t j = 0; j < W; ++j) dst[k * W + j] = src[k * ld + j];
    return;
  }
  for (int64_t k = 0; k < rows; ++k)
    for (int64_t j = 0; j < W; ++j) dst[k * W + j] = j < w ? src[k * ld + j] : T(0);
}

// A block of an operand whose rows run along the micro-panels (n elements of each of kc rows,
// row stride ld) into W-wide micro-panels: dst[p*W*kc + k*W + j] = src[k*ld + p*W + j]. In
// groups of kRowGroup rows: each group reads kRowGroup rows along their length, streams the
// hardware prefetchers follow, and writes a contiguous piece of each micro-panel. (A micro-panel
// at a time reads a new page per row; a row at a time writes W-wide pieces a micro-panel apart,
// which alias in L1 when that distance is a power of two.)
inline constexpr int64_t kRowGroup = 16;

template <int64_t W, class T>
inline void pack_along(const T* src, int64_t ld, int64_t kc, int64_t n, T* dst) {
  for (int64_t k = 0; k < kc; k += kRowGroup) {
    const int64_t rows = std::min(kRowGroup, kc - k);
    for (int64_t p = 0; p < n; p += W)
      copy_rows<W>(src + k * ld + p, ld, rows, std::min(W, n - p), dst + p * kc + k * W);
  }
}

template <class T>
inline void pack_along(int64_t w, const T* src, int64_t ld, int64_t kc, int64_t n, T* dst) {
  switch (w) {
    case 6: return pack_along<6>(src, ld, kc, n, dst);
    case 8: return pack_along<8>(src, ld, kc, n, dst);
    case 12: return pack_along<12>(src, ld, kc, n, dst);
    case 14: return pack_along<14>(src, ld, kc, n, dst);
    case 16: return pack_along<16>(src, ld, kc, n, dst);
    case 24: return pack_along<24>(src, ld, kc, n, dst);
    case 32: return pack_along<32>(src, ld, kc, n, dst);
    case 48: return pack_along<48>(src, ld, kc, n, dst);
    default:
      for (int64_t p = 0; p < n; p += w)
        for (int64_t k = 0; k < kc; ++k)
          for (int64_t j = 0; j < w; ++j) dst[p * kc + k * w + j] = p + j < n ? src[k * ld + p + j] : T(0);
  }
}

// op(A)(i, k) for i < mc, k < kc, starting at (i0, k0), into ceil(mc/MR) micro-panels:
// dst[(i/MR)*MR*kc + k*MR + i%MR].
// rows: the instruction-set packer for full micro-panels of a transposing case (or nullptr).
template <class T>
void pack_a(int64_t MR, Trans ta, const T* A, int64_t lda, int64_t i0, int64_t k0, int64_t mc, int64_t kc,
            T* dst, void (*rows)(const T*, int64_t, int64_t, T*) = nullptr) {
  if (ta == Trans::Yes) {  // A is stored K x M: op(A)(i, k) = A[k*lda + i], row k contiguous in i
    pack_along(MR, A + k0 * lda + i0, lda, kc, mc, dst);
    return;
  }
  for (int64_t ir = 0; ir < mc; ir += MR) {  // row i of A is contiguous in k
    const int64_t mr = std::min(MR, mc - ir);
    T* d = dst + ir * kc;
    const T* a = A + (i0 + ir) * lda + k0;
    if (rows && mr == MR) {
      rows(a, lda, kc, d);
      continue;
    }
    for (int64_t k = 0; k < kc; ++k) {
      for (int64_t i = 0; i < mr; ++i) d[k * MR + i] = a[i * lda + k];
      for (int64_t i = mr; i < MR; ++i) d[k * MR + i] = T(0);
    }
  }
}

// op(B)(k, j) for k < kc, j < nc, starting at (k0, j0), into ceil(nc/NR) micro-panels:
// dst[(j/NR)*NR*kc + k*NR + j%NR].
template <class T>
void pack_b(int64_t NR, Trans tb, const T* B, int64_t ldb, int64_t k0, int64_t j0, int64_t kc, int64_t nc,
            T* dst, void (*rows)(const T*, int64_t, int64_t, T*) = nullptr) {
  if (tb == Trans::No) {  // row k of B is contiguous in j
    pack_along(NR, B + k0 * ldb + j0, ldb, kc, nc, dst);
    return;
  }
  for (int64_t jr = 0; jr < nc; jr += NR) {  // B is stored N x K: op(B)(k, j) = B[j*ldb + k]
    const int64_t nr = std::min(NR, nc - jr);
    T* d = dst + jr * kc;
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

}  // namespace hddp::detail
