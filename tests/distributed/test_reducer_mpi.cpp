// The data-parallel reducer under mpiexec with 1 to 5 ranks (2 ranks average in the reduction
// op; the other counts sum and scale), over every ReduceMode.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/data/sampler.h>
#include <hddp/distributed/ddp.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/reducer_wire.h>
#include <hddp/kernels/bf16.h>
#include "tests/distributed/mpi_testing.h"
#include "tests/common/mse.h"

using namespace hddp;

namespace {

using hddp::testing::world_rank;
using hddp::testing::world_size;

std::vector<LayerSpec> mlp() { return {Linear(3, 16), Tanh(), Linear(16, 8), Tanh(), Linear(8, 2)}; }

// A fixed global batch (rows x 3 inputs, rows x 2 targets), the same on every rank.
struct Batch {
  std::vector<float> x, y;
  int64_t rows;
};
Batch global_batch(int64_t rows, uint64_t seed) {
  Rng rng(seed, 7);
  Batch b{std::vector<float>(rows * 3), std::vector<float>(rows * 2), rows};
  for (auto& v : b.x) v = rng.uniform<float>(-1, 1);
  for (auto& v : b.y) v = rng.uniform<float>(-1, 1);
  return b;
}

// True on every rank iff every rank's buffer equals rank 0's, byte for byte.
bool same_on_all_ranks(const float* data, int64_t n) {
  std::vector<float> root(data, data + n);
  MPI_Bcast(root.data(), static_cast<int>(n), MPI_FLOAT, 0, MPI_COMM_WORLD);
  int same = std::memcmp(root.data(), data, n * sizeof(float)) == 0, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

struct Config {
  const char* name;
  int64_t cap_bytes, first_cap_bytes;
  ReduceMode mode;
  bool watchdog = false;  // wait through a stall watchdog (distributed/watchdog.h)
};

// Every cap shape the issue asks for: one bucket per parameter, one for everything, a cap that
// divides nothing evenly; in every mode.
std::vector<Config> configs() {
  std::vector<Config> c;
  for (ReduceMode m : kReduceModes) {
    c.push_back({"one bucket per parameter", 4, 4, m});
    c.push_back({"one bucket for everything", int64_t(1) << 30, int64_t(1) << 30, m});
    c.push_back({"cap of 37 floats", 37 * 4, 37 * 4, m});
    c.push_back({"default caps", int64_t(25) << 20, int64_t(1) << 20, m});
    // The watchdog's waits (and, blocking, its MPI_Iallreduce per bucket) give the same.
    c.push_back({"cap of 37 floats, watchdog", 37 * 4, 37 * 4, m, true});
  }
  return c;
}

std::string describe(const Config& c) {
  return std::string(c.name) + ", mode " + to_string(c.mode);
}

// Trains for `steps` Adam steps. Every rank draws its own init (seed + rank): the reducer must
// broadcast rank 0's. Sharded: each rank takes its shard of the global batch.
std::vector<float> train_sharded(const Config& cfg, const Batch& batch, int steps) {
  const int rank = world_rank(), size = world_size();
  Rng rng(1234 + rank, 0);
  Sequential<float> model(mlp(), batch.rows, rng);
  ReducerOptions opt;
  opt.bucket_cap_bytes = cfg.cap_bytes;
  opt.first_bucket_cap_bytes = cfg.first_cap_bytes;
  opt.mode = cfg.mode;
  Watchdog watchdog(MPI_COMM_WORLD, WatchdogOptions{cfg.watchdog ? 60.0 : 0.0});
  opt.watchdog = &watchdog;
  DistributedModel ddp(MPI_COMM_WORLD, model, opt);
  Adam<float> adam(model.num_params(), AdamHyper{});
  const Shard s = shard_of(batch.rows, rank, size);
  for (int step = 0; step < steps; ++step) {
    model.zero_grad();
    model.forward({batch.x.data() + s.begin * 3, size_t(s.count * 3)}, s.count);
    hddp::testing::backward_mse(ddp, model, batch.y.data() + s.begin * 2);
    adam.step(model.params(), model.grads());
  }
  return std::vector<float>(model.params(), model.params() + model.num_params());
}

// The same training on one process and the whole batch, from rank 0's initial parameters.
std::vector<float> train_single(const Batch& batch, int steps) {
  Rng rng(1234, 0);
  Sequential<float> model(mlp(), batch.rows, rng);
  Adam<float> adam(model.num_params(), AdamHyper{});
  for (int step = 0; step < steps; ++step) {
    model.zero_grad();
    model.forward(batch.x, batch.rows);
    hddp::testing::backward_mse(model, batch.y.data());
    adam.step(model.params(), model.grads());
  }
  return std::vector<float>(model.params(), model.params() + model.num_params());
}

TEST(Reducer, ShardsMatchSingleProcessAndStayIdentical) {
  const Batch batch = global_batch(60, 42);  // 60 rows: divisible by 1, 2, 3
  const std::vector<float> ref = train_single(batch, 50);
  for (const Config& cfg : configs()) {
    const std::vector<float> got = train_sharded(cfg, batch, 50);
    ASSERT_EQ(got.size(), ref.size());
    EXPECT_TRUE(same_on_all_ranks(got.data(), int64_t(got.size()))) << describe(cfg);
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i)
      worst = std::max(worst, std::fabs(double(got[i]) - ref[i]) / std::max(1e-3, std::fabs(double(ref[i]))));
    EXPECT_LE(worst, 1e-5) << describe(cfg) << ": worst relative difference to 1-process training";
  }
}

// Each rank trains on different data (its own stream); parameters stay bitwise identical.
TEST(Reducer, ParametersBitwiseIdenticalAcrossRanks) {
  const int rank = world_rank();
  Rng init(99 + rank, 0), data(5, rank);
  Sequential<float> model(mlp(), 32, init);
  DistributedModel ddp(MPI_COMM_WORLD, model);
  Adam<float> adam(model.num_params(), AdamHyper{});
  std::vector<float> x(32 * 3), y(32 * 2);
  for (int step = 0; step < 30; ++step) {
    for (auto& v : x) v = data.uniform<float>(-1, 1);
    for (auto& v : y) v = data.uniform<float>(-1, 1);
    model.zero_grad();
    model.forward(x, 32);
    hddp::testing::backward_mse(ddp, model, y.data());
    ASSERT_TRUE(same_on_all_ranks(model.grads(), model.num_params())) << "averaged gradients differ, step " << step;
    adam.step(model.params(), model.grads());
  }
  EXPECT_TRUE(same_on_all_ranks(model.params(), model.num_params()));
  EXPECT_EQ(ddp.reducer().stats().steps, 30);
}

// Overlapped and blocking reductions of the same gradients give the same parameters.
TEST(Reducer, OverlappedEqualsBlocking) {
  const Batch batch = global_batch(30, 3);
  const Config overlapped{"default caps", int64_t(25) << 20, int64_t(1) << 20, ReduceMode::Test};
  const Config blocking{"default caps", int64_t(25) << 20, int64_t(1) << 20, ReduceMode::Blocking};
  const Config small_overlapped{"cap of 37 floats", 37 * 4, 37 * 4, ReduceMode::Thread};
  const Config small_blocking{"cap of 37 floats", 37 * 4, 37 * 4, ReduceMode::Blocking};
  const Config watched_blocking{"cap of 37 floats", 37 * 4, 37 * 4, ReduceMode::Blocking, true};
  EXPECT_EQ(train_sharded(overlapped, batch, 20), train_sharded(blocking, batch, 20));
  EXPECT_EQ(train_sharded(small_overlapped, batch, 20), train_sharded(small_blocking, batch, 20));
  EXPECT_EQ(train_sharded(small_overlapped, batch, 20), train_sharded(watched_blocking, batch, 20));
}

// no_sync: two half-batch backward passes accumulate locally; the second (synchronised) one
// reduces the sum. With each half's loss scaled by 1/2 that equals one full-batch step.
// Every mode: the unsynchronised step never reaches the mode's engine, which must then reduce the
// next step from its first bucket.
TEST(Reducer, NoSyncAccumulationEqualsFullBatch) {
  const int rank = world_rank(), size = world_size();
  const Batch batch = global_batch(24 * size, 11);  // each rank: 24 rows, two halves of 12
  const Shard s = shard_of(batch.rows, rank, size);
  for (ReduceMode mode : kReduceModes) {
    SCOPED_TRACE(std::string("mode ") + to_string(mode));
    auto run = [&](bool accumulate) {
      Rng rng(77, 0);
      Sequential<float> model(mlp(), 24, rng);
      ReducerOptions opt;
      opt.mode = mode;
      DistributedModel ddp(MPI_COMM_WORLD, model, opt);
      model.zero_grad();
      const float* x = batch.x.data() + s.begin * 3;
      const float* y = batch.y.data() + s.begin * 2;
      if (!accumulate) {
        model.forward({x, 24 * 3}, 24);
        hddp::testing::backward_mse(ddp, model, y);
      } else {
        for (int half = 0; half < 2; ++half) {
          const float* out = model.forward({x + half * 12 * 3, 12 * 3}, 12);
          std::vector<float> dY(12 * 2);  // d/dY of mean over the full 24 x 2 values
          for (int i = 0; i < 24; ++i) dY[i] = 2.0f * (out[i] - y[half * 24 + i]) / float(24 * 2);
          ddp.set_no_sync(half == 0);
          ddp.backward(dY.data());
        }
      }
      return std::vector<float>(model.grads(), model.grads() + model.num_params());
    };
    const std::vector<float> full = run(false), acc = run(true);
    ASSERT_EQ(full.size(), acc.size());
    for (size_t i = 0; i < full.size(); ++i) EXPECT_NEAR(acc[i], full[i], 1e-6 + 1e-5 * std::fabs(full[i])) << i;
  }
}

// The non-finite check: an Inf in one rank's loss gradient is found in that rank's local
// gradients of the layer backward reaches first (the last Linear, "4.weight"), before
// averaging spreads it; the other ranks' own gradients are finite; off, nothing is reported.
TEST(Reducer, NonFiniteCheckNamesTheRankAndLayer) {
  const int rank = world_rank(), size = world_size();
  const Batch batch = global_batch(8, 5);
  for (bool check : {true, false}) {
    Rng rng(3, 0);
    Sequential<float> model(mlp(), 8, rng);
    DistributedModel ddp(MPI_COMM_WORLD, model);
    ddp.set_check_finite(check);
    model.zero_grad();
    const float* out = model.forward(batch.x, 8);
    std::vector<float> dY(8 * 2);
    for (int i = 0; i < 16; ++i) dY[i] = out[i] - batch.y[i];
    ddp.backward(dY.data());
    EXPECT_EQ(ddp.non_finite_at(), -1) << "all finite";
    if (rank == size - 1) dY[3] = std::numeric_limits<float>::infinity();
    model.zero_grad();
    model.forward(batch.x, 8);
    ddp.backward(dY.data());
    if (check && rank == size - 1) {
      ASSERT_GE(ddp.non_finite_at(), 0);
      const ParamView* v = view_containing(model.param_views(), ddp.non_finite_at());
      ASSERT_NE(v, nullptr);
      EXPECT_EQ(v->name, "4.weight");
    } else {
      EXPECT_EQ(ddp.non_finite_at(), -1) << (check ? "a rank with finite local gradients" : "check off");
    }
  }
}

// A model that differs on one rank is refused on every rank, with the same message.
TEST(Reducer, DifferentModelsFailOnEveryRank) {
  const int rank = world_rank(), size = world_size();
  Rng rng(1, 0);
  std::vector<LayerSpec> layers = mlp();
  if (size > 1 && rank == size - 1) layers = {Linear(3, 16), Tanh(), Linear(16, 2)};
  Sequential<float> model(layers, 8, rng);
  if (size == 1) {
    EXPECT_NO_THROW(DistributedModel(MPI_COMM_WORLD, model));
    return;
  }
  try {
    DistributedModel ddp(MPI_COMM_WORLD, model);
    ADD_FAILURE() << "rank " << rank << " accepted a model that differs on rank " << size - 1;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("differs between ranks"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(size - 1)), std::string::npos) << e.what();
  }
}

