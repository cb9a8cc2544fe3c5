// The direct convolution's loops around the batch-reduce micro-kernel (conv.h, conv_ukernel.h):
// the padded copies, the weights re-blocked, then per pass the loops
//   forward / input gradient:  image b  x  output row  x  channel block  |  tiles along the row
//   weight gradient:           image chunk  x  kernel row  x  (rows, channel block) tile
//                              |  the chunk's images and output rows, as one batch of products
// one parallel region each (static schedule, the work items depend on the shapes alone).
#include <hddp/kernels/conv.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <vector>

#include <hddp/kernels/bf16.h>
#include <hddp/kernels/check.h>
#include <hddp/kernels/conv_ukernel.h>
#include <hddp/kernels/cpu_isa.h>
#include <hddp/kernels/elementwise.h>  // kParallelMin
#include <hddp/kernels/progress.h>

#include <omp.h>

namespace hddp {

namespace detail {

const ConvKernels& conv_kernels(const std::string& name) {
  HDDP_CHECK_ARG(isa_unsupported_reason(name, "HDDP_CONV_KERNEL").empty(),
                 "HDDP_CONV_KERNEL: " << isa_unsupported_reason(name, "HDDP_CONV_KERNEL"));
  return name == "avx512" ? conv_kernels_avx512() : name == "avx2" ? conv_kernels_avx2() : conv_kernels_portable();
}

namespace {
std::atomic<const ConvKernels*> g_kernels{nullptr};
}

const ConvKernels& conv_kernels() {
  const ConvKernels* k = g_kernels.load(std::memory_order_acquire);
  if (!k) {
    k = &conv_kernels(isa_choice("HDDP_CONV_KERNEL"));
    g_kernels.store(k, std::memory_order_release);
  }
  return *k;
}

void conv_use_kernels(const std::string& name) { g_kernels.store(&conv_kernels(name), std::memory_order_release); }

}  // namespace detail

namespace {

using detail::BrgemmCall;
using detail::ConvKernels;

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// The progress hook (progress.h), from the team's thread 0 (the caller's thread) after each
// work item of a loop below (a row of tiles: tens of microseconds), so that communication
// started before the call (a gradient bucket's allreduce) moves while the convolution runs.
inline void poll_from_master() {
  if (omp_get_thread_num() == 0) progress_poll();
}

// The micro-tile of an M x N output: the NV and MR keeping the most accumulators busy over the
// tiles M and N really split into (M in equal tiles of at most MR rows, N in blocks of NV
// vectors, the last block narrower).
struct TileChoice {
  int nv = 1, mr = 1;
  int64_t mtiles = 1, nblocks = 1;
  int64_t m_begin(int64_t M, int64_t u) const { return M * u / mtiles; }
};
TileChoice choose_tile(int64_t M, int64_t N, const detail::ConvBlocking& b) {
  TileChoice best;
  double best_score = -1;
  for (int nv = 1; nv <= b.nv; ++nv) {
    const int64_t mtiles = (M + b.mr[nv - 1] - 1) / b.mr[nv - 1];
    const int64_t nblocks = (N + nv * b.L - 1) / (nv * b.L);
    const double rows = double(M) / double(mtiles), lanes = double(N) / double(nblocks * b.L);
    const double score = rows * lanes;
    if (score > best_score + 1e-9) {
      best_score = score;
      best = {nv, int((M + mtiles - 1) / mtiles), mtiles, nblocks};
    }
  }
  return best;
}

void check_shape(const char* fn, const ConvShape& s) {
  HDDP_CHECK_ARG(s.B >= 0 && s.C > 0 && s.H > 0 && s.W > 0 && s.Cout > 0 && conv_direct_supported(s.k, 1, s.pad) &&
                     s.k <= s.H + 2 * s.pad && s.k <= s.W + 2 * s.pad,
                 fn << ": needs B >= 0, C, H, W, Cout > 0, 0 <= pad < k <= 16 and the kernel inside the padded "
                       "input; got B="
                    << s.B << " C=" << s.C << " H=" << s.H << " W=" << s.W << " Cout=" << s.Cout << " k=" << s.k
                    << " pad=" << s.pad);
}

// Xp (B, H + 2 pad, W + 2 pad, C): X with `pad` zero rows and columns on every side, from NHWC
// or NCHW. xp_size: its values; xp_row: where input row ih (-pad <= ih < H + pad) of image b starts.
int64_t xp_size(const ConvShape& s) { return s.B * (s.H + 2 * s.pad) * (s.W + 2 * s.pad) * s.C; }
inline float* xp_row(float* xp, const ConvShape& s, int64_t b, int64_t ih) {
  return xp + ((b * (s.H + 2 * s.pad) + ih + s.pad) * (s.W + 2 * s.pad)) * s.C;
}
int64_t dyp_size(const ConvShape& s, int64_t Np) { return s.B * s.OH() * (s.OW() + 2 * (s.k - 1 - s.pad)) * Np; }
// The float scratch of each pass; the bf16 copies follow it (bf16_area).
int64_t forward_floats(const ConvShape& s, int64_t Np) {
  return xp_size(s) + s.k * s.k * s.C * Np + Np + s.B * s.OH() * s.OW() * s.Cout;
}
int64_t backward_floats(const ConvShape& s, int64_t Np, int64_t Cp) {
  const int64_t chunks = std::min(s.B, detail::kConvWeightChunks);
  return xp_size(s) + dyp_size(s, Np) + s.k * s.k * Np * Cp + chunks * (s.k * s.k * s.C * Np + Np) +
         s.B * s.H * s.W * s.C;
}
uint16_t* bf16_area(const ConvShape& s, float* scratch) {
  const int64_t Np = round_up(s.Cout, detail::conv_kernels().blocking->L);
  return reinterpret_cast<uint16_t*>(scratch + forward_floats(s, Np));
}

// bf16 (conv.h), per row while it is in cache: round rounds it in place; xh, where given, gets
// its bf16 copy at the same offsets.
void pad_input(const ConvShape& s, ImageLayout in, const float* X, float* xp, bool round = false,
               uint16_t* xh = nullptr) {
  const int64_t Wp = s.W + 2 * s.pad, C = s.C;
#pragma omp parallel for collapse(2) schedule(static) if (s.B * s.H * Wp * C > kParallelMin)
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t ih = -s.pad; ih < s.H + s.pad; ++ih) {
      float* row = xp_row(xp, s, b, ih);
      if (ih < 0 || ih >= s.H) {
        std::fill(row, row + Wp * C, 0.0f);
        continue;
      }
      std::fill(row, row + s.pad * C, 0.0f);
      std::fill(row + (s.pad + s.W) * C, row + Wp * C, 0.0f);
      float* dst = row + s.pad * C;
      if (in == ImageLayout::NHWC || C == 1) {
        std::memcpy(dst, X + (b * s.H + ih) * s.W * C, sizeof(float) * size_t(s.W * C));
      } else {
        const float* src = X + b * C * s.H * s.W + ih * s.W;
        for (int64_t iw = 0; iw < s.W; ++iw)
          for (int64_t c = 0; c < C; ++c) dst[iw * C + c] = src[c * s.H * s.W + iw];
      }
      if (round) round_bf16(s.W * C, dst, dst);
      if (xh) to_bf16(Wp * C, row, reinterpret_cast<bf16*>(xh + (row - xp)));
    }
  if (xh)  // the rows of zeros
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t ih : {int64_t(0), s.H})
        for (int64_t r = 0; r < s.pad; ++r) {
          float* row = xp_row(xp, s, b, ih == 0 ? r - s.pad : s.H + r);
          std::fill(xh + (row - xp), xh + (row - xp) + Wp * C, uint16_t(0));
        }
}

