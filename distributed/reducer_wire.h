#pragma once
// How the reducer's buckets travel (internal, not installed): the buffer a bucket is reduced in,
// the MPI datatype and op it is reduced with, and the way back into the gradient arena as means
// over the ranks. One Wire per reducer; every engine (reducer_engines.h) sends through it.
//   FloatWire  each bucket reduced in the arena itself, MPI_FLOAT; with 2 ranks the op averages
//              (reduction_op.h), else MPI_SUM and the arena is scaled by 1/P after the last bucket
//   Bf16Wire   --grad-dtype bf16: each bucket rounded to bf16 (bf16.h) into a buffer of its own as
//              it is launched, summed by a user-defined op (each add in float, rounded to bf16;
//              Open MPI has no bf16 type), converted back and scaled by 1/P after the last bucket
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include <hddp/distributed/buckets.h>
#include <hddp/kernels/bf16.h>

namespace hddp {

class Wire {
 public:
  virtual ~Wire() = default;
  virtual int64_t elem_bytes() const = 0;  // one gradient on the wire
  // Bucket b ready to send: the buffer MPI reduces in place (Bf16Wire rounds the bucket into it).
  virtual void* pack(const Bucket& b) = 0;
  virtual MPI_Datatype type() const = 0;
  virtual MPI_Op op() const = 0;
  // Every bucket reduced: the arena holds the means over the ranks.
  virtual void unpack() = 0;
};

class FloatWire final : public Wire {
 public:
  FloatWire(int ranks, float* grads, int64_t n);  // grads: the n-element arena
  ~FloatWire() override;
  FloatWire(const FloatWire&) = delete;
  FloatWire& operator=(const FloatWire&) = delete;
  int64_t elem_bytes() const override { return sizeof(float); }
  void* pack(const Bucket& b) override { return grads_ + b.begin; }
  MPI_Datatype type() const override { return MPI_FLOAT; }
  MPI_Op op() const override { return op_; }
  void unpack() override;

 private:
  int ranks_;
  float* grads_;
  int64_t n_;
  MPI_Op op_ = MPI_SUM;  // 2 ranks: an op that averages (make_reduction_op)
};

class Bf16Wire final : public Wire {
 public:
  Bf16Wire(int ranks, float* grads, int64_t n);  // ranks > 1
  ~Bf16Wire() override;
  Bf16Wire(const Bf16Wire&) = delete;
  Bf16Wire& operator=(const Bf16Wire&) = delete;
  int64_t elem_bytes() const override { return sizeof(bf16); }
  void* pack(const Bucket& b) override;
  MPI_Datatype type() const override { return MPI_UINT16_T; }
  MPI_Op op() const override { return op_; }
  void unpack() override;

 private:
  int ranks_;
  float* grads_;
  int64_t n_;
  std::vector<bf16> sent_;  // the arena as sent and summed
  MPI_Op op_ = MPI_SUM;     // the bf16 sum
};

// Bf16Wire when bf16 is asked for and there is more than one rank (alone, nothing travels and
// nothing is rounded), else FloatWire.
std::unique_ptr<Wire> make_wire(bool bf16, int ranks, float* grads, int64_t n);

}  // namespace hddp
