#include "poly_train/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include <hddp/core/util.h>
#include <hddp/train/line_log.h>
#include <hddp/train/plot.h>
#include <hddp/train/json_lines.h>
#include <hddp/kernels/gemm.h>
#include <hddp/kernels/check.h>
#include <hddp/train/all_ranks.h>

namespace poly {
namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The per-epoch lines (stdout, every rank) and rank 0's progress lines (stderr): they never
// block training, so a launcher that stops reading cannot keep the ranks from a signal's
// checkpoint (train/line_log.h). Flushed, blocking, once training is over.
hddp::LineLog g_log(stdout), g_progress(stderr);

// --stats-json on rank 0: JSON lines, every one with "schema" and "type" (progress | summary).
constexpr const char* kStatsSchema = "hddp.poly_train.stats/1";
std::unique_ptr<hddp::JsonLines> g_stats;

constexpr int64_t kEvalChunk = 256;  // rows per forward pass of the evaluation

// The model on `pts` (unscaled x), back in f's units.
Curve evaluate(hddp::Sequential<float>& model, const Scalers& scale, Function f, const std::vector<double>& pts) {
  Curve c{pts, std::vector<double>(pts.size()), std::vector<double>(pts.size())};
  std::vector<double> in(pts), out(pts.size());
  scale.x.transform(pts.data(), int64_t(pts.size()), 1, in.data());
  std::vector<float> xf(kEvalChunk);
  for (size_t b = 0; b < pts.size(); b += kEvalChunk) {
    const int64_t n = std::min<int64_t>(kEvalChunk, int64_t(pts.size() - b));
    for (int64_t i = 0; i < n; ++i) xf[i] = float(in[b + i]);
    const float* yhat = model.forward(std::span(xf).first(size_t(n)), n);
    for (int64_t i = 0; i < n; ++i) out[b + i] = yhat[i];
  }
  scale.y.inverse_transform(out.data(), int64_t(out.size()), 1, c.g.data());
  for (size_t i = 0; i < pts.size(); ++i) c.f[i] = target(f, pts[i]);
  return c;
}

// Every rank's trace events, joined on rank 0 into one document ("" elsewhere).
std::string gather_trace(const hddp::mpi::Env& env, const hddp::Trace& trace) {
  const std::vector<std::string> bodies = hddp::mpi::gather_strings(trace.events_json(), 0, env.comm());
  if (!env.root()) return "";
  return hddp::Trace::document(bodies);
}

std::string placement_line(const std::vector<hddp::RankPlacement>& placement) {
  std::string where;
  for (const hddp::RankPlacement& p : placement)
    where += (where.empty() ? "" : "; ") + ("rank " + std::to_string(p.rank) + " on " + p.node + " CPUs " +
                                            hddp::cpu_list(p.thread_cpus()) + " (" + std::to_string(p.threads.size()) +
                                            (p.threads.size() == 1 ? " thread)" : " threads)"));
  return where;
}

// Columns of the per-rank timings (seconds over the run), in the --stats table and the JSON.
constexpr const char* kTimeColumns[] = {"forward_s", "backward_s", "optim_s", "total_s", "comm_s", "exposed_s"};
constexpr int kTimes = 6;

}  // namespace

void log_epoch(const hddp::mpi::Env& env, const Options& o, int64_t epoch, float loss, int64_t start,
               Clock::time_point t_start) {
  if (epoch % o.log_every != 0) return;
  g_log.line("epoch %lld, loss = %.6g, rank %d/%d (%s).\n", (long long)epoch, double(loss), env.rank(), env.size(),
             env.hostname().c_str());
  if (!env.root()) return;
  const double per = seconds(t_start, Clock::now()) / double(epoch - start + 1);
  if (g_stats) g_stats->write({{"schema", kStatsSchema}, {"type", "progress"}, {"epoch", epoch}, {"loss", double(loss)}, {"step_s", per}});
  if (epoch > start)
    g_progress.line("progress: epoch %lld/%lld (%.0f%%), %.2f us/step, %s\n", (long long)(epoch + 1),
                    (long long)o.epochs, 100.0 * double(epoch + 1) / double(o.epochs), per * 1e6,
                    hddp::eta(per * double(epoch - start + 1), epoch - start + 1, o.epochs - epoch - 1).c_str());
}

