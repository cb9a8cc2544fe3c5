// The naive twin of the fused attention (attention.h): per (sample, head) the whole T x T
// matrix of scores and probabilities, in double, rounded to T once at the end. Slow and plain:
// the reference the tests and benchmarks hold the fused kernel to.
#include <algorithm>
#include <cmath>
#include <vector>

#include <hddp/kernels/attention.h>
#include <hddp/kernels/check.h>

namespace hddp {
namespace {

// P (T x T, row-major, zero above the diagonal) and lse of head h of sample b.
template <class T>
void probabilities(const AttentionShape& s, int64_t b, int64_t h, const T* qkv, std::vector<double>& P,
                   std::vector<double>& lse) {
  const int64_t n = s.T, C = s.C, D = s.D(), ld = 3 * C;
  const T* Q = qkv + b * n * ld + h * D;
  const T* K = Q + C;
  const double scale = 1.0 / std::sqrt(double(D));
  P.assign(size_t(n * n), 0.0);
  lse.assign(size_t(n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double mx = -INFINITY;
    for (int64_t j = 0; j <= i; ++j) {
      double acc = 0;
      for (int64_t d = 0; d < D; ++d) acc += double(Q[i * ld + d]) * double(K[j * ld + d]);
      P[size_t(i * n + j)] = acc * scale;
      mx = std::max(mx, acc * scale);
    }
    double sum = 0;
    for (int64_t j = 0; j <= i; ++j) sum += std::exp(P[size_t(i * n + j)] - mx);
    for (int64_t j = 0; j <= i; ++j) P[size_t(i * n + j)] = std::exp(P[size_t(i * n + j)] - mx) / sum;
    lse[size_t(i)] = mx + std::log(sum);
  }
}

}  // namespace

template <class T>
void attention_naive_forward(const AttentionShape& s, const T* qkv, T* out, T* lse) {
  check_attention_shape(s);
  const int64_t n = s.T, C = s.C, D = s.D(), ld = 3 * C;
  std::vector<double> P, L;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      probabilities(s, b, h, qkv, P, L);
      const T* V = qkv + b * n * ld + 2 * C + h * D;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j <= i; ++j) acc += P[size_t(i * n + j)] * double(V[j * ld + d]);
          out[(b * n + i) * C + h * D + d] = T(acc);
        }
        lse[(b * s.H + h) * n + i] = T(L[size_t(i)]);
      }
    }
}

template <class T>
void attention_naive_backward(const AttentionShape& s, const T* qkv, const T* /*out*/, const T* /*lse*/,
                              const T* dout, T* dqkv) {
  check_attention_shape(s);
  const int64_t n = s.T, C = s.C, D = s.D(), ld = 3 * C;
  const double scale = 1.0 / std::sqrt(double(D));
  std::vector<double> P, L, dP(size_t(n * n)), dS(size_t(n * n));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      probabilities(s, b, h, qkv, P, L);
      const int64_t off = b * n * ld + h * D;
      const T *Q = qkv + off, *K = Q + C, *V = Q + 2 * C;
      T *dQ = dqkv + off, *dK = dQ + C, *dV = dQ + 2 * C;
      const T* dO = dout + b * n * C + h * D;
      for (int64_t i = 0; i < n; ++i)  // dP = dO V^T
        for (int64_t j = 0; j <= i; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < D; ++d) acc += double(dO[i * C + d]) * double(V[j * ld + d]);
          dP[size_t(i * n + j)] = acc;
        }
      for (int64_t i = 0; i < n; ++i) {  // dS = P (dP - rowsum(P dP))
        double r = 0;
        for (int64_t j = 0; j <= i; ++j) r += P[size_t(i * n + j)] * dP[size_t(i * n + j)];
        for (int64_t j = 0; j < n; ++j) dS[size_t(i * n + j)] = j <= i ? P[size_t(i * n + j)] * (dP[size_t(i * n + j)] - r) : 0.0;
      }
      for (int64_t i = 0; i < n; ++i)
        for (int64_t d = 0; d < D; ++d) {
          double dq = 0, dk = 0, dv = 0;
          for (int64_t j = 0; j < n; ++j) {
            dq += dS[size_t(i * n + j)] * double(K[j * ld + d]);
            dk += dS[size_t(j * n + i)] * double(Q[j * ld + d]);
            dv += P[size_t(j * n + i)] * double(dO[j * C + d]);
          }
          dQ[i * ld + d] = T(dq * scale), dK[i * ld + d] = T(dk * scale), dV[i * ld + d] = T(dv);
        }
    }
}

template void attention_naive_forward<float>(const AttentionShape&, const float*, float*, float*);
template void attention_naive_forward<double>(const AttentionShape&, const double*, double*, double*);
template void attention_naive_backward<float>(const AttentionShape&, const float*, const float*, const float*,
                                              const float*, float*);
template void attention_naive_backward<double>(const AttentionShape&, const double*, const double*, const double*,
                                               const double*, double*);

}  // namespace hddp