// The statistics add up in every mode: comm >= exposed >= 0 per step, the totals sum the
// steps. Blocking mode overlaps nothing: its exposed time is its communication time, exactly.
// With more than one rank every step communicates, so comm > 0.
TEST(Reducer, StatisticsAreConsistent) {
  for (ReduceMode mode : kReduceModes) {
    SCOPED_TRACE(std::string("mode ") + to_string(mode));
    Rng rng(3, 0);
    Sequential<float> model({Linear(1, 256), Tanh(), Linear(256, 256), Tanh(), Linear(256, 1)}, 64, rng);
    ReducerOptions opt;
    opt.first_bucket_cap_bytes = 4096;
    opt.mode = mode;
    DistributedModel ddp(MPI_COMM_WORLD, model, opt);
    EXPECT_EQ(ddp.reducer().mode(), mode);
    std::vector<float> x(64, 0.5f), y(64, 0.1f);
    double exposed = 0, comm = 0;
    for (int step = 0; step < 5; ++step) {
      model.zero_grad();
      model.forward(x, 64);
      hddp::testing::backward_mse(ddp, model, y.data());
      const ReducerTimes& last = ddp.reducer().stats().last;
      EXPECT_GE(last.exposed, 0);
      EXPECT_GE(last.comm, last.exposed);
      EXPECT_LE(last.overlap(), 1.0);
      if (world_size() > 1) {
        EXPECT_GT(last.comm, 0);
      }
      if (mode == ReduceMode::Blocking) {
        EXPECT_EQ(last.exposed, last.comm) << "blocking mode hides nothing";
        EXPECT_EQ(last.overlap(), 0.0);
      }
      exposed += last.exposed, comm += last.comm;
    }
    const ReducerStats& st = ddp.reducer().stats();
    EXPECT_EQ(st.steps, 5);
    EXPECT_NEAR(st.total.exposed, exposed, 1e-12);
    EXPECT_NEAR(st.total.comm, comm, 1e-12);
    EXPECT_EQ(st.bytes_per_step, model.num_params() * int64_t(sizeof(float)));
    EXPECT_GT(ddp.reducer().buckets().size(), 1u);
  }
}