// NHWC (B, P, C) -> NCHW (B, C, P).
void to_nchw(int64_t B, int64_t P, int64_t C, const float* src, float* dst) {
#pragma omp parallel for collapse(2) schedule(static) if (B * P * C > kParallelMin)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < P; ++p) dst[(b * C + c) * P + p] = src[(b * P + p) * C + c];
}

// d = (y > 0 ? g : 0), n values; both read unconditionally and restrict, so that it vectorises.
__attribute__((noinline)) void masked_copy(int64_t n, const float* __restrict g, const float* __restrict y,
                                           float* __restrict d) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = g[i];
    d[i] = y[i] > 0.0f ? v : 0.0f;
  }
}

// out[i] += sum over r of rows[r * n + i], the rows in order (the bias gradient's sums).
__attribute__((noinline)) void add_rows(int64_t count, int64_t n, const float* __restrict rows,
                                        float* __restrict out) {
  for (int64_t r = 0; r < count; ++r)
    for (int64_t i = 0; i < n; ++i) out[i] += rows[r * n + i];
}

// bf16 products (conv.h): the bf16 micro-kernels where the chosen set is avx512 and the CPU has
// AVX512_BF16, else nullptr (the float kernels then read operands rounded to bf16 in place).
const detail::ConvKernels16* bf16_kernels() {
  static const detail::ConvKernels16* k = detail::conv_kernels().blocking->isa == "avx512" &&
                                                  detail::cpu_has_avx512_bf16()
                                              ? &detail::conv_kernels_avx512bf16()
                                              : nullptr;
  return k;
}

