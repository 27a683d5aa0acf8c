// src/model/document.h: reading a HuggingFace config.json document, shared by the RoPE parser
// (src/model/rope_config.cc) and the model plan (src/model/config_json.cc).
#pragma once
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "src/check.h"
#include "src/json_depth.h"

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

// Bounds checked before parsing. A real config.json is a few KiB and nests 4 levels deep
// (text_config.rope_parameters.<layer type>.<key>); nlohmann's dump(), copies and comparisons
// recurse once per level, so a 100,000-deep value (200 KB of '[') would overflow the stack.
inline constexpr int64_t kMaxConfigBytes = int64_t{16} << 20;  // read_text_file's default limit too
inline constexpr int kMaxJsonDepth = 64;

// Fails when `text` nests objects and arrays more than max_depth levels deep (src/json_depth.h), naming
// the byte where it does.
inline void check_json_depth(std::string_view op, std::string_view what, std::string_view text,
                             int max_depth) {
  if (const std::optional<size_t> at = json_too_deep_at(text, max_depth))
    fail(op, what, " nests objects and arrays more than ", max_depth, " levels deep (at byte ", *at, ")");
}

// What both readers accept as a number and as an integer (the model reader's Obj, src/model/parse.h, and
// the generic rules of rope_config.cc; each words its own messages).
// A finite number.
inline bool json_finite_number(const nlohmann::json& v) {
  return v.is_number() && std::isfinite(v.get<double>());
}
// An int64: an integer in its range, or an integral float below 9e15 (4096.0, which some configs hold).
enum class JsonInt { ok, not_integer, too_large };
inline JsonInt json_int64(const nlohmann::json& v, int64_t& out) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    return JsonInt::too_large;
  if (v.is_number_integer()) {
    out = v.get<int64_t>();
    return JsonInt::ok;
  }
  if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
      std::abs(v.get<double>()) < 9e15) {
    out = static_cast<int64_t>(v.get<double>());
    return JsonInt::ok;
  }
  return JsonInt::not_integer;
}

// Text for an error message, cut to `max_chars` characters (nlohmann's own messages quote a whole
// numeric token: 10,000 digits of an overflowing number).
inline std::string excerpt(std::string s, size_t max_chars = 80) {
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "... (" + std::to_string(s.size()) + " characters)";
  return s;
}
// A JSON value for an error message: its dump(), cut to `max_chars` characters.
inline std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 80) {
  return excerpt(value.dump(), max_chars);
}

// The document as a JSON object. Every nlohmann error (syntax, and numbers out of range such as
// 1e400, which nlohmann reports as out_of_range) becomes a posenc::Error naming `op`, and so do
// documents over kMaxConfigBytes or nested deeper than kMaxJsonDepth.
inline nlohmann::json parse_config_json(std::string_view op, const std::string& text) {
  if (static_cast<int64_t>(text.size()) > kMaxConfigBytes)
    fail(op, "the config is ", text.size(), " bytes, more than the limit of ", kMaxConfigBytes);
  check_json_depth(op, "the config", text, kMaxJsonDepth);
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(quote_non_finite_tokens(text));
  } catch (const nlohmann::json::exception& e) {
    fail(op, "malformed JSON: ", excerpt(e.what(), 200));
  }
  if (!root.is_object()) fail(op, "the JSON document must be an object (a config.json)");
  return root;
}

}  // namespace posenc::detail
