// src/model/zaya.cc: ZAYA's text config (model_type "zaya", transformers 5.23's configuration_zaya.py) in the
// reader's form: its layer types "hybrid" (full attention) and "hybrid_sliding" (sliding) and its rope dicts
// keyed by them, renamed to full_attention / sliding_attention for the laguna path (the plan's layer types
// are renamed back by zaya_layer_type). ZayaConfig's own convert_rope_params_to_dict only drops a top-level
// rope_type from rope_parameters: legacy rope_theta / rope_scaling / partial_rotary_factor stay inert, and
// its rotary module reads rope_parameters[layer_type] (modeling_zaya.py ZayaRotaryEmbedding), each type with
// its own partial_rotary_factor over the first dims of the head in halves.
#include <algorithm>
#include <string>
#include <vector>

#include "src/model/document.h"
#include "src/model/parse.h"
#include "src/model/rope_types.h"

namespace posenc::detail {
namespace {
const char* const kNames[][2] = {{"hybrid", "full_attention"}, {"hybrid_sliding", "sliding_attention"}};
}  // namespace

json zaya_resolved(const json& text, const std::string& where, std::vector<std::string>& warnings) {
  json out = text;
  Obj j{text, where, {}};
  const int64_t n = j.int_or("num_hidden_layers", 40);
  if (n <= 0 || n > kMaxModelLayers)
    fail(kOp, where, "num_hidden_layers = ", n, " is invalid: must be in [1, ", kMaxModelLayers, "]");
  json types = json::array();
  if (j.has("layer_types")) {
    const json& given = j.at("layer_types");
    if (!given.is_array() || static_cast<int64_t>(given.size()) != n)
      fail(kOp, where, "layer_types = ", json_excerpt(given), " is invalid: must list the ", n, " layers");
    for (const json& t : given) {
      std::string name;
      for (const auto& k : kNames)
        if (t == k[0]) name = k[1];
      if (name.empty())  // configuration_utils.py: ZAYA's allowed layer types
        fail(kOp, where, "layer_types contains ", t.dump(),
             ": zaya builds \"hybrid\" and \"hybrid_sliding\" only");
      types.push_back(name);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) types.push_back("full_attention");  // ["hybrid"] * n
  }
  out["layer_types"] = types;
  // Its convert leaves rope_scaling in the kwargs: PreTrainedConfig's rope_scaling setter then replaces
  // rope_parameters with it (configuration_utils.py); a non-dict fails there.
  if (j.j.contains("rope_scaling")) {
    if (!j.j.at("rope_scaling").is_object())
      fail(kOp, where, "rope_scaling = ", json_excerpt(j.j.at("rope_scaling")),
           " is not supported for zaya: it ",
           "replaces rope_parameters (PreTrainedConfig's rope_scaling setter; transformers 5.23 then fails "
           "for ",
           "model_type 'zaya')");
    if (j.has("rope_parameters") && j.at("rope_parameters") != j.at("rope_scaling"))
      warnings.push_back(where +
                         "rope_parameters is replaced by rope_scaling for zaya (PreTrainedConfig's "
                         "rope_scaling setter)");
  }
  json rp = j.j.contains("rope_scaling") ? j.j.at("rope_scaling")
            : j.has("rope_parameters")
                ? j.at("rope_parameters")
                : json::parse(
                      R"({"hybrid": {"rope_type": "default", "rope_theta": 5e6, "partial_rotary_factor": 0.5},
                    "hybrid_sliding": {"rope_type": "default", "rope_theta": 1e4,
                                       "partial_rotary_factor": 0.5}})");
  if (!rp.is_object())
    fail(kOp, where, "rope_parameters = ", json_excerpt(rp), " is invalid: must be an object");
  json renamed = json::object();
  for (auto it = rp.begin(); it != rp.end(); ++it) {
    if (it.key() == "rope_type") continue;  // ZayaConfig.convert_rope_params_to_dict drops it
    std::string key = it.key();
    for (const auto& k : kNames)
      if (key == k[0]) key = k[1];
    if (key == it.key() && it.value().is_object() == false && !it.value().is_null()) {
      // A flat dict (rope_theta, ...): its rotary module raises KeyError('hybrid').
      fail(kOp, where, "rope_parameters = ", json_excerpt(rp),
           " must be a dict per layer type for model_type ",
           "'zaya' ({\"hybrid\": {...}, \"hybrid_sliding\": {...}}): its rotary module reads one per type");
    }
    renamed[key] = it.value();
  }
  out["rope_parameters"] = renamed;
  // Its convert_rope_params_to_dict skips standardize_rope_params (configuration_zaya.py), which fills
  // original_max_position_embeddings into the dicts of other families (modeling_rope_utils.py
  // standardize_rope_params): a llama3 / yarn / longrope dict of a layer type the model builds must carry it,
  // or the validation raises (KeyError, modeling_rope_utils.py _check_received_keys; a null one: a
  // TypeError).
  const std::string rp_name = j.j.contains("rope_scaling") ? "rope_scaling" : "rope_parameters";
  for (const auto& k : kNames) {
    if (std::find(types.begin(), types.end(), k[1]) == types.end() || !has(rp, k[0]) ||
        !rp.at(k[0]).is_object())
      continue;
    const json& d = rp.at(k[0]);
    const char* const kind_key = rope_type_key(d);
    const json kind = kind_key ? d.at(kind_key) : json("default");
    if (!rope_type_reads_original(kind)) continue;
    const std::string key = rp_name + "." + k[0] + ".original_max_position_embeddings";
    if (!d.contains("original_max_position_embeddings"))
      fail(kOp, where, key, " is missing: rope type ", kind.dump(),
           " requires it, and zaya's config class does not fill it in (transformers 5.23 raises KeyError)");
    if (d.at("original_max_position_embeddings").is_null())
      fail(kOp, where, key, " = null is invalid: rope type ", kind.dump(),
           " computes with it (transformers 5.23 raises TypeError)");
  }
  out.erase("rope_scaling");
  for (const char* k : {"rope_theta", "partial_rotary_factor"})
    if (j.has(k)) {
      warnings.push_back(where + k + " = " + json_excerpt(j.at(k)) +
                         " is not read by zaya: its rope_parameters are per layer type");
      out.erase(k);
    }
  // configuration_zaya.py ZayaConfig.validate_architecture: hybrid_sliding layers need a sliding_window.
  for (const json& t : types)
    if (t == "sliding_attention" && !j.has("sliding_window"))
      fail(kOp, where,
           "sliding_window is missing: zaya's hybrid_sliding layers need it (transformers 5.23 raises)");
  return out;
}

std::string zaya_layer_type(const std::string& type) {
  for (const auto& k : kNames)
    if (type == k[1]) return k[0];
  return type;
}

}  // namespace posenc::detail
