// src/model/config_json.cc: ModelPositions from a HuggingFace config.json, as transformers 5.23
// reads it: PreTrainedConfig.convert_rope_params_to_dict + standardize_rope_params
// (modeling_rope_utils.py L775-866), each family's config class defaults and layer_types, and the
// per-layer choices of its modeling file (each rule cites its file and lines).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "posenc/model.h"
#include "src/model/document.h"
#include "src/model/hooks.h"
#include "src/model/parse.h"
#include "src/rope_plan.h"

namespace posenc {
using detail::canonical_type;
using detail::fail;
using detail::has;
using detail::kMaxModelHeadDim;
using detail::kMaxModelLayers;
using detail::kOp;
using detail::Model;
using detail::Obj;
using detail::rules_type;
using detail::wrapper_default_text_type;
using detail::wrapper_text_class;
using detail::wrapper_text_config;
using detail::wrapper_text_type;
using json = nlohmann::json;

namespace {
// The text model type a wrapper builds whatever its text_config says, flat or wrapped ("" for others):
// Step3p7Config pops text_config.model_type (configuration_step3p7.py L331-332), so its text model is
// always step3p5's.
std::string fixed_text_type(const std::string& outer) { return outer == "step3p7" ? "step3p5" : ""; }

// Why a multimodal wrapper's config without text_config is not planned (empty when it is): FuyuConfig
// forwards only some of its top-level keys (configuration_fuyu.py L75-82); a wrapper whose own type does
// not name a text model in posenc's table keeps keys of its own at the top level, and its class builds
// the text model from text_config alone.
std::string flat_wrapper_refusal(const std::string& outer, const json& root) {
  if (has(root, "text_config") || !(wrapper_text_class(outer) || wrapper_default_text_type(outer))) return "";
  if (outer == "fuyu")
    return "model_type 'fuyu' without text_config is not read: FuyuConfig builds its persimmon text model "
           "from some of the top-level keys only (configuration_fuyu.py L75-82). Pass the text model's keys "
           "as text_config, or a persimmon config";
  const std::string fixed = fixed_text_type(outer);
  const std::string own = fixed.empty() ? canonical_type(outer) : fixed;
  if (detail::find_family(own) || detail::seq2seq_family(own) || !detail::refusal_reason(own).empty())
    return "";
  return "model_type '" + outer +
         "' without text_config is not read: its config class builds the text model ('" +
         detail::wrapper_text_type(outer, json::object()) +
         "') from text_config alone (transformers 5.23 would use that class's defaults). Pass the config "
         "with its text_config";
}

void refuse_if_unsupported(const std::string& type) {
  const std::string why = detail::refusal_reason(type);
  if (!why.empty())
    fail(kOp, "model_type '", type, "' is not supported: ", why,
         ". Pass an explicit RopeConfig (C++ rope_config_from_hf_json, Python RopeConfig.from_hf, or "
         "RopeConfig fields) instead");
  if (!detail::find_family(type) && !detail::seq2seq_family(type) && type != "t5gemma")
    fail(kOp, "model_type '", type,
         "' is not in posenc's model table. Pass an explicit RopeConfig "
         "(C++ rope_config_from_hf_json, Python RopeConfig.from_hf, or RopeConfig fields) instead");
}

}  // namespace

std::string detail::unplanned_reason(const json& root) {
  if (const std::optional<detail::Identified> renamed = detail::identified_as_other_type(root))
    return unplanned_reason(renamed->root);
  if (!has(root, "model_type")) return "it has no model_type";
  if (!root.at("model_type").is_string())
    return "model_type = " + detail::json_excerpt(root.at("model_type")) + " is not a string";
  const std::string outer = root.at("model_type").get<std::string>();
  if (outer == "internlm" && !detail::internlm2_architecture(root))
    return "model_type 'internlm' is not supported: InternLM (1)'s rotary code is remote code";
  if (detail::remote_code_planned(outer)) return "";
  std::string why = detail::refusal_reason(outer);
  if (!why.empty()) return "model_type '" + outer + "' is not supported: " + why;
  if (const std::string flat = flat_wrapper_refusal(outer, root); !flat.empty()) return flat;
  const bool wrapped = has(root, "text_config") && root.at("text_config").is_object();
  const json& tj = wrapped ? root.at("text_config") : root;
  const std::string fixed = fixed_text_type(outer);
  const std::string own =
      !fixed.empty() ? fixed : canonical_type(wrapped ? wrapper_text_type(outer, tj) : outer);
  why = detail::refusal_reason(own);
  if (!why.empty()) return "model_type '" + own + "' is not supported: " + why;
  if (!detail::find_family(own) && !detail::seq2seq_family(own) && own != "t5gemma")
    return "model_type '" + own + "' is not in posenc's model table";
  return "";
}

namespace {
int64_t first_int(Obj& j, std::initializer_list<const char*> keys, int64_t fallback, bool required) {
  for (const char* k : keys)
    if (j.has(k)) return j.integer(k);
  if (required) fail(kOp, j.where, *keys.begin(), " is missing (also looked for its aliases)");
  return fallback;
}

// DBRX states its base as attn_config.rope_theta (500000), which its own code, transformers 4.x, vLLM
// (dbrx.py: rope_theta = config.attn_config.rope_theta) and llama.cpp's converter read. transformers
// 5.23's DbrxRotaryEmbedding reads the top-level rope_parameters instead (10000 by default): posenc
// follows the model's authors and warns where 5.23 differs.
void dbrx_base(Obj& j, RopeConfig& rope, std::vector<std::string>& warnings) {
  if (!j.has("attn_config")) return;
  if (!j.at("attn_config").is_object()) fail(kOp, j.where, "attn_config must be an object");
  Obj ac{j.at("attn_config"), j.where + "attn_config.", {}};
  for (const char* k : {"kv_n_heads", "clip_qkv", "attn_pdrop", "attn_impl", "qk_ln"}) ac.read.insert(k);
  if (ac.has("rope_theta")) {
    const double authors = ac.num("rope_theta");
    if (authors <= 0) fail(kOp, ac.where, "rope_theta = ", authors, " is invalid: must be > 0");
    if (authors != rope.base)
      warnings.push_back(
          ac.where + "rope_theta = " + detail::json_excerpt(ac.at("rope_theta")) +
          " is the base (DBRX's own code, transformers 4.x, vLLM); transformers 5.23 applies " +
          "the top-level rope_theta, " + detail::json_excerpt(json(rope.base)) + ", instead");
    rope.base = authors;
  }
  ac.warn_unread(warnings, "dbrx");
}

// hunyuan_vl_text: xdrope_section (renamed mrope_section, configuration_hunyuan_vl.py L171-206): integers
// summing to head_dim / 2, one position axis each. Text tokens carry their index on every axis, so their
// rotation is this 1-D plan; image tokens take (w, h, image index) on the last three axes, each axis a
// contiguous chunk of the doubled frequencies (modeling_hunyuan_vl.py HunYuanVLRotaryEmbedding.forward: the
// two halves of a rotated pair from different axes), which posenc's M-RoPE does not express: a warning.
void hunyuan_vl_sections(Obj& j, const json* rp, const std::string& rp_name, const RopeConfig& rope,
                         std::vector<std::string>& warnings) {
  const json* sections = nullptr;
  std::string name;
  for (const char* k : {"mrope_section", "xdrope_section"}) {
    if (!sections && rp && has(*rp, k)) sections = &rp->at(k), name = rp_name + "." + k;
    if (!sections && j.has(k)) sections = &j.at(k), name = k;
  }
  if (!sections)
    fail(kOp, j.where,
         "xdrope_section (mrope_section) is missing: hunyuan_vl_text's rotary module splits its ",
         "frequencies by it (transformers 5.23 fails without one)");
  int64_t sum = 0;
  if (!sections->is_array())
    fail(kOp, j.where, name, " = ", detail::json_excerpt(*sections), " must be a list");
  for (const json& s : *sections) {
    if (!s.is_number_integer() || s.get<int64_t>() < 0 || s.get<int64_t>() > kMaxModelHeadDim)
      fail(kOp, j.where, name, " contains ", s.dump(), ": must be non-negative integers");
    sum += s.get<int64_t>();
  }
  if (sum != rope.head_dim / 2)
    fail(kOp, j.where, name, " = ", detail::json_excerpt(*sections), " sums to ", sum,
         ", not head_dim / 2 = ", rope.head_dim / 2, " (configuration_hunyuan_vl.py raises)");
  warnings.push_back(
      j.where + name + " = " + detail::json_excerpt(*sections) +
      ": hunyuan_vl_text's image tokens take other positions on its axes, which posenc's M-RoPE does "
      "not express; the plan is exact for text tokens (every axis equal: 1-D RoPE)");
}

// nomic_bert: nomic's remote-code keys (n_embd, n_positions, rotary_emb_base, ...) have no attribute_map in
// transformers 5's NomicBertConfig (configuration_nomic_bert.py L31-76), which builds its own defaults
// and rotates the whole head in halves (modeling_nomic_bert.py L135-165): each is reported, none read.
void nomic_legacy_keys(Obj& j, std::vector<std::string>& warnings) {
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
      warnings.push_back(std::string(key) + " = " + detail::json_excerpt(j.at(key)) +
                         " is not read by transformers 5's nomic_bert, which uses " + used + " instead");
}
}  // namespace

ModelPositions model_positions_from_hf_json(const std::string& text) {
  return detail::positions_from_root(detail::parse_config_json(kOp, text));
}

ModelPositions detail::positions_from_root(const json& root) {
  if (const std::optional<detail::Identified> renamed = detail::identified_as_other_type(root)) {
    ModelPositions out = positions_from_root(renamed->root);
    out.warnings.insert(out.warnings.begin(), renamed->note);
    return out;
  }
  Obj top{root, "", {}};
  if (!top.has("model_type")) fail(kOp, "model_type is missing");
  const std::string outer_type = top.str("model_type");
  if (detail::remote_code_planned(outer_type)) return detail::remote_code_positions(root, outer_type);
  if (!detail::refusal_reason(outer_type).empty()) refuse_if_unsupported(outer_type);
  // Multimodal wrappers (gemma3, llama4, mistral3, qwen3_5, voxtral, ...) keep the language model
  // under text_config; its model_type (or the wrapper's text class) decides the family.
  const bool wrapped = has(root, "text_config");
  if (wrapped && !root.at("text_config").is_object())
    fail(kOp, "text_config = ", root.at("text_config").dump(), " is invalid: must be an object");
  const json filled = wrapped ? wrapper_text_config(outer_type, root.at("text_config")) : json(nullptr);
  const json& given = wrapped ? filled : root;
  const std::string where = wrapped ? "text_config." : "";
  // A wrapper with a concrete text class builds text_config as that class whatever its model_type says
  // (kWrapperTextClasses, configuration_utils.py L248-256): planned as the class's type, an ignored
  // model_type warned. Other wrappers build the class of text_config.model_type (AutoConfig specs), or
  // of their spec's default type where it has none (kWrapperDefaultTextTypes).
  // A wrapper with a fixed text type (fixed_text_type: step3p7) builds that model, flat or not.
  // A wrapper saved flat (no text_config) is planned where its own type names a text model in posenc's
  // table (gemma3 -> gemma3_text, qwen3_vl, glm4v, ...): its top-level keys are read as that model's. Most
  // classes ignore them and build the text class's defaults: the plan says so (below). Other wrappers
  // (llava, blip-2, grounding-dino, ...) keep keys of their own at the top level: refused by name.
  const bool flat_wrapper =
      !wrapped && (wrapper_text_class(outer_type) || wrapper_default_text_type(outer_type));
  if (const std::string why = flat_wrapper_refusal(outer_type, root); !why.empty()) fail(kOp, why);
  const char* const text_class = wrapped ? wrapper_text_class(outer_type) : nullptr;
  const char* const text_default =
      wrapped && !has(given, "model_type") ? wrapper_default_text_type(outer_type) : nullptr;
  const std::string fixed_type = fixed_text_type(outer_type);
  const std::string declared_type = !fixed_type.empty() ? fixed_type
                                    : text_class        ? text_class
                                    : wrapped && has(given, "model_type")
                                        ? Obj{given, where, {}}.str("model_type")
                                    : text_default ? text_default
                                                   : outer_type;
  std::vector<std::string> resolve_warnings;
  if (text_class && fixed_type.empty() && has(given, "model_type") && given.at("model_type") != text_class)
    resolve_warnings.push_back(where + "model_type = " + detail::json_excerpt(given.at("model_type")) +
                               " is ignored: " + outer_type + "'s config class builds text_config as its " +
                               "text class, model_type '" + text_class +
                               "', whatever model_type it has (configuration_utils.py L248-256)");
  const json resolved = declared_type == "step3p5" ? detail::step3p5_resolved(given, where, resolve_warnings)
                        : declared_type == "zaya"  ? detail::zaya_resolved(given, where, resolve_warnings)
                        : declared_type == "ultrabert"
                            ? detail::ultrabert_resolved(given, where, resolve_warnings)
                        : canonical_type(declared_type) == "dots3_note_text"
                            ? detail::dots3_resolved(given, where, resolve_warnings)
                            : json(nullptr);
  const json& tj = resolved.is_null() ? given : resolved;
  Obj j{tj, where, {}};
  j.read.insert("model_type");
  const std::string own_type = canonical_type(declared_type);
  std::string type = rules_type(own_type);
  refuse_if_unsupported(own_type);

  // Most wrappers' config classes build the text model from text_config alone: transformers 5 gives a flat
  // config (e.g. copies of GLM-4.1V from transformers 4.53's development builds, Llama 4 configs flattened
  // for other engines) the text class's defaults (GLM-4.1V's cannot even run: 64 rotary pairs for
  // mrope_section [8, 12, 12]). posenc reads the top-level keys as the text model's, as the file means them.
  if (flat_wrapper && !detail::wrapper_reads_flat_keys(outer_type))
    resolve_warnings.push_back("model_type '" + outer_type +
                               "' without text_config: the top-level keys are " +
                               "read as the text model's (model_type '" + own_type + "'); transformers " +
                               "5 reads text_config only and would build its class defaults");
  if (detail::seq2seq_family(own_type) || own_type == "t5gemma") {
    ModelPositions out =
        own_type == "t5gemma" ? detail::t5gemma_positions(j) : detail::seq2seq_positions(j, own_type);
    out.warnings.insert(out.warnings.begin(), resolve_warnings.begin(), resolve_warnings.end());
    return out;
  }
  ModelPositions out;
  out.warnings = resolve_warnings;
  Model m;
  m.family = detail::find_family(own_type);  // the class defaults are the model's own
  m.rules = detail::find_family(type);
  const detail::FamilyHooks hooks = detail::family_hooks(*m.family, *m.rules);
  m.hooks = &hooks;
  m.type = type;
  m.warnings = &out.warnings;
  const bool t5 = type == "t5";
  // Sizes a config omits: the config class's defaults (sparse configs, e.g. Gemma 3's, omit them).
  const detail::SizeDefaults* sizes = detail::find_size_defaults(declared_type);
  if (!sizes) sizes = detail::find_size_defaults(type);
  m.sizes = sizes;
  const bool need = sizes == nullptr;
  // Kosmos2TextConfig's attribute_map: hidden_size -> embed_dim, num_hidden_layers -> layers
  // (configuration_kosmos2.py L31-35); its own names come first.
  const bool kosmos = own_type == "kosmos_2_text_model" || own_type == "kosmos_2_5_text_model";
  m.hidden = kosmos ? first_int(j, {"embed_dim", "hidden_size"}, sizes->hidden, false)
                    : first_int(j, {"hidden_size", "n_embd", "d_model", "n_embed", "dim"},
                                sizes ? sizes->hidden : 0, need);
  m.heads = first_int(j, {"num_attention_heads", "n_head", "n_heads", "num_heads", "attention_heads"},
                      sizes ? sizes->heads : 0, need);
  m.layers = kosmos ? first_int(j, {"layers", "num_hidden_layers"}, sizes->layers, false)
                    : first_int(j, {"num_hidden_layers", "n_layer", "n_layers", "num_layers"},
                                sizes ? sizes->layers : 0, need);
  if (type == "nemotron_h") {
    // configuration_nemotron_h.py L171-187, L239-254: num_hidden_layers is len(layers_block_type) (or of
    // hybrid_override_pattern); a different given value is only logged.
    const int64_t counted = detail::nemotron_h_layer_count(j);
    if (j.has("num_hidden_layers") && m.layers != counted)
      out.warnings.push_back("num_hidden_layers = " + std::to_string(m.layers) + " is replaced by the " +
                             std::to_string(counted) +
                             " layers of the layer pattern (configuration_nemotron_h.py)");
    m.layers = counted;
  }
  if (type == "deepseek_v4") return detail::deepseek_v4_positions(j, m);
  if (detail::attention_free(type)) {
    // modeling_mamba.py, modeling_mamba2.py, modeling_falcon_mamba.py: state-space layers only;
    // position_ids are accepted and ignored. num_heads (Mamba2) counts SSM heads, not attention heads.
    // modeling_rwkv.py, modeling_xlstm.py: recurrences; xLSTM builds num_blocks blocks whatever
    // num_hidden_layers says (configuration_xlstm.py L123, L156-157).
    if (type == "xlstm" && j.has("num_blocks")) {
      const int64_t blocks = j.integer("num_blocks");
      if (j.has("num_hidden_layers") && j.integer("num_hidden_layers") != blocks)
        out.warnings.push_back("num_hidden_layers = " + std::to_string(j.integer("num_hidden_layers")) +
                               " is not the " + std::to_string(blocks) + " blocks xlstm builds (num_blocks)");
      m.layers = blocks;
    }
    j.read.insert("context_length");  // rwkv: max_position_embeddings -> context_length, a CUDA kernel size
    if (m.layers <= 0 || m.layers > kMaxModelLayers)
      fail(kOp, j.where, "num_hidden_layers = ", m.layers, " is invalid: must be in [1, ", kMaxModelLayers,
           "]");
    out.model_type = type;
    out.num_layers = m.layers;
    for (int64_t i = 0; i < m.layers; ++i) {
      LayerPlan p;
      p.layer = i;
      p.layer_type = "linear_attention";
      p.softmax_attention = false;
      out.layers.push_back(std::move(p));
    }
    j.warn_unread(out.warnings, type);
    return out;
  }
  if (type == "longcat_flash") {
    // configuration_longcat_flash.py: num_hidden_layers is 2 * num_layers (a property: a saved
    // num_hidden_layers sets num_layers = value // 2); each decoder layer runs two attention sublayers,
    // planned as attention layers 2i and 2i + 1 (modeling_longcat_flash.py L449-461).
    m.layers = j.has("num_layers")          ? 2 * j.integer("num_layers")
               : j.has("num_hidden_layers") ? 2 * (j.integer("num_hidden_layers") / 2)
                                            : 56;
  }
  if (type == "jetmoe") {
    // configuration_jetmoe.py L73: num_attention_heads = num_key_value_heads * num_experts_per_tok, always
    // (a given value is overwritten); head_dim is kv_channels (attribute_map), 128 by default.
    const int64_t derived = j.int_or("num_key_value_heads", 16) * j.int_or("num_experts_per_tok", 2);
    if (j.has("num_attention_heads") && j.integer("num_attention_heads") != derived)
      out.warnings.push_back("num_attention_heads = " + std::to_string(j.integer("num_attention_heads")) +
                             " is replaced by num_key_value_heads * num_experts_per_tok = " +
                             std::to_string(derived) + " (configuration_jetmoe.py)");
    m.heads = derived;
  }
  if (own_type == "nanochat") {
    // nanochat's own export (its repository's configuration_nanochat.py, through auto_map) writes n_layer,
    // n_head, n_kv_head, n_embd, sequence_len and window_pattern (sliding-window layers): transformers 5's
    // NanoChatConfig has no attribute_map for them (configuration_nanochat.py L54-72) and would build its
    // class defaults, and the repository's attention (windows) is not transformers'. Refused, not guessed.
    for (const char* key : {"n_layer", "n_head", "n_kv_head", "n_embd", "sequence_len", "window_pattern"})
      if (j.has(key))
        fail(kOp, j.where, key, " = ", detail::json_excerpt(j.at(key)),
             " is nanochat's remote-code form (its auto_map's configuration_nanochat.py), which transformers "
             "5 "
             "does not read: pass the transformers-5 config (hidden_size, num_attention_heads, "
             "num_hidden_layers, ...)");
  }
  if (own_type == "nomic_bert") {  // the canonical keys only (nomic_legacy_keys)
    nomic_legacy_keys(j, out.warnings);
    m.hidden = j.int_or("hidden_size", 768);
    m.heads = j.int_or("num_attention_heads", 12);
    m.layers = j.int_or("num_hidden_layers", 12);
  }
  if (m.heads <= 0) fail(kOp, j.where, "num_attention_heads = ", m.heads, " is invalid: must be > 0");
  if (m.layers <= 0 || m.layers > kMaxModelLayers)
    fail(kOp, j.where, "num_hidden_layers = ", m.layers, " is invalid: must be in [1, ", kMaxModelLayers,
         "]");
  m.max_pos =
      first_int(j, {"max_position_embeddings", "n_positions", "max_seq_len"}, m.family->max_pos, false);
  if (own_type == "nomic_bert") m.max_pos = j.int_or("max_position_embeddings", m.family->max_pos);
  // kimi_linear, bailing_hybrid: attribute_map max_position_embeddings -> model_max_length.
  if (type == "kimi_linear" || type == "bailing_hybrid")
    m.max_pos = first_int(j, {"model_max_length", "max_position_embeddings"}, m.family->max_pos, false);
  if (j.has("original_max_position_embeddings"))
    m.top_original = j.integer("original_max_position_embeddings");
  else if (type == "phi3")
    m.top_original = 4096;  // Phi3Config field default, always overrides (L72)
  const detail::HeadDims dims = detail::head_dims(j, m, out.warnings);
  const bool mla = dims.mla;
  const int64_t qk_head_dim = dims.qk, v_head_dim = dims.v;
  out.model_type = own_type;
  out.num_layers = m.layers;
  out.num_heads = m.heads;
  out.max_position_embeddings = m.max_pos;
  // modeling_opt.py OPTLearnedPositionalEmbedding, modeling_biogpt.py BioGptLearnedPositionalEmbedding.
  if (type == "opt" || type == "biogpt") out.learned_position_offset = 2;
  if (type == "xglm" || type == "ctrl" || kosmos) {
    SinusoidalConfig s;
    s.dim = m.hidden;  // an odd d_model gets a zero last column (XGLM), as posenc's split layout
    s.layout = SinusoidalLayout::split;
    s.frequencies =
        type == "ctrl" ? SinusoidalFrequencies::model_dim : SinusoidalFrequencies::half_dim_minus_one;
    s.position_offset = type == "xglm" ? 2 : 0;
    if (kosmos) {
      // Kosmos2TextSinusoidalPositionalEmbedding (modeling_kosmos2.py L556-666): token p (padding skipped)
      // reads row p + pad_token_id + 1 of a table of max_position_embeddings + 2 rows, regrown past it.
      const int64_t pad = j.int_or("pad_token_id", 1);
      if (pad < 0 || pad > 1 << 20)
        fail(kOp, j.where, "pad_token_id = ", pad, " is invalid for ", own_type,
             ": position 0 reads row pad_token_id + 1");
      s.position_offset = pad + 1;
      // modeling_kosmos2_5.py L961-975: a learned 2-row segment_emb is added to the position rows too
      // (row 1 on image tokens, row 0 elsewhere).
      if (own_type == "kosmos_2_5_text_model")
        out.warnings.push_back(
            "kosmos_2_5_text_model adds a learned segment_emb row to every position row "
            "(row 1 on image tokens, row 0 elsewhere): a checkpoint tensor the caller adds");
    }
    validate(s);
    out.sinusoidal = s;
  }
  if (detail::roberta_like(type)) {
    // modeling_roberta.py create_position_ids_from_input_ids: token p (0-based, padding skipped) reads
    // row p + pad_token_id + 1 of max_position_embeddings rows (514 rows, 512 positions for RoBERTa).
    const int64_t pad = j.int_or("pad_token_id", 1);
    if (pad < 0 || pad + 1 >= m.max_pos)
      fail(kOp, j.where, "pad_token_id = ", pad, " is invalid for ", type, ": the position table has ",
           m.max_pos, " rows and position 0 reads row pad_token_id + 1");
    out.learned_position_offset = pad + 1;
    out.max_position_embeddings = m.max_pos - pad - 1;
  }

  // ESM: a learned table unless position_embedding_type is "rotary" (configuration_esm.py: "absolute"
  // by default; modeling_esm.py L209-212, L253-255). transformers 5 applies no position at all for any
  // other value (ESM-1's "relative_key" checkpoints): refused.
  const bool esm_learned = type == "esm" && j.str_or("position_embedding_type", "absolute") != "rotary";
  if (type == "esm") {
    const std::string kind = j.str_or("position_embedding_type", "absolute");
    if (kind != "absolute" && kind != "rotary")
      fail(kOp, j.where, "position_embedding_type = ", detail::json_excerpt(j.at("position_embedding_type")),
           " is not supported for esm: transformers 5 knows \"absolute\" and \"rotary\" and adds no "
           "position for any other value");
  }
  if (esm_learned) {
    // create_position_ids_from_input_ids (modeling_esm.py L1023-1036): row p + pad + 1, padding skipped.
    if (!j.has("pad_token_id"))
      fail(kOp, j.where, "pad_token_id is missing: esm's learned positions start at row pad_token_id + 1");
    const int64_t pad = j.integer("pad_token_id");
    if (pad < 0 || pad + 1 >= m.max_pos)
      fail(kOp, j.where, "pad_token_id = ", pad, " is invalid for esm: the position table has ", m.max_pos,
           " rows and position 0 reads row pad_token_id + 1");
    out.learned_position_offset = pad + 1;
    out.max_position_embeddings = m.max_pos - pad - 1;
  }
  if (type == "mpnet") {
    // modeling_mpnet.py L61-76: a learned table with padding_idx 1 whatever pad_token_id says (row p + 2),
    // and (L270-347) T5's bidirectional buckets, one table for every layer: compute_position_bias runs
    // with its defaults, 32 buckets and max_distance 128 (the config only sizes the embedding).
    out.learned_embeddings = true;
    out.learned_position_offset = 2;
    out.max_position_embeddings = m.max_pos - 2;
    if (m.max_pos < 3)
      fail(kOp, j.where, "max_position_embeddings = ", m.max_pos,
           " is invalid for mpnet: position 0 reads row 2 of the table");
    out.t5_num_buckets = 32;
    out.t5_max_distance = 128;
    const int64_t sized = j.int_or("relative_attention_num_buckets", 32);
    if (sized != 32)
      out.warnings.push_back("relative_attention_num_buckets = " + std::to_string(sized) +
                             " only sizes mpnet's bias table: its buckets are 32 (modeling_mpnet.py "
                             "compute_position_bias)");
  }
  if (type == "roformer" && j.bool_or("rotary_value", false))
    fail(kOp, j.where,
         "rotary_value = true is not supported for roformer: its values are rotated too "
         "(modeling_roformer.py L180-183), which posenc's attention does not do");
  if (type == "albert") {
    // modeling_albert.py L245-276: num_hidden_layers steps, each running inner_group_num layers of its
    // group (num_hidden_groups share the weights): one attention per layer run, all alike.
    const int64_t inner = j.int_or("inner_group_num", 1);
    if (inner < 1 || inner > kMaxModelLayers / m.layers)
      fail(kOp, j.where, "inner_group_num = ", inner, " is invalid: must be in [1, ",
           kMaxModelLayers / m.layers, "]");
    m.layers *= inner;
    out.num_layers = m.layers;
  }

  const int64_t window = detail::sliding_window(j, m);

  // NoPE layers (llama4, smollm3): no_rope_layers[i] == 1 means the layer USES RoPE.
  std::vector<int> use_rope(m.layers, 1);
  if (type == "llama4_text" || type == "smollm3") {
    const int64_t interval = j.int_or("no_rope_layer_interval", 4);
    if (interval < 1) fail(kOp, j.where, "no_rope_layer_interval = ", interval, " is invalid: must be >= 1");
    std::vector<double> given = j.has("no_rope_layers") ? j.numbers("no_rope_layers") : std::vector<double>{};
    if (!given.empty() && static_cast<int64_t>(given.size()) != m.layers)
      fail(kOp, j.where, "no_rope_layers has ", given.size(),
           " entries, expected num_hidden_layers = ", m.layers);
    for (int64_t i = 0; i < m.layers; ++i)
      use_rope[i] = given.empty() ? static_cast<int>((i + 1) % interval != 0) : given[i] != 0;
  }
  // muse_glimmer_text (and Muse Spark): RoPE iff layer_rope_theta[i] != 0 (modeling_muse_glimmer.py
  // MuseGlimmerTextModel.forward: position_embeddings if layer_rope_theta[i] else None); the value is
  // only a switch: every RoPE layer takes the global base. By default 0 on every fourth layer counted
  // back from the last (configuration_muse_glimmer.py __post_init__), whatever layer_types says.
  std::vector<double> muse_theta;
  if (type == "muse_glimmer_text") {
    if (j.has("layer_rope_theta")) {
      muse_theta = j.numbers("layer_rope_theta");
      if (static_cast<int64_t>(muse_theta.size()) != m.layers)
        fail(kOp, j.where, "layer_rope_theta has ", muse_theta.size(),
             " entries, expected num_hidden_layers = ", m.layers);
    }
    for (int64_t i = 0; i < m.layers; ++i)
      use_rope[i] = muse_theta.empty() ? (m.layers - 1 - i) % 4 != 0 : muse_theta[i] != 0;
  }
  const std::vector<std::string> types = detail::layer_types(j, m, use_rope, window, out.warnings);
  if (type == "muse_glimmer_text" && window <= 0)
    for (const std::string& t : types)
      if (t == "sliding_attention")  // masking_utils.py create_sliding_window_causal_mask raises
        fail(kOp, j.where, "sliding_window is missing: ", own_type, "'s sliding_attention layers need it");
  const std::vector<int64_t> head_dims = detail::layer_head_dims(j, m, types);
  // dots3_note_text: MLA dims per layer type (src/model/dots3.cc, src/model/per_layer.cc); empty elsewhere.
  const detail::MlaLayerDims mla_dims = detail::mla_layer_dims(j, m, dims.v);

  // RoPE parameters: convert_rope_params_to_dict (modeling_rope_utils.py L775-804), with the family
  // overrides of the config classes named below.
  const bool falcon_alibi = type == "falcon" && j.bool_or("alibi", false);
  // Families whose rotary module a key leaves out (no RoPE on any layer): granitemoehybrid without
  // position_embedding_type "rope" (modeling_granitemoehybrid.py L1056), zamba2 without use_mem_rope
  // (modeling_zamba2.py L1136), olmo_hybrid with rope_theta null (modeling_olmo_hybrid.py L895-901).
  bool rope_off = false;
  if (type == "granitemoehybrid")
    rope_off = !j.has("position_embedding_type") || j.str("position_embedding_type") != "rope";
  if (type == "zamba2") {
    rope_off = !j.bool_or("use_mem_rope", false);
    // transformers 5 logs "using rescaled rope_theta" for use_long_context but keeps rope_theta
    // (modeling_zamba2.py L1137-1140): the two readings differ, so neither is given.
    if (!rope_off && j.bool_or("use_long_context", false))
      fail(kOp, j.where,
           "use_long_context = true with use_mem_rope is not supported: transformers 5 announces a rescaled "
           "rope_theta but keeps it (modeling_zamba2.py), so the model's RoPE base is ambiguous");
  }
  if (type == "olmo_hybrid") rope_off = detail::rope_theta_is_null(j.j);
  if (esm_learned) rope_off = true;
  const bool rotary = m.family->method == PositionMethod::rope && !falcon_alibi && !rope_off;
  std::optional<RopeConfig> flat;
  // The flat dict's partial_rotary_factor as given (the dict's, else the top-level one), for messages.
  std::optional<double> flat_prf;
  std::map<std::string, std::optional<RopeConfig>> nested;
  std::optional<double> beta;
  if (rotary) {
    double theta = m.family->theta;
    std::optional<double> prf;
    if (type == "gpt_neox" || type == "gpt_neox_japanese") {
      // configuration_gpt_neox.py, configuration_gpt_neox_japanese.py L67-77: rotary_emb_base and
      // rotary_pct (0.25, Japanese 1.0) win.
      theta = j.num_or("rotary_emb_base", 1e4);
      prf = j.num_or("rotary_pct", type == "gpt_neox" ? 0.25 : 1.0);
      for (const char* k : {"rope_theta", "partial_rotary_factor"})
        if (j.has(k))
          out.warnings.push_back(std::string(k) + " is ignored by " + type +
                                 " (transformers 5 reads rotary_emb_base / rotary_pct)");
    } else {
      if (j.has("rope_theta")) theta = j.num("rope_theta");
      if (type == "bamba") {
        // configuration_bamba.py L92: kwargs["partial_rotary_factor"] = 0.5, always (a value inside
        // rope_parameters still wins).
        if (j.has("partial_rotary_factor") && j.num("partial_rotary_factor") != 0.5)
          out.warnings.push_back("partial_rotary_factor = " + j.at("partial_rotary_factor").dump() +
                                 " is ignored by bamba: transformers 5 sets 0.5 (configuration_bamba.py)");
        prf = 0.5;
      } else if (type == "mimo_v2_flash") {
        prf = 0.334;  // modeling_mimo_v2_flash.py L105-108: a dict without one rotates 0.334 of the head
      } else if (j.has("partial_rotary_factor"))
        prf = j.num("partial_rotary_factor");
      else if (type == "minimax_m2" && j.has("rotary_dim"))  // configuration_minimax_m2.py L99-103
        prf = static_cast<double>(j.integer("rotary_dim")) / static_cast<double>(m.head_dim);
      else if (m.family->prf > 0)
        prf = m.family->prf;
    }
    // gptj, codegen: a fixed sin/cos table of base 10000 over rotary_dim (modeling_gptj.py,
    // modeling_codegen.py create_sinusoidal_positions); no rope dict is read.
    // roformer: create_weight's table, base 10000 over the head (modeling_roformer.py L55-68).
    const bool fixed_table = detail::has_trait(type, detail::kFixedRotaryTable);
    for (const char* k : {"rope_theta", "rope_scaling", "rope_parameters"})
      if (fixed_table && j.has(k))
        out.warnings.push_back(std::string(k) + " is ignored by " + type + " (a fixed table of base 10000)");
    if (fixed_table) theta = 1e4;
    json owned;
    const json* rp = nullptr;
    std::string rp_name = "rope_parameters";
    if (type == "cohere2_moe" && j.has("rope_scaling"))  // the class's own rope_scaling field shadows the
      out.warnings.push_back(
          "rope_scaling is ignored by cohere2_moe: transformers 5 reads rope_parameters only "
          "(configuration_cohere2_moe.py's rope_scaling field)");
    // mimo_v2_flash: convert_rope_params_to_dict is a no-op (configuration_mimo_v2_flash.py L137-138):
    // rope_parameters per layer type, or the class's; the checkpoints' own keys are checked below.
    // laguna: likewise (configuration_laguna.py convert_rope_params_to_dict returns its input); its
    // rotary module reads each type's own partial_rotary_factor (1.0 if absent), never the top-level one.
    // step3p5: its config class builds the per-type dicts (src/model/step3p5.cc resolved them).
    // cohere_compass_text: its own convert_rope_params_to_dict leaves rope_theta / rope_scaling inert
    // (configuration_cohere_compass.py L133-142) and its rotary module reads rope_parameters[layer_type].
    // dots3_note_text: likewise (src/model/dots3.cc built the dicts, each over its type's qk_rope_head_dim).
    // The class default rope_parameters: the model's own (embedding_gemma2_text), else its rules family's.
    const char* const default_rope_dict = detail::default_rope_parameters(own_type)
                                              ? detail::default_rope_parameters(own_type)
                                              : detail::default_rope_parameters(type);
    const bool per_type_only = detail::has_trait(type, detail::kRopePerLayerTypeOnly);
    // Each type's dict carries its own partial_rotary_factor (the top-level one is not read).
    if (type == "step3p5" || type == "zaya" || type == "cohere_compass_text") prf.reset();
    if (type == "cohere_compass_text") {
      for (const char* k : {"rope_theta", "partial_rotary_factor"})
        if (j.has(k))
          out.warnings.push_back(
              j.where + k + " = " + detail::json_excerpt(j.at(k)) +
              " is not read by cohere_compass_text: its rope_parameters are per layer type");
    }
    if (type == "laguna") {
      prf.reset();
      for (const char* k : {"rope_theta", "partial_rotary_factor"})
        if (j.has(k))
          out.warnings.push_back(j.where + k + " = " + detail::json_excerpt(j.at(k)) +
                                 " is not read by laguna: each rope_parameters entry has its own");
      j.read.insert("num_attention_heads_per_layer");  // head counts: not positional (head_dim is fixed)
    }
    if (fixed_table) {
      // (the dicts were reported above)
    } else if (per_type_only) {
      if (type != "step3p5" && j.j.contains("rope_scaling")) {
        // Their converts leave rope_scaling in the kwargs (laguna's and mimo_v2_flash's return them, Cohere
        // Compass's pops only rope_type / rope_theta), and PreTrainedConfig's rope_scaling setter then
        // replaces rope_parameters with it (configuration_utils.py L724-733): a non-dict fails there.
        if (!j.at("rope_scaling").is_object())
          fail(kOp, j.where, "rope_scaling = ", detail::json_excerpt(j.at("rope_scaling")),
               " is not supported for ", own_type,
               ": it replaces rope_parameters (PreTrainedConfig's rope_scaling setter; transformers 5.23 ",
               "then fails for model_type '", own_type, "')");
        rp = &j.at("rope_scaling"), rp_name = "rope_scaling";
        if (j.has("rope_parameters") && j.at("rope_parameters") != *rp)
          out.warnings.push_back(j.where + "rope_parameters is replaced by rope_scaling for " + own_type +
                                 " (PreTrainedConfig's rope_scaling setter)");
      } else if (j.has("rope_parameters"))
        rp = &j.at("rope_parameters");
      else if (type == "cohere_compass_text")  // the class default {} (its rotary module raises KeyError)
        fail(kOp, j.where, "rope_parameters is missing: it must be a dict per layer type for model_type ",
             "'cohere_compass_text' (null: no RoPE on that type), which its rotary module reads");
      else
        owned = json::parse(default_rope_dict), rp = &owned;
      j.read.insert("rope_scaling");
    } else if (j.has("rope_scaling") && type != "cohere2_moe") {
      rp = &j.at("rope_scaling"), rp_name = "rope_scaling";  // legacy wins (L776-777)
      if (j.has("rope_parameters") && j.at("rope_parameters") != *rp)
        out.warnings.push_back(j.where +
                               "rope_parameters is ignored: rope_scaling is also given and wins "
                               "(transformers 5 convert_rope_params_to_dict)");
    } else if (j.has("rope_parameters"))
      rp = &j.at("rope_parameters");
    j.read.insert("rope_parameters");
    if (rp && !rp->is_object())
      fail(kOp, j.where, rp_name, " = ", rp->dump(), " is invalid: must be an object");
    auto is_nested = [&](const json& d) {
      for (auto it = d.begin(); it != d.end(); ++it) {
        for (const char* k : {"full_attention", "sliding_attention", "chunked_attention"})
          if (it.key() == k) return true;
        if (type == "dots3_note_text" && it.key() == "indexed_attention") return true;
      }
      return false;
    };
    double local_theta = theta;
    if (type == "gemma3_text" || type == "olmo3") {
      // configuration_gemma3.py / configuration_olmo3.py convert_rope_params_to_dict: legacy
      // rope_scaling goes to full_attention only; Gemma 3's sliding theta is rope_local_base_freq.
      if (type == "gemma3_text") local_theta = j.num_or("rope_local_base_freq", 1e4);
      if (!(rp && rp_name == "rope_parameters" && is_nested(*rp))) {
        owned = {{"full_attention", rp ? *rp : json::object()}, {"sliding_attention", json::object()}};
        rp = &owned;
      }
    } else if (type == "modernbert-decoder") {
      // configuration_modernbert_decoder.py (and configuration_modernbert.py L124-151)
      // convert_rope_params_to_dict: a legacy rope_scaling goes to both layer types; the bases are
      // global_rope_theta and local_rope_theta (rope_theta is not read).
      if (j.has("rope_theta"))
        out.warnings.push_back("rope_theta is not read by " + own_type +
                               ": its bases are global_rope_theta and local_rope_theta");
      theta = j.num_or("global_rope_theta", 1.6e5);
      local_theta = j.num_or("local_rope_theta", 1e4);
      if (!(rp && rp_name == "rope_parameters" && is_nested(*rp))) {
        const json one = rp ? *rp : json::object();
        owned = {{"full_attention", one}, {"sliding_attention", one}};
        rp = &owned;
      }
    } else if (!rp && own_type == "muse_spark_text") {
      // configuration_muse_spark.py __post_init__: rope_parameters preset before convert_rope_params_to_dict,
      // so a top-level rope_theta is not read (a legacy rope_scaling still replaces the preset).
      if (j.has("rope_theta"))
        out.warnings.push_back(j.where + "rope_theta = " + detail::json_excerpt(j.at("rope_theta")) +
                               " is not read by muse_spark_text: its config class presets rope_theta 500000");
      owned = json::parse(R"({"rope_type": "default", "rope_theta": 5e5})");
      rp = &owned;
    } else if (!rp && default_rope_dict) {
      owned = json::parse(default_rope_dict);
      rp = &owned;
    }
    const json empty = json::object();
    if (rp && is_nested(*rp)) {
      for (auto it = rp->begin(); it != rp->end(); ++it) {
        // laguna's checkpoints keep a stray original_max_position_embeddings beside the per-type dicts,
        // which its rotary module never reads (it looks up each layer type's dict).
        const bool layer_type_key = it.key().find("_attention") != std::string::npos;
        if (!layer_type_key && !it.value().is_object() && !it.value().is_null()) {
          out.warnings.push_back(j.where + rp_name + "." + it.key() + " = " +
                                 detail::json_excerpt(it.value()) +
                                 " is not read: the rotary module reads the dict of each layer type");
          continue;
        }
        if (it.value().is_null()) {
          nested[it.key()] = std::nullopt;
          continue;
        }  // NoPE layer type
        if (!it.value().is_object()) fail(kOp, j.where, rp_name, ".", it.key(), " must be an object or null");
        Obj d{it.value(), j.where + rp_name + "." + it.key() + ".", {}};
        // Gemma4TextConfig has no convert_rope_params_to_dict: a sub-dict without rope_theta stays
        // without it (a top-level rope_theta is not copied in) and the rotary module raises KeyError.
        if (type == "gemma4_text" && rp != &owned && !d.has("rope_theta"))
          fail(kOp, d.where, "rope_theta is missing: required for gemma4 (transformers 5 raises KeyError)");
        Model mt = m;  // the layer type's own head_dim (Gemma 4's global layers: 512)
        mt.head_dim = detail::type_head_dim(head_dims, types, it.key(), m.head_dim);
        nested[it.key()] =
            rope_from_dict(d, mt, it.key() == "sliding_attention" ? local_theta : theta, prf, false, beta);
      }
    } else {
      if (type == "gemma4_text" || per_type_only)  // modeling_gemma4.py L1090: rope_parameters[layer_type]
        fail(kOp, j.where, rp_name, " must be a dict per layer type for ", type, " (model_type '", own_type,
             "')",
             " ({\"full_attention\": {...}, \"sliding_attention\": {...}}): its rotary module reads one per "
             "type");
      Obj d{rp ? *rp : empty, j.where + rp_name + ".", {}};
      flat = rope_from_dict(d, m, theta, prf, true, beta);
      flat_prf = d.has("partial_rotary_factor") ? std::optional<double>(d.num("partial_rotary_factor")) : prf;
      if (type == "gptj") {
        // GPTJConfig rotary_dim = 64 when the key is absent; modeling_gptj.py: all dims if null.
        flat->rotary_dim = j.j.contains("rotary_dim") ? j.int_or("rotary_dim", m.head_dim) : 64;
        validate(*flat);
      }
      if (type == "codegen") {
        // CodeGenConfig rotary_dim = 64; a null one sizes the table by the whole embedding (n_embd,
        // modeling_codegen.py L88-92), which transformers cannot apply to a head: refused.
        if (j.j.contains("rotary_dim") && !j.has("rotary_dim"))
          fail(kOp, j.where, "rotary_dim = null is not supported for codegen: its table then has n_embd / 2 ",
               "frequencies, which transformers 5 cannot apply to a head of ", m.head_dim);
        flat->rotary_dim = j.int_or("rotary_dim", 64);
        validate(*flat);
      }
      // deepseek_v32, glm_moe_dsa: always interleaved (their modular files drop rope_interleave).
      const bool always_pairs = detail::has_trait(type, detail::kAlwaysPairs);
      if (mla && !m.rules->has(detail::kRopeInterleaveUnread) && !always_pairs &&
          !j.bool_or("rope_interleave", true))
        flat->layout = RopeLayout::half;
      // hy_v4: rotate_half ("Non-interleave RoPE", modeling_hy_v4.py HYV4Attention), rope_interleave unread.
      if (type == "hy_v4" && j.bool_or("rope_interleave", false))
        out.warnings.push_back("rope_interleave = true is ignored: transformers 5's hy_v4 rotates halves");
      if (always_pairs && !j.bool_or("rope_interleave", true))
        out.warnings.push_back("rope_interleave = false is ignored: transformers 5's " + type +
                               " always rotates interleaved pairs");
    }
    if (type == "mimo_v2_flash") detail::check_mimo_keys(j, *rp, nested);
    if (type == "dbrx" && flat) dbrx_base(j, *flat, out.warnings);
    if (own_type == "hunyuan_vl_text" && flat) hunyuan_vl_sections(j, rp, rp_name, *flat, out.warnings);
    // minimax_m3_vl_text drops minimax_m2's rotary_dim conversion (modular_minimax_m3_vl.py): only
    // partial_rotary_factor sizes the rotation.
    if (type == "minimax_m3_vl_text" && flat && j.has("rotary_dim") &&
        j.integer("rotary_dim") != flat->effective_rotary_dim())
      out.warnings.push_back(
          j.where + "rotary_dim = " + std::to_string(j.integer("rotary_dim")) +
          " is not read by minimax_m3_vl_text: it rotates " + std::to_string(flat->effective_rotary_dim()) +
          " dims (partial_rotary_factor; minimax_m2's rotary_dim conversion is not inherited)");
    if (type == "minimax_m3_vl_text") j.read.insert("sparse_attention_config");
    if (type == "muse_glimmer_text" && flat) {
      // (MuseGlimmerRotaryEmbedding's default init rotates the whole head; a scaled type's partial rotation
      // is refused by rope_from_dict, as for every whole-head family.)
      for (double t : muse_theta)
        if (t != 0 && t != flat->base) {
          out.warnings.push_back(j.where + "layer_rope_theta contains " + detail::json_excerpt(json(t)) +
                                 ", read as 'RoPE on' by " + own_type +
                                 ": every RoPE layer rotates with the base " +
                                 detail::json_excerpt(json(flat->base)) + " (modeling_muse_glimmer.py)");
          break;
        }
    }
  }
  if (!rotary && !falcon_alibi && m.family->method != PositionMethod::alibi)
    for (const char* k : {"rope_theta", "rope_parameters", "rope_scaling", "partial_rotary_factor"})
      if (has(j.j, k) && !j.read.count(k)) {
        out.warnings.push_back(std::string(k) + " is not used: model_type '" + type + "' applies no RoPE" +
                               (rope_off ? " with this config" : ""));
        j.read.insert(k);
      }
  j.read.insert("rotary_dim");  // phi: superseded by partial_rotary_factor in transformers 5
  j.read.insert("rope_interleave");
  // rotary_emb_base / rotary_pct are read by gpt_neox only (above); in any other family
  // transformers 5 keeps them as inert attributes (CodeQwen1.5's qwen2 config has
  // rotary_emb_base), so they are reported as ignored.

  // Softmax scale (the `scaling` each family's attention passes to the kernel).
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim));
  // gemma3n: self.scaling = 1.0 with q/k RMS norms, no query_pre_attn_scalar (modeling_gemma3n.py L1172);
  // its last num_kv_shared_layers layers reuse the keys of an earlier layer of their type, rotated at the
  // same positions: the same plan.
  const bool gemma3n = own_type == "gemma3n_text";
  if (gemma3n) j.read.insert("num_kv_shared_layers");
  if (gemma3n && j.has("query_pre_attn_scalar"))
    out.warnings.push_back("query_pre_attn_scalar is not read by gemma3n_text: its attention scale is 1");
  if ((type == "gemma2" || type == "vaultgemma" || type == "gemma3_text") && !gemma3n)
    scale = std::pow(j.num_or("query_pre_attn_scalar", 256), -0.5);
  // step3p5: query_pre_attn_scalar ** -0.5, the head_dim by default (configuration_step3p7.py L251-252,
  // modeling_step3p7.py L680). Its sliding layers' head count (num_sliding_attention_heads,
  // attention_other_setting, per_layer_config) does not change the head's size.
  if (type == "step3p5") {
    const double scalar = j.num_or("query_pre_attn_scalar", static_cast<double>(qk_head_dim));
    if (!(scalar > 0)) fail(kOp, j.where, "query_pre_attn_scalar = ", scalar, " is invalid: must be > 0");
    scale = std::pow(scalar, -0.5);
    for (const char* k : {"num_sliding_attention_heads", "attention_other_setting"}) j.read.insert(k);
  }
  if (gemma3n) scale = 1.0;
  // granite, granitemoe(shared), hyperclovax: self.scaling = config.attention_multiplier
  // (modeling_granitemoe.py L272, modeling_hyperclovax.py L190).
  // hyperclovax: attention_multiplier None -> head_dim ** -0.5 (configuration_hyperclovax.py L122).
  if (type == "granite" || type == "granitemoe" || type == "granitemoeshared")
    scale = j.num_or("attention_multiplier", 1.0);
  if (type == "granite_docling_text")  // configuration_granite_docling.py L148: 0.015625 by default
    scale = j.num_or("attention_multiplier", 0.015625);
  if (type == "hyperclovax") scale = j.num_or("attention_multiplier", scale);
  if (type == "granitemoehybrid" || type == "granite_swa" || type == "granitemoe_swa")
    scale = j.num_or("attention_multiplier", 1.0);  // self.scaling = config.attention_multiplier
  // zamba, zamba2: (head_dim / 2) ** -0.5 (modeling_zamba.py L137, modeling_zamba2.py L239).
  if (type == "zamba" || type == "zamba2") scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim) / 2.0);
  if (t5) scale = 1.0;                     // modeling_t5.py: no 1/sqrt(d) (folded into the initialization)
  if (type == "gemma4_text") scale = 1.0;  // modeling_gemma4.py Gemma4TextAttention: q/k RMS norms instead
  // Muse: the weightlessly normed query times qk_scale_factor before RoPE (modeling_muse_glimmer.py
  // MuseGlimmerAttention.forward), then the kernel's head_dim^-0.5: RoPE is linear, so the factor is the
  // logits' and the plan's scale carries it (q / k in: the normed ones).
  if (type == "muse_glimmer_text") {
    const double factor = j.num_or("qk_scale_factor", own_type == "muse_spark_text" ? 5.4730064863875 : 3.87);
    if (!(factor > 0)) fail(kOp, j.where, "qk_scale_factor = ", factor, " is invalid: must be > 0");
    scale *= factor;
  }
  // Falcon-H1: k_proj(x) times key_multiplier before RoPE (modeling_falcon_h1.py L208): likewise the logits'
  // factor, carried by the plan's scale (k in: k_proj's).
  if (type == "falcon_h1") {
    const double key_multiplier = j.num_or("key_multiplier", 1.0);
    if (!std::isfinite(key_multiplier) || key_multiplier == 0)
      fail(kOp, j.where, "key_multiplier = ", key_multiplier, " is invalid: must be finite and nonzero");
    scale *= key_multiplier;
  }
  j.read.insert("attention_k_eq_v");  // Gemma 4: values reuse the key projection (not positional)
  if (mla && flat && flat->scaling.type != RopeScalingType::none && flat->scaling.mscale_all_dim &&
      *flat->scaling.mscale_all_dim != 0) {
    // modeling_deepseek_v3.py yarn_apply_mscale: scaling *= get_mscale(factor, mscale_all_dim)^2
    const double ms = detail::yarn_mscale(flat->scaling.factor, *flat->scaling.mscale_all_dim);
    scale *= ms * ms;
  }
  if (type == "mpt" && j.has("attn_config") && j.at("attn_config").is_object()) {
    Obj ac{j.at("attn_config"), j.where + "attn_config.", {}};
    if (ac.has("softmax_scale")) scale = ac.num("softmax_scale");
    for (const char* k : {"alibi", "alibi_bias_max", "attn_type", "attn_pdrop", "attn_impl", "clip_qkv",
                          "prefix_lm", "qk_ln", "attn_uses_sequence_id", "rope", "sliding_window_size"})
      ac.read.insert(k);
    ac.warn_unread(out.warnings, type);
  }
  std::optional<double> softcap;
  if (type == "gemma2" || type == "vaultgemma") {
    if (j.has("attn_logit_softcapping"))
      softcap = j.num("attn_logit_softcapping");
    else if (!j.j.contains("attn_logit_softcapping"))
      softcap = 50.0;
  }
  // Gemma 3 stores attn_logit_softcapping but never passes it to attention (modeling_gemma3.py).
  for (const char* k : {"attn_logit_softcapping", "final_logit_softcapping", "rope_local_base_freq",
                        "query_pre_attn_scalar", "attention_multiplier", "alibi", "initial_context_length",
                        "use_qk_norm", "original_max_position_embeddings"})
    j.read.insert(k);
  const int64_t chunk = j.int_or("attention_chunk_size", type == "llama4_text" ? 8192 : 0);
  QueryTemperature llama4_temp;
  if (type == "llama4_text" && j.bool_or("attn_temperature_tuning", true)) {
    llama4_temp.kind = QueryTemperature::Kind::llama4;
    llama4_temp.scale = j.num_or("attn_scale", 0.1);
    llama4_temp.floor_scale = j.num_or("floor_scale", 8192);
  }
  j.read.insert("no_rope_layers");
  j.read.insert("no_rope_layer_interval");
  QueryTemperature ministral_temp;
  // mistral4: the same query scale (modeling_mistral4.py L358-360, L477-481).
  if (type == "ministral3" || type == "mistral4") {
    if (!beta)
      fail(kOp, j.where, "rope_parameters.llama_4_scaling_beta is missing: ", type,
           " applies it to every query (modeling_", type, ".py get_llama_4_attn_scale)");
    const int64_t original = flat ? flat->scaling.original_max_position_embeddings : 0;
    if (original <= 0)  // transformers reads it unconditionally (get_llama_4_attn_scale's floor divisor)
      fail(kOp, j.where, "rope_parameters.original_max_position_embeddings is missing: ", type,
           "'s llama_4_scaling_beta divides positions by it (get_llama_4_attn_scale)");
    ministral_temp = {QueryTemperature::Kind::ministral3, *beta, static_cast<double>(original)};
  }
  std::set<int64_t> cross;
  if (type == "mllama_text_model") {  // MllamaTextConfig: None -> [3, 8, ..., 38] (L144-145)
    if (j.has("cross_attention_layers"))
      for (int64_t v : j.integers("cross_attention_layers", 0, kMaxModelLayers)) cross.insert(v);
    else
      cross = {3, 8, 13, 18, 23, 28, 33, 38};
  }
  // BERT's family: causal iff is_decoder (modeling_bert.py L359, L696-708; the CausalLM heads only warn).
  bool bidirectional = detail::causal_iff_decoder(type) && !j.bool_or("is_decoder", false);
  if (detail::always_bidirectional(own_type)) bidirectional = true;
  // modeling_distilbert.py L72-76, L304-311: a sinusoidal table only initializes the learned one.
  if (own_type == "distilbert" && j.bool_or("sinusoidal_pos_embds", false))
    out.warnings.push_back(
        "sinusoidal_pos_embds = true only initializes distilbert's learned table: the "
        "checkpoint's rows are the positions");
  if (own_type == "modernbert") {
    // A BERT leftover in ModernBERT checkpoints ("absolute", "rope", even "relative_key_query"):
    // ModernBertConfig has no such field and its layers rotate whatever it says.
    if (j.has("position_embedding_type"))
      out.warnings.push_back("position_embedding_type = " + j.at("position_embedding_type").dump() +
                             " is not read by modernbert: RoPE on every layer");
  }
  j.read.insert("is_decoder");
  if (detail::always_bidirectional(own_type) && j.has("use_bidirectional_attention")) {
    // (embedding_gemma2_text: no such field; its layers are bidirectional whatever the key says)
    out.warnings.push_back(
        "use_bidirectional_attention = " + detail::json_excerpt(j.at("use_bidirectional_attention")) +
        " is not read by " + own_type + ": every layer attends both ways");
  } else if (type == "gemma4_text" && j.has("use_bidirectional_attention")) {
    // configuration_gemma4.py: "all" (every token, a halved symmetric window) or "vision" (image
    // tokens among themselves; text stays causal).
    const std::string mode = j.str("use_bidirectional_attention");
    if (mode != "vision")
      fail(kOp, j.where,
           "use_bidirectional_attention = ", detail::json_excerpt(j.at("use_bidirectional_attention")),
           " is not modeled by posenc (Gemma 4: \"vision\" or null)");
    out.warnings.push_back(
        "use_bidirectional_attention = \"vision\": image tokens attend to each other "
        "both ways, which the caller's mask must add; text layers shown causal");
  } else if ((own_type == "gemma3_text" || type == "step3p5") &&
             j.bool_or("use_bidirectional_attention", false)) {
    // step3p5: full layers see every key, sliding layers |q - k| < sliding_window (modeling_step3p7.py
    // L800-809, L880-888; the window unchanged).
    // Gemma3TextModel (EmbeddingGemma): full layers see every key, sliding layers a symmetric window
    // (modeling_gemma3.py L536-538; the window in layer_types.cc).
    bidirectional = true;
  } else if (outer_type == "paligemma") {
    // PaliGemmaConfig sets text_config.use_bidirectional_attention (L90-93), but the mask is PaliGemma's
    // own: causal, with the prefix (token_type_ids == 0: image and prompt) bidirectional.
    j.read.insert("use_bidirectional_attention");
    out.warnings.push_back(
        "paligemma: the prefix (image tokens and prompt, token_type_ids 0) attends both ways (prefix-LM), "
        "which the caller's mask must add; and its positions start at 1 (position_ids = arange + 1: the "
        "same attention, other rotated keys); layers shown causal");
  } else if (j.bool_or("use_bidirectional_attention", false)) {
    out.warnings.push_back(
        "use_bidirectional_attention = true is not modeled by posenc: layers shown causal");
  }
  if (outer_type == "molmo2")  // flat or not (the file means the multimodal model); Molmo2Model: one block of
                               // every image / frame token in prefill
    out.warnings.push_back(
        "molmo2: in prefill its image and frame tokens (mm_token_type_ids 1) attend to each other both "
        "ways, as one block, which the caller's mask must add; text layers shown causal");
  if (outer_type == "gemma3")  // flat or not (the file means the multimodal model)
    // Gemma3Model: each image's tokens attend to each other both ways (get_block_sequence_ids_for_mask).
    out.warnings.push_back(
        "gemma3: each image's tokens attend to each other both ways (token_type_ids 1), which the caller's "
        "mask must add; text layers shown causal");
  // transformers 5's BERT family has no position_embedding_type: it adds the learned table whatever the
  // key says. A checkpoint trained with another kind does not hold positions in that table: transformers
  // 4's "relative_key" / "relative_key_query" (distance embeddings in every layer, removed in 5) and
  // Jina's "alibi" (remote code, auto_map JinaBert*). Refused rather than planned with untrained rows.
  if (detail::bert_like(type) && j.has("position_embedding_type") &&
      j.str("position_embedding_type") != "absolute")
    fail(kOp, j.where, "position_embedding_type = ", detail::json_excerpt(j.at("position_embedding_type")),
         " is not supported for ", type,
         ": transformers 5 adds the learned table instead, which this checkpoint did not train (",
         j.str("position_embedding_type") == "alibi" ? "ALiBi is the remote code of its auto_map"
                                                     : "transformers 4's relative distance embeddings",
         ")");
  const bool gpt2_inverse = type == "gpt2" && j.bool_or("scale_attn_by_inverse_layer_idx", false);
  if ((type == "gpt2" || type == "gpt_bigcode") && !j.bool_or("scale_attn_weights", true)) scale = 1.0;
  if (type == "gpt_neo") scale = 1.0;  // modeling_gpt_neo.py _attn: q k^T with no 1/sqrt(d)
  if (t5) {
    out.t5_num_buckets = j.int_or("relative_attention_num_buckets", 32);
    out.t5_max_distance = j.int_or("relative_attention_max_distance", 128);
    // modeling_umt5.py L371-378, L342-348: every self-attention layer has_relative_attention_bias.
    out.t5_bias_per_layer = own_type == "umt5";
    j.read.insert("is_encoder_decoder");
    if (own_type == "umt5") j.read.insert("scalable_attention");  // in UMT5 configs; no 5.23 code reads it
  }

  std::vector<int> force_rope(m.layers, 0);  // cohere2_moe's dense prefix
  if (type == "cohere2_moe") {
    // mlp_layer_types, else "dense" for the first first_k_dense_replace layers
    // (configuration_cohere2_moe.py).
    const bool prefix_rope = j.int_or("prefix_dense_sliding_window_pattern", 1) == 1;
    const int64_t dense = j.int_or("first_k_dense_replace", 0);
    std::vector<std::string> mlp;
    if (j.has("mlp_layer_types")) {
      const json& l = j.at("mlp_layer_types");
      if (!l.is_array() || static_cast<int64_t>(l.size()) != m.layers)
        fail(kOp, j.where, "mlp_layer_types must be a list of num_hidden_layers = ", m.layers, " strings");
      for (const json& e : l) mlp.push_back(e.is_string() ? e.get<std::string>() : "");
    }
    for (int64_t i = 0; i < m.layers; ++i)
      force_rope[i] = prefix_rope && (mlp.empty() ? i < dense : mlp[i] == "dense");
  }
  // molmo2_text (configuration_molmo2.py L156-164): rope_scaling_layers, null = every layer; qk_norm_type
  // qwen3 | olmo (the norms before RoPE are the caller's; another value raises there).
  std::vector<int> molmo_scaled;
  if (type == "molmo2_text") {
    molmo_scaled.assign(static_cast<size_t>(m.layers), 1);
    if (j.has("rope_scaling_layers")) {
      // modeling_molmo2.py L661-664: layer i is scaled iff `i in config.rope_scaling_layers`, so an index
      // outside [0, num_hidden_layers) scales no layer (ignored, with a warning); the strict list[int] field
      // rejects anything but integers (configuration_molmo2.py L149).
      const json& v = j.at("rope_scaling_layers");
      if (!v.is_array())
        fail(kOp, j.where, "rope_scaling_layers = ", detail::json_excerpt(v),
             " is invalid: must be a list of layer indices (transformers 5.23 raises)");
      molmo_scaled.assign(static_cast<size_t>(m.layers), 0);
      std::vector<std::string> ignored;
      for (const json& e : v) {
        if (!e.is_number_integer())
          fail(kOp, j.where, "rope_scaling_layers contains ", e.dump(),
               ": must be integers (transformers 5.23 raises)");
        const bool in_range = e.is_number_unsigned() ? e.get<uint64_t>() < static_cast<uint64_t>(m.layers)
                                                     : e.get<int64_t>() >= 0 && e.get<int64_t>() < m.layers;
        if (in_range)
          molmo_scaled[static_cast<size_t>(e.get<int64_t>())] = 1;
        else if (std::find(ignored.begin(), ignored.end(), e.dump()) == ignored.end())
          ignored.push_back(e.dump());
      }
      if (!ignored.empty()) {
        std::string list;
        for (const std::string& x : ignored) list += (list.empty() ? "" : ", ") + x;
        out.warnings.push_back(
            j.where + "rope_scaling_layers contains " + list +
            ", not a layer of the num_hidden_layers = " + std::to_string(m.layers) +
            ": ignored, as transformers 5.23 does (no layer takes the scaled rope for it)");
      }
    }
    const std::string norm = j.str_or("qk_norm_type", "qwen3");
    if (norm != "qwen3" && norm != "olmo")
      fail(kOp, j.where, "qk_norm_type = ", detail::json_excerpt(j.at("qk_norm_type")),
           " is invalid for molmo2_text: \"qwen3\" or \"olmo\" (transformers 5.23 raises)");
  }
  // molmo2_text (its rope_scaling_layers), hy_v4 (every layer): their default rope init rotates the whole
  // head and ignores partial_rotary_factor (modeling_molmo2.py L121-138, modeling_hy_v4.py L93-110), but
  // every other rope type's init reads it (modeling_rope_utils.py L181, L325, L416, L549, L639): cos / sin of
  // int(head_dim * prf) dims, which apply_rotary_pos_emb multiplies with the whole head (modeling_molmo2.py
  // L230-231, modeling_hy_v4.py L151-152): a shape mismatch at the first forward in transformers 5.23.
  const bool whole_head_apply =
      type == "hy_v4" ||
      (type == "molmo2_text" && std::find(molmo_scaled.begin(), molmo_scaled.end(), 1) != molmo_scaled.end());
  if (whole_head_apply && flat && flat->scaling.type != RopeScalingType::none &&
      flat->effective_rotary_dim() != flat->head_dim)
    fail(kOp, j.where, "partial_rotary_factor = ", flat_prf ? detail::json_excerpt(json(*flat_prf)) : "?",
         " with rope type '", rope_scaling_name(flat->scaling.type), "' is not supported for ", own_type,
         ": its rotary module then builds cos / sin of ", flat->effective_rotary_dim(),
         " dims, which its apply_rotary_pos_emb cannot apply to the ", flat->head_dim, "-dim rotated head",
         type == "molmo2_text" ? " of its rope_scaling_layers" : "",
         " (transformers 5.23 fails at the first forward; the default rope type ignores the factor)");
  std::vector<double> layer_theta;  // granite_swa, granitemoe_swa: layer_rope_theta
  if ((type == "granite_swa" || type == "granitemoe_swa") && j.has("layer_rope_theta")) {
    layer_theta = j.numbers("layer_rope_theta");
    if (static_cast<int64_t>(layer_theta.size()) != m.layers)
      fail(kOp, j.where, "layer_rope_theta has ", layer_theta.size(),
           " entries, expected num_hidden_layers = ", m.layers);
    for (double t : layer_theta)
      if (!(t >= 0) || !std::isfinite(t))
        fail(kOp, j.where, "layer_rope_theta contains ", t, ": must be 0 (no RoPE) or a positive base");
  }

  // Per layer. T5: the encoder's num_layers, then the decoder's num_decoder_layers (None: num_layers;
  // SwitchTransformersConfig: 12); Pix2Struct's text model is a decoder of num_layers.
  const bool t5_decoder_only = own_type == "pix2struct_text_model";
  const int64_t encoder_layers = t5 && t5_decoder_only ? 0 : m.layers;
  // (SwitchTransformersConfig: a null num_decoder_layers is num_layers too, L92-94.)
  const bool decoder_null = j.j.contains("num_decoder_layers") && j.j.at("num_decoder_layers").is_null();
  const int64_t decoder_layers =
      !t5               ? 0
      : t5_decoder_only ? m.layers
                        : j.int_or("num_decoder_layers",
                                   own_type == "switch_transformers" && !decoder_null ? 12 : m.layers);
  // Pix2StructTextModel: is_causal = config.is_decoder (modeling_pix2struct.py L784), its buckets
  // unidirectional either way (L673): a bidirectional mask over causal buckets is not modeled.
  if (t5_decoder_only && !j.bool_or("is_decoder", true))
    fail(kOp, j.where, "is_decoder = false is not supported for ", own_type,
         ": a bidirectional mask over its unidirectional buckets");
  if (decoder_layers < 0 || decoder_layers > kMaxModelLayers)
    fail(kOp, j.where, "num_decoder_layers = ", decoder_layers, " is invalid: must be in [0, ",
         kMaxModelLayers, "]");
  out.num_layers = encoder_layers + decoder_layers;
  const std::vector<std::optional<TopkIndexer>> indexers = detail::topk_indexers(j, m, types, out.warnings);
  for (int64_t i = 0; i < out.num_layers; ++i) {
    LayerPlan p;
    p.layer = i;
    const bool own_dims = mla || t5 || type == "kimi_linear" || type == "glm5_next_text" ||
                          type == "mimo_v2_flash";  // q/k and v heads of their own sizes
    p.qk_head_dim = own_dims ? qk_head_dim : head_dims[i];
    p.v_head_dim = own_dims ? v_head_dim : head_dims[i];
    if (!mla_dims.nope.empty()) {  // dots3_note_text: the layer type's MLA (modeling_dots3_note.py L450-454)
      p.qk_head_dim = mla_dims.nope[i] + head_dims[i];
      p.v_head_dim = mla_dims.v[i];
    }
    p.layer_type = t5 ? (i < encoder_layers ? "encoder" : "decoder") : types[i];
    LayerAttention& a = p.attention;
    a.causal = !(bidirectional || (t5 && i < encoder_layers));
    a.softmax_scale = gpt2_inverse ? scale / static_cast<double>(i + 1) : scale;
    // dots3_note_text: qk_head_dim^-0.5 of the layer's own head, no yarn mscale (modeling_dots3_note.py L494)
    if (!mla_dims.nope.empty()) a.softmax_scale = 1.0 / std::sqrt(static_cast<double>(p.qk_head_dim));
    a.softcap = softcap;
    // modeling_flint.py L226-227: gpt-oss's sinks; modeling_granite_swa.py L152: a sink per head.
    a.sinks = type == "gpt_oss" || type == "flint" || type == "granite_swa" || type == "granitemoe_swa" ||
              type == "hy_v4";  // modeling_hy_v4.py HYV4Attention: one learnable sink per head
    const std::string& lt = p.layer_type;
    // minimax: a set sliding_window masks every full_attention layer (modeling_minimax.py L666-668).
    if (type == "minimax" && lt == "full_attention") a.window = window;
    if (lt == "sliding_attention") {
      a.window = window;
      if (window == 0)
        out.warnings.push_back("layer " + std::to_string(i) +
                               " is sliding_attention but "
                               "sliding_window is not set: no window");
    }
    if (lt == "chunked_attention") a.chunk = chunk;
    if (type == "mimo_v2_flash") a.sinks = lt == "sliding_attention";  // sinks on the SWA layers only (L360)
    if (type == "ministral3" || type == "mistral4") a.temperature = ministral_temp;
    const bool attends = lt != "linear_attention" && lt != "conv" && lt != "moe" && lt != "mlp";
    p.softmax_attention = attends;
    if (cross.count(i)) {
      p.layer_type = "cross_attention";  // modeling_mllama.py: attends to vision tokens, no RoPE
      a.causal = false;
    } else if (!attends) {
      p.position = PositionMethod::none;
    } else if (falcon_alibi || m.family->method == PositionMethod::alibi) {
      p.position = PositionMethod::alibi;
    } else if (m.family->method != PositionMethod::rope || rope_off) {
      p.position = esm_learned ? PositionMethod::learned : rope_off ? PositionMethod::none : m.family->method;
    } else {
      std::optional<RopeConfig> rc = flat;
      // molmo2_text: layers outside rope_scaling_layers take rotary_emb_unscaled, the default rope of the
      // same base (modeling_molmo2.py Molmo2TextModel: position_embeddings["scaled" | "unscaled"]).
      // Its compute_default_rope_parameters rotates the whole head, whatever partial_rotary_factor says
      // (modeling_molmo2.py L121-138).
      if (rc && !molmo_scaled.empty() && !molmo_scaled[i]) {
        rc->scaling = RopeScaling{};
        rc->rotary_dim = rc->head_dim;
      }
      if (!flat) {
        const auto it = nested.find(lt);
        if (it == nested.end())
          fail(kOp, j.where, "rope_parameters has no entry for layer type '", lt, "' (layer ", i, ")");
        rc = it->second;
      }
      // granite_swa(moe): the layer's own base; 0 = NoPE (modeling_granite_swa.py L390-398, L449-456:
      // one rotary module per distinct base, the rope dict's other fields kept).
      if (!layer_theta.empty() && rc) {
        if (layer_theta[i] == 0)
          rc.reset();
        else
          rc->base = layer_theta[i];
      }
      bool uses = rc.has_value() && use_rope[i];
      // exaone4: RoPE iff sliding_window is None or the layer slides (modeling_exaone4.py L233);
      // cohere2: iff the layer slides with a window (modeling_cohere2.py L190, L221).
      // exaone_moe, kolibri1: as exaone4 (modeling_exaone_moe.py L183, modeling_kolibri1.py L182);
      // flint: as cohere2 (modeling_flint.py L280-283); afmoe: iff the layer slides (modeling_afmoe.py L359).
      const bool exaone_rule = type == "exaone4" || type == "exaone_moe" || type == "kolibri1";
      if (exaone_rule && window > 0 && lt != "sliding_attention") uses = false;
      if ((type == "cohere2" || type == "flint") && !(window > 0 && lt == "sliding_attention")) uses = false;
      // cohere2_moe: as cohere2, and on the dense prefix when prefix_dense_sliding_window_pattern is 1
      // (modeling_cohere2_moe.py L298-300, L318-319: force_rope).
      if (type == "cohere2_moe" && !(window > 0 && lt == "sliding_attention") && !force_rope[i]) uses = false;
      if (type == "afmoe" && lt != "sliding_attention") uses = false;
      if (uses) {
        p.position = PositionMethod::rope;
        p.rope = rc;
        p.rotary_lo = mla_dims.nope.empty() ? m.nope : mla_dims.nope[i];
        p.rotary_hi = p.rotary_lo + rc->effective_rotary_dim();
        if (indexers[i]) {  // the same cos / sin, the indexer's own layout and range
          p.indexer = indexers[i];
          const RopeLayout layout = p.indexer->rope.layout;
          p.indexer->rope = *rc;
          p.indexer->rope.layout = layout;
          // dots3_note_text: the first qk_rope_head_dim dims of the layer's own config (L207, L248-254)
          if (!mla_dims.nope.empty())
            p.indexer->rotary_hi = p.indexer->rotary_lo + rc->effective_rotary_dim();
          if (p.indexer->block_size > 0) {  // MiniMax-M3: the first rotated dims of its head
            if (rc->effective_rotary_dim() > p.indexer->head_dim)
              fail(kOp, j.where, "index_head_dim = ", p.indexer->head_dim, " is smaller than the ",
                   rc->effective_rotary_dim(), " rotated dims its indexer slices cos / sin to: unsupported");
            p.indexer->rope.head_dim = p.indexer->head_dim;
            p.indexer->rotary_lo = 0;
            p.indexer->rotary_hi = rc->effective_rotary_dim();
          }
        }
      } else if (type == "llama4_text") {
        a.temperature = llama4_temp;  // NoPE layers only
      }
    }
    out.layers.push_back(std::move(p));
  }
  // Llama 4's use_qk_norm (default true): Llama4TextL2Norm, weightless, on q and k after RoPE in the RoPE
  // layers (modeling_llama4.py L331-332, L349-356): it cancels a scaled rotation's attention factor
  // (freqs_cis * attention_scaling), as NanoChat's norms do (src/model/rope_dict.cc).
  // HunYuan (dense, MoE, VL): query_layernorm / key_layernorm, RMS norms per head after RoPE, always
  // (modeling_hunyuan_v1_dense.py L197-199, modeling_hunyuan_vl.py L541-542): the same cancellation.
  const bool hunyuan = type == "hunyuan_v1_dense" || type == "hunyuan_v1_moe";
  if ((type == "llama4_text" && j.bool_or("use_qk_norm", true)) || hunyuan)
    for (const LayerPlan& p : out.layers) {
      if (!p.rope) continue;
      const double factor = rope_frequencies(*p.rope, p.rope->original_context()).attention_factor;
      if (factor != 1.0)
        out.warnings.push_back("rope_type '" + std::string(rope_scaling_name(p.rope->scaling.type)) +
                               "' scales cos and sin by " + std::to_string(factor) + ", which " + own_type +
                               (hunyuan ? "'s RMS norms of q and k after RoPE cancel"
                                        : "'s qk_norm (use_qk_norm) after RoPE cancels") +
                               ": normalize after posenc's rotation, or rotate with attention_factor 1 when "
                               "normalizing first");
      break;
    }
  if (type == "zaya")
    for (LayerPlan& p : out.layers) p.layer_type = detail::zaya_layer_type(p.layer_type);
  j.warn_unread(out.warnings, own_type);
  // A wrapper's own positional-looking keys are not read (the text model uses text_config's):
  // report those that text_config lacks or contradicts.
  if (wrapped)
    for (auto it = root.begin(); it != root.end(); ++it) {
      const std::string& k = it.key();
      if (!detail::looks_positional(k) || detail::known_irrelevant_key(k)) continue;
      if (!tj.contains(k) || tj.at(k) != it.value())
        out.warnings.push_back("top-level key '" + k + "' is ignored: the text model reads text_config");
    }
  return out;
}

ModelPositions model_positions_from_hf_file(const std::string& path) {
  return model_positions_from_hf_json(detail::read_text_file(kOp, path));
}

}  // namespace posenc
