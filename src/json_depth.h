// src/json_depth.h: how deeply a JSON text nests, measured before it is parsed. nlohmann's dump(), copies
// and comparisons recurse once per level, so a 100,000-deep value (200 KB of '[') would overflow the
// stack: the config reader (src/model/document.h) and the lab's safetensors header (lab/safetensors.cc)
// refuse a text nested past their limit before parsing it.
#pragma once
#include <cstddef>
#include <optional>
#include <string_view>

namespace posenc::detail {

// The byte offset of the first '{' or '[' that opens level max_depth + 1 of `text` (brackets inside
// strings do not count), or nullopt when the text never nests deeper than max_depth. Malformed text is
// left to the parser.
inline std::optional<size_t> json_too_deep_at(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (ch == '\\')
        escaped = true;
      else if (ch == '"')
        in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '{' || ch == '[') {
      if (++depth > max_depth) return i;
    } else if (ch == '}' || ch == ']') {
      --depth;
    }
  }
  return std::nullopt;
}

}  // namespace posenc::detail
