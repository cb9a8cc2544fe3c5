// poly_train: the PyTorch DDP tutorial's polynomial fit, data-parallel over MPI ranks with
// OpenMP inside each rank. Run `poly_train --help`.
//
// Each epoch every rank draws a batch, runs forward, loss, backward (gradient buckets are
// reduced by MPI_Iallreduce while backward continues) and an optimizer step; after backward
// every rank holds the same averaged gradients, so the parameters stay identical everywhere.
#include <mpi.h>
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/ddp.h"
#include "core/mpi_env.h"
#include "core/optim.h"
#include "core/rng.h"
#include "core/scaler.h"
#include "core/trace.h"
#include "kernels/gemm.h"
#include "poly_train/options.h"
#include "poly_train/problem.h"
#include "poly_train/report.h"

namespace {

using Clock = std::chrono::steady_clock;
using hddp::mpi::Env;
using poly::Options;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// OMP threads per rank: --threads, else OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, else this
// node's cores divided among the ranks on it.
int resolve_threads(const Options& o) {
  if (o.threads > 0) return o.threads;
  for (const char* var : {"OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK"})
    if (const char* v = std::getenv(var)) {
      const int n = std::atoi(v);
      if (n > 0) return n;
    }
  int local = 1;
  if (const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local = std::max(1, std::atoi(v));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / local);
}

std::vector<hddp::LayerSpec> build_layers(const std::vector<int64_t>& hidden) {
  // The tutorial: Linear(1, 20) -> Linear(20, 1, bias=False) -> tanh; with more hidden layers,
  // tanh between them.
  std::vector<hddp::LayerSpec> l{hddp::Linear(1, hidden[0])};
  for (size_t i = 1; i < hidden.size(); ++i) {
    l.push_back(hddp::Tanh());
    l.push_back(hddp::Linear(hidden[i - 1], hidden[i]));
  }
  l.push_back(hddp::Linear(hidden.back(), 1, false));
  l.push_back(hddp::Tanh());
  return l;
}

// Rank 0 checks that --out is (or can be made) a writable directory; every rank learns the
// verdict, so all of them stop together on a bad one.
std::string check_out_dir(const Env& env, const std::string& dir) {
  std::string err;
  if (env.root()) {
    struct stat st{};
    if (stat(dir.c_str(), &st) != 0 && mkdir(dir.c_str(), 0755) != 0)
      err = "--out: cannot create directory '" + dir + "'";
    else if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      err = "--out: '" + dir + "' is not a directory";
    else if (access(dir.c_str(), W_OK) != 0)
      err = "--out: directory '" + dir + "' is not writable";
  }
  int len = static_cast<int>(err.size());
  HDDP_MPI(MPI_Bcast(&len, 1, MPI_INT, 0, env.comm()));
  err.resize(len);
  if (len) HDDP_MPI(MPI_Bcast(err.data(), len, MPI_CHAR, 0, env.comm()));
  return err;
}

struct PhaseTimes {
  double forward = 0, backward = 0, optimizer = 0, total = 0;
};

int run(Env& env, const Options& o) {
  const int rank = env.rank(), size = env.size();
  const int threads = resolve_threads(o);
  omp_set_num_threads(threads);
  if (!o.gemm.empty()) hddp::set_gemm_backend(hddp::parse_gemm_backend(o.gemm));

  // Scalers to [-1, 1]: x fitted on linspace(-3, 10, 32), y on f of those points.
  const std::vector<double> xs = poly::linspace(poly::kXMin, poly::kXMax, poly::kEvalPoints);
  std::vector<double> fs(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) fs[i] = poly::target(o.function, xs[i]);
  hddp::MinMaxScaler xscale(-1, 1), yscale(-1, 1);
  xscale.fit(xs.data(), int64_t(xs.size()), 1);
  yscale.fit(fs.data(), int64_t(fs.size()), 1);

  // Model and optimizer; rank 0's initial parameters are broadcast by the reducer.
  const bool sharded = o.sampling == "sharded";
  const int64_t local = o.batch_size, global = sharded ? o.batch_size * size : o.batch_size;
  const int64_t kEvalChunk = 256;
  hddp::Rng init(o.seed, 0);
  hddp::Sequential<float> model(build_layers(o.hidden), std::max(local, kEvalChunk), init);
  std::unique_ptr<hddp::Trace> trace = o.trace.empty() ? nullptr : std::make_unique<hddp::Trace>(rank);
  hddp::ReducerOptions ropt;
  ropt.bucket_cap_bytes = std::max<int64_t>(4, int64_t(o.bucket_mb * 1048576.0));
  ropt.first_bucket_cap_bytes = std::max<int64_t>(4, int64_t(o.first_bucket_mb * 1048576.0));
  ropt.overlap = o.overlap;
  ropt.progress = hddp::parse_progress(o.progress);
  hddp::DistributedModel ddp(env.comm(), model, ropt, trace.get());
  std::unique_ptr<hddp::Optimizer<float>> opt;
  if (o.optimizer == "adam") {
    hddp::AdamHyper h;
    h.lr = o.lr;
    opt = std::make_unique<hddp::Adam<float>>(model.num_params(), h);
  } else {
    hddp::SgdHyper h;
    h.lr = o.lr, h.momentum = o.momentum;
    opt = std::make_unique<hddp::SGD<float>>(model.num_params(), h);
  }

  std::printf("Running DDP on rank %d/%d.\n", rank, size);
  std::fflush(stdout);

  // Samples: per-rank, each rank its own stream (seed, 1 + rank); sharded, one global batch
  // from stream (seed, 1) on every rank, of which each takes its contiguous slice.
  hddp::Rng data(o.seed, sharded ? 1 : 1 + uint64_t(rank));
  const hddp::Shard shard = sharded ? hddp::shard_of(global, rank, size) : hddp::Shard{0, local};
  std::vector<double> xg(global), yg(global);
  std::vector<float> x(local), y(local);
  std::vector<float> losses(o.epochs);
  PhaseTimes t;
  const auto t_start = Clock::now();
  for (int64_t epoch = 0; epoch < o.epochs; ++epoch) {
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < global; ++i) xg[i] = data.uniform<double>(poly::kXMin, poly::kXMax);
    for (int64_t i = 0; i < local; ++i) yg[i] = poly::target(o.function, xg[shard.begin + i]);
    xscale.transform(xg.data() + shard.begin, local, 1, xg.data() + shard.begin);
    yscale.transform(yg.data(), local, 1, yg.data());
    for (int64_t i = 0; i < local; ++i) x[i] = float(xg[shard.begin + i]), y[i] = float(yg[i]);

    model.zero_grad();
    model.forward(x.data(), local);
    const float loss = model.loss(y.data());
    const auto t1 = Clock::now();
    ddp.backward(y.data());
    const auto t2 = Clock::now();
    opt->step(model.params(), model.grads());
    const auto t3 = Clock::now();
    t.forward += seconds(t0, t1), t.backward += seconds(t1, t2), t.optimizer += seconds(t2, t3);
    if (trace) {
      trace->add("forward", "compute", t0, t1, 0);
      trace->add("backward", "compute", t1, t2, 0);
      trace->add("optimizer", "compute", t2, t3, 0);
    }
    HDDP_CHECK(std::isfinite(loss), "loss is " << loss << " at epoch " << epoch << " on rank " << rank
                                               << " (try a smaller --lr)");
    losses[epoch] = loss;
    if (epoch % o.log_every == 0) {
      std::printf("epoch %lld, loss = %.6g, rank %d/%d (%s).\n", (long long)epoch, double(loss), rank, size,
                  env.hostname().c_str());
      std::fflush(stdout);
      if (rank == 0 && epoch > 0) {
        const double el = seconds(t_start, Clock::now()), per = el / double(epoch + 1);
        std::fprintf(stderr, "progress: epoch %lld/%lld (%.0f%%), %.2f us/step, ETA %.1f s\n", (long long)epoch,
                     (long long)o.epochs, 100.0 * double(epoch) / double(o.epochs), per * 1e6,
                     per * double(o.epochs - epoch - 1));
      }
    }
  }
  t.total = seconds(t_start, Clock::now());

