// src/model/hooks.cc: the code of the families whose rules are more than their row (src/model/hooks.h):
// one section per family, in the order of the table at the end, each citing the transformers 5.23 lines it
// follows. The reader calls a family's hooks at its stages; everything else about a family is its row.
#include "src/model/hooks.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "src/model/document.h"

namespace posenc::detail {
namespace {
using Types = std::vector<std::string>;

// ---- zaya
// Its plan names the layer types back as the config's (hybrid, hybrid_sliding; src/model/zaya.cc).
void zaya_finish(Reading& r) {
  for (LayerPlan& p : r.out.layers) p.layer_type = zaya_layer_type(p.layer_type);
}

// ---- nemotron_h
// configuration_nemotron_h.py NemotronHConfig.__post_init__ and _pattern_to_list: layers_block_type, else
// hybrid_override_pattern's characters (M mamba, E moe, * attention, - mlp), else the class default.
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

// nemotron_h's layer count: len(layers_block_type), else len(hybrid_override_pattern), else 4.
int64_t nemotron_h_layer_count(Obj& j) {
  if (j.has("layers_block_type") || j.has("layer_types")) {
    const json& l = j.at(j.has("layers_block_type") ? "layers_block_type" : "layer_types");
    if (!l.is_array() || l.empty())
      fail(kOp, j.where, "layers_block_type must be a non-empty list of strings");
    return static_cast<int64_t>(l.size());
  }
  return static_cast<int64_t>(nemotron_h_types(j).size());
}

// configuration_nemotron_h.py NemotronHConfig.__post_init__ and its num_hidden_layers property:
// num_hidden_layers is len(layers_block_type) (or of hybrid_override_pattern); a different given value is
// only logged.
void nemotron_h_sizes(Reading& r) {
  const int64_t counted = nemotron_h_layer_count(r.j);
  if (r.j.has("num_hidden_layers") && r.m.layers != counted)
    r.out.warnings.push_back("num_hidden_layers = " + std::to_string(r.m.layers) + " is replaced by the " +
                             std::to_string(counted) +
                             " layers of the layer pattern (configuration_nemotron_h.py)");
  r.m.layers = counted;
}

// ---- xlstm
// xLSTM builds num_blocks blocks whatever num_hidden_layers says (configuration_xlstm.py
// xLSTMConfig.__post_init__).
void xlstm_sizes(Reading& r) {
  Obj& j = r.j;
  if (!j.has("num_blocks")) return;
  const int64_t blocks = j.integer("num_blocks");
  if (j.has("num_hidden_layers") && j.integer("num_hidden_layers") != blocks)
    r.out.warnings.push_back("num_hidden_layers = " + std::to_string(j.integer("num_hidden_layers")) +
                             " is not the " + std::to_string(blocks) + " blocks xlstm builds (num_blocks)");
  r.m.layers = blocks;
}

// ---- longcat_flash
// configuration_longcat_flash.py: num_hidden_layers is 2 * num_layers (a property: a saved num_hidden_layers
// sets num_layers = value // 2); each decoder layer runs two attention sublayers, planned as attention layers
// 2i and 2i + 1 (modeling_longcat_flash.py LongcatFlashDecoderLayer.__init__).
void longcat_sizes(Reading& r) {
  Obj& j = r.j;
  r.m.layers = j.has("num_layers")          ? 2 * j.integer("num_layers")
               : j.has("num_hidden_layers") ? 2 * (j.integer("num_hidden_layers") / 2)
                                            : 56;
}

// ---- jetmoe
// configuration_jetmoe.py JetMoeConfig.__post_init__: num_attention_heads = num_key_value_heads *
// num_experts_per_tok, always (a given value is overwritten); head_dim is kv_channels (attribute_map,
// HeadRule::kv_channels), 128 by default.
void jetmoe_sizes(Reading& r) {
  Obj& j = r.j;
  const int64_t derived = j.int_or("num_key_value_heads", 16) * j.int_or("num_experts_per_tok", 2);
  if (j.has("num_attention_heads") && j.integer("num_attention_heads") != derived)
    r.out.warnings.push_back("num_attention_heads = " + std::to_string(j.integer("num_attention_heads")) +
                             " is replaced by num_key_value_heads * num_experts_per_tok = " +
                             std::to_string(derived) + " (configuration_jetmoe.py)");
  r.m.heads = derived;
}

// ---- nanochat
// nanochat's own export (its repository's configuration_nanochat.py, through auto_map) writes n_layer,
// n_head, n_kv_head, n_embd, sequence_len and window_pattern (sliding-window layers): transformers 5's
// NanoChatConfig has no attribute_map for them (configuration_nanochat.py) and would build its class
// defaults, and the repository's attention (windows) is not transformers'. Refused, not guessed.
void nanochat_sizes(Reading& r) {
  Obj& j = r.j;
  for (const char* key : {"n_layer", "n_head", "n_kv_head", "n_embd", "sequence_len", "window_pattern"})
    if (j.has(key))
      fail(kOp, j.where, key, " = ", json_excerpt(j.at(key)),
           " is nanochat's remote-code form (its auto_map's configuration_nanochat.py), which transformers 5 "
           "does not read: pass the transformers-5 config (hidden_size, num_attention_heads, "
           "num_hidden_layers, ...)");
}

// ---- nomic_bert
// nomic's remote-code keys (n_embd, n_positions, rotary_emb_base, ...) have no attribute_map in transformers
// 5's NomicBertConfig (configuration_nomic_bert.py), which builds its own defaults and rotates the whole head
// in halves (modeling_nomic_bert.py apply_rotary_pos_emb, rotate_half): each is reported, none read; the
// canonical keys only (Family trait kCanonicalSizeKeys for max_position_embeddings).
void nomic_sizes(Reading& r) {
  Obj& j = r.j;
  const char* const kMeaning[][2] = {{"n_embd", "hidden_size"},
                                     {"n_head", "num_attention_heads"},
                                     {"n_layer", "num_hidden_layers"},
                                     {"n_positions", "max_position_embeddings"},
                                     {"n_inner", "intermediate_size"},
                                     {"rotary_emb_base", "rope_parameters' rope_theta (1000 by default)"},
                                     {"rotary_emb_fraction", "the whole head rotating"},
                                     {"rotary_emb_interleaved", "rotate_half (halves)"},
                                     {"rotary_scaling_factor", "rope_parameters"}};
  for (const auto& [key, used] : kMeaning)
    if (j.has(key))
      r.out.warnings.push_back(std::string(key) + " = " + json_excerpt(j.at(key)) +
                               " is not read by transformers 5's nomic_bert, which uses " + used +
                               " instead");
  r.m.hidden = j.int_or("hidden_size", 768);
  r.m.heads = j.int_or("num_attention_heads", 12);
  r.m.layers = j.int_or("num_hidden_layers", 12);
}

// ---- esm
// A learned table unless position_embedding_type is "rotary" (configuration_esm.py: "absolute" by default;
// modeling_esm.py EsmEmbeddings). transformers 5 applies no position at all for any other value (ESM-1's
// "relative_key" checkpoints): refused.
void esm_tables(Reading& r) {
  Obj& j = r.j;
  r.learned_table = j.str_or("position_embedding_type", "absolute") != "rotary";
  const std::string kind = j.str_or("position_embedding_type", "absolute");
  if (kind != "absolute" && kind != "rotary")
    fail(kOp, j.where, "position_embedding_type = ", json_excerpt(j.at("position_embedding_type")),
         " is not supported for esm: transformers 5 knows \"absolute\" and \"rotary\" and adds no "
         "position for any other value");
  if (!r.learned_table) return;
  // create_position_ids_from_input_ids (modeling_esm.py): row p + pad + 1, padding skipped.
  if (!j.has("pad_token_id"))
    fail(kOp, j.where, "pad_token_id is missing: esm's learned positions start at row pad_token_id + 1");
  const int64_t pad = j.integer("pad_token_id");
  if (pad < 0 || pad + 1 >= r.m.max_pos)
    fail(kOp, j.where, "pad_token_id = ", pad, " is invalid for esm: the position table has ", r.m.max_pos,
         " rows and position 0 reads row pad_token_id + 1");
  r.out.learned_position_offset = pad + 1;
  r.out.max_position_embeddings = r.m.max_pos - pad - 1;
}

// ---- mpnet
// modeling_mpnet.py MPNetEmbeddings: a learned table with padding_idx 1 whatever pad_token_id says (row p +
// 2), and (MPNetEncoder) T5's bidirectional buckets, one table for every layer: compute_position_bias runs
// with its defaults, 32 buckets and max_distance 128 (the config only sizes the embedding).
void mpnet_tables(Reading& r) {
  Obj& j = r.j;
  ModelPositions& out = r.out;
  out.learned_embeddings = true;
  out.learned_position_offset = 2;
  out.max_position_embeddings = r.m.max_pos - 2;
  if (r.m.max_pos < 3)
    fail(kOp, j.where, "max_position_embeddings = ", r.m.max_pos,
         " is invalid for mpnet: position 0 reads row 2 of the table");
  out.t5_num_buckets = 32;
  out.t5_max_distance = 128;
  const int64_t sized = j.int_or("relative_attention_num_buckets", 32);
  if (sized != 32)
    out.warnings.push_back("relative_attention_num_buckets = " + std::to_string(sized) +
                           " only sizes mpnet's bias table: its buckets are 32 (modeling_mpnet.py "
                           "compute_position_bias)");
}

// ---- roformer
void roformer_tables(Reading& r) {
  if (r.j.bool_or("rotary_value", false))
    fail(kOp, r.j.where,
         "rotary_value = true is not supported for roformer: its values are rotated too "
         "(RoFormerSelfAttention.forward), which posenc's attention does not do");
}

// ---- albert
// modeling_albert.py AlbertTransformer, AlbertLayerGroup: num_hidden_layers steps, each running
// inner_group_num layers of its group (num_hidden_groups share the weights): one attention per layer run, all
// alike.
void albert_tables(Reading& r) {
  Obj& j = r.j;
  const int64_t inner = j.int_or("inner_group_num", 1);
  if (inner < 1 || inner > kMaxModelLayers / r.m.layers)
    fail(kOp, j.where, "inner_group_num = ", inner, " is invalid: must be in [1, ",
         kMaxModelLayers / r.m.layers, "]");
  r.m.layers *= inner;
  r.out.num_layers = r.m.layers;
}

// ---- kosmos_2_5_text_model
// modeling_kosmos2_5.py Kosmos2_5TextTransformer.forward: a learned 2-row segment_emb is added to the
// position rows too (row 1 on image tokens, row 0 elsewhere).
void kosmos_2_5_tables(Reading& r) {
  r.out.warnings.push_back(
      "kosmos_2_5_text_model adds a learned segment_emb row to every position row "
      "(row 1 on image tokens, row 0 elsewhere): a checkpoint tensor the caller adds");
}

// ---- llama4_text
// Chunked attention on the RoPE layers, full on the NoPE ones.
Types llama4_layer_types(Obj&, const Model& m, const std::vector<int>& use_rope, int64_t) {
  Types types(m.layers);
  for (int64_t i = 0; i < m.layers; ++i) types[i] = use_rope[i] ? "chunked_attention" : "full_attention";
  return types;
}

// ---- llama4_text, smollm3
// NoPE layers: no_rope_layers[i] == 1 means the layer USES RoPE; by default every no_rope_layer_interval-th
// layer is NoPE.
void no_rope_layers(Reading& r) {
  Obj& j = r.j;
  const int64_t layers = r.m.layers;
  const int64_t interval = j.int_or("no_rope_layer_interval", 4);
  if (interval < 1) fail(kOp, j.where, "no_rope_layer_interval = ", interval, " is invalid: must be >= 1");
  std::vector<double> given = j.has("no_rope_layers") ? j.numbers("no_rope_layers") : std::vector<double>{};
  if (!given.empty() && static_cast<int64_t>(given.size()) != layers)
    fail(kOp, j.where, "no_rope_layers has ", given.size(),
         " entries, expected num_hidden_layers = ", layers);
  for (int64_t i = 0; i < layers; ++i)
    r.use_rope[i] = given.empty() ? static_cast<int>((i + 1) % interval != 0) : given[i] != 0;
}

// ---- smollm3
// Sliding on the NoPE layers when use_sliding_window and a window are set.
Types smollm3_layer_types(Obj& j, const Model& m, const std::vector<int>& use_rope, int64_t window) {
  Types types(m.layers, "full_attention");
  for (int64_t i = 0; i < m.layers; ++i)
    if (j.bool_or("use_sliding_window", false) && window > 0 && !use_rope[i]) types[i] = "sliding_attention";
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

// RoPE iff layer_rope_theta[i] != 0 (modeling_muse_glimmer.py MuseGlimmerTextModel.forward:
// position_embeddings if layer_rope_theta[i] else None); the value is only a switch: every RoPE layer takes
// the global base. By default 0 on every fourth layer counted back from the last
// (configuration_muse_glimmer.py __post_init__), whatever layer_types says.
void muse_use_rope(Reading& r) {
  Obj& j = r.j;
  const int64_t layers = r.m.layers;
  std::vector<double> theta;
  if (j.has("layer_rope_theta")) {
    theta = j.numbers("layer_rope_theta");
    if (static_cast<int64_t>(theta.size()) != layers)
      fail(kOp, j.where, "layer_rope_theta has ", theta.size(),
           " entries, expected num_hidden_layers = ", layers);
  }
  for (int64_t i = 0; i < layers; ++i)
    r.use_rope[i] = theta.empty() ? (layers - 1 - i) % 4 != 0 : theta[i] != 0;
}

// (MuseGlimmerRotaryEmbedding's default init rotates the whole head; a scaled type's partial rotation is
// refused by rope_from_dict, as for every whole-head family.)
void muse_rope_checks(Reading& r) {
  Obj& j = r.j;
  if (!r.flat || !j.has("layer_rope_theta")) return;
  for (double t : j.numbers("layer_rope_theta"))
    if (t != 0 && t != r.flat->base) {
      r.out.warnings.push_back(j.where + "layer_rope_theta contains " + json_excerpt(json(t)) +
                               ", read as 'RoPE on' by " + r.own_type +
                               ": every RoPE layer rotates with the base " +
                               json_excerpt(json(r.flat->base)) + " (modeling_muse_glimmer.py)");
      break;
    }
}

// ---- muse_spark_text
// configuration_muse_spark.py __post_init__: rope_parameters preset (the row's) before
// convert_rope_params_to_dict, so a top-level rope_theta is not read (a legacy rope_scaling still replaces
// the preset).
void muse_spark_rope_dicts(Reading& r) {
  Obj& j = r.j;
  if (r.rp) return;
  if (j.has("rope_theta"))
    r.out.warnings.push_back(j.where + "rope_theta = " + json_excerpt(j.at("rope_theta")) +
                             " is not read by " + r.own_type +
                             ": its config class presets rope_theta 500000");
  r.owned = json::parse(r.m.family->rope_parameters);
  r.rp = &r.owned;
}

// ---- gpt_neo
// GPTNeoConfig.expand_attention_types_params: [[["global", "local"], 12]] by default, each entry's list
// repeated its count times (configuration_gpt_neo.py GPTNeoConfig.__post_init__); the config's own
// attention_layers is recomputed from it and must have num_layers entries
// (GPTNeoConfig.validate_architecture).
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
// (modeling_gpt_neo.py GPTNeoSelfAttention.__init__), the same count as HF's sliding_window.
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

// configuration_modernbert_decoder.py (and configuration_modernbert.py) convert_rope_params_to_dict: a legacy
// rope_scaling goes to both layer types; the bases are global_rope_theta and local_rope_theta (rope_theta is
// not read).
void modernbert_rope_dicts(Reading& r) {
  Obj& j = r.j;
  if (j.has("rope_theta"))
    r.out.warnings.push_back("rope_theta is not read by " + r.own_type +
                             ": its bases are global_rope_theta and local_rope_theta");
  r.theta = j.num_or("global_rope_theta", 1.6e5);
  r.local_theta = j.num_or("local_rope_theta", 1e4);
  if (!(r.rp && r.rp_name == "rope_parameters" && nested_rope_dict(*r.rp, *r.m.rules))) {
    const json one = r.rp ? *r.rp : json::object();
    r.owned = {{"full_attention", one}, {"sliding_attention", one}};
    r.rp = &r.owned;
  }
}

// ---- modernbert
// A BERT leftover in ModernBERT checkpoints ("absolute", "rope", even "relative_key_query"): ModernBertConfig
// has no such field and its layers rotate whatever it says.
void modernbert_attention(Reading& r) {
  if (r.j.has("position_embedding_type"))
    r.out.warnings.push_back("position_embedding_type = " + r.j.at("position_embedding_type").dump() +
                             " is not read by modernbert: RoPE on every layer");
}

// ---- recurrent_gemma
// configuration_recurrent_gemma.py RecurrentGemmaConfig.layers_block_type: block_types repeated over the
// layers; "recurrent" is the RG-LRU, any other entry a local (sliding) attention block.
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

// attribute_map sliding_window -> attention_window_size (configuration_recurrent_gemma.py
// RecurrentGemmaConfig).
int64_t recurrent_gemma_window(Obj& j, const Model&, int64_t window) {
  return j.has("sliding_window") ? window : j.int_or("attention_window_size", 2048);
}

// ---- mimo_v2_flash
// configuration_mimo_v2_flash.py MiMoV2FlashConfig.__post_init__: full on 0, 5, 11, 17, ...
Types mimo_layer_types(Obj&, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers);
  for (int64_t i = 0; i < m.layers; ++i)
    types[i] = i == 0 || (i + 1) % 6 == 0 ? "full_attention" : "sliding_attention";
  return types;
}

// SGLang's sliding_window_size counts the previous keys, so the window is one more
// (configuration_mimo_v2_flash.py MiMoV2FlashConfig.__post_init__).
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

void mimo_rope_checks(Reading& r) { check_mimo_keys(r.j, *r.rp, r.nested); }

// ---- minimax_m3_vl_text
// The legacy sparse_attention_config.sparse_attention_freq (1: an indexer layer), else every layer full
// (configuration_minimax_m3_vl.py MiniMaxM3VLTextConfig.__post_init__).
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

// It drops minimax_m2's rotary_dim conversion (modular_minimax_m3_vl.py): only partial_rotary_factor sizes
// the rotation.
void minimax_m3_rope_checks(Reading& r) {
  Obj& j = r.j;
  if (r.flat && j.has("rotary_dim") && j.integer("rotary_dim") != r.flat->effective_rotary_dim())
    r.out.warnings.push_back(
        j.where + "rotary_dim = " + std::to_string(j.integer("rotary_dim")) +
        " is not read by minimax_m3_vl_text: it rotates " + std::to_string(r.flat->effective_rotary_dim()) +
        " dims (partial_rotary_factor; minimax_m2's rotary_dim conversion is not inherited)");
}

// ---- flint
// configuration_flint.py FlintConfig.__post_init__: full on layers 0, 1, every i % 4 == 1 and the last.
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

// RoPE on the dense prefix when prefix_dense_sliding_window_pattern is 1 (modeling_cohere2_moe.py
// Cohere2MoeAttention's force_rope): mlp_layer_types, else "dense" for the first first_k_dense_replace layers
// (configuration_cohere2_moe.py).
void cohere2_moe_layers(Reading& r) {
  Obj& j = r.j;
  const int64_t layers = r.m.layers;
  const bool prefix_rope = j.int_or("prefix_dense_sliding_window_pattern", 1) == 1;
  const int64_t dense = j.int_or("first_k_dense_replace", 0);
  std::vector<std::string> mlp;
  if (j.has("mlp_layer_types")) {
    const json& l = j.at("mlp_layer_types");
    if (!l.is_array() || static_cast<int64_t>(l.size()) != layers)
      fail(kOp, j.where, "mlp_layer_types must be a list of num_hidden_layers = ", layers, " strings");
    for (const json& e : l) mlp.push_back(e.is_string() ? e.get<std::string>() : "");
  }
  for (int64_t i = 0; i < layers; ++i)
    r.force_rope[i] = prefix_rope && (mlp.empty() ? i < dense : mlp[i] == "dense");
}

// ---- qwen2_moe
// configuration_qwen2_moe.py Qwen2MoeConfig.__post_init__: odd-numbered layers below max_window_layers slide.
Types qwen2_moe_layer_types(Obj& j, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers, "full_attention");
  const int64_t mwl = j.int_or("max_window_layers", 28);
  for (int64_t i = 0; i < m.layers; ++i)
    if ((i + 1) % 2 && i < mwl && j.bool_or("use_sliding_window", false)) types[i] = "sliding_attention";
  return types;
}

// ---- minimax
// configuration_minimax.py MiniMaxConfig.__post_init__: full on even layers.
Types minimax_layer_types(Obj&, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers);
  for (int64_t i = 0; i < m.layers; ++i) types[i] = (i + 1) % 2 ? "full_attention" : "linear_attention";
  return types;
}

