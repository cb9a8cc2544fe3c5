// The naive twins of the direct convolution (conv.h): NHWC, stride 1, plain loops, each value
// summed over (ki, kj, ci) (or over images and pixels) in loop order, in float.
#include <algorithm>
#include <vector>

#include <hddp/kernels/check.h>
#include <hddp/kernels/conv.h>

namespace hddp {

void conv_naive_forward(const ConvShape& s, const float* X, const float* Wt, const float* b, bool relu, float* Y) {
  HDDP_CHECK_ARG(conv_direct_supported(s.k, 1, s.pad), "conv_naive_forward: needs 0 <= pad < k <= 16");
  const int64_t OH = s.OH(), OW = s.OW();
  for (int64_t bi = 0; bi < s.B; ++bi)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t co = 0; co < s.Cout; ++co) {
          float acc = 0.0f;
          for (int64_t ki = 0; ki < s.k; ++ki)
            for (int64_t kj = 0; kj < s.k; ++kj) {
              const int64_t ih = oh + ki - s.pad, iw = ow + kj - s.pad;
              if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
              for (int64_t ci = 0; ci < s.C; ++ci)
                acc += X[((bi * s.H + ih) * s.W + iw) * s.C + ci] * Wt[((co * s.C + ci) * s.k + ki) * s.k + kj];
            }
          if (b) acc += b[co];
          Y[((bi * OH + oh) * OW + ow) * s.Cout + co] = relu ? std::max(acc, 0.0f) : acc;
        }
}

void conv_naive_backward(const ConvShape& s, const float* X, const float* Wt, const float* dY, const float* y,
                         float* dX, float* dW, float* db, bool accumulate) {
  HDDP_CHECK_ARG(conv_direct_supported(s.k, 1, s.pad), "conv_naive_backward: needs 0 <= pad < k <= 16");
  const int64_t OH = s.OH(), OW = s.OW(), nw = s.Cout * s.C * s.k * s.k;
  if (!accumulate) {
    std::fill(dW, dW + nw, 0.0f);
    if (db) std::fill(db, db + s.Cout, 0.0f);
  }
  if (dX) std::fill(dX, dX + s.B * s.H * s.W * s.C, 0.0f);
  std::vector<float> gw(size_t(nw), 0.0f), gb(size_t(s.Cout), 0.0f);
  for (int64_t bi = 0; bi < s.B; ++bi)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t co = 0; co < s.Cout; ++co) {
          const int64_t at = ((bi * OH + oh) * OW + ow) * s.Cout + co;
          const float g = y && !(y[at] > 0.0f) ? 0.0f : dY[at];
          gb[size_t(co)] += g;
          for (int64_t ki = 0; ki < s.k; ++ki)
            for (int64_t kj = 0; kj < s.k; ++kj) {
              const int64_t ih = oh + ki - s.pad, iw = ow + kj - s.pad;
              if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
              for (int64_t ci = 0; ci < s.C; ++ci) {
                const int64_t w = ((co * s.C + ci) * s.k + ki) * s.k + kj, x = ((bi * s.H + ih) * s.W + iw) * s.C + ci;
                gw[size_t(w)] += X[x] * g;
                if (dX) dX[x] += Wt[w] * g;
              }
            }
        }
  for (int64_t i = 0; i < nw; ++i) dW[i] += gw[size_t(i)];
  if (db)
    for (int64_t co = 0; co < s.Cout; ++co) db[co] += gb[size_t(co)];
}

}  // namespace hddp
