// src/config_json.h: reading a HuggingFace config.json document, shared by the RoPE parser
// (src/rope_config_json.cc) and the model plan (src/model_config_json.cc).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "src/check.h"

namespace posenc::detail {

// Python's json.dumps (and so transformers' save_pretrained) writes the non-finite floats as the
// bare tokens NaN, Infinity and -Infinity (Mamba-2's time_step_limit: [0.0, Infinity]), which are not
// JSON. They become the strings "NaN", "Infinity", "-Infinity": a key posenc reads as a number then
// fails naming itself, and the other keys (and the model_type check) are unaffected.
inline std::string quote_non_finite_tokens(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size())
        out += text[++i];
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (std::string_view tok : {"-Infinity", "Infinity", "NaN"})
      if (text.compare(i, tok.size(), tok) == 0) {
        out += '"';
        out += tok;
        out += '"';
        i += tok.size() - 1;
        replaced = true;
        break;
      }
    if (!replaced) out += c;
  }
  return out;
}

// The document as a JSON object. Every nlohmann error (syntax, and numbers out of range such as
// 1e400, which nlohmann reports as out_of_range) becomes a posenc::Error naming `op`.
inline nlohmann::json parse_config_json(std::string_view op, const std::string& text) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(quote_non_finite_tokens(text));
  } catch (const nlohmann::json::exception& e) {
    fail(op, "malformed JSON: ", e.what());
  }
  if (!root.is_object()) fail(op, "the JSON document must be an object (a config.json)");
  return root;
}

}  // namespace posenc::detail
