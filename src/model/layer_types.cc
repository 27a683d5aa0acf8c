// src/model/layer_types.cc: the sliding window each family's config class fills, and each layer's type
// (full_attention, sliding_attention, chunked_attention, linear_attention, conv, hybrid, moe, mlp) as
// transformers 5.23 decides it: the config's layer_types, or the rule its config class (or modeling file)
// applies when layer_types is absent. Citations name the configuration_<type>.py lines of each rule.
#include <algorithm>
#include <string_view>
#include <nlohmann/json.hpp>

#include "src/model/document.h"
#include "src/model/parse.h"

namespace posenc::detail {
namespace {
// configuration_nemotron_h.py L171-177, L279-282: layers_block_type, else hybrid_override_pattern's
// characters (M mamba, E moe, * attention, - mlp), else the class default.
std::vector<std::string> nemotron_h_types(Obj& j) {
  if (!j.has("hybrid_override_pattern")) return {"linear_attention", "moe", "full_attention", "mlp"};
  const std::string pattern = j.str("hybrid_override_pattern");
  if (pattern.empty() || static_cast<int64_t>(pattern.size()) > kMaxModelLayers)
    fail(kOp, j.where, "hybrid_override_pattern has ", pattern.size(), " characters: must be 1 to ",
         kMaxModelLayers);
  std::vector<std::string> types;
  for (char c : pattern) {
    if (c == 'M')
      types.push_back("linear_attention");
    else if (c == 'E')
      types.push_back("moe");
    else if (c == '*')
      types.push_back("full_attention");
    else if (c == '-')
      types.push_back("mlp");
    else
      fail(kOp, j.where, "hybrid_override_pattern contains '", std::string(1, c),
           "': transformers 5 knows M (mamba), E (moe), * (attention), - (mlp)");
  }
  return types;
}

std::vector<std::string> default_layer_types(Obj& j, const Model& m, const std::vector<int>& use_rope,
                                             int64_t window) {
  const std::string& t = m.type;
  // deepseek_v32, glm_moe_dsa: ["indexed_attention"] * layers (configuration_deepseek_v32.py L137-139).
  std::vector<std::string> types(m.layers, t == "deepseek_v32" || t == "glm_moe_dsa" || t == "hy_v4"
                                               ? "indexed_attention"
                                               : "full_attention");
  // minimax_m3_vl_text: the legacy sparse_attention_config.sparse_attention_freq (1: an indexer layer),
  // else every layer full (configuration_minimax_m3_vl.py L141-146).
  if (t == "minimax_m3_vl_text" && j.has("sparse_attention_config") &&
      j.at("sparse_attention_config").is_object() &&
      has(j.at("sparse_attention_config"), "sparse_attention_freq")) {
    const json& f = j.at("sparse_attention_config").at("sparse_attention_freq");
    if (!f.is_array() || static_cast<int64_t>(f.size()) != m.layers)
      fail(kOp, j.where, "sparse_attention_config.sparse_attention_freq = ", json_excerpt(f),
           " is invalid: must give num_hidden_layers = ", m.layers, " entries");
    for (int64_t i = 0; i < m.layers; ++i) {
      const json& e = f.at(static_cast<size_t>(i));
      if (!e.is_number() && !e.is_boolean())
        fail(kOp, j.where, "sparse_attention_config.sparse_attention_freq contains ", e.dump(),
             ": must be 0 / 1");
      types[i] =
          (e.is_boolean() ? e.get<bool>() : e.get<double>() != 0) ? "minimax_m3_sparse" : "full_attention";
    }
    return types;
  }
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
  else if (t == "gemma3_text" && std::string_view(m.family->model_type) == "gemma3n_text")
    pattern(5);  // configuration_gemma3n.py L141-144: full iff (i + 1) % 5 == 0
  else if (t == "gemma3_text")
    pattern(period("sliding_window_pattern", 6));
  else if (t == "modernbert-decoder") {  // configuration_modernbert_decoder.py: full iff i % n == 0
    const int64_t n = period("global_attn_every_n_layers", 3);
    for (int64_t i = 0; i < m.layers; ++i) types[i] = i % n != 0 ? "sliding_attention" : "full_attention";
  } else if (t == "gemma4_text")
    pattern(6);  // configuration_gemma4.py: sliding_window_pattern = 6, fixed
  else if (t == "kolibri1")
    pattern(5);  // configuration_kolibri1.py: full iff (i + 1) % 5 == 0
  else if (t == "afmoe")
    pattern(period("global_attn_every_n_layers", 4));  // configuration_afmoe.py L107-111
  else if (t == "muse_glimmer_text")  // configuration_muse_glimmer.py: full iff (n - 1 - i) % 4 == 0
    for (int64_t i = 0; i < m.layers; ++i)
      types[i] = (m.layers - 1 - i) % 4 == 0 ? "full_attention" : "sliding_attention";
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
  } else if (t ==
             "bailing_hybrid") {  // configuration_bailing_hybrid.py L143-147: full every layer_group_size
    const int64_t group = period("layer_group_size", 6);
    for (int64_t i = 0; i < m.layers; ++i) types[i] = (i + 1) % group ? "linear_attention" : "full_attention";
  } else if (t == "mimo_v2_flash") {  // configuration_mimo_v2_flash.py L114-118: full on 0, 5, 11, 17, ...
    for (int64_t i = 0; i < m.layers; ++i)
      types[i] = i == 0 || (i + 1) % 6 == 0 ? "full_attention" : "sliding_attention";
  } else if (t == "cohere2_moe") {
    // configuration_cohere2_moe.py: the first first_k_dense_replace layers follow
    // prefix_dense_sliding_window_pattern (1: all full), the others sliding_window_pattern, counted anew.
    const int64_t dense = j.int_or("first_k_dense_replace", 0);
    if (dense < 0 || dense > m.layers)
      fail(kOp, j.where, "first_k_dense_replace = ", dense, " is invalid: must be in [0, ", m.layers, "]");
    const int64_t prefix = period("prefix_dense_sliding_window_pattern", 1);
    const int64_t rest = period("sliding_window_pattern", 4);
    for (int64_t i = 0; i < m.layers; ++i) {
      const int64_t k = i < dense ? i : i - dense;
      types[i] = (k + 1) % (i < dense ? prefix : rest) ? "sliding_attention" : "full_attention";
    }
  } else if (t == "granite_swa" || t == "granitemoe_swa") {  // configuration_granite_swa.py L105-108
    for (int64_t i = 0; i < m.layers; ++i) types[i] = i % 4 == 0 ? "full_attention" : "sliding_attention";
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
  } else if (t == "recurrent_gemma") {
    // configuration_recurrent_gemma.py L98-102: block_types repeated over the layers; "recurrent" is
    // the RG-LRU, any other entry a local (sliding) attention block.
    std::vector<std::string> blocks = {"recurrent", "recurrent", "attention"};
    if (j.has("block_types")) {
      blocks.clear();
      const json& b = j.at("block_types");
      if (!b.is_array() || b.empty()) fail(kOp, j.where, "block_types must be a non-empty list of strings");
      for (const json& e : b) {
        if (!e.is_string()) fail(kOp, j.where, "block_types contains ", e.dump(), ": must be strings");
        blocks.push_back(e.get<std::string>());
      }
    }
    for (int64_t i = 0; i < m.layers; ++i)
      types[i] = blocks[i % blocks.size()] == "recurrent" ? "linear_attention" : "sliding_attention";
  } else if (t == "minimax") {  // configuration_minimax.py L123-126: full on even layers
    for (int64_t i = 0; i < m.layers; ++i) types[i] = (i + 1) % 2 ? "full_attention" : "linear_attention";
  } else if (t == "olmo_hybrid") {  // configuration_olmo_hybrid.py L122-130: full iff i % 4 == 3, or the last
    for (int64_t i = 0; i < m.layers; ++i) types[i] = i % 4 == 3 ? "full_attention" : "linear_attention";
    if (m.layers < 4) types.back() = "full_attention";
  } else if (t == "lfm2") {
    // configuration_lfm2.py L82-89: full_attn_idxs (null: every layer) picks the attention layers, the others
    // are short convolutions; an index past the last layer selects nothing (`i in full_attn_idxs`).
    const json* idxs =
        j.has("full_attn_idxs") && !j.at("full_attn_idxs").is_null() ? &j.at("full_attn_idxs") : nullptr;
    if (idxs) {
      if (!idxs->is_array())
        fail(kOp, j.where, "full_attn_idxs = ", json_excerpt(*idxs),
             " is invalid: must be a list of layer indices");
      std::fill(types.begin(), types.end(), "conv");
      for (const json& e : *idxs) {
        if (!e.is_number_integer())
          fail(kOp, j.where, "full_attn_idxs contains ", e.dump(), ": must be layer indices");
        const int64_t i = e.get<int64_t>();
        if (i >= 0 && i < m.layers)
          types[i] = "full_attention";
        else
          m.warnings->push_back(j.where + "full_attn_idxs entry " + std::to_string(i) +
                                " is not a layer of the model: it selects nothing (as in transformers 5)");
      }
    }
  } else if (t == "lfm2_moe") {  // configuration_lfm2_moe.py L88-92: no default; the model cannot be built
    fail(kOp, j.where, "layer_types is missing: required for lfm2_moe (transformers 5 has no default ",
         "and fails to build the model without it)");
  } else if (t == "qwen4_exp_text") {  // configuration_qwen4_exp.py L173-179: full_attention_interval (4)
    const int64_t n = period("full_attention_interval", 4);
    for (int64_t i = 0; i < m.layers; ++i) types[i] = (i + 1) % n ? "linear_attention" : "indexed_attention";
  } else if (t == "glm5_next_text") {  // configuration_glm5_next.py L164-169: indexed iff i % 4 == 3
    for (int64_t i = 0; i < m.layers; ++i) types[i] = i % 4 == 3 ? "indexed_attention" : "linear_attention";
  } else if (t == "kimi_linear") {
    // configuration_kimi_linear.py L127-140: linear_attn_config's 1-based full_attn_layers / kda_layers
    // (both needed), else full on layers 4, 8, 12, ...
    const json* lac = j.has("linear_attn_config") ? &j.at("linear_attn_config") : nullptr;
    if (lac && !lac->is_object()) fail(kOp, j.where, "linear_attn_config must be an object");
    if (lac && lac->contains("full_attn_layers") && lac->contains("kda_layers")) {
      std::vector<std::string> given(m.layers);
      for (const char* key : {"full_attn_layers", "kda_layers"}) {
        Obj l{*lac, j.where + "linear_attn_config.", {}};
        for (int64_t one_based : l.integers(key, 1, m.layers))
          given[one_based - 1] = key[0] == 'f' ? "full_attention" : "linear_attention";
      }
      for (int64_t i = 0; i < m.layers; ++i)
        if (given[i].empty())
          fail(kOp, j.where, "linear_attn_config names no type for layer ", i + 1,
               " (1-based): full_attn_layers and kda_layers must cover every layer");
      return given;
    }
    for (int64_t i = 0; i < m.layers; ++i) types[i] = i && i % 4 == 0 ? "full_attention" : "linear_attention";
  } else if (t == "jamba") {  // configuration_jamba.py L108-118, L129-132
    const int64_t every = period("attn_layer_period", 8), offset = j.int_or("attn_layer_offset", 4);
    if (offset < 0 || offset >= every)
      fail(kOp, j.where, "attn_layer_offset = ", offset,
           " is invalid: must be in [0, attn_layer_period = ", every, ")");
    for (int64_t i = 0; i < m.layers; ++i)
      types[i] = i % every == offset ? "full_attention" : "linear_attention";
  } else if (t == "bamba") {  // configuration_bamba.py L96-101: attention at attn_layer_indices, else mamba
    types.assign(m.layers, "linear_attention");
    if (j.has("attn_layer_indices"))
      for (int64_t i : j.integers("attn_layer_indices", INT64_MIN / 2, INT64_MAX / 2))
        if (i >= 0 && i < m.layers) types[i] = "full_attention";  // others are ignored, as there
  } else if (t == "granitemoehybrid") {  // configuration_granitemoehybrid.py L116-117: all mamba
    types.assign(m.layers, "linear_attention");
  } else if (t == "falcon_h1") {  // configuration_falcon_h1.py L132-134: mamba and attention in every layer
    types.assign(m.layers, "hybrid");
  } else if (t == "zamba") {
    // configuration_zamba.py L103-111: layer 2 hybrid, then layer 3 + k hybrid iff k % period == offset.
    const int64_t every = period("attn_layer_period", 6), offset = j.int_or("attn_layer_offset", 4);
    if (m.layers < 3)
      fail(kOp, j.where, "num_hidden_layers = ", m.layers,
           " is invalid for zamba without layers_block_type: ", "its default pattern has 3 leading layers");
    types.assign(m.layers, "linear_attention");
    types[2] = "hybrid";
    for (int64_t k = 0; k + 3 < m.layers; ++k)
      if (k % every == offset) types[k + 3] = "hybrid";
  } else if (t == "zamba2") {  // configuration_zamba2.py L128-137: a fixed 54-layer default
    if (m.layers != 54)
      fail(kOp, j.where, "layers_block_type is missing: zamba2's default pattern has 54 layers, the config ",
           m.layers);
    types.assign(m.layers, "linear_attention");
    for (int64_t i : {6, 12, 18, 24, 30, 36, 42, 47, 51}) types[i] = "hybrid";
  } else if (t == "nemotron_h") {
    return nemotron_h_types(j);
  } else if (window > 0 && (t == "mistral" || t == "ministral" || t == "ministral3" || t == "mixtral" ||
                            t == "phi3" || t == "starcoder2" || t == "qwen3_moe" || t == "phimoe")) {
    // qwen3_moe has no layer_types: every layer gets sliding_window (modeling_qwen3_moe.py L148, L472).
    types.assign(m.layers, "sliding_attention");  // sliding mask on every layer when set
  }
  return types;
}
}  // namespace

