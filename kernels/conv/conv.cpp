// The direct convolution's loops around the batch-reduce micro-kernel (conv.h, conv_ukernel.h):
// the padded copies, the weights re-blocked, then per pass the loops
//   forward / input gradient:  image b  x  output row  x  channel block  |  tiles along the row
//   weight gradient:           image chunk  x  kernel row  x  (rows, channel block) tile
//                              |  the chunk's images and output rows, as one batch of products
// one parallel region each (static schedule, the work items depend on the shapes alone). The
// forward and the input gradient share kernel_rows (a row's products) and run_tiles (a row's
// tiles); forward_scratch and backward_scratch size each pass's scratch and lay it out. The
// backward: pad_output_gradient, input_gradient, weight_gradient (with the bias gradient per
// chunk), sum_chunks.
#include <hddp/kernels/conv.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <vector>

#include <hddp/kernels/amx/amx_tile_model.h>
#include <hddp/kernels/bf16.h>
#include <hddp/kernels/check.h>
#include <hddp/kernels/conv/conv_amx_program.h>
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
void brgemm_model(const AmxCall& c) { amx_brgemm<ModelOps>(c); }
}  // namespace

const AmxBrgemm& conv_amx_model() {
  static const AmxBrgemm k = brgemm_model;
  return k;
}

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
template <class F>
inline F* xp_row(F* xp, const ConvShape& s, int64_t b, int64_t ih) {
  return xp + ((b * (s.H + 2 * s.pad) + ih + s.pad) * (s.W + 2 * s.pad)) * s.C;
}
int64_t dyp_size(const ConvShape& s, int64_t Np) { return s.B * s.OH() * (s.OW() + 2 * (s.k - 1 - s.pad)) * Np; }

// The scratch of each pass, carved where it is sized: float regions one after another (offsets
// in floats from the start), then the bf16 copies the bf16 kernels read (offsets in bf16 values
// from the start; spare values between the copies, one spare float after them). With `amx`
// (conv_amx_scratch()) the copies are laid out for the AMX loops too: the tiles read whole
// blocks of 32 pixels, so up to 32 + k pixels past an image's last one (the slack).
int64_t amx_slack(const ConvShape& s, int64_t channels) { return (32 + s.k) * channels; }

struct ForwardScratch {
  int64_t xp, wr, bp, yt;  // padded input, Wr[ki][kj][ci][co] (co to Np), bias to Np, NHWC output when Y is NCHW
  int64_t xh, wh;          // bf16 copies of xp (then the slack) and wr (wr's k rows in pairs, co to wcols)
  int64_t wcols;           // Np, or Cout to whole tiles of 32 (amx)
  int64_t size;            // floats in all
};
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

// The AMX backward's geometry: images as rows of Wp (input gradient: OWq) pixels, "virtual"
// pixels v = row * width + column counted over the padded width, the columns past the output
// computed (in whole tiles) and dropped.
struct AmxBackward {
  int64_t Wp, Ps;  // padded input width; values per channel plane of XT (the padded image + slack)
  int64_t Vb;      // the weight gradient's virtual pixels per image, OH * Wp to whole tiles of 32
  int64_t Nq, Cq;  // Cout, C to whole tiles of 32
  int64_t OWq, Hq; // the input gradient's dY: OW + 2q columns, H + k - 1 rows
};
AmxBackward amx_backward(const ConvShape& s) {
  AmxBackward g;
  g.Wp = s.W + 2 * s.pad;
  g.Ps = round_up((s.H + 2 * s.pad) * g.Wp + 32 + s.k, 32);
  g.Vb = round_up(s.OH() * g.Wp, 32);
  g.Nq = round_up(s.Cout, 32), g.Cq = round_up(s.C, 32);
  g.OWq = s.OW() + 2 * (s.k - 1 - s.pad), g.Hq = s.H + s.k - 1;
  return g;
}

