// src/model/hooks.cc: the code of the families whose rules are more than their row (src/model/hooks.h),
// one section per family in the order of the table at the end, each citing the transformers 5.23 lines it
// follows. The reader calls a family's hooks at its stages; everything else about a family is its row.
#include "src/model/hooks.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "src/model/document.h"

namespace posenc::detail {
namespace {
using Types = std::vector<std::string>;

// ---- gpt_neo
// GPTNeoConfig.expand_attention_types_params: [[["global", "local"], 12]] by default, each entry's list
// repeated its count times (configuration_gpt_neo.py L74-76, L92-97); the config's own attention_layers is
// recomputed from it and must have num_layers entries (L81).
Types gpt_neo_layer_types(Obj& j, const Model& m, const std::vector<int>&, int64_t) {
  const json default_types = json::parse(R"([[["global", "local"], 12]])");
  const json& given = j.has("attention_types") ? j.at("attention_types") : default_types;
  Types expanded;
  const auto malformed = [&] {
    fail(kOp, j.where, "attention_types = ", json_excerpt(given),
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

// Local layers keep the window_size latest keys, the query's own included: bias = tril ^ tril(-window_size)
// (modeling_gpt_neo.py L58-67), the same count as HF's sliding_window.
int64_t gpt_neo_window(Obj& j, const Model&, int64_t) {
  const int64_t window = j.int_or("window_size", 256);
  if (window < 1) fail(kOp, j.where, "window_size = ", window, " is invalid: must be >= 1");
  // GPT-J's development fork (mesh-transformer-jax) saved GPT-Neo configs with rotary = true;
  // transformers' GPT-Neo has no RoPE and ignores the key, so neither reading is the model's.
  if (j.bool_or("rotary", false))
    fail(kOp, j.where,
         "model_type 'gpt_neo' is not supported with rotary = true: this is a GPT-J fork saved as "
         "gpt_neo, whose RoPE transformers' GPTNeo "
         "ignores (it runs learned positions). Convert it to model_type \"gptj\" or pass a RopeConfig");
  return window;
}

// ---- minimax_m3_vl_text
// The legacy sparse_attention_config.sparse_attention_freq (1: an indexer layer), else every layer full
// (configuration_minimax_m3_vl.py L141-146).
Types minimax_m3_layer_types(Obj& j, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers, "full_attention");
  if (!(j.has("sparse_attention_config") && j.at("sparse_attention_config").is_object() &&
        has(j.at("sparse_attention_config"), "sparse_attention_freq")))
    return types;
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

// ---- muse_glimmer_text (and muse_spark_text)
// configuration_muse_glimmer.py: full iff (n - 1 - i) % 4 == 0.
Types muse_layer_types(Obj&, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers);
  for (int64_t i = 0; i < m.layers; ++i)
    types[i] = (m.layers - 1 - i) % 4 == 0 ? "full_attention" : "sliding_attention";
  return types;
}

// ---- flint
// configuration_flint.py L104-109: full on layers 0, 1, every i % 4 == 1 and the last.
Types flint_layer_types(Obj&, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers);
  for (int64_t i = 0; i < m.layers; ++i)
    types[i] = i < 2 || i % 4 == 1 || i == m.layers - 1 ? "full_attention" : "sliding_attention";
  return types;
}

// ---- lfm3
// configuration_lfm3.py: full iff i % 4 == 2, sliding iff i % 4 == 0 and i > 0, else a short convolution.
Types lfm3_layer_types(Obj&, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers);
  for (int64_t i = 0; i < m.layers; ++i)
    types[i] = i % 4 == 2 ? "full_attention" : i % 4 == 0 && i > 0 ? "sliding_attention" : "conv";
  return types;
}

// ---- mimo_v2_flash
// configuration_mimo_v2_flash.py L114-118: full on 0, 5, 11, 17, ...
Types mimo_layer_types(Obj&, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers);
  for (int64_t i = 0; i < m.layers; ++i)
    types[i] = i == 0 || (i + 1) % 6 == 0 ? "full_attention" : "sliding_attention";
  return types;
}

// SGLang's sliding_window_size counts the previous keys, so the window is one more
// (configuration_mimo_v2_flash.py L131-133).
int64_t mimo_window(Obj& j, const Model&, int64_t window) {
  return j.has("sliding_window_size") ? j.integer("sliding_window_size") + 1 : window;
}

// The checkpoint's SGLang pattern (0 = full attention), which transformers 5 does not read: it must agree
// with the layer types transformers uses.
void mimo_check_types(Obj& j, const Model& m, const Types& types) {
  if (!j.has("hybrid_layer_pattern")) return;
  const std::vector<int64_t> pattern = j.integers("hybrid_layer_pattern", 0, 1);
  for (int64_t i = 0; i < m.layers; ++i)
    if (static_cast<int64_t>(pattern.size()) != m.layers ||
        (pattern[i] == 0) != (types[i] == "full_attention"))
      fail(kOp, j.where, "hybrid_layer_pattern disagrees with the layer types transformers 5 uses (layer ", i,
           " is ", types[i], "): ambiguous");
}

// ---- cohere2_moe
// configuration_cohere2_moe.py: the first first_k_dense_replace layers follow
// prefix_dense_sliding_window_pattern (1: all full), the others sliding_window_pattern, counted anew.
Types cohere2_moe_layer_types(Obj& j, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers);
  const int64_t dense = j.int_or("first_k_dense_replace", 0);
  if (dense < 0 || dense > m.layers)
    fail(kOp, j.where, "first_k_dense_replace = ", dense, " is invalid: must be in [0, ", m.layers, "]");
  const int64_t prefix = layer_period(j, "prefix_dense_sliding_window_pattern", 1);
  const int64_t rest = layer_period(j, "sliding_window_pattern", 4);
  for (int64_t i = 0; i < m.layers; ++i) {
    const int64_t k = i < dense ? i : i - dense;
    types[i] = (k + 1) % (i < dense ? prefix : rest) ? "sliding_attention" : "full_attention";
  }
  return types;
}

