// src/model_layer_types.cc: each layer's type (full_attention, sliding_attention, chunked_attention,
// linear_attention, conv) as transformers 5.23 decides it: the config's layer_types, or the rule
// its config class (or modeling file) applies when layer_types is absent. Citations name the
// configuration_<type>.py lines of each rule.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "src/config_json.h"
#include "src/model_parse.h"

namespace posenc::detail {
namespace {
std::vector<std::string> default_layer_types(Obj& j, const Model& m, const std::vector<int>& use_rope,
                                             int64_t window) {
  const std::string& t = m.type;
  std::vector<std::string> types(m.layers, "full_attention");
  // Python's `(i + 1) % p` raises ZeroDivisionError at 0; a period below 1 means nothing.
  auto period = [&](const char* key, int64_t fallback) {
    const int64_t p = j.int_or(key, fallback);
    if (p < 1) fail(kOp, key, " = ", p, " is invalid: must be >= 1");
    return p;
  };
  auto pattern = [&](int64_t p) {
    for (int64_t i = 0; i < m.layers; ++i)
      types[i] = (i + 1) % p != 0 ? "sliding_attention" : "full_attention";
  };
  if (t == "gpt_neo") {
    // GPTNeoConfig.expand_attention_types_params: [[["global", "local"], 12]] by default, each entry's
    // list repeated its count times (configuration_gpt_neo.py L74-76, L92-97); the config's own
    // attention_layers is recomputed from it and must have num_layers entries (L81).
    const json default_types = json::parse(R"([[["global", "local"], 12]])");
    const json& given = j.has("attention_types") ? j.at("attention_types") : default_types;
    std::vector<std::string> expanded;
    const auto malformed = [&] {
      fail(kOp, j.where, "attention_types = ", detail::json_excerpt(given),
           " is invalid: must be a list of [[\"global\" | \"local\", ...], count] pairs");
    };
    if (!given.is_array()) malformed();
    for (const json& item : given) {
      if (!item.is_array() || item.size() != 2 || !item[0].is_array() || !item[1].is_number_integer())
        malformed();
      const int64_t count = item[1].get<int64_t>();
      if (count < 0 || count > kMaxModelLayers) malformed();
      if (item[0].empty()) continue;  // nothing to repeat (and no loop of count empty steps)
      for (int64_t c = 0; c < count && static_cast<int64_t>(expanded.size()) <= kMaxModelLayers; ++c)
        for (const json& name : item[0]) {
          if (name != "global" && name != "local") malformed();
          expanded.push_back(name == "local" ? "sliding_attention" : "full_attention");
        }
    }
    if (static_cast<int64_t>(expanded.size()) != m.layers)
      fail(kOp, j.where, "attention_types expands to ", expanded.size(),
           " layers, expected num_layers = ", m.layers, " (configuration_gpt_neo.py validate_architecture)");
    j.read.insert("attention_layers");
    return expanded;
  }
  if (t == "gemma2" || t == "vaultgemma" || t == "gpt_oss")
    pattern(2);  // "sliding" if (i + 1) % 2 (configuration_gemma2.py)
  else if (t == "gemma3_text")
    pattern(period("sliding_window_pattern", 6));
  else if (t == "gemma4_text")
    pattern(6);  // configuration_gemma4.py: sliding_window_pattern = 6, fixed
  else if (t == "kolibri1")
    pattern(5);  // configuration_kolibri1.py: full iff (i + 1) % 5 == 0
  else if (t == "afmoe")
    pattern(period("global_attn_every_n_layers", 4));  // configuration_afmoe.py L107-111
  else if (t == "flint") {
    // configuration_flint.py L104-109: full on layers 0, 1, every i % 4 == 1 and the last.
    for (int64_t i = 0; i < m.layers; ++i)
      types[i] = i < 2 || i % 4 == 1 || i == m.layers - 1 ? "full_attention" : "sliding_attention";
  } else if (t == "cohere2" || t == "exaone4" || t == "exaone_moe") {
    if (j.has("sliding_window_pattern") && !j.at("sliding_window_pattern").is_number())
      fail(kOp, "sliding_window_pattern = ", j.at("sliding_window_pattern").dump(),
           " needs layer_types (posenc reads an integer pattern only)");
    pattern(period("sliding_window_pattern", 4));
  } else if (t == "olmo3")
    pattern(4);
  else if (t == "lfm3")  // configuration_lfm3.py: full iff i % 4 == 2, sliding iff i % 4 == 0 and i > 0
    for (int64_t i = 0; i < m.layers; ++i)
      types[i] = i % 4 == 2 ? "full_attention" : i % 4 == 0 && i > 0 ? "sliding_attention" : "conv";
  else if (t == "dots1") {  // configuration_dots1.py L119-125: no use_sliding_window gate
    const int64_t mwl = j.int_or("max_window_layers", 62);
    if (window > 0)
      for (int64_t i = std::max<int64_t>(mwl, 0); i < m.layers; ++i) types[i] = "sliding_attention";
  } else if (t == "cwm")  // configuration_cwm.py L98-104: full on layers 0, 4, 8, ...
    for (int64_t i = 0; i < m.layers; ++i) types[i] = i % 4 == 0 ? "full_attention" : "sliding_attention";
  else if (t == "llama4_text")
    for (int64_t i = 0; i < m.layers; ++i) types[i] = use_rope[i] ? "chunked_attention" : "full_attention";
  else if (t == "smollm3") {
    for (int64_t i = 0; i < m.layers; ++i)
      if (j.bool_or("use_sliding_window", false) && window > 0 && !use_rope[i])
        types[i] = "sliding_attention";
  } else if (t == "qwen2_moe") {
    // configuration_qwen2_moe.py L114-119: odd-numbered layers below max_window_layers slide.
    const int64_t mwl = j.int_or("max_window_layers", 28);
    for (int64_t i = 0; i < m.layers; ++i)
      if ((i + 1) % 2 && i < mwl && j.bool_or("use_sliding_window", false)) types[i] = "sliding_attention";
  } else if (t == "qwen2" || t == "qwen3" || t == "qwen2_vl" || t == "qwen2_5_vl") {
    // sliding_window = sw if use_sliding_window else None; sliding iff i >= max_window_layers.
    const int64_t mwl = j.int_or("max_window_layers", t == "qwen2_vl" || t == "qwen2_5_vl" ? 80 : 28);
    if (j.bool_or("use_sliding_window", false) && window > 0)
      for (int64_t i = std::max<int64_t>(mwl, 0); i < m.layers; ++i) types[i] = "sliding_attention";
  } else if (t == "qwen3_next" || t == "qwen3_5") {
    const int64_t every = period("full_attention_interval", 4);
    for (int64_t i = 0; i < m.layers; ++i) types[i] = (i + 1) % every ? "linear_attention" : "full_attention";
  } else if (window > 0 && (t == "mistral" || t == "ministral" || t == "ministral3" || t == "mixtral" ||
                            t == "phi3" || t == "starcoder2" || t == "qwen3_moe" || t == "phimoe")) {
    // qwen3_moe has no layer_types: every layer gets sliding_window (modeling_qwen3_moe.py L148, L472).
    types.assign(m.layers, "sliding_attention");  // sliding mask on every layer when set
  }
  return types;
}
}  // namespace

std::vector<std::string> layer_types(Obj& j, const Model& m, const std::vector<int>& use_rope, int64_t window,
                                     std::vector<std::string>& warnings) {
  const std::string& type = m.type;
  std::vector<std::string> types;
  // qwen3_moe, phimoe, ministral3 build one mask for every layer from sliding_window and never read
  // layer_types (modeling_qwen3_moe.py L472-486, modeling_phimoe.py L635, modeling_ministral3.py L365).
  const bool one_mask = type == "qwen3_moe" || type == "phimoe" || type == "ministral3";
  if (one_mask && j.has("layer_types"))
    warnings.push_back("layer_types is ignored by " + type +
                       " in transformers 5: every layer slides when sliding_window is set");
  if (!one_mask && j.has("layer_types")) {
    const json& lt = j.at("layer_types");
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != m.layers)
      fail(kOp, j.where, "layer_types must be a list of num_hidden_layers = ", m.layers, " strings");
    for (const json& e : lt) {
      if (!e.is_string()) fail(kOp, j.where, "layer_types contains ", e.dump(), ": must be strings");
      std::string s = e.get<std::string>();
      if (s == "attention") s = "full_attention";  // configuration_utils.py L94-99 legacy names
      if (s == "mamba") s = "linear_attention";
      if (s != "full_attention" && s != "sliding_attention" && s != "chunked_attention" &&
          s != "linear_attention" && s != "conv")
        fail(kOp, j.where, "layer_types contains \"", s,
             "\": posenc knows full_attention, sliding_attention, "
             "chunked_attention, linear_attention, conv");
      types.push_back(s);
    }
  } else {
    types = default_layer_types(j, m, use_rope, window);
  }
  j.read.insert("sliding_window_pattern");
  j.read.insert("max_window_layers");
  j.read.insert("full_attention_interval");
  if (type == "gemma4_text" && types.back() != "full_attention") {  // Gemma4TextConfig.__post_init__
    warnings.push_back("the last layer is " + types.back() +
                       ": Gemma 4 forces it to full_attention (configuration_gemma4.py)");
    types.back() = "full_attention";
  }
  return types;
}

}  // namespace posenc::detail
