#pragma once
// mnist_train's outputs, rank 0 after the last epoch: metrics.csv, confusion.csv, the summary
// lines and JSON, the exported weights, training.pdf.
#include <string>

#include <hddp/core/model.h>
#include <hddp/distributed/ddp.h>
#include <hddp/train/evaluate.h>
#include <hddp/train/json_lines.h>
#include <hddp/train/metrics_table.h>
#include "mnist_train/options.h"

namespace mnist {

void write_results(const Options& o, const hddp::MetricsTable& metrics, const hddp::Evaluation& last, double train_s,
                   int64_t steps, int size, int threads, hddp::Sequential<float>& model, hddp::DistributedModel& ddp,
                   hddp::JsonLines* stats);

}  // namespace mnist
