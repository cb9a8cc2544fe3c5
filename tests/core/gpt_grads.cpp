// gpt_grads OUTDIR [bf16]: one forward and backward of a small GPT (core/gpt.h: 2 layers, 3
// heads, dim 12, context 19, vocabulary 37, batch 3; bf16: 4 heads, dim 64, context 64, batch 4,
// products large enough for a bf16 unit to take them), GPT-2's initialisation scaled up so every
// path carries weight, on fixed tokens, for gpt_vs_torch.py: OUTDIR/weights.safetensors (the
// parameters, hddp's names), OUTDIR/grads.safetensors (their gradients, the same names),
// OUTDIR/logits.f32 and OUTDIR/tokens.i32 (inputs then targets, raw), and the loss on stdout.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <hddp/core/gpt.h>
#include <hddp/core/loss.h>
#include <hddp/core/safetensors.h>
#include <hddp/kernels/units.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gpt_grads OUTDIR [bf16]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const bool bf16 = argc > 2 && std::string(argv[2]) == "bf16";
  const hddp::GptConfig c = bf16 ? hddp::GptConfig{.vocab = 37, .context = 64, .layers = 2, .heads = 4, .dim = 64}
                                 : hddp::GptConfig{.vocab = 37, .context = 19, .layers = 2, .heads = 3, .dim = 12};
  const int64_t B = bf16 ? 4 : 3;
  hddp::Rng rng(5, 0);
  hddp::Sequential<float> m({c.context}, hddp::gpt_layers(c), B);
  hddp::gpt_init(m, c, rng);
  for (int64_t k = 0; k < m.num_params(); ++k) m.params()[k] *= 4;  // LayerNorm 4, weights 0.08: every path carries weight
  if (bf16) m.set_precision(hddp::Precision::Bf16);
  std::vector<float> x(size_t(B * c.context));
  std::vector<int32_t> t(2 * x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    t[i] = int32_t(rng.uniform01<double>() * double(c.vocab));
    t[x.size() + i] = int32_t(rng.uniform01<double>() * double(c.vocab));
    x[i] = float(t[i]);
  }
  hddp::SoftmaxCrossEntropy<float> xent(c.vocab);
  m.zero_grad();
  const float* logits = m.forward(x, B);
  std::ofstream(dir + "/logits.f32", std::ios::binary).write(reinterpret_cast<const char*>(logits), std::streamsize(4 * x.size() * size_t(c.vocab)));
  const double loss = xent.forward(logits, t.data() + x.size(), B * c.context);
  m.backward(xent.grad());
  std::ofstream(dir + "/tokens.i32", std::ios::binary).write(reinterpret_cast<const char*>(t.data()), std::streamsize(4 * t.size()));
  hddp::save_weights(dir + "/weights.safetensors", m.arena(), {});
  hddp::ParamArena<float> g;
  for (const hddp::ParamView& v : m.param_views()) g.add(v.name, v.rows, v.cols, v.shape);
  std::copy(m.grads(), m.grads() + m.num_params(), g.params());
  hddp::save_weights(dir + "/grads.safetensors", g, {});
  std::printf("{\"bf16_unit\": \"%s\", \"loss\": %.9g, \"vocab\": %lld, \"context\": %lld, \"layers\": %lld, \"heads\": %lld, \"dim\": %lld, \"batch\": %lld}\n",
              bf16 ? hddp::to_string(hddp::bf16_unit()) : "none", loss, (long long)c.vocab, (long long)c.context, (long long)c.layers, (long long)c.heads, (long long)c.dim, (long long)B);
  return 0;
}
