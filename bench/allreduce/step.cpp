// bench_allreduce, section 4 (cases.h): the data-parallel training step of the wide MLP, six
// reducer modes stepping in rotating order in the same processes.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/allreduce/cases.h"
#include "bench/allreduce/common.h"
#include "bench/mlp_1024x4.h"
#include <hddp/core/loss.h>
#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/core/util.h>
#include <hddp/distributed/ddp.h>
#include <hddp/distributed/watchdog.h>
#include <hddp/kernels/gemm.h>

namespace hddp::bench::allreduce {

// ---- 4. Training step of the MLP 1-1024x4-1 (mlp_1024x4.h; benchmarks step/wide) -------------
void bm_step(benchmark::State& st, int64_t batch, int64_t cap_bytes, bool sgd) {
  set_gemm_backend(GemmBackend::Blocked);
  int rank = 0;
  HDDP_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  // This rank's shard: its own inputs and targets.
  Rng data_rng(11, uint64_t(rank));
  std::vector<float> x(static_cast<size_t>(batch)), y(static_cast<size_t>(batch));
  for (auto& v : x) v = data_rng.uniform(-1.0f, 1.0f);
  for (auto& v : y) v = data_rng.uniform(-0.9f, 0.9f);

  struct Mode {
    const char* name;
    bool ddp;
    ReduceMode mode;
    int nbc;
    bool watchdog = false;
  };
  // The reducer's defaults (libnbc rabenseifner) and, for comparison, libnbc's binomial tree;
  // the default mode and the blocking one again with the stall watchdog (poly_train's default,
  // --timeout 300) waiting on the buckets. The other modes wait with MPI_Wait (--timeout 0).
  const Mode modes[] = {{"local", false, ReduceMode::Blocking, kRabenseifner},
                        {"blocking", true, ReduceMode::Blocking, kRabenseifner},
                        {"test", true, ReduceMode::Test, kRabenseifner},
                        {"thread", true, ReduceMode::Thread, kRabenseifner},
                        {"test_binomial", true, ReduceMode::Test, kBinomial},
                        {"thread_binomial", true, ReduceMode::Thread, kBinomial},
                        {"test_watchdog", true, ReduceMode::Test, kRabenseifner, true},
                        {"blocking_watchdog", true, ReduceMode::Blocking, kRabenseifner, true}};
  Watchdog watchdog(MPI_COMM_WORLD, WatchdogOptions{300});
  struct Runner {
    Mode mode;
    std::unique_ptr<Sequential<float>> model;
    std::unique_ptr<DistributedModel> ddp;  // null: local (no reducer)
    std::unique_ptr<Optimizer<float>> opt;
    std::vector<double> step, comm, exposed, overlap;
  };
  std::vector<Runner> runners;
  for (const Mode& m : modes) {
    Runner r;
    r.mode = m;
    Rng rng(1);
    r.model = std::make_unique<Sequential<float>>(mlp_1024x4(), batch, rng);
    if (m.ddp) {
      ReducerOptions o;
      o.bucket_cap_bytes = cap_bytes;
      o.mode = m.mode;
      o.nbc_iallreduce_algorithm = m.nbc;
      if (m.watchdog) o.watchdog = &watchdog;
      r.ddp = std::make_unique<DistributedModel>(MPI_COMM_WORLD, *r.model, o);
    }
    if (sgd) r.opt = std::make_unique<SGD<float>>(r.model->num_params(), SgdHyper{.lr = 1e-3});
    else r.opt = std::make_unique<Adam<float>>(r.model->num_params(), AdamHyper{.lr = 1e-4});
    runners.push_back(std::move(r));
  }
  MseLoss<float> mse(runners.front().model->out_features());
  auto step = [&](Runner& r) {
    const auto t0 = Clock::now();
    r.model->zero_grad();
    benchmark::DoNotOptimize(mse.forward(r.model->forward(x, batch), y.data(), batch));
    if (r.ddp) r.ddp->backward(mse.grad());
    else r.model->backward(mse.grad());
    r.opt->step(r.model->params(), r.model->grads());
    return seconds(t0, Clock::now());
  };
  for (auto& r : runners) step(r);  // warm-up: first touch of every buffer
  int64_t i = 0;
  const size_t nr = runners.size();
  barrier();
  for (auto _ : st) {
    double round = 0;
    for (size_t k = 0; k < nr; ++k) {  // rotate the order of the modes
      Runner& r = runners[(size_t(i) + k) % nr];
      const double t = step(r);
      round += t;
      r.step.push_back(t);
      if (r.ddp) {
        const ReducerTimes& last = r.ddp->reducer().stats().last;
        r.comm.push_back(last.comm);
        r.exposed.push_back(last.exposed);
        r.overlap.push_back(last.overlap());
      }
    }
    st.SetIterationTime(round);
    ++i;
  }
  // Ratios to the blocking step of the same round (the six steps of a round run back to back),
  // median over rounds: robust to the slow drift of a shared machine.
  const std::vector<double>& blocking = runners[1].step;
  std::vector<double> share;
  for (size_t k = 0; k < blocking.size(); ++k) share.push_back(runners[1].comm[k] / blocking[k]);
  for (Runner& r : runners) {
    const std::string name = r.mode.name;
    st.counters[name + "_ms"] = median(r.step) * 1e3;
    std::vector<double> ratio;
    for (size_t k = 0; k < blocking.size(); ++k) ratio.push_back(r.step[k] / blocking[k]);
    if (&r != &runners[1]) st.counters[name + "_ratio"] = median(ratio);
    if (!r.ddp) continue;
    st.counters[name + "_comm_ms"] = median(r.comm) * 1e3;
    if (!overlaps(r.mode.mode)) continue;
    st.counters[name + "_exposed_ms"] = median(r.exposed) * 1e3;
    st.counters[name + "_overlap_pct"] = 100.0 * median(r.overlap);
  }
  // The watchdog's cost: its step over the same mode without it, per round, median.
  auto runner = [&](const char* name) -> const Runner& {
    return *std::find_if(runners.begin(), runners.end(), [&](const Runner& r) { return !std::strcmp(r.mode.name, name); });
  };
  for (const char* base : {"test", "blocking"}) {
    const std::vector<double>& off = runner(base).step;
    const std::vector<double>& on = runner((std::string(base) + "_watchdog").c_str()).step;
    std::vector<double> ratio;
    for (size_t k = 0; k < off.size(); ++k) ratio.push_back(on[k] / off[k]);
    st.counters[std::string(base) + "_watchdog_vs_off"] = median(ratio);
  }
  st.counters["comm_share_pct"] = 100.0 * median(share);
  st.counters["buckets"] = double(runners[1].ddp->reducer().buckets().size());
  st.counters["params"] = double(runners[0].model->num_params());
  st.counters["ranks"] = world_size();
}

}  // namespace hddp::bench::allreduce
