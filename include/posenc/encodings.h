// posenc/encodings.h: the library's catalogue of encodings: each one's canonical name, the names
// the tools also accept for it, where it acts in a transformer, and a line describing it. `posenc
// list` prints it; the tools' registry (registry/registry.h) attaches to each entry what the
// CLI, the analyzer and the lab compute with it, so no tool keeps a list of its own.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>

namespace posenc {

enum class EncodingKind : uint8_t {
  none,  // NoPE: an explicit "no positional information" baseline
  sinusoidal,
  learned,
  binary,  // absolute: added to embeddings
  relative_bias,
  t5_bias,
  alibi,  // scalar bias on the logits
  shaw,
  transformer_xl,  // vector terms inside attention
  rope,            // rotation of q and k
};

// Where an encoding acts. A model combines at most one encoding per role (e.g. RoPE + ALiBi); the
// order here is the order of a combination's name ("rope+learned+shaw+t5").
enum class EncodingRole : uint8_t {
  rotation,           // rotates q and k (RoPE)
  absolute,           // added to the token embeddings
  attention_vectors,  // vector terms inside attention (Shaw, Transformer-XL)
  logit_bias,         // a scalar per (head, query, key) added to the logits
  none,               // NoPE: nothing to combine
};

struct EncodingInfo {
  EncodingKind kind;
  std::string_view name;         // canonical name, in code and in every tool's output
  std::string_view family;       // "absolute", "relative bias", ...
  std::string_view description;  // one line
  std::string_view variants;     // comma-separated variant names
  EncodingRole role = EncodingRole::none;
  std::string_view alias;  // a shorter name the tools also accept ("xl"), or empty
};

std::span<const EncodingInfo> all_encodings();
// By canonical name or alias. Throws posenc::Error for an unknown name, listing the known ones.
const EncodingInfo& encoding_info(std::string_view name);
const EncodingInfo& encoding_info(EncodingKind kind);

}  // namespace posenc