// ---- llama4_text
// Chunked attention on the RoPE layers, full on the NoPE ones.
Types llama4_layer_types(Obj&, const Model& m, const std::vector<int>& use_rope, int64_t) {
  Types types(m.layers);
  for (int64_t i = 0; i < m.layers; ++i) types[i] = use_rope[i] ? "chunked_attention" : "full_attention";
  return types;
}

// ---- smollm3
// Sliding on the NoPE layers when use_sliding_window and a window are set.
Types smollm3_layer_types(Obj& j, const Model& m, const std::vector<int>& use_rope, int64_t window) {
  Types types(m.layers, "full_attention");
  for (int64_t i = 0; i < m.layers; ++i)
    if (j.bool_or("use_sliding_window", false) && window > 0 && !use_rope[i]) types[i] = "sliding_attention";
  return types;
}

// ---- qwen2_moe
// configuration_qwen2_moe.py L114-119: odd-numbered layers below max_window_layers slide.
Types qwen2_moe_layer_types(Obj& j, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers, "full_attention");
  const int64_t mwl = j.int_or("max_window_layers", 28);
  for (int64_t i = 0; i < m.layers; ++i)
    if ((i + 1) % 2 && i < mwl && j.bool_or("use_sliding_window", false)) types[i] = "sliding_attention";
  return types;
}

// ---- recurrent_gemma
// configuration_recurrent_gemma.py L98-102: block_types repeated over the layers; "recurrent" is the RG-LRU,
// any other entry a local (sliding) attention block.
Types recurrent_gemma_layer_types(Obj& j, const Model& m, const std::vector<int>&, int64_t) {
  Types blocks = {"recurrent", "recurrent", "attention"};
  if (j.has("block_types")) {
    blocks.clear();
    const json& b = j.at("block_types");
    if (!b.is_array() || b.empty()) fail(kOp, j.where, "block_types must be a non-empty list of strings");
    for (const json& e : b) {
      if (!e.is_string()) fail(kOp, j.where, "block_types contains ", e.dump(), ": must be strings");
      blocks.push_back(e.get<std::string>());
    }
  }
  Types types(m.layers);
  for (int64_t i = 0; i < m.layers; ++i)
    types[i] = blocks[i % blocks.size()] == "recurrent" ? "linear_attention" : "sliding_attention";
  return types;
}

