#pragma once
// GPT-2's decoder (Radford et al. 2019) as nanoGPT and llm.c write it, from hddp's layers:
//
//   Embedding(V, C, T)                                          token + position
//   n x { Residual(LayerNorm(C), Linear(C, 3C), CausalSelfAttention(C, H), Linear(C, C)),
//         Residual(LayerNorm(C), Linear(C, 4C), GELU(), Linear(4C, C)) }
//   LayerNorm(C), TiedLinear("0.wte", C, V)                     the LM head reads wte
//
//   GptConfig c{.vocab = 256, .context = 64, .layers = 4, .heads = 4, .dim = 128};
//   Sequential<float> model({c.context}, gpt_layers(c), batch);
//   gpt_init(model, c, rng);                     // GPT-2's initialisation
//   const float* logits = model.forward(tokens, batch);   // batch x T x V
//
// Parameters: "0.wte", "0.wpe", then per block 2l+1 (attention) and 2l+2 (MLP) "<i>.<j>.weight"
// and ".bias" (j: 0 LayerNorm, 1 and 3 the Linears), then the final LayerNorm.
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/core/layer.h>
#include <hddp/core/model.h>
#include <hddp/core/rng.h>

namespace hddp {

struct GptConfig {
  int64_t vocab = 256, context = 64, layers = 4, heads = 4, dim = 128;
};
// Throws std::invalid_argument naming the setting that does not fit (all positive, dim a
// multiple of heads).
void check(const GptConfig& c);
std::string to_string(const GptConfig& c);  // "4 layers, 4 heads, dim 128, context 64, vocab 256"

std::vector<LayerSpec> gpt_layers(const GptConfig& c);

// GPT-2's initialisation (nanoGPT's _init_weights): every Linear weight and both embeddings
// N(0, 0.02), each block's output projections N(0, 0.02 / sqrt(2 layers)), biases 0, LayerNorm
// 1 and 0; drawn from rng in arena order.
template <class T>
void gpt_init(Sequential<T>& model, const GptConfig& c, Rng& rng);

// Text from a trained model: `count` tokens after `prompt` (at least one token), each drawn from
// softmax(logits / temperature) over the top_k most likely (top_k 0: all), from rng. The context
// is the last T tokens; a shorter one is padded after its end (causal: the padding is never
// seen). temperature > 0. Runs the model in evaluation mode, batch 1; returns the new tokens.
std::vector<int32_t> gpt_sample(Sequential<float>& model, const GptConfig& c, const std::vector<int32_t>& prompt,
                                int64_t count, double temperature, int64_t top_k, Rng& rng);

extern template void gpt_init<float>(Sequential<float>&, const GptConfig&, Rng&);
extern template void gpt_init<double>(Sequential<double>&, const GptConfig&, Rng&);

}  // namespace hddp
