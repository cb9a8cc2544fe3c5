#pragma once
// Convolution and pooling, at the two levels of core/layers.h: kernels as free functions over
// plain buffers, shapes in the signature, then the layer objects (namespace hddp::layers) and
// their specs Conv2d(...), MaxPool2d(...).
//
// Inside a model a float Conv2d at stride 1 runs the direct convolution of kernels/conv.h over
// channels-last (NHWC) activations, with the next ReLU and MaxPool2d in its store where they
// follow (Sequential decides: core/layer.h). At the CNN's shapes (batch 64, one AMD EPYC Zen 5
// core) it runs the second layer's forward and backward at 78 % of the FMA probe against 51 %
// for the im2col GEMMs below, which stay for double, other strides and as the NCHW reference.
//
// Shapes: B images of C channels, H x W each; X is B x C x H x W row-major. A square kernel k,
// stride s, zero padding p: OH = (H + 2p - k) / s + 1 (floor), OW likewise; P = OH * OW.
//
// Conv2d through hddp::gemm on an im2col matrix laid out channels first,
//   cols (C*k*k) x (n*P): row (c, ki, kj), column (image, oh, ow), for a group of n images,
// so that for a fixed row the output pixels of one image row are a contiguous run of the input
// (a plain copy at stride 1), and the products are
//   forward   Y'(Cout x n*P)      = W(Cout x C*k*k) · cols                  (NN)
//   dW        dW^T(C*k*k x Cout)  = cols · dY'^T, added into dW transposed  (NT)
//   dX        dcols(C*k*k x n*P)  = W^T · dY'                               (TN), then col2im
// where Y' is the output in C x N x H x W order: moving it to NCHW (and dY the other way) copies
// contiguous runs of P values. These are the transposes of the products with the pixels as rows
// (forward cols^T·W^T NT, dW TN, dcols NN), which need a real transpose of the output and of dY
// at the layer's boundary and a pixel-major im2col. Measured at the CNN's shapes (batch 64,
// 1->32 at 28x28 and 32->64 at 14x14, 3x3 pad 1, one AVX-512 core, one GEMM over the batch),
// this layout took 0.6 / 4.4 ms forward against 1.1 / 4.5, and 1.3 / 8.1 ms backward against
// 2.4 / 8.6. One GEMM per group of images rather than per batch (kConvGroupValues; 16 and 7
// images at those shapes): forward 0.54 / 3.9 ms against 1.05 / 5.2 for the whole batch (whose
// cols, 14 MB at the second layer, leave the caches) and 0.68 / 4.5 for one image at a time;
// the GEMM threads itself within a group. The im2col buffer is kept rather than an implicit
// GEMM: hddp's GEMM packs plain strided matrices, so packing straight from the image needs a
// packing routine inside kernels/; im2col and col2im cost about a quarter of the second layer's
// passes (about 1 ms each), the part such a GEMM could save.
//
// Every result is bitwise identical for any OpenMP thread count: im2col, col2im, the layout
// copies and MaxPool split whole (image, channel) planes between threads, db sums each output
// channel in one fixed order, the groups depend on the shapes and B only, and the GEMM's own
// results do not depend on the thread count. Backward functions
// ACCUMULATE parameter gradients (+=) unless accumulate = false (=); input gradients are
// overwritten.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <hddp/core/layer.h>
#include <hddp/kernels/conv.h>

namespace hddp {

// floor((in + 2 pad - k) / stride) + 1, or 0 when the kernel does not fit in + 2 pad.
int64_t conv_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad);

// Conv2d runs a batch in groups of images, one GEMM per group and pass: as many images as keep
// a group's cols and GEMM output, (C*k*k + Cout) * OH*OW values per image, within
// kConvGroupValues (2 MiB of floats, about one core's L2), at least one; B images form
// ceil(B / that) groups of nearly equal size, whose dW add in order.
inline constexpr int64_t kConvGroupValues = int64_t(1) << 19;
int64_t conv2d_group_images(int64_t ckk, int64_t Cout, int64_t P);