// attribute_map sliding_window -> attention_window_size (configuration_recurrent_gemma.py L57, L65).
int64_t recurrent_gemma_window(Obj& j, const Model&, int64_t window) {
  return j.has("sliding_window") ? window : j.int_or("attention_window_size", 2048);
}

// ---- minimax
// configuration_minimax.py L123-126: full on even layers.
Types minimax_layer_types(Obj&, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers);
  for (int64_t i = 0; i < m.layers; ++i) types[i] = (i + 1) % 2 ? "full_attention" : "linear_attention";
  return types;
}

// ---- olmo_hybrid
// configuration_olmo_hybrid.py L122-130: full iff i % 4 == 3, or the last.
Types olmo_hybrid_layer_types(Obj&, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers);
  for (int64_t i = 0; i < m.layers; ++i) types[i] = i % 4 == 3 ? "full_attention" : "linear_attention";
  if (m.layers < 4) types.back() = "full_attention";
  return types;
}

// ---- lfm2
// configuration_lfm2.py L82-89: full_attn_idxs (null: every layer) picks the attention layers, the others
// are short convolutions; an index past the last layer selects nothing (`i in full_attn_idxs`).
Types lfm2_layer_types(Obj& j, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers, "full_attention");
  const json* idxs =
      j.has("full_attn_idxs") && !j.at("full_attn_idxs").is_null() ? &j.at("full_attn_idxs") : nullptr;
  if (!idxs) return types;
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
  return types;
}

// ---- lfm2_moe
// configuration_lfm2_moe.py L88-92: no default; the model cannot be built.
Types lfm2_moe_layer_types(Obj& j, const Model&, const std::vector<int>&, int64_t) {
  fail(kOp, j.where, "layer_types is missing: required for lfm2_moe (transformers 5 has no default ",
       "and fails to build the model without it)");
}

// ---- glm5_next_text
// configuration_glm5_next.py L164-169: indexed iff i % 4 == 3.
Types glm5_next_layer_types(Obj&, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers);
  for (int64_t i = 0; i < m.layers; ++i) types[i] = i % 4 == 3 ? "indexed_attention" : "linear_attention";
  return types;
}

// ---- kimi_linear
// configuration_kimi_linear.py L127-140: linear_attn_config's 1-based full_attn_layers / kda_layers (both
// needed), else full on layers 4, 8, 12, ...
Types kimi_linear_layer_types(Obj& j, const Model& m, const std::vector<int>&, int64_t) {
  const json* lac = j.has("linear_attn_config") ? &j.at("linear_attn_config") : nullptr;
  if (lac && !lac->is_object()) fail(kOp, j.where, "linear_attn_config must be an object");
  if (lac && lac->contains("full_attn_layers") && lac->contains("kda_layers")) {
    Types given(m.layers);
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
  Types types(m.layers);
  for (int64_t i = 0; i < m.layers; ++i) types[i] = i && i % 4 == 0 ? "full_attention" : "linear_attention";
  return types;
}

// ---- jamba
// configuration_jamba.py L108-118, L129-132.
Types jamba_layer_types(Obj& j, const Model& m, const std::vector<int>&, int64_t) {
  const int64_t every = layer_period(j, "attn_layer_period", 8), offset = j.int_or("attn_layer_offset", 4);
  if (offset < 0 || offset >= every)
    fail(kOp, j.where, "attn_layer_offset = ", offset,
         " is invalid: must be in [0, attn_layer_period = ", every, ")");
  Types types(m.layers);
  for (int64_t i = 0; i < m.layers; ++i)
    types[i] = i % every == offset ? "full_attention" : "linear_attention";
  return types;
}

// ---- bamba
// configuration_bamba.py L96-101: attention at attn_layer_indices, else mamba.
Types bamba_layer_types(Obj& j, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers, "linear_attention");
  if (j.has("attn_layer_indices"))
    for (int64_t i : j.integers("attn_layer_indices", INT64_MIN / 2, INT64_MAX / 2))
      if (i >= 0 && i < m.layers) types[i] = "full_attention";  // others are ignored, as there
  return types;
}

