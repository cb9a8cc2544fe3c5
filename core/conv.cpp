#include <hddp/core/conv.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include <hddp/kernels/check.h>
#include <hddp/kernels/elementwise.h>
#include <hddp/kernels/gemm.h>

namespace hddp {

namespace {

// Floor and ceiling of a / s for s > 0 and any sign of a.
int64_t floor_div(int64_t a, int64_t s) { return a >= 0 ? a / s : -((-a + s - 1) / s); }
int64_t ceil_div(int64_t a, int64_t s) { return -floor_div(-a, s); }

// The output columns [lo, hi) of a kernel column kj whose input column ow*s + kj - pad lies in
// [0, W).
struct Span {
  int64_t lo, hi;
};
Span inside(int64_t W, int64_t OW, int64_t kj, int64_t stride, int64_t pad) {
  const int64_t lo = std::clamp<int64_t>(ceil_div(pad - kj, stride), 0, OW);
  const int64_t hi = std::clamp<int64_t>(ceil_div(W + pad - kj, stride), lo, OW);
  return {lo, hi};
}

// B images in groups of at most `most` = min(B, conv2d_group_images(...)) images, one GEMM per
// group and pass: count = ceil(B / most) groups of nearly equal size, group g = images
// [B g / count, B (g + 1) / count). A function of the shapes and B only.
struct Groups {
  int64_t B, most, count;
  Groups(int64_t B_, int64_t ckk, int64_t Cout, int64_t P)
      : B(B_), most(std::min(B_, conv2d_group_images(ckk, Cout, P))), count(most > 0 ? (B_ + most - 1) / most : 0) {}
  int64_t begin(int64_t g) const { return B * g / count; }
  int64_t end(int64_t g) const { return B * (g + 1) / count; }
};

// Sum of n values in 8 interleaved partial sums (vectorisable, one fixed order).
template <class T>
T sum_run(int64_t n, const T* x) {
  T acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += x[i + j];
  T s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += x[i];
  return s;
}

void check_conv(const char* fn, int64_t B, int64_t C, int64_t H, int64_t W, int64_t Cout, int64_t k, int64_t stride,
                int64_t pad) {
  HDDP_CHECK_ARG(B >= 0 && C > 0 && H > 0 && W > 0 && Cout > 0 && k > 0 && stride > 0 && pad >= 0,
                 fn << ": need B >= 0, C, H, W, Cout, k, stride > 0 and pad >= 0; got B=" << B << " C=" << C << " H="
                    << H << " W=" << W << " Cout=" << Cout << " k=" << k << " stride=" << stride << " pad=" << pad);
  HDDP_CHECK_ARG(k <= H + 2 * pad && k <= W + 2 * pad,
                 fn << ": kernel " << k << " does not fit the padded input " << H + 2 * pad << " x " << W + 2 * pad);
}

}  // namespace

int64_t conv_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad) {
  if (in <= 0 || k <= 0 || stride <= 0 || pad < 0 || in + 2 * pad < k) return 0;
  return (in + 2 * pad - k) / stride + 1;
}