// The averaged gradients of one step on this rank's shard, with the given options.
std::vector<float> one_step_grads(const ReducerOptions& opt, const Batch& batch) {
  const int rank = world_rank(), size = world_size();
  Rng rng(77, 0);
  Sequential<float> model(mlp(), batch.rows, rng);
  DistributedModel ddp(MPI_COMM_WORLD, model, opt);
  const Shard s = shard_of(batch.rows, rank, size);
  model.zero_grad();
  model.forward({batch.x.data() + s.begin * 3, size_t(s.count * 3)}, s.count);
  hddp::testing::backward_mse(ddp, model, batch.y.data() + s.begin * 2);
  EXPECT_EQ(ddp.reducer().stats().bytes_per_step,
            model.num_params() * int64_t(size > 1 && opt.bf16_wire ? sizeof(bf16) : sizeof(float)));
  return std::vector<float>(model.grads(), model.grads() + model.num_params());
}

// --grad-dtype bf16: half the bytes; every rank the same bits; each gradient within a few bf16
// roundings (2^-9 relative, one per rank's value and one per add) of the float allreduce's; and
// with 2 ranks or more the values did travel as bf16 (they differ from the float ones).
TEST(Reducer, Bf16WireHalvesTheBytesAndStaysClose) {
  const Batch batch = global_batch(30, 5);
  for (ReduceMode mode : kReduceModes)
    for (int64_t cap : {int64_t(37 * 4), int64_t(25) << 20}) {
      SCOPED_TRACE(std::string("mode ") + to_string(mode) + ", cap " + std::to_string(cap));
      ReducerOptions opt;
      opt.mode = mode, opt.bucket_cap_bytes = opt.first_bucket_cap_bytes = cap;
      const std::vector<float> f = one_step_grads(opt, batch);
      opt.bf16_wire = true;
      const std::vector<float> h = one_step_grads(opt, batch);
      EXPECT_TRUE(same_on_all_ranks(h.data(), int64_t(h.size())));
      float most = 0;
      for (float v : f) most = std::max(most, std::fabs(v));
      ASSERT_GT(most, 0.0f);
      const double tol = 4.0 * world_size() * std::ldexp(1.0, -9) * most;
      int64_t differ = 0;
      for (size_t i = 0; i < f.size(); ++i) {
        ASSERT_NEAR(h[i], f[i], tol) << "gradient " << i;
        differ += h[i] != f[i];
      }
      if (world_size() > 1) EXPECT_GT(differ, 0) << "no gradient was rounded: did bf16 travel?";
      else EXPECT_EQ(differ, 0) << "one rank: nothing travels, nothing is rounded";
    }
}

