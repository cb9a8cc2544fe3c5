// The direct convolution's loops around the batch-reduce micro-kernel (conv.h, conv_ukernel.h):
// the padded copies, the weights re-blocked, then per pass the loops
//   forward / input gradient:  image b  x  output row  x  channel block  |  tiles along the row
//   weight gradient:           image chunk  x  kernel row  x  (rows, channel block) tile
//                              |  the chunk's images and output rows, as one batch of products
// one parallel region each (static schedule, the work items depend on the shapes alone). The
// forward and the input gradient share kernel_rows (a row's products) and run_tiles (a row's
// tiles); forward_scratch and backward_scratch size each pass's scratch and lay it out. The
// backward: pad_output_gradient, input_gradient, weight_gradient (with the bias gradient per
// chunk), sum_chunks. Where bf16 products run on AMX, the passes it takes call the AMX loops
// (conv_amx_loops.cpp) instead; conv_loops.h holds what both share.
#include <hddp/kernels/conv.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <vector>

#include <hddp/kernels/bf16.h>
#include <hddp/kernels/check.h>
#include <hddp/kernels/conv/conv_loops.h>
#include <hddp/kernels/conv/conv_ukernel.h>
#include <hddp/kernels/cpu_isa.h>
#include <hddp/kernels/elementwise.h>  // kParallelMin
#include <hddp/kernels/progress.h>
#include <hddp/kernels/units.h>

#include <omp.h>

