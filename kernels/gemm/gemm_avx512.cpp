// AVX-512F micro-kernels: MR rows x NR/16 (float) or NR/8 (double) zmm registers, one per tile
// of gemm_blocking.h (sgemm 12x32 general, 8x32 narrow, 8x48 thin; dgemm 14x16, 8x16, 8x24), and
// the direct path for tiny products (gemm_small.h) on 512-bit registers.
// The only file of hddp built with -mavx512f; it is called only after the CPU was checked
// (gemm_kernels.cpp). The packers are the AVX2 ones (every AVX-512 CPU has AVX2): they are
// memory-bound.
//
// Register use per micro-tile: MR x NV accumulators (24 for 12x32, 28 for 14x16), NV zmm for
// the current row of the B micro-panel, 1 for the broadcast element of A (of 32 zmm registers).
// Prefetches (BLIS skx does the same): the C tile before the k loop, so its rows (each on its
// own page for large ldc) arrive while the FMAs run; the A micro-panel, which streams from L2,
// kPrefetchA iterations ahead. The B micro-panel is reused from L1 across loop 1.
#include <immintrin.h>

#include <array>
#include <utility>

#include <hddp/kernels/gemm/gemm_ukernel.h>

#define HDDP_ISA avx512
#define HDDP_SMALL_VEC_BYTES 64
#include <hddp/kernels/gemm/gemm_small.h>

namespace hddp::detail {
namespace {

template <class T>
struct Vec;
template <>
struct Vec<float> {
  using R = __m512;
  static R zero() { return _mm512_setzero_ps(); }
  static R loadu(const float* p) { return _mm512_loadu_ps(p); }
  static R bcast(const float* p) { return _mm512_set1_ps(*p); }
  static R set1(float x) { return _mm512_set1_ps(x); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static void storeu(float* p, R x) { _mm512_storeu_ps(p, x); }
};
template <>
struct Vec<double> {
  using R = __m512d;
  static R zero() { return _mm512_setzero_pd(); }
  static R loadu(const double* p) { return _mm512_loadu_pd(p); }
  static R bcast(const double* p) { return _mm512_set1_pd(*p); }
  static R set1(double x) { return _mm512_set1_pd(x); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_pd(a, b, c); }
  static R mul(R a, R b) { return _mm512_mul_pd(a, b); }
  static void storeu(double* p, R x) { _mm512_storeu_pd(p, x); }
};

constexpr int kPrefetchA = 16;  // k iterations: 16 x MR x 4 B = 768 B ahead for float (packed A)
constexpr int kPrefetchB = 8;   // k iterations ahead for a B read in place (rows ldb apart)

// How the micro-kernel reads A: a packed micro-panel (rsa 1, csa MR: constant offsets, as
// before operands could be read in place), A^T in place (rsa 1, csa = lda) or A's rows in place
// (rsa = lda, csa 1).
enum class ARead { Packed, Columns, Rows };

// MR rows x NV registers of L lanes; the loops over i and v are fully unrolled, so acc stays
// in registers (checked with objdump: no stack traffic in the k loop). B_PACKED: rsb == NR
// (a packed micro-panel, or B in place with ldb == NR); else B is read in place and its rows to
// come are prefetched (each row on lines of its own). Each way of reading A and B is a function
// of its own: the packed one compiles to the same loop as before operands could be read in place.
template <class T, int MR, int NV, ARead AR, bool B_PACKED>
void ukernel_variant(int64_t k, const T* a, int64_t rsa, int64_t csa, const T* b, int64_t rsb, T alpha, T beta, T* c,
                     int64_t ldc) {
  using V = Vec<T>;
  using R = typename V::R;
  constexpr int L = 64 / sizeof(T), NR = NV * L;
  const int64_t ra = AR == ARead::Rows ? rsa : 1, ca = AR == ARead::Packed ? MR : AR == ARead::Columns ? csa : 1;
  const int64_t rb = B_PACKED ? NR : rsb;
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {  // first and last cache line of each row of the tile
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + NR - 1), _MM_HINT_T0);
  }
  R acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = V::zero();
#pragma GCC unroll 4
  for (int64_t p = 0; p < k; ++p) {
    _mm_prefetch(reinterpret_cast<const char*>(a + kPrefetchA * ca), _MM_HINT_T0);
    if constexpr (!B_PACKED)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetchB * rb + v * L), _MM_HINT_T0);
    R bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = V::loadu(b + v * L);  // B in place with ldb == NR: any alignment
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const R ai = V::bcast(a + i * ra);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = V::fma(ai, bv[v], acc[i][v]);
    }
    a += ca;
    b += rb;
  }

  const R va = V::set1(alpha);
  if (beta == T(0)) {  // overwrite: C is never read, so NaN/Inf in C do not propagate
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) V::storeu(c + i * ldc + v * L, V::mul(va, acc[i][v]));
  } else {
    const R vb = V::set1(beta);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        T* cij = c + i * ldc + v * L;
        V::storeu(cij, V::fma(va, acc[i][v], V::mul(vb, V::loadu(cij))));
      }
  }
}

template <class T, int MR, int NV>
void ukernel_avx512(int64_t k, const T* a, int64_t rsa, int64_t csa, const T* b, int64_t rsb, T alpha, T beta, T* c,
                    int64_t ldc) {
  constexpr int NR = NV * 64 / int(sizeof(T));
  auto run = [&]<ARead AR>() {
    if (rsb == NR) return ukernel_variant<T, MR, NV, AR, true>(k, a, rsa, csa, b, rsb, alpha, beta, c, ldc);
    return ukernel_variant<T, MR, NV, AR, false>(k, a, rsa, csa, b, rsb, alpha, beta, c, ldc);
  };
  if (rsa != 1) return run.template operator()<ARead::Rows>();
  if (csa == MR) return run.template operator()<ARead::Packed>();
  return run.template operator()<ARead::Columns>();
}

// The tiles of a row of gemm_blocking.h (kAvx512FloatTiles, kAvx512DoubleTiles), each with its
// kernel and the AVX2 transposing packers for its widths.
template <class T, const auto& Rows, size_t... I>
constexpr std::array<Tile<T>, sizeof...(I)> make_tiles(std::index_sequence<I...>) {
  constexpr int L = 64 / sizeof(T);
  static_assert(((Rows[I].NR % L == 0) && ...), "NR: whole registers");
  return {Tile<T>{Rows[I], &ukernel_avx512<T, Rows[I].MR, Rows[I].NR / L>, avx2_pack_a_rows<T>(Rows[I].MR),
                  avx2_pack_b_rows<T>(Rows[I].NR)}...};
}
template <class T, const auto& Rows>
std::span<const Tile<T>> tiles() {
  static const auto t = make_tiles<T, Rows>(std::make_index_sequence<std::size(Rows)>());
  return t;
}

}  // namespace

const Kernels& gemm_kernels_avx512() {
  static const Kernels k{"avx512",
                         make_kernel_set(tiles<float, kAvx512FloatTiles>(), kAvx512FloatClasses, &avx512::gemm_small<float>),
                         make_kernel_set(tiles<double, kAvx512DoubleTiles>(), kAvx512DoubleClasses,
                                         &avx512::gemm_small<double>)};
  return k;
}

}  // namespace hddp::detail