// ---- olmo_hybrid
// configuration_olmo_hybrid.py OlmoHybridConfig.__post_init__: full iff i % 4 == 3, or the last.
Types olmo_hybrid_layer_types(Obj&, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers);
  for (int64_t i = 0; i < m.layers; ++i) types[i] = i % 4 == 3 ? "full_attention" : "linear_attention";
  if (m.layers < 4) types.back() = "full_attention";
  return types;
}

// No RoPE with rope_theta null (modeling_olmo_hybrid.py OlmoHybridModel.__init__).
bool olmo_hybrid_rope_off(Reading& r) { return rope_theta_is_null(r.j.j); }

// ---- lfm2
// configuration_lfm2.py Lfm2Config.__post_init__: full_attn_idxs (null: every layer) picks the attention
// layers, the others are short convolutions; an index past the last layer selects nothing (`i in
// full_attn_idxs`).
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
// configuration_lfm2_moe.py Lfm2MoeConfig's layer_types: no default; the model cannot be built.
Types lfm2_moe_layer_types(Obj& j, const Model&, const std::vector<int>&, int64_t) {
  fail(kOp, j.where, "layer_types is missing: required for lfm2_moe (transformers 5 has no default ",
       "and fails to build the model without it)");
}

// ---- glm5_next_text
// configuration_glm5_next.py Glm5NextTextConfig.__post_init__: indexed iff i % 4 == 3.
Types glm5_next_layer_types(Obj&, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers);
  for (int64_t i = 0; i < m.layers; ++i) types[i] = i % 4 == 3 ? "indexed_attention" : "linear_attention";
  return types;
}