// wh[(r / 2) * 2 cols + 2 c + r % 2] = bf16(w[r * cols + c]) for an even number of rows: each
// pair of k rows interleaved, the B layout of the bf16 micro-kernel.
void to_pairs(int64_t rows, int64_t cols, const float* w, uint16_t* wh) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelMin)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) wh[(r / 2) * 2 * cols + 2 * c + r % 2] = to_bf16(w[r * cols + c]).bits;
}

// The bf16 operands of a pass: A's rows at the same offsets in xh as in the float xf, B's rows
// (ldb floats each; every product starts at an even row) paired in wh.
struct Bf16Operands {
  const float* xf = nullptr;
  const uint16_t* xh = nullptr;
  const float* wf = nullptr;
  const uint16_t* wh = nullptr;
  int64_t ldb = 0;
};

// One float call run as its bf16 twin.
void run_bf16(const detail::ConvKernels16& k16, const BrgemmCall& c, const Bf16Operands& o, int nvb, int64_t m) {
  constexpr int kMax = 16;
  const uint16_t* a[kMax];
  const uint16_t* b[kMax];
  int64_t kk[kMax];
  for (int64_t t = 0; t < c.n; ++t) {
    const int64_t off = c.b[t] - o.wf, row = off / o.ldb, col = off % o.ldb;
    a[t] = o.xh + (c.a[t] - o.xf);
    b[t] = o.wh + (row / 2) * 2 * o.ldb + 2 * col;
    kk[t] = c.k[t] / 2;
  }
  const detail::BrgemmCall16 h{c.n, a, b, kk, c.rsa, 2 * o.ldb, c.c, c.ldc, c.N, c.accumulate, c.bias, c.relu};
  k16.kernel[nvb - 1][m - 1](h);
}

// The bf16 kernels for a pass whose products have K = k*C (or k*Np) values, where they run
// (K even: the pairs never straddle two products); else nullptr.
const detail::ConvKernels16* bf16_kernels_for(int64_t K) { return K % 2 == 0 ? bf16_kernels() : nullptr; }

// Kernel rows of one output row (forward) or input row (input gradient) that fall inside the
// image: at most 16 products per batch.
constexpr int kMaxK = 16;

void check_pool(const char* fn, const ConvShape& s, ImageLayout out, int64_t pool, const void* argmax) {
  HDDP_CHECK_ARG(pool == 0 || (pool > 0 && pool * pool <= 256 && pool <= s.OH() && pool <= s.OW() &&
                               out == ImageLayout::NHWC && argmax),
                 fn << ": fused pooling needs 0 < pool, pool*pool <= 256, pool <= OH, OW, NHWC output and an "
                       "argmax buffer; got pool="
                    << pool << " OH=" << s.OH() << " OW=" << s.OW());
}

// best[c], at[c] = x[c], pos where x[c] > best[c] or x[c] is NaN (PyTorch's MaxPool2d rule).
__attribute__((noinline)) void take_max(int64_t n, const float* __restrict x, float* __restrict best,
                                        float* __restrict at, float pos) {
  for (int64_t c = 0; c < n; ++c) {
    const float v = x[c];
    const bool take = (v > best[c]) | (v != v);
    best[c] = take ? v : best[c];
    at[c] = take ? pos : at[c];
  }
}

// d[c] = g[c] where at[c] == pos and y[c] > 0 (or no y), else 0: the pooled gradient routed
// back to window position pos.
__attribute__((noinline)) void route(int64_t n, const float* __restrict at, float pos, const float* __restrict g,
                                     const float* __restrict y, float* __restrict d) {
  if (y) {
    for (int64_t c = 0; c < n; ++c) {
      const float v = g[c], yv = y[c];
      d[c] = (at[c] == pos) & (yv > 0.0f) ? v : 0.0f;
    }
  } else {
    for (int64_t c = 0; c < n; ++c) {
      const float v = g[c];
      d[c] = at[c] == pos ? v : 0.0f;
    }
  }
}

// Re-blocked weights Wr[ki][kj][ci][co] (co to Np) and the bias to Np.
void reblock_forward(const ConvShape& s, int64_t Np, const float* Wt, const float* b, float* wr, float* bp) {
  for (int64_t ki = 0; ki < s.k; ++ki)
    for (int64_t kj = 0; kj < s.k; ++kj)
      for (int64_t ci = 0; ci < s.C; ++ci) {
        float* r = wr + ((ki * s.k + kj) * s.C + ci) * Np;
        for (int64_t co = 0; co < Np; ++co) r[co] = co < s.Cout ? Wt[((co * s.C + ci) * s.k + ki) * s.k + kj] : 0.0f;
      }
  for (int64_t co = 0; co < Np; ++co) bp[co] = b && co < s.Cout ? b[co] : 0.0f;
}

