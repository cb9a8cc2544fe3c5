// gpt_train: a byte-level GPT (GPT-2's decoder, core/gpt.h) trained data-parallel over MPI ranks,
// OpenMP inside each rank, on text (Debian's fortunes by default) or a token file. Each step
// every rank takes its own windows of the training tokens (data/text.h: window g of step s is
// drawn from (seed, s, g), rank r takes windows [r B, (r + 1) B)): forward, cross-entropy over
// every position, backward (gradient buckets reduced while it runs), then the run kit's verdict,
// clipping, AdamW with warmup + cosine. Every --eval-every steps the validation windows (the same
// each time, shared among the ranks) give the validation loss. At the end rank 0 writes the
// metrics and prints a sample of text. Run `gpt_train --help`.
//
// The run kit (train/training_run.h) counts a validation interval as its "epoch": checkpoints,
// the metrics table and the bitwise resume follow from there. Exit codes: hddp::Exit.
#include <omp.h>
#include <sys/resource.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <hddp/core/gpt.h>
#include <hddp/core/loss.h>
#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/schedule.h>
#include <hddp/core/util.h>
#include <hddp/kernels/check.h>
#include <hddp/data/sampler.h>
#include <hddp/data/text.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/train/all_ranks.h>
#include <hddp/train/json_lines.h>
#include <hddp/train/line_log.h>
#include <hddp/train/metrics_table.h>
#include <hddp/train/rank_sums.h>
#include <hddp/train/stop_guard.h>
#include <hddp/train/training_run.h>
#include "common/driver_setup.h"
#include "gpt_train/options.h"
#include "gpt_train/report.h"

