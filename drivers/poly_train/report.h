#pragma once
// What a run reports: every rank's epoch lines and rank 0's progress while it trains, and at
// the end rank 0's outputs - eval.csv, loss.csv, errors.pdf (gnuplot through gnuplot-iostream),
// the --trace timeline, the --stats table and the --stats-json file - and its summary lines.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/core/trace.h>
#include <hddp/distributed/affinity.h>
#include <hddp/distributed/ddp.h>
#include <hddp/distributed/mpi_env.h>
#include "poly_train/options.h"
#include "poly_train/problem.h"

namespace poly {

// While training: "epoch E, loss = L, rank r/P (host)." every --log-every epochs on every rank
// (stdout), and rank 0's "progress: epoch, us/step, ETA" (stderr). Neither ever blocks training
// (drivers/common/line_log.h); flush_logs() writes what the stream has not taken yet.
void log_epoch(const hddp::mpi::Env& env, const Options& o, int64_t epoch, float loss, int64_t start,
               std::chrono::steady_clock::time_point t_start);
void flush_logs();
// --stats-json FILE (rank 0): opens it for JSON lines, one {"type": "progress"} object per epoch
// line of rank 0 (epoch, loss, step_s so far) and, from report_run, one {"type": "summary"}
// with what --stats prints (schema "hddp.poly_train.stats/1" in every line).
void open_stats(const hddp::mpi::Env& env, const Options& o);

// This rank's training time per phase, seconds, and the trace events of one step.
struct PhaseTimes {
  double forward = 0, backward = 0, optimizer = 0, total = 0;
  using Clock = std::chrono::steady_clock;
  // Adds one step: t[0] start, t[1] loss computed, t[2] backward done, t[3] optimizer done.
  void add(const Clock::time_point (&t)[4], hddp::Trace* trace);
};

// Everything the end-of-run report needs besides the model.
struct RunSummary {
  int64_t start = 0;  // first epoch trained (a resume's)
  int threads = 1;
  PhaseTimes times;
  std::vector<hddp::RankPlacement> placement;
};

// The end of a run (collective): gathers every rank's timings and trace events to rank 0,
// which evaluates the model on the 32 points and a dense grid, writes the outputs and prints
// the summary. `history`: rank 0's loss history of every rank.
void report_run(const hddp::mpi::Env& env, const Options& o, const RunSummary& run, hddp::DistributedModel& ddp,
                hddp::Sequential<float>& model,
                const Scalers& scale, const std::vector<std::vector<float>>& history, hddp::Trace* trace);

struct Curve {
  std::vector<double> x, f, g;  // f: target, g: model
};

// eval.csv: x,f,g,abs_err for the evaluation points.
void write_eval_csv(const std::string& path, const Curve& eval);
// loss.csv: epoch,rank,loss; losses[r][e] is rank r's loss at epoch e+1.
void write_loss_csv(const std::string& path, const std::vector<std::vector<float>>& losses);


// errors.pdf: left, f and g over `dense` with the training range shaded and the evaluation
// points; right, |f - g| with the same shading. Throws hddp::Error if gnuplot fails.
void plot_errors(const std::string& path, const Curve& dense, const Curve& eval, int64_t epochs,
                 double train_lo, double train_hi);


}  // namespace poly