// The forward's operands: the padded input and the re-blocked weights (float), and in bf16 either
// their bf16 copies (the bf16 kernels run: the result's xh set) or the float ones rounded.
Bf16Operands prepare_forward(const ConvShape& s, ImageLayout in, const float* X, const float* Wt, const float* b,
                             float* xp, float* wr, float* bp, int64_t Np, bool bf16, float* scratch) {
  const int64_t K = s.k * s.C, rows = s.k * K;
  const bool k16 = bf16 && bf16_kernels_for(K);
  uint16_t* xh = k16 ? bf16_area(s, scratch) : nullptr;
  uint16_t* wh = k16 ? xh + xp_size(s) + 2 : nullptr;
  pad_input(s, in, X, xp, bf16 && !k16, xh);
  reblock_forward(s, Np, Wt, b, wr, bp);
  if (k16) to_pairs(rows, Np, wr, wh);
  else if (bf16) round_bf16(rows * Np, wr, wr);
  return k16 ? Bf16Operands{xp, xh, wr, wh, Np} : Bf16Operands{};
}

// The forward with MaxPool2d(pool) in its store: per image, pooled row and channel block, the
// pool convolution rows into a buffer of this thread (L1-sized: pool x OW x NV*L floats), then
// their windows' maxima and positions to Y and argmax.
void forward_pooled(const ConvShape& s, ImageLayout in, const float* X, const float* Wt, const float* b, bool relu,
                    float* Y, float* scratch, int64_t pool, uint8_t* argmax, bool bf16) {
  const ConvKernels& kern = detail::conv_kernels();
  const int64_t L = kern.blocking->L, Np = round_up(s.Cout, L), OW = s.OW();
  const int64_t C = s.C, k = s.k, Cout = s.Cout, PH = s.OH() / pool, PW = OW / pool;
  float* xp = scratch;
  float* wr = xp + xp_size(s);
  float* bp = wr + k * k * C * Np;
  const Bf16Operands h = prepare_forward(s, in, X, Wt, b, xp, wr, bp, Np, bf16, scratch);
  const detail::ConvKernels16* k16 = h.xh ? bf16_kernels() : nullptr;
  const TileChoice t = choose_tile(OW, Cout, *kern.blocking);
  const int64_t ldc = t.nv * L;
#pragma omp parallel if (s.B * s.OH() * OW * Cout * k * k * C > kParallelMin)
  {
    std::vector<float> rows(static_cast<size_t>(pool * OW * ldc)), best(static_cast<size_t>(ldc)),
        at(static_cast<size_t>(ldc));
#pragma omp for collapse(3) schedule(static)
    for (int64_t bi = 0; bi < s.B; ++bi)
      for (int64_t ph = 0; ph < PH; ++ph)
        for (int64_t j = 0; j < t.nblocks; ++j) {
          const int64_t co0 = j * t.nv * L, N = std::min<int64_t>(t.nv * L, Cout - co0);
          const int nvb = int((N + L - 1) / L);
          for (int64_t r = 0; r < pool; ++r) {
            const int64_t oh = ph * pool + r;
            const float* a[kMaxK];
            const float* bb[kMaxK];
            int64_t kk[kMaxK];
            int64_t n = 0;
            for (int64_t ki = 0; ki < k; ++ki) {
              const int64_t ih = oh + ki - s.pad;
              if (ih < 0 || ih >= s.H) continue;
              a[n] = xp_row(xp, s, bi, ih);
              bb[n] = wr + ki * k * C * Np + co0;
              kk[n] = k * C;
              ++n;
            }
            BrgemmCall call{n, a, bb, kk, C, 1, Np, nullptr, nullptr, ldc, N, false, b ? bp + co0 : nullptr, relu};
            for (int64_t u = 0; u < t.mtiles; ++u) {
              const int64_t ow0 = t.m_begin(OW, u), m = t.m_begin(OW, u + 1) - ow0;
              const float* at_[kMaxK];
              for (int64_t i = 0; i < n; ++i) at_[i] = a[i] + ow0 * C;
              call.a = at_;
              call.c = rows.data() + (r * OW + ow0) * ldc;
              if (k16) run_bf16(*k16, call, h, nvb, m);
              else kern.kernel[detail::kAlongP][nvb - 1][m - 1](call);
            }
          }
          for (int64_t pw = 0; pw < PW; ++pw) {
            std::fill(best.begin(), best.begin() + N, -std::numeric_limits<float>::infinity());
            std::fill(at.begin(), at.begin() + N, 0.0f);
            for (int64_t w = 0; w < pool * pool; ++w)
              take_max(N, rows.data() + ((w / pool) * OW + pw * pool + w % pool) * ldc, best.data(), at.data(),
                       float(w));
            const int64_t o = ((bi * PH + ph) * PW + pw) * Cout + co0;
            std::copy(best.begin(), best.begin() + N, Y + o);
            for (int64_t c = 0; c < N; ++c) argmax[o + c] = uint8_t(at[size_t(c)]);
          }
          poll_from_master();
        }
  }
}

}  // namespace