int64_t sliding_window(Obj& j, const Model& m) {
  // HF's sliding_window: w keys including the current one (the same count as AttentionConfig::window).
  const std::string& t = m.type;
  int64_t window = 0;
  if (j.has("sliding_window"))
    window = j.integer("sliding_window");
  else if (!j.j.contains("sliding_window")) {
    // Config class defaults (sliding_window: int | None = 4096 in each configuration_*.py).
    if (t == "gemma2" || t == "vaultgemma" || t == "gemma3_text" || t == "cohere2" || t == "exaone4" ||
        t == "exaone_moe" || t == "olmo3" || t == "mistral" || t == "ministral" || t == "qwen3" ||
        t == "qwen2")
      window = 4096;
    if (t == "kolibri1" || t == "flint") window = 513;
    if (t == "dots1") window = 4096;
    if (t == "mellum") window = 1024;
    if (t == "lfm3") window = 256;
    if (t == "afmoe") window = 1024;
    if (t == "muse_glimmer_text") window = 2048;
    if (t == "gpt_oss") window = 128;
    if (t == "gemma4_text")
      window = std::string_view(m.family->model_type) == "gemma4_unified_text" ? 1024 : 512;
    if (std::string_view(m.family->model_type) == "gemma3n_text") window = 512;
    if (t == "cwm") window = 8192;
    if (t == "granite_swa" || t == "granitemoe_swa") window = 128;
    if (t == "cohere2_moe" || t == "cohere_compass_text") window = 4096;
    if (t == "mimo_v2_flash") window = 129;
    if (t == "ultrabert") window = 128;
  }
  // modernbert-decoder: sliding_window = local_attention // 2 ("only half of" ModernBERT's symmetric window),
  // unless the config gives sliding_window, which PreTrainedConfig.__post_init__ sets after it
  // (configuration_modernbert_decoder.py): the keys q - k < window, causal.
  if (t == "modernbert-decoder" && !j.has("sliding_window")) {
    if (j.j.contains("local_attention") && !j.has("local_attention"))
      fail(kOp, j.where,
           "local_attention = null is not supported for modernbert-decoder: transformers then sets ",
           "sliding_window = -1 on its sliding layers");
    window = j.int_or("local_attention", 128) / 2;
    if (window < 1) fail(kOp, j.where, "local_attention = ", window * 2, " is invalid: must be >= 2");
  }
  // modernbert (the encoder, modernbert-decoder's rules): its mask keeps |q - k| <= sliding_window =
  // local_attention // 2 (masking_utils.py sliding_window_bidirectional_overlay; a saved sliding_window
  // sets local_attention = 2 sliding_window, configuration_modernbert.py L159-167), and its attention
  // function gets sliding_window + 1 (modeling_modernbert.py L240-242): posenc's symmetric window
  // |q - k| < window is one more.
  if (t == "modernbert-decoder" && std::string_view(m.family->model_type) == "modernbert") window += 1;
  // gemma3_text with use_bidirectional_attention (EmbeddingGemma): __post_init__ halves the window,
  // sliding_window // 2 + 1, and the sliding layers keep |q - k| < it (configuration_gemma3.py L101-103,
  // modeling_gemma3.py _bidirectional_window_overlay): posenc's symmetric window, unchanged.
  if (std::string_view(m.family->model_type) == "gemma3_text" && window > 0 &&
      j.bool_or("use_bidirectional_attention", false))
    window = window / 2 + 1;
  // embedding_gemma2_text, openai_privacy_filter, ultrabert: bidirectional sliding layers keep |q - k| <=
  // sliding_window (masking_utils.py sliding_window_bidirectional_overlay) and their attention gets
  // sliding_window + 1 (modeling_embedding_gemma2.py L322-323, modeling_openai_privacy_filter.py L193,
  // modeling_ultrabert.py L223-225): posenc's |q - k| < sliding_window + 1.
  if (const std::string_view own = m.family->model_type;
      own == "embedding_gemma2_text" || own == "openai_privacy_filter" || own == "ultrabert") {
    if (window <= 0)
      fail(kOp, j.where, "sliding_window = ", json_excerpt(j.j.at("sliding_window")),
           " is not supported for ", own,
           ": its sliding layers keep the keys within sliding_window of the query (it must be > 0)");
    window += 1;
  }
  j.read.insert("local_attention");
  // mimo_v2_flash: SGLang's sliding_window_size counts the previous keys, so the window is one more
  // (configuration_mimo_v2_flash.py L131-133).
  if (t == "mimo_v2_flash" && j.has("sliding_window_size")) window = j.integer("sliding_window_size") + 1;
  if (t == "recurrent_gemma" && !j.has("sliding_window"))  // attribute_map sliding_window ->
    window = j.int_or("attention_window_size", 2048);      // attention_window_size (L57, L65)
  if (t == "gpt_neo") {
    // Local layers keep the window_size latest keys, the query's own included: bias = tril ^
    // tril(-window_size) (modeling_gpt_neo.py L58-67), the same count as HF's sliding_window.
    window = j.int_or("window_size", 256);
    if (window < 1) fail(kOp, j.where, "window_size = ", window, " is invalid: must be >= 1");
    // GPT-J's development fork (mesh-transformer-jax) saved GPT-Neo configs with rotary = true;
    // transformers' GPT-Neo has no RoPE and ignores the key, so neither reading is the model's.
    if (j.bool_or("rotary", false))
      fail(kOp, j.where,
           "model_type 'gpt_neo' is not supported with rotary = true: this is a GPT-J fork saved as "
           "gpt_neo, whose RoPE transformers' GPTNeo "
           "ignores (it runs learned positions). Convert it to model_type \"gptj\" or pass a RopeConfig");
  }
  j.read.insert("sliding_window");
  // Qwen3-Omni's text attention passes sliding_window=None and its model builds causal masks only
  // (modeling_qwen3_omni_moe.py L1460, L1696): a window in the config is never applied.
  if (std::string_view(m.family->model_type) == "qwen3_omni_moe_text" && window > 0) {
    m.warnings->push_back(j.where + "sliding_window = " + std::to_string(window) +
                          " is ignored by qwen3_omni_moe_text: transformers 5 never applies it");
    window = 0;
  }
  if (window < 0) fail(kOp, j.where, "sliding_window = ", window, " is invalid: must be >= 0");
  // These families switch RoPE on `sliding_window is None` (exaone4 rule) or on a truthy window
  // (cohere2 rule, below): an explicit 0 is neither posenc's "no window" (null) nor a usable window.
  if (window == 0 && j.has("sliding_window") &&
      (t == "exaone4" || t == "exaone_moe" || t == "kolibri1" || t == "cohere2" || t == "flint" ||
       t == "cohere2_moe"))
    fail(kOp, j.where, "sliding_window = 0 is invalid for model_type '", t,
         "': its RoPE rule tells 0 from null (no window); give null or a window >= 1");
  if (t == "qwen2" || t == "qwen2_moe" || t == "qwen3" || t == "qwen3_moe" || t == "qwen2_vl" ||
      t == "qwen2_5_vl") {
    if (!j.bool_or("use_sliding_window", false))
      window = 0;  // configuration_qwen2.py: sw if use_sliding_window
  }
  j.read.insert("use_sliding_window");
  return window;
}