// ---- kimi_linear
// configuration_kimi_linear.py KimiLinearConfig.__post_init__: linear_attn_config's 1-based full_attn_layers
// / kda_layers (both needed), else full on layers 4, 8, 12, ...
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
// configuration_jamba.py JambaConfig's layers_block_type and layer_types properties, validate_architecture.
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
// configuration_bamba.py BambaConfig.layers_block_type: attention at attn_layer_indices, else mamba.
Types bamba_layer_types(Obj& j, const Model& m, const std::vector<int>&, int64_t) {
  Types types(m.layers, "linear_attention");
  if (j.has("attn_layer_indices"))
    for (int64_t i : j.integers("attn_layer_indices", INT64_MIN / 2, INT64_MAX / 2))
      if (i >= 0 && i < m.layers) types[i] = "full_attention";  // others are ignored, as there
  return types;
}

// configuration_bamba.py BambaConfig.__post_init__: kwargs["partial_rotary_factor"] = 0.5, always (a value
// inside rope_parameters still wins).
void bamba_rope_base(Reading& r) {
  Obj& j = r.j;
  if (j.has("rope_theta")) r.theta = j.num("rope_theta");
  if (j.has("partial_rotary_factor") && j.num("partial_rotary_factor") != 0.5)
    r.out.warnings.push_back("partial_rotary_factor = " + j.at("partial_rotary_factor").dump() +
                             " is ignored by bamba: transformers 5 sets 0.5 (configuration_bamba.py)");
  r.prf = 0.5;
}

