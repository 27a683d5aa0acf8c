// src/model/deepseek_v4.cc: DeepSeek-V4 (transformers 5.23 models/deepseek_v4; DeepSeek's inference/model.py
// agrees on everything positional). Per layer (configuration_deepseek_v4.py __post_init__):
//   layer_types: the config's, else the legacy compress_ratios (0 sliding_attention, 4
//     compressed_sparse_attention, 128 heavily_compressed_attention; the list is cut to num_hidden_layers:
//     a checkpoint's last entry belongs to its MTP block), else HCA, HCA, then CSA / HCA alternating;
//   RoPE: interleaved pairs (rotate_half of x[0::2], x[1::2], cos repeat_interleave'd) on the LAST
//     qk_rope_head_dim = head_dim * partial_rotary_factor dims of the 512-dim head (apply_rotary_pos_emb:
//     x[..., -rope_dim:]); sliding layers use rope_parameters["main"] (rope_theta, default type), the
//     compressed layers rope_parameters["compress"] (compress_rope_theta and the legacy rope_scaling, yarn
//     with attention_factor 1.0 unless given) for queries, window keys and compressed entries alike
//     (DeepseekV4Attention.rope_layer_type);
//   attention: causal, sliding_window keys (with the query's), a learned sink per head, scale head_dim^-0.5;
//     K = V (one kv head, kv_proj rotated), the output rotated back at the query's position on the rotated
//     dims (LayerPlan::rotated_values); compressed layers also attend to compressed entries
//     (LayerPlan::compressed), and CSA layers' indexer picks index_topk of those
//     (TopkIndexer::over_compressed: its own 128-dim head, the compress RoPE on its last qk_rope_head_dim
//     dims).
#include <cmath>
#include <string>
#include <vector>

#include "src/model/document.h"
#include "src/model/parse.h"
#include "src/model/rope_types.h"