// The layer types each family's model accepts in a given list (others fail in transformers 5, or, for
// zamba, silently become mamba-only layers).
void check_family_layer_types(const std::string& type, const std::vector<std::string>& types,
                              const char* key) {
  std::vector<std::string> allowed;
  if (type == "granitemoehybrid" || type == "minimax" || type == "olmo_hybrid" || type == "kimi_linear" ||
      type == "bailing_hybrid")
    allowed = {"full_attention", "linear_attention"};  // the masks each model builds
  else if (type == "lfm2_moe")
    allowed = {"full_attention", "conv"};  // modeling_lfm2_moe.py L603-606
  else if (type == "zamba" || type == "zamba2")
    allowed = {"hybrid", "linear_attention"};  // anything but "hybrid" builds a mamba-only layer
  else if (type == "nemotron_h")
    allowed = {"full_attention", "linear_attention", "moe", "mlp"};  // configuration_nemotron_h.py L215
  else if (type == "deepseek_v32" || type == "glm_moe_dsa" || type == "hy_v4")
    allowed = {"indexed_attention"};  // every layer has its indexer (modeling_deepseek_v32.py L381)
  else if (type == "dots3_note_text")
    // the masks its model builds (modeling_dots3_note.py L755-759)
    allowed = {"full_attention", "sliding_attention", "indexed_attention"};
  else if (type == "glm5_next_text" || type == "qwen4_exp_text")
    allowed = {"indexed_attention", "linear_attention"};  // the two masks its model builds
  else if (type == "minimax_m3_vl_text")
    allowed = {"full_attention",
               "minimax_m3_sparse"};  // one causal mask for both (modeling_minimax_m3_vl.py)
  else
    allowed = {"full_attention", "sliding_attention", "chunked_attention", "linear_attention", "conv"};
  for (const std::string& t : types)
    if (std::find(allowed.begin(), allowed.end(), t) == allowed.end())
      fail(kOp, key, " contains \"", t, "\", which model_type '", type, "' does not build in transformers 5");
}

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
  // openai_privacy_filter: one sliding window mask for every layer (modeling_openai_privacy_filter.py L467);
  // its config class has no layer_types.
  if (std::string_view(m.family->model_type) == "openai_privacy_filter") {
    if (j.has("layer_types"))
      warnings.push_back(
          "layer_types is ignored by openai_privacy_filter in transformers 5: every layer slides");
    j.read.insert("layer_types");
    return std::vector<std::string>(static_cast<size_t>(m.layers), "sliding_attention");
  }
  // Families whose per-layer list is a read-only property: a saved list cannot be loaded by
  // transformers 5 (AttributeError: property ... has no setter).
  const bool list_is_property =
      type == "jamba" || type == "bamba" || type == "falcon_h1" || type == "recurrent_gemma";
  for (const char* key : {"layer_types", "layers_block_type"})
    if (list_is_property && j.has(key))
      fail(kOp, j.where, key, " is given, but ", type,
           " derives its layer list (a read-only property in transformers 5, which fails to load this "
           "config)");
  // attribute_map layer_types <-> layers_block_type (granitemoehybrid, nemotron_h, zamba, zamba2).
  const char* list_key = j.has("layer_types") ? "layer_types" : "layers_block_type";
  if (type == "nemotron_h" && j.has("layers_block_type")) list_key = "layers_block_type";
  if (!one_mask && j.has(list_key)) {
    const json& lt = j.at(list_key);
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != m.layers)
      fail(kOp, j.where, "layer_types must be a list of num_hidden_layers = ", m.layers, " strings");
    for (const json& e : lt) {
      if (!e.is_string()) fail(kOp, j.where, "layer_types contains ", e.dump(), ": must be strings");
      std::string s = e.get<std::string>();
      // Qwen4ExpTextConfig rewrites full_attention before the legacy remap: "attention" then fails there.
      if ((type == "qwen4_exp_text" || type == "glm5_next_text") && s == "attention")
        fail(kOp, j.where, list_key, " contains \"attention\", which ", type, " rejects (transformers 5.23: ",
             "its full_attention rewrite runs before the legacy names' remap)");
      if (s == "attention") s = "full_attention";  // configuration_utils.py L94-99 legacy names
      if (s == "mamba") s = "linear_attention";
      if (s == "deepseek_sparse_attention" || s == "qwen_sparse_attention") s = "indexed_attention";
      // configuration_glm5_next.py L170-172, configuration_qwen4_exp.py L180-183
      if ((type == "glm5_next_text" || type == "qwen4_exp_text") && s == "full_attention")
        s = "indexed_attention";
      if (s != "full_attention" && s != "sliding_attention" && s != "chunked_attention" &&
          s != "linear_attention" && s != "conv" && s != "hybrid" && s != "moe" && s != "mlp" &&
          s != "indexed_attention" && s != "minimax_m3_sparse")
        fail(kOp, j.where, list_key, " contains \"", s,
             "\": posenc knows full_attention, sliding_attention, "
             "chunked_attention, linear_attention, conv, hybrid, moe, mlp, indexed_attention, "
             "minimax_m3_sparse");
      types.push_back(s);
    }
    check_family_layer_types(type, types, list_key);
  } else {
    types = default_layer_types(j, m, use_rope, window);
  }
  // Gemma3TextConfig.to_dict saves the private _sliding_window_pattern, which __post_init__ overwrites
  // with sliding_window_pattern (6 if absent) on loading (configuration_gemma3.py L105): with layer_types
  // saved beside it, it decides nothing.
  if (j.has("_sliding_window_pattern") && !j.has("layer_types") && !j.has("sliding_window_pattern"))
    m.warnings->push_back(j.where + "_sliding_window_pattern is ignored: transformers 5 reads " +
                          "sliding_window_pattern (6 when absent)");
  for (const char* k : {"sliding_window_pattern", "max_window_layers", "layer_types", "layers_block_type"})
    j.read.insert(k);
  j.read.insert("full_attention_interval");
  // Keys a family derives its list from only when none is saved (LFM2's full_attn_idxs, configuration_lfm2.py
  // L82; ModernBERT's and AFMoE's global_attn_every_n_layers; Zamba's attn_layer_period / offset,
  // configuration_zamba.py L103-109): beside a saved list they decide nothing, in transformers 5 too.
  if (!one_mask && j.has(list_key))
    for (const char* k :
         {"full_attn_idxs", "global_attn_every_n_layers", "attn_layer_period", "attn_layer_offset"})
      j.read.insert(k);
  if (type == "mimo_v2_flash" && j.has("hybrid_layer_pattern")) {
    // The checkpoint's SGLang pattern (0 = full attention), which transformers 5 does not read: it must
    // agree with the layer types transformers uses.
    const std::vector<int64_t> pattern = j.integers("hybrid_layer_pattern", 0, 1);
    for (int64_t i = 0; i < m.layers; ++i)
      if (static_cast<int64_t>(pattern.size()) != m.layers ||
          (pattern[i] == 0) != (types[i] == "full_attention"))
        fail(kOp, j.where, "hybrid_layer_pattern disagrees with the layer types transformers 5 uses (layer ",
             i, " is ", types[i], "): ambiguous");
  }
  if (type == "gemma4_text" && types.back() != "full_attention") {  // Gemma4TextConfig.__post_init__
    warnings.push_back("the last layer is " + types.back() +
                       ": Gemma 4 forces it to full_attention (configuration_gemma4.py)");
    types.back() = "full_attention";
  }
  return types;
}

int64_t nemotron_h_layer_count(Obj& j) {
  if (j.has("layers_block_type") || j.has("layer_types")) {
    const json& l = j.at(j.has("layers_block_type") ? "layers_block_type" : "layer_types");
    if (!l.is_array() || l.empty())
      fail(kOp, j.where, "layers_block_type must be a non-empty list of strings");
    return static_cast<int64_t>(l.size());
  }
  return static_cast<int64_t>(nemotron_h_types(j).size());
}

}  // namespace posenc::detail
