#pragma once
// What the direct convolution's loops share (internal): conv.cpp holds the float loops and the
// entry points, conv_amx_loops.cpp the AMX loops (bf16 on the tile unit). The padded copies'
// geometry, each pass's scratch layout, the bf16 operands, and the few steps both sets of loops
// call (pooling in the store, the bias gradient, the NCHW copy, the progress hook).
#include <omp.h>

#include <cstdint>

#include <hddp/kernels/conv.h>
#include <hddp/kernels/conv/conv_ukernel.h>
#include <hddp/kernels/progress.h>

namespace hddp::conv_loops {

inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
// The progress hook (progress.h), from the team's thread 0 (the caller's thread) after each
// work item of a loop below (a row of tiles: tens of microseconds), so that communication
// started before the call (a gradient bucket's allreduce) moves while the convolution runs.
inline void poll_from_master() {
  if (omp_get_thread_num() == 0) progress_poll();
}

// Xp (B, H + 2 pad, W + 2 pad, C): X with `pad` zero rows and columns on every side, from NHWC
// or NCHW. xp_size: its values; xp_row: where input row ih (-pad <= ih < H + pad) of image b starts.
inline int64_t xp_size(const ConvShape& s) { return s.B * (s.H + 2 * s.pad) * (s.W + 2 * s.pad) * s.C; }
template <class F>
inline F* xp_row(F* xp, const ConvShape& s, int64_t b, int64_t ih) {
  return xp + ((b * (s.H + 2 * s.pad) + ih + s.pad) * (s.W + 2 * s.pad)) * s.C;
}
inline int64_t dyp_size(const ConvShape& s, int64_t Np) { return s.B * s.OH() * (s.OW() + 2 * (s.k - 1 - s.pad)) * Np; }

// The scratch of each pass, carved where it is sized: float regions one after another (offsets
// in floats from the start), then the bf16 copies the bf16 kernels read (offsets in bf16 values
// from the start; spare values between the copies, one spare float after them). With `amx`
// (conv_amx_scratch()) the copies are laid out for the AMX loops too: the tiles read whole
// blocks of 32 pixels, so up to 32 + k pixels past an image's last one (the slack).
inline int64_t amx_slack(const ConvShape& s, int64_t channels) { return (32 + s.k) * channels; }

struct ForwardScratch {
  int64_t xp, wr, bp, yt;  // padded input, Wr[ki][kj][ci][co] (co to Np), bias to Np, NHWC output when Y is NCHW
  int64_t xh, wh;          // bf16 copies of xp (then the slack) and wr (wr's k rows in pairs, co to wcols)
  int64_t wcols;           // Np, or Cout to whole tiles of 32 (amx)
  int64_t size;            // floats in all
};
// The AMX backward's geometry: images as rows of Wp (input gradient: OWq) pixels, "virtual"
// pixels v = row * width + column counted over the padded width, the columns past the output
// computed (in whole tiles) and dropped.
struct AmxBackward {
  int64_t Wp, Ps;  // padded input width; values per channel plane of XT (the padded image + slack)
  int64_t Vb;      // the weight gradient's virtual pixels per image, OH * Wp to whole tiles of 32
  int64_t Nq, Cq;  // Cout, C to whole tiles of 32
  int64_t OWq, Hq; // the input gradient's dY: OW + 2q columns, H + k - 1 rows
};
inline AmxBackward amx_backward(const ConvShape& s) {
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
inline uint16_t* bf16_at(float* scratch, int64_t off) { return reinterpret_cast<uint16_t*>(scratch) + off; }
// The bf16 operands of a pass: A's rows at the same offsets in xh as in the float xf, B's rows
// (ldb floats each; every product starts at an even row) paired in wh.
struct Bf16Operands {
  const float* xf = nullptr;
  const uint16_t* xh = nullptr;
  const float* wf = nullptr;
  const uint16_t* wh = nullptr;
  int64_t ldb = 0;
};

// Kernel rows of one output row (forward) or input row (input gradient) that fall inside the
// image: at most 16 products per batch.
constexpr int kMaxK = 16;
// Steps both sets of loops call (conv.cpp).
// NHWC (B, P, C) -> NCHW (B, C, P).
void to_nchw(int64_t B, int64_t P, int64_t C, const float* src, float* dst);
// The pool x pool windows of rows (pool rows of OW pixels, ldc floats a pixel, N channels) to the
// pooled row at y and am (PW pixels, Cout values a pixel): the maxima and their window positions
// (ties to the first, NaN winning, as PyTorch's MaxPool2d). best, at: PW * N floats of the caller's.
void pool_rows(const float* rows, int64_t OW, int64_t ldc, int64_t pool, int64_t PW, int64_t N, int64_t Cout,
               float* best, float* at, float* y, uint8_t* am);
// A chunk's bias gradient into pdb (Np): dYp's pixels (images b0 to b1) added in order.
void chunk_bias_gradient(const ConvShape& s, const float* dyp, int64_t Np, int64_t b0, int64_t b1, float* pdb);

// The AMX loops (conv_amx_loops.cpp).
// The AMX kernel bf16 products run on (the path AMX or its model), else nullptr; the forward's,
// where the path takes the forward (conv_bf16_passes).
const detail::AmxBrgemm* amx_kernel(bool bf16);
const detail::AmxBrgemm* forward_amx_kernel(const ConvShape& s, bool bf16);
// The forward (k*C in whole tiles of 32) into NHWC yo; pool > 0 fuses MaxPool2d as conv.h says.
// h: the bf16 padded input (with its slack) and the weights in pairs, wcols columns.
void forward_amx(const ConvShape& s, const detail::AmxBrgemm& f, const Bf16Operands& h, int64_t wcols,
                 const float* bias, bool relu, float* yo, int64_t pool, uint8_t* argmax);
// Backward pass 2: the input gradient from dYp (scratch sa.dyp), as a forward over dY padded.
void input_gradient_amx(const ConvShape& s, ImageLayout in, const float* Wt, float* dX, float* scratch,
                        const BackwardScratch& sa, int64_t Np, const detail::AmxBrgemm& f);
// Backward pass 3 (C in whole tiles of 32): the weight gradient per chunk into part (the float
// pass's layout), and the bias gradient where bias.
void weight_gradient_amx(const ConvShape& s, float* scratch, const BackwardScratch& sa, int64_t Np, bool bias,
                         float* part, const detail::AmxBrgemm& f);

}  // namespace hddp::conv_loops