// ---- zamba
// configuration_zamba.py ZambaConfig.__post_init__: layer 2 hybrid, then layer 3 + k hybrid iff k % period ==
// offset.
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
// configuration_zamba2.py Zamba2Config.__post_init__: a fixed 54-layer default.
Types zamba2_layer_types(Obj& j, const Model& m, const std::vector<int>&, int64_t) {
  if (m.layers != 54)
    fail(kOp, j.where, "layers_block_type is missing: zamba2's default pattern has 54 layers, the config ",
         m.layers);
  Types types(m.layers, "linear_attention");
  for (int64_t i : {6, 12, 18, 24, 30, 36, 42, 47, 51}) types[i] = "hybrid";
  return types;
}

// No RoPE without use_mem_rope (modeling_zamba2.py Zamba2Model.__init__).
bool zamba2_rope_off(Reading& r) {
  Obj& j = r.j;
  const bool off = !j.bool_or("use_mem_rope", false);
  // transformers 5 logs "using rescaled rope_theta" for use_long_context but keeps rope_theta
  // (modeling_zamba2.py Zamba2Model.__init__): the two readings differ, so neither is given.
  if (!off && j.bool_or("use_long_context", false))
    fail(kOp, j.where,
         "use_long_context = true with use_mem_rope is not supported: transformers 5 announces a rescaled "
         "rope_theta but keeps it (modeling_zamba2.py), so the model's RoPE base is ambiguous");
  return off;
}

