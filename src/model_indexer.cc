// src/model_indexer.cc: DeepSeek sparse attention's lightning indexer per layer (deepseek_v32 and
// glm_moe_dsa in transformers 5.23, and axk2 with DeepSeek-V3.2's; posenc/model.h TopkIndexer).
#include <algorithm>
#include <string>
#include <vector>

#include "src/config_json.h"
#include "src/model_parse.h"

namespace posenc::detail {
namespace {
constexpr int64_t kMaxIndexHeads = 1 << 12;

// GLM-5's indexer_types: "full" runs the layer's own indexer, "shared" reuses the previous layer's
// selection (configuration_glm_moe_dsa.py L137-148): the saved list, else the index_topk_pattern
// string ("F"/"S") or list, else the index_topk_freq / index_skip_topk_offset schedule.
std::vector<bool> glm_shared_layers(Obj& j, int64_t layers) {
  std::vector<bool> shared(static_cast<size_t>(layers), false);
  const char* key = j.has("indexer_types") ? "indexer_types" : "index_topk_pattern";
  if (j.has(key)) {
    const json& v = j.at(key);
    std::vector<std::string> names;
    if (v.is_string())
      for (char c : v.get<std::string>()) names.push_back(c == 'F' ? "full" : c == 'S' ? "shared" : "?");
    else if (v.is_array())
      for (const json& e : v) names.push_back(e.is_string() ? e.get<std::string>() : "?");
    if (static_cast<int64_t>(names.size()) != layers)
      fail(kOp, j.where, key, " = ", json_excerpt(v), " is invalid: must give num_hidden_layers = ", layers,
           " entries");
    for (int64_t i = 0; i < layers; ++i) {
      if (names[i] != "full" && names[i] != "shared")
        fail(kOp, j.where, key, " = ", json_excerpt(v),
             " is invalid: entries must be \"full\" / \"shared\" (\"F\" / \"S\" in a pattern string)");
      shared[i] = names[i] == "shared";
    }
    if (shared[0]) fail(kOp, j.where, key, ": layer 0 is \"shared\" but no earlier layer selects keys");
    return shared;
  }
  const int64_t freq = std::max<int64_t>(j.int_or("index_topk_freq", 1), 1);
  const int64_t offset = j.int_or("index_skip_topk_offset", 2);
  for (int64_t i = 0; i < layers; ++i) shared[i] = std::max<int64_t>(i - offset + 1, 0) % freq != 0;
  return shared;
}
}  // namespace

std::vector<std::optional<TopkIndexer>> topk_indexers(Obj& j, const Model& m,
                                                      std::vector<std::string>& warnings) {
  std::vector<std::optional<TopkIndexer>> out(static_cast<size_t>(m.layers));
  const bool glm = m.type == "glm_moe_dsa";
  if (m.type != "deepseek_v32" && !glm) return out;
  TopkIndexer ix;
  ix.topk = j.int_or("index_topk", 2048);
  const bool axk2 = m.family && std::string(m.family->model_type) == "axk2";  // configuration_axk2.py: 16
  ix.heads = j.int_or("index_n_heads", glm ? 32 : axk2 ? 16 : 64);
  ix.head_dim = j.int_or("index_head_dim", 128);
  if (ix.topk < 1) fail(kOp, j.where, "index_topk = ", ix.topk, " is invalid: must be >= 1");
  if (ix.heads < 1 || ix.heads > kMaxIndexHeads)
    fail(kOp, j.where, "index_n_heads = ", ix.heads, " is invalid: must be in [1, ", kMaxIndexHeads, "]");
  // The indexer rotates the first qk_rope_head_dim dims of its head with the layer's cos / sin
  // (modeling_deepseek_v32.py L214-220: split rope-first).
  if (ix.head_dim < m.head_dim || ix.head_dim > kMaxModelHeadDim)
    fail(kOp, j.where, "index_head_dim = ", ix.head_dim,
         " is invalid: must be in [qk_rope_head_dim = ", m.head_dim, ", ", kMaxModelHeadDim, "]");
  ix.rotary_lo = 0;
  ix.rotary_hi = m.head_dim;
  // Layout: DeepSeek-V3.2's indexer rotates halves ("The indexer uses NON-interleaved (half-split) RoPE
  // — unlike the main MLA attention", modeling_deepseek_v32.py L219; DeepSeek's inference/model.py
  // likewise), GLM-5's pairs (modeling_glm_moe_dsa.py L220-221). The checkpoints' indexer_rope_interleave
  // is not read by transformers 5.
  ix.rope.layout = glm ? RopeLayout::interleaved : RopeLayout::half;
  if (j.has("indexer_rope_interleave") && j.boolean("indexer_rope_interleave") != glm)
    warnings.push_back(j.where + "indexer_rope_interleave = " +
                       json_excerpt(j.at("indexer_rope_interleave")) + " is ignored: transformers 5's " +
                       m.type + " indexer rotates " + (glm ? "interleaved pairs" : "halves"));
  const std::vector<bool> shared = glm ? glm_shared_layers(j, m.layers) : std::vector<bool>(m.layers, false);
  for (int64_t i = 0; i < m.layers; ++i) {
    out[i] = ix;
    out[i]->shared = shared[i];
  }
  warnings.push_back(
      "indexed_attention (DeepSeek sparse attention): each query attends to the index_topk = " +
      std::to_string(ix.topk) +
      " visible keys its indexer scores highest; LayerPlan::attention_config() is dense "
      "attention, exact while a query sees at most that many keys");
  return out;
}

}  // namespace posenc::detail