bool conv_direct_supported(int64_t k, int64_t stride, int64_t pad) {
  return stride == 1 && k >= 1 && k <= kMaxK && pad >= 0 && pad < k;
}

std::string conv_kernel_name() { return std::string(detail::conv_kernels().blocking->isa); }

int64_t conv_direct_forward_scratch(const ConvShape& s) {
  const int64_t L = detail::conv_kernels().blocking->L, Np = round_up(s.Cout, L);
  // The float regions, then the bf16 copies of the padded input and the weights (bf16_area).
  return forward_floats(s, Np) + (xp_size(s) + 2 + s.k * s.k * s.C * Np + 1) / 2 + 1;
}

int64_t conv_direct_backward_scratch(const ConvShape& s) {
  const int64_t L = detail::conv_kernels().blocking->L, Np = round_up(s.Cout, L), Cp = round_up(s.C, L);
  // The float regions, then the bf16 copies of the padded dY and the reversed weights.
  return backward_floats(s, Np, Cp) + (dyp_size(s, Np) + 2 + s.k * s.k * Np * Cp + 1) / 2 + 1;
}

void conv_direct_forward(const ConvShape& s, ImageLayout in, ImageLayout out, const float* X, const float* Wt,
                         const float* b, bool relu, float* Y, float* scratch, int64_t pool, uint8_t* argmax,
                         bool bf16) {
  check_shape("conv_direct_forward", s);
  HDDP_CHECK_ARG(X && Wt && Y && scratch, "conv_direct_forward: X, Wt, Y and scratch must not be null");
  check_pool("conv_direct_forward", s, out, pool, argmax);
  if (pool > 0) return forward_pooled(s, in, X, Wt, b, relu, Y, scratch, pool, argmax, bf16);
  const ConvKernels& kern = detail::conv_kernels();
  const int64_t L = kern.blocking->L, Np = round_up(s.Cout, L), OH = s.OH(), OW = s.OW();
  const int64_t C = s.C, k = s.k, Cout = s.Cout;
  float* xp = scratch;
  float* wr = xp + xp_size(s);  // Wr[ki][kj][ci][co], co padded to Np
  float* bp = wr + k * k * C * Np;
  float* yt = bp + Np;  // the NHWC output when Y is NCHW
  const Bf16Operands h = prepare_forward(s, in, X, Wt, b, xp, wr, bp, Np, bf16, scratch);
  const detail::ConvKernels16* k16 = h.xh ? bf16_kernels() : nullptr;
  float* yo = out == ImageLayout::NHWC ? Y : yt;
  const TileChoice t = choose_tile(OW, Cout, *kern.blocking);
  // Loop 3: images, loop 2: output rows, loop 1: channel blocks; then the row's tiles.
#pragma omp parallel for collapse(3) schedule(static) if (s.B * OH * OW * Cout * k * k * C > kParallelMin)
  for (int64_t bi = 0; bi < s.B; ++bi)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t j = 0; j < t.nblocks; ++j) {
        const int64_t co0 = j * t.nv * L, N = std::min<int64_t>(t.nv * L, Cout - co0);
        const float* a[kMaxK];
        const float* bb[kMaxK];
        int64_t kk[kMaxK];
        int64_t n = 0;
        for (int64_t ki = 0; ki < k; ++ki) {
          const int64_t ih = oh + ki - s.pad;
          if (ih < 0 || ih >= s.H) continue;
          a[n] = xp_row(xp, s, bi, ih);
          bb[n] = wr + ki * k * C * Np + co0;
          kk[n] = k * C;
          ++n;
        }
        BrgemmCall call{n, a, bb, kk, C, 1, Np, nullptr, nullptr, Cout, N, false, b ? bp + co0 : nullptr, relu};
        const int nvb = int((N + L - 1) / L);
        for (int64_t u = 0; u < t.mtiles; ++u) {
          const int64_t ow0 = t.m_begin(OW, u), m = t.m_begin(OW, u + 1) - ow0;
          const float* at[kMaxK];
          for (int64_t i = 0; i < n; ++i) at[i] = a[i] + ow0 * C;
          call.a = at;
          call.c = yo + ((bi * OH + oh) * OW + ow0) * Cout + co0;
          if (k16) run_bf16(*k16, call, h, nvb, m);
          else kern.kernel[detail::kAlongP][nvb - 1][m - 1](call);
        }
        poll_from_master();
      }
  if (out == ImageLayout::NCHW) to_nchw(s.B, OH * OW, Cout, yt, Y);
}