// ---- granitemoehybrid
// No RoPE without position_embedding_type "rope" (modeling_granitemoehybrid.py
// GraniteMoeHybridModel.__init__).
bool granitemoehybrid_rope_off(Reading& r) {
  return !r.j.has("position_embedding_type") || r.j.str("position_embedding_type") != "rope";
}

// ---- gpt_neox, gpt_neox_japanese
// configuration_gpt_neox.py, configuration_gpt_neox_japanese.py convert_rope_params_to_dict: rotary_emb_base
// and rotary_pct (the row's factor: 0.25, Japanese 1.0) win.
void gpt_neox_rope_base(Reading& r) {
  Obj& j = r.j;
  r.theta = j.num_or("rotary_emb_base", 1e4);
  r.prf = j.num_or("rotary_pct", r.m.rules->prf);
  for (const char* k : {"rope_theta", "partial_rotary_factor"})
    if (j.has(k))
      r.out.warnings.push_back(std::string(k) + " is ignored by " + r.type +
                               " (transformers 5 reads rotary_emb_base / rotary_pct)");
}

// ---- cohere_compass_text
// Its own convert_rope_params_to_dict leaves rope_theta / rope_scaling inert (configuration_cohere_compass.py
// CohereCompassTextConfig) and its rotary module reads rope_parameters[layer_type].
void cohere_compass_rope_keys(Reading& r) {
  Obj& j = r.j;
  for (const char* k : {"rope_theta", "partial_rotary_factor"})
    if (j.has(k))
      r.out.warnings.push_back(j.where + k + " = " + json_excerpt(j.at(k)) + " is not read by " + r.type +
                               ": its rope_parameters are per layer type");
}

// ---- laguna
// configuration_laguna.py convert_rope_params_to_dict returns its input; its rotary module reads each type's
// own partial_rotary_factor (1.0 if absent), never the top-level one.
void laguna_rope_keys(Reading& r) {
  Obj& j = r.j;
  for (const char* k : {"rope_theta", "partial_rotary_factor"})
    if (j.has(k))
      r.out.warnings.push_back(j.where + k + " = " + json_excerpt(j.at(k)) + " is not read by " + r.type +
                               ": each rope_parameters entry has its own");
}

// ---- gemma3_text, olmo3
// configuration_gemma3.py / configuration_olmo3.py convert_rope_params_to_dict: legacy rope_scaling goes to
// full_attention only.
void legacy_rope_to_full_attention(Reading& r) {
  if (!(r.rp && r.rp_name == "rope_parameters" && nested_rope_dict(*r.rp, *r.m.rules))) {
    r.owned = {{"full_attention", r.rp ? *r.rp : json::object()}, {"sliding_attention", json::object()}};
    r.rp = &r.owned;
  }
}

