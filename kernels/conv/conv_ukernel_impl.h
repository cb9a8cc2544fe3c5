// The batch-reduce micro-kernel of conv_ukernel.h over a vector type V (no include guard: each
// instruction set's file includes it once, after defining V):
//   V::R, V::L, zero(), loadu(p), bcast(p), fma(a, b, c), add(a, b), relu(a), store_n(p, r, n)
//   and load_n(p, n) (the first n lanes, 0 < n <= L, others neither read nor written).
// Loops over i and v are unrolled (MR and NV are template arguments), so the accumulators stay in
// registers over the whole batch of products.
#include <array>
#include <iterator>
#include <string_view>
#include <utility>

namespace hddp::detail {
namespace {

template <int MR, int NV, int Order>
void brgemm(const BrgemmCall& c) {
  using R = typename V::R;
  constexpr int L = V::L;
  R acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = V::zero();
  for (int64_t t = 0; t < c.n; ++t) {
    const float* a = c.a[t];
    const float* b = c.b[t];
    const int64_t K = c.k[t];
    for (int64_t p = 0; p < K; ++p) {
      R bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = V::loadu(b + p * c.ldb + v * L);
      const float* ap = Order == kAlongP ? a + p : a + p * c.csa;
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const R ai = V::bcast(Order == kAlongP ? ap + i * c.rsa : Order == kAlongI ? ap + i : ap + c.off[i]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] = V::fma(ai, bv[v], acc[i][v]);
      }
    }
  }
  const int last = int(c.N - (NV - 1) * L);  // lanes of the last vector stored
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) {
      float* cp = c.c + i * c.ldc + v * L;
      const int n = v == NV - 1 ? last : L;
      R r = acc[i][v];
      if (c.accumulate) r = V::add(r, V::load_n(cp, n));
      if (c.bias) r = V::add(r, V::loadu(c.bias + v * L));
      if (c.relu) r = V::relu(r);
      V::store_n(cp, r, n);
    }
}

// The kernels of one row of kConvBlocking, Row its index: only the (MR, NV) pairs the row has are
// compiled (every MR up to its largest: rows split into tiles of nearly equal size).
template <bool On, int MR, int NV, int Order>
constexpr BrgemmKernel pick() {
  if constexpr (On) return &brgemm<MR, NV, Order>;
  else return nullptr;
}

template <int Row, int NV, int Order, int... I>
void fill_row(BrgemmKernel* row, std::integer_sequence<int, I...>) {
  ((row[I] = pick<(I + 1 <= kConvBlocking[Row].mr[NV - 1]), I + 1, NV, Order>()), ...);
}

template <int Row, int NV, int Order>
void fill_nv(BrgemmKernel* row) {
  if constexpr (NV <= kConvBlocking[Row].nv) fill_row<Row, NV, Order>(row, std::make_integer_sequence<int, kConvMaxMR>{});
}

template <int Row, int Order, int... V_>
void fill_order(ConvKernels& k, std::integer_sequence<int, V_...>) {
  (fill_nv<Row, V_ + 1, Order>(k.kernel[Order][V_]), ...);
}

constexpr int row_of(std::string_view isa) {
  for (int i = 0; i < int(std::size(kConvBlocking)); ++i)
    if (kConvBlocking[i].isa == isa) return i;
  return -1;
}

template <int Row>
ConvKernels make_kernels() {
  static_assert(Row >= 0, "no row of kConvBlocking for this instruction set");
  ConvKernels k{};
  k.blocking = &kConvBlocking[Row];
  fill_order<Row, kAlongP>(k, std::make_integer_sequence<int, kConvMaxNV>{});
  fill_order<Row, kAlongI>(k, std::make_integer_sequence<int, kConvMaxNV>{});
  fill_order<Row, kRowOffsets>(k, std::make_integer_sequence<int, kConvMaxNV>{});
  return k;
}

}  // namespace
}  // namespace hddp::detail