// cols((C*k*k) x (B*OH*OW)) from X(B x C x H x W), zeros where the window leaves the image.
template <class T>
void im2col(int64_t B, int64_t C, int64_t H, int64_t W, int64_t k, int64_t stride, int64_t pad, const T* X,
            T* cols);

// The adjoint of im2col: X(B x C x H x W) = the sum of every cols entry into the pixel it was
// read from (overwritten; entries of the padding are dropped).
template <class T>
void col2im(int64_t B, int64_t C, int64_t H, int64_t W, int64_t k, int64_t stride, int64_t pad, const T* cols,
            T* X);

// Values of scratch conv2d_forward/backward need for B images.
int64_t conv2d_scratch_size(int64_t B, int64_t C, int64_t H, int64_t W, int64_t Cout, int64_t k, int64_t stride,
                            int64_t pad);

// Conv2d (PyTorch nn.Conv2d, groups 1, dilation 1): Y(B x Cout x OH x OW) = W * X + b.
// Wt: Cout x (C*k*k) (PyTorch's (Cout, C, k, k)); b: Cout values, or nullptr (no bias);
// scratch: conv2d_scratch_size(...) values. Throws std::invalid_argument on sizes that are not
// positive (B may be 0), a kernel that does not fit, or null buffers.
template <class T>
void conv2d_forward(int64_t B, int64_t C, int64_t H, int64_t W, int64_t Cout, int64_t k, int64_t stride,
                    int64_t pad, const T* X, const T* Wt, const T* b, T* Y, T* scratch);

// Backward of conv2d_forward given dY(B x Cout x OH x OW):
//   dX (B x C x H x W)  overwritten; nullptr skips it (the first layer)
//   dW (Cout x C*k*k)   += (accumulate) or = (!accumulate)
//   db (Cout)           the same; nullptr: no bias
template <class T>
void conv2d_backward(int64_t B, int64_t C, int64_t H, int64_t W, int64_t Cout, int64_t k, int64_t stride,
                     int64_t pad, const T* X, const T* Wt, const T* dY, T* dX, T* dW, T* db, T* scratch,
                     bool accumulate = true);

// MaxPool2d (PyTorch nn.MaxPool2d, no padding, floor mode): Y(B x C x OH x OW) the maximum of
// each k x k window at stride s; argmax(B x C x OH x OW) its position in the window, ki*k + kj,
// as a T (exact: k*k < 2^24). Ties give the first maximum in row-major window order and a NaN
// wins over any number, as PyTorch's CPU kernel.
template <class T>
void maxpool2d_forward(int64_t B, int64_t C, int64_t H, int64_t W, int64_t k, int64_t stride, const T* X, T* Y,
                       T* argmax);

// dX(B x C x H x W) = dY scattered to each window's argmax (overwritten; overlapping windows add,
// in row-major output order).
template <class T>
void maxpool2d_backward(int64_t B, int64_t C, int64_t H, int64_t W, int64_t k, int64_t stride, const T* argmax,
                        const T* dY, T* dX);

// MaxPool2d over channels-last images: X (B, H, W, C), Y (B, OH, OW, C), argmax (B, OH, OW, C)
// one byte per value (the window position ki*k + kj; k*k <= 256). The same rules as above.
template <class T>
void maxpool2d_forward_nhwc(int64_t B, int64_t C, int64_t H, int64_t W, int64_t k, int64_t stride, const T* X, T* Y,
                            uint8_t* argmax);
template <class T>
void maxpool2d_backward_nhwc(int64_t B, int64_t C, int64_t H, int64_t W, int64_t k, int64_t stride,
                             const uint8_t* argmax, const T* dY, T* dX);

