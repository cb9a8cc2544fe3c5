#include <hddp/core/gpt.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include <hddp/core/layers.h>
#include <hddp/core/residual.h>
#include <hddp/core/transformer.h>
#include <hddp/kernels/check.h>

namespace hddp {

void check(const GptConfig& c) {
  HDDP_CHECK_ARG(c.vocab > 0 && c.vocab <= (int64_t(1) << 24), "GPT: vocab must be in [1, 2^24], got " << c.vocab);
  HDDP_CHECK_ARG(c.context > 0, "GPT: context must be positive, got " << c.context);
  HDDP_CHECK_ARG(c.layers > 0, "GPT: layers must be positive, got " << c.layers);
  HDDP_CHECK_ARG(c.heads > 0 && c.dim > 0 && c.dim % c.heads == 0,
                 "GPT: dim must be a positive multiple of heads, got dim " << c.dim << " and " << c.heads << " heads");
}

std::string to_string(const GptConfig& c) {
  return std::to_string(c.layers) + " layers, " + std::to_string(c.heads) + " heads, dim " + std::to_string(c.dim) +
         ", context " + std::to_string(c.context) + ", vocab " + std::to_string(c.vocab);
}

std::vector<LayerSpec> gpt_layers(const GptConfig& c) {
  check(c);
  const int64_t C = c.dim;
  std::vector<LayerSpec> l{Embedding(c.vocab, C, c.context)};
  for (int64_t i = 0; i < c.layers; ++i) {
    l.push_back(Residual({LayerNorm(C), Linear(C, 3 * C), CausalSelfAttention(C, c.heads), Linear(C, C)}));
    l.push_back(Residual({LayerNorm(C), Linear(C, 4 * C), GELU(), Linear(4 * C, C)}));
  }
  l.push_back(LayerNorm(C));
  l.push_back(TiedLinear("0.wte", C, c.vocab));
  return l;
}

template <class T>
void gpt_init(Sequential<T>& model, const GptConfig& c, Rng& rng) {
  const double proj_sd = 0.02 / std::sqrt(2.0 * double(c.layers));
  ParamArena<T>& a = model.arena();
  for (const ParamView& v : a.views()) {
    T* p = a.params() + v.offset;
    const std::string& n = v.name;
    const bool bias = n.size() > 5 && n.compare(n.size() - 5, 5, ".bias") == 0;
    const bool norm = !v.decay && !bias && n != "0.wte" && n != "0.wpe";  // LayerNorm weights
    const bool proj = n.size() > 9 && n.compare(n.size() - 9, 9, ".3.weight") == 0;  // a block's output projection
    for (int64_t k = 0; k < v.size(); ++k)
      p[k] = bias ? T(0) : norm ? T(1) : rng.normal<T>(0.0, proj ? proj_sd : 0.02);
  }
}

std::vector<int32_t> gpt_sample(Sequential<float>& model, const GptConfig& c, const std::vector<int32_t>& prompt,
                                int64_t count, double temperature, int64_t top_k, Rng& rng) {
  HDDP_CHECK_ARG(!prompt.empty(), "gpt_sample: the prompt must hold at least one token");
  HDDP_CHECK_ARG(temperature > 0 && std::isfinite(temperature), "gpt_sample: temperature must be > 0, got " << temperature);
  HDDP_CHECK_ARG(top_k >= 0, "gpt_sample: top_k must be >= 0, got " << top_k);
  const bool was_training = model.training();
  model.set_training(false);
  std::vector<int32_t> text = prompt, out;
  std::vector<float> x(size_t(c.context));
  std::vector<double> p(size_t(c.vocab));
  std::vector<int64_t> order(size_t(c.vocab));
  for (int64_t n = 0; n < count; ++n) {
    const int64_t len = std::min<int64_t>(int64_t(text.size()), c.context), start = int64_t(text.size()) - len;
    std::fill(x.begin(), x.end(), 0.0f);
    for (int64_t t = 0; t < len; ++t) x[size_t(t)] = float(text[size_t(start + t)]);
    const float* logits = model.forward(x, 1) + (len - 1) * c.vocab;
    // Softmax over the top k of logits / temperature, in double.
    std::iota(order.begin(), order.end(), 0);
    const int64_t k = top_k > 0 ? std::min(top_k, c.vocab) : c.vocab;
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int64_t a, int64_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    const double mx = double(logits[order[0]]) / temperature;
    double sum = 0;
    for (int64_t i = 0; i < k; ++i) sum += p[size_t(i)] = std::exp(double(logits[order[size_t(i)]]) / temperature - mx);
    double u = rng.uniform01<double>() * sum;
    int64_t pick = k - 1;
    for (int64_t i = 0; i < k; ++i)
      if ((u -= p[size_t(i)]) < 0) {
        pick = i;
        break;
      }
    text.push_back(int32_t(order[size_t(pick)]));
    out.push_back(text.back());
  }
  model.set_training(was_training);
  return out;
}

template void gpt_init<float>(Sequential<float>&, const GptConfig&, Rng&);
template void gpt_init<double>(Sequential<double>&, const GptConfig&, Rng&);

}  // namespace hddp
