// AVX2+FMA micro-kernels (sgemm 6x16, dgemm 6x8), transposing packers (any MR, NR multiple of
// the vector width; the AVX-512 set uses them too), and the direct path compiled for AVX2.
// The only file of hddp built with -mavx2 -mfma; it is called only after the CPU was checked.
//
// Register use per micro-tile (BLIS/Goto): 12 ymm accumulators (6 rows x 2 registers),
// 2 ymm for the current row of the B micro-panel, 1 for the broadcast element of A.
#include <immintrin.h>

#define HDDP_ISA avx2
#include <hddp/kernels/gemm/gemm_small.h>
#include <hddp/kernels/gemm/gemm_ukernel.h>

namespace hddp::detail {
namespace {

// The few vector operations the kernel needs, for float (8 lanes) and double (4 lanes).
template <class T>
struct Vec;
template <>
struct Vec<float> {
  using R = __m256;
  static R zero() { return _mm256_setzero_ps(); }
  static R loadu(const float* p) { return _mm256_loadu_ps(p); }
  static R bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static R set1(float x) { return _mm256_set1_ps(x); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static void storeu(float* p, R x) { _mm256_storeu_ps(p, x); }
};
template <>
struct Vec<double> {
  using R = __m256d;
  static R zero() { return _mm256_setzero_pd(); }
  static R loadu(const double* p) { return _mm256_loadu_pd(p); }
  static R bcast(const double* p) { return _mm256_broadcast_sd(p); }
  static R set1(double x) { return _mm256_set1_pd(x); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_pd(a, b, c); }
  static R mul(R a, R b) { return _mm256_mul_pd(a, b); }
  static void storeu(double* p, R x) { _mm256_storeu_pd(p, x); }
};

// How the micro-kernel reads A: a packed micro-panel (rsa 1, csa MR: constant offsets), A^T in
// place (rsa 1, csa = lda) or A's rows in place (rsa = lda, csa 1); B: a packed micro-panel
// (rsb = NR, constant) or B in place (rsb = ldb). Unaligned loads of B: in place it may be.
enum class ARead { Packed, Columns, Rows };

// The k loop: 6 rows x 2 registers.
template <class T, ARead AR, bool B_PACKED>
inline void ukernel_avx2_loop(typename Vec<T>::R (&acc)[6][2], int64_t k, const T* a, int64_t rsa, int64_t csa,
                              const T* b, int64_t rsb) {
  using V = Vec<T>;
  using R = typename V::R;
  constexpr int64_t L = 32 / sizeof(T), MR = 6, NR = 2 * L;
  R c00 = acc[0][0], c01 = acc[0][1], c10 = acc[1][0], c11 = acc[1][1], c20 = acc[2][0], c21 = acc[2][1];
  R c30 = acc[3][0], c31 = acc[3][1], c40 = acc[4][0], c41 = acc[4][1], c50 = acc[5][0], c51 = acc[5][1];
  const int64_t r = AR == ARead::Rows ? rsa : 1, ca = AR == ARead::Packed ? MR : AR == ARead::Columns ? csa : 1;
  const int64_t rb = B_PACKED ? NR : rsb;
#pragma GCC unroll 4
  for (int64_t p = 0; p < k; ++p) {
    const R b0 = V::loadu(b), b1 = V::loadu(b + L);
    R ai = V::bcast(a + 0);
    c00 = V::fma(ai, b0, c00), c01 = V::fma(ai, b1, c01);
    ai = V::bcast(a + r);
    c10 = V::fma(ai, b0, c10), c11 = V::fma(ai, b1, c11);
    ai = V::bcast(a + 2 * r);
    c20 = V::fma(ai, b0, c20), c21 = V::fma(ai, b1, c21);
    ai = V::bcast(a + 3 * r);
    c30 = V::fma(ai, b0, c30), c31 = V::fma(ai, b1, c31);
    ai = V::bcast(a + 4 * r);
    c40 = V::fma(ai, b0, c40), c41 = V::fma(ai, b1, c41);
    ai = V::bcast(a + 5 * r);
    c50 = V::fma(ai, b0, c50), c51 = V::fma(ai, b1, c51);
    a += ca;
    b += rb;
  }
  acc[0][0] = c00, acc[0][1] = c01, acc[1][0] = c10, acc[1][1] = c11, acc[2][0] = c20, acc[2][1] = c21;
  acc[3][0] = c30, acc[3][1] = c31, acc[4][0] = c40, acc[4][1] = c41, acc[5][0] = c50, acc[5][1] = c51;
}

template <class T, bool B_PACKED>
inline void ukernel_avx2_loop(typename Vec<T>::R (&acc)[6][2], int64_t k, const T* a, int64_t rsa, int64_t csa,
                              const T* b, int64_t rsb) {
  if (rsa != 1) ukernel_avx2_loop<T, ARead::Rows, B_PACKED>(acc, k, a, rsa, csa, b, rsb);
  else if (csa == 6) ukernel_avx2_loop<T, ARead::Packed, B_PACKED>(acc, k, a, rsa, csa, b, rsb);
  else ukernel_avx2_loop<T, ARead::Columns, B_PACKED>(acc, k, a, rsa, csa, b, rsb);
}

template <class T>
void ukernel_avx2(int64_t k, const T* a, int64_t rsa, int64_t csa, const T* b, int64_t rsb, T alpha, T beta, T* c,
                  int64_t ldc) {
  using V = Vec<T>;
  constexpr int64_t L = 32 / sizeof(T), MR = 6, NR = 2 * L;  // kAvx2Float / kAvx2Double
  for (int64_t i = 0; i < MR; ++i) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
  typename V::R acc[MR][2];
  for (auto& row : acc) row[0] = row[1] = V::zero();
  if (rsb == NR) ukernel_avx2_loop<T, true>(acc, k, a, rsa, csa, b, rsb);
  else ukernel_avx2_loop<T, false>(acc, k, a, rsa, csa, b, rsb);

  const typename V::R va = V::set1(alpha);
  if (beta == T(0)) {  // overwrite: C is never read, so NaN/Inf in C do not propagate
    for (int64_t i = 0; i < MR; ++i) {
      V::storeu(c + i * ldc, V::mul(va, acc[i][0]));
      V::storeu(c + i * ldc + L, V::mul(va, acc[i][1]));
    }
  } else {
    const typename V::R vb = V::set1(beta);
    for (int64_t i = 0; i < MR; ++i) {
      T* ci = c + i * ldc;
      V::storeu(ci, V::fma(va, acc[i][0], V::mul(vb, V::loadu(ci))));
      V::storeu(ci + L, V::fma(va, acc[i][1], V::mul(vb, V::loadu(ci + L))));
    }
  }
}

// In-register transposes: r[i] holds row i; afterwards r[k] holds column k.
inline void transpose8x8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20), r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20), r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31), r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31), r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}
inline void transpose4x4(__m256d r[4]) {
  const __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
  const __m256d t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
  r[0] = _mm256_permute2f128_pd(t0, t2, 0x20), r[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
  r[2] = _mm256_permute2f128_pd(t0, t2, 0x31), r[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}

// The packers below read rows of one operand that are contiguous in k, many rows at once. With
// a leading dimension of a power of two (4 KiB for 1024 floats) all those rows map to the same
// L1 set and evict each other, so each 64-byte line is used whole as soon as it is loaded: k
// advances by a line (16 floats, 8 doubles) per step, as two transposes.

// NR rows of B^T (contiguous in k) -> dst[k*NR + j]: per 16 k, NR/8 x 2 transposes of 8 x 8.
template <int NR>
void pack_b_rows_s(const float* src, int64_t ld, int64_t kc, float* dst) {
  static_assert(NR % 8 == 0);
  int64_t k = 0;
  for (; k + 16 <= kc; k += 16)
    for (int h = 0; h < NR / 8; ++h) {
      __m256 lo[8], hi[8];
      for (int j = 0; j < 8; ++j) {
        lo[j] = _mm256_loadu_ps(src + (h * 8 + j) * ld + k);
        hi[j] = _mm256_loadu_ps(src + (h * 8 + j) * ld + k + 8);
      }
      transpose8x8(lo);
      transpose8x8(hi);
      for (int kk = 0; kk < 8; ++kk) {
        _mm256_storeu_ps(dst + (k + kk) * NR + h * 8, lo[kk]);
        _mm256_storeu_ps(dst + (k + 8 + kk) * NR + h * 8, hi[kk]);
      }
    }
  for (; k + 8 <= kc; k += 8)
    for (int h = 0; h < NR / 8; ++h) {
      __m256 r[8];
      for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(src + (h * 8 + j) * ld + k);
      transpose8x8(r);
      for (int kk = 0; kk < 8; ++kk) _mm256_storeu_ps(dst + (k + kk) * NR + h * 8, r[kk]);
    }
  for (; k < kc; ++k)
    for (int j = 0; j < NR; ++j) dst[k * NR + j] = src[j * ld + k];
}

// MR rows of A (contiguous in k) -> dst[k*MR + i]: groups of 8 rows as 8 x 8 transposes; a
// last group of fewer rows is padded with zero rows and stored through a mask.
template <int MR>
void pack_a_rows_s(const float* src, int64_t ld, int64_t kc, float* dst) {
  constexpr int tail = MR % 8;
  const __m256i mask = _mm256_setr_epi32(tail > 0 ? -1 : 0, tail > 1 ? -1 : 0, tail > 2 ? -1 : 0,
                                         tail > 3 ? -1 : 0, tail > 4 ? -1 : 0, tail > 5 ? -1 : 0,
                                         tail > 6 ? -1 : 0, 0);
  // Rows g..g+rows of columns k..k+8 transposed into dst.
  auto block = [&](int64_t k, int g) {
    const int rows = MR - g < 8 ? MR - g : 8;
    __m256 r[8];
    for (int i = 0; i < 8; ++i) r[i] = i < rows ? _mm256_loadu_ps(src + (g + i) * ld + k) : _mm256_setzero_ps();
    transpose8x8(r);
    for (int kk = 0; kk < 8; ++kk) {
      float* d = dst + (k + kk) * MR + g;
      if (rows == 8) _mm256_storeu_ps(d, r[kk]);
      else _mm256_maskstore_ps(d, mask, r[kk]);
    }
  };
  int64_t k = 0;
  for (; k + 16 <= kc; k += 16)
    for (int g = 0; g < MR; g += 8) block(k, g), block(k + 8, g);
  for (; k + 8 <= kc; k += 8)
    for (int g = 0; g < MR; g += 8) block(k, g);
  for (; k < kc; ++k)
    for (int i = 0; i < MR; ++i) dst[k * MR + i] = src[i * ld + k];
}

// NR rows of B^T -> dst[k*NR + j]: per 8 k, NR/4 x 2 transposes of 4 x 4.
template <int NR>
void pack_b_rows_d(const double* src, int64_t ld, int64_t kc, double* dst) {
  static_assert(NR % 4 == 0);
  auto block = [&](int64_t k, int h) {
    __m256d r[4];
    for (int j = 0; j < 4; ++j) r[j] = _mm256_loadu_pd(src + (h * 4 + j) * ld + k);
    transpose4x4(r);
    for (int kk = 0; kk < 4; ++kk) _mm256_storeu_pd(dst + (k + kk) * NR + h * 4, r[kk]);
  };
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8)
    for (int h = 0; h < NR / 4; ++h) block(k, h), block(k + 4, h);
  for (; k + 4 <= kc; k += 4)
    for (int h = 0; h < NR / 4; ++h) block(k, h);
  for (; k < kc; ++k)
    for (int j = 0; j < NR; ++j) dst[k * NR + j] = src[j * ld + k];
}

// MR rows of A -> dst[k*MR + i]: groups of 4 rows as 4 x 4 transposes; a last group of 2 rows
// (MR = 6, 14) is padded with zero rows and its lower half stored.
template <int MR>
void pack_a_rows_d(const double* src, int64_t ld, int64_t kc, double* dst) {
  static_assert(MR % 2 == 0);
  auto block = [&](int64_t k, int g) {
    const int rows = MR - g < 4 ? MR - g : 4;
    __m256d r[4];
    for (int i = 0; i < 4; ++i) r[i] = i < rows ? _mm256_loadu_pd(src + (g + i) * ld + k) : _mm256_setzero_pd();
    transpose4x4(r);
    for (int kk = 0; kk < 4; ++kk) {
      double* d = dst + (k + kk) * MR + g;
      if (rows == 4) _mm256_storeu_pd(d, r[kk]);
      else _mm_storeu_pd(d, _mm256_castpd256_pd128(r[kk]));
    }
  };
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8)
    for (int g = 0; g < MR; g += 4) block(k, g), block(k + 4, g);
  for (; k + 4 <= kc; k += 4)
    for (int g = 0; g < MR; g += 4) block(k, g);
  for (; k < kc; ++k)
    for (int i = 0; i < MR; ++i) dst[k * MR + i] = src[i * ld + k];
}

}  // namespace