// Gemma 3's sliding theta is rope_local_base_freq.
void gemma3_rope_dicts(Reading& r) {
  r.local_theta = r.j.num_or("rope_local_base_freq", 1e4);
  legacy_rope_to_full_attention(r);
}

// ---- gptj
// GPTJConfig rotary_dim = 64 when the key is absent; modeling_gptj.py: all dims if null.
void gptj_flat_rope(Reading& r) {
  r.flat->rotary_dim = r.j.j.contains("rotary_dim") ? r.j.int_or("rotary_dim", r.m.head_dim) : 64;
  validate(*r.flat);
}

// ---- codegen
// CodeGenConfig rotary_dim = 64; a null one sizes the table by the whole embedding (n_embd,
// modeling_codegen.py CodeGenAttention.__init__), which transformers cannot apply to a head: refused.
void codegen_flat_rope(Reading& r) {
  Obj& j = r.j;
  if (j.j.contains("rotary_dim") && !j.has("rotary_dim"))
    fail(kOp, j.where, "rotary_dim = null is not supported for codegen: its table then has n_embd / 2 ",
         "frequencies, which transformers 5 cannot apply to a head of ", r.m.head_dim);
  r.flat->rotary_dim = j.int_or("rotary_dim", 64);
  validate(*r.flat);
}

// ---- hy_v4
// rotate_half ("Non-interleave RoPE", modeling_hy_v4.py HYV4Attention), rope_interleave unread.
void hy_v4_flat_rope(Reading& r) {
  if (r.j.bool_or("rope_interleave", false))
    r.out.warnings.push_back("rope_interleave = true is ignored: transformers 5's hy_v4 rotates halves");
}

// ---- dbrx
// DBRX states its base as attn_config.rope_theta (500000), which its own code, transformers 4.x, vLLM
// (dbrx.py: rope_theta = config.attn_config.rope_theta) and llama.cpp's converter read. transformers 5.23's
// DbrxRotaryEmbedding reads the top-level rope_parameters instead (10000 by default): posenc follows the
// model's authors and warns where 5.23 differs.
void dbrx_rope_checks(Reading& r) {
  Obj& j = r.j;
  if (!r.flat || !j.has("attn_config")) return;
  RopeConfig& rope = *r.flat;
  if (!j.at("attn_config").is_object()) fail(kOp, j.where, "attn_config must be an object");
  Obj ac{j.at("attn_config"), j.where + "attn_config.", {}};
  for (const char* k : {"kv_n_heads", "clip_qkv", "attn_pdrop", "attn_impl", "qk_ln"}) ac.read.insert(k);
  if (ac.has("rope_theta")) {
    const double authors = ac.num("rope_theta");
    if (authors <= 0) fail(kOp, ac.where, "rope_theta = ", authors, " is invalid: must be > 0");
    if (authors != rope.base)
      r.out.warnings.push_back(
          ac.where + "rope_theta = " + json_excerpt(ac.at("rope_theta")) +
          " is the base (DBRX's own code, transformers 4.x, vLLM); transformers 5.23 applies " +
          "the top-level rope_theta, " + json_excerpt(json(rope.base)) + ", instead");
    rope.base = authors;
  }
  ac.warn_unread(r.out.warnings, "dbrx");
}

// ---- hunyuan_vl_text
// xdrope_section (renamed mrope_section, configuration_hunyuan_vl.py HunYuanVLTextConfig's
// _normalize_mrope_section_alias, _validate_mrope_section): integers summing to head_dim / 2, one position
// axis each. Text tokens carry their index on every axis, so their rotation is this 1-D plan; image tokens
// take (w, h, image index) on the last three axes, each axis a contiguous chunk of the doubled frequencies
// (modeling_hunyuan_vl.py HunYuanVLRotaryEmbedding.forward: the two halves of a rotated pair from different
// axes), which posenc's M-RoPE does not express: a warning.
void hunyuan_vl_rope_checks(Reading& r) {
  if (!r.flat) return;
  Obj& j = r.j;
  const json* sections = nullptr;
  std::string name;
  for (const char* k : {"mrope_section", "xdrope_section"}) {
    if (!sections && r.rp && has(*r.rp, k)) sections = &r.rp->at(k), name = r.rp_name + "." + k;
    if (!sections && j.has(k)) sections = &j.at(k), name = k;
  }
  if (!sections)
    fail(kOp, j.where,
         "xdrope_section (mrope_section) is missing: hunyuan_vl_text's rotary module splits its ",
         "frequencies by it (transformers 5.23 fails without one)");
  int64_t sum = 0;
  if (!sections->is_array()) fail(kOp, j.where, name, " = ", json_excerpt(*sections), " must be a list");
  for (const json& s : *sections) {
    if (!s.is_number_integer() || s.get<int64_t>() < 0 || s.get<int64_t>() > kMaxModelHeadDim)
      fail(kOp, j.where, name, " contains ", s.dump(), ": must be non-negative integers");
    sum += s.get<int64_t>();
  }
  if (sum != r.flat->head_dim / 2)
    fail(kOp, j.where, name, " = ", json_excerpt(*sections), " sums to ", sum,
         ", not head_dim / 2 = ", r.flat->head_dim / 2, " (configuration_hunyuan_vl.py raises)");
  r.out.warnings.push_back(
      j.where + name + " = " + json_excerpt(*sections) +
      ": hunyuan_vl_text's image tokens take other positions on its axes, which posenc's "
      "M-RoPE does not express; the plan is exact for text tokens (every axis equal: 1-D "
      "RoPE)");
}

