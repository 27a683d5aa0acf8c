// lab/positional.h: which positional encodings a lab model combines, and the parameters they read.
//
// A combination is written as encoding names (or aliases) joined by '+', at most one per role
// (posenc::EncodingRole), as the attention supports them:
//   absolute (added to the embeddings):  sinusoidal | learned | binary
//   scalar bias on the logits:           alibi | t5 | relative   (relative = clipped)
//   vector terms inside attention:       shaw | transformer_xl (or xl)
//   rotation of q and k:                 rope
// or "none" (NoPE: only the causal mask carries order). E.g. "rope+alibi", "learned+t5". What each
// encoding adds to the model is its registry entry's (registry/registry.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/encodings.h"
#include "posenc/rope.h"
#include "registry/registry.h"

namespace posenc::lab {

struct EncodingSpec {
  std::vector<EncodingKind> parts;  // at most one per role, in role order; empty: NoPE

  static EncodingSpec parse(std::string_view text);  // throws posenc::Error naming the bad part
  std::string name() const;                          // canonical: "rope+alibi", "none"
  bool has(EncodingKind kind) const;
  std::optional<EncodingKind> part(EncodingRole role) const;  // the part acting in that role, if any
  std::vector<const registry::Entry*> entries() const;        // the parts' registry entries
  bool operator==(const EncodingSpec&) const = default;
};

// The encodings `posenc lab` trains by default: the absolute, relative and rotary encodings of the
// extrapolation comparison, plus NoPE and the RoPE+ALiBi hybrid.
std::vector<EncodingSpec> default_lab_encodings();

// Parameters of the encodings (flags of `posenc lab`), defined with the registry that reads them.
using EncodingOptions = registry::EncodingOptions;

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

// Whether `mode` at `eval_len` is the trained rotation itself: the scalings apply only past train_len
// (factor 1 at it), so up to it every mode is plain and gives plain's figures.
bool rope_eval_is_plain(RopeEval mode, int64_t train_len, int64_t eval_len);

// The rotary configuration of a model with `head_dim`, trained at `train_len`, evaluated with
// `mode` at `eval_len`.
RopeConfig lab_rope_config(const EncodingOptions& options, int64_t head_dim, int64_t train_len, RopeEval mode,
                           int64_t eval_len);

}  // namespace posenc::lab