template <class T>
void im2col(int64_t B, int64_t C, int64_t H, int64_t W, int64_t k, int64_t stride, int64_t pad, const T* X,
            T* cols) {
  const int64_t OH = conv_out_size(H, k, stride, pad), OW = conv_out_size(W, k, stride, pad);
  const int64_t P = OH * OW, N = B * P;  // N: the row length of cols
  // One (image, channel) plane per iteration: its k*k rows' runs of P columns, disjoint.
#pragma omp parallel for collapse(2) schedule(static) if (N * C * k * k > kParallelMin)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const T* x = X + (b * C + c) * H * W;
      for (int64_t ki = 0; ki < k; ++ki)
        for (int64_t kj = 0; kj < k; ++kj) {
          T* row = cols + ((c * k + ki) * k + kj) * N + b * P;
          const Span s = inside(W, OW, kj, stride, pad);
          for (int64_t oh = 0; oh < OH; ++oh) {
            T* o = row + oh * OW;
            const int64_t ih = oh * stride + ki - pad;
            if (ih < 0 || ih >= H) {
              for (int64_t ow = 0; ow < OW; ++ow) o[ow] = T(0);
              continue;
            }
            const T* xr = x + ih * W;  // input column of ow: ow * stride + kj - pad
            for (int64_t ow = 0; ow < s.lo; ++ow) o[ow] = T(0);
            if (stride == 1 && s.hi > s.lo) {
              const T* src = xr + (s.lo + kj - pad);
              for (int64_t j = 0; j < s.hi - s.lo; ++j) o[s.lo + j] = src[j];
            } else {
              for (int64_t ow = s.lo; ow < s.hi; ++ow) o[ow] = xr[ow * stride + kj - pad];
            }
            for (int64_t ow = s.hi; ow < OW; ++ow) o[ow] = T(0);
          }
        }
    }
}

template <class T>
void col2im(int64_t B, int64_t C, int64_t H, int64_t W, int64_t k, int64_t stride, int64_t pad, const T* cols,
            T* X) {
  const int64_t OH = conv_out_size(H, k, stride, pad), OW = conv_out_size(W, k, stride, pad);
  const int64_t P = OH * OW, N = B * P;
  // Each plane of X is summed by one thread, its rows in order (ki, kj, oh, ow).
#pragma omp parallel for collapse(2) schedule(static) if (N * C * k * k > kParallelMin)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      T* x = X + (b * C + c) * H * W;
      std::fill(x, x + H * W, T(0));
      for (int64_t ki = 0; ki < k; ++ki)
        for (int64_t kj = 0; kj < k; ++kj) {
          const T* row = cols + ((c * k + ki) * k + kj) * N + b * P;
          const Span s = inside(W, OW, kj, stride, pad);
          for (int64_t oh = 0; oh < OH; ++oh) {
            const int64_t ih = oh * stride + ki - pad;
            if (ih < 0 || ih >= H) continue;
            const T* o = row + oh * OW;
            T* xr = x + ih * W;
            if (stride == 1 && s.hi > s.lo) {
              T* dst = xr + (s.lo + kj - pad);
              for (int64_t j = 0; j < s.hi - s.lo; ++j) dst[j] += o[s.lo + j];
            } else {
              for (int64_t ow = s.lo; ow < s.hi; ++ow) xr[ow * stride + kj - pad] += o[ow];
            }
          }
        }
    }
}

int64_t conv2d_group_images(int64_t ckk, int64_t Cout, int64_t P) {
  return std::max<int64_t>(1, kConvGroupValues / std::max<int64_t>(1, (ckk + Cout) * P));
}

int64_t conv2d_scratch_size(int64_t B, int64_t C, int64_t H, int64_t W, int64_t Cout, int64_t k, int64_t stride,
                            int64_t pad) {
  const int64_t P = conv_out_size(H, k, stride, pad) * conv_out_size(W, k, stride, pad);
  if (B <= 0 || P == 0 || C <= 0 || Cout <= 0) return 0;
  // cols, the output (or dY) of a group in C x N x H x W order (for one image: Y or dY
  // itself), dW^T; for the largest group of any batch up to B.
  const int64_t ckk = C * k * k, n = std::min(B, conv2d_group_images(ckk, Cout, P));
  return ckk * n * P + (n > 1 ? Cout * n * P : 0) + ckk * Cout;
}