// The wire the engines send through: float reduces the arena in place (with 2 ranks an op that
// averages, else MPI_SUM), bf16 a rounded copy at half the bytes; once every bucket is reduced,
// unpack() leaves the mean over the ranks in the arena. The values and every partial sum are
// exact in bf16, so each rank gets exactly sum * (1/P).
TEST(ReducerWire, PacksEachBucketAndLeavesTheMean) {
  const int rank = world_rank(), size = world_size();
  const std::vector<Bucket> buckets = {{3, 6, {1}}, {0, 3, {0}}};  // launch order: the arena's end first
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16" : "float");
    std::vector<float> grads(6);
    for (int i = 0; i < 6; ++i) grads[i] = float(rank + 1) * (1.0f + float(i) / 4);
    const std::unique_ptr<Wire> wire = make_wire(bf16, size, grads.data(), 6);
    const bool halves = bf16 && size > 1;  // one rank: nothing travels, nothing is rounded
    EXPECT_EQ(wire->elem_bytes(), halves ? 2 : 4);
    EXPECT_EQ(wire->type(), halves ? MPI_UINT16_T : MPI_FLOAT);
    if (halves) EXPECT_NE(wire->op(), MPI_SUM) << "bf16: a user-defined sum";
    else EXPECT_EQ(wire->op() == MPI_SUM, size != 2) << "float: with 2 ranks an op that averages";
    for (const Bucket& b : buckets) {
      void* buf = wire->pack(b);
      EXPECT_EQ(buf == grads.data() + b.begin, !halves) << "float: the bucket is reduced in the arena";
      MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(b.size()), wire->type(), wire->op(), MPI_COMM_WORLD);
    }
    wire->unpack();
    const float ranks_sum = float(size * (size + 1) / 2);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(grads[i], ranks_sum * (1.0f + float(i) / 4) * (1.0f / float(size))) << i;
  }
}