  // Everything rank 0 reports: all ranks' losses, timings and trace events.
  std::vector<float> all_losses(rank == 0 ? size_t(o.epochs) * size : 0);
  HDDP_MPI(MPI_Gather(losses.data(), static_cast<int>(o.epochs), MPI_FLOAT, all_losses.data(),
                      static_cast<int>(o.epochs), MPI_FLOAT, 0, env.comm()));
  const hddp::ReducerStats& rs = ddp.reducer().stats();
  double mine[6] = {t.forward, t.backward, t.optimizer, t.total, rs.total.comm, rs.total.exposed};
  std::vector<double> all_times(rank == 0 ? 6 * size : 0);
  HDDP_MPI(MPI_Gather(mine, 6, MPI_DOUBLE, all_times.data(), 6, MPI_DOUBLE, 0, env.comm()));
  std::string events = trace ? trace->events_json() : std::string();
  int elen = static_cast<int>(events.size());
  std::vector<int> lens(size), displs(size);
  HDDP_MPI(MPI_Gather(&elen, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, env.comm()));
  std::string all_events;
  if (rank == 0) {
    for (int r = 0, off = 0; r < size; ++r) displs[r] = off, off += lens[r];
    all_events.resize(displs[size - 1] + lens[size - 1]);
  }
  HDDP_MPI(MPI_Gatherv(events.data(), elen, MPI_CHAR, all_events.data(), lens.data(), displs.data(), MPI_CHAR, 0,
                       env.comm()));
  if (rank != 0) return 0;