// ---- zamba
// configuration_zamba.py L103-111: layer 2 hybrid, then layer 3 + k hybrid iff k % period == offset.
Types zamba_layer_types(Obj& j, const Model& m, const std::vector<int>&, int64_t) {
  const int64_t every = layer_period(j, "attn_layer_period", 6), offset = j.int_or("attn_layer_offset", 4);
  if (m.layers < 3)
    fail(kOp, j.where, "num_hidden_layers = ", m.layers,
         " is invalid for zamba without layers_block_type: ", "its default pattern has 3 leading layers");
  Types types(m.layers, "linear_attention");
  types[2] = "hybrid";
  for (int64_t k = 0; k + 3 < m.layers; ++k)
    if (k % every == offset) types[k + 3] = "hybrid";
  return types;
}

// ---- zamba2
// configuration_zamba2.py L128-137: a fixed 54-layer default.
Types zamba2_layer_types(Obj& j, const Model& m, const std::vector<int>&, int64_t) {
  if (m.layers != 54)
    fail(kOp, j.where, "layers_block_type is missing: zamba2's default pattern has 54 layers, the config ",
         m.layers);
  Types types(m.layers, "linear_attention");
  for (int64_t i : {6, 12, 18, 24, 30, 36, 42, 47, 51}) types[i] = "hybrid";
  return types;
}

// ---- nemotron_h
// configuration_nemotron_h.py L171-177, L279-282: layers_block_type, else hybrid_override_pattern's
// characters (M mamba, E moe, * attention, - mlp), else the class default.
Types nemotron_h_types(Obj& j) {
  if (!j.has("hybrid_override_pattern")) return {"linear_attention", "moe", "full_attention", "mlp"};
  const std::string pattern = j.str("hybrid_override_pattern");
  if (pattern.empty() || static_cast<int64_t>(pattern.size()) > kMaxModelLayers)
    fail(kOp, j.where, "hybrid_override_pattern has ", pattern.size(), " characters: must be 1 to ",
         kMaxModelLayers);
  Types types;
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

Types nemotron_h_layer_types(Obj& j, const Model&, const std::vector<int>&, int64_t) {
  return nemotron_h_types(j);
}

// ---- modernbert-decoder (and modernbert)
// sliding_window = local_attention // 2 ("only half of" ModernBERT's symmetric window), unless the config
// gives sliding_window, which PreTrainedConfig.__post_init__ sets after it
// (configuration_modernbert_decoder.py): the keys q - k < window, causal.
int64_t modernbert_window(Obj& j, const Model&, int64_t window) {
  if (j.has("sliding_window")) return window;
  if (j.j.contains("local_attention") && !j.has("local_attention"))
    fail(kOp, j.where,
         "local_attention = null is not supported for modernbert-decoder: transformers then sets ",
         "sliding_window = -1 on its sliding layers");
  window = j.int_or("local_attention", 128) / 2;
  if (window < 1) fail(kOp, j.where, "local_attention = ", window * 2, " is invalid: must be >= 2");
  return window;
}

// clang-format off
const FamilyHooks kHooks[] = {
  {.model_type = "gpt_neo", .window = gpt_neo_window, .layer_types = gpt_neo_layer_types},
  {.model_type = "minimax_m3_vl_text", .layer_types = minimax_m3_layer_types},
  {.model_type = "muse_glimmer_text", .layer_types = muse_layer_types},
  {.model_type = "flint", .layer_types = flint_layer_types},
  {.model_type = "lfm3", .layer_types = lfm3_layer_types},
  {.model_type = "mimo_v2_flash", .window = mimo_window, .layer_types = mimo_layer_types,
   .check_types = mimo_check_types},
  {.model_type = "cohere2_moe", .layer_types = cohere2_moe_layer_types},
  {.model_type = "llama4_text", .layer_types = llama4_layer_types},
  {.model_type = "smollm3", .layer_types = smollm3_layer_types},
  {.model_type = "qwen2_moe", .layer_types = qwen2_moe_layer_types},
  {.model_type = "recurrent_gemma", .window = recurrent_gemma_window,
   .layer_types = recurrent_gemma_layer_types},
  {.model_type = "minimax", .layer_types = minimax_layer_types},
  {.model_type = "olmo_hybrid", .layer_types = olmo_hybrid_layer_types},
  {.model_type = "lfm2", .layer_types = lfm2_layer_types},
  {.model_type = "lfm2_moe", .layer_types = lfm2_moe_layer_types},
  {.model_type = "glm5_next_text", .layer_types = glm5_next_layer_types},
  {.model_type = "kimi_linear", .layer_types = kimi_linear_layer_types},
  {.model_type = "jamba", .layer_types = jamba_layer_types},
  {.model_type = "bamba", .layer_types = bamba_layer_types},
  {.model_type = "zamba", .layer_types = zamba_layer_types},
  {.model_type = "zamba2", .layer_types = zamba2_layer_types},
  {.model_type = "nemotron_h", .layer_types = nemotron_h_layer_types},
  {.model_type = "modernbert-decoder", .window = modernbert_window},
};
// clang-format on

const FamilyHooks* find_hooks(std::string_view model_type) {
  for (const FamilyHooks& h : kHooks)
    if (model_type == h.model_type) return &h;
  return nullptr;
}
}  // namespace