namespace hddp {

namespace detail {

namespace {
constexpr IsaTable<ConvKernels> kConvSets{kConvIsa, {conv_kernels_avx512, conv_kernels_avx2, conv_kernels_portable}};
}

const ConvKernels& conv_kernels() {
  static const ConvKernels& k = kConvSets.chosen();
  return k;
}

namespace {
std::atomic<int> g_forced_path{-1};
}  // namespace

ConvBf16Path conv_bf16_path() {
  const int forced = g_forced_path.load();
  if (forced >= 0) return ConvBf16Path(forced);
  static const ConvBf16Path p = [] {
    switch (bf16_unit()) {
      case Bf16Unit::Amx: return ConvBf16Path::Amx;
      case Bf16Unit::Avx512Bf16:
        return conv_kernels().blocking->isa == "avx512" ? ConvBf16Path::Avx512Bf16 : ConvBf16Path::Float;
      case Bf16Unit::Float: break;
    }
    return ConvBf16Path::Float;
  }();
  return p;
}

const char* to_string(ConvBf16Path p) {
  switch (p) {
    case ConvBf16Path::Avx512Bf16: return "avx512bf16";
    case ConvBf16Path::Amx: return "amx";
    case ConvBf16Path::AmxModel: return "amx-model";
    case ConvBf16Path::Float: break;
  }
  return "float";
}

ConvBf16Passes conv_bf16_passes(const ConvShape& s) {
  const int64_t Np = (s.Cout + 15) / 16 * 16;  // the AVX-512 set's channel padding (L = 16)
  switch (conv_bf16_path()) {
    case ConvBf16Path::Amx:
    case ConvBf16Path::AmxModel: return {s.k * s.C % 32 == 0, true, s.C % 32 == 0};
    case ConvBf16Path::Avx512Bf16: return {s.k * s.C % 2 == 0, s.k * Np % 2 == 0, false};
    case ConvBf16Path::Float: break;
  }
  return {};
}

bool conv_amx_scratch() {
  const int forced = g_forced_path.load();
  if (forced >= 0) return forced == int(ConvBf16Path::Amx) || forced == int(ConvBf16Path::AmxModel);
  return cpu_has_amx_bf16();
}

void clear_conv_bf16_path() { g_forced_path = -1; }

void set_conv_bf16_path(ConvBf16Path p) {
  HDDP_CHECK_ARG(p != ConvBf16Path::Avx512Bf16 || (cpu_has_avx512_bf16() && conv_kernels().blocking->isa == "avx512"),
                 "set_conv_bf16_path: avx512bf16 needs AVX512_BF16 and the avx512 set");
  HDDP_CHECK_ARG(p != ConvBf16Path::Amx || (cpu_has_amx_bf16() && amx_permission_error().empty()),
                 "set_conv_bf16_path: amx needs AMX-BF16 and Linux's permission");
  g_forced_path = int(p);
}

}  // namespace detail

using namespace conv_loops;

namespace {

using detail::BrgemmCall;
using detail::ConvKernels;



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

ForwardScratch forward_scratch(const ConvShape& s, int64_t Np, bool amx) {
  ForwardScratch r;
  r.xp = 0;
  r.wr = r.xp + xp_size(s);
  r.bp = r.wr + s.k * s.k * s.C * Np;
  r.yt = r.bp + Np;
  const int64_t floats = r.yt + s.B * s.OH() * s.OW() * s.Cout;
  r.wcols = amx ? round_up(s.Cout, 32) : Np;
  r.xh = 2 * floats;
  r.wh = r.xh + xp_size(s) + (amx ? amx_slack(s, s.C) : 0) + 2;
  r.size = floats + (r.wh + s.k * s.k * s.C * r.wcols - r.xh + 1) / 2 + 1;
  return r;
}

BackwardScratch backward_scratch(const ConvShape& s, int64_t Np, int64_t Cp, bool amx) {
  BackwardScratch r;
  r.chunks = std::min(s.B, detail::kConvWeightChunks);
  r.part_size = s.k * s.k * s.C * Np + Np;
  r.xp = 0;
  r.dyp = r.xp + xp_size(s);
  r.wd = r.dyp + dyp_size(s, Np);
  r.part = r.wd + s.k * s.k * Np * Cp;
  r.dxt = r.part + r.chunks * r.part_size;
  const int64_t floats = r.dxt + s.B * s.H * s.W * s.C;
  r.dyh = 2 * floats;
  r.wdh = r.dyh + dyp_size(s, Np) + 2;
  int64_t end = r.wdh + s.k * s.k * Np * Cp;
  if (amx) {
    const AmxBackward g = amx_backward(s);
    r.xt = end + 2;
    r.dyv = r.xt + s.B * s.C * g.Ps;
    r.dyq = r.dyv + s.B * g.Vb * g.Nq;
    r.wq = r.dyq + s.B * g.Hq * g.OWq * g.Nq + amx_slack(s, g.Nq);
    end = r.wq + s.k * s.k * g.Nq * g.Cq;
  }
  r.size = floats + (end - r.dyh + 1) / 2 + 1;
  return r;
}


// xh, where given, gets the rows' bf16 copy (bf16.h's rounding) at the same offsets while they
// are in cache. bf16_only (with xh, NHWC or one channel): xh alone is written, straight from X (xp untouched).
void pad_input(const ConvShape& s, ImageLayout in, const float* X, float* xp, uint16_t* xh = nullptr,
               bool bf16_only = false) {
  const int64_t Wp = s.W + 2 * s.pad, C = s.C;
  bf16_only = bf16_only && xh && (in == ImageLayout::NHWC || C == 1);
#pragma omp parallel for collapse(2) schedule(static) if (s.B * s.H * Wp * C > kParallelMin)
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t ih = -s.pad; ih < s.H + s.pad; ++ih) {
      float* row = xp_row(xp, s, b, ih);
      if (bf16_only) {
        uint16_t* h = xh + (row - xp);
        if (ih < 0 || ih >= s.H) {
          std::fill(h, h + Wp * C, uint16_t(0));
          continue;
        }
        std::fill(h, h + s.pad * C, uint16_t(0));
        std::fill(h + (s.pad + s.W) * C, h + Wp * C, uint16_t(0));
        to_bf16(s.W * C, X + (b * s.H + ih) * s.W * C, reinterpret_cast<bf16*>(h + s.pad * C));
        continue;
      }
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
      if (xh) to_bf16(Wp * C, row, reinterpret_cast<bf16*>(xh + (row - xp)));
    }
  if (xh && !bf16_only)  // the rows of zeros
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t ih : {int64_t(0), s.H})
        for (int64_t r = 0; r < s.pad; ++r) {
          float* row = xp_row(xp, s, b, ih == 0 ? r - s.pad : s.H + r);
          std::fill(xh + (row - xp), xh + (row - xp) + Wp * C, uint16_t(0));
        }
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

// bf16 products (conv.h) on AVX512_BF16: its micro-kernels where that is the path, else nullptr
// (the float kernels then read operands rounded to bf16 in place, or AMX runs).
const detail::ConvKernels16* bf16_kernels() {
  return detail::conv_bf16_path() == detail::ConvBf16Path::Avx512Bf16 ? &detail::conv_kernels_avx512bf16() : nullptr;
}

// wh[(r / 2) * 2 wout + 2 c + r % 2] = bf16(w[r * cols + c]) for an even number of rows: each
// pair of k rows interleaved, the B layout of the bf16 micro-kernels (AVX512_BF16 and AMX);
// wout >= cols columns in wh, zeros past cols.
void to_pairs(int64_t rows, int64_t cols, const float* w, int64_t wout, uint16_t* wh) {
#pragma omp parallel for schedule(static) if (rows * wout > kParallelMin)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < wout; ++c)
      wh[(r / 2) * 2 * wout + 2 * c + r % 2] = c < cols ? to_bf16(w[r * cols + c]).bits : uint16_t(0);
}

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




void check_pool(const char* fn, const ConvShape& s, ImageLayout out, int64_t pool, const void* argmax) {
  HDDP_CHECK_ARG(pool == 0 || (pool > 0 && pool * pool <= 256 && pool <= s.OH() && pool <= s.OW() &&
                               out == ImageLayout::NHWC && argmax),
                 fn << ": fused pooling needs 0 < pool, pool*pool <= 256, pool <= OH, OW, NHWC output and an "
                       "argmax buffer; got pool="
                    << pool << " OH=" << s.OH() << " OW=" << s.OW());
}

// Over PW windows (window pw's pixel at x + pw * xs, N channels; best, at: PW x N): best, at =
// x, pos where x > best or x is NaN (PyTorch's MaxPool2d rule).
__attribute__((noinline)) void take_max(int64_t PW, int64_t N, const float* __restrict x, int64_t xs,
                                        float* __restrict best, float* __restrict at, float pos) {
  for (int64_t pw = 0; pw < PW; ++pw) {
    const float* xp = x + pw * xs;
    float* bp = best + pw * N;
    float* ap = at + pw * N;
    for (int64_t c = 0; c < N; ++c) {
      const float v = xp[c];
      const bool take = (v > bp[c]) | (v != v);
      bp[c] = take ? v : bp[c];
      ap[c] = take ? pos : ap[c];
    }
  }
}

// A row of dYp under pooled row ph, window row r (oh = ph * pool + r): pixel pw * pool + dx (each
// Np floats at d) gets the pooled gradient g (PW x Cout) where argmax am names (r, dx) and, with
// y, where y > 0; else 0. Channels Cout.
__attribute__((noinline)) void route(int64_t PW, int64_t pool, int64_t Cout, int64_t Np, int64_t r,
                                     const uint8_t* __restrict am, const float* __restrict g,
                                     const float* __restrict y, float* __restrict d) {
  float at[256];  // a pooled pixel's argmax, widened: float compares and selects vectorise
  for (int64_t pw = 0; pw < PW; ++pw)
    for (int64_t c0 = 0; c0 < Cout; c0 += 256) {
      const int64_t n = std::min<int64_t>(256, Cout - c0), o = pw * Cout + c0;
      for (int64_t c = 0; c < n; ++c) at[c] = float(am[o + c]);
      for (int64_t dx = 0; dx < pool; ++dx) {
        const float pos = float(r * pool + dx);
        float* dd = d + (pw * pool + dx) * Np + c0;
        if (y) {
          for (int64_t c = 0; c < n; ++c) {
            const float v = g[o + c], yv = y[o + c];
            dd[c] = (at[c] == pos) & (yv > 0.0f) ? v : 0.0f;
          }
        } else {
          for (int64_t c = 0; c < n; ++c) {
            const float v = g[o + c];
            dd[c] = at[c] == pos ? v : 0.0f;
          }
        }
      }
    }
}

// The products of one row of output tiles (forward: an output row; input gradient: an input
// row): kernel row ki, in order, pairs A's row r0 + dir * ki (left out where it falls outside
// [0, rows)) at a0 + row * a_ld with B at b0 + ki * b_ld; each product len values long.
struct RowProducts {
  int64_t n = 0;
  const float* a[kMaxK];
  const float* b[kMaxK];
  int64_t k[kMaxK];
};
inline RowProducts kernel_rows(int64_t k, int64_t r0, int64_t dir, int64_t rows, const float* a0, int64_t a_ld,
                               const float* b0, int64_t b_ld, int64_t len) {
  RowProducts p;
  for (int64_t ki = 0; ki < k; ++ki) {
    const int64_t r = r0 + dir * ki;
    if (r < 0 || r >= rows) continue;
    p.a[p.n] = a0 + r * a_ld;
    p.b[p.n] = b0 + ki * b_ld;
    p.k[p.n] = len;
    ++p.n;
  }
  return p;
}

// One row of output tiles: its M pixels in t.mtiles tiles, each the row's products from the
// tile's first pixel on (A advancing call.rsa values a pixel, C call.ldc from c0), on the bf16
// kernels where k16 is given, else the float ones. call: the row's strides, N, bias and ReLU.
// A row with no products is 0.
inline void run_tiles(const ConvKernels& kern, const detail::ConvKernels16* k16, const Bf16Operands& h,
                      const TileChoice& t, int64_t M, const RowProducts& p, BrgemmCall call, float* c0) {
  const int64_t L = kern.blocking->L;
  const int nvb = int((call.N + L - 1) / L);
  call.n = p.n, call.b = p.b, call.k = p.k;
  for (int64_t u = 0; u < t.mtiles; ++u) {
    const int64_t x0 = t.m_begin(M, u), m = t.m_begin(M, u + 1) - x0;
    const float* at[kMaxK];
    for (int64_t i = 0; i < p.n; ++i) at[i] = p.a[i] + x0 * call.rsa;
    call.a = at;
    call.c = c0 + x0 * call.ldc;
    if (p.n == 0) {
      for (int64_t i = 0; i < m; ++i) std::fill(call.c + i * call.ldc, call.c + i * call.ldc + call.N, 0.0f);
      continue;
    }
    if (k16) run_bf16(*k16, call, h, nvb, m);
    else kern.kernel[detail::kAlongP][nvb - 1][m - 1](call);
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
// amx: the AMX loops run (xh with its slack of zeros, wh to at.wcols columns).
Bf16Operands prepare_forward(const ConvShape& s, ImageLayout in, const float* X, const float* Wt, const float* b,
                             float* scratch, const ForwardScratch& at, int64_t Np, bool bf16, bool amx) {
  const int64_t K = s.k * s.C, rows = s.k * K;
  const bool copies = amx || (bf16 && detail::conv_bf16_passes(s).forward && bf16_kernels());
  float* xp = scratch + at.xp;
  float* wr = scratch + at.wr;
  uint16_t* xh = copies ? bf16_at(scratch, at.xh) : nullptr;
  uint16_t* wh = copies ? bf16_at(scratch, at.wh) : nullptr;
  pad_input(s, in, X, xp, xh, amx);
  if (amx) std::fill(xh + xp_size(s), xh + xp_size(s) + amx_slack(s, s.C), uint16_t(0));
  reblock_forward(s, Np, Wt, b, wr, scratch + at.bp);
  if (copies) to_pairs(rows, Np, wr, amx ? at.wcols : Np, wh);
  return copies ? Bf16Operands{xp, xh, wr, wh, Np} : Bf16Operands{};
}

// The forward with MaxPool2d(pool) in its store: per image, pooled row and channel block, the
// pool convolution rows into a buffer of this thread (L1-sized: pool x OW x NV*L floats), then
// their windows' maxima and positions to Y and argmax.
void forward_pooled(const ConvShape& s, ImageLayout in, const float* X, const float* Wt, const float* b, bool relu,
                    float* Y, float* scratch, int64_t pool, uint8_t* argmax, bool bf16) {
  const ConvKernels& kern = detail::conv_kernels();
  const int64_t L = kern.blocking->L, Np = round_up(s.Cout, L), OW = s.OW();
  const int64_t C = s.C, k = s.k, Cout = s.Cout, PH = s.OH() / pool, PW = OW / pool;
  const ForwardScratch sa = forward_scratch(s, Np, detail::conv_amx_scratch());
  const float* xp = scratch + sa.xp;
  const float* wr = scratch + sa.wr;
  const float* bp = scratch + sa.bp;
  const detail::AmxBrgemm* amx = forward_amx_kernel(s, bf16);
  const Bf16Operands h = prepare_forward(s, in, X, Wt, b, scratch, sa, Np, bf16, amx != nullptr);
  if (amx) return forward_amx(s, *amx, h, sa.wcols, b ? bp : nullptr, relu, Y, pool, argmax);
  const detail::ConvKernels16* k16 = h.xh ? bf16_kernels() : nullptr;
  const TileChoice t = choose_tile(OW, Cout, *kern.blocking);
  const int64_t ldc = t.nv * L;
#pragma omp parallel if (s.B * s.OH() * OW * Cout * k * k * C > kParallelMin)
  {
    std::vector<float> rows(static_cast<size_t>(pool * OW * ldc)), best(static_cast<size_t>(OW * ldc)),
        at(static_cast<size_t>(OW * ldc));
#pragma omp for collapse(3) schedule(static)
    for (int64_t bi = 0; bi < s.B; ++bi)
      for (int64_t ph = 0; ph < PH; ++ph)
        for (int64_t j = 0; j < t.nblocks; ++j) {
          const int64_t co0 = j * t.nv * L, N = std::min<int64_t>(t.nv * L, Cout - co0);
          for (int64_t r = 0; r < pool; ++r) {
            const int64_t oh = ph * pool + r;
            const RowProducts p =
                kernel_rows(k, oh - s.pad, 1, s.H, xp_row(xp, s, bi, 0), (s.W + 2 * s.pad) * C, wr + co0,
                            k * C * Np, k * C);
            run_tiles(kern, k16, h, t, OW, p,
                      BrgemmCall{.rsa = C, .csa = 1, .ldb = Np, .ldc = ldc, .N = N, .bias = b ? bp + co0 : nullptr,
                                 .relu = relu},
                      rows.data() + r * OW * ldc);
          }
          const int64_t o = ((bi * PH + ph) * PW) * Cout + co0;
          pool_rows(rows.data(), OW, ldc, pool, PW, N, Cout, best.data(), at.data(), Y + o, argmax + o);
          poll_from_master();
        }
  }
}

// Backward pass 1: dYp, dY (masked by y > 0 where ReLU was fused; routed through argmax where
// pooling was) with q = k - 1 - pad zero columns either side, channels to Np. bf16, per row while
// it is in cache: rounded, and copied to dyh where the bf16 kernels run.
void pad_output_gradient(const ConvShape& s, ImageLayout out, const float* dY, const float* y, int64_t pool,
                         const uint8_t* argmax, int64_t Np, float* dyp, uint16_t* dyh) {
  const int64_t Cout = s.Cout, OH = s.OH(), OW = s.OW(), q = s.k - 1 - s.pad, OWq = OW + 2 * q;
  const int64_t PH = pool > 0 ? OH / pool : 0, PW = pool > 0 ? OW / pool : 0;
  auto row_done = [&](float* row) {
    if (dyh) to_bf16(OWq * Np, row, reinterpret_cast<hddp::bf16*>(dyh + (row - dyp)));
  };
#pragma omp parallel for collapse(2) schedule(static) if (s.B * OH * OWq * Np > kParallelMin)
  for (int64_t bi = 0; bi < s.B; ++bi)
    for (int64_t oh = 0; oh < OH; ++oh) {
      float* row = dyp + (bi * OH + oh) * OWq * Np;
      std::fill(row, row + q * Np, 0.0f);
      std::fill(row + (q + OW) * Np, row + OWq * Np, 0.0f);
      if (pool > 0) {
        float* d = row + q * Np;
        if (oh < PH * pool) {
          const int64_t o = (bi * PH + oh / pool) * PW * Cout;
          route(PW, pool, Cout, Np, oh % pool, argmax + o, dY + o, y ? y + o : nullptr, d);
        }
        for (int64_t ow = 0; ow < OW; ++ow) {
          float* dd = d + ow * Np;
          if (oh >= PH * pool || ow >= PW * pool) std::fill(dd, dd + Cout, 0.0f);  // no window covers it
          std::fill(dd + Cout, dd + Np, 0.0f);
        }
        row_done(row);
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
      row_done(row);
    }
}

// Backward pass 2, the input gradient: the forward's loops over dYp with the weights reversed,
// Wd[ki][kj'][co][ci] (kj' = k - 1 - kj, co to Np, ci to Cp).
void input_gradient(const ConvShape& s, ImageLayout in, const float* Wt, float* dX, float* scratch,
                    const BackwardScratch& sa, int64_t Np, int64_t Cp, const detail::ConvKernels16* k16) {
  const ConvKernels& kern = detail::conv_kernels();
  const int64_t L = kern.blocking->L, C = s.C, k = s.k, Cout = s.Cout, H = s.H, Wd = s.W, OH = s.OH();
  const int64_t OWq = s.OW() + 2 * (k - 1 - s.pad);
  const float* dyp = scratch + sa.dyp;
  float* wd = scratch + sa.wd;
  uint16_t* wdh = k16 ? bf16_at(scratch, sa.wdh) : nullptr;
  for (int64_t ki = 0; ki < k; ++ki)
    for (int64_t kj = 0; kj < k; ++kj)  // kj here is kj' = k - 1 - kj of the forward
      for (int64_t co = 0; co < Np; ++co) {
        float* r = wd + ((ki * k + kj) * Np + co) * Cp;
        for (int64_t ci = 0; ci < Cp; ++ci)
          r[ci] = co < Cout && ci < C ? Wt[((co * C + ci) * k + ki) * k + (k - 1 - kj)] : 0.0f;
      }
  if (k16) to_pairs(k * k * Np, Cp, wd, Cp, wdh);
  const Bf16Operands h{dyp, k16 ? bf16_at(scratch, sa.dyh) : nullptr, wd, wdh, Cp};
  float* dxt = scratch + sa.dxt;
  float* dxo = in == ImageLayout::NHWC ? dX : dxt;
  const TileChoice t = choose_tile(Wd, C, *kern.blocking);
#pragma omp parallel for collapse(3) schedule(static) if (s.B * H * Wd * C * k * k * Cout > kParallelMin)
  for (int64_t bi = 0; bi < s.B; ++bi)
    for (int64_t ih = 0; ih < H; ++ih)
      for (int64_t j = 0; j < t.nblocks; ++j) {
        const int64_t ci0 = j * t.nv * L, N = std::min<int64_t>(t.nv * L, C - ci0);
        const RowProducts p =
            kernel_rows(k, ih + s.pad, -1, OH, dyp + bi * OH * OWq * Np, OWq * Np, wd + ci0, k * Np * Cp, k * Np);
        run_tiles(kern, k16, h, t, Wd, p, BrgemmCall{.rsa = Np, .csa = 1, .ldb = Cp, .ldc = C, .N = N},
                  dxo + (bi * H + ih) * Wd * C + ci0);
        poll_from_master();
      }
  if (in == ImageLayout::NCHW) to_nchw(s.B, H * Wd, C, dxt, dX);
}

// Backward pass 3, the weight gradient (and the bias gradient) per chunk of images into the
// chunk's part: dW[ki]((kj, ci), co) over the chunk's output rows, in batches of kBatch rows (a
// partial sum in registers per batch, added into the chunk's buffer in order). Where all k*k*C
// taps fit one micro-tile (few input channels: the first layer's k*k = 9), every tap is a row at
// its own offset in the padded image and each output row is one product; else per kernel row
// ki, its k*C taps (kj, ci) consecutive.
void weight_gradient(const ConvShape& s, const float* scratch, const BackwardScratch& sa, int64_t Np, bool bias,
                     float* part) {
  const ConvKernels& kern = detail::conv_kernels();
  const int64_t L = kern.blocking->L, C = s.C, k = s.k, Cout = s.Cout, H = s.H, OH = s.OH(), OW = s.OW();
  const int64_t Wp = s.W + 2 * s.pad, q = k - 1 - s.pad, OWq = OW + 2 * q, chunks = sa.chunks;
  const float* xp = scratch + sa.xp;
  const float* dyp = scratch + sa.dyp;
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
        float* pc = part + ch * sa.part_size;
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
        if (ki == 0 && u == 0 && bias) chunk_bias_gradient(s, dyp, Np, b0, b1, pc + k * k * C * Np);
      }
}

// The chunks' parts added in order (into chunk 0's), then into PyTorch's (Cout, C, k, k) and db.
void sum_chunks(const ConvShape& s, const BackwardScratch& sa, int64_t Np, float* part, float* dW, float* db,
                bool accumulate) {
  const int64_t C = s.C, k = s.k, Cout = s.Cout, chunks = sa.chunks, part_size = sa.part_size;
  // Chunk 0's part becomes the sum, 0 + part 0 + part 1 + ... in order (contiguous: vectorised).
#pragma omp parallel for schedule(static) if (chunks * part_size > kParallelMin)
  for (int64_t i0 = 0; i0 < part_size; i0 += 1024) {
    const int64_t n = std::min<int64_t>(1024, part_size - i0);
    float* sum = part + i0;
    for (int64_t i = 0; i < n; ++i) sum[i] = 0.0f + sum[i];
    for (int64_t ch = 1; ch < chunks; ++ch) {
      const float* p = part + ch * part_size + i0;
      for (int64_t i = 0; i < n; ++i) sum[i] += p[i];
    }
  }
#pragma omp parallel for schedule(static) if (Cout * C * k * k > kParallelMin)
  for (int64_t co = 0; co < Cout; ++co) {
    for (int64_t ci = 0; ci < C; ++ci)
      for (int64_t ki = 0; ki < k; ++ki)
        for (int64_t kj = 0; kj < k; ++kj) {
          float& d = dW[((co * C + ci) * k + ki) * k + kj];
          d = (accumulate ? d : 0.0f) + part[((ki * k + kj) * C + ci) * Np + co];
        }
    if (db) db[co] = (accumulate ? db[co] : 0.0f) + part[k * k * C * Np + co];
  }
}

}  // namespace

namespace conv_loops {

// NHWC (B, P, C) -> NCHW (B, C, P).
void to_nchw(int64_t B, int64_t P, int64_t C, const float* src, float* dst) {
#pragma omp parallel for collapse(2) schedule(static) if (B * P * C > kParallelMin)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < P; ++p) dst[(b * C + c) * P + p] = src[(b * P + p) * C + c];
}

// The pool x pool windows of rows (pool rows of OW pixels, ldc floats a pixel, N channels) to the
// pooled row at y and am (PW pixels, Cout values a pixel): the maxima and their window positions.
// best, at: PW * N floats of the caller's.
void pool_rows(const float* rows, int64_t OW, int64_t ldc, int64_t pool, int64_t PW, int64_t N, int64_t Cout,
               float* best, float* at, float* y, uint8_t* am) {
  std::fill(best, best + PW * N, -std::numeric_limits<float>::infinity());
  std::fill(at, at + PW * N, 0.0f);
  for (int64_t w = 0; w < pool * pool; ++w)
    take_max(PW, N, rows + ((w / pool) * OW + w % pool) * ldc, pool * ldc, best, at, float(w));
  for (int64_t pw = 0; pw < PW; ++pw) {
    std::copy(best + pw * N, best + (pw + 1) * N, y + pw * Cout);
    for (int64_t c = 0; c < N; ++c) am[pw * Cout + c] = uint8_t(at[pw * N + c]);
  }
}

// A chunk's bias gradient into pdb (Np): dYp's pixels added in order.
void chunk_bias_gradient(const ConvShape& s, const float* dyp, int64_t Np, int64_t b0, int64_t b1, float* pdb) {
  const int64_t OH = s.OH(), OW = s.OW(), q = s.k - 1 - s.pad, OWq = OW + 2 * q;
  std::fill(pdb, pdb + Np, 0.0f);
  for (int64_t bi = b0; bi < b1; ++bi)
    for (int64_t oh = 0; oh < OH; ++oh) add_rows(OW, Np, dyp + ((bi * OH + oh) * OWq + q) * Np, pdb);
}

}  // namespace conv_loops

bool conv_direct_supported(int64_t k, int64_t stride, int64_t pad) {
  return stride == 1 && k >= 1 && k <= kMaxK && pad >= 0 && pad < k;
}

std::string conv_kernel_name() { return std::string(detail::conv_kernels().blocking->isa); }

int64_t conv_direct_forward_scratch(const ConvShape& s) {
  return forward_scratch(s, round_up(s.Cout, detail::conv_kernels().blocking->L), detail::conv_amx_scratch()).size;
}

int64_t conv_direct_backward_scratch(const ConvShape& s) {
  const int64_t L = detail::conv_kernels().blocking->L;
  return backward_scratch(s, round_up(s.Cout, L), round_up(s.C, L), detail::conv_amx_scratch()).size;
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
  const ForwardScratch sa = forward_scratch(s, Np, detail::conv_amx_scratch());
  const float* xp = scratch + sa.xp;
  const float* wr = scratch + sa.wr;
  const float* bp = scratch + sa.bp;
  float* yt = scratch + sa.yt;
  float* yo = out == ImageLayout::NHWC ? Y : yt;
  const detail::AmxBrgemm* amx = forward_amx_kernel(s, bf16);
  const Bf16Operands h = prepare_forward(s, in, X, Wt, b, scratch, sa, Np, bf16, amx != nullptr);
  if (amx) {
    forward_amx(s, *amx, h, sa.wcols, b ? bp : nullptr, relu, yo, 0, nullptr);
    if (out == ImageLayout::NCHW) to_nchw(s.B, OH * OW, Cout, yt, Y);
    return;
  }
  const detail::ConvKernels16* k16 = h.xh ? bf16_kernels() : nullptr;
  const TileChoice t = choose_tile(OW, Cout, *kern.blocking);
  // Loop 3: images, loop 2: output rows, loop 1: channel blocks; then the row's tiles.
#pragma omp parallel for collapse(3) schedule(static) if (s.B * OH * OW * Cout * k * k * C > kParallelMin)
  for (int64_t bi = 0; bi < s.B; ++bi)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t j = 0; j < t.nblocks; ++j) {
        const int64_t co0 = j * t.nv * L, N = std::min<int64_t>(t.nv * L, Cout - co0);
        const RowProducts p = kernel_rows(k, oh - s.pad, 1, s.H, xp_row(xp, s, bi, 0), (s.W + 2 * s.pad) * C,
                                          wr + co0, k * C * Np, k * C);
        run_tiles(kern, k16, h, t, OW, p,
                  BrgemmCall{.rsa = C, .csa = 1, .ldb = Np, .ldc = Cout, .N = N, .bias = b ? bp + co0 : nullptr,
                             .relu = relu},
                  yo + (bi * OH + oh) * OW * Cout + co0);
        poll_from_master();
      }
  if (out == ImageLayout::NCHW) to_nchw(s.B, OH * OW, Cout, yt, Y);
}

// Three passes: dY padded (pass 1), the input gradient where dX is given (pass 2), the weight and
// bias gradients per chunk of images (pass 3), then the chunks summed.
void conv_direct_backward(const ConvShape& s, ImageLayout in, ImageLayout out, const float* X, const float* Wt,
                          const float* dY, const float* y, float* dX, float* dW, float* db, bool accumulate,
                          float* scratch, int64_t pool, const uint8_t* argmax, bool bf16) {
  check_shape("conv_direct_backward", s);
  HDDP_CHECK_ARG(X && Wt && dY && dW && scratch, "conv_direct_backward: X, Wt, dY, dW and scratch must not be null");
  check_pool("conv_direct_backward", s, out, pool, argmax);
  if (s.B == 0) {
    if (!accumulate) {
      std::fill(dW, dW + s.Cout * s.C * s.k * s.k, 0.0f);
      if (db) std::fill(db, db + s.Cout, 0.0f);
    }
    return;
  }
  const int64_t L = detail::conv_kernels().blocking->L, Np = round_up(s.Cout, L), Cp = round_up(s.C, L);
  const BackwardScratch sa = backward_scratch(s, Np, Cp, detail::conv_amx_scratch());
  // bf16: the passes a bf16 unit takes read bf16 copies of their operands; the others run float.
  const detail::ConvBf16Passes on = bf16 ? detail::conv_bf16_passes(s) : detail::ConvBf16Passes{};
  const detail::AmxBrgemm* amx = amx_kernel(bf16);
  const detail::AmxBrgemm* amx_dw = on.weight_gradient ? amx : nullptr;
  const detail::ConvKernels16* k16 = dX && on.input_gradient && !amx ? bf16_kernels() : nullptr;
  pad_input(s, in, X, scratch + sa.xp);
  pad_output_gradient(s, out, dY, y, pool, argmax, Np, scratch + sa.dyp, k16 ? bf16_at(scratch, sa.dyh) : nullptr);
  if (dX && amx && on.input_gradient) input_gradient_amx(s, in, Wt, dX, scratch, sa, Np, *amx);
  else if (dX) input_gradient(s, in, Wt, dX, scratch, sa, Np, Cp, k16);
  float* part = scratch + sa.part;
  if (amx_dw) weight_gradient_amx(s, scratch, sa, Np, db != nullptr, part, *amx_dw);
  else weight_gradient(s, scratch, sa, Np, db != nullptr, part);
  sum_chunks(s, sa, Np, part, dW, db, accumulate);
}

}  // namespace hddp
