#pragma once
// The instruction-set-specific part of the fused attention: one (sample, head) task of each
// pass, written once in attention_loops.h and compiled once per set (attention_<isa>.cpp, the
// only files built with the set's flags). attention.cpp splits the tasks among threads.
#include <cstdint>

#include <hddp/kernels/attention.h>

namespace hddp::detail {

template <class T>
struct AttnLoops {
  // Queries [q0, q1) of head h of sample b (q1 - q0 <= kAttnBlock): their rows of out and lse.
  void (*forward)(const AttentionShape& s, int64_t b, int64_t h, int64_t q0, int64_t q1, const T* qkv, T* out, T* lse);
  // Head h of sample b: its columns of dqkv, every position.
  void (*backward)(const AttentionShape& s, int64_t b, int64_t h, const T* qkv, const T* out, const T* lse,
                   const T* dout, T* dqkv);
};

struct AttnKernels {
  const char* name;
  AttnLoops<float> s;
  AttnLoops<double> d;
};

const AttnKernels& attention_kernels_portable();
const AttnKernels& attention_kernels_avx2();    // call only where cpu_has_avx2_fma()
const AttnKernels& attention_kernels_avx512();  // call only where cpu_has_avx512()

}  // namespace hddp::detail