struct BackwardScratch {
  int64_t xp, dyp, wd, part, dxt;  // padded input, padded dY (B, OH, OWq, Np), Wd[ki][kj'][co][ci] (co to
                                   // Np, ci to Cp), per chunk dW[ki][kj][ci][co] (Np) then db (Np),
                                   // NHWC input gradient when dX is NCHW
  int64_t dyh, wdh;                // bf16 copies of dyp and wd (wd's k rows in pairs)
  int64_t xt, dyv, dyq, wq;        // amx, bf16: XT (B, C, Ps) the padded input channel-major; dyv
                                   // (B, Vb/2, Nq, 2) dY over the virtual pixels in pixel pairs; dyq
                                   // (B, Hq, OWq, Nq) dY with k-1-pad zero rows and columns either
                                   // side, then the slack; wq the input gradient's weights
                                   // ((ki', kj', co) rows in pairs, Cq columns)
  int64_t chunks, part_size;       // weight-gradient chunks, floats per chunk
  int64_t size;                    // floats in all
};
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
inline uint16_t* bf16_at(float* scratch, int64_t off) { return reinterpret_cast<uint16_t*>(scratch) + off; }

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

// ---- The AMX loops (conv_ukernel.h, AmxCall) ----
// The AMX kernel bf16 products run on (the path AMX or its model), else nullptr.
const detail::AmxBrgemm* amx_kernel(bool bf16) {
  if (!bf16) return nullptr;
  switch (detail::conv_bf16_path()) {
    case detail::ConvBf16Path::Amx: return &detail::conv_amx();
    case detail::ConvBf16Path::AmxModel: return &detail::conv_amx_model();
    default: return nullptr;
  }
}

// The forward's, where the AMX path takes it (conv_bf16_passes).
const detail::AmxBrgemm* forward_amx_kernel(const ConvShape& s, bool bf16) {
  return bf16 && detail::conv_bf16_passes(s).forward ? amx_kernel(bf16) : nullptr;
}

// A block of 32 "virtual" pixels from v0 by 32 channels from co0: an image's bf16 rows of `width`
// pixels of ch channels read as one sequence of pixels, pixel v's taps of kernel row ki the k*ch
// values from pixel v + ki * width on (A in place, lda ch); B the rows ki*k*ch on of wh (pairs,
// wcols columns). out = the sum over the kernel rows.
inline void amx_block(const detail::AmxBrgemm& f, int64_t k, const uint16_t* img, int64_t v0, int64_t width,
                      int64_t ch, const uint16_t* wh, int64_t wcols, int64_t co0, float* out) {
  const uint16_t* a[kMaxK];
  const uint16_t* b[kMaxK];
  int64_t kb[kMaxK];
  for (int64_t ki = 0; ki < k; ++ki) {
    a[ki] = img + (v0 + ki * width) * ch;
    b[ki] = wh + ki * k * ch * wcols + 2 * co0;
    kb[ki] = k * ch / 32;
  }
  f(detail::AmxCall{k, a, b, kb, ch, 2 * wcols, out, false});
}