namespace layers {

// PyTorch's nn.Conv2d(in, out, kernel, stride, padding, bias): input {in, H, W}, output
// {out, OH, OW}. In float, at stride 1 with padding < kernel <= 16, the direct convolution of
// kernels/conv.h on channels-last activations (reads and writes NHWC wherever Sequential lets
// it); otherwise, and in double, the im2col GEMMs above over NCHW. Parameters "weight" (out x in*k*k: PyTorch's (out, in, k, k) row-major) and
// "bias" (out x 1); both initialised U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in*k*k
// (kaiming_uniform_(a=sqrt(5)) gives the weight the same bound), weight drawn first.
template <class T>
class Conv2d final : public Layer<T> {
 public:
  Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t padding = 0, bool bias = true);
  std::string name() const override;
  Shape setup(const Shape& in) override;
  std::vector<ParamSpec> parameters() const override;
  void reset_parameters(Rng& rng, T* const* params) const override;
  int64_t scratch_size(int64_t batch) const override;
  bool reads_nhwc() const override { return direct(); }
  bool writes_nhwc() const override { return direct(); }
  void set_layout(ImageLayout in, ImageLayout out) override { in_layout_ = in, out_layout_ = out; }
  bool fuse_relu() override { return relu_ = direct(); }  // bias + ReLU in the direct kernels' store
  bool fuse_maxpool(int64_t kernel, int64_t stride) override;
  // With pooling fused: the window positions, one byte per pooled value.
  int64_t saved_size(int64_t batch) const override;
  void forward(const Forward<T>& f) const override;
  void backward(const Backward<T>& b) const override;
  // Whether this layer runs the direct convolution.
  bool direct() const;
  // 2 B out OH OW in k k, + B out OH OW for the bias.
  double flops(int64_t batch) const override;
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }
  int64_t kernel() const { return k_; }
  int64_t stride() const { return stride_; }
  int64_t padding() const { return pad_; }
  bool bias() const { return bias_; }

 private:
  ConvShape shape(int64_t batch) const { return {batch, in_, H_, W_, out_, k_, pad_}; }
  int64_t in_, out_, k_, stride_, pad_;
  bool bias_;
  int64_t H_ = 0, W_ = 0;  // input image size, from setup()
  ImageLayout in_layout_ = ImageLayout::NCHW, out_layout_ = ImageLayout::NCHW;
  bool relu_ = false;  // the next layer's ReLU applied here
  int64_t pool_ = 0;   // and the MaxPool2d after it (kernel = stride), 0: none
};

// PyTorch's nn.MaxPool2d(kernel, stride) (stride defaults to the kernel; no padding, floor
// mode): input {C, H, W}, output {C, OH, OW}, in its input's layout; saves each window's
// argmax for backward (one byte per value on channels-last input).
template <class T>
class MaxPool2d final : public Layer<T> {
 public:
  explicit MaxPool2d(int64_t kernel, std::optional<int64_t> stride = std::nullopt);
  std::string name() const override;
  Shape setup(const Shape& in) override;
  int64_t saved_size(int64_t batch) const override;
  bool reads_nhwc() const override { return k_ * k_ <= 256; }
  int64_t kernel() const { return k_; }
  int64_t stride() const { return stride_; }
  bool keeps_layout() const override { return true; }
  void set_layout(ImageLayout in, ImageLayout) override { nhwc_ = in == ImageLayout::NHWC; }
  void forward(const Forward<T>& f) const override;
  void backward(const Backward<T>& b) const override;
  // One comparison per window value: B C OH OW k k.
  double flops(int64_t batch) const override;

 private:
  int64_t k_, stride_;
  int64_t C_ = 0, H_ = 0, W_ = 0, OH_ = 0, OW_ = 0;
  bool nhwc_ = false;
};

extern template class Conv2d<float>;
extern template class Conv2d<double>;
extern template class MaxPool2d<float>;
extern template class MaxPool2d<double>;

}  // namespace layers

// The specs of a layer list.
inline LayerSpec Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t padding = 0,
                        bool bias = true) {
  return LayerSpec::of<layers::Conv2d>(in, out, kernel, stride, padding, bias);
}
inline LayerSpec MaxPool2d(int64_t kernel, std::optional<int64_t> stride = std::nullopt) {
  return LayerSpec::of<layers::MaxPool2d>(kernel, stride);
}

}  // namespace hddp
