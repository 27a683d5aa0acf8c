// src/model/layer_types.cc: the sliding window each family's config class fills, and each layer's type
// (full_attention, sliding_attention, chunked_attention, linear_attention, conv, hybrid, moe, mlp) as
// transformers 5.23 decides it: the config's layer_types, or the rule its config class (or modeling file)
// applies when layer_types is absent (Family::layer_rule, or the family's hook in src/model/hooks.cc).
#include <algorithm>
#include <string_view>
#include <nlohmann/json.hpp>

#include "src/model/document.h"
#include "src/model/hooks.h"
#include "src/model/parse.h"

namespace posenc::detail {

int64_t layer_period(Obj& j, const char* key, int64_t fallback) {
  // Python's `(i + 1) % p` raises ZeroDivisionError at 0; a period below 1 means nothing.
  const int64_t p = j.int_or(key, fallback);
  if (p < 1) fail(kOp, key, " = ", p, " is invalid: must be >= 1");
  return p;
}

namespace {
std::vector<std::string> default_layer_types(Obj& j, const Model& m, const std::vector<int>& use_rope,
                                             int64_t window) {
  // The rule of the model's own row where it has one (gemma3n_text beside gemma3_text), else its family's.
  const Family& row = m.family->layer_rule != LayerRule::full ? *m.family : *m.rules;
  if (row.layer_rule == LayerRule::hook) return m.hooks->layer_types(j, m, use_rope, window);
  const char* every = row.layer_rule == LayerRule::indexed  ? "indexed_attention"
                      : row.layer_rule == LayerRule::linear ? "linear_attention"
                      : row.layer_rule == LayerRule::hybrid ? "hybrid"
                                                            : "full_attention";
  std::vector<std::string> types(m.layers, every);
  if (row.pattern_needs_number && j.has(row.layer_key) && !j.at(row.layer_key).is_number())
    fail(kOp, row.layer_key, " = ", j.at(row.layer_key).dump(),
         " needs layer_types (posenc reads an integer pattern only)");
  const int64_t p = row.layer_key ? layer_period(j, row.layer_key, row.layer_period) : row.layer_period;
  switch (row.layer_rule) {
    case LayerRule::sliding_unless_every:  // "sliding" if (i + 1) % p (configuration_gemma2.py)
      for (int64_t i = 0; i < m.layers; ++i)
        types[i] = (i + 1) % p != 0 ? "sliding_attention" : "full_attention";
      break;
    case LayerRule::full_every_from_zero:  // full iff i % p == 0 (configuration_modernbert_decoder.py)
      for (int64_t i = 0; i < m.layers; ++i) types[i] = i % p != 0 ? "sliding_attention" : "full_attention";
      break;
    case LayerRule::linear_unless_every:
      for (int64_t i = 0; i < m.layers; ++i) types[i] = (i + 1) % p ? "linear_attention" : "full_attention";
      break;
    case LayerRule::indexed_unless_every:
      for (int64_t i = 0; i < m.layers; ++i)
        types[i] = (i + 1) % p ? "linear_attention" : "indexed_attention";
      break;
    case LayerRule::sliding_when_window:  // sliding mask on every layer when set
      if (window > 0) types.assign(m.layers, "sliding_attention");
      break;
    case LayerRule::sliding_from_layer: {
      // sliding_window = sw if use_sliding_window else None (configuration_qwen2.py; dots1 has no gate,
      // configuration_dots1.py Dots1Config.__post_init__); sliding iff i >= max_window_layers.
      const int64_t mwl = j.int_or("max_window_layers", row.max_window_layers);
      if ((!row.use_sliding_window_gate || j.bool_or("use_sliding_window", false)) && window > 0)
        for (int64_t i = std::max<int64_t>(mwl, 0); i < m.layers; ++i) types[i] = "sliding_attention";
      break;
    }
    default:
      break;
  }
  return types;
}
}  // namespace

int64_t sliding_window(Obj& j, const Model& m) {
  // HF's sliding_window: w keys including the current one (the same count as AttentionConfig::window).
  int64_t window = 0;
  if (j.has("sliding_window"))
    window = j.integer("sliding_window");
  else if (!j.j.contains("sliding_window"))
    // Config class defaults (sliding_window: int | None = 4096 in each configuration_*.py).
    window = m.first_set(&Family::sliding_window);
  // A window from other keys (modernbert-decoder's local_attention, recurrent_gemma's attention_window_size,
  // gpt_neo's window_size, mimo_v2_flash's sliding_window_size).
  if (m.hooks->window) window = m.hooks->window(j, m, window);
  // modernbert (the encoder, modernbert-decoder's rules): its mask keeps |q - k| <= sliding_window =
  // local_attention // 2 (masking_utils.py sliding_window_bidirectional_overlay; a saved sliding_window sets
  // local_attention = 2 sliding_window, configuration_modernbert.py ModernBertConfig's sliding_window
  // property), and its attention function gets sliding_window + 1 (modeling_modernbert.py
  // ModernBertAttention.__init__): posenc's symmetric window |q - k| < window is one more.
  if (m.family->has(kSymmetricWindowPlusOne)) window += 1;
  // gemma3_text with use_bidirectional_attention (EmbeddingGemma): __post_init__ halves the window,
  // sliding_window // 2 + 1, and the sliding layers keep |q - k| < it (configuration_gemma3.py
  // Gemma3TextConfig.__post_init__, modeling_gemma3.py _bidirectional_window_overlay): posenc's symmetric
  // window, unchanged.
  if (m.family->has(kHalvedBidirectionalWindow) && window > 0 &&
      j.bool_or("use_bidirectional_attention", false))
    window = window / 2 + 1;
  // embedding_gemma2_text, openai_privacy_filter, ultrabert: bidirectional sliding layers keep |q - k| <=
  // sliding_window (masking_utils.py sliding_window_bidirectional_overlay) and their attention gets
  // sliding_window + 1 (modeling_embedding_gemma2.py EmbeddingGemma2Attention.__init__,
  // modeling_openai_privacy_filter.py OpenAIPrivacyFilterAttention.__init__, modeling_ultrabert.py
  // UltrabertAttention.__init__): posenc's |q - k| < sliding_window + 1.
  if (m.family->has(kInclusiveBidirectionalWindow)) {
    if (window <= 0)
      fail(kOp, j.where, "sliding_window = ", json_excerpt(j.j.at("sliding_window")),
           " is not supported for ", m.family->model_type,
           ": its sliding layers keep the keys within sliding_window of the query (it must be > 0)");
    window += 1;
  }
  j.read.insert("local_attention");
  j.read.insert("sliding_window");
  // Qwen3-Omni's text attention passes sliding_window=None and its model builds causal masks only
  // (modeling_qwen3_omni_moe.py Qwen3OmniMoeThinkerTextAttention.__init__,
  // Qwen3OmniMoeThinkerTextModel.forward): a window in the config is never applied.
  if (m.family->has(kWindowIgnored) && window > 0) {
    m.warnings->push_back(j.where + "sliding_window = " + std::to_string(window) + " is ignored by " +
                          m.family->model_type + ": transformers 5 never applies it");
    window = 0;
  }
  if (window < 0) fail(kOp, j.where, "sliding_window = ", window, " is invalid: must be >= 0");
  // These families switch RoPE on `sliding_window is None` (exaone4 rule) or on a truthy window
  // (cohere2 rule): an explicit 0 is neither posenc's "no window" (null) nor a usable window.
  const RopeLayers rope_layers = m.rules->rope_layers;
  if (window == 0 && j.has("sliding_window") &&
      (rope_layers == RopeLayers::sliding_or_no_window || rope_layers == RopeLayers::sliding_with_window))
    fail(kOp, j.where, "sliding_window = 0 is invalid for model_type '", m.type,
         "': its RoPE rule tells 0 from null (no window); give null or a window >= 1");
  if (m.rules->has(kSlidingWindowGate) && !j.bool_or("use_sliding_window", false))
    window = 0;  // configuration_qwen2.py: sw if use_sliding_window
  j.read.insert("use_sliding_window");
  return window;
}

// The layer types each family's model accepts in a given list (others fail in transformers 5, or, for
// zamba, silently become mamba-only layers): Family::layer_types, e.g. the masks a hybrid builds.
void check_family_layer_types(const Model& m, const std::vector<std::string>& types, const char* key) {
  const char* allowed = m.rules->layer_types
                            ? m.rules->layer_types
                            : "full_attention sliding_attention chunked_attention linear_attention conv";
  for (const std::string& t : types)
    if (!in_list(allowed, t))
      fail(kOp, key, " contains \"", t, "\", which model_type '", m.type,
           "' does not build in transformers 5");
}

std::vector<std::string> layer_types(Obj& j, const Model& m, const std::vector<int>& use_rope, int64_t window,
                                     std::vector<std::string>& warnings) {
  const std::string& type = m.type;
  std::vector<std::string> types;
  // Family trait kOneMask: one mask for every layer from sliding_window, layer_types never read.
  const bool one_mask = m.rules->has(kOneMask);
  if (one_mask && j.has("layer_types"))
    warnings.push_back("layer_types is ignored by " + type +
                       " in transformers 5: every layer slides when sliding_window is set");
  // Family trait kAllSliding: one sliding window mask for every layer; its config class has no layer_types.
  if (m.family->has(kAllSliding)) {
    if (j.has("layer_types"))
      warnings.push_back("layer_types is ignored by " + std::string(m.family->model_type) +
                         " in transformers 5: every layer slides");
    j.read.insert("layer_types");
    return std::vector<std::string>(static_cast<size_t>(m.layers), "sliding_attention");
  }
  // Families whose per-layer list is a read-only property: a saved list cannot be loaded by
  // transformers 5 (AttributeError: property ... has no setter).
  const bool list_is_property = m.rules->has(kDerivedLayerList);
  for (const char* key : {"layer_types", "layers_block_type"})
    if (list_is_property && j.has(key))
      fail(kOp, j.where, key, " is given, but ", type,
           " derives its layer list (a read-only property in transformers 5, which fails to load this "
           "config)");
  // attribute_map layer_types <-> layers_block_type (granitemoehybrid, nemotron_h, zamba, zamba2).
  const char* list_key = j.has("layer_types") ? "layer_types" : "layers_block_type";
  if (m.rules->has(kBlockTypeListFirst) && j.has("layers_block_type")) list_key = "layers_block_type";
  const bool indexed_full = m.rules->has(kIndexedFullAttention);
  if (!one_mask && j.has(list_key)) {
    const json& lt = j.at(list_key);
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != m.layers)
      fail(kOp, j.where, "layer_types must be a list of num_hidden_layers = ", m.layers, " strings");
    for (const json& e : lt) {
      if (!e.is_string()) fail(kOp, j.where, "layer_types contains ", e.dump(), ": must be strings");
      std::string s = e.get<std::string>();
      // Qwen4ExpTextConfig rewrites full_attention before the legacy remap: "attention" then fails there.
      if (indexed_full && s == "attention")
        fail(kOp, j.where, list_key, " contains \"attention\", which ", type, " rejects (transformers 5.23: ",
             "its full_attention rewrite runs before the legacy names' remap)");
      if (s == "attention") s = "full_attention";  // configuration_utils.py _LEGACY_LAYER_TYPE_REMAP
      if (s == "mamba") s = "linear_attention";
      if (s == "deepseek_sparse_attention" || s == "qwen_sparse_attention") s = "indexed_attention";
      // Glm5NextTextConfig.__post_init__, Qwen4ExpTextConfig.__post_init__
      if (indexed_full && s == "full_attention") s = "indexed_attention";
      if (s != "full_attention" && s != "sliding_attention" && s != "chunked_attention" &&
          s != "linear_attention" && s != "conv" && s != "hybrid" && s != "moe" && s != "mlp" &&
          s != "indexed_attention" && s != "minimax_m3_sparse")
        fail(kOp, j.where, list_key, " contains \"", s,
             "\": posenc knows full_attention, sliding_attention, "
             "chunked_attention, linear_attention, conv, hybrid, moe, mlp, indexed_attention, "
             "minimax_m3_sparse");
      types.push_back(s);
    }
    check_family_layer_types(m, types, list_key);
  } else {
    types = default_layer_types(j, m, use_rope, window);
  }
  // Gemma3TextConfig.to_dict saves the private _sliding_window_pattern, which __post_init__ overwrites with
  // sliding_window_pattern (6 if absent) on loading (configuration_gemma3.py): with layer_types saved beside
  // it, it decides nothing.
  if (j.has("_sliding_window_pattern") && !j.has("layer_types") && !j.has("sliding_window_pattern"))
    m.warnings->push_back(j.where + "_sliding_window_pattern is ignored: transformers 5 reads " +
                          "sliding_window_pattern (6 when absent)");
  for (const char* k : {"sliding_window_pattern", "max_window_layers", "layer_types", "layers_block_type"})
    j.read.insert(k);
  j.read.insert("full_attention_interval");
  // Keys a family derives its list from only when none is saved (LFM2's full_attn_idxs,
  // Lfm2Config.__post_init__; ModernBERT's and AFMoE's global_attn_every_n_layers; Zamba's
  // attn_layer_period / offset, ZambaConfig.__post_init__): beside a saved list they decide nothing, in
  // transformers 5 too.
  if (!one_mask && j.has(list_key))
    for (const char* k :
         {"full_attn_idxs", "global_attn_every_n_layers", "attn_layer_period", "attn_layer_offset"})
      j.read.insert(k);
  if (m.hooks->check_types) m.hooks->check_types(j, m, types);
  if (m.rules->has(kLastLayerFull) && types.back() != "full_attention") {  // Gemma4TextConfig.__post_init__
    warnings.push_back("the last layer is " + types.back() +
                       ": Gemma 4 forces it to full_attention (configuration_gemma4.py)");
    types.back() = "full_attention";
  }
  return types;
}

}  // namespace posenc::detail