template <class T>
void conv2d_forward(int64_t B, int64_t C, int64_t H, int64_t W, int64_t Cout, int64_t k, int64_t stride,
                    int64_t pad, const T* X, const T* Wt, const T* b, T* Y, T* scratch) {
  check_conv("conv2d_forward", B, C, H, W, Cout, k, stride, pad);
  HDDP_CHECK_ARG(X && Wt && Y && (scratch || B == 0), "conv2d_forward: X, Wt, Y and scratch must not be null");
  const int64_t OH = conv_out_size(H, k, stride, pad), OW = conv_out_size(W, k, stride, pad);
  const int64_t P = OH * OW, ckk = C * k * k;
  const Groups groups(B, ckk, Cout, P);
  for (int64_t g = 0; g < groups.count; ++g) {
    const int64_t i0 = groups.begin(g), n = groups.end(g) - i0, N = n * P;
    T* cols = scratch;
    T* y = Y + i0 * Cout * P;
    im2col(n, C, H, W, k, stride, pad, X + i0 * C * H * W, cols);
    // Y'(Cout x n*P) = W · cols; for one image that is already its NCHW output.
    T* yc = n == 1 ? y : cols + ckk * N;
    gemm(Trans::No, Trans::No, Cout, N, ckk, T(1), Wt, ckk, cols, N, T(0), yc, N);
    // Runs of P values from Cout x (n x P) to n x (Cout x P), the bias added.
#pragma omp parallel for collapse(2) schedule(static) if (n * Cout * P > kParallelMin)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t co = 0; co < Cout; ++co) {
        const T* src = yc + co * N + i * P;
        T* dst = y + (i * Cout + co) * P;
        if (b) {
          const T bias = b[co];
          for (int64_t p = 0; p < P; ++p) dst[p] = src[p] + bias;
        } else if (src != dst) {
          std::memcpy(dst, src, sizeof(T) * size_t(P));
        }
      }
  }
}

template <class T>
void conv2d_backward(int64_t B, int64_t C, int64_t H, int64_t W, int64_t Cout, int64_t k, int64_t stride,
                     int64_t pad, const T* X, const T* Wt, const T* dY, T* dX, T* dW, T* db, T* scratch,
                     bool accumulate) {
  check_conv("conv2d_backward", B, C, H, W, Cout, k, stride, pad);
  HDDP_CHECK_ARG(X && Wt && dY && dW && (scratch || B == 0),
                 "conv2d_backward: X, Wt, dY, dW and scratch must not be null");
  const int64_t OH = conv_out_size(H, k, stride, pad), OW = conv_out_size(W, k, stride, pad);
  const int64_t P = OH * OW, ckk = C * k * k;
  if (B == 0) {
    if (!accumulate) {  // nothing to add: the overwrite is zeros
      std::fill(dW, dW + Cout * ckk, T(0));
      if (db) std::fill(db, db + Cout, T(0));
    }
    return;
  }
  const Groups groups(B, ckk, Cout, P);
  // dW^T (ckk x Cout) = cols · dY'^T, transposed into dW at the end: dW = dY' · cols^T has
  // only ckk = 9 columns at the CNN's first layer, where it took 1.2 ms against 0.66 (batch 64,
  // one core); the same at its second.
  T* dwt = scratch + ckk * groups.most * P + (groups.most > 1 ? Cout * groups.most * P : 0);
  for (int64_t g = 0; g < groups.count; ++g) {
    const int64_t i0 = groups.begin(g), n = groups.end(g) - i0, N = n * P;
    T* cols = scratch;
    const T* dy = dY + i0 * Cout * P;
    // dY' (Cout x n*P; for one image, dY itself) and db, per output channel: its n planes
    // copied and summed (P values in one fixed order, image after image, group after group).
    T* t = cols + ckk * N;
    const T* dyc = n > 1 ? t : dy;
#pragma omp parallel for schedule(static) if (N * Cout > kParallelMin)
    for (int64_t co = 0; co < Cout; ++co) {
      T sum = T(0);
      for (int64_t i = 0; i < n; ++i) {
        const T* plane = dy + (i * Cout + co) * P;
        if (n > 1) std::memcpy(t + co * N + i * P, plane, sizeof(T) * size_t(P));
        if (db) sum += sum_run(P, plane);
      }
      if (db) db[co] = (g > 0 || accumulate ? db[co] : T(0)) + sum;
    }
    im2col(n, C, H, W, k, stride, pad, X + i0 * C * H * W, cols);
    // The groups' products added in order.
    gemm(Trans::No, Trans::Yes, ckk, Cout, N, T(1), cols, N, dyc, N, g == 0 ? T(0) : T(1), dwt, Cout);
    if (dX) {
      // dcols(ckk x n*P) = W^T · dY', over cols (no longer needed), then summed into dX.
      gemm(Trans::Yes, Trans::No, ckk, N, Cout, T(1), Wt, ckk, dyc, N, T(0), cols, N);
      col2im(n, C, H, W, k, stride, pad, cols, dX + i0 * C * H * W);
    }
  }
  for (int64_t co = 0; co < Cout; ++co)
    for (int64_t r = 0; r < ckk; ++r) dW[co * ckk + r] = (accumulate ? dW[co * ckk + r] : T(0)) + dwt[r * Cout + co];
}