// ---- gemma3n_text
// self.scaling = 1.0 with q/k RMS norms, no query_pre_attn_scalar (modeling_gemma3n.py
// Gemma3nTextAttention.__init__); its last num_kv_shared_layers layers reuse the keys of an earlier layer of
// their type, rotated at the same positions: the same plan.
void gemma3n_scale(Reading& r, double&) {
  if (r.j.has("query_pre_attn_scalar"))
    r.out.warnings.push_back("query_pre_attn_scalar is not read by gemma3n_text: its attention scale is 1");
}

// ---- mpt
// attn_config.softmax_scale, when given.
void mpt_scale(Reading& r, double& scale) {
  Obj& j = r.j;
  if (!j.has("attn_config") || !j.at("attn_config").is_object()) return;
  Obj ac{j.at("attn_config"), j.where + "attn_config.", {}};
  if (ac.has("softmax_scale")) scale = ac.num("softmax_scale");
  for (const char* k : {"alibi", "alibi_bias_max", "attn_type", "attn_pdrop", "attn_impl", "clip_qkv",
                        "prefix_lm", "qk_ln", "attn_uses_sequence_id", "rope", "sliding_window_size"})
    ac.read.insert(k);
  ac.warn_unread(r.out.warnings, r.type);
}

// ---- mllama_text_model
// MllamaTextConfig.__post_init__: cross_attention_layers, None -> [3, 8, ..., 38].
void mllama_attention(Reading& r) {
  if (r.j.has("cross_attention_layers"))
    for (int64_t v : r.j.integers("cross_attention_layers", 0, kMaxModelLayers)) r.cross.insert(v);
  else
    r.cross = {3, 8, 13, 18, 23, 28, 33, 38};
}

// ---- distilbert
// modeling_distilbert.py _create_sinusoidal_embeddings, DistilBertPreTrainedModel._init_weights: a sinusoidal
// table only initializes the learned one.
void distilbert_attention(Reading& r) {
  if (r.j.bool_or("sinusoidal_pos_embds", false))
    r.out.warnings.push_back(
        "sinusoidal_pos_embds = true only initializes distilbert's learned table: the "
        "checkpoint's rows are the positions");
}

// ---- molmo2_text
// configuration_molmo2.py Molmo2TextConfig.__post_init__, validate_architecture: rope_scaling_layers, null =
// every layer; qk_norm_type qwen3 | olmo (the norms before RoPE are the caller's; another value raises
// there).
void molmo2_layers(Reading& r) {
  Obj& j = r.j;
  const int64_t layers = r.m.layers;
  r.scaled.assign(static_cast<size_t>(layers), 1);
  if (j.has("rope_scaling_layers")) {
    // modeling_molmo2.py Molmo2TextModel.__init__: layer i is scaled iff `i in config.rope_scaling_layers`,
    // so an index outside [0, num_hidden_layers) scales no layer (ignored, with a warning); the strict
    // list[int] field rejects anything but integers (configuration_molmo2.py Molmo2TextConfig).
    const json& v = j.at("rope_scaling_layers");
    if (!v.is_array())
      fail(kOp, j.where, "rope_scaling_layers = ", json_excerpt(v),
           " is invalid: must be a list of layer indices (transformers 5.23 raises)");
    r.scaled.assign(static_cast<size_t>(layers), 0);
    std::vector<std::string> ignored;
    for (const json& e : v) {
      if (!e.is_number_integer())
        fail(kOp, j.where, "rope_scaling_layers contains ", e.dump(),
             ": must be integers (transformers 5.23 raises)");
      const bool in_range = e.is_number_unsigned() ? e.get<uint64_t>() < static_cast<uint64_t>(layers)
                                                   : e.get<int64_t>() >= 0 && e.get<int64_t>() < layers;
      if (in_range)
        r.scaled[static_cast<size_t>(e.get<int64_t>())] = 1;
      else if (std::find(ignored.begin(), ignored.end(), e.dump()) == ignored.end())
        ignored.push_back(e.dump());
    }
    if (!ignored.empty()) {
      std::string list;
      for (const std::string& x : ignored) list += (list.empty() ? "" : ", ") + x;
      r.out.warnings.push_back(
          j.where + "rope_scaling_layers contains " + list +
          ", not a layer of the num_hidden_layers = " + std::to_string(layers) +
          ": ignored, as transformers 5.23 does (no layer takes the scaled rope for it)");
    }
  }
  const std::string norm = j.str_or("qk_norm_type", "qwen3");
  if (norm != "qwen3" && norm != "olmo")
    fail(kOp, j.where, "qk_norm_type = ", json_excerpt(j.at("qk_norm_type")),
         " is invalid for molmo2_text: \"qwen3\" or \"olmo\" (transformers 5.23 raises)");
}

// ---- granite_swa, granitemoe_swa
// layer_rope_theta: each layer's own base, 0 = NoPE (modeling_granite_swa.py GraniteSWAModel.__init__,
// GraniteSWAModel.forward).
void granite_swa_layers(Reading& r) {
  Obj& j = r.j;
  if (!j.has("layer_rope_theta")) return;
  r.layer_theta = j.numbers("layer_rope_theta");
  if (static_cast<int64_t>(r.layer_theta.size()) != r.m.layers)
    fail(kOp, j.where, "layer_rope_theta has ", r.layer_theta.size(),
         " entries, expected num_hidden_layers = ", r.m.layers);
  for (double t : r.layer_theta)
    if (!(t >= 0) || !std::isfinite(t))
      fail(kOp, j.where, "layer_rope_theta contains ", t, ": must be 0 (no RoPE) or a positive base");
}