void open_stats(const hddp::mpi::Env& env, const Options& o) {
  if (!env.root() || o.stats_json.empty()) return;
  try {
    g_stats = std::make_unique<hddp::JsonLines>(o.stats_json);
  } catch (const hddp::Error& e) {
    throw hddp::Error("--stats-json: " + hddp::user_message(e.what()));
  }
}

void flush_logs() { g_log.flush(), g_progress.flush(); }

void PhaseTimes::add(const Clock::time_point (&t)[4], hddp::Trace* trace) {
  forward += seconds(t[0], t[1]), backward += seconds(t[1], t[2]), optimizer += seconds(t[2], t[3]);
  if (!trace) return;
  trace->add("forward", "compute", t[0], t[1], 0);
  trace->add("backward", "compute", t[1], t[2], 0);
  trace->add("optimizer", "compute", t[2], t[3], 0);
}

void report_run(const hddp::mpi::Env& env, const Options& o, const RunSummary& run, hddp::DistributedModel& ddp,
                hddp::Sequential<float>& model,
                const Scalers& scale, const std::vector<std::vector<float>>& history, hddp::Trace* trace) {
  const int size = env.size();
  const hddp::ReducerStats& rs = ddp.reducer().stats();
  const PhaseTimes& t = run.times;
  double mine[kTimes] = {t.forward, t.backward, t.optimizer, t.total, rs.total.comm, rs.total.exposed};
  std::vector<double> all_times(env.root() ? size_t(kTimes) * size_t(size) : 0);
  HDDP_MPI(MPI_Gather(mine, kTimes, MPI_DOUBLE, all_times.data(), kTimes, MPI_DOUBLE, 0, env.comm()));
  const std::string trace_doc = trace ? gather_trace(env, *trace) : std::string();
  if (!env.root()) return;

  const Curve eval = evaluate(model, scale, o.function, linspace(kXMin, kXMax, kEvalPoints));
  const Curve dense = evaluate(model, scale, o.function, linspace(kXMin - 2.0, kXMax + 2.0, 261));
  double mean_err = 0, max_err = 0;
  for (size_t i = 0; i < eval.x.size(); ++i) {
    const double e = std::fabs(eval.f[i] - eval.g[i]);
    mean_err += e / double(eval.x.size()), max_err = std::max(max_err, e);
  }
  const std::string dir = o.out + "/";
  write_eval_csv(dir + "eval.csv", eval);
  write_loss_csv(dir + "loss.csv", history);
  if (trace) hddp::write_file_atomic(o.trace, trace_doc);

  const int64_t trained = o.epochs - run.start;
  const double step_s = trained > 0 ? t.total / double(trained) : 0.0;
  std::printf("training: %lld epochs in %.3f s (%.2f us/step), %d rank(s) x %d thread(s), gemm %s%s\n",
              (long long)trained, t.total, 1e6 * step_s, size, run.threads, hddp::to_string(hddp::gemm_backend()),
              run.start > 0 ? (", resumed after epoch " + std::to_string(run.start)).c_str() : "");
  std::printf("evaluation: mean |f - g| = %.4g, max |f - g| = %.4g over %lld points; wrote %seval.csv, %sloss.csv\n",
              mean_err, max_err, (long long)kEvalPoints, dir.c_str(), dir.c_str());
  const size_t buckets = ddp.reducer().buckets().size();
  if (o.stats) {
    std::printf("%-6s %12s %12s %12s %12s %12s %12s %9s\n", "rank", "forward_s", "backward_s", "optim_s", "total_s",
                "comm_s", "exposed_s", "overlap");
    for (int r = 0; r < size; ++r) {
      const double* m = &all_times[size_t(kTimes) * r];
      std::printf("%-6d %12.6f %12.6f %12.6f %12.6f %12.6f %12.6f %8.1f%%\n", r, m[0], m[1], m[2], m[3], m[4], m[5],
                  m[4] > 0 ? 100.0 * (1.0 - m[5] / m[4]) : 0.0);
    }
    std::printf("buckets: %zu, %lld bytes of gradients per step, reducer mode %s\n", buckets,
                (long long)rs.bytes_per_step, hddp::to_string(ddp.reducer().mode()));
    std::printf("placement: %s\n", placement_line(run.placement).c_str());
  }
  if (g_stats) {
    // The same figures as --stats, for programs (bench/scaling/run.sh): the last line of the file.
    nlohmann::ordered_json j;
    j["schema"] = kStatsSchema, j["type"] = "summary";
    j["ranks"] = size, j["threads"] = run.threads, j["gemm"] = hddp::to_string(hddp::gemm_backend());
    j["epochs"] = trained, j["start_epoch"] = run.start, j["total_epochs"] = o.epochs;
    j["step_s"] = step_s;  // rank 0's training time per epoch
    j["reducer"] = {{"mode", hddp::to_string(ddp.reducer().mode())},
                    {"buckets", buckets},
                    {"bytes_per_step", rs.bytes_per_step}};
    j["evaluation"] = {{"points", kEvalPoints}, {"mean_abs_err", mean_err}, {"max_abs_err", max_err}};
    for (int r = 0; r < size; ++r) {
      nlohmann::ordered_json row{{"rank", r}};
      for (int c = 0; c < kTimes; ++c) row[kTimeColumns[c]] = all_times[size_t(kTimes) * r + size_t(c)];
      j["per_rank"].push_back(row);
    }
    for (const hddp::RankPlacement& p : run.placement)
      j["placement"].push_back({{"rank", p.rank}, {"node", p.node}, {"cpus", hddp::cpu_list(p.thread_cpus())},
                                {"threads", p.threads.size()}, {"pinned", p.pinned()}});
    g_stats->write_line(j.dump());
    g_stats->close();
    g_stats.reset();
  }
  if (o.plot && hddp::gnuplot_or_warn("errors.pdf", "eval.csv")) {
    plot_errors(dir + "errors.pdf", dense, eval, o.epochs, kXMin, kXMax);
    std::printf("plot evaluation result to %serrors.pdf\n", dir.c_str());
  }
  std::fflush(stdout);
}