template <class T>
void maxpool2d_forward(int64_t B, int64_t C, int64_t H, int64_t W, int64_t k, int64_t stride, const T* X, T* Y,
                       T* argmax) {
  HDDP_CHECK_ARG(B >= 0 && C > 0 && H > 0 && W > 0 && k > 0 && stride > 0,
                 "maxpool2d_forward: need B >= 0 and C, H, W, k, stride > 0; got B="
                     << B << " C=" << C << " H=" << H << " W=" << W << " k=" << k << " stride=" << stride);
  HDDP_CHECK_ARG(k <= H && k <= W, "maxpool2d_forward: kernel " << k << " does not fit the input " << H << " x " << W);
  HDDP_CHECK_ARG(X && Y && argmax, "maxpool2d_forward: X, Y and argmax must not be null");
  const int64_t OH = conv_out_size(H, k, stride, 0), OW = conv_out_size(W, k, stride, 0);
#pragma omp parallel for schedule(static) if (B * C * OH * OW * k * k > kParallelMin)
  for (int64_t bc = 0; bc < B * C; ++bc) {
    const T* x = X + bc * H * W;
    T* y = Y + bc * OH * OW;
    T* am = argmax + bc * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        // PyTorch's rule: (v > best || isnan(v)) replaces, so the first of equal maxima stays.
        T best = -std::numeric_limits<T>::infinity();
        int64_t at = 0;
        const T* w = x + oh * stride * W + ow * stride;
        for (int64_t ki = 0; ki < k; ++ki)
          for (int64_t kj = 0; kj < k; ++kj) {
            const T v = w[ki * W + kj];
            if (v > best || std::isnan(v)) best = v, at = ki * k + kj;
          }
        y[oh * OW + ow] = best;
        am[oh * OW + ow] = T(at);
      }
  }
}

template <class T>
void maxpool2d_backward(int64_t B, int64_t C, int64_t H, int64_t W, int64_t k, int64_t stride, const T* argmax,
                        const T* dY, T* dX) {
  HDDP_CHECK_ARG(B >= 0 && C > 0 && H > 0 && W > 0 && k > 0 && stride > 0 && k <= H && k <= W,
                 "maxpool2d_backward: need B >= 0, C, H, W, k, stride > 0 and k <= H, W; got B="
                     << B << " C=" << C << " H=" << H << " W=" << W << " k=" << k << " stride=" << stride);
  HDDP_CHECK_ARG(argmax && dY && dX, "maxpool2d_backward: argmax, dY and dX must not be null");
  const int64_t OH = conv_out_size(H, k, stride, 0), OW = conv_out_size(W, k, stride, 0);
#pragma omp parallel for schedule(static) if (B * C * H * W > kParallelMin)
  for (int64_t bc = 0; bc < B * C; ++bc) {
    T* dx = dX + bc * H * W;
    const T* dy = dY + bc * OH * OW;
    const T* am = argmax + bc * OH * OW;
    std::fill(dx, dx + H * W, T(0));
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t at = int64_t(am[oh * OW + ow]);
        dx[(oh * stride + at / k) * W + ow * stride + at % k] += dy[oh * OW + ow];
      }
  }
}

