// The direct convolution's AMX loops (conv_loops.h; conv.h says what they compute): per pass,
// blocks of 32 "virtual" pixels by 32 channels on the batch-reduce tile program
// (conv_amx_program.h) and the stores around it. Built for any CPU: the tile instructions are in
// conv_amx.cpp; this file also holds the program on the tile model (conv_amx_model).
#include <hddp/kernels/conv/conv_loops.h>

#include <algorithm>
#include <vector>

#include <hddp/kernels/amx/amx_tile_model.h>
#include <hddp/kernels/bf16.h>
#include <hddp/kernels/conv/conv_amx_program.h>
#include <hddp/kernels/elementwise.h>  // kParallelMin

namespace hddp {

namespace detail {

namespace {
void brgemm_model(const AmxCall& c) { amx_brgemm<ModelOps>(c); }
}  // namespace

const AmxBrgemm& conv_amx_model() {
  static const AmxBrgemm k = brgemm_model;
  return k;
}

}  // namespace detail

namespace conv_loops {
namespace {

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

// The bf16 bits of the float with bits u, as bf16.h's to_bf16 (round to nearest even, NaN to
// 0xFFFF), written on the bits so that the copies below vectorise.
inline uint16_t rne16(uint32_t u) {
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? 0xffffu : r);
}

}  // namespace

const detail::AmxBrgemm* amx_kernel(bool bf16) {
  if (!bf16) return nullptr;
  switch (detail::conv_bf16_path()) {
    case detail::ConvBf16Path::Amx: return &detail::conv_amx();
    case detail::ConvBf16Path::AmxModel: return &detail::conv_amx_model();
    default: return nullptr;
  }
}

const detail::AmxBrgemm* forward_amx_kernel(const ConvShape& s, bool bf16) {
  return bf16 && detail::conv_bf16_passes(s).forward ? amx_kernel(bf16) : nullptr;
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

}  // namespace conv_loops
}  // namespace hddp
