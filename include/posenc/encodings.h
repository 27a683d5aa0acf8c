// posenc/encodings.h: the catalogue of encodings, for tools that compare them (CLI, lab, analyze).
#pragma once
#include <span>
#include <string_view>

namespace posenc {

enum class EncodingKind : uint8_t {
  none,            // NoPE: an explicit "no positional information" baseline
  sinusoidal, learned, binary,             // absolute: added to embeddings
  relative_bias, t5_bias, alibi,           // scalar bias on the logits
  shaw, transformer_xl,                    // vector terms inside attention
  rope,                                    // rotation of q and k
};

struct EncodingInfo {
  EncodingKind kind;
  std::string_view name;         // CLI name
  std::string_view family;       // "absolute", "relative bias", ...
  std::string_view description;  // one line
  std::string_view variants;     // comma-separated variant names
};

std::span<const EncodingInfo> all_encodings();
// Throws posenc::Error for an unknown name, listing the known ones.
const EncodingInfo& encoding_info(std::string_view name);

}  // namespace posenc