namespace {
// best, at = x, pos where x > best or x is NaN (PyTorch's rule, as maxpool2d_forward). Without
// a branch and with restrict, so that it vectorises.
template <class T>
__attribute__((noinline)) void take_max(int64_t n, const T* __restrict x, T* __restrict best, T* __restrict at, T pos) {
  for (int64_t c = 0; c < n; ++c) {
    const bool take = (x[c] > best[c]) | (x[c] != x[c]);
    best[c] = take ? x[c] : best[c];
    at[c] = take ? pos : at[c];
  }
}

// n <= 64 channels of one output pixel: dx_t[c] (+)= dy[c] where am[c] == t, else (+)= 0, for
// each window position t, dx_t = dx + offset[t]. The positions widened to T first, so that
// every loop is a plain vector select.
template <class T>
__attribute__((noinline)) void route_grad(int64_t n, int64_t taps, const uint8_t* __restrict am,
                                          const T* __restrict dy, T* __restrict dx, const int64_t* offset, bool add) {
  T at[64];
  for (int64_t c = 0; c < n; ++c) at[c] = T(am[c]);
  for (int64_t t = 0; t < taps; ++t) {
    T* __restrict d = dx + offset[t];
    const T pos = T(t);
    if (add) {
      for (int64_t c = 0; c < n; ++c) {
        const T g = dy[c];  // read unconditionally: the select vectorises
        d[c] += at[c] == pos ? g : T(0);
      }
    } else {
      for (int64_t c = 0; c < n; ++c) {
        const T g = dy[c];
        d[c] = at[c] == pos ? g : T(0);
      }
    }
  }
}
}  // namespace

template <class T>
void maxpool2d_forward_nhwc(int64_t B, int64_t C, int64_t H, int64_t W, int64_t k, int64_t stride, const T* X, T* Y,
                            uint8_t* argmax) {
  HDDP_CHECK_ARG(B >= 0 && C > 0 && H > 0 && W > 0 && k > 0 && stride > 0 && k <= H && k <= W && k * k <= 256,
                 "maxpool2d_forward_nhwc: need B >= 0, C, H, W, k, stride > 0, k <= H, W and k*k <= 256; got B="
                     << B << " C=" << C << " H=" << H << " W=" << W << " k=" << k << " stride=" << stride);
  HDDP_CHECK_ARG(X && Y && argmax, "maxpool2d_forward_nhwc: X, Y and argmax must not be null");
  const int64_t OH = conv_out_size(H, k, stride, 0), OW = conv_out_size(W, k, stride, 0);
  // Per output pixel, channels in blocks of kBlock: the best value and its window position as
  // T in local arrays (plain selects the compiler vectorises), then stored.
  constexpr int64_t kBlock = 64;
#pragma omp parallel for collapse(2) schedule(static) if (B * C * OH * OW * k * k > kParallelMin)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t c0 = 0; c0 < C; c0 += kBlock) {
          const int64_t n = std::min(kBlock, C - c0);
          T best[kBlock], at[kBlock];
          const T* x0 = X + ((b * H + oh * stride) * W + ow * stride) * C + c0;
          for (int64_t c = 0; c < n; ++c) best[c] = x0[c], at[c] = T(0);  // the first replaces -inf or is -inf
          for (int64_t t = 1; t < k * k; ++t) {
            const T* x = x0 + ((t / k) * W + t % k) * C;
            const T pos = T(t);
            take_max(n, x, best, at, pos);
          }
          T* y = Y + ((b * OH + oh) * OW + ow) * C + c0;
          uint8_t* am = argmax + ((b * OH + oh) * OW + ow) * C + c0;
          for (int64_t c = 0; c < n; ++c) y[c] = best[c], am[c] = uint8_t(at[c]);
        }
}

