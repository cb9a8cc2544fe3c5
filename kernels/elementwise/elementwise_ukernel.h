#pragma once
// The instruction-set-specific loops of the element-wise kernels, chosen once at run time like
// the GEMM micro-kernels (gemm_ukernel.h). elementwise.cpp splits the work among threads and
// computes the scalars; each loop here covers one thread's slice. The arithmetic is written once,
// in elementwise_loops.h, and compiled once per instruction set, each file the only one built with
// its flags:
//   elementwise_portable.cpp  baseline x86-64 (SSE2)
//   elementwise_avx2.cpp      AVX2 + FMA
//   elementwise_avx512.cpp    AVX-512F
// Every float loop gives the same bits in every set: no FMA contraction (-ffp-contract=off),
// only the fused multiply-adds the Adam updates spell out (correctly rounded, hence the same
// everywhere: an FMA instruction in the AVX2 and AVX-512 sets, an exact emulation for floats in
// the portable one), sums in a fixed order whatever the vector width, tanh computed in double by
// plain operations (0.5 ulp). tanh of doubles is SLEEF's vector tanh (1.0 ulp, the _u10
// functions) at the set's width, whose last bit may differ between sets.
#include <cstdint>
#include <string>

namespace hddp::detail {

// Adam's and AdamW's per-step scalars (elementwise.h gives the formulas), in T. wd: Adam's
// L2 term (grad + wd * param); decay: AdamW's factor 1 - lr * weight_decay on the parameters.
template <class T>
struct AdamScalars {
  T b1, b2, one_b1, one_b2, eps, wd, step_size, bc2_sqrt;
  T decay = T(1);  // 1: no decoupled decay (Adam)
};

// SGD's scalars; first: the first step (buf = g).
template <class T>
struct SgdScalars {
  T lr, momentum, wd;
  bool first, nesterov;
};

template <class T>
struct EltLoops {
  void (*tanh_forward)(int64_t n, const T* x, T* y);
  void (*tanh_backward)(int64_t n, const T* y, const T* dy, T* dx);
  void (*relu_forward)(int64_t n, const T* x, T* y);
  void (*relu_backward)(int64_t n, const T* y, const T* dy, T* dx);
  void (*add_bias_rows)(int64_t M, int64_t N, const T* b, T* Y, int64_t ldy);
  // out(N) (+)= column sums of X(M x N), rows added in order; N <= kColBlock.
  void (*col_sums)(int64_t M, int64_t N, const T* X, int64_t ldx, T* out, bool accumulate);
  // Sum of (a - b)^2 in double: eight running sums (lane i % 8), added pairwise at the end.
  double (*sum_sq_diff)(int64_t n, const T* a, const T* b);
  // Sum of x^2 in double, the same eight lanes.
  double (*sum_sq)(int64_t n, const T* x);
  void (*scaled_diff)(int64_t n, T s, const T* a, const T* b, T* out);
  void (*axpy)(int64_t n, T a, const T* x, T* y);
  void (*scale)(int64_t n, T a, T* x);
  bool (*all_finite)(int64_t n, const T* x);
  void (*adam)(int64_t n, T* param, const T* grad, T* m, T* v, const AdamScalars<T>& s);
  void (*adamw)(int64_t n, T* param, const T* grad, T* m, T* v, const AdamScalars<T>& s);
  void (*sgd)(int64_t n, T* param, const T* grad, T* buf, const SgdScalars<T>& s);
  void (*gelu_forward)(int64_t n, const T* x, T* y);
  void (*gelu_backward)(int64_t n, const T* x, const T* dy, T* dx);
  void (*layernorm_forward)(int64_t rows, int64_t C, const T* X, const T* w, const T* b, double eps, T* Y, T* mean,
                            T* rstd);
  // dw, db += over the rows, in order; dX may be null.
  void (*layernorm_backward)(int64_t rows, int64_t C, const T* X, const T* w, const T* mean, const T* rstd,
                             const T* dY, T* dX, T* dw, T* db);
  double (*exp_shifted)(int64_t n, const T* x, double shift, T* p);
};

inline constexpr int64_t kColBlock = 64;  // columns per col_sums call (an accumulator row on the stack)

// bf16 conversions (bf16.h), as raw 16-bit patterns.
struct Bf16Loops {
  void (*to_bf16)(int64_t n, const float* x, uint16_t* y);
  void (*to_float)(int64_t n, const uint16_t* x, float* y);
  void (*round)(int64_t n, const float* x, float* y);
};

struct EltKernels {
  const char* name;
  EltLoops<float> s;
  EltLoops<double> d;
  Bf16Loops bf16;
};

const EltKernels& elementwise_kernels_portable();
const EltKernels& elementwise_kernels_avx2();    // call only where cpu_has_avx2_fma()
const EltKernels& elementwise_kernels_avx512();  // call only where cpu_has_avx512()

// The set the element-wise kernels run, chosen on first use: HDDP_ELEMENTWISE_KERNEL=
// avx512|avx2|portable forces one (an unknown name, or one this CPU cannot execute, throws
// std::invalid_argument); unset, the widest the CPU supports.
const EltKernels& cpu_elementwise();
// The set of that name if this CPU can execute it, else nullptr; throws on an unknown name.
const EltKernels* elementwise_by_name(const std::string& name);

template <class T>
const EltLoops<T>& loops(const EltKernels& k) {
  if constexpr (sizeof(T) == 4) return k.s;
  else return k.d;
}

}  // namespace hddp::detail
