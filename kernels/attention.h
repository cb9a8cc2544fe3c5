#pragma once
// Causal multi-head self-attention as one fused kernel: FlashAttention's blocked online softmax
// on the CPU (Dao et al. 2022, "FlashAttention", Algorithms 1 and 2; FlashAttention-2's loop
// order). The T x T score matrix is never stored: a block of queries meets one block of keys at
// a time, the running row maximum and sum rescale the output as it goes, and backward recomputes
// each block's scores from the log-sum-exp kept by forward.
//
// Layout (per sample, positions t in [0, T), heads h in [0, H), head size D = C / H):
//   qkv  B x T x 3C   the one q|k|v product of a Linear(C, 3C): q of head h at columns
//                     [h D, (h+1) D), k at C + h D, v at 2C + h D (nanoGPT's split)
//   out  B x T x C    heads side by side: out[b, t, h D + d]
//   lse  B x H x T    log-sum-exp of each row of scaled scores, for backward
// out[t] = softmax_{s <= t}(q_t . k_s / sqrt(D)) v: each position sees itself and the past.
//
// Threads: forward splits (sample, head, query block), backward (sample, head); each result
// is computed by one thread in a fixed order, so the bits do not depend on the thread count.
// Memory: O(block^2) per thread, nothing of size T x T. The loops (attention/) run the set
// chosen for this CPU (HDDP_ATTENTION_KERNEL=avx512|avx2|portable forces one).
#include <cstdint>

namespace hddp {

struct AttentionShape {
  int64_t B = 0, T = 0, C = 0, H = 0;  // samples, positions, channels, heads (C % H == 0)
  int64_t D() const { return C / H; }
};

// Throws std::invalid_argument unless B >= 0, T > 0, H > 0, C > 0 and C % H == 0.
void check_attention_shape(const AttentionShape& s);

template <class T>
void attention_forward(const AttentionShape& s, const T* qkv, T* out, T* lse);

// dqkv (B x T x 3C) = dLoss/dqkv, overwritten, from dout = dLoss/dout and forward's out and lse.
template <class T>
void attention_backward(const AttentionShape& s, const T* qkv, const T* out, const T* lse, const T* dout, T* dqkv);

// The attention set in use: "avx512", "avx2" or "portable".
const char* attention_kernel_name();

// The naive twins: the same contracts, the whole T x T score matrix of one (sample, head) at a
// time in plain loops; what the tests and benchmarks check the fused kernel against.
template <class T>
void attention_naive_forward(const AttentionShape& s, const T* qkv, T* out, T* lse);
template <class T>
void attention_naive_backward(const AttentionShape& s, const T* qkv, const T* out, const T* lse, const T* dout,
                              T* dqkv);

}  // namespace hddp
