#pragma once
// Layers as free functions over plain row-major buffers, shapes in the signature (llm.c
// style). B is the batch (rows). Every GEMM goes through hddp::gemm, every element-wise loop
// through kernels/elementwise.h. Backward functions ACCUMULATE parameter gradients (+=), as
// PyTorch does; input gradients are overwritten.
//
// Activations are the element-wise kernels themselves, over n = B * features values:
//   tanh_forward(n, X, Y)          Y = tanh(X)
//   tanh_backward(n, Y, dY, dX)    dX = dY * (1 - Y^2), from the saved OUTPUT Y
//   relu_forward(n, X, Y)          Y = max(X, 0)
//   relu_backward(n, Y, dY, dX)    dX = Y > 0 ? dY : 0, from the saved output
#include <cstdint>

#include "kernels/elementwise.h"

namespace hddp {

// Linear (PyTorch nn.Linear): Y(B x out) = X(B x in) · W(out x in)^T + b(out).
// b may be nullptr (no bias). Throws std::invalid_argument on negative sizes or null buffers.
template <class T>
void linear_forward(int64_t B, int64_t in, int64_t out, const T* X, const T* W, const T* b, T* Y);

// Backward of linear_forward, given dY(B x out) = dLoss/dY:
//   dX(B x in)   = dY · W          (overwritten; dX == nullptr skips it, e.g. for the first layer)
//   dW(out x in) += dY^T · X
//   db(out)      += column sums of dY (db == nullptr: the layer has no bias)
// accumulate = false overwrites dW and db instead (=, not +=): the first backward after a
// zero_grad, without reading or clearing the old values first.
template <class T>
void linear_backward(int64_t B, int64_t in, int64_t out, const T* X, const T* W, const T* dY,
                     T* dX, T* dW, T* db, bool accumulate = true);

// MSE loss with mean reduction (PyTorch nn.MSELoss()): sum((Y - target)^2) / n over the n
// values of Y. Accumulated in double, returned as T.
template <class T>
T mse_forward(int64_t n, const T* Y, const T* target);

// Its gradient: dY = 2 (Y - target) / n (overwritten; dY may alias Y or target).
template <class T>
void mse_backward(int64_t n, const T* Y, const T* target, T* dY);

// Softmax cross-entropy with mean reduction (PyTorch nn.CrossEntropyLoss()): over the B rows of
// logits (B x C) and their labels (B values in [0, C)), the mean of -log softmax(row)[label].
// Stable: each row's maximum is subtracted before exp. Writes softmax(logits) to probs (B x C;
// may alias logits), which the backward takes. Accumulated in double; a label outside [0, C)
// throws std::invalid_argument naming the row.
template <class T>
double softmax_xent_forward(int64_t B, int64_t C, const T* logits, const int32_t* labels, T* probs);

// Its gradient: dlogits = (probs - onehot(labels)) / B (overwritten; may alias probs).
template <class T>
void softmax_xent_backward(int64_t B, int64_t C, const T* probs, const int32_t* labels, T* dlogits);

}  // namespace hddp