const Kernels& gemm_kernels_avx2() {
  static const Tile<float> tiles_s[] = {{kAvx2Float, &ukernel_avx2<float>, &pack_a_rows_s<6>, &pack_b_rows_s<16>}};
  static const Tile<double> tiles_d[] = {{kAvx2Double, &ukernel_avx2<double>, &pack_a_rows_d<6>, &pack_b_rows_d<8>}};
  static const Kernels k{"avx2", make_kernel_set<float>(tiles_s, kAvx2FloatClasses, &avx2::gemm_small<float>),
                         make_kernel_set<double>(tiles_d, kAvx2DoubleClasses, &avx2::gemm_small<double>)};
  static_assert(kAvx2Float.MR == 6 && kAvx2Float.NR == 16 && kAvx2Double.MR == 6 && kAvx2Double.NR == 8);
  return k;
}

template <>
PackRows<float> avx2_pack_a_rows<float>(int64_t w) {
  return w == 6 ? &pack_a_rows_s<6> : w == 8 ? &pack_a_rows_s<8> : w == 12 ? &pack_a_rows_s<12>
       : w == 14 ? &pack_a_rows_s<14> : w == 16 ? &pack_a_rows_s<16> : nullptr;
}
template <>
PackRows<float> avx2_pack_b_rows<float>(int64_t w) {
  return w == 16 ? &pack_b_rows_s<16> : w == 32 ? &pack_b_rows_s<32> : w == 48 ? &pack_b_rows_s<48> : nullptr;
}
template <>
PackRows<double> avx2_pack_a_rows<double>(int64_t w) {
  return w == 6 ? &pack_a_rows_d<6> : w == 8 ? &pack_a_rows_d<8> : w == 12 ? &pack_a_rows_d<12>
       : w == 14 ? &pack_a_rows_d<14> : w == 16 ? &pack_a_rows_d<16> : nullptr;
}
template <>
PackRows<double> avx2_pack_b_rows<double>(int64_t w) {
  return w == 8 ? &pack_b_rows_d<8> : w == 16 ? &pack_b_rows_d<16> : w == 24 ? &pack_b_rows_d<24> : nullptr;
}

}  // namespace hddp::detail
