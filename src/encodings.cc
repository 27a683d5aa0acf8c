// src/encodings.cc: the catalogue behind `posenc list` and every tool that compares encodings.
#include "posenc/encodings.h"

#include <array>
#include <string>

#include "src/check.h"

namespace posenc {

namespace {
constexpr std::array<EncodingInfo, 10> kEncodings{{
    {EncodingKind::none, "none", "baseline", "NoPE: no positional information (causal masking alone leaks some order)", ""},
    {EncodingKind::sinusoidal, "sinusoidal", "absolute",
     "Vaswani et al. 2017: sin/cos of position x geometric frequencies, added to embeddings",
     "interleaved, split, model_dim frequencies, half_dim_minus_one frequencies (fairseq), position offset"},
    {EncodingKind::learned, "learned", "absolute",
     "BERT/GPT-2/ViT: a trained (max_len, dim) table; undefined past max_len", ""},
    {EncodingKind::binary, "binary", "absolute",
     "position as its bits (+-1 or 0/1): unique, but 7=0111 and 8=1000 are far apart (seed 004's counter-example)",
     "signed, unsigned"},
    {EncodingKind::relative_bias, "relative", "relative bias",
     "a learned scalar per head per clipped distance k - q in [-K, K], added to the logits (seed 000)", ""},
    {EncodingKind::t5_bias, "t5", "relative bias",
     "T5 (Raffel et al.): learned scalar per head per log-spaced distance bucket", "bidirectional, causal"},
    {EncodingKind::alibi, "alibi", "relative bias",
     "ALiBi (Press et al. 2022): fixed per-head slope times distance, no parameters",
     "bloom slopes, mpt slopes (alibi_bias_max), causal, symmetric"},
    {EncodingKind::shaw, "shaw", "relative vectors",
     "Shaw et al. 2018: learned key and value vectors per clipped distance, shared across heads", ""},
    {EncodingKind::transformer_xl, "xl", "relative vectors",
     "Transformer-XL (Dai et al. 2019): sinusoidal R_{i-j} projected by W_R, with global biases u and v", ""},
    {EncodingKind::rope, "rope", "rotary",
     "RoPE (Su et al.): rotate q and k pairs by position x frequency so q.k depends on m - n",
     "half (NeoX), interleaved (GPT-J), partial rotary, linear, dynamic, yarn, longrope, llama3, "
     "mrope (Qwen2-VL), mrope_interleaved (Qwen3-VL), axial_2d, frequency divisors"},
}};
}  // namespace

std::span<const EncodingInfo> all_encodings() { return kEncodings; }

const EncodingInfo& encoding_info(std::string_view name) {
  for (const EncodingInfo& e : kEncodings)
    if (e.name == name) return e;
  std::string known;
  for (const EncodingInfo& e : kEncodings) {
    if (!known.empty()) known += ", ";
    known += e.name;
  }
  detail::fail("encoding", "name = '", name, "' is invalid: expected one of ", known);
}

}  // namespace posenc