template <class T>
void maxpool2d_backward_nhwc(int64_t B, int64_t C, int64_t H, int64_t W, int64_t k, int64_t stride,
                             const uint8_t* argmax, const T* dY, T* dX) {
  HDDP_CHECK_ARG(B >= 0 && C > 0 && H > 0 && W > 0 && k > 0 && stride > 0 && k <= H && k <= W,
                 "maxpool2d_backward_nhwc: need B >= 0, C, H, W, k, stride > 0 and k <= H, W; got B="
                     << B << " C=" << C << " H=" << H << " W=" << W << " k=" << k << " stride=" << stride);
  HDDP_CHECK_ARG(argmax && dY && dX, "maxpool2d_backward_nhwc: argmax, dY and dX must not be null");
  const int64_t OH = conv_out_size(H, k, stride, 0), OW = conv_out_size(W, k, stride, 0);
  // One image per iteration (windows of one image may overlap), its outputs in row-major order;
  // per output pixel, each window position in turn, the channels whose maximum it holds.
  // Windows that do not overlap (stride >= k) write their positions (dx needs no zeroing but
  // for the pixels no window covers); overlapping ones add into zeros.
  const bool overlap = stride < k;
  std::vector<int64_t> offset(size_t(k * k));  // of each window position from the window's corner
  for (int64_t t = 0; t < k * k; ++t) offset[size_t(t)] = (t / k * W + t % k) * C;
#pragma omp parallel for schedule(static) if (B * C * H * W > kParallelMin)
  for (int64_t b = 0; b < B; ++b) {
    T* dx = dX + b * H * W * C;
    if (overlap || OH * stride != H || OW * stride != W) std::fill(dx, dx + H * W * C, T(0));
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const T* dy = dY + ((b * OH + oh) * OW + ow) * C;
        const uint8_t* am = argmax + ((b * OH + oh) * OW + ow) * C;
        T* d = dx + (oh * stride * W + ow * stride) * C;
        for (int64_t c0 = 0; c0 < C; c0 += 64)
          route_grad(std::min<int64_t>(64, C - c0), k * k, am + c0, dy + c0, d + c0, offset.data(), overlap);
      }
  }
}

#define HDDP_INSTANTIATE_CONV(T)                                                                                 \
  template void im2col<T>(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const T*, T*);          \
  template void col2im<T>(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const T*, T*);          \
  template void conv2d_forward<T>(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,        \
                                  const T*, const T*, const T*, T*, T*);                                         \
  template void conv2d_backward<T>(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,       \
                                   const T*, const T*, const T*, T*, T*, T*, T*, bool);                          \
  template void maxpool2d_forward<T>(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const T*, T*, T*);    \
  template void maxpool2d_backward<T>(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const T*, const T*, \
                                      T*);                                                                       \
  template void maxpool2d_forward_nhwc<T>(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const T*, T*,    \
                                          uint8_t*);                                                             \
  template void maxpool2d_backward_nhwc<T>(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const uint8_t*, \
                                           const T*, T*);
HDDP_INSTANTIATE_CONV(float)
HDDP_INSTANTIATE_CONV(double)

namespace layers {

namespace {

void check_image(const Shape& in, int64_t channels) {
  HDDP_CHECK_ARG(in.size() == 3, "expects a (C, H, W) image input but gets " << to_string(in));
  HDDP_CHECK_ARG(channels < 0 || in[0] == channels,
                 "expects " << channels << " input channels, gets " << in[0] << " (input shape " << to_string(in) << ")");
}

}  // namespace

template <class T>
Conv2d<T>::Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, bool bias)
    : in_(in), out_(out), k_(kernel), stride_(stride), pad_(padding), bias_(bias) {}

