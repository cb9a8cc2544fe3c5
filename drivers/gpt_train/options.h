#pragma once
// gpt_train's command line: the data (text files or a token file), the model (GPT-2's decoder,
// core/gpt.h), its training (AdamW with weight-decay groups, warmup then cosine, clipping),
// validation, the sample at the end, and the shared parallelism and checkpoint groups.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <hddp/core/gpt.h>
#include <hddp/core/model.h>
#include "common/options.h"
#include "common/run_options.h"

namespace gpt {

struct Options : hddp::cli::TrainingOptions, hddp::cli::ParallelOptions, hddp::cli::CheckpointOptions {
  Options();
  std::vector<std::string> text;   // files or folders of text (default: Debian's fortunes)
  std::string tokens;              // a token file instead (data/text.h)
  std::string write_tokens;        // write the text's byte tokens to this token file and exit
  double val_fraction = 0.1;
  int64_t layers = 4, heads = 4, dim = 128, context = 64;
  int64_t steps = 2000, eval_every = 250, eval_windows = 240, log_every = 50;
  double min_lr = 1e-4, beta2 = 0.99;
  int64_t sample_tokens = 300, top_k = 40;
  double temperature = 0.8;
  std::string prompt = "\n";
  std::string out = "out-gpt", stats_json, export_path;
  bool plot = true, help = false;
  hddp::cli::Inject inject_nan;  // --debug-inject-nan STEP[:RANK] (tests)
  int64_t stop_after = 0;        // --debug-stop-after STEP (tests): every rank raises SIGTERM then
};

void define_options(CLI::App& app, Options& o);

// What a checkpoint must match to be resumed (with the rank count).
std::map<std::string, std::string> run_identity(const Options& o, const hddp::Sequential<float>& model,
                                                int64_t train_tokens, int64_t val_tokens);

}  // namespace gpt
