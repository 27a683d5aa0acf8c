// src/config_json.h: reading a HuggingFace config.json document, shared by the RoPE parser
// (src/rope_config_json.cc) and the model plan (src/model_config_json.cc).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "src/check.h"

namespace posenc::detail {

// The document as a JSON object. Every nlohmann error (syntax, and numbers out of range such as
// 1e400, which nlohmann reports as out_of_range) becomes a posenc::Error naming `op`.
inline nlohmann::json parse_config_json(std::string_view op, const std::string& text) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(op, "malformed JSON: ", e.what());
  }
  if (!root.is_object()) fail(op, "the JSON document must be an object (a config.json)");
  return root;
}

}  // namespace posenc::detail
