// src/model/dots3.cc: Dots 3 Note's text config (model_type "dots3_note_text", Dots3NoteTextConfig of
// transformers 5.23's models/dots3_note/configuration_dots3_note.py, abbreviated C below, where a method
// named alone is Dots3NoteTextConfig's; M is modeling_dots3_note.py) in the form its config class builds. The
// published checkpoints store it flat, at the top level of a "dots3_note" config (C
// Dots3NoteConfig.__post_init__ builds text_config from the top-level keys when it has none); a wrapper with
// a text_config is read from that.
//
// What the class does (C __post_init__, convert_rope_params_to_dict): layer_types from use_dsa /
// use_sliding_window (full on layers 0, 1 and i % 4 == 1, sliding elsewhere; "indexed_attention" for the full
// layers unless use_dsa is false, a given list's "full_attention" renamed so), sliding_window from
// sliding_window_size (512), per_layer_config for the sliding layers from the swa_* keys (unless a
// per_layer_config is given), one rope dict per layer type (bases rope_theta, 8e7 by default, and
// swa_rope_theta, 5e4) with partial_rotary_factor = qk_rope_head_dim / head_dim of the type's layer config.
// What the model does with it: each layer builds its MLA from its own layer config (M
// Dots3NoteTextAttention.__init__), rotating the last qk_rope_head_dim dims of its q / k head in interleaved
// pairs written back de-interleaved (M apply_rotary_pos_emb_interleave, called by
// Dots3NoteTextAttention.forward, as DeepSeek-V3's), with cos / sin of int(head_dim * partial_rotary_factor)
// dims of the type's rotary setup (M Dots3NoteTextRotaryEmbedding), scale (qk_nope + qk_rope)^-0.5 with no
// yarn mscale (M Dots3NoteTextAttention.__init__), sliding_window on the sliding layers (the same, and the
// mask of M Dots3NoteTextModel.forward), and on indexed_attention layers a DSA indexer (M
// Dots3NoteTextIndexer: index_n_heads heads of index_head_dim, rotated on their first qk_rope_head_dim dims
// with the layer's cos / sin, in pairs). Not positional: the K-RoPE RMS norm before the rotation (M
// Dots3NoteTextAttention.forward), the q / kv latent scales (M Dots3NoteTextAttention.__init__), the sigmoid
// head gate after attention (M Dots3NoteTextAttention.forward); they are the caller's.
//
// The reader (src/model/config_json.cc) then plans it as an MLA family with one rope dict per layer type;
// the per-type MLA dims travel in per_layer_config (qk_nope_head_dim, qk_rope_head_dim, v_head_dim of the
// layers that differ from the global ones), read by src/model/per_layer.cc.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/model/document.h"
#include "src/model/parse.h"
#include "src/model/rope_types.h"

namespace posenc::detail {
namespace {
constexpr const char* kType = "dots3_note_text";
// Attributes a layer config may override that the plan reads (C Dots3NoteTextConfig's class defaults).
const char* const kDimKeys[] = {
    "num_attention_heads", "num_key_value_heads", "q_lora_rank", "kv_lora_rank", "head_dim",
    "qk_nope_head_dim",    "qk_rope_head_dim",    "v_head_dim"};
// Per-layer values posenc does not model: the indexer's sizes, and a window the mask never applies (the mask
// is built with the global sliding_window, M Dots3NoteTextModel.forward, while the layer's attention reads
// its own, M Dots3NoteTextAttention.__init__).
const char* const kGlobalOnly[] = {"index_topk", "index_head_dim", "index_n_heads", "sliding_window"};
// C __post_init__: the sliding layers' layer config, swa_<name> (default).
const std::pair<const char*, int64_t> kSwa[] = {
    {"num_attention_heads", 64}, {"num_key_value_heads", 64}, {"q_lora_rank", 1024}, {"kv_lora_rank", 1024},
    {"head_dim", 256},           {"qk_nope_head_dim", 192},   {"v_head_dim", 128}};

// Python's truth value of a JSON value (`if not use_dsa`, `... or {...}`).
bool truthy(const json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  return !v.empty();
}

bool flag(const json& v, const std::string& where, const char* key) {
  if (!v.is_null() && !v.is_boolean() && !v.is_number())
    fail(kOp, where, key, " = ", json_excerpt(v), " is invalid: must be true or false");
  return truthy(v);
}

// An integer dim in [lo, kMaxModelHeadDim].
int64_t dim_of(const json& v, const std::string& where, const std::string& key, int64_t lo) {
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > kMaxModelHeadDim)
    fail(kOp, where, key, " = ", json_excerpt(v), " is invalid for ", kType, ": must be an integer in [", lo,
         ", ", kMaxModelHeadDim, "]");
  return v.get<int64_t>();
}

}  // namespace

