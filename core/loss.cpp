#include <hddp/core/loss.h>

#include <algorithm>

#include <hddp/core/layers.h>
#include <hddp/kernels/check.h>

namespace hddp {

template <class T>
Loss<T>::Loss(int64_t width) : width_(width) {
  HDDP_CHECK_ARG(width > 0, "loss: the output width must be > 0, got " << width);
}

template <class T>
void Loss<T>::start(const T* output, int64_t batch) {
  HDDP_CHECK_ARG(batch > 0, "loss: the batch must be > 0, got " << batch);
  HDDP_CHECK_ARG(output, "loss: the output is null");
  if (grad_.size() < size_t(batch * width_)) grad_.resize(size_t(batch * width_));
  batch_ = batch;
}

template <class T>
MseLoss<T>::MseLoss(int64_t width) : Loss<T>(width) {}

template <class T>
double MseLoss<T>::forward(const T* output, const T* target, int64_t batch) {
  this->start(output, batch);
  HDDP_CHECK_ARG(target, "MseLoss: the target is null");
  const int64_t n = batch * this->width_;
  const T loss = mse_forward(n, output, target);
  mse_backward(n, output, target, this->grad_.data());
  return double(loss);
}

template <class T>
SoftmaxCrossEntropy<T>::SoftmaxCrossEntropy(int64_t classes) : Loss<T>(classes) {}

template <class T>
double SoftmaxCrossEntropy<T>::forward(const T* logits, const int32_t* labels, int64_t batch) {
  this->start(logits, batch);
  HDDP_CHECK_ARG(labels, "SoftmaxCrossEntropy: the labels are null");
  if (probs_.size() < this->grad_.size()) probs_.resize(this->grad_.size());
  const double loss = softmax_xent_forward(batch, this->width_, logits, labels, probs_.data());
  softmax_xent_backward(batch, this->width_, probs_.data(), labels, this->grad_.data());
  return loss;
}

template <class T>
int64_t SoftmaxCrossEntropy<T>::predicted(int64_t i) const {
  HDDP_CHECK_ARG(i >= 0 && i < this->batch_, "SoftmaxCrossEntropy::predicted: sample " << i << " of " << this->batch_);
  const T* r = probs_.data() + i * this->width_;
  return std::max_element(r, r + this->width_) - r;
}

template <class T>
int64_t SoftmaxCrossEntropy<T>::correct(const int32_t* labels) const {
  int64_t hits = 0;
  for (int64_t i = 0; i < this->batch_; ++i) hits += predicted(i) == labels[i];
  return hits;
}

template class Loss<float>;
template class Loss<double>;
template class MseLoss<float>;
template class MseLoss<double>;
template class SoftmaxCrossEntropy<float>;
template class SoftmaxCrossEntropy<double>;

}  // namespace hddp