namespace gpt {
namespace {

using hddp::Exit;
using hddp::mpi::Env;

const std::vector<std::string> kMetricColumns = {"step", "train_loss", "val_loss", "lr", "elapsed_train_s"};

int usage_error(const Env& env, const std::string& err) {  // every rank gets here together
  if (env.root()) std::fprintf(stderr, "gpt_train: error: %s\n", err.c_str());
  return hddp::code(Exit::Usage);
}

struct Data {
  uint32_t vocab = 256;
  bool text = true;  // bytes of text (else a token file's tokens)
  hddp::TokenSplit split;
  std::string source;
};

// Every rank reads the data (a few MB); "" or the error of any rank, the same everywhere.
std::string read_data(const Env& env, const Options& o, Data& d) {
  std::string err;
  try {
    std::vector<uint16_t> all;
    if (!o.tokens.empty()) {
      hddp::TokenFile f = hddp::read_token_file(o.tokens);
      d.vocab = f.vocab, d.text = false, all = std::move(f.tokens), d.source = o.tokens;
    } else {
      std::vector<std::string> files;
      const std::vector<std::string> paths = o.text.empty() ? std::vector<std::string>{hddp::kFortunesDir} : o.text;
      for (const std::string& p : paths) {
        std::error_code ec;
        HDDP_CHECK(std::filesystem::exists(p, ec), "--text: " << p << ": no such file or folder");
        if (std::filesystem::is_directory(p, ec)) {
          for (std::string& f : hddp::text_files_in(p)) files.push_back(std::move(f));
        } else {
          files.push_back(p);
        }
      }
      all = hddp::read_text_tokens(files);
      d.source = std::to_string(files.size()) + " file(s) of text" + (o.text.empty() ? std::string(" in ") + hddp::kFortunesDir : "");
    }
    d.split = hddp::split_tokens(all, o.val_fraction);
    // One window of each part: a text shorter than that is refused here, on every rank.
    const hddp::WindowSampler a(d.split.train, o.context, o.seed, "the training part (" + d.source + ")");
    const hddp::WindowSampler b(d.split.val, o.context, o.seed, "the validation part (--val-fraction of " + d.source + ")");
  } catch (const hddp::Error& e) {
    err = hddp::user_message(e.what());
  } catch (const std::bad_alloc&) {
    err = "out of memory while reading the data (every rank holds all of it)";
  }
  return hddp::agree_on_error(env, err);
}

// The prompt as tokens: its bytes (text), or comma-separated ids (a token file).
std::string prompt_tokens(const Options& o, const Data& d, std::vector<int32_t>& t) {
  t.clear();
  if (d.text) {
    for (unsigned char c : o.prompt) t.push_back(c);
  } else {
    std::stringstream s(o.prompt);
    std::string item;
    while (std::getline(s, item, ',')) {
      char* end = nullptr;
      const long v = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end || v < 0 || v >= long(d.vocab))
        return "--prompt: '" + item + "' is not a token id in [0, " + std::to_string(d.vocab) + ")";
      t.push_back(int32_t(v));
    }
  }
  return t.empty() ? "--prompt: empty (give at least one byte or token)" : "";
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;
}

// The mean loss per token over the validation windows (every rank the same value): windows
// [0, eval_windows) of step 0 of the validation sampler, split among the ranks.
double validate(const Env& env, hddp::Watchdog& watchdog, hddp::Sequential<float>& model, const hddp::WindowSampler& val,
                const Options& o, int64_t vocab) {
  const hddp::Shard s = hddp::shard_of(o.eval_windows, env.rank(), env.size());
  std::vector<float> x(size_t(o.batch_size * o.context));
  std::vector<int32_t> y(x.size());
  hddp::SoftmaxCrossEntropy<float> xent(vocab);
  hddp::RankSums sums;
  model.set_training(false);
  for (int64_t w = 0; w < s.count; w += o.batch_size) {
    const int64_t n = std::min(o.batch_size, s.count - w);
    val.fill(0, s.begin + w, n, x.data(), y.data());
    const double loss = xent.forward(model.forward(std::span(x).first(size_t(n * o.context)), n), y.data(), n * o.context);
    sums.add("loss", loss * double(n * o.context));
  }
  sums.add("tokens", double(s.count * o.context));
  model.set_training(true);
  const hddp::RankSums::Totals t = sums.reduce(env, &watchdog, "the validation loss");
  return t.at("loss") / t.at("tokens");
}

int run(Env& env, const Options& o) {
  const int rank = env.rank(), size = env.size();
  const int threads = hddp::drivers::resolve_threads(o.threads);
  omp_set_num_threads(threads);
  if (o.inject_nan.rank >= size && o.inject_nan.epoch > 0)
    return usage_error(env, "--debug-inject-nan: rank " + std::to_string(o.inject_nan.rank) + " does not exist (" +
                                std::to_string(size) + " rank(s))");
  if (o.steps % o.eval_every != 0)
    return usage_error(env, "--steps " + std::to_string(o.steps) + " is not a multiple of --eval-every " +
                                std::to_string(o.eval_every) + ": give steps that end on a validation");
  if (!o.bucket_mb || !o.first_bucket_mb)
    return usage_error(env, "--bucket-mb auto measures on random inputs, which are no token ids: give a size in MiB");
  Data data;
  if (const std::string err = read_data(env, o, data); !err.empty()) return usage_error(env, err);
  if (!o.write_tokens.empty()) {  // tokenise and stop
    std::string err;
    if (env.root()) try {
        std::vector<uint16_t> all = data.split.train;
        all.insert(all.end(), data.split.val.begin(), data.split.val.end());
        hddp::write_token_file(o.write_tokens, all, data.vocab);
        std::printf("wrote %zu tokens (vocabulary %u) of %s to %s\n", all.size(), data.vocab, data.source.c_str(),
                    o.write_tokens.c_str());
      } catch (const hddp::Error& e) {
        err = hddp::user_message(e.what());
      }
    err = hddp::agree_on_error(env, err);
    return err.empty() ? 0 : usage_error(env, err);
  }
  std::vector<int32_t> prompt;
  if (const std::string err = prompt_tokens(o, data, prompt); !err.empty()) return usage_error(env, err);
  const hddp::GptConfig c{.vocab = data.vocab, .context = o.context, .layers = o.layers, .heads = o.heads, .dim = o.dim};
  std::unique_ptr<hddp::Sequential<float>> net;
  try {
    net = std::make_unique<hddp::Sequential<float>>(hddp::Shape{c.context}, hddp::gpt_layers(c), o.batch_size);
  } catch (const std::invalid_argument& e) {
    return usage_error(env, "the model (" + hddp::to_string(c) + "): " + hddp::user_message(e.what()));
  }
  hddp::Sequential<float>& model = *net;
  hddp::Rng init(o.seed, 0);
  hddp::gpt_init(model, c, init);
  model.set_precision(o.precision);
  std::string unit;
  try {
    unit = hddp::cli::precision_report(o);
  } catch (const hddp::cli::UsageError& e) {
    return usage_error(env, e.what());
  }
  hddp::AdamW<float> opt(model.num_params(), {.lr = o.lr, .beta1 = 0.9, .beta2 = o.beta2, .eps = 1e-8, .weight_decay = o.decay()});
  opt.set_decay_groups(model.param_views());
  std::optional<hddp::LrSchedule> schedule;
  try {
    schedule = hddp::LrSchedule::warmup_cosine(o.lr, o.warmup, o.steps, o.min_lr);
  } catch (const std::invalid_argument& e) {
    return usage_error(env, "--warmup " + std::to_string(o.warmup) + ", --min-lr " + hddp::exact_string(o.min_lr) +
                                " over --steps " + std::to_string(o.steps) + ": " + hddp::user_message(e.what()));
  }
  hddp::TrainingRunOptions ro = hddp::drivers::training_run_options(o, o, o);
  ro.program = "gpt_train", ro.epochs = o.steps / o.eval_every, ro.steps_per_epoch = o.eval_every;
  ro.identity = run_identity(o, model, int64_t(data.split.train.size()), int64_t(data.split.val.size()));
  ro.schedule = &*schedule, ro.metrics = kMetricColumns, ro.keep_train_seconds = true;
  ro.names.epochs = "--steps";
  hddp::TrainingRun run(env, model, opt, ro);
  if (const std::string err = run.begin(); !err.empty()) return usage_error(env, err);
  if (env.root()) {
    std::printf("data: %zu training and %zu validation tokens (vocabulary %u) from %s\n", data.split.train.size(),
                data.split.val.size(), data.vocab, data.source.c_str());
    std::printf("model: GPT, %s: %lld parameters (%lld without weight decay); %d rank(s) x %d thread(s), batch %lld "
                "windows per rank, %lld tokens per step\n",
                hddp::to_string(c).c_str(), (long long)model.num_params(), (long long)opt.no_decay_values(), size, threads,
                (long long)o.batch_size, (long long)(o.batch_size * o.context * size));
    if (!unit.empty()) std::printf("precision: %s\n", unit.c_str());
  }
  std::unique_ptr<hddp::JsonLines> stats;
  if (env.root() && !o.stats_json.empty()) stats = std::make_unique<hddp::JsonLines>(o.stats_json);

  const hddp::WindowSampler train(data.split.train, o.context, o.seed), val(data.split.val, o.context, o.seed ^ 0x5a5a5a5a5a5aULL);
  hddp::MetricsTable& metrics = run.metrics();
  const int64_t start = run.first_step(), total = run.total_steps(), B = o.batch_size, T = o.context;
  double last_val = metrics.size() ? metrics.rows().back()[2] : NAN;
  const auto epoch_end = [&](const hddp::EpochEnd& e) {
    const int64_t step = (e.epoch + 1) * o.eval_every;
    last_val = validate(env, run.watchdog(), model, val, o, c.vocab);
    const double elapsed = run.train_seconds(), lr = schedule->lr_at(step - 1);
    metrics.add({double(step), e.train_loss, last_val, lr, elapsed});
    if (!env.root()) return;
    run.log().line("step %lld/%lld: train loss %.4f, val loss %.4f (nats per token), lr %.3g, %.1f ms per step (%s)\n",
                   (long long)step, (long long)o.steps, e.train_loss, last_val, lr, 1e3 * elapsed / double(step),
                   hddp::eta(elapsed, step - start, total - step).c_str());
    if (stats) stats->write({{"type", "eval"}, {"step", step}, {"train_loss", e.train_loss}, {"val_loss", last_val},
                             {"lr", lr}, {"elapsed_train_s", elapsed}});
  };
  std::vector<float> x(size_t(B * T));
  std::vector<int32_t> y(x.size());
  hddp::SoftmaxCrossEntropy<float> xent(c.vocab);
  const int64_t wpe = int64_t(model.arena().view(*model.arena().find("0.wpe")).offset);
  std::vector<double> step_ms;  // each step's wall time (a validation's included): the median to the summary
  for (int64_t step = start; step < total; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    train.fill(step, int64_t(rank) * B, B, x.data(), y.data());
    if (step + 1 == o.inject_nan.epoch && rank == o.inject_nan.rank) model.params()[wpe] = std::nanf("");
    model.zero_grad();
    const double loss = xent.forward(model.forward(x, B), y.data(), B * T);
    run.ddp().backward(xent.grad());
    if (env.root() && o.log_every > 0 && (step + 1) % o.log_every == 0 && (step + 1) % o.eval_every != 0) {
      const double t = run.train_seconds();
      run.log().line("step %lld/%lld: loss %.4f, %.1f ms per step (%s)\n", (long long)(step + 1), (long long)o.steps, loss,
                     1e3 * t / double(step + 1), hddp::eta(t, step + 1 - start, total - step - 1).c_str());
    }
    if (step + 1 == o.stop_after) std::raise(SIGTERM);  // the handler (stop_guard.h) notes it; end_step stops
    if (const std::optional<int> exit = run.end_step(step, loss, B, epoch_end)) return *exit;
    step_ms.push_back(1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  run.log().flush();
  if (start == total) last_val = validate(env, run.watchdog(), model, val, o, c.vocab);
  const double rss = peak_rss_mb();
  double rss_max = rss;
  {
    std::vector<double> v(size_t(size), 0.0);
    v[size_t(rank)] = rss;
    hddp::sum_over_ranks(env, &run.watchdog(), v, "the peak memory");
    rss_max = *std::max_element(v.begin(), v.end());
  }
  if (env.root()) {
    Summary s{run.train_seconds(), total, size, omp_get_max_threads(), last_val, rss_max, data.text,
              step_ms.empty() ? 0.0 : hddp::median(step_ms)};
    hddp::Rng sampler(o.seed, 7);
    std::vector<int32_t> text;
    if (o.sample_tokens > 0) text = hddp::gpt_sample(model, c, prompt, o.sample_tokens, o.temperature, o.top_k, sampler);
    write_results(o, metrics, s, prompt, text, model, run.ddp(), stats.get());
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace gpt

int main(int argc, char** argv) {
  using namespace gpt;
  Options o;
  CLI::App app("", "gpt_train");
  define_options(app, o);
  hddp::drivers::Parsed p{"gpt_train"};
  try {
    p.source_hash = hddp::cli::parse(app, argc - 1, argv + 1);
    hddp::cli::check_options(app, o, o);
  } catch (const hddp::cli::UsageError& e) {
    p.error = e.what();
  }
  p.help = o.help, p.thread_level = hddp::required_thread_level(o.mode);
  if (p.help) p.help_text = app.help();
  const auto checks = [&](const Env& env) {
    std::string err = hddp::drivers::check_out_dir(env, o.out);
    return err.empty() ? hddp::drivers::check_output_files(
                             env, {{"--stats-json", o.stats_json}, {"--export", o.export_path}, {"--write-tokens", o.write_tokens}})
                       : err;
  };
  return hddp::drivers::driver_main(p, &argc, &argv, checks, [&](Env& env) {
    hddp::install_stop_handlers();  // after MPI_Init, so nothing Open MPI installs can replace them
    return run(env, o);
  });
}
