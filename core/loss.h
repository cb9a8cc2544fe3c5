#pragma once
// Losses, one kind of thing: a loss object takes the model's output (batch x width values) and
// the targets, returns the mean loss over the batch and keeps dLoss/dOutput for backward.
//
//   MseLoss<float> mse(1);                    // PyTorch nn.MSELoss(), targets: batch x width values
//   SoftmaxCrossEntropy<float> xent(10);      // nn.CrossEntropyLoss(), targets: batch labels
//   const float* out = model.forward(x, batch);
//   const double loss = xent.forward(out, labels, batch);
//   ddp.backward(xent.grad());                // or model.backward(xent.grad()) on one process
//   const int64_t hits = xent.correct(labels); // argmax == label, over the same batch
//
// Buffers grow to the largest batch seen (allocated at the first forward of that size, never
// in later steps of the same size). The functions underneath (mse_forward,
// softmax_xent_forward, ... in core/layers.h) take plain buffers.
#include <cstdint>
#include <vector>

namespace hddp {

// The part every loss shares: the width of one sample's output and dLoss/dOutput.
template <class T>
class Loss {
 public:
  virtual ~Loss() = default;
  int64_t width() const { return width_; }
  int64_t batch() const { return batch_; }  // samples of the last forward (0 before the first)
  // dLoss/dOutput of the last forward: batch() x width() values, valid until the next forward.
  const T* grad() const { return grad_.data(); }

 protected:
  explicit Loss(int64_t width);
  void start(const T* output, int64_t batch);  // checks the arguments, sizes the buffers
  int64_t width_ = 0, batch_ = 0;
  std::vector<T> grad_;
};

// Mean squared error over the batch x width values (nn.MSELoss(), reduction 'mean').
template <class T>
class MseLoss final : public Loss<T> {
 public:
  explicit MseLoss(int64_t width);
  // target: batch x width values. Returns the loss (computed in double, rounded to T as
  // PyTorch returns it) and keeps its gradient 2 (output - target) / (batch x width).
  double forward(const T* output, const T* target, int64_t batch);
};

// Softmax cross-entropy over `classes` logits per sample (nn.CrossEntropyLoss(), mean).
template <class T>
class SoftmaxCrossEntropy final : public Loss<T> {
 public:
  explicit SoftmaxCrossEntropy(int64_t classes);
  // labels: batch values in [0, classes) (one outside throws std::invalid_argument naming the
  // row). Returns the mean loss (double) and keeps the gradient (softmax - onehot) / batch.
  double forward(const T* logits, const int32_t* labels, int64_t batch);
  // softmax(logits) of the last forward: batch x classes.
  const T* probs() const { return probs_.data(); }
  // The predicted class of sample i of the last forward (the first largest probability).
  int64_t predicted(int64_t i) const;
  // Samples of the last forward whose prediction is their label.
  int64_t correct(const int32_t* labels) const;

 private:
  std::vector<T> probs_;
};

extern template class Loss<float>;
extern template class Loss<double>;
extern template class MseLoss<float>;
extern template class MseLoss<double>;
extern template class SoftmaxCrossEntropy<float>;
extern template class SoftmaxCrossEntropy<double>;

}  // namespace hddp
