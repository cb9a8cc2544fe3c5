#include "gpt_train/options.h"

#include <hddp/core/util.h>
#include <hddp/train/exit_code.h>

namespace gpt {

Options::Options() {
  batch_size = 12, lr = 1e-3, warmup = 100, clip_grad_norm = 1.0, seed = 1337, weight_decay = 0.1;
  optimizer = hddp::cli::OptimizerKind::AdamW;
  checkpoint_every = 1;  // every validation (when --checkpoint)
}

void define_options(CLI::App& app, Options& o) {
  using hddp::cli::integer, hddp::cli::number, hddp::cli::positive;
  hddp::cli::house_style(
      app,
      "gpt_train: a byte-level GPT (GPT-2's decoder) trained data-parallel (MPI ranks x OpenMP threads)\n"
      "  mpiexec -n 2 gpt_train [--steps 2000] [--layers 4 --heads 4 --dim 128 --context 64] [--out DIR]\n"
      "Text: Debian's fortunes by default (apt-get install fortunes), or --text FILES/DIRS, or --tokens FILE.\n"
      "Writes metrics.csv, sample.txt and loss.pdf into --out (rank 0) and prints a sample of text.",
      "SIGTERM or SIGUSR1: every rank finishes its step, rank 0 writes the checkpoint, all exit with\n"
      "75; --resume continues bitwise. Steps are counted from 1. A validation every --eval-every steps\n"
      "is what --checkpoint-every counts.\n" + hddp::exit_codes_help(),
      34, o.help, "read options from FILE (TOML/INI, keys the long options without dashes)");
  const std::string d = "Data", m = "Model", t = "Training", v = "Validation and sample", out = "Output";
  app.add_option("--text", o.text, "text files, or folders of them (their files but .dat and .u8),\n"
                                   "read as bytes: one token per byte, vocabulary 256 (default:\n"
                                   "/usr/share/games/fortunes)")->type_name("PATH...")->group(d);
  app.add_option("--tokens", o.tokens, "a token file (uint16 tokens, HDDPTOK1 header: data/text.h) instead\n"
                                       "of text; its vocabulary sizes the model")
      ->check(hddp::cli::non_empty())->type_name("FILE")->group(d)->excludes("--text");
  app.add_option("--write-tokens", o.write_tokens, "write the text's byte tokens to FILE (a token file) and exit")
      ->check(hddp::cli::non_empty())->type_name("FILE")->group(d)->excludes("--tokens");
  app.add_option("--val-fraction", o.val_fraction, "the last part of the tokens kept for validation")
      ->check(hddp::cli::number_where([](double x) { return x > 0 && x < 1; }, "in (0, 1)"))->type_name("X")->group(d);
  app.add_option("--layers", o.layers, "transformer blocks")->check(integer(1, 1024))->type_name("N")->group(m);
  app.add_option("--heads", o.heads, "attention heads (dividing --dim)")->check(integer(1, 1024))->type_name("N")->group(m);
  app.add_option("--dim", o.dim, "embedding width C")->check(integer(1, 65536))->type_name("C")->group(m);
  app.add_option("--context", o.context, "tokens per window T (the block size)")->check(integer(1, 1 << 20))->type_name("T")->group(m);
  app.add_option("--steps", o.steps, "optimizer steps")->check(integer(1, int64_t(1) << 40))->type_name("N")->group(t);
  app.add_option("--batch-size", o.batch_size, "windows per rank per step")->check(integer(1, 1 << 20))->type_name("B")->group(t);
  app.add_option("--lr", o.lr, "peak learning rate (AdamW)")->check(positive())->type_name("X")->group(t);
  app.add_option("--min-lr", o.min_lr, "the cosine's end, after --warmup steps from lr/3 up to --lr")
      ->check(number(0, 1e30))->type_name("X")->group(t);
  app.add_option("--warmup", o.warmup, "steps of linear warmup")->check(integer(0, int64_t(1) << 40))->type_name("N")->group(t);
  app.add_option("--weight-decay", o.weight_decay, "AdamW's decoupled weight decay of the Linear weights (biases,\n"
                                                    "LayerNorm and embeddings take none)")
      ->check(number(0, 1))->default_str("0.1")->type_name("X")->group(t);
  app.add_option("--beta2", o.beta2, "AdamW's beta2")
      ->check(hddp::cli::number_where([](double x) { return x >= 0 && x < 1; }, "in [0, 1)"))->type_name("X")->group(t);
  app.add_option("--clip-grad-norm", o.clip_grad_norm, "clip the averaged gradients to this global 2-norm (0: off)")
      ->check(number(0, 1e30))->type_name("X")->group(t);
  hddp::cli::add_precision_option(app, o.precision, t);
  app.add_option("--seed", o.seed, "seed of the weights, the windows and the sample")->check(integer(0, INT64_MAX))->type_name("N")->group(t);
  app.add_option("--eval-every", o.eval_every, "steps between validations (dividing --steps)")
      ->check(integer(1, int64_t(1) << 40))->type_name("N")->group(v);
  app.add_option("--eval-windows", o.eval_windows, "validation windows, shared among the ranks (the same\n"
                                                   "windows at every validation, for any rank count)")
      ->check(integer(1, 1 << 24))->type_name("N")->group(v);
  app.add_option("--log-every", o.log_every, "steps between progress lines (0: none)")->check(integer(0, int64_t(1) << 40))->type_name("N")->group(v);
  app.add_option("--sample-tokens", o.sample_tokens, "tokens of text to generate at the end (0: none)")
      ->check(integer(0, 1 << 20))->type_name("N")->group(v);
  app.add_option("--temperature", o.temperature, "the sample's softmax temperature")
      ->check(hddp::cli::number_where([](double x) { return x > 0 && x <= 100; }, "in (0, 100]"))->type_name("X")->group(v);
  app.add_option("--top-k", o.top_k, "draw among the K likeliest tokens (0: all)")->check(integer(0, 1 << 24))->type_name("K")->group(v);
  app.add_option("--prompt", o.prompt, "the sample's first bytes (text data) or tokens (a token file:\n"
                                       "comma-separated ids)")->default_str("a newline")->type_name("TEXT")->group(v);
  hddp::cli::add_parallel_options(app, o);
  app.add_option("--out", o.out, "folder for metrics.csv, sample.txt, loss.pdf")->check(hddp::cli::non_empty())->type_name("DIR")->group(out);
  app.add_flag("--plot,!--no-plot", o.plot, "draw loss.pdf with gnuplot")->group(out);
  app.add_option("--stats-json", o.stats_json, "JSON lines: one object per validation, then a summary")
      ->check(hddp::cli::non_empty())->type_name("FILE")->group(out);
  app.add_option("--export", o.export_path, "write the trained weights to FILE (safetensors)")
      ->check(hddp::cli::non_empty())->type_name("FILE")->group(out);
  hddp::cli::add_checkpoint_options(app, o, "weights, AdamW's state, the step, the metrics so far");
  app.add_option_function<std::string>("--debug-inject-nan", [&o](const std::string& s) { o.inject_nan = hddp::cli::to_inject(s); },
                                       "rank RANK (default 0) computes NaN in step STEP")
      ->check(hddp::cli::inject_spec(int64_t(1) << 40))->type_name("STEP[:RANK]")->group("Debugging (tests)");
  app.add_option("--debug-stop-after", o.stop_after, "every rank raises SIGTERM on itself after step STEP: the run\n"
                                                      "stops there or at the next agreement, as on a real signal")
      ->check(integer(1, int64_t(1) << 40))->type_name("STEP")->group("Debugging (tests)");
}

std::map<std::string, std::string> run_identity(const Options& o, const hddp::Sequential<float>& model,
                                                int64_t train_tokens, int64_t val_tokens) {
  std::map<std::string, std::string> id = hddp::cli::identity_of(o);
  id["layers"] = model.describe();
  id["data"] = std::to_string(train_tokens) + " training, " + std::to_string(val_tokens) + " validation tokens";
  id["steps"] = std::to_string(o.steps) + " every " + std::to_string(o.eval_every);
  id["beta2"] = hddp::exact_string(o.beta2);
  id["min_lr"] = hddp::exact_string(o.min_lr);
  return id;
}

}  // namespace gpt
