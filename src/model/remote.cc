// src/model/remote.cc: model types whose positional code is remote code (trust_remote_code: a modeling
// file in the model's own repository, not in transformers 5) and that posenc plans from the authors'
// files, which ModelPositions::remote_code names. The files were read in mirrors of the model
// repositories (function names cited; the hub's own copies were not reachable from here):
//   qwen:           Qwen/Qwen-7B modeling_qwen.py, configuration_qwen.py (QWenConfig)
//   chatglm:        THUDM/chatglm2-6b, chatglm3-6b and glm-4-9b-chat modeling_chatglm.py
//   internlm2:      internlm/internlm2-chat-7b modeling_internlm2.py (also model_type "internlm" in its
//                   early revisions, which name InternLM2ForCausalLM)
//   stablelm_epoch: stabilityai/stable-code-3b modeling_stablelm_epoch.py, configuration_stablelm_epoch.py
//   RefinedWeb, RefinedWebModel: tiiuae/falcon-40b / falcon-7b's first modelling_RW.py, configuration_RW.py
//   minicpmv:       openbmb/MiniCPM-V-4 modeling_minicpmv.py, whose language model is transformers'
//                   LlamaForCausalLM built from this config (a LlamaConfig subclass)
//   minicpm, baichuan: src/model/remote_llama_forks.cc
// Each plan is uniform over the layers: causal attention, scale head_dim^-0.5, no window.
#include <cmath>
#include <string>

#include "src/model/document.h"
#include "src/model/parse.h"
#include "src/model/remote.h"