  // Evaluation on the 32 points and on a dense grid around the training range, for the plot.
  auto evaluate = [&](const std::vector<double>& pts) {
    poly::Curve c{pts, std::vector<double>(pts.size()), std::vector<double>(pts.size())};
    std::vector<double> in(pts), out(pts.size());
    xscale.transform(pts.data(), int64_t(pts.size()), 1, in.data());
    std::vector<float> xf(kEvalChunk);
    for (size_t b = 0; b < pts.size(); b += kEvalChunk) {
      const int64_t n = std::min<int64_t>(kEvalChunk, int64_t(pts.size() - b));
      for (int64_t i = 0; i < n; ++i) xf[i] = float(in[b + i]);
      const float* yhat = model.forward(xf.data(), n);
      for (int64_t i = 0; i < n; ++i) out[b + i] = yhat[i];
    }
    yscale.inverse_transform(out.data(), int64_t(out.size()), 1, c.g.data());
    for (size_t i = 0; i < pts.size(); ++i) c.f[i] = poly::target(o.function, pts[i]);
    return c;
  };
  const poly::Curve eval = evaluate(xs);
  const poly::Curve dense = evaluate(poly::linspace(poly::kXMin - 2.0, poly::kXMax + 2.0, 261));
  double mean_err = 0, max_err = 0;
  for (size_t i = 0; i < eval.x.size(); ++i) {
    const double e = std::fabs(eval.f[i] - eval.g[i]);
    mean_err += e / double(eval.x.size()), max_err = std::max(max_err, e);
  }
  const std::string dir = o.out + "/";
  poly::write_eval_csv(dir + "eval.csv", eval);
  std::vector<std::vector<float>> per_rank(size);
  for (int r = 0; r < size; ++r) per_rank[r].assign(all_losses.begin() + r * o.epochs, all_losses.begin() + (r + 1) * o.epochs);
  poly::write_loss_csv(dir + "loss.csv", per_rank);
  if (trace) poly::write_file(o.trace, "{\"traceEvents\":[\n" + all_events + "\n]}\n");

  std::printf("training: %lld epochs in %.3f s (%.2f us/step), %d rank(s) x %d thread(s), gemm %s\n",
              (long long)o.epochs, t.total, 1e6 * t.total / double(o.epochs), size, threads,
              hddp::to_string(hddp::gemm_backend()));
  std::printf("evaluation: mean |f - g| = %.4g, max |f - g| = %.4g over %lld points; wrote %seval.csv, %sloss.csv\n",
              mean_err, max_err, (long long)poly::kEvalPoints, dir.c_str(), dir.c_str());
  if (o.stats) {
    std::printf("%-6s %12s %12s %12s %12s %12s %12s %9s\n", "rank", "forward_s", "backward_s", "optim_s", "total_s",
                "comm_s", "exposed_s", "overlap");
    for (int r = 0; r < size; ++r) {
      const double* m = &all_times[6 * r];
      std::printf("%-6d %12.6f %12.6f %12.6f %12.6f %12.6f %12.6f %8.1f%%\n", r, m[0], m[1], m[2], m[3], m[4], m[5],
                  m[4] > 0 ? 100.0 * (1.0 - m[5] / m[4]) : 0.0);
    }
    std::printf("buckets: %zu, %lld bytes of gradients per step, %s, progress %s\n", ddp.reducer().buckets().size(),
                (long long)rs.bytes_per_step, o.overlap ? "overlapped" : "blocking", o.progress.c_str());
  }
  if (o.plot) {
    if (!poly::gnuplot_available()) {
      std::fprintf(stderr, "warning: gnuplot not found (HDDP_GNUPLOT or PATH); errors.pdf not drawn (the CSVs hold the results). "
                           "Install it (Debian: apt-get install gnuplot-nox) or pass --no-plot.\n");
    } else {
      poly::plot_errors(dir + "errors.pdf", dense, eval, o.epochs, poly::kXMin, poly::kXMax);
      std::printf("plot evaluation result to %serrors.pdf\n", dir.c_str());
    }
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Parse first (no MPI needed) so the thread level can follow --progress.
  Options opts;
  std::string usage_error;
  try {
    opts = poly::parse_options(argc - 1, argv + 1);
  } catch (const poly::UsageError& e) {
    usage_error = e.what();
  }
  try {
    Env env(&argc, &argv, hddp::Reducer::required_thread_level(hddp::parse_progress(opts.progress)));
    if (usage_error.empty() && !opts.help) usage_error = check_out_dir(env, opts.out);
    if (!usage_error.empty()) {  // every rank gets here with the same verdict: exit 2 together
      if (env.root()) std::fprintf(stderr, "poly_train: error: %s\nTry 'poly_train --help'.\n", usage_error.c_str());
      return 2;
    }
    if (opts.help) {
      if (env.root()) std::fputs(poly::help_text("poly_train").c_str(), stdout);
      return 0;
    }
    return run(env, opts);
  } catch (const std::exception& e) {
    hddp::mpi::abort_all(1, e.what());  // ends every rank: no rank waits forever for this one
  }
}
