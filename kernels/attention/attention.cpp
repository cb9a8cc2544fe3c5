// The fused attention's task split (attention.h): forward over (sample, head, query block),
// backward over (sample, head), static schedules; the loops are attention_loops.h's, in the set
// chosen for this CPU.
#include <hddp/kernels/attention.h>

#include <algorithm>

#include <hddp/kernels/attention/attention_blocking.h>
#include <hddp/kernels/attention/attention_ukernel.h>
#include <hddp/kernels/check.h>
#include <hddp/kernels/cpu_isa.h>

namespace hddp {
namespace detail {
namespace {
constexpr IsaTable<AttnKernels> kAttnSets{
    kAttentionIsa, {attention_kernels_avx512, attention_kernels_avx2, attention_kernels_portable}};

const AttnKernels& cpu_attention() {
  static const AttnKernels& k = kAttnSets.chosen();
  return k;
}

template <class T>
const AttnLoops<T>& loops() {
  if constexpr (sizeof(T) == 4) return cpu_attention().s;
  else return cpu_attention().d;
}
}  // namespace
}  // namespace detail

void check_attention_shape(const AttentionShape& s) {
  HDDP_CHECK_ARG(s.B >= 0 && s.T > 0 && s.C > 0 && s.H > 0 && s.C % s.H == 0,
                 "attention: need B >= 0, T > 0, C > 0, H > 0 and C divisible by H; got B=" << s.B << " T=" << s.T
                                                                                             << " C=" << s.C << " H=" << s.H);
}

const char* attention_kernel_name() { return detail::cpu_attention().name; }

template <class T>
void attention_forward(const AttentionShape& s, const T* qkv, T* out, T* lse) {
  check_attention_shape(s);
  HDDP_CHECK_ARG(s.B == 0 || (qkv && out && lse), "attention_forward: qkv, out and lse must not be null");
  const auto& k = detail::loops<T>();
  const int64_t nb = (s.T + detail::kAttnBlock - 1) / detail::kAttnBlock, tasks = s.B * s.H * nb;
  // The longest query blocks (the last, which see every key) first: dynamic would be faster on
  // a ragged split, but static keeps each task on a thread of its own; the bits never depend on it.
#pragma omp parallel for schedule(static) if (tasks > 1 && s.B * s.T * s.C >= 4096)
  for (int64_t i = 0; i < tasks; ++i) {
    const int64_t blk = nb - 1 - i % nb, bh = i / nb;
    const int64_t q0 = blk * detail::kAttnBlock, q1 = std::min(s.T, q0 + detail::kAttnBlock);
    k.forward(s, bh / s.H, bh % s.H, q0, q1, qkv, out, lse);
  }
}

template <class T>
void attention_backward(const AttentionShape& s, const T* qkv, const T* out, const T* lse, const T* dout, T* dqkv) {
  check_attention_shape(s);
  HDDP_CHECK_ARG(s.B == 0 || (qkv && out && lse && dout && dqkv),
                 "attention_backward: qkv, out, lse, dout and dqkv must not be null");
  const auto& k = detail::loops<T>();
  const int64_t tasks = s.B * s.H;
#pragma omp parallel for schedule(static) if (tasks > 1 && s.B * s.T * s.C >= 4096)
  for (int64_t i = 0; i < tasks; ++i) k.backward(s, i / s.H, i % s.H, qkv, out, lse, dout, dqkv);
}

template void attention_forward<float>(const AttentionShape&, const float*, float*, float*);
template void attention_forward<double>(const AttentionShape&, const double*, double*, double*);
template void attention_backward<float>(const AttentionShape&, const float*, const float*, const float*, const float*,
                                        float*);
template void attention_backward<double>(const AttentionShape&, const double*, const double*, const double*,
                                         const double*, double*);

}  // namespace hddp
