// src/model/rope_types.h: the rope types a config.json names (rope_parameters' or rope_scaling's rope_type,
// or its legacy key type) and the RopeScalingType each becomes: transformers 5's ROPE_INIT_FUNCTIONS
// (modeling_rope_utils.py) plus "mrope", which Qwen2-VL's config class maps to "default". One table for
// both readers: the model reader (rope_dict.cc) and the generic rules of rope_config_from_hf_json
// (rope_config.cc), which adds Phi-3's early "su" and leaves "proportional" to the families that define it
// (the model reader reads "su" for phi3 alone, as Phi3Config renames it). The remote-code families read the
// names their authors' code accepts instead (InternLM2's and MiniCPM's _init_rope: src/model/remote.cc,
// src/model/remote_llama_forks.cc).
#pragma once
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "posenc/rope.h"

namespace posenc::detail {

struct RopeTypeName {
  std::string_view name;
  RopeScalingType type;
};
inline constexpr RopeTypeName kRopeTypeNames[] = {{"default", RopeScalingType::none},
                                                  {"linear", RopeScalingType::linear},
                                                  {"dynamic", RopeScalingType::dynamic},
                                                  {"yarn", RopeScalingType::yarn},
                                                  {"longrope", RopeScalingType::longrope},
                                                  {"llama3", RopeScalingType::llama3},
                                                  {"proportional", RopeScalingType::proportional},
                                                  {"mrope", RopeScalingType::none}};

// The type a rope_type names, or nullopt for a name outside the table.
inline std::optional<RopeScalingType> rope_type_from_name(std::string_view name) {
  for (const RopeTypeName& t : kRopeTypeNames)
    if (t.name == name) return t.type;
  return std::nullopt;
}

// The table's names for an error message, in its order: ", " between them and `last_separator` before the
// last; "proportional" left out unless `proportional`.
inline std::string rope_type_names(std::string_view last_separator, bool proportional) {
  std::string out;
  size_t left = std::size(kRopeTypeNames) - (proportional ? 0 : 1);
  for (const RopeTypeName& t : kRopeTypeNames) {
    if (!proportional && t.type == RopeScalingType::proportional) continue;
    out += t.name;
    if (--left > 0) out += left == 1 ? last_separator : std::string_view(", ");
  }
  return out;
}

// The rope types whose dict standardize_rope_params gives original_max_position_embeddings (its "RoPE
// types with scaling"): their init functions read it. A type that is not a string is none of them.
inline bool rope_type_reads_original(const nlohmann::json& type) {
  return type == "llama3" || type == "yarn" || type == "longrope";
}

// Which key of a rope dict names its type: standardize_rope_params' setdefault("rope_type",
// get("type", "default")), rope_type winning over the legacy type. Two forms, kept side by side:
// - as both readers read a config's dict (rope_from_dict, rope_config.cc's generic rules, zaya's check of
//   its dicts): a null value is read as an absent key; nullptr when neither key is given (the type is
//   "default");
inline const char* rope_type_key(const nlohmann::json& dict) {
  const auto given = [&](const char* k) {
    return dict.is_object() && dict.contains(k) && !dict.at(k).is_null();
  };
  return given("rope_type") ? "rope_type" : given("type") ? "type" : nullptr;
}
// - as a family's config class rebuilds a dict before the reader reads it (dots3_note_text's per-type dicts,
//   DeepSeek-V4's compress dict): the setdefault itself, which keeps a present rope_type and copies a
//   present type, null or not.
inline void set_default_rope_type(nlohmann::json& dict) {
  if (!dict.contains("rope_type"))
    dict["rope_type"] = dict.contains("type") ? dict.at("type") : nlohmann::json("default");
}
// The type that setdefault gives `dict`, or "" when it is not a string.
inline std::string standardized_rope_type(const nlohmann::json& dict) {
  const nlohmann::json* k = dict.contains("rope_type") ? &dict.at("rope_type")
                            : dict.contains("type")    ? &dict.at("type")
                                                       : nullptr;
  if (!k) return "default";
  return k->is_string() ? k->get<std::string>() : "";
}

}  // namespace posenc::detail
