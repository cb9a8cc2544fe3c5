#pragma once
// gpt_train's outputs, rank 0 after the last step: metrics.csv, sample.txt, loss.pdf, the
// summary lines and JSON, the exported weights.
#include <cstdint>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/distributed/ddp.h>
#include <hddp/train/json_lines.h>
#include <hddp/train/metrics_table.h>
#include "gpt_train/options.h"

namespace gpt {

struct Summary {
  double train_s = 0;
  int64_t steps = 0;
  int ranks = 1, threads = 1;
  double val_loss = 0, peak_rss_mb = 0;  // the last validation; the largest rank's peak memory
  bool text = true;                      // byte tokens (the sample prints as text)
  double step_ms_median = 0;             // this run's steps (rank 0's clock)
};

void write_results(const Options& o, const hddp::MetricsTable& metrics, const Summary& s, const std::vector<int32_t>& prompt,
                   const std::vector<int32_t>& sample, hddp::Sequential<float>& model, hddp::DistributedModel& ddp,
                   hddp::JsonLines* stats);

}  // namespace gpt
