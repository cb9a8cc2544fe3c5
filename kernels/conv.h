#pragma once
// Direct 2-D convolution, stride 1, over channels-last (NHWC) images: no im2col buffer.
//
// Shapes: B images of C channels, H x W, a square kernel k, zero padding pad < k:
// OH = H + 2 pad - k + 1, OW likewise. Activations X (B, H, W, C) and Y (B, OH, OW, Cout), or
// NCHW (PyTorch's order) where a flag says so; weights Wt in PyTorch's (Cout, C, k, k) order,
// re-blocked inside each call (k*k*C*Cout values: cheap beside the products).
//
// Every pass is a sum of batch-reduce GEMMs (conv/conv_ukernel.h) over rows of the kernel: for a
// kernel row ki, the taps (kj, ci) of one output pixel are k*C consecutive values of a zero-
// padded input row, so one product of K = k*C covers a kernel row and rows outside the image are
// left out of the batch:
//   forward        Y(ow, co)    = sum_ki  Xp[ih](ow .. ow+k-1, ci)      . Wr[ki]((kj, ci), co)
//   input grad     dX(iw, ci)   = sum_ki  dYp[oh](iw .. iw+k-1, co)     . Wd[ki]((kj', co), ci)
//   weight grad    dW[ki]((kj, ci), co) = sum_{b, oh} Xp[ih](ow+kj, ci)^T . dYp[oh](ow, co)
// Xp: the input with `pad` zero columns either side; dYp: dY with k-1-pad zero columns either
// side and its channels zero-padded to whole vectors; Wr, Wd: the weights re-blocked (Wd with
// kj reversed). Loops (conv/conv.cpp): images x output rows x channel blocks for the forward
// and the input gradient, fixed image chunks x kernel rows x (kj, ci) tiles for the weight
// gradient, one parallel region each; tiles and chunks depend on the shapes alone, so every
// result is bitwise the same for any OpenMP thread count. The micro-kernel set follows HDDP_CONV_KERNEL (avx512,
// avx2, portable) where set, else the widest the CPU has (kernels/cpu_isa.h).
//
// bf16 = true runs the products on the bf16 unit chosen for this CPU by measured rates (units.h),
// as PyTorch's CPU autocast does: a pass that unit takes reads its operands rounded to bf16
// (bf16.h) and sums in float; the output, the gradients and the bias stay float. A pass no bf16
// unit takes here runs in float, as without bf16 (rounding would only cost time): never slower
// than float. detail::conv_bf16_passes (conv/conv_ukernel.h) says which:
//   amx         AMX tiles (conv/conv_amx.cpp), activations read in place as rows of "virtual"
//               pixels (an image's padded rows one after another, the columns past the output
//               computed in whole tiles and dropped): the forward (pooling fused) where k*C fills
//               whole tiles of 32, the input gradient (as a forward over dY padded by k-1-pad),
//               the weight gradient where C does (the padded input channel-major against dY in
//               pixel pairs, per chunk of images as the float pass); a first layer of one channel
//               (1 of a tile's 32 rows) stays float
//   avx512bf16  vdpbf16ps on bf16 copies (the forward and the input gradient, K = k*C even)
//   float       none: no bf16 unit beats the float FMA on this CPU
// Every path gives the same result for any thread count; paths differ in their sums' order.
#include <cstdint>
#include <string>

namespace hddp {

struct ConvShape {
  int64_t B = 0, C = 0, H = 0, W = 0, Cout = 0, k = 0, pad = 0;
  int64_t OH() const { return H + 2 * pad - k + 1; }
  int64_t OW() const { return W + 2 * pad - k + 1; }
};

// Whether the direct kernels take this convolution: stride 1, 0 <= pad < k <= 16.
bool conv_direct_supported(int64_t k, int64_t stride, int64_t pad);

// Memory order of an image buffer.
enum class ImageLayout { NCHW, NHWC };

// Scratch values the passes need (float), for the shape's B.
int64_t conv_direct_forward_scratch(const ConvShape& s);
int64_t conv_direct_backward_scratch(const ConvShape& s);

// Y = relu?(W * X + b). b: Cout values or nullptr. Throws std::invalid_argument on a shape the
// direct kernels do not take or null buffers.
// pool > 0 fuses MaxPool2d(pool) (stride = pool, floor mode; out must be NHWC) into the store: Y
// is the pooled (B, OH/pool, OW/pool, Cout), argmax one byte per value of it, the window
// position (ki*pool + kj) of the maximum, ties to the first and NaN winning as PyTorch's; the
// convolution's own output is never written.
void conv_direct_forward(const ConvShape& s, ImageLayout in, ImageLayout out, const float* X, const float* Wt,
                         const float* b, bool relu, float* Y, float* scratch, int64_t pool = 0,
                         uint8_t* argmax = nullptr, bool bf16 = false);

// Backward given dY (layout `out`): where y is not null (the forward's output, ReLU fused), dY
// counts only where y > 0.
//   dX  overwritten (layout `in`); nullptr skips it
//   dW  (Cout, C, k, k)   += (accumulate) or = (!accumulate)
//   db  (Cout)            the same; nullptr: no bias
// With pool > 0, dY, y and argmax are the pooled forward's: dY reaches the window position argmax
// names (and only where y > 0 when y is given).
void conv_direct_backward(const ConvShape& s, ImageLayout in, ImageLayout out, const float* X, const float* Wt,
                          const float* dY, const float* y, float* dX, float* dW, float* db, bool accumulate,
                          float* scratch, int64_t pool = 0, const uint8_t* argmax = nullptr, bool bf16 = false);

// The micro-kernel set the direct convolution uses ("avx512", "avx2", "portable").
std::string conv_kernel_name();

// The naive twins: the same contracts (NHWC only, no scratch) as plain loops, each output value
// summed over (ki, kj, ci) in that order; what tests and benchmarks check the fast kernels
// against.
void conv_naive_forward(const ConvShape& s, const float* X, const float* Wt, const float* b, bool relu, float* Y);
void conv_naive_backward(const ConvShape& s, const float* X, const float* Wt, const float* dY, const float* y,
                         float* dX, float* dW, float* db, bool accumulate);

}  // namespace hddp