namespace posenc::detail {
namespace {
const char* const kTypes[3] = {"sliding_attention", "compressed_sparse_attention",
                               "heavily_compressed_attention"};

std::vector<std::string> v4_layer_types(Obj& j, int64_t n) {
  std::vector<std::string> types;
  if (j.has("layer_types")) {
    const json& v = j.at("layer_types");
    if (!v.is_array()) fail(kOp, j.where, "layer_types = ", json_excerpt(v), " is invalid: must be a list");
    for (const json& e : v) {
      if (!e.is_string() || (e != kTypes[0] && e != kTypes[1] && e != kTypes[2]))
        fail(kOp, j.where, "layer_types contains ", json_excerpt(e), ": DeepSeek-V4's are ", kTypes[0], ", ",
             kTypes[1], " and ", kTypes[2]);
      types.push_back(e.get<std::string>());
    }
    if (static_cast<int64_t>(types.size()) < n)  // the config class cuts a longer list (its MTP entries)
      fail(kOp, j.where, "layer_types has ", types.size(), " entries, fewer than num_hidden_layers = ", n);
    types.resize(static_cast<size_t>(n));
    j.read.insert("compress_ratios");  // popped by the config class, unused when layer_types is given
    return types;
  }
  if (j.has("compress_ratios")) {
    for (int64_t r : j.integers("compress_ratios", 0, 1 << 20)) {
      if (r != 0 && r != 4 && r != 128)
        fail(kOp, j.where, "compress_ratios contains ", r,
             ": transformers 5 maps 0, 4 and 128 only (KeyError)");
      types.push_back(r == 0 ? kTypes[0] : r == 4 ? kTypes[1] : kTypes[2]);
    }
    if (static_cast<int64_t>(types.size()) < n)
      fail(kOp, j.where, "compress_ratios has ", types.size(),
           " entries, fewer than num_hidden_layers = ", n);
    types.resize(static_cast<size_t>(n));
    return types;
  }
  for (int64_t i = 0; i < n; ++i) types.push_back(i < 2 ? kTypes[2] : i % 2 ? kTypes[1] : kTypes[2]);
  return types;
}

// One rope dict as the rope init functions read it, over the last rope_dims dims alone.
RopeConfig v4_rope(const json& dict, const std::string& where, Model& m, double theta, double prf) {
  Obj d{dict, where, {}};
  std::optional<double> unused_beta;
  RopeConfig c = rope_from_dict(d, m, theta, prf, false, unused_beta);
  c.head_dim = c.effective_rotary_dim();  // the rotated dims are the head's last: rotary_lo says where
  c.rotary_dim = 0;
  d.read.insert("truncate");  // _compute_yarn_parameters reads the top-level dict's: always true here
  if (d.has("truncate") && !d.boolean("truncate"))
    m.warnings->push_back(where +
                          "truncate = false is not read by transformers 5.23 for deepseek_v4 (its yarn "
                          "reads the top-level rope_parameters, which has none): true");
  c.scaling.truncate = true;
  d.warn_unread(*m.warnings, "deepseek_v4");
  return c;
}
}  // namespace

ModelPositions deepseek_v4_positions(Obj& j, Model& m) {
  ModelPositions out;
  out.model_type = "deepseek_v4";
  m.warnings = &out.warnings;
  const int64_t n = m.layers, head = j.int_or("head_dim", 512);
  if (head < 2 || head > kMaxModelHeadDim) fail(kOp, j.where, "head_dim = ", head, " is invalid");
  // partial_rotary_factor: the config's, else qk_rope_head_dim / head_dim (legacy), else 64 / 512.
  double prf = 64.0 / 512.0;
  if (j.has("partial_rotary_factor"))
    prf = j.num("partial_rotary_factor");
  else if (j.has("qk_rope_head_dim"))
    prf = static_cast<double>(j.integer("qk_rope_head_dim")) / static_cast<double>(head);
  if (!(prf > 0 && prf <= 1))
    fail(kOp, j.where, "partial_rotary_factor = ", prf, " is invalid: must be in (0, 1]");
  m.head_dim = head;
  m.max_pos = j.int_or("max_position_embeddings", 1048576);
  // convert_rope_params_to_dict takes `rope_scaling or rope_parameters`; a nested {main, compress} is kept,
  // its dicts completed by standardize_rope_params from the top-level rope_theta and partial_rotary_factor
  // (not from qk_rope_head_dim: without a factor such a dict rotates the whole head).
  json main, compress;
  const bool scaling =
      j.has("rope_scaling") && j.at("rope_scaling").is_object() && !j.at("rope_scaling").empty();
  j.read.insert("rope_scaling");
  const json* given = scaling                    ? &j.at("rope_scaling")
                      : j.has("rope_parameters") ? &j.at("rope_parameters")
                                                 : nullptr;
  if (scaling && j.has("rope_parameters"))
    out.warnings.push_back(
        "rope_parameters is ignored: transformers 5 reads rope_scaling when both are given");
  if (given && !given->is_object())
    fail(kOp, j.where, "rope_parameters = ", json_excerpt(*given), " is invalid");
  const double theta = j.num_or("rope_theta", 1e4);
  j.read.insert("compress_rope_theta");
  double dict_prf = prf;
  if (given && given->contains("main") && given->contains("compress") && given->at("main").is_object() &&
      given->at("compress").is_object()) {
    main = given->at("main"), compress = given->at("compress");
    dict_prf = j.has("partial_rotary_factor") ? prf : 1.0;
  } else {
    json flat = given ? *given : json::object();
    flat.erase("main"), flat.erase("compress");
    main = {{"rope_type", "default"}, {"rope_theta", theta}};
    compress = flat;
    compress["rope_theta"] = j.num_or("compress_rope_theta", 160000.0);
    // __post_init__ writes the config's factor over the dict's own.
    if (compress.contains("partial_rotary_factor") && compress["partial_rotary_factor"] != prf)
      out.warnings.push_back(
          "rope_scaling.partial_rotary_factor = " + json_excerpt(compress["partial_rotary_factor"]) +
          " is replaced by the config's " + std::to_string(prf) + " (configuration_deepseek_v4.py)");
    compress["partial_rotary_factor"] = prf;
    set_default_rope_type(compress);
    compress.erase("type");
    if (compress["rope_type"] == "yarn" && !compress.contains("attention_factor"))
      compress["attention_factor"] = 1.0;
  }
  const RopeConfig main_rope = v4_rope(main, "rope_parameters.main.", m, theta, dict_prf);
  const RopeConfig compress_rope = v4_rope(compress, "rope_parameters.compress.", m, theta, dict_prf);
  // compress_rates: dict, default {CSA: 4, HCA: 128}; legacy compress_rate_csa / compress_rate_hca.
  int64_t rate_csa = 4, rate_hca = 128;
  if (j.has("compress_rates")) {  // the model reads both entries (a missing one is a KeyError there)
    Obj r{j.at("compress_rates"), j.where + "compress_rates.", {}};
    if (!r.has(kTypes[1]) || !r.has(kTypes[2]))
      fail(kOp, j.where, "compress_rates = ", json_excerpt(j.at("compress_rates")), " is invalid: needs ",
           kTypes[1], " and ", kTypes[2]);
    rate_csa = r.integer(kTypes[1]), rate_hca = r.integer(kTypes[2]);
    r.warn_unread(out.warnings, "deepseek_v4");
  }
  rate_csa = j.int_or("compress_rate_csa", rate_csa), rate_hca = j.int_or("compress_rate_hca", rate_hca);
  for (const int64_t rate : {rate_csa, rate_hca})
    if (rate < 1 || rate > (1 << 20))
      fail(kOp, j.where, "compress rate ", rate, " is invalid: must be in [1, 2^20]");
  const int64_t window = j.int_or("sliding_window", 128);
  if (window < 1) fail(kOp, j.where, "sliding_window = ", window, " is invalid: must be >= 1");
  TopkIndexer ix;
  ix.topk = j.int_or("index_topk", 512);
  ix.heads = j.int_or("index_n_heads", 64);
  ix.head_dim = j.int_or("index_head_dim", 128);
  ix.over_compressed = true;
  if (ix.topk < 1 || ix.heads < 1 || ix.heads > 4096 || ix.head_dim < 1 || ix.head_dim > kMaxModelHeadDim)
    fail(kOp, j.where, "index_topk = ", ix.topk, ", index_n_heads = ", ix.heads,
         ", index_head_dim = ", ix.head_dim, " are invalid");
  // apply_rotary_pos_emb rotates the last 2 * len(inv_freq) dims: each rope dict's own rotated size.
  for (const RopeConfig* r : {&main_rope, &compress_rope})
    if (r->head_dim > head)
      fail(kOp, j.where, "a rope dict rotates ", r->head_dim, " dims of a ", head, "-dim head");
  if (ix.head_dim < compress_rope.head_dim)
    fail(kOp, j.where, "index_head_dim = ", ix.head_dim, " is invalid: the compress RoPE rotates ",
         compress_rope.head_dim, " of its dims");
  ix.rope = compress_rope;
  // The index head's last dims (modeling_deepseek_v4.py DeepseekV4Indexer.forward).
  ix.rotary_lo = ix.head_dim - compress_rope.head_dim, ix.rotary_hi = ix.head_dim;

  const std::vector<std::string> types = v4_layer_types(j, n);
  out.num_layers = n;
  out.num_heads = m.heads;
  out.max_position_embeddings = m.max_pos;
  for (int64_t i = 0; i < n; ++i) {
    LayerPlan p;
    p.layer = i;
    p.layer_type = types[i];
    p.position = PositionMethod::rope;
    const bool sliding = types[i] == kTypes[0];
    p.rope = sliding ? main_rope : compress_rope;
    p.rotary_lo = head - p.rope->head_dim, p.rotary_hi = head;
    p.qk_head_dim = p.v_head_dim = head;
    p.rotated_values = true;
    LayerAttention& a = p.attention;
    a.causal = true;
    a.window = window;
    a.sinks = true;
    a.softmax_scale = 1.0 / std::sqrt(static_cast<double>(head));
    if (!sliding) {
      const bool csa = types[i] == kTypes[1];
      p.compressed = CompressedKeys{csa ? rate_csa : rate_hca, csa};
      if (csa) p.indexer = ix;
    }
    out.layers.push_back(std::move(p));
  }
  j.read.insert("hc_sinkhorn_iters");  // the hyper-connections' Sinkhorn iterations, not attention sinks
  j.warn_unread(out.warnings, "deepseek_v4");
  return out;
}

}  // namespace posenc::detail
