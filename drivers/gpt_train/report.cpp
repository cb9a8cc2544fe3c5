#include "gpt_train/report.h"

#include <cmath>
#include <cstdio>
#include <string>

#include <hddp/core/safetensors.h>
#include <hddp/core/util.h>
#include <hddp/kernels/gemm_bf16.h>
#include <hddp/kernels/units.h>
#include <hddp/train/plot.h>

namespace gpt {
namespace {

// Bytes as text; token ids (a token file) as "[id]".
std::string as_text(const std::vector<int32_t>& t, bool text) {
  std::string s;
  for (int32_t v : t) s += text ? std::string(1, char(v)) : "[" + std::to_string(v) + "]";
  return s;
}

void plot_loss(const std::string& path, const hddp::MetricsTable& m, int ranks) {
  hddp::Series train{"training (mean over the interval)", "with linespoints lw 2 pt 7 lc rgb '#1f77b4'", {}},
      val{"validation", "with linespoints lw 2 pt 7 lc rgb '#ff7f0e'", {}};
  for (size_t r = 0; r < m.size(); ++r) {
    train.points.emplace_back(m.at(r, "step"), m.at(r, "train_loss"));
    val.points.emplace_back(m.at(r, "step"), m.at(r, "val_loss"));
  }
  hddp::plot_pdf(path, {{"Cross-entropy per token", "step", "loss (nats)", {train, val}, "set key top right\n", ""}},
                 "GPT, " + std::to_string(ranks) + " rank(s)");
}

}  // namespace

void write_results(const Options& o, const hddp::MetricsTable& metrics, const Summary& s, const std::vector<int32_t>& prompt,
                   const std::vector<int32_t>& sample, hddp::Sequential<float>& model, hddp::DistributedModel& ddp,
                   hddp::JsonLines* stats) {
  const std::string dir = o.out + "/";
  metrics.write_csv(dir + "metrics.csv");
  const double step_ms = 1e3 * s.train_s / double(std::max<int64_t>(s.steps, 1));
  std::printf("training: %lld steps in %.2f s (%.2f ms per step, %.0f tokens/s), %d rank(s) x %d thread(s); "
              "validation loss %.4f nats per token; peak memory %.0f MB per rank\n",
              (long long)s.steps, s.train_s, step_ms,
              double(o.batch_size * o.context * s.ranks) / (step_ms / 1e3), s.ranks, s.threads, s.val_loss, s.peak_rss_mb);
  if (!o.checkpoint.empty()) std::printf("checkpoint: %s (continue with --resume and more --steps)\n", o.checkpoint.c_str());
  std::string files = dir + "metrics.csv";
  if (!sample.empty()) {
    const std::string text = as_text(prompt, s.text) + as_text(sample, s.text);
    hddp::write_file_atomic(dir + "sample.txt", text);
    std::printf("sample (%zu tokens, temperature %g, top-k %lld, seed %llu):\n%s\n--- end of sample\n", sample.size(),
                o.temperature, (long long)o.top_k, (unsigned long long)o.seed, text.c_str());
    files += ", " + dir + "sample.txt";
  }
  std::printf("wrote %s\n", files.c_str());
  if (stats) {
    stats->write({{"type", "summary"}, {"ranks", int64_t(s.ranks)}, {"threads", int64_t(s.threads)}, {"steps", s.steps},
                  {"train_s", s.train_s}, {"step_s", s.train_s / double(std::max<int64_t>(s.steps, 1))},
                  {"step_ms_median", s.step_ms_median},
                  {"val_loss", s.val_loss}, {"peak_rss_mb", s.peak_rss_mb}, {"params", model.num_params()},
                  {"precision", hddp::to_string(o.precision)}, {"bf16_kernel", hddp::gemm_bf16_kernel_name()},
                  {"bf16_unit", o.precision == hddp::Precision::Bf16 ? hddp::to_string(hddp::bf16_unit()) : "none"},
                  {"grad_dtype", o.bf16_grads ? "bf16" : "float"}, {"allreduce_bytes_per_step", ddp.reducer().stats().bytes_per_step}});
    stats->close();
  }
  if (!o.export_path.empty()) {
    hddp::save_weights(o.export_path, model.arena(), {{"format", "pt"}, {"hddp.layers", model.describe()}});
    std::printf("exported the weights to %s (safetensors)\n", o.export_path.c_str());
  }
  if (o.plot && hddp::gnuplot_or_warn("loss.pdf", "metrics.csv")) {
    plot_loss(dir + "loss.pdf", metrics, s.ranks);
    std::printf("plotted the losses to %sloss.pdf\n", dir.c_str());
  }
}

}  // namespace gpt
