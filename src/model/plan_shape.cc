// src/model/plan_shape.cc: the plan stages of the model's shape (src/model/stages.h): the sizes a config
// class reads through its attribute_map (with its defaults where a config omits them), the head dims its
// attention modules take, the position tables its embeddings build, and the layer types and sliding window
// its __post_init__ sets.
#include <algorithm>
#include <string>
#include <vector>

#include "posenc/absolute.h"
#include "src/model/stages.h"

namespace posenc::detail {
namespace {
// The first of `keys` (space-separated aliases, in order) the config gives.
int64_t first_int(Obj& j, const std::string& keys, int64_t fallback, bool required) {
  for (size_t at = 0; at < keys.size();) {
    const size_t end = std::min(keys.find(' ', at), keys.size());
    if (const std::string k = keys.substr(at, end - at); j.has(k)) return j.integer(k);
    at = end + 1;
  }
  if (required)
    fail(kOp, j.where, keys.substr(0, keys.find(' ')), " is missing (also looked for its aliases)");
  return fallback;
}

void check_layer_count(const Obj& j, int64_t layers) {
  if (layers <= 0 || layers > kMaxModelLayers)
    fail(kOp, j.where, "num_hidden_layers = ", layers, " is invalid: must be in [1, ", kMaxModelLayers, "]");
}
}  // namespace

// hidden_size, num_attention_heads and num_hidden_layers as the config class's attribute_map names them
// (n_embd, n_head, ...), each the class default where the config omits it (sparse configs, e.g. Gemma 3's),
// then the sizes the family derives (FamilyHooks::sizes).
void read_sizes(Reading& r, const std::string& declared_type) {
  Obj& j = r.j;
  Model& m = r.m;
  const SizeDefaults* sizes = find_size_defaults(declared_type);
  if (!sizes) sizes = find_size_defaults(r.type);
  m.sizes = sizes;
  const bool need = sizes == nullptr;
  // The size keys and their aliases: the row's own where its class names them otherwise (Kosmos2TextConfig's
  // attribute_map: hidden_size -> embed_dim, num_hidden_layers -> layers; its own names come first).
  const Family& own = *m.family;
  m.hidden = first_int(j, own.hidden_keys ? own.hidden_keys : "hidden_size n_embd d_model n_embed dim",
                       sizes ? sizes->hidden : 0, need);
  m.heads = first_int(j, "num_attention_heads n_head n_heads num_heads attention_heads",
                      sizes ? sizes->heads : 0, need);
  m.layers = first_int(j, own.layers_keys ? own.layers_keys : "num_hidden_layers n_layer n_layers num_layers",
                       sizes ? sizes->layers : 0, need);
  if (m.hooks->sizes) m.hooks->sizes(r);  // sizes the family derives (nemotron_h, jetmoe, longcat_flash, ...)
}

// modeling_mamba.py, modeling_mamba2.py, modeling_falcon_mamba.py: state-space layers only; position_ids
// are accepted and ignored. num_heads (Mamba2) counts SSM heads, not attention heads. modeling_rwkv.py,
// modeling_xlstm.py: recurrences.
void plan_attention_free(Reading& r) {
  Obj& j = r.j;
  const Model& m = r.m;
  ModelPositions& out = r.out;
  j.read.insert("context_length");  // rwkv: max_position_embeddings -> context_length, a CUDA kernel size
  check_layer_count(j, m.layers);
  out.model_type = r.type;
  out.num_layers = m.layers;
  for (int64_t i = 0; i < m.layers; ++i) {
    LayerPlan p;
    p.layer = i;
    p.layer_type = "linear_attention";
    p.softmax_attention = false;
    out.layers.push_back(std::move(p));
  }
  j.warn_unread(out.warnings, r.type);
}

// The sizes checked, the context length (max_position_embeddings and its aliases, the row's
// attribute_map key), the top-level original_max_position_embeddings, and the q/k and v head dims each
// attention module takes (head_dims, src/model/per_layer.cc).
void plan_heads(Reading& r, Plan& p) {
  Obj& j = r.j;
  Model& m = r.m;
  ModelPositions& out = r.out;
  const Family& own = *m.family;
  const Family& rules = *m.rules;
  if (m.heads <= 0) fail(kOp, j.where, "num_attention_heads = ", m.heads, " is invalid: must be > 0");
  check_layer_count(j, m.layers);
  m.max_pos = first_int(j, "max_position_embeddings n_positions max_seq_len", own.max_pos, false);
  // Family trait kCanonicalSizeKeys: max_position_embeddings only.
  if (own.has(kCanonicalSizeKeys)) m.max_pos = j.int_or("max_position_embeddings", own.max_pos);
  // Family::max_pos_key: attribute_map max_position_embeddings -> that key (kimi_linear, bailing_hybrid).
  if (rules.max_pos_key)
    m.max_pos = first_int(j, std::string(rules.max_pos_key) + " max_position_embeddings", own.max_pos, false);
  if (j.has("original_max_position_embeddings"))
    m.top_original = j.integer("original_max_position_embeddings");
  else if (rules.original_max_pos)
    m.top_original = rules.original_max_pos;  // a config class field default that always overrides (phi3)
  p.dims = head_dims(j, m, out.warnings);
  out.model_type = r.own_type;
  out.num_layers = m.layers;
  out.num_heads = m.heads;
  out.max_position_embeddings = m.max_pos;
}

// The embeddings' position tables. Learned rows read from row p + Family::position_offset (modeling_opt.py
// OPTLearnedPositionalEmbedding, modeling_biogpt.py BioGptLearnedPositionalEmbedding); the sinusoidal
// tables; RoBERTa's rows after pad_token_id; then the family's own (FamilyHooks::tables).
void plan_position_tables(Reading& r) {
  Obj& j = r.j;
  const Model& m = r.m;
  ModelPositions& out = r.out;
  const Family& own = *m.family;
  const Family& rules = *m.rules;
  if (rules.method == PositionMethod::learned && rules.position_offset)
    out.learned_position_offset = rules.position_offset;
  if (rules.method == PositionMethod::sinusoidal) {
    SinusoidalConfig s;
    s.dim = m.hidden;  // an odd d_model gets a zero last column (XGLM), as posenc's split layout
    s.layout = SinusoidalLayout::split;
    s.frequencies = rules.sinusoidal;
    s.position_offset = rules.position_offset;
    if (own.has(kSinusoidalRowsAfterPad)) {
      // Kosmos2TextSinusoidalPositionalEmbedding (modeling_kosmos2.py): token p (padding skipped) reads row
      // p + pad_token_id + 1 of a table of max_position_embeddings + 2 rows, regrown past it.
      const int64_t pad = j.int_or("pad_token_id", 1);
      if (pad < 0 || pad > 1 << 20)
        fail(kOp, j.where, "pad_token_id = ", pad, " is invalid for ", r.own_type,
             ": position 0 reads row pad_token_id + 1");
      s.position_offset = pad + 1;
    }
    validate(s);
    out.sinusoidal = s;
  }
  if (rules.has(kRobertaRows)) {
    // modeling_roberta.py create_position_ids_from_input_ids: token p (0-based, padding skipped) reads
    // row p + pad_token_id + 1 of max_position_embeddings rows (514 rows, 512 positions for RoBERTa).
    const int64_t pad = j.int_or("pad_token_id", 1);
    if (pad < 0 || pad + 1 >= m.max_pos)
      fail(kOp, j.where, "pad_token_id = ", pad, " is invalid for ", r.type, ": the position table has ",
           m.max_pos, " rows and position 0 reads row pad_token_id + 1");
    out.learned_position_offset = pad + 1;
    out.max_position_embeddings = m.max_pos - pad - 1;
  }
  if (m.hooks->tables) m.hooks->tables(r);  // esm, mpnet, roformer, albert, kosmos_2_5_text_model
}

// The sliding window as the config class fills and gates it (sliding_window, src/model/layer_types.cc),
// the NoPE layers (Reading::use_rope, FamilyHooks::use_rope), each layer's type (its __post_init__'s
// layer_types), and the head dims per layer (per_layer_config's, Gemma 4's global_head_dim).
void plan_layer_types(Reading& r, Plan& p) {
  Obj& j = r.j;
  const Model& m = r.m;
  p.window = sliding_window(j, m);
  r.use_rope.assign(static_cast<size_t>(m.layers), 1);
  if (m.hooks->use_rope) m.hooks->use_rope(r);
  p.types = layer_types(j, m, r.use_rope, p.window, r.out.warnings);
  if (m.rules->has(kSlidingNeedsWindow) && p.window <= 0)
    for (const std::string& t : p.types)
      if (t == "sliding_attention")  // masking_utils.py create_sliding_window_causal_mask raises
        fail(kOp, j.where, "sliding_window is missing: ", r.own_type, "'s sliding_attention layers need it");
  p.head_dims = layer_head_dims(j, m, p.types);
  // dots3_note_text: MLA dims per layer type (src/model/dots3.cc, src/model/per_layer.cc); empty elsewhere.
  p.mla_dims = mla_layer_dims(j, m, p.dims.v);
}

}  // namespace posenc::detail
