// lab/positional.h: which positional encoding a lab model uses, and what it adds to the model.
//
// An encoding is written as names joined by '+', at most one of each group, as the attention
// supports them:
//   absolute (added to the embeddings):  sinusoidal | learned | binary
//   scalar bias on the logits:           alibi | t5 | relative   (relative = clipped, seed 000)
//   vector terms inside attention:       shaw | xl
//   rotation of q and k:                 rope
// or "none" (NoPE: only the causal mask carries order). E.g. "rope+alibi", "learned+t5".
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/rope.h"

namespace posenc::lab {

struct EncodingSpec {
  enum class Absolute : uint8_t { none, sinusoidal, learned, binary };
  enum class Bias : uint8_t { none, alibi, t5, relative };
  enum class Vector : uint8_t { none, shaw, xl };
  Absolute absolute = Absolute::none;
  Bias bias = Bias::none;
  Vector vector = Vector::none;
  bool rope = false;

  static EncodingSpec parse(std::string_view text);  // throws posenc::Error naming the bad part
  std::string name() const;                          // canonical: "rope+alibi", "none"
  bool operator==(const EncodingSpec&) const = default;
};

// The encodings `posenc lab` trains by default: the seeds' list plus NoPE and the RoPE+ALiBi hybrid.
std::vector<EncodingSpec> default_lab_encodings();

// Parameters of the encodings (flags of `posenc lab`).
struct EncodingOptions {
  int64_t t5_buckets = 16;        // causal T5: 8 exact buckets, 8 log-spaced up to max distance
  int64_t t5_max_distance = 32;
  int64_t max_distance = 32;      // clipping window of `relative` and `shaw`
  double rope_base = 10000.0;
  double sinusoidal_base = 10000.0;
  int64_t binary_bits = 10;       // binary codes: positions below 2^bits (the lab sizes it for
                                  // its longest evaluation length so that extrapolation is measured)
};

// How RoPE is run at evaluation time (no retraining): the trained rotation, or one of the
// HuggingFace rope_scaling types with factor = eval length / train length (only past it).
enum class RopeEval : uint8_t {
  plain,   // as trained
  linear,  // position interpolation (Chen et al. 2023): inv_freq / factor
  ntk,     // HF "dynamic" NTK-aware scaling: base * (L / train_len)^(d / (d - 2)) at length L
  yarn,    // YaRN (Peng et al. 2023): per-frequency ramp, beta_fast 32, beta_slow 1, attention factor
};
const char* rope_eval_name(RopeEval mode);  // "plain", "linear", "ntk", "yarn"
RopeEval parse_rope_eval(std::string_view text);

// The rotary configuration of a model with `head_dim`, trained at `train_len`, evaluated with
// `mode` at `eval_len`.
RopeConfig lab_rope_config(const EncodingOptions& options, int64_t head_dim, int64_t train_len, RopeEval mode,
                           int64_t eval_len);

}  // namespace posenc::lab