void write_eval_csv(const std::string& path, const Curve& e) {
  std::ostringstream os;
  os.precision(9);
  os << "x,f,g,abs_err\n";
  for (size_t i = 0; i < e.x.size(); ++i) os << e.x[i] << ',' << e.f[i] << ',' << e.g[i] << ',' << std::fabs(e.f[i] - e.g[i]) << '\n';
  hddp::write_file_atomic(path, os.str());
}

void write_loss_csv(const std::string& path, const std::vector<std::vector<float>>& losses) {
  std::ostringstream os;
  os.precision(9);
  os << "epoch,rank,loss\n";
  const size_t epochs = losses.empty() ? 0 : losses[0].size();
  for (size_t e = 0; e < epochs; ++e)
    for (size_t r = 0; r < losses.size(); ++r) os << e + 1 << ',' << r << ',' << losses[r][e] << '\n';
  hddp::write_file_atomic(path, os.str());
}

void plot_errors(const std::string& path, const Curve& dense, const Curve& eval, int64_t epochs,
                 double lo, double hi) {
  hddp::Series f{"f(x)", "with lines lw 2 lc rgb '#1f77b4'", {}}, g{"g(x) (model)", "with lines lw 2 dt 2 lc rgb '#ff7f0e'", {}},
      pts{"evaluation points", "with points pt 7 ps 0.5 lc rgb '#d62728'", {}},
      err{"|f - g|", "with lines lw 2 lc rgb '#2ca02c'", {}}, err_pts{"evaluation points", pts.style, {}};
  for (size_t i = 0; i < dense.x.size(); ++i) {
    f.points.emplace_back(dense.x[i], dense.f[i]);
    g.points.emplace_back(dense.x[i], dense.g[i]);
    err.points.emplace_back(dense.x[i], std::fabs(dense.f[i] - dense.g[i]));
  }
  for (size_t i = 0; i < eval.x.size(); ++i) {
    pts.points.emplace_back(eval.x[i], eval.g[i]);
    err_pts.points.emplace_back(eval.x[i], std::fabs(eval.f[i] - eval.g[i]));
  }
  // The training range, shaded, with its key entry.
  std::ostringstream shade;
  shade << "set key top center\nset object 1 rectangle from " << lo << ", graph 0 to " << hi
        << ", graph 1 behind fillcolor rgb '#dde8f6' fillstyle solid 1.0 noborder\n";
  const std::string key = "keyentry with boxes fillcolor rgb '#dde8f6' fillstyle solid border lc rgb '#9fb6d8' title 'training range'";
  hddp::plot_pdf(path, {{std::to_string(epochs) + " epochs of training", "x", "y", {f, g, pts}, shade.str(), key},
                        {"Absolute difference between prediction and actual function", "x", "|f(x) - g(x)|", {err, err_pts}, "", key}});
}

}  // namespace poly