// mpi::gather_strings: the root gets every rank's string in rank order (rank 0's empty, one
// with a NUL byte), every other rank an empty vector; for root 0 and the last rank.
TEST(MpiEnv, GatherStringsToRoot) {
  const int rank = world_rank(), size = world_size();
  const std::string mine = std::string(size_t(rank), char('a' + rank)) + (rank == 1 ? std::string("\0z", 2) : "");
  for (int root : {0, size - 1}) {
    const std::vector<std::string> all = mpi::gather_strings(mine, root, MPI_COMM_WORLD);
    if (rank != root) {
      EXPECT_TRUE(all.empty());
      continue;
    }
    ASSERT_EQ(all.size(), size_t(size));
    EXPECT_EQ(all[0], "");
    for (int r = 1; r < size; ++r)
      EXPECT_EQ(all[size_t(r)], std::string(size_t(r), char('a' + r)) + (r == 1 ? std::string("\0z", 2) : ""));
  }
}

// Mode names: every value round-trips; an unknown name is refused, naming the choices.
TEST(Reducer, ModeNames) {
  for (ReduceMode m : kReduceModes) EXPECT_EQ(parse_reduce_mode(to_string(m)), m);
  EXPECT_FALSE(overlaps(ReduceMode::Blocking));
  EXPECT_TRUE(overlaps(ReduceMode::Test) && overlaps(ReduceMode::Thread));
  EXPECT_EQ(required_thread_level(ReduceMode::Thread), MPI_THREAD_SERIALIZED);
  try {
    parse_reduce_mode("overlap");
    ADD_FAILURE() << "accepted 'overlap'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("expected blocking, test or thread"), std::string::npos) << e.what();
  }
}

}  // namespace