int64_t nemotron_h_layer_count(Obj& j) {
  if (j.has("layers_block_type") || j.has("layer_types")) {
    const json& l = j.at(j.has("layers_block_type") ? "layers_block_type" : "layer_types");
    if (!l.is_array() || l.empty())
      fail(kOp, j.where, "layers_block_type must be a non-empty list of strings");
    return static_cast<int64_t>(l.size());
  }
  return static_cast<int64_t>(nemotron_h_types(j).size());
}

FamilyHooks family_hooks(const Family& own, const Family& rules) {
  static const FamilyHooks kNone{};
  const FamilyHooks* mine = find_hooks(own.model_type);
  const FamilyHooks* theirs = find_hooks(rules.model_type);
  const FamilyHooks& a = mine ? *mine : kNone;
  const FamilyHooks& b = theirs ? *theirs : kNone;
  FamilyHooks h;
  h.model_type = own.model_type;
  // Each stage: the model's own hook, else its rules family's.
  auto pick = [](auto mine_hook, auto rules_hook) { return mine_hook ? mine_hook : rules_hook; };
  h.resolve = pick(a.resolve, b.resolve);
  h.sizes = pick(a.sizes, b.sizes);
  h.plan = pick(a.plan, b.plan);
  h.tables = pick(a.tables, b.tables);
  h.use_rope = pick(a.use_rope, b.use_rope);
  h.window = pick(a.window, b.window);
  h.layer_types = pick(a.layer_types, b.layer_types);
  h.check_types = pick(a.check_types, b.check_types);
  h.rope_off = pick(a.rope_off, b.rope_off);
  h.rope_base = pick(a.rope_base, b.rope_base);
  h.rope_keys = pick(a.rope_keys, b.rope_keys);
  h.rope_dicts = pick(a.rope_dicts, b.rope_dicts);
  h.flat_rope = pick(a.flat_rope, b.flat_rope);
  h.rope_checks = pick(a.rope_checks, b.rope_checks);
  h.scale = pick(a.scale, b.scale);
  h.attention = pick(a.attention, b.attention);
  h.layers = pick(a.layers, b.layers);
  h.finish = pick(a.finish, b.finish);
  return h;
}

}  // namespace posenc::detail