// clang-format off
const FamilyHooks kHooks[] = {
  {.model_type = "step3p5", .resolve = step3p5_resolved},
  {.model_type = "zaya", .resolve = zaya_resolved, .finish = zaya_finish},
  {.model_type = "ultrabert", .resolve = ultrabert_resolved},
  {.model_type = "dots3_note_text", .resolve = dots3_resolved},
  {.model_type = "deepseek_v4", .plan = deepseek_v4_positions},
  {.model_type = "nemotron_h", .sizes = nemotron_h_sizes, .layer_types = nemotron_h_layer_types},
  {.model_type = "xlstm", .sizes = xlstm_sizes},
  {.model_type = "longcat_flash", .sizes = longcat_sizes},
  {.model_type = "jetmoe", .sizes = jetmoe_sizes},
  {.model_type = "nanochat", .sizes = nanochat_sizes},
  {.model_type = "nomic_bert", .sizes = nomic_sizes},
  {.model_type = "esm", .tables = esm_tables},
  {.model_type = "mpnet", .tables = mpnet_tables},
  {.model_type = "roformer", .tables = roformer_tables},
  {.model_type = "albert", .tables = albert_tables},
  {.model_type = "kosmos_2_5_text_model", .tables = kosmos_2_5_tables},
  {.model_type = "llama4_text", .use_rope = no_rope_layers, .layer_types = llama4_layer_types},
  {.model_type = "smollm3", .use_rope = no_rope_layers, .layer_types = smollm3_layer_types},
  {.model_type = "muse_glimmer_text", .use_rope = muse_use_rope, .layer_types = muse_layer_types,
   .rope_checks = muse_rope_checks},
  {.model_type = "muse_spark_text", .rope_dicts = muse_spark_rope_dicts},
  {.model_type = "gpt_neo", .window = gpt_neo_window, .layer_types = gpt_neo_layer_types},
  {.model_type = "modernbert-decoder", .window = modernbert_window, .rope_dicts = modernbert_rope_dicts},
  {.model_type = "modernbert", .attention = modernbert_attention},
  {.model_type = "recurrent_gemma", .window = recurrent_gemma_window,
   .layer_types = recurrent_gemma_layer_types},
  {.model_type = "mimo_v2_flash", .window = mimo_window, .layer_types = mimo_layer_types,
   .check_types = mimo_check_types, .rope_checks = mimo_rope_checks},
  {.model_type = "minimax_m3_vl_text", .layer_types = minimax_m3_layer_types,
   .rope_checks = minimax_m3_rope_checks},
  {.model_type = "flint", .layer_types = flint_layer_types},
  {.model_type = "lfm3", .layer_types = lfm3_layer_types},
  {.model_type = "cohere2_moe", .layer_types = cohere2_moe_layer_types, .layers = cohere2_moe_layers},
  {.model_type = "qwen2_moe", .layer_types = qwen2_moe_layer_types},
  {.model_type = "minimax", .layer_types = minimax_layer_types},
  {.model_type = "olmo_hybrid", .layer_types = olmo_hybrid_layer_types, .rope_off = olmo_hybrid_rope_off},
  {.model_type = "lfm2", .layer_types = lfm2_layer_types},
  {.model_type = "lfm2_moe", .layer_types = lfm2_moe_layer_types},
  {.model_type = "glm5_next_text", .layer_types = glm5_next_layer_types},
  {.model_type = "kimi_linear", .layer_types = kimi_linear_layer_types},
  {.model_type = "jamba", .layer_types = jamba_layer_types},
  {.model_type = "bamba", .layer_types = bamba_layer_types, .rope_base = bamba_rope_base},
  {.model_type = "zamba", .layer_types = zamba_layer_types},
  {.model_type = "zamba2", .layer_types = zamba2_layer_types, .rope_off = zamba2_rope_off},
  {.model_type = "granitemoehybrid", .rope_off = granitemoehybrid_rope_off},
  {.model_type = "gpt_neox", .rope_base = gpt_neox_rope_base},
  {.model_type = "gpt_neox_japanese", .rope_base = gpt_neox_rope_base},
  {.model_type = "cohere_compass_text", .rope_keys = cohere_compass_rope_keys},
  {.model_type = "laguna", .rope_keys = laguna_rope_keys},
  {.model_type = "gemma3_text", .rope_dicts = gemma3_rope_dicts},
  {.model_type = "olmo3", .rope_dicts = legacy_rope_to_full_attention},
  {.model_type = "gptj", .flat_rope = gptj_flat_rope},
  {.model_type = "codegen", .flat_rope = codegen_flat_rope},
  {.model_type = "hy_v4", .flat_rope = hy_v4_flat_rope},
  {.model_type = "dbrx", .rope_checks = dbrx_rope_checks},
  {.model_type = "hunyuan_vl_text", .rope_checks = hunyuan_vl_rope_checks},
  {.model_type = "gemma3n_text", .scale = gemma3n_scale},
  {.model_type = "mpt", .scale = mpt_scale},
  {.model_type = "mllama_text_model", .attention = mllama_attention},
  {.model_type = "distilbert", .attention = distilbert_attention},
  {.model_type = "molmo2_text", .layers = molmo2_layers},
  {.model_type = "granite_swa", .layers = granite_swa_layers},
  {.model_type = "granitemoe_swa", .layers = granite_swa_layers},
};
// clang-format on

const FamilyHooks* find_hooks(std::string_view model_type) {
  for (const FamilyHooks& h : kHooks)
    if (model_type == h.model_type) return &h;
  return nullptr;
}
}  // namespace

bool nested_rope_dict(const json& d, const Family& rules) {
  for (auto it = d.begin(); it != d.end(); ++it) {
    for (const char* k : {"full_attention", "sliding_attention", "chunked_attention"})
      if (it.key() == k) return true;
    // Family trait kIndexedRopeDict: an indexed_attention dict (dots3_note_text).
    if (rules.has(kIndexedRopeDict) && it.key() == "indexed_attention") return true;
  }
  return false;
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