// out's rows that are output pixels (v0 + i < V, column (v0 + i) % width < OW) to dst(row, column):
// N channels, plus bias (N values, or nullptr), ReLU (r < 0 -> 0, NaN stays) where relu.
template <class Dst>
inline void amx_store(const float* out, int64_t v0, int64_t V, int64_t width, int64_t OW, int64_t N,
                      const float* bias, bool relu, Dst dst) {
  for (int64_t i = 0; i < 32 && v0 + i < V; ++i) {
    const int64_t r = (v0 + i) / width, c = (v0 + i) % width;
    if (c >= OW) continue;
    float* d = dst(r, c);
    const float* o = out + i * 32;
    for (int64_t j = 0; j < N; ++j) {
      const float v = o[j] + (bias ? bias[j] : 0.0f);
      d[j] = relu && v < 0.0f ? 0.0f : v;
    }
  }
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

// The forward on AMX (k*C in whole tiles of 32): per image, block of 32 virtual pixels
// (v = oh * Wp + ow) and block of 32 channels, into Y (NHWC: yo). pool > 0: per image, pooled row
// and block of 32 channels, the blocks of the pool rows into a buffer (pool x OW x 32), then
// pool_rows.
void forward_amx(const ConvShape& s, const detail::AmxBrgemm& f, const Bf16Operands& h, int64_t wcols,
                 const float* bias, bool relu, float* yo, int64_t pool, uint8_t* argmax) {
  const int64_t Wp = s.W + 2 * s.pad, OH = s.OH(), OW = s.OW(), Cout = s.Cout, C = s.C, k = s.k;
  const int64_t img = (s.H + 2 * s.pad) * Wp * C, nblocks = (Cout + 31) / 32;
  const uint16_t* xh = h.xh;
  const int64_t tasks_per_image = pool > 0 ? OH / pool : (OH * Wp + 31) / 32;
#pragma omp parallel if (s.B * OH * OW * Cout * k * k * C > kParallelMin)
  {
    alignas(64) float out[32 * 32];
    std::vector<float> rows(size_t(pool > 0 ? pool * OW * 32 : 0)), best(size_t(OW * 32)), at(size_t(OW * 32));
#pragma omp for collapse(3) schedule(static)
    for (int64_t bi = 0; bi < s.B; ++bi)
      for (int64_t u = 0; u < tasks_per_image; ++u)
        for (int64_t j = 0; j < nblocks; ++j) {
          const int64_t co0 = j * 32, N = std::min<int64_t>(32, Cout - co0);
          const float* bj = bias ? bias + co0 : nullptr;
          if (pool == 0) {
            amx_block(f, k, xh + bi * img, u * 32, Wp, C, h.wh, wcols, co0, out);
            amx_store(out, u * 32, OH * Wp, Wp, OW, N, bj, relu,
                      [&](int64_t oh, int64_t ow) { return yo + ((bi * OH + oh) * OW + ow) * Cout + co0; });
          } else {
            const int64_t v_begin = u * pool * Wp, v_end = v_begin + pool * Wp;
            for (int64_t v0 = v_begin; v0 < v_end; v0 += 32) {
              amx_block(f, k, xh + bi * img, v0, Wp, C, h.wh, wcols, co0, out);
              amx_store(out, v0, v_end, Wp, OW, N, bj, relu,
                        [&](int64_t oh, int64_t ow) { return rows.data() + ((oh - u * pool) * OW + ow) * 32; });
            }
            const int64_t PW = OW / pool, o = ((bi * (OH / pool) + u) * PW) * Cout + co0;
            pool_rows(rows.data(), OW, 32, pool, PW, N, Cout, best.data(), at.data(), yo + o, argmax + o);
          }
          poll_from_master();
        }
  }
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

// A chunk's bias gradient into pdb (Np): dYp's pixels added in order.
void chunk_bias_gradient(const ConvShape& s, const float* dyp, int64_t Np, int64_t b0, int64_t b1, float* pdb) {
  const int64_t OH = s.OH(), OW = s.OW(), q = s.k - 1 - s.pad, OWq = OW + 2 * q;
  std::fill(pdb, pdb + Np, 0.0f);
  for (int64_t bi = b0; bi < b1; ++bi)
    for (int64_t oh = 0; oh < OH; ++oh) add_rows(OW, Np, dyp + ((bi * OH + oh) * OWq + q) * Np, pdb);
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

// Backward pass 2 on AMX, the input gradient as a forward over dY: dX(ih, iw) = the sum over
// (ki', kj', co) of dyq[ih + ki'][iw + kj'][co] . Wt[co][ci][k-1-ki'][k-1-kj'], with dyq dY with
// k-1-pad zero rows and columns either side; per image, block of 32 virtual pixels
// (v = ih * OWq + iw) and block of 32 input channels.
void input_gradient_amx(const ConvShape& s, ImageLayout in, const float* Wt, float* dX, float* scratch,
                        const BackwardScratch& sa, int64_t Np, const detail::AmxBrgemm& f) {
  const AmxBackward g = amx_backward(s);
  const int64_t C = s.C, k = s.k, Cout = s.Cout, H = s.H, W = s.W, OH = s.OH(), q = k - 1 - s.pad;
  const int64_t OWq = g.OWq, Nq = g.Nq, Cq = g.Cq, img = g.Hq * OWq * Nq;
  const float* dyp = scratch + sa.dyp;
  uint16_t* dyq = bf16_at(scratch, sa.dyq);
  uint16_t* wq = bf16_at(scratch, sa.wq);
#pragma omp parallel for collapse(2) schedule(static) if (s.B * g.Hq * OWq * Nq > kParallelMin)
  for (int64_t bi = 0; bi < s.B; ++bi)
    for (int64_t r = 0; r < g.Hq; ++r) {
      uint16_t* d = dyq + bi * img + r * OWq * Nq;
      if (r < q || r >= q + OH) {
        std::fill(d, d + OWq * Nq, uint16_t(0));
        continue;
      }
      const float* src = dyp + (bi * OH + r - q) * OWq * Np;
      for (int64_t c = 0; c < OWq; ++c) {
        to_bf16(Np, src + c * Np, reinterpret_cast<hddp::bf16*>(d + c * Nq));
        std::fill(d + c * Nq + Np, d + (c + 1) * Nq, uint16_t(0));
      }
    }
  std::fill(dyq + s.B * img, dyq + s.B * img + amx_slack(s, Nq), uint16_t(0));
  // wq: row (ki', kj', co), column ci, in pairs of rows.
#pragma omp parallel for schedule(static) if (k * k * Nq * Cq > kParallelMin)
  for (int64_t r = 0; r < k * k * Nq; ++r) {
    const int64_t ki = k - 1 - r / (k * Nq), kj = k - 1 - r / Nq % k, co = r % Nq;
    for (int64_t ci = 0; ci < Cq; ++ci)
      wq[(r / 2) * 2 * Cq + 2 * ci + r % 2] =
          co < Cout && ci < C ? to_bf16(Wt[((co * C + ci) * k + ki) * k + kj]).bits : uint16_t(0);
  }
  float* dxo = in == ImageLayout::NHWC ? dX : scratch + sa.dxt;
  const int64_t V = H * OWq, vblocks = (V + 31) / 32, nblocks = (C + 31) / 32;
#pragma omp parallel if (s.B * H * W * C * k * k * Cout > kParallelMin)
  {
    alignas(64) float out[32 * 32];
#pragma omp for collapse(3) schedule(static)
    for (int64_t bi = 0; bi < s.B; ++bi)
      for (int64_t u = 0; u < vblocks; ++u)
        for (int64_t j = 0; j < nblocks; ++j) {
          const int64_t ci0 = j * 32, N = std::min<int64_t>(32, C - ci0);
          amx_block(f, k, dyq + bi * img, u * 32, OWq, Nq, wq, Cq, ci0, out);
          amx_store(out, u * 32, V, OWq, W, N, nullptr, false,
                    [&](int64_t ih, int64_t iw) { return dxo + ((bi * H + ih) * W + iw) * C + ci0; });
          poll_from_master();
        }
  }
  if (in == ImageLayout::NCHW) to_nchw(s.B, H * W, C, scratch + sa.dxt, dX);
}

// The bf16 bits of the float with bits u, as bf16.h's to_bf16 (round to nearest even, NaN to
// 0xFFFF), written on the bits so that the copies below vectorise.
inline uint16_t rne16(uint32_t u) {
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? 0xffffu : r);
}

// Backward pass 3 on AMX (C in whole tiles of 32), the weight gradient per chunk of images:
// dW[ki][kj][ci][co] = the sum over the chunk's images and virtual pixels v = oh * Wp + ow of
// XT[ci][v + ki * Wp + kj] . dyv[v][co], dyv zero where ow >= OW; per chunk, (ki, kj), block of
// 32 input and block of 32 output channels, the images' products summed in the tiles.
void weight_gradient_amx(const ConvShape& s, float* scratch, const BackwardScratch& sa, int64_t Np, bool bias,
                         float* part, const detail::AmxBrgemm& f) {
  const AmxBackward g = amx_backward(s);
  const int64_t C = s.C, k = s.k, Cout = s.Cout, OH = s.OH(), OW = s.OW(), q = k - 1 - s.pad, Wp = g.Wp;
  const int64_t P = (s.H + 2 * s.pad) * Wp, Nq = g.Nq, Vb = g.Vb, chunks = sa.chunks;
  const float* xp = scratch + sa.xp;
  const float* dyp = scratch + sa.dyp;
  uint16_t* xt = bf16_at(scratch, sa.xt);
  uint16_t* dyv = bf16_at(scratch, sa.dyv);
  // Both copies rounded to bf16 as bf16.h does (rne16: the bits of a float).
  // XT[b][ci][p] = xp[b][p][ci], zeros from P to Ps: blocks of 32 pixels x 32 channels through a
  // transpose in registers' reach.
  const int64_t pblocks = (g.Ps + 31) / 32;
#pragma omp parallel for collapse(2) schedule(static) if (s.B * C * g.Ps > kParallelMin)
  for (int64_t bi = 0; bi < s.B; ++bi)
    for (int64_t pb = 0; pb < pblocks; ++pb) {
      const int64_t p0 = pb * 32, np = std::max<int64_t>(0, std::min<int64_t>(32, P - p0));
      const uint32_t* src = reinterpret_cast<const uint32_t*>(xp) + (bi * P + p0) * C;
      for (int64_t c0 = 0; c0 < C; c0 += 32) {
        uint16_t block[32][32];  // [ci][p]
        for (int64_t p = 0; p < 32; ++p)
          for (int64_t c = 0; c < 32; ++c) block[c][p] = p < np ? rne16(src[p * C + c0 + c]) : uint16_t(0);
        for (int64_t c = 0; c < 32; ++c) {
          uint16_t* d = xt + (bi * C + c0 + c) * g.Ps + p0;
          std::copy(block[c], block[c] + std::min<int64_t>(32, g.Ps - p0), d);
        }
      }
    }
  // dyv[b][v / 2][co][v % 2] = dY(oh, ow) for v = oh * Wp + ow, ow < OW, oh < OH; else 0: per
  // pixel pair one 32-bit word per channel, the two pixels' top halves.
  const int64_t OWq = OW + 2 * q;
#pragma omp parallel for collapse(2) schedule(static) if (s.B * Vb * Nq > kParallelMin)
  for (int64_t bi = 0; bi < s.B; ++bi)
    for (int64_t vp = 0; vp < Vb / 2; ++vp) {
      uint32_t* d = reinterpret_cast<uint32_t*>(dyv) + (bi * Vb / 2 + vp) * Nq;
      const uint32_t* src[2];
      for (int64_t e = 0; e < 2; ++e) {
        const int64_t v = 2 * vp + e, oh = v / Wp, ow = v % Wp;
        src[e] = oh < OH && ow < OW ? reinterpret_cast<const uint32_t*>(dyp) + ((bi * OH + oh) * OWq + q + ow) * Np
                                    : nullptr;
      }
      if (src[0] && src[1]) {
        for (int64_t co = 0; co < Np; ++co) d[co] = uint32_t(rne16(src[0][co])) | uint32_t(rne16(src[1][co])) << 16;
      } else if (src[0] || src[1]) {
        const int shift = src[1] ? 16 : 0;
        const uint32_t* x = src[1] ? src[1] : src[0];
        for (int64_t co = 0; co < Np; ++co) d[co] = uint32_t(rne16(x[co])) << shift;
      } else {
        std::fill(d, d + Np, 0u);
      }
      std::fill(d + Np, d + Nq, 0u);
    }
  const int64_t cblocks = C / 32, nblocks = Nq / 32, tiles = k * k * cblocks * nblocks;
#pragma omp parallel if (s.B * OH * OW * Cout * k * k * C > kParallelMin)
  {
    alignas(64) float out[32 * 32];
#pragma omp for collapse(2) schedule(static)
    for (int64_t ch = 0; ch < chunks; ++ch)
      for (int64_t u = 0; u < tiles; ++u) {
        const int64_t b0 = s.B * ch / chunks, b1 = s.B * (ch + 1) / chunks;
        const int64_t kk = u / (cblocks * nblocks), ci0 = u / nblocks % cblocks * 32, co0 = u % nblocks * 32;
        const int64_t N = std::min<int64_t>(32, Cout - co0);
        const uint16_t* a[kMaxK];
        const uint16_t* bb[kMaxK];
        int64_t kb[kMaxK];
        detail::AmxCall call{0, a, bb, kb, g.Ps, 2 * Nq, out, false};
        for (int64_t bi = b0; bi < b1; ++bi) {
          a[call.n] = xt + (bi * C + ci0) * g.Ps + kk / k * Wp + kk % k;
          bb[call.n] = dyv + bi * Vb * Nq + 2 * co0;
          kb[call.n] = Vb / 32;
          if (++call.n == kMaxK || bi + 1 == b1) {
            f(call);
            call.n = 0, call.accumulate = true;
          }
        }
        float* pc = part + ch * sa.part_size;
        for (int64_t i = 0; i < 32; ++i) std::copy(out + i * 32, out + i * 32 + N, pc + (kk * C + ci0 + i) * Np + co0);
        poll_from_master();
        if (u == 0 && bias) chunk_bias_gradient(s, dyp, Np, b0, b1, pc + k * k * C * Np);
      }
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
