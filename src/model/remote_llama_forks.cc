// src/model/remote_llama_forks.cc: remote-code families whose modeling files are forks of transformers
// 4's Llama, planned from the authors' files (read in mirrors; the hub's own copies were not reachable):
//   minicpm:  OpenBMB/MiniCPM model/modeling_minicpm.py, configuration_minicpm.py (MiniCPM 1 / 2, 2B-128k);
//             MiniCPM4's modeling_minicpm.py (copies of openbmb/MiniCPM4-0.5B's; MiniCPMLongRoPE)
//   baichuan: baichuan-inc/Baichuan-7B models/modeling_baichuan.py (RoPE); Baichuan-13B's and Baichuan2's
//             modeling_baichuan.py (Baichuan2-7B: RoPE; the 13B models: ALiBi, _get_interleave slopes)
#include <cmath>
#include <string>

#include "src/model/document.h"
#include "src/model/remote.h"

namespace posenc::detail::remote {
namespace {

bool is_half(const std::string& dtype) { return dtype == "float16" || dtype == "bfloat16"; }

double factor_of(const json& s, const std::string& where) {
  if (!s.contains("factor") || !s.at("factor").is_number())
    fail(kOp, where, "factor = ", s.contains("factor") ? json_excerpt(s.at("factor")) : "(missing)",
         " is invalid: must be a number");
  return s.at("factor").get<double>();
}

std::vector<double> factor_list(const json& s, const char* key, int64_t pairs) {
  if (!s.contains(key)) fail(kOp, "rope_scaling.", key, " is missing: MiniCPMLongRoPE reads it");
  if (!s.at(key).is_array())
    fail(kOp, "rope_scaling.", key, " = ", json_excerpt(s.at(key)), " is invalid: must be a list of numbers");
  std::vector<double> out;
  for (const json& e : s.at(key)) {
    if (!e.is_number()) fail(kOp, "rope_scaling.", key, " contains ", e.dump(), ": must be numbers");
    out.push_back(e.get<double>());
  }
  if (static_cast<int64_t>(out.size()) != pairs)
    fail(kOp, "rope_scaling.", key, " has ", out.size(), " entries: the head's ", pairs,
         " pairs need one each");
  return out;
}

}  // namespace

// MiniCPMRotaryEmbedding: rotate_half on the whole head (hidden_size / num_attention_heads; no head_dim key),
// inv_freq = rope_theta^(-2i/d) in fp32, scale head^-0.5 (eager: / sqrt(head_dim); flash / SDPA default).
// rope_scaling: MiniCPM 1 / 2 validate {"type": "linear" | "dynamic", "factor": float > 1}
// (_rope_scaling_validation); MiniCPM4 reads rope_type: linear, dynamic or longrope (no validation). linear:
// t / factor; dynamic: base (factor L / max_pos - (factor - 1))^(d / (d - 2)) once L > max_pos, kept for
// later calls. longrope (MiniCPMLongRoPE): angle p inv_freq_i / ext_i, cos and sin times
// sqrt(1 + ln(max_pos / original) / ln(original)); ext = long_factor when the table's length exceeds
// original_max_position_embeddings: built at max_position_embeddings, rebuilt when a call is longer, never
// shrunk.
ModelPositions minicpm(Obj& j, std::vector<std::string>& warnings) {
  const int64_t hidden = positive(j, {"hidden_size"}, 4096);
  const int64_t heads = positive(j, {"num_attention_heads"}, 32);
  const int64_t layers = positive(j, {"num_hidden_layers"}, 32);
  const int64_t head = head_size("minicpm", hidden, heads);
  if (head % 2 != 0) fail(kOp, "hidden_size / num_attention_heads = ", head, " is invalid: must be even");
  if (j.has("head_dim") && j.integer("head_dim") != head)
    warnings.push_back(
        "head_dim = " + excerpt(j, "head_dim") +
        " is not read by modeling_minicpm.py: its heads are hidden_size / num_attention_heads = " +
        std::to_string(head));
  const int64_t max_pos = positive(j, {"max_position_embeddings"}, 2048);
  RopeConfig rope;
  rope.head_dim = head;
  rope.base = checked_base("rope_theta", j.num_or("rope_theta", 10000.0));
  rope.max_position_embeddings = max_pos;
  if (j.has("rope_scaling")) {
    const json& s = j.at("rope_scaling");
    if (!s.is_object()) fail(kOp, "rope_scaling = ", json_excerpt(s), " is invalid: must be an object");
    const bool v4 = s.contains("rope_type");
    if (!v4 && !s.contains("type"))
      fail(kOp, "rope_scaling = ", json_excerpt(s),
           " is invalid: MiniCPM 1 / 2 read its \"type\", MiniCPM4 its \"rope_type\"");
    if (!v4 && (s.size() != 2 || !s.contains("factor") || !s.at("factor").is_number_float() ||
                !(s.at("factor").get<double>() > 1)))
      fail(kOp, "rope_scaling = ", json_excerpt(s),
           " is invalid for MiniCPM: must be {\"type\": \"linear\" | \"dynamic\", \"factor\": float > 1}");
    const json& kind = s.at(v4 ? "rope_type" : "type");
    const std::string name = kind.is_string() ? kind.get<std::string>() : "";
    if (name == "linear" || name == "dynamic") {
      rope.scaling.factor = factor_of(s, "rope_scaling.");
      rope.scaling.type = name == "linear" ? RopeScalingType::linear : RopeScalingType::dynamic;
      if (name == "dynamic")
        warnings.push_back(
            "rope_scaling 'dynamic': MiniCPM's code keeps a grown base for later, shorter calls and "
            "its cache keeps each key rotated with the base of its step; posenc's frequencies are "
            "those of the call's length");
    } else if (name == "longrope" && v4) {
      const json* o = s.contains("original_max_position_embeddings")
                          ? &s.at("original_max_position_embeddings")
                          : nullptr;
      if (!o)
        fail(kOp,
             "rope_scaling.original_max_position_embeddings is missing: MiniCPMLongRoPE reads it there, ",
             "not at the top level");
      if (!o->is_number() || !(o->get<double>() >= 2) || o->get<double>() > 1e15 ||
          std::floor(o->get<double>()) != o->get<double>())
        fail(kOp, "rope_scaling.original_max_position_embeddings = ", json_excerpt(*o),
             " is invalid: must be an integer > 1");
      const auto original = static_cast<int64_t>(o->get<double>());
      rope.scaling.type = RopeScalingType::longrope;
      rope.scaling.original_max_position_embeddings = original;
      rope.scaling.short_factor = factor_list(s, "short_factor", head / 2);
      rope.scaling.long_factor = factor_list(s, "long_factor", head / 2);
      const double ratio = static_cast<double>(max_pos) / static_cast<double>(original);
      const double inside = 1 + std::log(ratio) / std::log(static_cast<double>(original));
      if (!(inside > 0))
        fail(kOp, "max_position_embeddings = ", max_pos, " and original_max_position_embeddings = ", original,
             " give MiniCPMLongRoPE's attention factor sqrt(", inside, "): invalid");
      rope.scaling.attention_factor = std::sqrt(inside);
      if (max_pos > original) {
        // The table is built at max_position_embeddings > original: long factors at every length.
        rope.scaling.short_factor = rope.scaling.long_factor;
      } else {
        warnings.push_back(
            "rope_scaling 'longrope': MiniCPM4's table switches to long_factor the first time a call's "
            "cache exceeds original_max_position_embeddings = " +
            std::to_string(original) +
            " and keeps it for every later call (earlier keys stay as rotated); posenc's factors are "
            "those of the call's length, as transformers' longrope");
      }
    } else {
      fail(kOp, "rope_scaling.", v4 ? "rope_type" : "type", " = ", json_excerpt(kind),
           " is not supported by MiniCPM's code: ", v4 ? "linear, dynamic or longrope" : "linear or dynamic");
    }
  }
  // MiniCPM4's InfLLM v2 (sparse_config): dense below dense_len keys, then each query sees its top-k
  // blocks by content, the first blocks and a local window (MiniCPMInfLLMv2Attention).
  if (j.has("sparse_config")) {
    const json& sc = j.at("sparse_config");
    const std::string dense =
        sc.is_object() && sc.contains("dense_len") ? json_excerpt(sc.at("dense_len")) : std::string("8192");
    warnings.push_back(
        "sparse_config (InfLLM v2): below dense_len = " + dense +
        " keys attention is dense (this plan); beyond it each query attends only to the blocks its "
        "content selects (topk), the first init_blocks and a window of window_size keys, which the plan "
        "does not model");
  }
  if (is_half(j.str_or("torch_dtype", "")))
    warnings.push_back("torch_dtype = " + j.str("torch_dtype") +
                       ": MiniCPM's SDPA path rounds cos / sin to it (its eager and flash paths keep them "
                       "fp32); posenc's are fp32");
  for (const char* k : {"scale_emb", "dim_model_base", "scale_depth", "mup_denominator"})  // muP: embeddings,
    j.read.insert(k);  // residuals and lm_head only
  ModelPositions out = uniform(
      "minicpm", "OpenBMB/MiniCPM modeling_minicpm.py (MiniCPMRotaryEmbedding; MiniCPM4's MiniCPMLongRoPE)",
      layers, heads, head, max_pos, rope, PositionMethod::rope);
  // MiniCPM-Embedding: is_causal false, bidirectional attention over the whole text.
  if (!j.bool_or("is_causal", true))
    for (LayerPlan& p : out.layers) p.attention.causal = false;
  return out;
}

// Baichuan's releases share model_type "baichuan" but not the modeling file: the 7B models rotate
// (RotaryEmbedding: rotate_half on the whole head, base 10000 with no key, positions from position_ids), the
// 13B models add ALiBi (_get_interleave: BLOOM's slopes; slope * key index, the softmax of slope * (k - q)),
// both with scale head^-0.5. config.json names no mechanism: Baichuan-7B's class is BaiChuanForCausalLM;
// the others share BaichuanForCausalLM, told apart by size as vLLM (hidden_size 4096: RoPE) and llama.cpp
// (32 layers: RoPE, 40: ALiBi) do. A config where those two rules disagree is refused.
ModelPositions baichuan(Obj& j, std::vector<std::string>& warnings) {
  const int64_t hidden = positive(j, {"hidden_size"}, 4096);
  const int64_t heads = positive(j, {"num_attention_heads"}, 32);
  const int64_t layers = positive(j, {"num_hidden_layers"}, 32);
  const int64_t head = head_size("baichuan", hidden, heads);
  bool v1_7b = false;
  if (j.has("architectures") && j.at("architectures").is_array())
    for (const json& a : j.at("architectures")) v1_7b = v1_7b || a == "BaiChuanForCausalLM";
  const bool rope_by_size = hidden == 4096 && layers == 32, alibi_by_size = hidden == 5120 && layers == 40;
  if (!v1_7b && !rope_by_size && !alibi_by_size)
    fail(kOp, "model_type 'baichuan' with hidden_size = ", hidden, " and num_hidden_layers = ", layers,
         " is not supported: Baichuan's 7B modeling files use RoPE (4096, 32 layers) and its 13B ones ALiBi "
         "(5120, 40 layers), and config.json does not say which file this model has. Pass a RopeConfig "
         "(RoPE, base 10000, halves) or ALiBi slopes instead");
  j.read.insert("architectures");
  if (v1_7b || rope_by_size) {
    const int64_t max_pos = positive(j, {"max_position_embeddings"}, 4096);  // the first cache (it grows)
    RopeConfig rope;
    rope.head_dim = head;
    if (head % 2 != 0) fail(kOp, "hidden_size / num_attention_heads = ", head, " is invalid: must be even");
    rope.max_position_embeddings = max_pos;
    j.read.insert("model_max_length");  // a tokenizer and cache length
    if (v1_7b && is_half(j.str_or("torch_dtype", "")))
      warnings.push_back("torch_dtype = " + j.str("torch_dtype") +
                         ": Baichuan-7B's code rounds cos / sin to it and rotates in it (Baichuan2's "
                         "in fp32); posenc rotates in fp32");
    return uniform("baichuan",
                   v1_7b ? "baichuan-inc/Baichuan-7B modeling_baichuan.py (RotaryEmbedding)"
                         : "baichuan-inc/Baichuan2-7B modeling_baichuan.py (RotaryEmbedding)",
                   layers, heads, head, max_pos, rope, PositionMethod::rope);
  }
  // The ALiBi mask's first length; longer inputs rebuild it (max_cache_pos).
  const int64_t max_pos = positive(j, {"model_max_length", "max_position_embeddings"}, 4096);
  // _gen_alibi_mask(...).to(tensor): slope * key index rounded to the model's dtype.
  if (is_half(j.str_or("torch_dtype", "")))
    warnings.push_back(
        "torch_dtype = " + j.str("torch_dtype") +
        ": Baichuan's 13B code adds slope * key index to the scores as a mask rounded to it "
        "(bfloat16: steps of 16 past index 2048, up to 8 logits off at 4k keys); posenc's bias "
        "is exact");
  return uniform("baichuan",
                 "baichuan-inc/Baichuan-13B, Baichuan2-13B modeling_baichuan.py (_get_interleave)", layers,
                 heads, head, max_pos, std::nullopt, PositionMethod::alibi);
}

}  // namespace posenc::detail::remote
