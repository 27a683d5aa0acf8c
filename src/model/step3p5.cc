// src/model/step3p5.cc: Step 3.5 / 3.7's text config (model_type "step3p5", Step3p7TextConfig of
// transformers 5.23's models/step3p7/configuration_step3p7.py) rewritten into the form its
// __post_init__ builds: per-layer lists trimmed of their multi-token-prediction tail, and one rope dict
// per layer type. The reader (src/model/config_json.cc) then plans it like laguna's: rope_parameters[type]
// read by the rotary module (modeling_step3p7.py Step3p7RotaryEmbedding), rotate_half on the first
// partial_rotary_factor of the head (apply_rotary_pos_emb), scale query_pre_attn_scalar^-0.5.
#include <algorithm>
#include <string>
#include <vector>

#include "src/model/document.h"
#include "src/model/parse.h"
#include "src/model/rope_types.h"

namespace posenc::detail {

json step3p5_resolved(const json& text, const std::string& where, std::vector<std::string>& warnings) {
  json out = text;
  Obj j{text, where, {}};
  const int64_t n = j.int_or("num_hidden_layers", 45);
  const int64_t mtp = j.int_or("num_nextn_predict_layers", 0);
  if (n <= 0 || n > kMaxModelLayers)
    fail(kOp, where, "num_hidden_layers = ", n, " is invalid: must be in [1, ", kMaxModelLayers, "]");
  if (mtp < 0 || mtp > kMaxModelLayers)
    fail(kOp, where, "num_nextn_predict_layers = ", mtp, " is invalid: must be in [0, ", kMaxModelLayers,
         "]");
  // configuration_step3p7.py Step3p7TextConfig.__post_init__: lists padded with the MTP layers' entries lose
  // them.
  auto trimmed = [&](const char* key) -> json {
    if (!j.has(key)) return nullptr;
    json v = j.at(key);
    if (mtp > 0 && v.is_array() && static_cast<int64_t>(v.size()) == n + mtp) v.erase(v.begin() + n, v.end());
    return v;
  };
  json types = trimmed("layer_types");
  if (types.is_null()) types = json::array();
  if (types.empty())
    for (int64_t i = 0; i < n; ++i) types.push_back("full_attention");  // the __post_init__ default
  if (!types.is_array() || static_cast<int64_t>(types.size()) != n)
    fail(kOp, where, "layer_types = ", json_excerpt(j.at("layer_types")), " is invalid: must list the ", n,
         " layers (num_hidden_layers), or ", n + mtp, " with the num_nextn_predict_layers tail");
  std::vector<std::string> order;  // the layer types in order of first appearance
  for (const json& t : types) {
    if (!t.is_string()) fail(kOp, where, "layer_types contains ", t.dump(), ": must be strings");
    const std::string s = t.get<std::string>();
    // modeling_step3p7.py Step3p7TextModel.forward: masks for these two types only (another one raises
    // KeyError).
    if (s != "full_attention" && s != "sliding_attention")
      fail(kOp, where, "layer_types contains '", s, "', which step3p5 does not run: transformers 5.23's ",
           "Step3p7TextModel builds masks for full_attention and sliding_attention only");
    if (std::find(order.begin(), order.end(), s) == order.end()) order.push_back(s);
  }
  out["layer_types"] = types;
  // Step3p7TextConfig.__post_init__: rope_parameters already per type (a saved config) is kept; otherwise one
  // dict per type from the values of the type's first layer.
  const json rp = j.has("rope_parameters") ? j.at("rope_parameters") : json(nullptr);
  bool per_type = rp.is_object();
  for (const std::string& t : order) per_type = per_type && rp.contains(t) && rp.at(t).is_object();
  json theta = trimmed("rope_theta"), prf = trimmed("partial_rotary_factors");
  const json scaling = j.has("rope_scaling") ? j.at("rope_scaling") : json(nullptr);
  if (per_type) {
    json kept = json::object();
    for (const std::string& t : order) kept[t] = rp.at(t);
    out["rope_parameters"] = kept;
    for (const char* k : {"rope_theta", "partial_rotary_factors", "rope_scaling"})
      if (j.has(k))
        warnings.push_back(where + k + " = " + json_excerpt(j.at(k)) +
                           " is not read by step3p5: rope_parameters is given per layer type");
  } else {
    if (!rp.is_null())
      warnings.push_back(
          where + "rope_parameters = " + json_excerpt(rp) +
          " is not read by step3p5: without a dict for each layer type its config class builds "
          "them from rope_theta, partial_rotary_factors and rope_scaling");
    auto at_layer = [&](const json& v, const char* key, size_t i) -> json {
      if (!v.is_array()) return v;
      if (i >= v.size())
        fail(kOp, where, key, " = ", json_excerpt(v), " is invalid: layer ", i,
             " (the first of its type) has no entry");
      return v.at(i);
    };
    if (theta.is_null()) theta = 1e4;  // default_theta
    if (!prf.is_null() && !prf.is_array())
      fail(kOp, where, "partial_rotary_factors = ", json_excerpt(prf),
           " is invalid: must be a list per layer");
    if (!scaling.is_null() && !scaling.is_object())
      fail(kOp, where, "rope_scaling = ", json_excerpt(scaling), " is invalid: must be an object");
    json built = json::object();
    for (const std::string& t : order) {
      size_t first = 0;
      while (types.at(first) != t) ++first;
      json d = {{"rope_type", "default"}, {"rope_theta", at_layer(theta, "rope_theta", first)}};
      if (!prf.is_null() && !prf.empty())
        d["partial_rotary_factor"] = at_layer(prf, "partial_rotary_factors", first);
      built[t] = d;
    }
    // Step3p7TextConfig.__post_init__: rope_scaling updates the full_attention dict only.
    if (scaling.is_object() && !scaling.empty()) {
      if (!built.contains("full_attention"))
        warnings.push_back(where + "rope_scaling = " + json_excerpt(scaling) +
                           " is not read by step3p5: it applies to full_attention layers, and none is");
      else {
        json& full = built["full_attention"];
        full.update(scaling);
        // Not standardized: yarn, llama3 and longrope need original_max_position_embeddings in the dict
        // (transformers 5.23's validation raises KeyError without it).
        const json& kind = full.at("rope_type");
        if (rope_type_reads_original(kind) && !full.contains("original_max_position_embeddings"))
          fail(kOp, where,
               "rope_scaling.original_max_position_embeddings is missing: step3p5 merges rope_scaling ",
               "without filling it, and rope type ", kind.dump(), " requires it (transformers 5.23 raises)");
        // The dict is not standardized afterwards: a legacy "type" leaves rope_type "default" and the
        // scaling unused (transformers 5.23 warns about the unrecognized keys).
        if (!scaling.contains("rope_type") && scaling.contains("type")) {
          warnings.push_back(where + "rope_scaling.type = " + json_excerpt(scaling.at("type")) +
                             " is not read by step3p5: its full_attention dict keeps rope_type 'default' "
                             "(configuration_step3p7.py merges rope_scaling without converting 'type')");
          json plain = {{"rope_type", "default"}, {"rope_theta", full.at("rope_theta")}};
          if (full.contains("partial_rotary_factor"))
            plain["partial_rotary_factor"] = full["partial_rotary_factor"];
          full = plain;
        }
      }
    }
    out["rope_parameters"] = built;
  }
  for (const char* k : {"rope_theta", "partial_rotary_factors", "rope_scaling", "num_nextn_predict_layers"})
    out.erase(k);
  // Keys of StepFun's own configs that transformers 5.23 keeps as inert attributes: every layer rotates,
  // and rope_scaling goes to the full_attention layers. Named when they say otherwise.
  if (j.has("use_rope_layers")) {
    const json& v = j.at("use_rope_layers");
    if (!v.is_array() || std::any_of(v.begin(), v.end(), [](const json& e) { return e != true; }))
      warnings.push_back(where + "use_rope_layers = " + json_excerpt(v) +
                         " is not read by transformers 5.23's step3p5: every layer is rotated");
    out.erase("use_rope_layers");
  }
  if (j.has("yarn_only_types")) {
    const json& v = j.at("yarn_only_types");
    if (v != json::array({"full_attention"}))
      warnings.push_back(
          where + "yarn_only_types = " + json_excerpt(v) +
          " is not read by transformers 5.23's step3p5: rope_scaling applies to full_attention "
          "layers only");
    out.erase("yarn_only_types");
  }
  // modeling_step3p7.py Step3p7TextModel.forward: the sliding mask is built for every config, with
  // config.sliding_window, which must be set (masking_utils.py raises without one, sliding layers or not).
  if (!j.has("sliding_window"))
    fail(kOp, where, "sliding_window is not set (", j.j.contains("sliding_window") ? "null" : "missing",
         "): model_type 'step3p5' builds its sliding mask for every config (transformers 5.23 raises without "
         "one)");
  return out;
}

}  // namespace posenc::detail
