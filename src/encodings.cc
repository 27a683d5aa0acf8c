// src/encodings.cc: the catalogue behind `posenc list` and the tools' registry (see encodings.h).
#include "posenc/encodings.h"

#include <array>
#include <string>

#include "src/check.h"

namespace posenc {

namespace {
using Role = EncodingRole;
constexpr std::array<EncodingInfo, 10> kEncodings{{
    {EncodingKind::none, "none", "baseline",
     "NoPE: no positional information (causal masking alone leaks some order)", "", Role::none, ""},
    {EncodingKind::sinusoidal, "sinusoidal", "absolute",
     "Vaswani et al. 2017: sin/cos of position x geometric frequencies, added to embeddings",
     "interleaved, split, model_dim frequencies, half_dim_minus_one frequencies (fairseq), position offset",
     Role::absolute, ""},
    {EncodingKind::learned, "learned", "absolute",
     "BERT/GPT-2/ViT: a trained (max_len, dim) table; undefined past max_len", "", Role::absolute, ""},
    {EncodingKind::binary, "binary", "absolute",
     "position as its bits (+-1 or 0/1): unique, but neighbours 7=0111 and 8=1000 are far apart",
     "signed, unsigned", Role::absolute, ""},
    {EncodingKind::relative_bias, "relative", "relative bias",
     "a learned scalar per head per clipped distance k - q in [-K, K], added to the logits", "",
     Role::logit_bias, ""},
    {EncodingKind::t5_bias, "t5", "relative bias",
     "T5 (Raffel et al.): learned scalar per head per log-spaced distance bucket", "bidirectional, causal",
     Role::logit_bias, ""},
    {EncodingKind::alibi, "alibi", "relative bias",
     "ALiBi (Press et al. 2022): fixed per-head slope times distance, no parameters",
     "bloom slopes, mpt slopes (alibi_bias_max), causal, symmetric", Role::logit_bias, ""},
    {EncodingKind::shaw, "shaw", "relative vectors",
     "Shaw et al. 2018: learned key and value vectors per clipped distance, shared across heads", "",
     Role::attention_vectors, ""},
    {EncodingKind::transformer_xl, "transformer_xl", "relative vectors",
     "Transformer-XL (Dai et al. 2019): sinusoidal R_{i-j} projected by W_R, with global biases u and v", "",
     Role::attention_vectors, "xl"},
    {EncodingKind::rope, "rope", "rotary",
     "RoPE (Su et al.): rotate q and k pairs by position x frequency so q.k depends on m - n",
     "half (NeoX), interleaved (GPT-J), partial rotary, linear, dynamic, yarn, longrope, llama3, "
     "mrope (Qwen2-VL), mrope_interleaved (Qwen3-VL), axial_2d, frequency divisors",
     Role::rotation, ""},
}};

constexpr bool in_enum_order() {
  for (size_t i = 0; i < kEncodings.size(); ++i)
    if (static_cast<size_t>(kEncodings[i].kind) != i) return false;
  return true;
}
static_assert(in_enum_order(), "kEncodings must list the kinds in EncodingKind's order");
}  // namespace

std::span<const EncodingInfo> all_encodings() { return kEncodings; }

const EncodingInfo& encoding_info(std::string_view name) {
  for (const EncodingInfo& e : kEncodings)
    if (e.name == name || (!e.alias.empty() && e.alias == name)) return e;
  std::string known;
  for (const EncodingInfo& e : kEncodings) {
    if (!known.empty()) known += ", ";
    known += e.name;
    if (!e.alias.empty()) known += " (or " + std::string(e.alias) + ")";
  }
  detail::fail("encoding", "name = '", name, "' is invalid: expected one of ", known);
}

const EncodingInfo& encoding_info(EncodingKind kind) {
  // kEncodings lists the kinds in the enum's order (checked where the table is defined).
  return kEncodings[static_cast<size_t>(kind)];
}

}  // namespace posenc
