#include <hddp/distributed/reducer_wire.h>

#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/reduction_op.h>
#include <hddp/kernels/elementwise.h>

namespace hddp {

namespace {

// The reduction op with 2 ranks: the mean of the two contributions. Any allreduce of 2 ranks
// combines the two contributions of an element exactly once (there is nothing else to
// combine: MPI ops have no identity element to fold in), in either order, so every rank gets
// fl(fl(a + b) * 0.5) - bitwise what MPI_SUM followed by the 1/P pass gives, in every mode,
// whatever algorithm MPI picks - and the pass over the gradients is saved. With more ranks an
// algorithm may combine partial results in any tree, so the reducer sums and scales.
void mean_of_two(void* in, void* inout, int* len, MPI_Datatype*) {
  const float* a = static_cast<const float*>(in);
  float* b = static_cast<float*>(inout);
  const int n = *len;
  for (int i = 0; i < n; ++i) b[i] = (a[i] + b[i]) * 0.5f;
}

// The sum of two bf16 buffers, added in float and rounded once per add (a user-defined op over
// 2-byte elements).
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const bf16* a = static_cast<const bf16*>(in);
  bf16* b = static_cast<bf16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = to_bf16(to_float(a[i]) + to_float(b[i]));
}

}  // namespace

MPI_Op make_reduction_op(int ranks) {
  MPI_Op op = MPI_SUM;
  if (ranks == 2) HDDP_MPI(MPI_Op_create(&mean_of_two, /*commute=*/1, &op));
  return op;
}

void free_reduction_op(MPI_Op& op) {
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (op != MPI_SUM && !finalized) MPI_Op_free(&op);
  op = MPI_SUM;
}

FloatWire::FloatWire(int ranks, float* grads, int64_t n)
    : ranks_(ranks), grads_(grads), n_(n), op_(make_reduction_op(ranks)) {}

FloatWire::~FloatWire() { free_reduction_op(op_); }

void FloatWire::unpack() {
  if (ranks_ > 1 && op_ == MPI_SUM) scale(n_, 1.0f / float(ranks_), grads_);  // 2 ranks: op_ averaged
}

Bf16Wire::Bf16Wire(int ranks, float* grads, int64_t n) : ranks_(ranks), grads_(grads), n_(n), sent_(size_t(n)) {
  HDDP_MPI(MPI_Op_create(&bf16_sum, /*commute=*/1, &op_));
}

Bf16Wire::~Bf16Wire() { free_reduction_op(op_); }

void* Bf16Wire::pack(const Bucket& b) {
  to_bf16(b.size(), grads_ + b.begin, sent_.data() + b.begin);
  return sent_.data() + b.begin;
}

void Bf16Wire::unpack() {
  to_float(n_, sent_.data(), grads_);  // the bf16 sums, back into the arena
  scale(n_, 1.0f / float(ranks_), grads_);
}

std::unique_ptr<Wire> make_wire(bool bf16, int ranks, float* grads, int64_t n) {
  if (bf16 && ranks > 1) return std::make_unique<Bf16Wire>(ranks, grads, n);
  return std::make_unique<FloatWire>(ranks, grads, n);
}

}  // namespace hddp