template <class T>
std::string Conv2d<T>::name() const {
  // PyTorch's repr with scalar sizes: padding only when not 0, bias only when off.
  return "Conv2d(" + std::to_string(in_) + ", " + std::to_string(out_) + ", kernel_size=" + std::to_string(k_) +
         ", stride=" + std::to_string(stride_) + (pad_ ? ", padding=" + std::to_string(pad_) : "") +
         (bias_ ? ")" : ", bias=False)");
}

template <class T>
Shape Conv2d<T>::setup(const Shape& in) {
  HDDP_CHECK_ARG(in_ > 0 && out_ > 0 && k_ > 0 && stride_ > 0 && pad_ >= 0,
                 "in and out channels, kernel and stride must be positive and padding not negative");
  check_image(in, in_);
  H_ = in[1], W_ = in[2];
  HDDP_CHECK_ARG(k_ <= H_ + 2 * pad_ && k_ <= W_ + 2 * pad_,
                 "kernel " << k_ << " does not fit the padded input " << H_ + 2 * pad_ << " x " << W_ + 2 * pad_);
  return {out_, conv_out_size(H_, k_, stride_, pad_), conv_out_size(W_, k_, stride_, pad_)};
}

template <class T>
std::vector<ParamSpec> Conv2d<T>::parameters() const {
  std::vector<ParamSpec> p{{"weight", out_, in_ * k_ * k_, {out_, in_, k_, k_}}};  // PyTorch's (out, in, k, k)
  if (bias_) p.push_back({"bias", out_, 1, {out_}, false});
  return p;
}

template <class T>
void Conv2d<T>::reset_parameters(Rng& rng, T* const* params) const {
  const int64_t fan_in = in_ * k_ * k_;
  const T bound = T(1.0 / std::sqrt(double(fan_in)));
  for (int64_t i = 0; i < out_ * fan_in; ++i) params[0][i] = rng.uniform<T>(-bound, bound);
  if (bias_)
    for (int64_t i = 0; i < out_; ++i) params[1][i] = rng.uniform<T>(-bound, bound);
}

template <class T>
bool Conv2d<T>::direct() const {
  return std::is_same_v<T, float> && conv_direct_supported(k_, stride_, pad_);
}

template <class T>
bool Conv2d<T>::fuse_maxpool(int64_t kernel, int64_t stride) {
  const int64_t OH = conv_out_size(H_, k_, stride_, pad_), OW = conv_out_size(W_, k_, stride_, pad_);
  if (!relu_ || !direct() || out_layout_ != ImageLayout::NHWC || kernel != stride || kernel * kernel > 256 ||
      kernel > OH || kernel > OW)
    return false;
  pool_ = kernel;
  return true;
}

template <class T>
int64_t Conv2d<T>::saved_size(int64_t batch) const {
  if (pool_ == 0) return 0;
  const int64_t n = batch * out_ * (conv_out_size(H_, k_, stride_, pad_) / pool_) *
                    (conv_out_size(W_, k_, stride_, pad_) / pool_);
  return (n + int64_t(sizeof(T)) - 1) / int64_t(sizeof(T));
}

template <class T>
int64_t Conv2d<T>::scratch_size(int64_t batch) const {
  if (direct()) return std::max(conv_direct_forward_scratch(shape(batch)), conv_direct_backward_scratch(shape(batch)));
  return conv2d_scratch_size(batch, in_, H_, W_, out_, k_, stride_, pad_);
}

template <class T>
void Conv2d<T>::forward(const Forward<T>& f) const {
  if constexpr (std::is_same_v<T, float>) {
    if (direct())
      return conv_direct_forward(shape(f.batch), in_layout_, out_layout_, f.x, f.params[0],
                                 bias_ ? f.params[1] : nullptr, relu_, f.y, f.scratch, pool_,
                                 reinterpret_cast<uint8_t*>(f.saved), f.bf16);
  }
  conv2d_forward(f.batch, in_, H_, W_, out_, k_, stride_, pad_, f.x, f.params[0], bias_ ? f.params[1] : nullptr, f.y,
                 f.scratch);
}

