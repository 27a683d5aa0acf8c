// src/model/indexer.cc: DeepSeek sparse attention's lightning indexer per layer (deepseek_v32 and
// glm_moe_dsa in transformers 5.23, and axk2 with DeepSeek-V3.2's; posenc/model.h TopkIndexer).
#include <algorithm>
#include <string>
#include <vector>

#include "src/model/document.h"
#include "src/model/parse.h"

namespace posenc::detail {
namespace {
constexpr int64_t kMaxIndexHeads = 1 << 12;

// GLM-5's indexer_types: "full" runs the layer's own indexer, "shared" reuses the previous layer's selection
// (configuration_glm_moe_dsa.py GlmMoeDsaConfig.__post_init__): the saved list, else the index_topk_pattern
// string ("F"/"S") or list, else the index_topk_freq / index_skip_topk_offset schedule.
// Each layer reads its own entry, indexer_types[layer_idx] (modeling_glm_moe_dsa.py
// GlmMoeDsaAttention.__init__, modeling_hy_v4.py HYV4Attention.__init__, modeling_glm5_next.py
// Glm5NextTextAttention.__init__): entries past the last layer are never read (ignored, with a warning), a
// missing one raises IndexError when its layer is built.
// indexed_only (GLM-5-Next): only these layers read their entry (its linear layers build no MLA), so the
// list may end after the last of them, and layer 0 may be "shared" (its check is per indexed layer).
std::vector<bool> glm_shared_layers(Obj& j, int64_t layers, std::vector<std::string>& warnings,
                                    const std::vector<std::string>* indexed_only = nullptr) {
  std::vector<bool> shared(static_cast<size_t>(layers), false);
  const char* key = j.has("indexer_types") ? "indexer_types" : "index_topk_pattern";
  if (j.has(key)) {
    const json& v = j.at(key);
    std::vector<std::string> names;
    if (v.is_string())
      for (char c : v.get<std::string>()) names.push_back(c == 'F' ? "full" : c == 'S' ? "shared" : "?");
    else if (v.is_array())
      for (const json& e : v) names.push_back(e.is_string() ? e.get<std::string>() : "?");
    const int64_t given = static_cast<int64_t>(names.size());
    int64_t needed = layers;
    if (indexed_only) {
      needed = 0;
      for (int64_t i = 0; i < layers; ++i)
        if ((*indexed_only)[i] == "indexed_attention") needed = i + 1;
    }
    if (!v.is_string() && !v.is_array())
      fail(kOp, j.where, key, " = ", json_excerpt(v),
           " is invalid: must be a list of \"full\" / \"shared\" (or an \"F\" / \"S\" pattern string)");
    if (given < needed)
      fail(kOp, j.where, key, " = ", json_excerpt(v), " is invalid: must give ",
           indexed_only && needed < layers ? "an entry for each layer up to its last indexed_attention layer "
                                           : "an entry for each of num_hidden_layers = ",
           indexed_only && needed < layers ? std::to_string(needed - 1) : std::to_string(layers),
           " (transformers 5.23 raises IndexError)");
    // A pattern string is mapped whole ({"F": "full", "S": "shared"}[c], configuration_glm_moe_dsa.py
    // GlmMoeDsaConfig.__post_init__): another letter raises KeyError even past the last layer.
    for (int64_t i = 0; i < given; ++i)
      if ((i < layers || v.is_string()) && names[i] != "full" && names[i] != "shared")
        fail(kOp, j.where, key, " = ", json_excerpt(v),
             " is invalid: entries must be \"full\" / \"shared\" (\"F\" / \"S\" in a pattern string)");
    for (int64_t i = 0; i < std::min(given, layers); ++i) shared[i] = names[i] == "shared";
    if (given > layers)
      warnings.push_back(j.where + key + " = " + json_excerpt(v) + " has " + std::to_string(given) +
                         " entries: the " + std::to_string(given - layers) +
                         " past num_hidden_layers = " + std::to_string(layers) +
                         " are ignored, as transformers 5.23 does (each layer reads its own entry)");
    if (shared[0] && !indexed_only)
      fail(kOp, j.where, key, ": layer 0 is \"shared\" but no earlier layer selects keys");
    return shared;
  }
  const int64_t freq = std::max<int64_t>(j.int_or("index_topk_freq", 1), 1);
  const int64_t offset = j.int_or("index_skip_topk_offset", 2);
  for (int64_t i = 0; i < layers; ++i) shared[i] = std::max<int64_t>(i - offset + 1, 0) % freq != 0;
  return shared;
}
}  // namespace

// MiniMax-M3 (configuration_minimax_m3_vl.py, modeling_minimax_m3_vl.py MiniMaxM3VLIndexer) on its
// minimax_m3_sparse layers: index_n_heads query heads and one key head of index_head_dim, both rotated on
// their first dims with the layer's cos / sin in halves (cos[..., :index_head_dim]); unscaled fp32 scores,
// max-pooled per key block of index_block_size; the query's block and the index_local_blocks - 1 before
// it forced in; the top index_topk_blocks blocks kept. The legacy sparse_attention_config's names win.
std::vector<std::optional<TopkIndexer>> minimax_m3_indexers(Obj& j, const Model& m,
                                                            const std::vector<std::string>& types,
                                                            std::vector<std::string>& warnings) {
  std::vector<std::optional<TopkIndexer>> out(static_cast<size_t>(m.layers));
  const json none = json::object();
  const json& legacy = j.has("sparse_attention_config") && j.at("sparse_attention_config").is_object()
                           ? j.at("sparse_attention_config")
                           : none;
  auto value = [&](const char* flat, const char* old, int64_t fallback, int64_t least = 1) {
    const json* v = has(legacy, old) ? &legacy.at(old) : j.has(flat) ? &j.at(flat) : nullptr;
    if (!v) return fallback;
    if (!v->is_number_integer() || v->get<int64_t>() < least || v->get<int64_t>() > kMaxModelLayers * 64)
      fail(kOp, j.where, has(legacy, old) ? std::string("sparse_attention_config.") + old : std::string(flat),
           " = ", json_excerpt(*v), " is invalid: must be an integer >= ", least);
    return v->get<int64_t>();
  };
  TopkIndexer ix;
  ix.heads = value("index_n_heads", "sparse_num_index_heads", 4);
  ix.head_dim = value("index_head_dim", "sparse_index_dim", 128);
  ix.block_size = value("index_block_size", "sparse_block_size", 128);
  ix.topk = value("index_topk_blocks", "sparse_topk_blocks", 16);
  ix.local_blocks = value("index_local_blocks", "sparse_local_block", 1, 0);  // 0: no block forced in
  ix.rope.layout = RopeLayout::half;
  bool any = false;
  for (int64_t i = 0; i < m.layers; ++i)
    if (types[i] == "minimax_m3_sparse") out[i] = ix, any = true;
  if (any)
    warnings.push_back(
        "minimax_m3_sparse (MiniMax-M3's block indexer): each query attends to the index_topk_blocks = " +
        std::to_string(ix.topk) + " blocks of index_block_size = " + std::to_string(ix.block_size) +
        " keys its indexer scores highest, its own block always; LayerPlan::attention_config() is dense "
        "attention, exact while a query sees at most that many blocks");
  return out;
}

// Qwen4-Exp's QSA (configuration_qwen4_exp.py Qwen4ExpTextConfig and its validate_architecture;
// modeling_qwen4_exp.py Qwen4ExpTextQSAIndexer) on every indexed_attention layer: indexer_n_heads query heads
// and one key head (indexer_kv_heads must be 1) of indexer_head_dim, the query rotated at its position and
// each block of indexer_compress_ratio keys mean-pooled and rotated at the block's first position, on the
// first rotated dims in halves; the top indexer_budget / ratio blocks and the incomplete tail kept. All five
// keys or none (the model cannot be built without them).
std::vector<std::optional<TopkIndexer>> qwen4_exp_indexers(Obj& j, const Model& m,
                                                           const std::vector<std::string>& types,
                                                           std::vector<std::string>& warnings) {
  const char* keys[] = {"indexer_n_heads", "indexer_kv_heads", "indexer_head_dim", "indexer_budget",
                        "indexer_compress_ratio"};
  int given = 0;
  for (const char* k : keys) given += j.has(k) ? 1 : 0;
  if (given != 5)
    fail(kOp, j.where,
         given == 0 ? "indexer_n_heads, indexer_kv_heads, indexer_head_dim, indexer_budget and "
                      "indexer_compress_ratio are missing"
                    : "indexer_* must be given all five or none",
         ": qwen4_exp_text's indexed_attention layers build their QSA indexer from them (transformers 5.23 "
         "cannot build the model without them)");
  auto positive = [&](const char* k) {
    const int64_t v = j.integer(k);
    if (v < 1 || v > kMaxModelLayers * 1024) fail(kOp, j.where, k, " = ", v, " is invalid: must be >= 1");
    return v;
  };
  if (positive("indexer_kv_heads") != 1)
    fail(kOp, j.where, "indexer_kv_heads = ", j.integer("indexer_kv_heads"),
         " is invalid: Qwen4-Exp's QSA has 1");
  TopkIndexer ix;
  ix.heads = positive("indexer_n_heads");
  ix.head_dim = positive("indexer_head_dim");
  ix.block_size = positive("indexer_compress_ratio");
  const int64_t budget = positive("indexer_budget");
  if (budget % ix.block_size != 0)
    fail(kOp, j.where, "indexer_budget = ", budget,
         " is not a multiple of indexer_compress_ratio = ", ix.block_size);
  ix.topk = budget / ix.block_size;
  ix.pooled_keys = true;
  ix.rope.layout = RopeLayout::half;
  std::vector<std::optional<TopkIndexer>> out(static_cast<size_t>(m.layers));
  bool any = false;
  for (int64_t i = 0; i < m.layers; ++i)
    if (types[i] == "indexed_attention") out[i] = ix, any = true;
  if (any)
    warnings.push_back(
        "indexed_attention (Qwen4-Exp's QSA): each query attends to the indexer_budget / "
        "indexer_compress_ratio = " +
        std::to_string(ix.topk) + " blocks of " + std::to_string(ix.block_size) +
        " keys its indexer scores highest and the incomplete tail; LayerPlan::attention_config() "
        "is dense attention, exact while a query sees at most indexer_budget = " +
        std::to_string(budget) + " keys");
  return out;
}

std::vector<std::optional<TopkIndexer>> topk_indexers(Obj& j, const Model& m,
                                                      const std::vector<std::string>& types,
                                                      std::vector<std::string>& warnings) {
  // The model's own kind where its row names one (axk2: its own index_n_heads), else its family's.
  const Family& row = m.family->indexer != IndexerKind::none ? *m.family : *m.rules;
  const IndexerKind kind = row.indexer;
  if (kind == IndexerKind::block_topk) return minimax_m3_indexers(j, m, types, warnings);
  if (kind == IndexerKind::qsa_block) return qwen4_exp_indexers(j, m, types, warnings);
  if (kind == IndexerKind::kpool) {
    // Glm5NextTextIndexer: no RoPE (nothing positional to plan), pools of index_kpool keys averaged by
    // learned gates, the top index_topk / index_kpool pools and the incomplete tail kept; indexer_types as
    // GLM-5's, over every layer. A "shared" layer reuses the selection the layer before it returns, which a
    // linear layer does not (modeling_glm5_next.py: "Shared DSA layers require top-k indices ...").
    // A shared layer returns no selection of its own (modeling_glm5_next.py: only a full indexer's layer
    // passes its top-k on): the layer before a shared one must be a full indexed layer.
    const std::vector<bool> shared = glm_shared_layers(j, m.layers, warnings, &types);
    for (int64_t i = 0; i < m.layers; ++i)
      if (types[i] == "indexed_attention" && shared[i] &&
          (i == 0 || types[i - 1] != "indexed_attention" || shared[i - 1]))
        fail(kOp, j.where, "indexer_types / index_topk_pattern make layer ", i,
             " \"shared\", but the layer before it runs no indexer of its own (transformers 5.23 raises)");
    const int64_t topk = j.int_or("index_topk", 2048), kpool = j.int_or("index_kpool", 16);
    if (kpool < 1 || topk < kpool || topk % kpool != 0)
      fail(kOp, j.where, "index_topk = ", topk, " and index_kpool = ", kpool,
           " are invalid: index_topk must be a positive multiple of index_kpool");
    for (const char* k : {"index_n_heads", "index_head_dim", "index_kpool_always_select_tail"})
      j.read.insert(k);
    if (std::find(types.begin(), types.end(), "indexed_attention") != types.end())
      warnings.push_back(
          "indexed_attention (GLM-5-Next's k-pool indexer, without RoPE): each query attends to the "
          "index_topk = " +
          std::to_string(topk) + " keys of the pools of index_kpool = " + std::to_string(kpool) +
          " keys its indexer scores highest (and the incomplete tail), chosen by content; "
          "LayerPlan::attention_config() is dense attention, exact while a query sees at most that many "
          "keys");
    return std::vector<std::optional<TopkIndexer>>(static_cast<size_t>(m.layers));
  }
  std::vector<std::optional<TopkIndexer>> out(static_cast<size_t>(m.layers));
  const bool glm = kind == IndexerKind::dsa_pairs_shared;
  const bool hy = kind == IndexerKind::dsa_flipped;
  // dots3_note_text (modeling_dots3_note.py Dots3NoteTextIndexer): on its indexed_attention layers only
  // (Dots3NoteTextAttention.__init__), GLM-5's indexer: index_n_heads heads of index_head_dim (its __init__),
  // the first qk_rope_head_dim dims rotated in pairs (its forward) with the layer's cos / sin, no shared
  // layers. The rotated width is the layer type's (set in assemble.cc; src/model/dots3.cc checked it
  // fits).
  const bool dots3 = kind == IndexerKind::dsa_pairs_indexed;
  if (kind == IndexerKind::none) return out;
  TopkIndexer ix;
  ix.topk = j.int_or("index_topk", 2048);
  ix.heads = j.int_or("index_n_heads", row.index_heads);  // configuration_<type>.py's index_n_heads
  ix.head_dim = j.int_or("index_head_dim", 128);
  if (ix.topk < 1) fail(kOp, j.where, "index_topk = ", ix.topk, " is invalid: must be >= 1");
  if (ix.heads < 1 || ix.heads > kMaxIndexHeads)
    fail(kOp, j.where, "index_n_heads = ", ix.heads, " is invalid: must be in [1, ", kMaxIndexHeads, "]");
  // The indexer rotates the first qk_rope_head_dim dims of its head with the layer's cos / sin
  // (modeling_deepseek_v32.py DeepseekV32Indexer.forward: split rope-first).
  if ((!dots3 && ix.head_dim < m.head_dim) || ix.head_dim < 1 || ix.head_dim > kMaxModelHeadDim)
    fail(kOp, j.where, "index_head_dim = ", ix.head_dim,
         " is invalid: must be in [qk_rope_head_dim = ", m.head_dim, ", ", kMaxModelHeadDim, "]");
  ix.rotary_lo = 0;
  ix.rotary_hi = m.head_dim;
  if (hy) {  // modeling_hy_v4.py HYV4Indexer: "Flipped RoPE position (later portion instead of the first)"
    ix.rotary_lo = ix.head_dim - m.head_dim;
    ix.rotary_hi = ix.head_dim;
  }
  // Layout: DeepSeek-V3.2's indexer rotates halves ("The indexer uses NON-interleaved (half-split) RoPE —
  // unlike the main MLA attention", modeling_deepseek_v32.py DeepseekV32Indexer.forward; DeepSeek's
  // inference/model.py likewise), GLM-5's pairs (modeling_glm_moe_dsa.py GlmMoeDsaIndexer.forward). The
  // checkpoints' indexer_rope_interleave is not read by transformers 5.
  const bool pairs = glm || dots3;
  ix.rope.layout = pairs ? RopeLayout::interleaved : RopeLayout::half;  // (hy_v4: halves)
  if (j.has("indexer_rope_interleave") && j.boolean("indexer_rope_interleave") != pairs)
    warnings.push_back(j.where + "indexer_rope_interleave = " +
                       json_excerpt(j.at("indexer_rope_interleave")) + " is ignored: transformers 5's " +
                       m.type + " indexer rotates " + (pairs ? "interleaved pairs" : "halves"));
  std::vector<bool> shared =
      glm ? glm_shared_layers(j, m.layers, warnings) : std::vector<bool>(m.layers, false);
  if (hy) {
    // configuration_hy_v4.py HYV4Config.__post_init__: indexer_types, else full on layer 0 and every
    // (i - 1) % 4 == 0.
    if (j.has("indexer_types")) {
      shared = glm_shared_layers(j, m.layers, warnings);
    } else {
      for (int64_t i = 0; i < m.layers; ++i) shared[i] = !(i == 0 || (i - 1) % 4 == 0);
    }
  }
  bool any = false;
  for (int64_t i = 0; i < m.layers; ++i) {
    if (dots3 && types[i] != "indexed_attention") continue;
    out[i] = ix;
    out[i]->shared = shared[i];
    any = true;
  }
  if (any)
    warnings.push_back(
        "indexed_attention (DeepSeek sparse attention): each query attends to the index_topk = " +
        std::to_string(ix.topk) +
        " visible keys its indexer scores highest; LayerPlan::attention_config() is dense "
        "attention, exact while a query sees at most that many keys");
  return out;
}

}  // namespace posenc::detail
