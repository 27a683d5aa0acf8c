// src/model/rope_config.cc: RopeConfig from a HuggingFace config.json, with HF's keys and defaults
// (transformers/modeling_rope_utils.py and the model configs that use them).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "src/check.h"
#include "src/model/document.h"
#include "posenc/model.h"
#include "posenc/rope.h"
#include "src/model/parse.h"
#include "src/model/rope_types.h"

namespace posenc {
using detail::fail;
using detail::json_excerpt;
using json = nlohmann::json;

namespace {
constexpr const char* kOp = "rope config";

using detail::has;

// The numbers and integers the model reader accepts (src/model/document.h), in this reader's words.
double get_number(const json& j, const char* key, const char* where) {
  const json& v = j.at(key);
  if (!detail::json_finite_number(v))
    fail(kOp, where, key, " = ", json_excerpt(v), " is invalid: must be ",
         v.is_number() ? "finite" : "a number");
  return v.get<double>();
}

int64_t get_int(const json& j, const char* key, const char* where) {
  const json& v = j.at(key);
  int64_t out = 0;
  switch (detail::json_int64(v, out)) {
    case detail::JsonInt::ok:
      return out;
    case detail::JsonInt::too_large:  // (as an int64 it would wrap to a negative number)
      fail(kOp, where, key, " = ", json_excerpt(v), " is invalid: must be at most 2^63 - 1");
    case detail::JsonInt::not_integer:
      break;
  }
  fail(kOp, where, key, " = ", json_excerpt(v), " is invalid: must be an integer");
}

std::vector<double> get_number_list(const json& j, const char* key, const char* where) {
  const json& v = j.at(key);
  if (!v.is_array()) fail(kOp, where, key, " = ", json_excerpt(v), " is invalid: must be a list of numbers");
  std::vector<double> out;
  for (const json& e : v) {
    if (!e.is_number()) fail(kOp, where, key, " contains ", json_excerpt(e), ": must be a list of numbers");
    out.push_back(e.get<double>());
  }
  return out;
}

// The generic rules' rope types: the table's (src/model/rope_types.h) and Phi-3's early name of longrope,
// "su"; "proportional" rotates a fraction of the pairs that only a family's rules give (Gemma 4's).
RopeScalingType parse_type(const std::string& name) {
  if (name == "su") return RopeScalingType::longrope;
  if (const std::optional<RopeScalingType> type = detail::rope_type_from_name(name);
      type && *type != RopeScalingType::proportional)
    return *type;
  fail(kOp, "rope_scaling.rope_type = \"", name, "\" is invalid: expected one of ",
       detail::rope_type_names(", ", false));
}

// The rope_scaling keys parse_scaling reads (type aliases included); others are reported.
constexpr const char* kScalingKeys[] = {"rope_type",        "type",
                                        "factor",           "original_max_position_embeddings",
                                        "attention_factor", "beta_fast",
                                        "beta_slow",        "mscale",
                                        "mscale_all_dim",   "truncate",
                                        "short_factor",     "long_factor",
                                        "low_freq_factor",  "high_freq_factor",
                                        "mrope_section",    "mrope_interleaved",
                                        "rope_theta",       "partial_rotary_factor"};

void parse_scaling(const json& s, RopeConfig& c, std::vector<std::string>* warnings) {
  const char* w = "rope_scaling.";
  if (s.is_object() && warnings)  // e.g. Hunyuan's alpha (base * alpha^(d / (d - 2)) in its own code)
    for (auto it = s.begin(); it != s.end(); ++it)
      if (std::none_of(std::begin(kScalingKeys), std::end(kScalingKeys),
                       [&](const char* k) { return it.key() == k; }))
        warnings->push_back(std::string(w) + it.key() + " = " + json_excerpt(it.value()) +
                            " is not read by the generic rules: ignored");
  if (!s.is_object()) fail(kOp, "rope_scaling = ", json_excerpt(s), " is invalid: must be an object or null");
  std::string type = "default";
  const char* type_key = detail::rope_type_key(s);
  if (type_key) {
    if (!s.at(type_key).is_string())
      fail(kOp, w, type_key, " = ", json_excerpt(s.at(type_key)), " is invalid: must be a string");
    type = s.at(type_key).get<std::string>();
  }
  RopeScaling& r = c.scaling;
  r.type = parse_type(type);
  const bool needs_factor = r.type == RopeScalingType::linear || r.type == RopeScalingType::dynamic ||
                            r.type == RopeScalingType::yarn || r.type == RopeScalingType::llama3;
  if (has(s, "factor"))
    r.factor = get_number(s, "factor", w);
  else if (needs_factor)
    fail(kOp, "rope_scaling of type '", type, "' is missing the required key 'factor'");
  if (has(s, "original_max_position_embeddings"))
    r.original_max_position_embeddings = get_int(s, "original_max_position_embeddings", w);
  if (has(s, "attention_factor")) r.attention_factor = get_number(s, "attention_factor", w);
  if (has(s, "beta_fast")) r.beta_fast = get_number(s, "beta_fast", w);
  if (has(s, "beta_slow")) r.beta_slow = get_number(s, "beta_slow", w);
  if (has(s, "mscale")) r.mscale = get_number(s, "mscale", w);
  if (has(s, "mscale_all_dim")) r.mscale_all_dim = get_number(s, "mscale_all_dim", w);
  if (has(s, "truncate")) {
    if (!s.at("truncate").is_boolean()) fail(kOp, "rope_scaling.truncate must be true or false");
    r.truncate = s.at("truncate").get<bool>();
  }
  if (r.type == RopeScalingType::longrope) {
    for (const char* key : {"short_factor", "long_factor"})
      if (!has(s, key)) fail(kOp, "rope_scaling of type 'longrope' is missing the required key '", key, "'");
    r.short_factor = get_number_list(s, "short_factor", w);
    r.long_factor = get_number_list(s, "long_factor", w);
  }
  if (r.type == RopeScalingType::llama3) {
    for (const char* key : {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
      if (!has(s, key)) fail(kOp, "rope_scaling of type 'llama3' is missing the required key '", key, "'");
    r.low_freq_factor = get_number(s, "low_freq_factor", w);
    r.high_freq_factor = get_number(s, "high_freq_factor", w);
  }
  if (has(s, "mrope_section")) {
    for (double v : get_number_list(s, "mrope_section", w)) {
      // Range first: converting 1e300 to int64 is undefined. validate() checks the sum.
      if (!(v >= 0 && v <= kMaxRopeHeadDim) || v != std::floor(v))
        fail(kOp, "rope_scaling.mrope_section = ", json_excerpt(s.at("mrope_section")), " contains ", v,
             ": must hold integers in [0, ", kMaxRopeHeadDim, "]");
      c.mrope_section.push_back(static_cast<int64_t>(v));
    }
    c.multimodal = RopeMultimodal::mrope;
    if (has(s, "mrope_interleaved") && s.at("mrope_interleaved").is_boolean() &&
        s.at("mrope_interleaved").get<bool>())
      c.multimodal = RopeMultimodal::mrope_interleaved;
  }
}
// The generic reader: HF's common keys, whatever the model_type (for the types posenc's model table
// does not plan, with a warning from rope_config_from_hf_json).
RopeConfig generic_rope_config(const json& root, std::vector<std::string>* warnings) {
  // Vision-language models keep the language model's keys under text_config.
  const json& j = (!has(root, "hidden_size") && !has(root, "head_dim") && has(root, "text_config"))
                      ? root.at("text_config")
                      : root;
  if (!j.is_object()) fail(kOp, "text_config must be an object");

  RopeConfig c;
  if (has(j, "head_dim")) {
    c.head_dim = get_int(j, "head_dim", "");
    if (c.head_dim <= 0 || c.head_dim > kMaxRopeHeadDim)
      fail(kOp, "head_dim = ", c.head_dim, " is invalid: must be in [1, ", kMaxRopeHeadDim, "]");
  } else if (has(j, "hidden_size") && has(j, "num_attention_heads")) {
    const int64_t hidden = get_int(j, "hidden_size", ""), heads = get_int(j, "num_attention_heads", "");
    if (heads <= 0) fail(kOp, "num_attention_heads = ", heads, " is invalid: must be > 0");
    if (hidden <= 0) fail(kOp, "hidden_size = ", hidden, " is invalid: must be > 0");
    if (hidden % heads != 0)
      fail(kOp, "hidden_size = ", hidden, " is not divisible by num_attention_heads = ", heads);
    c.head_dim = hidden / heads;
    if (c.head_dim > kMaxRopeHeadDim)
      fail(kOp, "hidden_size = ", hidden, " / num_attention_heads = ", heads,
           " gives head_dim = ", c.head_dim, ", which is invalid: must be at most ", kMaxRopeHeadDim);
  } else {
    fail(kOp, "missing head_dim, or hidden_size and num_attention_heads");
  }
  // HF v5 keeps theta and the scaling under rope_parameters; older configs use rope_theta + rope_scaling.
  const json* scaling = has(j, "rope_scaling")
                            ? &j.at("rope_scaling")
                            : (has(j, "rope_parameters") ? &j.at("rope_parameters") : nullptr);
  if (has(j, "rope_theta"))
    c.base = get_number(j, "rope_theta", "");
  else if (scaling && scaling->is_object() && has(*scaling, "rope_theta"))
    c.base = get_number(*scaling, "rope_theta", "rope_parameters.");
  if (!(c.base >= kMinRopeBase && c.base <= kMaxRopeBase))  // name the config's key, not RopeConfig's base
    fail(kOp, "rope_theta = ", c.base, " is invalid: must be in [2^-16, 2^126]");
  if (has(j, "max_position_embeddings"))
    c.max_position_embeddings = get_int(j, "max_position_embeddings", "");
  double partial = 1.0;
  // transformers 5 writes partial_rotary_factor inside rope_parameters; a value there wins over the
  // top-level key (convert_rope_params_to_dict: setdefault of the top-level value into the dict).
  if (scaling && scaling->is_object() && has(*scaling, "partial_rotary_factor"))
    partial = get_number(*scaling, "partial_rotary_factor", "rope_parameters.");
  else if (has(j, "partial_rotary_factor"))
    partial = get_number(j, "partial_rotary_factor", "");
  else if (has(j, "rotary_pct"))
    partial = get_number(j, "rotary_pct", "");  // GPT-NeoX
  if (!(partial > 0 && partial <= 1))
    fail(kOp, "partial_rotary_factor = ", partial, " is invalid: must be in (0, 1]");
  c.rotary_dim =
      static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);  // HF: int(head_dim * factor)
  if (has(j, "rotary_dim"))
    c.rotary_dim = get_int(j, "rotary_dim", "");        // GPT-J
  else if (c.rotary_dim % 2 != 0 || c.rotary_dim == 0)  // name the config's own fields, not the derived one
    fail(kOp, "head_dim = ", c.head_dim, " with partial_rotary_factor = ", partial,
         " gives rotary_dim = ", c.rotary_dim, ", which is invalid: must be even and > 0");
  if (has(j, "model_type") && j.at("model_type").is_string() &&
      j.at("model_type").get<std::string>() == "gptj")
    c.layout = RopeLayout::interleaved;
  if (scaling) parse_scaling(*scaling, c, warnings);
  // Phi-3 puts original_max_position_embeddings at the top level.
  if (has(j, "original_max_position_embeddings") && c.scaling.original_max_position_embeddings == 0)
    c.scaling.original_max_position_embeddings = get_int(j, "original_max_position_embeddings", "");
  validate(c);
  return c;
}

// Whether two layers' RoPE rotate alike: the same dims, layout, direction and streams, and the same
// frequencies and attention factor at lengths around the original context (dynamic and longrope switch).
bool same_rotation(const RopeConfig& a, const RopeConfig& b) {
  if (a.head_dim != b.head_dim || a.effective_rotary_dim() != b.effective_rotary_dim() ||
      a.layout != b.layout || a.reversed != b.reversed || a.multimodal != b.multimodal ||
      a.mrope_section != b.mrope_section)
    return false;
  const int64_t original = std::max<int64_t>(a.original_context(), 1);
  for (int64_t n : {int64_t{1}, original, 2 * original, 8 * original}) {
    const RopeFrequencies fa = rope_frequencies(a, n), fb = rope_frequencies(b, n);
    if (fa.inv_freq != fb.inv_freq || fa.attention_factor != fb.attention_factor || fa.stream != fb.stream)
      return false;
  }
  return true;
}

// The one RoPE of a planned model: its rope layers must share it and rotate from dim 0 of the head.
// Layers without RoPE (Llama 4's and SmolLM3's NoPE layers, Cohere 2's full layers) are named in a warning.
RopeConfig rope_of_model(const ModelPositions& m, std::vector<std::string>* warnings) {
  const LayerPlan* first = nullptr;
  std::string unrotated;
  int64_t count = 0;
  for (const LayerPlan& l : m.layers) {
    if (l.position != PositionMethod::rope || !l.rope) {
      if (l.softmax_attention && ++count <= 8)
        unrotated += (unrotated.empty() ? "" : ", ") + std::to_string(l.layer);
      continue;
    }
    if (!first) {
      first = &l;
    } else if (!same_rotation(*first->rope, *l.rope)) {
      fail(kOp, "model_type '", m.model_type, "': layers ", first->layer, " (", first->layer_type, ", base ",
           first->rope->base, ") and ", l.layer, " (", l.layer_type, ", base ", l.rope->base,
           ") rotate differently, which one RopeConfig cannot describe: use model_positions_from_hf_json "
           "(ModelPositions) for the per-layer plan");
    }
  }
  if (!first)
    fail(kOp, "model_type '", m.model_type, "' has no RoPE layer (its layers' positions: ",
         m.layers.empty() ? "none" : position_method_name(m.layers[0].position),
         "): use model_positions_from_hf_json (ModelPositions)");
  if (first->rotary_lo != 0)
    fail(kOp, "model_type '", m.model_type, "' rotates dims [", first->rotary_lo, ", ", first->rotary_hi,
         ") of its ", first->qk_head_dim,
         "-dim q/k heads, but a RopeConfig rotates from dim 0: use "
         "model_positions_from_hf_json (ModelPositions: rotary_lo, attention_config's rope_offset)");
  if (count > 0 && warnings)
    warnings->push_back("model_type '" + m.model_type + "': " + std::to_string(count) + " attention layer" +
                        (count > 1 ? "s (" : " (") + unrotated + (count > 8 ? ", ..." : "") +
                        ") rotate nothing: this RopeConfig is the other layers'; ModelPositions has the "
                        "per-layer plan");
  return *first->rope;
}
}  // namespace

RopeConfig rope_config_from_hf_json(const std::string& text, std::vector<std::string>* warnings) {
  const json root = detail::parse_config_json(kOp, text);
  // A model_type posenc's model table plans reads as that family's code does (Cohere's pairs, NanoChat's
  // reversed rotation, class defaults, ...); any other is read by the generic rules, with a warning.
  if (has(root, "model_type")) {
    const std::string why = detail::unplanned_reason(root);
    if (why.empty()) {
      const ModelPositions m = detail::positions_from_root(root);
      const RopeConfig c = rope_of_model(m, warnings);
      if (warnings) warnings->insert(warnings->end(), m.warnings.begin(), m.warnings.end());
      return c;
    }
    if (warnings)
      warnings->push_back(why +
                          ": read by the generic rules (rope_theta, rope_scaling or rope_parameters, "
                          "partial_rotary_factor, head_dim or hidden_size / num_attention_heads): check "
                          "them against the model's own code");
  }
  return generic_rope_config(root, warnings);
}

RopeConfig rope_config_from_hf_file(const std::string& path, std::vector<std::string>* warnings) {
  return rope_config_from_hf_json(detail::read_text_file(kOp, path), warnings);
}

}  // namespace posenc