template <class T>
void Conv2d<T>::backward(const Backward<T>& b) const {
  if constexpr (std::is_same_v<T, float>) {
    if (direct())
      return conv_direct_backward(shape(b.batch), in_layout_, out_layout_, b.x, b.params[0], b.dy, relu_ ? b.y : nullptr, b.dx,
                                  b.grads[0], bias_ ? b.grads[1] : nullptr, b.accumulate, b.scratch, pool_,
                                  reinterpret_cast<const uint8_t*>(b.saved), b.bf16);
  }
  conv2d_backward(b.batch, in_, H_, W_, out_, k_, stride_, pad_, b.x, b.params[0], b.dy, b.dx, b.grads[0],
                  bias_ ? b.grads[1] : nullptr, b.scratch, b.accumulate);
}

template <class T>
double Conv2d<T>::flops(int64_t batch) const {
  const double outputs = double(batch) * double(out_) * double(conv_out_size(H_, k_, stride_, pad_)) *
                         double(conv_out_size(W_, k_, stride_, pad_));
  return 2.0 * outputs * double(in_ * k_ * k_) + (bias_ ? outputs : 0.0);
}

template <class T>
MaxPool2d<T>::MaxPool2d(int64_t kernel, std::optional<int64_t> stride) : k_(kernel), stride_(stride.value_or(kernel)) {}

template <class T>
std::string MaxPool2d<T>::name() const {
  return "MaxPool2d(kernel_size=" + std::to_string(k_) + ", stride=" + std::to_string(stride_) + ")";
}

template <class T>
Shape MaxPool2d<T>::setup(const Shape& in) {
  HDDP_CHECK_ARG(k_ > 0 && stride_ > 0, "kernel and stride must be positive");
  check_image(in, -1);
  C_ = in[0], H_ = in[1], W_ = in[2];
  HDDP_CHECK_ARG(k_ <= H_ && k_ <= W_, "kernel " << k_ << " does not fit the input " << H_ << " x " << W_);
  OH_ = conv_out_size(H_, k_, stride_, 0), OW_ = conv_out_size(W_, k_, stride_, 0);
  return {C_, OH_, OW_};
}

template <class T>
int64_t MaxPool2d<T>::saved_size(int64_t batch) const {
  const int64_t n = batch * C_ * OH_ * OW_;
  return nhwc_ ? (n + int64_t(sizeof(T)) - 1) / int64_t(sizeof(T)) : n;  // bytes, or one T each
}

template <class T>
void MaxPool2d<T>::forward(const Forward<T>& f) const {
  if (nhwc_)
    maxpool2d_forward_nhwc(f.batch, C_, H_, W_, k_, stride_, f.x, f.y, reinterpret_cast<uint8_t*>(f.saved));
  else
    maxpool2d_forward(f.batch, C_, H_, W_, k_, stride_, f.x, f.y, f.saved);
}

template <class T>
void MaxPool2d<T>::backward(const Backward<T>& b) const {
  if (!b.dx) return;
  if (nhwc_)
    maxpool2d_backward_nhwc(b.batch, C_, H_, W_, k_, stride_, reinterpret_cast<const uint8_t*>(b.saved), b.dy, b.dx);
  else
    maxpool2d_backward(b.batch, C_, H_, W_, k_, stride_, b.saved, b.dy, b.dx);
}

template <class T>
double MaxPool2d<T>::flops(int64_t batch) const {
  return double(batch) * double(C_) * double(OH_) * double(OW_) * double(k_ * k_);
}

template class Conv2d<float>;
template class Conv2d<double>;
template class MaxPool2d<float>;
template class MaxPool2d<double>;

}  // namespace layers

}  // namespace hddp
