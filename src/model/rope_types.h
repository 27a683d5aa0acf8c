// src/model/rope_types.h: the rope types a config.json names (rope_parameters' or rope_scaling's rope_type,
// or its legacy key type) and the RopeScalingType each becomes: transformers 5's ROPE_INIT_FUNCTIONS
// (modeling_rope_utils.py) plus "mrope", which Qwen2-VL's config class maps to "default". One table for
// both readers: the model reader (rope_dict.cc) and the generic rules of rope_config_from_hf_json
// (rope_config.cc), which adds Phi-3's early "su" and leaves "proportional" to the families that define it.
#pragma once
#include <optional>
#include <string_view>

#include "posenc/rope.h"

namespace posenc::detail {

struct RopeTypeName {
  std::string_view name;
  RopeScalingType type;
};
inline constexpr RopeTypeName kRopeTypeNames[] = {
    {"default", RopeScalingType::none},  {"mrope", RopeScalingType::none},
    {"linear", RopeScalingType::linear}, {"dynamic", RopeScalingType::dynamic},
    {"yarn", RopeScalingType::yarn},     {"longrope", RopeScalingType::longrope},
    {"llama3", RopeScalingType::llama3}, {"proportional", RopeScalingType::proportional}};

// The type a rope_type names, or nullopt for a name outside the table.
inline std::optional<RopeScalingType> rope_type_from_name(std::string_view name) {
  for (const RopeTypeName& t : kRopeTypeNames)
    if (t.name == name) return t.type;
  return std::nullopt;
}

}  // namespace posenc::detail
