// src/model_per_layer.cc: per-layer head dims of transformers 5's heterogeneous configs.
//
// transformers 5.23 lets a config override attributes layer by layer: `per_layer_config` maps layer
// indices to overrides (configuration_utils.py L361, L496-511; integrations/heterogeneity/
// configuration_utils.py _apply_heterogeneous_config). Gemma 4 builds one when a config has none: its
// full-attention layers take head_dim = global_head_dim (512 by default) (configuration_gemma4.py
// Gemma4TextConfig.__post_init__), and its rotary module builds each layer type's frequencies from
// that type's layer config (modeling_gemma4.py Gemma4TextRotaryEmbedding: per_layer_config[layer_type]).
// posenc models the head_dim override; overrides of anything else positional are refused by name.
#include <string>
#include <vector>

#include "src/config_json.h"
#include "src/model_parse.h"

namespace posenc::detail {

std::vector<int64_t> layer_head_dims(Obj& j, const Model& m, const std::vector<std::string>& types) {
  std::vector<int64_t> dims(m.layers, m.head_dim);
  auto checked_dim = [&](const std::string& where, const json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > kMaxModelHeadDim)
      fail(kOp, j.where, where, " = ", json_excerpt(v), " is invalid: must be an integer in [1, ",
           kMaxModelHeadDim, "]");
    return v.get<int64_t>();
  };
  const bool gemma4 = m.type == "gemma4_text";
  // Only Gemma 4's modeling code builds its layers from per-layer configs (other families read the
  // global attributes, or raise AmbiguousGlobalPerLayerAttributeError): refused elsewhere.
  if (!gemma4 && j.has("per_layer_config"))
    fail(kOp, j.where, "per_layer_config is not modeled by posenc for model_type '", m.type,
         "' (read for gemma4_text only)");
  // Gemma4TextConfig: `if "per_layer_config" not in kwargs` -- an explicit null counts as given.
  if (gemma4 && j.j.contains("per_layer_config") && !j.has("per_layer_config")) return dims;
  if (j.has("per_layer_config")) {
    const json& plc = j.at("per_layer_config");
    if (!plc.is_object())
      fail(kOp, j.where, "per_layer_config = ", json_excerpt(plc), " is invalid: must be an object");
    for (auto it = plc.begin(); it != plc.end(); ++it) {
      const std::string where = "per_layer_config." + it.key();
      size_t used = 0;
      int64_t layer = -1;
      try {
        layer = std::stoll(it.key(), &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != it.key().size() || layer < 0 || layer >= m.layers)
        fail(kOp, j.where, where, ": keys must be layer indices in [0, ", m.layers, ")");
      if (!it.value().is_object())
        fail(kOp, j.where, where, " = ", json_excerpt(it.value()), " must be an object");
      for (auto o = it.value().begin(); o != it.value().end(); ++o) {
        if (o.key() == "head_dim") {
          dims[layer] = checked_dim(where + ".head_dim", o.value());
        } else if (o.key() == "skip" || looks_positional(o.key())) {
          fail(kOp, j.where, where, ".", o.key(),
               ": a per-layer override of this attribute is not modeled by posenc (head_dim is)");
        }  // num_key_value_heads, intermediate_size, ...: not positional
      }
    }
    // Gemma4TextConfig pops global_head_dim and ignores it when per_layer_config is given.
    if (gemma4 && j.has("global_head_dim")) {
      const int64_t global = checked_dim("global_head_dim", j.at("global_head_dim"));
      for (int64_t i = 0; i < m.layers; ++i)
        if (types[i] == "full_attention" && dims[i] != global) {
          m.warnings->push_back(j.where + "global_head_dim = " + std::to_string(global) +
                                " is ignored: per_layer_config is given (transformers 5 reads it only)");
          break;
        }
    }
  } else if (gemma4) {
    const int64_t global =
        j.has("global_head_dim") ? checked_dim("global_head_dim", j.at("global_head_dim")) : 512;
    for (int64_t i = 0; i < m.layers; ++i)
      if (types[i] == "full_attention") dims[i] = global;
  }
  return dims;
}

// The head dim of every layer of one type: the rotary module builds one set of frequencies per
// type (from that type's layer config), so its layers must agree.
int64_t type_head_dim(const std::vector<int64_t>& dims, const std::vector<std::string>& types,
                      const std::string& type, int64_t fallback) {
  int64_t found = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (types[i] != type) continue;
    if (found != 0 && dims[i] != found)
      fail(kOp, "per_layer_config gives the ", type, " layers head_dim ", found, " and ", dims[i],
           ": one rotary setup per layer type needs one head_dim per type");
    found = dims[i];
  }
  return found != 0 ? found : fallback;
}

}  // namespace posenc::detail