json dots3_resolved(const json& text, const std::string& where, std::vector<std::string>& warnings) {
  json out = text;
  Obj j{text, where, {}};
  // kwargs.pop(key, default) reads a present key, null included.
  const auto given = [&](const std::string& k) { return text.is_object() && text.contains(k); };
  const int64_t n = j.int_or("num_hidden_layers", 46);
  if (n <= 0 || n > kMaxModelLayers)
    fail(kOp, where, "num_hidden_layers = ", n, " is invalid: must be in [1, ", kMaxModelLayers, "]");

  // C __post_init__: use_dsa (None when absent and per_layer_config is given, else True) and
  // use_sliding_window.
  std::optional<bool> use_dsa;
  if (given("use_dsa")) {
    if (!text.at("use_dsa").is_null()) use_dsa = flag(text.at("use_dsa"), where, "use_dsa");
  } else if (!given("per_layer_config")) {
    use_dsa = true;
  }
  const bool sliding_on =
      given("use_sliding_window") ? flag(text.at("use_sliding_window"), where, "use_sliding_window") : true;

  // C __post_init__: sliding_window, else sliding_window_size (512); a sliding_window_size beside a
  // sliding_window stays an inert attribute.
  json window = has(text, "sliding_window") ? text.at("sliding_window") : json(nullptr);
  if (window.is_null())
    window = given("sliding_window_size") ? text.at("sliding_window_size") : json(512);
  else if (given("sliding_window_size") && text.at("sliding_window_size") != window)
    warnings.push_back(where + "sliding_window_size = " + json_excerpt(text.at("sliding_window_size")) +
                       " is not read by " + kType + ": sliding_window = " + json_excerpt(window) +
                       " is given (Dots3NoteTextConfig.__post_init__)");

  // C __post_init__: the layer types; use_dsa renames full_attention <-> indexed_attention (a false use_dsa
  // builds full_attention layers, without an indexer).
  std::vector<std::string> types;
  if (has(text, "layer_types")) {
    const json& lt = text.at("layer_types");
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != n)
      fail(kOp, where, "layer_types = ", json_excerpt(lt), " is invalid: must list the ", n,
           " layers (num_hidden_layers)");
    for (const json& t : lt) {
      if (!t.is_string()) fail(kOp, where, "layer_types contains ", t.dump(), ": must be strings");
      types.push_back(t.get<std::string>());
    }
  } else {
    const char* full = use_dsa && !*use_dsa ? "full_attention" : "indexed_attention";
    for (int64_t i = 0; i < n; ++i)
      types.push_back(!sliding_on || i < 2 || i % 4 == 1 ? full : "sliding_attention");
  }
  if (use_dsa) {
    const std::string from = *use_dsa ? "full_attention" : "indexed_attention";
    const std::string to = *use_dsa ? "indexed_attention" : "full_attention";
    for (std::string& t : types)
      if (t == from) t = to;
  }
  std::vector<std::string> order;  // the distinct types, in order of first appearance
  for (const std::string& t : types) {
    if (t == "attention" || t == "deepseek_sparse_attention" || t == "qwen_sparse_attention" || t == "mamba")
      fail(
          kOp, where, "layer_types contains \"", t, "\", which ", kType,
          " cannot run: its rope dicts are keyed by the names before configuration_utils.py's legacy "
          "remap, and its rotary module then looks up the remapped name (transformers 5.23 raises KeyError)");
    if (t != "full_attention" && t != "sliding_attention" && t != "indexed_attention")
      fail(kOp, where, "layer_types contains \"", t, "\", which ", kType,
           " does not build: its model has masks for full_attention, sliding_attention and "
           "indexed_attention only (Dots3NoteTextModel.forward)");
    if (std::find(order.begin(), order.end(), t) == order.end()) order.push_back(t);
  }
  const bool slides = std::find(order.begin(), order.end(), "sliding_attention") != order.end();
  if (slides && (!window.is_number_integer() || window.get<int64_t>() < 1))
    fail(kOp, where, "sliding_window = ", json_excerpt(window), " is invalid for ", kType,
         ": its sliding_attention layers need a window of >= 1 keys");

  // The global values of the attributes a layer config may override (C Dots3NoteTextConfig's class defaults,
  // __post_init__).
  std::map<std::string, json> global;
  const auto field = [&](const char* k, json fallback) { return given(k) ? text.at(k) : fallback; };
  global["num_attention_heads"] = field("num_attention_heads", 128);
  global["num_key_value_heads"] = has(text, "num_key_value_heads") ? text.at("num_key_value_heads")
                                  : given("num_key_value_heads")   ? global["num_attention_heads"]
                                                                   : json(128);
  global["q_lora_rank"] = field("q_lora_rank", 1024);
  global["kv_lora_rank"] = field("kv_lora_rank", 512);
  global["head_dim"] = field("head_dim", 256);
  global["qk_nope_head_dim"] = field("qk_nope_head_dim", 128);
  global["qk_rope_head_dim"] = field("qk_rope_head_dim", 64);
  global["v_head_dim"] = field("v_head_dim", 128);
  global["index_topk"] = field("index_topk", 2048);
  global["index_head_dim"] = field("index_head_dim", 128);
  global["index_n_heads"] = field("index_n_heads", 64);
  global["sliding_window"] = window;

  // C __post_init__: the sliding layers' layer config from swa_* when per_layer_config is absent (the swa_*
  // keys are popped either way; swa_head_dim - swa_qk_nope_head_dim is evaluated either way, a TypeError on
  // null).
  std::vector<std::string> swa_keys;
  for (const auto& [name, fallback] : kSwa)
    if (given(std::string("swa_") + name)) swa_keys.push_back(std::string("swa_") + name);
  if (given("swa_qk_rope_head_dim")) swa_keys.push_back("swa_qk_rope_head_dim");
  for (const char* k : {"swa_head_dim", "swa_qk_nope_head_dim"})
    if (given(k) && !text.at(k).is_number())
      fail(kOp, where, k, " = ", json_excerpt(text.at(k)), " is invalid for ", kType,
           ": its config class subtracts it (transformers 5.23 raises TypeError)");
  const bool plc_given = given("per_layer_config");
  std::map<int64_t, json> overrides;
  if (plc_given) {
    for (const std::string& k : swa_keys)
      warnings.push_back(where + k + " = " + json_excerpt(text.at(k)) + " is not read by " + kType +
                         ": per_layer_config is given, and its config class builds the sliding layers' "
                         "overrides from swa_* only without one (Dots3NoteTextConfig.__post_init__)");
    const json& plc = text.at("per_layer_config");
    if (!plc.is_null() && !plc.is_object())
      fail(kOp, where, "per_layer_config = ", json_excerpt(plc), " is invalid: must be an object");
    if (plc.is_object())
      for (auto it = plc.begin(); it != plc.end(); ++it) {
        const std::string& key = it.key();
        // integrations/heterogeneity/configuration_utils.py: int(key), which must name a layer.
        int64_t layer = 0;
        bool digits = !key.empty() && key.size() < 10;
        for (char c : key) digits = digits && c >= '0' && c <= '9';
        if (digits) layer = std::stoll(key);
        if (!digits || layer >= n)
          fail(kOp, where, "per_layer_config.", key, ": keys must be layer indices in [0, ", n,
               ") (transformers 5.23 raises)");
        if (overrides.count(layer)) fail(kOp, where, "per_layer_config names layer ", layer, " twice");
        if (!it.value().is_object())
          fail(kOp, where, "per_layer_config.", key, " = ", json_excerpt(it.value()), " must be an object");
        overrides[layer] = it.value();
      }
  } else {
    json swa = json::object();
    for (const auto& [name, fallback] : kSwa) {
      const std::string key = std::string("swa_") + name;
      swa[name] = given(key) ? text.at(key) : json(fallback);
      if (swa[name].is_null() && std::string(name) != "q_lora_rank")
        fail(kOp, where, key, " = null is invalid for ", kType, ": its sliding layers are built with it");
    }
    const json& head = swa["head_dim"];
    const json& nope = swa["qk_nope_head_dim"];
    swa["qk_rope_head_dim"] = given("swa_qk_rope_head_dim") ? text.at("swa_qk_rope_head_dim")
                              : head.is_number_integer() && nope.is_number_integer()
                                  ? json(head.get<int64_t>() - nope.get<int64_t>())
                                  : json(head.get<double>() - nope.get<double>());
    if (!slides)
      for (const std::string& k : swa_keys)
        warnings.push_back(where + k + " = " + json_excerpt(text.at(k)) + " is not read by " + kType +
                           ": no layer is sliding_attention");
    for (int64_t i = 0; i < n; ++i)
      if (types[i] == "sliding_attention") overrides[i] = swa;
  }

  // Each override: the keys the plan reads, values posenc cannot vary per layer, other positional ones.
  for (const auto& [layer, o] : overrides)
    for (auto it = o.begin(); it != o.end(); ++it) {
      const std::string& k = it.key();
      const std::string name = "per_layer_config." + std::to_string(layer) + "." + k;
      if (std::find(std::begin(kGlobalOnly), std::end(kGlobalOnly), k) != std::end(kGlobalOnly)) {
        if (it.value() != global[k])
          fail(kOp, where, name, " = ", json_excerpt(it.value()), " is not modeled by posenc for ", kType,
               ": its layers differ from the global ", k, " = ", json_excerpt(global[k]));
      } else if (std::find(std::begin(kDimKeys), std::end(kDimKeys), k) == std::end(kDimKeys) &&
                 (k == "skip" || (looks_positional(k) && !known_irrelevant_key(k)))) {
        fail(kOp, where, name, ": a per-layer override of this attribute is not modeled by posenc for ",
             kType, " (its MLA dims and head counts are)");
      }
    }
  // A layer config is the global config with the overrides that differ from it (heterogeneity:
  // _modify_config_and_create_heterogeneity_spec drops the equal ones); the rotary module and
  // validate_architecture take one per layer type, which must then be the same for its layers
  // (_PerLayerConfigView.__getitem__ raises "not homogeneous", read by M
  // Dots3NoteTextRotaryEmbedding.__init__).
  const auto stripped = [&](int64_t layer) {
    json s = json::object();
    const auto it = overrides.find(layer);
    if (it == overrides.end()) return s;
    for (auto o = it->second.begin(); o != it->second.end(); ++o) {
      const auto g = global.find(o.key());
      if (g != global.end() ? g->second == o.value() : given(o.key()) && text.at(o.key()) == o.value())
        continue;
      s[o.key()] = o.value();
    }
    return s;
  };
  std::map<std::string, std::map<std::string, json>> dims;  // per layer type: its layer config's values
  for (const std::string& t : order) {
    const int64_t first = std::find(types.begin(), types.end(), t) - types.begin();
    const json reference = stripped(first);
    for (int64_t i = first + 1; i < n; ++i)
      if (types[i] == t && stripped(i) != reference)
        fail(kOp, where, "per_layer_config gives the ", t, " layers different overrides (layer ", first, ": ",
             json_excerpt(reference), ", layer ", i, ": ", json_excerpt(stripped(i)), "): ", kType,
             " builds one layer config per layer type (transformers 5.23 raises: not homogeneous)");
    for (const char* k : kDimKeys) dims[t][k] = reference.contains(k) ? reference.at(k) : global[k];
  }

  // C validate_architecture.
  for (const std::string& t : order)
    if (dims[t]["q_lora_rank"].is_null())
      fail(kOp, where, "q_lora_rank is null for the ", t, " layers: ", kType,
           " requires it for MLA queries (transformers 5.23 raises)");
  if (given("n_shared_experts") && text.at("n_shared_experts").is_null())
    fail(kOp, where, "n_shared_experts = null is invalid for ", kType,
         ": it needs at least one shared expert (transformers 5.23 raises)");
  const int64_t shared = j.int_or("n_shared_experts", 1);
  const int64_t routed = j.has("num_local_experts") ? j.integer("num_local_experts")  // attribute_map
                                                    : j.int_or("n_routed_experts", 256);
  const int64_t groups = j.int_or("n_group", 1), topk_group = j.int_or("topk_group", 1);
  if (shared < 1)
    fail(kOp, where, "n_shared_experts = ", shared, " is invalid for ", kType,
         ": it needs at least one shared expert (transformers 5.23 raises)");
  if (groups < 1 || routed % groups != 0 || routed / groups < 2 || topk_group < 1 || topk_group > groups)
    fail(kOp, where, "n_group = ", groups, ", topk_group = ", topk_group, " and n_routed_experts = ", routed,
         " are invalid for ", kType, ": n_group must split the experts into groups of >= 2 and topk_group ",
         "be in [1, n_group] (transformers 5.23 raises)");
  const int64_t index_head_dim = dim_of(global["index_head_dim"], where, "index_head_dim", 1);
  for (const std::string& t : order) {
    std::map<std::string, json>& d = dims[t];
    const std::string of = " (the " + t + " layers)";
    if (d["num_key_value_heads"] != d["num_attention_heads"])
      fail(kOp, where, "num_key_value_heads = ", json_excerpt(d["num_key_value_heads"]), of,
           " is invalid for ", kType,
           ": it must equal num_attention_heads = ", json_excerpt(d["num_attention_heads"]),
           " (transformers 5.23 raises)");
    const int64_t rope = dim_of(d["qk_rope_head_dim"], where, "qk_rope_head_dim" + of, 2);
    dim_of(d["qk_nope_head_dim"], where, "qk_nope_head_dim" + of, 0);
    dim_of(d["v_head_dim"], where, "v_head_dim" + of, 1);
    dim_of(d["head_dim"], where, "head_dim" + of, 1);
    if (t == "indexed_attention" && rope > index_head_dim)
      fail(kOp, where, "qk_rope_head_dim = ", rope, " exceeds index_head_dim = ", index_head_dim,
           ": the indexer rotates that many of its dims (transformers 5.23 raises)");
  }
  if (slides) {
    std::map<std::string, json>& d = dims["sliding_attention"];
    const int64_t head = d["head_dim"].get<int64_t>();
    const int64_t sum = d["qk_nope_head_dim"].get<int64_t>() + d["qk_rope_head_dim"].get<int64_t>();
    if (head != sum)
      fail(kOp, where, "the sliding_attention layers' head_dim = ", head, " is invalid for ", kType,
           ": it must equal qk_nope_head_dim + qk_rope_head_dim = ", sum, " (transformers 5.23 raises)");
  }
  // Each type's rotation (C convert_rope_params_to_dict, M Dots3NoteTextRotaryEmbedding): cos / sin of
  // int(head_dim * (qk_rope_head_dim / head_dim)) dims at exponents 2i / that, applied to the
  // qk_rope_head_dim dims the attention slices (M Dots3NoteTextAttention.forward).
  for (const std::string& t : order) {
    const std::string of = " (the " + t + " layers)";
    const int64_t rope = dims[t]["qk_rope_head_dim"].get<int64_t>();
    const int64_t head = dims[t]["head_dim"].get<int64_t>();
    if (rope % 2 != 0)
      fail(kOp, where, "qk_rope_head_dim = ", rope, of, " is invalid for ", kType,
           ": its interleaved rotation needs pairs (transformers 5.23 fails)");
    const double prf = static_cast<double>(rope) / static_cast<double>(head);
    const auto rotated = static_cast<int64_t>(static_cast<double>(head) * prf);
    if (rotated != rope)
      fail(kOp, where, "head_dim = ", head, " with qk_rope_head_dim = ", rope, of, " is not supported for ",
           kType, ": its rotary module builds int(head_dim * (qk_rope_head_dim / head_dim)) = ", rotated,
           " dims, frequencies base^(-2i / ", rotated, ") for the ", rope,
           " rotated dims, which posenc's RoPE (exponents 2i / the rotated dims) does not express");
  }
  // C convert_rope_params_to_dict, then modeling_rope_utils.py's convert_rope_params_to_dict and
  // standardize_rope_params.
  const json scaling = given("rope_scaling") ? text.at("rope_scaling") : json(nullptr);
  json rp = has(text, "rope_parameters") ? text.at("rope_parameters") : json(nullptr);
  std::string rp_name = "rope_parameters";
  // rope_theta: the default of every dict without one (C convert_rope_params_to_dict; modeling_rope_utils.py
  // convert_rope_params_to_dict, standardize_rope_params).
  const bool theta_given = given("rope_theta"), swa_theta_given = given("swa_rope_theta");
  const json theta = theta_given ? text.at("rope_theta") : json(8e7);  // C default_theta
  const json swa_theta = swa_theta_given ? text.at("swa_rope_theta") : json(5e4);
  bool theta_used = false, swa_theta_used = false;
  const auto base = [&](bool swa) {
    const json& v = swa ? swa_theta : theta;
    if (!v.is_number() || !(v.get<double>() > 0))
      fail(kOp, where, swa ? "swa_rope_theta" : "rope_theta", " = ", json_excerpt(v), " is invalid for ",
           kType, ": must be a base > 0");
    (swa ? swa_theta_used : theta_used) = true;
    return v;
  };
  const auto nested = [&](const json& d) {
    if (!d.is_object()) return false;
    for (const std::string& t : order)
      if (d.contains(t)) return true;
    return false;
  };
  if (rp.is_null()) {
    if (truthy(scaling)) {  // a legacy rope_scaling stands in for the class's dicts
      rp = scaling, rp_name = "rope_scaling";
    } else {  // the class's dicts (C convert_rope_params_to_dict)
      rp = json::object();
      for (const std::string& t : order)
        rp[t] = {{"rope_type", "default"}, {"rope_theta", base(t == "sliding_attention")}};
    }
  } else if (truthy(scaling)) {
    // modeling_rope_utils.py convert_rope_params_to_dict: rope_scaling replaces rope_parameters as it is; a
    // flat one has no dict per layer type, which C convert_rope_params_to_dict indexes (KeyError).
    if (!nested(scaling))
      fail(kOp, where, "rope_scaling = ", json_excerpt(scaling),
           " beside rope_parameters is not supported for ", kType,
           ": it replaces them without a dict per layer type (transformers 5.23 raises KeyError)");
    warnings.push_back(where + "rope_parameters is replaced by rope_scaling for " + kType +
                       " (modeling_rope_utils.py convert_rope_params_to_dict)");
    rp = scaling, rp_name = "rope_scaling";
  }
  if (!rp.is_object()) fail(kOp, where, rp_name, " = ", json_excerpt(rp), " is invalid: must be an object");
  if (!nested(rp)) {  // C convert_rope_params_to_dict: one flat dict, copied to every layer type
    json copies = json::object();
    for (const std::string& t : order) copies[t] = rp;
    rp = copies;
  } else {
    for (auto it = rp.begin(); it != rp.end(); ++it) {
      const std::string& k = it.key();
      if (std::find(order.begin(), order.end(), k) != order.end()) continue;
      // yarn reads truncate from rope_parameters' top level (modeling_rope_utils.py
      // _compute_yarn_parameters), beside the dicts.
      if (k == "truncate")
        for (const std::string& t : order)
          if (rp.contains(t) && rp.at(t).is_object() && standardized_rope_type(rp.at(t)) == "yarn" &&
              !truthy(it.value()))
            fail(kOp, where, rp_name, ".truncate = ", json_excerpt(it.value()),
                 " is not modeled by posenc for ", kType, ": yarn reads it beside the per-type dicts");
      warnings.push_back(where + rp_name + "." + k + " = " + json_excerpt(it.value()) + " is not read by " +
                         kType +
                         (k.find("_attention") != std::string::npos ? ": no layer is " + k : std::string()));
    }
  }
  const int64_t max_pos = j.int_or("max_position_embeddings", 524288);
  json built = json::object();
  for (const std::string& t : order) {
    const std::string at = rp_name + "." + t;
    if (!rp.contains(t) || rp.at(t).is_null())
      fail(kOp, where, at, " is missing: ", kType, "'s config class sets its partial_rotary_factor ",
           "(transformers 5.23 raises)");
    if (!rp.at(t).is_object()) fail(kOp, where, at, " = ", json_excerpt(rp.at(t)), " must be an object");
    json d = rp.at(t);
    set_default_rope_type(d);
    if (!d.contains("rope_theta")) d["rope_theta"] = base(false);
    const std::string kind = standardized_rope_type(d);
    // _compute_proportional_rope_parameters sizes cos / sin by head_dim (modeling_rope_utils.py),
    // not by the rotated dims the attention slices.
    if (kind == "proportional")
      fail(kOp, where, at, ".rope_type = \"proportional\" is not supported for ", kType,
           ": its cos / sin then span head_dim, not the qk_rope_head_dim rotated dims (transformers 5.23 "
           "fails ",
           "at the first forward)");
    if (rope_type_reads_original(kind) && !d.contains("original_max_position_embeddings"))
      d["original_max_position_embeddings"] = max_pos;  // modeling_rope_utils.py standardize_rope_params
    // C convert_rope_params_to_dict: set over whatever the dict says. Its rotated width is qk_rope_head_dim
    // (checked above): the plan's RopeConfig spans those dims alone.
    const double prf = dims[t]["qk_rope_head_dim"].get<double>() / dims[t]["head_dim"].get<double>();
    if (d.contains("partial_rotary_factor") &&
        (!d.at("partial_rotary_factor").is_number() || d.at("partial_rotary_factor").get<double>() != prf))
      warnings.push_back(where + at + ".partial_rotary_factor = " +
                         json_excerpt(d.at("partial_rotary_factor")) + " is not read by " + kType +
                         ": its config class sets qk_rope_head_dim / head_dim = " + json_excerpt(json(prf)) +
                         " (Dots3NoteTextConfig.convert_rope_params_to_dict)");
    d.erase("partial_rotary_factor");
    if (d.contains("truncate")) {
      warnings.push_back(where + at + ".truncate = " + json_excerpt(d.at("truncate")) + " is not read by " +
                         kType +
                         ": yarn reads truncate beside the per-type dicts (modeling_rope_utils.py "
                         "_compute_yarn_parameters)");
      d.erase("truncate");
    }
    built[t] = d;
  }
  if (theta_given && !theta_used)
    warnings.push_back(where + "rope_theta = " + json_excerpt(theta) + " is not read by " + kType +
                       ": every layer type's rope dict has its own");
  if (swa_theta_given && !swa_theta_used)
    warnings.push_back(where + "swa_rope_theta = " + json_excerpt(swa_theta) + " is not read by " + kType +
                       (slides
                            ? ": " + rp_name + " is given (Dots3NoteTextConfig.convert_rope_params_to_dict)"
                            : std::string(": no layer is sliding_attention")));
  if (given("partial_rotary_factor"))
    warnings.push_back(where + "partial_rotary_factor = " + json_excerpt(text.at("partial_rotary_factor")) +
                       " is not read by " + kType +
                       ": each layer type rotates qk_rope_head_dim / head_dim of its head "
                       "(Dots3NoteTextConfig.convert_rope_params_to_dict)");
  if (given("original_max_position_embeddings"))
    warnings.push_back(where + "original_max_position_embeddings = " +
                       json_excerpt(text.at("original_max_position_embeddings")) + " is not read by " +
                       kType + ": its rope dicts are per layer type (max_position_embeddings by default)");
  if (given("rope_interleave") && !truthy(text.at("rope_interleave")))
    warnings.push_back(where + "rope_interleave = " + json_excerpt(text.at("rope_interleave")) +
                       " is ignored: " + kType +
                       " always rotates interleaved pairs (Dots3NoteTextAttention.forward)");
  out["layer_types"] = types;
  out["sliding_window"] = window;
  out["rope_parameters"] = built;
  // The MLA dims of each layer type: the global ones, and per_layer_config for the layers that differ.
  const char* const kMla[] = {"qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"};
  for (const char* k : kMla) out[k] = global[k];
  json per_layer = json::object();
  for (int64_t i = 0; i < n; ++i)
    for (const char* k : kMla)
      if (dims[types[i]][k] != global[k]) per_layer[std::to_string(i)][k] = dims[types[i]][k];
  out["per_layer_config"] = per_layer;
  for (const char* k : {"use_dsa", "use_sliding_window", "sliding_window_size", "swa_rope_theta",
                        "rope_theta", "rope_scaling", "partial_rotary_factor",
                        "original_max_position_embeddings", "rope_interleave", "swa_qk_rope_head_dim"})
    out.erase(k);
  for (const auto& [name, fallback] : kSwa) out.erase(std::string("swa_") + name);
  return out;
}

}  // namespace posenc::detail