void conv_direct_backward(const ConvShape& s, ImageLayout in, ImageLayout out, const float* X, const float* Wt,
                          const float* dY, const float* y, float* dX, float* dW, float* db, bool accumulate,
                          float* scratch, int64_t pool, const uint8_t* argmax, bool bf16) {
  check_shape("conv_direct_backward", s);
  HDDP_CHECK_ARG(X && Wt && dY && dW && scratch, "conv_direct_backward: X, Wt, dY, dW and scratch must not be null");
  check_pool("conv_direct_backward", s, out, pool, argmax);
  const ConvKernels& kern = detail::conv_kernels();
  const int64_t L = kern.blocking->L, Np = round_up(s.Cout, L), Cp = round_up(s.C, L);
  const int64_t C = s.C, k = s.k, Cout = s.Cout, H = s.H, Wd = s.W, OH = s.OH(), OW = s.OW();
  const int64_t Wp = Wd + 2 * s.pad, q = k - 1 - s.pad, OWq = OW + 2 * q;
  const int64_t chunks = std::min(s.B, detail::kConvWeightChunks), part_size = k * k * C * Np + Np;
  float* xp = scratch;
  float* dyp = xp + xp_size(s);           // (B, OH, OWq, Np)
  float* wd = dyp + s.B * OH * OWq * Np;  // Wd[ki][kj'][co][ci], co to Np, ci to Cp
  float* part = wd + k * k * Np * Cp;     // per chunk: dW[ki][kj][ci][co] (Np), then db (Np)
  float* dxt = part + chunks * part_size;  // the NHWC input gradient when dX is NCHW
  if (s.B == 0) {
    if (!accumulate) {
      std::fill(dW, dW + Cout * C * k * k, 0.0f);
      if (db) std::fill(db, db + Cout, 0.0f);
    }
    return;
  }
  // bf16: every product reads bf16-rounded operands: the weight gradient's rounded in place (its
  // sums stay float), the input gradient's also copied to bf16 where the bf16 kernels run.
  const detail::ConvKernels16* k16 = bf16 && dX ? bf16_kernels_for(k * Np) : nullptr;
  uint16_t* dyh = k16 ? reinterpret_cast<uint16_t*>(scratch + backward_floats(s, Np, Cp)) : nullptr;
  uint16_t* wdh = k16 ? dyh + dyp_size(s, Np) + 2 : nullptr;
  pad_input(s, in, X, xp, bf16);
  // dYp: dY (masked by y > 0 where ReLU was fused; routed through argmax where pooling was),
  // q zero columns either side, channels to Np.
  const int64_t PH = pool > 0 ? OH / pool : 0, PW = pool > 0 ? OW / pool : 0;
  // bf16, per row while it is in cache: rounded, and copied to dyh where the bf16 kernels run.
  auto dy_row_done = [&](float* row) {
    if (bf16) round_bf16(OWq * Np, row, row);
    if (dyh) to_bf16(OWq * Np, row, reinterpret_cast<hddp::bf16*>(dyh + (row - dyp)));
  };
#pragma omp parallel for collapse(2) schedule(static) if (s.B * OH * OWq * Np > kParallelMin)
  for (int64_t bi = 0; bi < s.B; ++bi)
    for (int64_t oh = 0; oh < OH; ++oh) {
      float* row = dyp + (bi * OH + oh) * OWq * Np;
      std::fill(row, row + q * Np, 0.0f);
      std::fill(row + (q + OW) * Np, row + OWq * Np, 0.0f);
      if (pool > 0) {
        float at[256];  // the argmax of a pooled pixel's channels, widened
        for (int64_t ow = 0; ow < OW; ++ow) {
          float* d = row + (q + ow) * Np;
          std::fill(d + Cout, d + Np, 0.0f);
          if (oh >= PH * pool || ow >= PW * pool) {  // no window covers it
            std::fill(d, d + Cout, 0.0f);
            continue;
          }
          const int64_t o = ((bi * PH + oh / pool) * PW + ow / pool) * Cout;
          const float pos = float((oh % pool) * pool + ow % pool);
          for (int64_t c0 = 0; c0 < Cout; c0 += 256) {
            const int64_t n = std::min<int64_t>(256, Cout - c0);
            for (int64_t c = 0; c < n; ++c) at[c] = float(argmax[o + c0 + c]);
            route(n, at, pos, dY + o + c0, y ? y + o + c0 : nullptr, d + c0);
          }
        }
        dy_row_done(row);
        continue;
      }
      for (int64_t ow = 0; ow < OW; ++ow) {
        float* d = row + (q + ow) * Np;
        if (out == ImageLayout::NHWC) {
          const int64_t at = ((bi * OH + oh) * OW + ow) * Cout;
          if (y) {
            masked_copy(Cout, dY + at, y + at, d);
          } else {
            std::memcpy(d, dY + at, sizeof(float) * size_t(Cout));
          }
        } else {
          for (int64_t co = 0; co < Cout; ++co) {
            const int64_t at = ((bi * Cout + co) * OH + oh) * OW + ow;
            d[co] = y && !(y[at] > 0.0f) ? 0.0f : dY[at];
          }
        }
        std::fill(d + Cout, d + Np, 0.0f);
      }
      dy_row_done(row);
    }

  if (dX) {
    for (int64_t ki = 0; ki < k; ++ki)
      for (int64_t kj = 0; kj < k; ++kj)  // kj here is kj' = k - 1 - kj of the forward
        for (int64_t co = 0; co < Np; ++co) {
          float* r = wd + ((ki * k + kj) * Np + co) * Cp;
          for (int64_t ci = 0; ci < Cp; ++ci)
            r[ci] = co < Cout && ci < C ? Wt[((co * C + ci) * k + ki) * k + (k - 1 - kj)] : 0.0f;
        }
    if (k16) to_pairs(k * k * Np, Cp, wd, wdh);
    else if (bf16) round_bf16(k * k * Np * Cp, wd, wd);
    const Bf16Operands h{dyp, dyh, wd, wdh, Cp};
    float* dxo = in == ImageLayout::NHWC ? dX : dxt;
    const TileChoice t = choose_tile(Wd, C, *kern.blocking);
#pragma omp parallel for collapse(3) schedule(static) if (s.B * H * Wd * C * k * k * Cout > kParallelMin)
    for (int64_t bi = 0; bi < s.B; ++bi)
      for (int64_t ih = 0; ih < H; ++ih)
        for (int64_t j = 0; j < t.nblocks; ++j) {
          const int64_t ci0 = j * t.nv * L, N = std::min<int64_t>(t.nv * L, C - ci0);
          const float* a[kMaxK];
          const float* bb[kMaxK];
          int64_t kk[kMaxK];
          int64_t n = 0;
          for (int64_t ki = 0; ki < k; ++ki) {
            const int64_t oh = ih + s.pad - ki;
            if (oh < 0 || oh >= OH) continue;
            a[n] = dyp + (bi * OH + oh) * OWq * Np;
            bb[n] = wd + ki * k * Np * Cp + ci0;
            kk[n] = k * Np;
            ++n;
          }
          BrgemmCall call{n, a, bb, kk, Np, 1, Cp, nullptr, nullptr, C, N, false, nullptr, false};
          const int nvb = int((N + L - 1) / L);
          for (int64_t u = 0; u < t.mtiles; ++u) {
            const int64_t iw0 = t.m_begin(Wd, u), m = t.m_begin(Wd, u + 1) - iw0;
            const float* at[kMaxK];
            for (int64_t i = 0; i < n; ++i) at[i] = a[i] + iw0 * Np;
            call.a = at;
            call.c = dxo + ((bi * H + ih) * Wd + iw0) * C + ci0;
            if (n == 0) {  // no kernel row reaches this input row: its gradient is 0
              for (int64_t i = 0; i < m; ++i) std::fill(call.c + i * C, call.c + i * C + N, 0.0f);
              continue;
            }
            if (k16) run_bf16(*k16, call, h, nvb, m);
            else kern.kernel[detail::kAlongP][nvb - 1][m - 1](call);
          }
          poll_from_master();
        }
    if (in == ImageLayout::NCHW) to_nchw(s.B, H * Wd, C, dxt, dX);
  }

  // The weight gradient: per chunk of images, dW[ki]((kj, ci), co) over the chunk's output rows,
  // in batches of kBatch rows (a partial sum in registers per batch, added into the chunk's
  // buffer in order). Where all k*k*C taps fit one micro-tile (few input channels: the first
  // layer's k*k = 9), every tap is a row at its own offset in the padded image and each output
  // row is one product; else per kernel row ki, its k*C taps (kj, ci) consecutive.
  constexpr int kBatch = 64;
  const TileChoice t_all = choose_tile(k * k * C, Cout, *kern.blocking);
  const bool all_taps = t_all.mtiles == 1;
  const int64_t M = all_taps ? k * k * C : k * C, krows = all_taps ? 1 : k;
  const TileChoice t = all_taps ? t_all : choose_tile(M, Cout, *kern.blocking);
  const int64_t tiles = t.mtiles * t.nblocks;
  std::vector<int64_t> off(size_t(all_taps ? M : 0));
  for (int64_t m = 0; m < int64_t(off.size()); ++m) off[size_t(m)] = ((m / (k * C)) * Wp + m % (k * C) / C) * C + m % C;
#pragma omp parallel for collapse(3) schedule(static) if (s.B * OH * OW * Cout * k * k * C > kParallelMin)
  for (int64_t ch = 0; ch < chunks; ++ch)
    for (int64_t ki = 0; ki < krows; ++ki)
      for (int64_t u = 0; u < tiles; ++u) {
        const int64_t b0 = s.B * ch / chunks, b1 = s.B * (ch + 1) / chunks;
        const int64_t mu = u / t.nblocks, j = u % t.nblocks;
        const int64_t m0 = t.m_begin(M, mu), m = t.m_begin(M, mu + 1) - m0;
        const int64_t co0 = j * t.nv * L, N = std::min<int64_t>(t.nv * L, Cout - co0);
        float* pc = part + ch * part_size;
        const float* a[kBatch];
        const float* bb[kBatch];
        int64_t kk[kBatch];
        BrgemmCall call{0, a, bb, kk, 1, C, Np, all_taps ? off.data() + m0 : nullptr,
                        pc + (ki * k * C + m0) * Np + co0, Np, N, false, nullptr, false};
        const detail::BrgemmKernel f =
            kern.kernel[all_taps ? detail::kRowOffsets : detail::kAlongI][(N + L - 1) / L - 1][m - 1];
        int64_t n = 0;
        auto flush = [&] {
          call.n = n;
          f(call);
          call.accumulate = true;
          n = 0;
        };
        for (int64_t bi = b0; bi < b1; ++bi)
          for (int64_t oh = 0; oh < OH; ++oh) {
            // all taps: the padded rows from oh - pad on (zeros outside the image); else kernel
            // row ki's input row, left out where it falls outside.
            const int64_t ih = all_taps ? oh - s.pad : oh + ki - s.pad;
            if (!all_taps && (ih < 0 || ih >= H)) continue;
            a[n] = xp_row(xp, s, bi, ih) + (all_taps ? 0 : m0);
            bb[n] = dyp + ((bi * OH + oh) * OWq + q) * Np + co0;
            kk[n] = OW;
            if (++n == kBatch) flush();
          }
        if (n > 0 || !call.accumulate) flush();
        poll_from_master();
        if (ki == 0 && u == 0 && db) {  // the chunk's bias gradient, pixel after pixel
          float* pdb = pc + k * k * C * Np;
          std::fill(pdb, pdb + Np, 0.0f);
          for (int64_t bi = b0; bi < b1; ++bi)
            for (int64_t oh = 0; oh < OH; ++oh) {
              const float* row = dyp + ((bi * OH + oh) * OWq + q) * Np;
              add_rows(OW, Np, row, pdb);
            }
        }
      }
  // The chunks added in order into PyTorch's (Cout, C, k, k).
#pragma omp parallel for schedule(static) if (chunks * Cout * C * k * k > kParallelMin)
  for (int64_t co = 0; co < Cout; ++co) {
    for (int64_t ci = 0; ci < C; ++ci)
      for (int64_t ki = 0; ki < k; ++ki)
        for (int64_t kj = 0; kj < k; ++kj) {
          float v = 0.0f;
          for (int64_t ch = 0; ch < chunks; ++ch) v += part[ch * part_size + ((ki * k + kj) * C + ci) * Np + co];
          float& d = dW[((co * C + ci) * k + ki) * k + kj];
          d = (accumulate ? d : 0.0f) + v;
        }
    if (db) {
      float v = 0.0f;
      for (int64_t ch = 0; ch < chunks; ++ch) v += part[ch * part_size + k * k * C * Np + co];
      db[co] = (accumulate ? db[co] : 0.0f) + v;
    }
  }
}

}  // namespace hddp