namespace posenc::detail {
namespace remote {

std::string excerpt(Obj& j, const std::string& k) { return json_excerpt(j.at(k)); }

int64_t positive(Obj& j, std::initializer_list<const char*> keys, int64_t fallback) {
  for (const char* k : keys)
    if (j.has(k)) {
      const int64_t v = j.integer(k);
      if (v <= 0 || v > kMaxModelLayers * kMaxModelHeadDim)
        fail(kOp, j.where, k, " = ", v, " is invalid: must be in [1, 2^32]");
      return v;
    }
  return fallback;
}

double checked_base(const std::string& key, double base) {
  if (!(base >= kMinRopeBase && base <= kMaxRopeBase))
    fail(kOp, key, " gives the rotary base ", base, ": must be in [2^-16, 2^126]");
  return base;
}

// int(dims * fraction) as the authors' code truncates it: 0 rotates nothing and an odd count leaves a
// pair half-built (their cat(freqs, freqs) is longer than the slice): both refused, naming the key.
int64_t rotated_dims(Obj& j, const std::string& key, double fallback, int64_t dims) {
  const double fraction = j.num_or(key, fallback);
  const std::string shown =
      key + " = " + (j.has(key) ? excerpt(j, key) : std::to_string(fallback) + " (default)");
  if (!(fraction > 0 && fraction <= 1)) fail(kOp, shown, " is invalid: must be in (0, 1]");
  const auto r = static_cast<int64_t>(static_cast<double>(dims) * fraction);
  if (r == 0 || r % 2 != 0)
    fail(kOp, shown, " rotates int(", dims, " * ", key, ") = ", r, " dims: must be even and > 0 (",
         r == 0 ? "the model applies no RoPE" : "pairs of dims", ")");
  return r;
}

int64_t head_size(const std::string& type, int64_t hidden, int64_t heads) {
  if (hidden % heads != 0)
    fail(kOp, "hidden_size = ", hidden, " is not a multiple of num_attention_heads = ", heads, " (", type,
         ")");
  if (hidden / heads > kMaxModelHeadDim)
    fail(kOp, "head size ", hidden / heads, " is too large (", type, ")");
  return hidden / heads;
}

ModelPositions uniform(const std::string& type, const char* code, int64_t layers, int64_t heads, int64_t head,
                       int64_t max_pos, const std::optional<RopeConfig>& rope, PositionMethod method) {
  if (layers > kMaxModelLayers)
    fail(kOp, "the layer count ", layers, " is invalid: at most ", kMaxModelLayers);
  ModelPositions out;
  out.model_type = type;
  out.remote_code = code;
  out.num_layers = layers;
  out.num_heads = heads;
  out.max_position_embeddings = max_pos;
  for (int64_t i = 0; i < layers; ++i) {
    LayerPlan p;
    p.layer = i;
    p.layer_type = "full_attention";
    p.position = method;
    p.rope = rope;
    if (rope) p.rotary_hi = rope->effective_rotary_dim();
    p.qk_head_dim = p.v_head_dim = head;
    p.attention.causal = true;
    p.attention.softmax_scale = 1.0 / std::sqrt(static_cast<double>(head));
    out.layers.push_back(std::move(p));
  }
  if (rope) validate(*rope);
  return out;
}

}  // namespace remote

namespace {
using namespace remote;

// QWenConfig / QWenModel / QWenAttention. RoPE: rotate_half (halves) on the first int(kv_channels *
// rotary_pct) dims (all if rotary_pct == 1), base rotary_emb_base, inv_freq over the rotated dims.
// use_dynamic_ntk: the base grows with the prefill's length (RopeScalingType::qwen_dynamic) and stays
// for the decode steps (_ntk_alpha_cached_list); use_logn_attn: queries past seq_length scaled by
// log_seq_length(p + 1) (QueryTemperature::qwen_logn; its table has 32767 rows: the model fails past
// them). Positions are cache indices: position_ids are not read, a left-padded row starts late.
ModelPositions qwen(Obj& j) {
  // QWenConfig's first revision (attribute_map n_embd / n_head / n_layer / n_positions) defaults both
  // rules off; the later one on (configuration_qwen.py).
  const bool first_revision = j.has("n_embd") || j.has("n_head") || j.has("n_layer") || j.has("n_positions");
  const int64_t hidden = positive(j, {"hidden_size", "n_embd"}, 4096);
  const int64_t heads = positive(j, {"num_attention_heads", "n_head"}, 32);
  const int64_t layers = positive(j, {"num_hidden_layers", "n_layer"}, 32);
  const int64_t head = head_size("qwen", hidden, heads);
  const int64_t kv_channels = positive(j, {"kv_channels"}, 128);
  if (kv_channels != head)
    fail(kOp, "kv_channels = ", kv_channels, " differs from hidden_size / num_attention_heads = ", head,
         ": QWenAttention's projections and head split disagree");
  const double pct = j.num_or("rotary_pct", 1.0);
  RopeConfig rope;
  rope.head_dim = head;
  rope.rotary_dim = pct < 1 ? rotated_dims(j, "rotary_pct", 1.0, kv_channels) : 0;
  if (pct == 1 && kv_channels % 2 != 0) fail(kOp, "kv_channels = ", kv_channels, " is invalid: must be even");
  rope.base = checked_base("rotary_emb_base", j.num_or("rotary_emb_base", 10000.0));
  rope.layout = RopeLayout::half;
  const bool ntk = j.bool_or("use_dynamic_ntk", !first_revision);
  const bool logn = j.bool_or("use_logn_attn", !first_revision);
  int64_t seq_length = 0;
  if (ntk || logn) {
    if (!j.has("seq_length"))
      fail(kOp,
           "seq_length is missing: QWenModel reads it (the context of use_dynamic_ntk and use_logn_attn)");
    seq_length = positive(j, {"seq_length"}, 0);
  }
  if (ntk) {
    rope.scaling.type = RopeScalingType::qwen_dynamic;
    rope.scaling.original_max_position_embeddings = seq_length;
  }
  // The causal-mask buffer's length in the first revision and the non-flash paths (a longer input fails).
  const int64_t max_pos = positive(j, {"max_position_embeddings", "n_positions"}, 8192);
  rope.max_position_embeddings = max_pos;
  ModelPositions out = uniform("qwen", "Qwen/Qwen-7B modeling_qwen.py (QWenModel, QWenAttention)", layers,
                               heads, head, max_pos, rope, PositionMethod::rope);
  if (logn) {
    if (seq_length < 2) fail(kOp, "seq_length = ", seq_length, " is invalid for use_logn_attn: must be > 1");
    for (LayerPlan& p : out.layers)
      p.attention.temperature = {QueryTemperature::Kind::qwen_logn, 0.0, static_cast<double>(seq_length)};
  }
  return out;
}

// modeling_chatglm.py (ChatGLM2 / ChatGLM3 / GLM-4): RotaryEmbedding(kv_channels // 2) rotates the first
// half of each head, adjacent pairs (apply_rotary_pos_emb: x.reshape(..., rot_dim // 2, 2)), theta_i =
// base^(-2i / (kv_channels / 2)); the cache holds seq_length positions (a later one is an index error).
// Scale: norm_factor = sqrt(kv_channels) * layer_number with coeff = layer_number back on the scores
// (apply_query_key_layer_scaling): 1 / sqrt(kv_channels). rope_ratio: ChatGLM3's long-context models and
// GLM-4 multiply the base (forward_impl: base = base * self.rope_ratio); ChatGLM2-6B-32K's code divides
// the positions instead (seq_idx / rope_ratio), which config.json does not tell apart: planned as the
// former, with a warning.
ModelPositions chatglm(Obj& j, std::vector<std::string>& warnings) {
  // ChatGLM-6B (the first) has its own 2-D RoPE (position_encoding_2d), not this code.
  if (j.has("position_encoding_2d") || j.has("max_sequence_length"))
    fail(kOp, "model_type 'chatglm' with ",
         j.has("position_encoding_2d") ? "position_encoding_2d" : "max_sequence_length",
         " is ChatGLM-6B's first release, whose 2-D RoPE posenc does not model. Pass a RopeConfig instead");
  const int64_t hidden = positive(j, {"hidden_size"}, 4096);
  const int64_t heads = positive(j, {"num_attention_heads"}, 32);
  const int64_t layers = positive(j, {"num_layers"}, 28);
  if (j.has("num_hidden_layers") && positive(j, {"num_hidden_layers"}, 0) != layers)
    warnings.push_back("num_hidden_layers = " + excerpt(j, "num_hidden_layers") +
                       " is not read by modeling_chatglm.py: num_layers = " + std::to_string(layers) + " is");
  // ChatGLMConfig defaults kv_channels to 128; ChatGLMModel falls back to hidden_size // heads only for an
  // explicit null (its projections are kv_channels * heads wide, whatever hidden_size is).
  const bool null_kv = j.j.contains("kv_channels") && j.j.at("kv_channels").is_null();
  const int64_t kv_channels =
      positive(j, {"kv_channels"}, null_kv ? head_size("chatglm", hidden, heads) : 128);
  if (kv_channels % 4 != 0)
    fail(kOp, "kv_channels = ", kv_channels, " is invalid: ChatGLM rotates kv_channels / 2 dims in pairs");
  const int64_t seq_length = positive(j, {"seq_length"}, 2048);
  RopeConfig rope;
  rope.head_dim = kv_channels;
  rope.rotary_dim = kv_channels / 2;
  rope.layout = RopeLayout::interleaved;
  rope.base = 10000.0;
  rope.max_position_embeddings = seq_length;
  if (j.has("rope_ratio")) {
    const double ratio = j.num("rope_ratio");
    if (!(ratio > 0)) fail(kOp, "rope_ratio = ", ratio, " is invalid: must be > 0");
    rope.base =
        checked_base("rope_ratio = " + excerpt(j, "rope_ratio") + " (10000 * rope_ratio)", 1e4 * ratio);
    if (ratio != 1)
      warnings.push_back(
          "rope_ratio = " + excerpt(j, "rope_ratio") +
          " is read as ChatGLM3's and GLM-4's base = 10000 * rope_ratio; ChatGLM2-6B-32K's code "
          "divides the positions by it instead (linear scaling): for that model pass a RopeConfig");
  }
  j.read.insert("original_rope");  // stored as original_impl and never read (all versions)
  for (const char* k : {"multi_query_attention", "multi_query_group_num"}) j.read.insert(k);  // kv heads
  const std::string dtype = j.str_or("torch_dtype", "");
  if (dtype == "float16" || dtype == "bfloat16")
    warnings.push_back(
        "torch_dtype = " + dtype +
        ": ChatGLM2's code builds positions and angles in that dtype "
        "(ChatGLM3's and GLM-4's in float32) and every version rounds cos / sin to it; posenc's "
        "angles are exact");
  return uniform("chatglm",
                 "THUDM/chatglm2-6b, chatglm3-6b, glm-4-9b-chat modeling_chatglm.py (RotaryEmbedding)",
                 layers, heads, kv_channels, seq_length, rope, PositionMethod::rope);
}

// modeling_internlm2.py: Llama's rotate_half on the whole head (hidden_size / num_attention_heads), base
// rope_theta; rope_scaling exactly {"type": "linear" | "dynamic", "factor" >= 1} (_init_rope,
// _rope_scaling_validation), the dynamic base as transformers' (factor L / M - (factor - 1))^(d / (d - 2)).
ModelPositions internlm2(Obj& j, const std::string& type, std::vector<std::string>& warnings) {
  const int64_t hidden = positive(j, {"hidden_size"}, 4096);
  const int64_t heads = positive(j, {"num_attention_heads"}, 32);
  const int64_t layers = positive(j, {"num_hidden_layers"}, 32);
  const int64_t head = head_size(type, hidden, heads);
  const int64_t max_pos = positive(j, {"max_position_embeddings"}, 2048);
  RopeConfig rope;
  rope.head_dim = head;
  if (head % 2 != 0) fail(kOp, "hidden_size / num_attention_heads = ", head, " is invalid: must be even");
  rope.base = checked_base("rope_theta", j.num_or("rope_theta", 10000.0));
  rope.max_position_embeddings = max_pos;
  if (j.has("rope_scaling")) {
    const json& s = j.at("rope_scaling");
    if (!s.is_object() || s.size() != 2 || !s.contains("type") || !s.contains("factor") ||
        !s.at("factor").is_number() || !(s.at("factor").get<double>() >= 1))
      fail(kOp, "rope_scaling = ", json_excerpt(s),
           " is invalid for InternLM2: must be {\"type\": \"linear\" | \"dynamic\", \"factor\": >= 1}");
    rope.scaling.factor = s.at("factor").get<double>();
    if (s.at("type") == "linear") {
      rope.scaling.type = RopeScalingType::linear;
    } else if (s.at("type") == "dynamic") {
      rope.scaling.type = RopeScalingType::dynamic;
      warnings.push_back(
          "rope_scaling 'dynamic': InternLM2's code keeps a grown base for later, shorter "
          "sequences and its cache keeps each key rotated with the base of its step; posenc's "
          "frequencies are those of the call's length (transformers' dynamic_rope_update)");
    } else {
      fail(kOp, "rope_scaling.type = ", json_excerpt(s.at("type")),
           " is invalid for InternLM2: must be \"linear\" or \"dynamic\"");
    }
  }
  return uniform(type, "internlm/internlm2-chat-7b modeling_internlm2.py (InternLM2RotaryEmbedding)", layers,
                 heads, head, max_pos, rope, PositionMethod::rope);
}

// StableLMEpochConfig: rope_pct (default 0.25) of head_dim rotated, rotate_half, base rope_theta (10000).
// transformers' stablelm computes the same but does not map rope_pct (partial_rotary_factor stays 0.25).
ModelPositions stablelm_epoch(Obj& j, std::vector<std::string>& warnings) {
  const int64_t hidden = positive(j, {"hidden_size"}, 2560);
  const int64_t heads = positive(j, {"num_attention_heads"}, 32);
  const int64_t layers = positive(j, {"num_hidden_layers"}, 32);
  const int64_t head = head_size("stablelm_epoch", hidden, heads);
  RopeConfig rope;
  rope.head_dim = head;
  rope.rotary_dim = rotated_dims(j, "rope_pct", 0.25, head);
  rope.base = checked_base("rope_theta", j.num_or("rope_theta", 10000.0));
  const int64_t max_pos = positive(j, {"max_position_embeddings"}, 4096);  // the first cache's length
  rope.max_position_embeddings = max_pos;
  // In stable-code-3b's config.json, never read by its code.
  if (j.has("rotary_scaling_factor") && j.at("rotary_scaling_factor") != 1.0)
    warnings.push_back("rotary_scaling_factor = " + excerpt(j, "rotary_scaling_factor") +
                       " is never read by modeling_stablelm_epoch.py: ignored");
  return uniform("stablelm_epoch", "stabilityai/stable-code-3b modeling_stablelm_epoch.py (RotaryEmbedding)",
                 layers, heads, head, max_pos, rope, PositionMethod::rope);
}

// configuration_RW.py (n_head, n_layer; n_embed overrides hidden_size; head_dim = hidden_size / n_head) and
// modelling_RW.py: RoPE of base 10000 (no key) on the whole head, rotate_half, unless alibi (BLOOM's
// slopes, cast to bfloat16 there, added before the 1 / sqrt(head_dim) scale as transformers' falcon). The
// first files rotate each call's q and k from position 0 (cos_sin(seq_len) without the cache's offset;
// transformers issue #24701): a warning says so.
ModelPositions refined_web(Obj& j, const std::string& type, std::vector<std::string>& warnings) {
  const int64_t hidden = positive(j, {"n_embed", "hidden_size"}, 64);
  const int64_t heads = positive(j, {"n_head", "num_attention_heads"}, 8);
  const int64_t layers = positive(j, {"n_layer", "num_hidden_layers"}, 2);
  const int64_t head = head_size(type, hidden, heads);
  const bool alibi = j.bool_or("alibi", false);
  std::optional<RopeConfig> rope;
  if (!alibi) {
    if (head % 2 != 0) fail(kOp, "hidden_size / n_head = ", head, " is invalid: must be even for RoPE");
    rope.emplace();
    rope->head_dim = head;
    warnings.push_back(
        "modelling_RW.py's first files rotate each call's q and k from position 0 (no cache "
        "offset): with a KV cache they are not this plan, which rotates cache positions as "
        "the later files and transformers' falcon do");
  }
  // No position limit: cos_sin builds the table of each call's length (max_position_embeddings 0).
  return uniform(type, "tiiuae/falcon-7b, falcon-40b modelling_RW.py (RotaryEmbedding, build_alibi_tensor)",
                 layers, heads, head, 0, rope, alibi ? PositionMethod::alibi : PositionMethod::rope);
}

// MiniCPM-V 4's language model is LlamaForCausalLM(config): the config read as transformers 5's llama.
// The type's other releases build other models (2.x MiniCPMForCausalLM, 2.6 Qwen2ForCausalLM): refused.
ModelPositions minicpmv(const json& root) {
  const bool v4 = root.contains("version") && root.at("version").is_number() && root.at("version") == 4.0;
  if (!v4)
    fail(kOp, "model_type 'minicpmv' with version = ",
         root.contains("version") ? json_excerpt(root.at("version")) : std::string("(none)"),
         " is not supported: posenc follows MiniCPM-V 4 (version 4.0, a Llama); the type's other releases "
         "build other language models. Pass an explicit RopeConfig instead");
  json llama = root;
  llama["model_type"] = "llama";
  ModelPositions out = positions_from_root(llama);
  out.model_type = "minicpmv";
  out.remote_code = "openbmb/MiniCPM-V-4 modeling_minicpmv.py (its llm: transformers' LlamaForCausalLM)";
  for (std::string& w : out.warnings) {
    const std::string from = "model_type 'llama'", to = "model_type 'minicpmv' (its Llama)";
    if (const size_t at = w.find(from); at != std::string::npos) w.replace(at, from.size(), to);
  }
  return out;
}

// InternLM2 and its early revisions published as "internlm" (RemoteFamily::refused).
ModelPositions internlm(Obj& j, const std::string& type, std::vector<std::string>& warnings) {
  j.read.insert("architectures");
  return internlm2(j, type, warnings);
}

bool not_internlm2(const json& root) { return !internlm2_architecture(root); }

// The remote-code model types posenc plans, each with its planner (one file of the authors' each).
struct RemoteFamily {
  const char* model_type;
  ModelPositions (*plan)(Obj& j, const std::string& type, std::vector<std::string>& warnings);
  // The whole plan of a config read as another type (the warnings and unread keys its own).
  ModelPositions (*whole)(const json& root) = nullptr;
  // Configs of the type that are another model's, refused: which, why (short, for unplanned_reason), and the
  // error (long).
  bool (*refused)(const json& root) = nullptr;
  const char* why = nullptr;
  const char* error = nullptr;
};
using Warnings = std::vector<std::string>;
ModelPositions plan_qwen(Obj& j, const std::string&, Warnings&) { return qwen(j); }
ModelPositions plan_chatglm(Obj& j, const std::string&, Warnings& w) { return chatglm(j, w); }
ModelPositions plan_stablelm_epoch(Obj& j, const std::string&, Warnings& w) { return stablelm_epoch(j, w); }
ModelPositions plan_minicpm(Obj& j, const std::string&, Warnings& w) { return minicpm(j, w); }
ModelPositions plan_baichuan(Obj& j, const std::string&, Warnings& w) { return baichuan(j, w); }

// clang-format off
const RemoteFamily kRemoteFamilies[] = {
  {"qwen",            plan_qwen},
  {"chatglm",         plan_chatglm},
  {"internlm2",       internlm},
  // InternLM2's early revisions (architectures names InternLM2ForCausalLM); InternLM (1)'s "internlm" is
  // other remote code
  {"internlm",        internlm, nullptr, not_internlm2, "InternLM (1)'s rotary code is remote code",
   "InternLM (1)'s remote code (InternLMForCausalLM) fixes or re-reads its rotary base outside config.json. "
   "Pass an explicit RopeConfig instead (InternLM2's early revisions, which name InternLM2ForCausalLM, are "
   "read)"},
  {"stablelm_epoch",  plan_stablelm_epoch},
  {"RefinedWeb",      refined_web},
  {"RefinedWebModel", refined_web},
  {"minicpmv",        nullptr, minicpmv},
  {"minicpm",         plan_minicpm},
  {"baichuan",        plan_baichuan},
};
// clang-format on

const RemoteFamily* find_remote(const std::string& type) {
  for (const RemoteFamily& f : kRemoteFamilies)
    if (type == f.model_type) return &f;
  return nullptr;
}
}  // namespace

bool remote_code_planned(const std::string& type) { return find_remote(type) != nullptr; }

std::string remote_code_refusal(const json& root, const std::string& type) {
  const RemoteFamily* f = find_remote(type);
  if (f && f->refused && f->refused(root)) return "model_type '" + type + "' is not supported: " + f->why;
  return "";
}

ModelPositions remote_code_positions(const json& root, const std::string& type) {
  const RemoteFamily& f = *find_remote(type);
  if (f.whole) return f.whole(root);
  Obj j{root, "", {}};
  if (f.refused && f.refused(root)) fail(kOp, "model_type '", type, "' is not supported: ", f.error);
  j.read.insert("model_type");
  std::vector<std::string> warnings;
  ModelPositions out = f.plan(j, type, warnings);
  out.warnings = std::move(warnings);
  j.warn_unread(out.warnings, type);
  return out;
}

}  // namespace posenc::detail
