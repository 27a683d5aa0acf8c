// src/model/config_json.cc: ModelPositions from a HuggingFace config.json, as transformers 5.23
// reads it: PreTrainedConfig.convert_rope_params_to_dict + standardize_rope_params
// (modeling_rope_utils.py L775-866), each family's config class defaults and layer_types, and the
// per-layer choices of its modeling file (each rule cites its file and lines).
// The reader's stages run in transformers' order (identify and resolve the text config, sizes, position
// tables, windows and layer types, the rope dicts, the attention scale and masks, then each layer); what a
// family does at a stage is its Family row (src/model/families.h), or its hook (src/model/hooks.h) where
// the row's data cannot say it. No stage tests a model type by name.
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
// Why a multimodal wrapper's config without text_config is not planned (empty when it is): a wrapper whose
// class reads its top-level keys in part (wrapper_flat_refusal: fuyu); a wrapper whose own type does not
// name a text model in posenc's table keeps keys of its own at the top level, and its class builds the
// text model from text_config alone.
std::string flat_wrapper_refusal(const std::string& outer, const json& root) {
  if (has(root, "text_config") || !(wrapper_text_class(outer) || wrapper_default_text_type(outer))) return "";
  if (const char* why = detail::wrapper_flat_refusal(outer)) return why;
  const std::string fixed = detail::wrapper_fixed_text_type(outer);
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
  if (!detail::find_family(type) && !detail::seq2seq_family(type))
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
  if (std::string why = detail::remote_code_refusal(root, outer); !why.empty()) return why;
  if (detail::remote_code_planned(outer)) return "";
  std::string why = detail::refusal_reason(outer);
  if (!why.empty()) return "model_type '" + outer + "' is not supported: " + why;
  if (const std::string flat = flat_wrapper_refusal(outer, root); !flat.empty()) return flat;
  const bool wrapped = has(root, "text_config") && root.at("text_config").is_object();
  const json& tj = wrapped ? root.at("text_config") : root;
  const std::string fixed = detail::wrapper_fixed_text_type(outer);
  const std::string own =
      !fixed.empty() ? fixed : canonical_type(wrapped ? wrapper_text_type(outer, tj) : outer);
  why = detail::refusal_reason(own);
  if (!why.empty()) return "model_type '" + own + "' is not supported: " + why;
  if (!detail::find_family(own) && !detail::seq2seq_family(own))
    return "model_type '" + own + "' is not in posenc's model table";
  return "";
}

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

// Marks the keys of a space-separated list read.
void quiet(Obj& j, const char* keys) {
  for (std::string_view rest = keys ? keys : ""; !rest.empty();) {
    const size_t end = std::min(rest.find(' '), rest.size());
    j.read.insert(std::string(rest.substr(0, end)));
    rest.remove_prefix(std::min(end + 1, rest.size()));
  }
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
  // A wrapper with a fixed text type (wrapper_fixed_text_type: step3p7) builds that model, flat or not.
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
  const std::string fixed_type = detail::wrapper_fixed_text_type(outer_type);
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
  // The model's own row (its class defaults) and the row of the family whose positional code it runs.
  const std::string own_type = canonical_type(declared_type);
  const std::string type = rules_type(own_type);
  const detail::Family* const own_row = detail::find_family(own_type);
  const detail::FamilyHooks hooks =
      own_row ? detail::family_hooks(*own_row, *detail::find_family(type)) : detail::FamilyHooks{};
  // A config class that rebuilds its text config before anything is read (step3p5, zaya, ultrabert,
  // dots3_note_text: FamilyHooks::resolve).
  const json resolved = hooks.resolve ? hooks.resolve(given, where, resolve_warnings) : json(nullptr);
  const json& tj = resolved.is_null() ? given : resolved;
  Obj j{tj, where, {}};
  j.read.insert("model_type");
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
  if (detail::seq2seq_family(own_type)) {
    ModelPositions out = detail::seq2seq_positions(j, own_type);
    out.warnings.insert(out.warnings.begin(), resolve_warnings.begin(), resolve_warnings.end());
    return out;
  }
  ModelPositions out;
  out.warnings = resolve_warnings;
  Model m;
  m.family = own_row;  // the class defaults are the model's own
  m.rules = detail::find_family(type);
  m.hooks = &hooks;
  m.type = type;
  m.warnings = &out.warnings;
  const detail::Family& rules = *m.rules;
  detail::Reading r{j, m, out, own_type, type};
  // Keys of the family that carry no positions, or that its rules check elsewhere (Family::quiet_keys).
  quiet(j, m.family->quiet_keys);
  quiet(j, rules.quiet_keys);
  const bool t5 = rules.has(detail::kT5Stacks);
  // Sizes a config omits: the config class's defaults (sparse configs, e.g. Gemma 3's, omit them).
  const detail::SizeDefaults* sizes = detail::find_size_defaults(declared_type);
  if (!sizes) sizes = detail::find_size_defaults(type);
  m.sizes = sizes;
  const bool need = sizes == nullptr;
  // The size keys and their aliases: the row's own where its class names them otherwise (Kosmos2TextConfig's
  // attribute_map: hidden_size -> embed_dim, num_hidden_layers -> layers, configuration_kosmos2.py L31-35;
  // its own names come first).
  const detail::Family& own = *m.family;
  m.hidden = first_int(j, own.hidden_keys ? own.hidden_keys : "hidden_size n_embd d_model n_embed dim",
                       sizes ? sizes->hidden : 0, need);
  m.heads = first_int(j, "num_attention_heads n_head n_heads num_heads attention_heads",
                      sizes ? sizes->heads : 0, need);
  m.layers = first_int(j, own.layers_keys ? own.layers_keys : "num_hidden_layers n_layer n_layers num_layers",
                       sizes ? sizes->layers : 0, need);
  if (hooks.sizes) hooks.sizes(r);  // sizes the family derives (nemotron_h, jetmoe, longcat_flash, ...)
  if (hooks.plan) return hooks.plan(j, m);
  if (rules.has(detail::kAttentionFree)) {
    // modeling_mamba.py, modeling_mamba2.py, modeling_falcon_mamba.py: state-space layers only;
    // position_ids are accepted and ignored. num_heads (Mamba2) counts SSM heads, not attention heads.
    // modeling_rwkv.py, modeling_xlstm.py: recurrences.
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
  if (m.heads <= 0) fail(kOp, j.where, "num_attention_heads = ", m.heads, " is invalid: must be > 0");
  if (m.layers <= 0 || m.layers > kMaxModelLayers)
    fail(kOp, j.where, "num_hidden_layers = ", m.layers, " is invalid: must be in [1, ", kMaxModelLayers,
         "]");
  m.max_pos = first_int(j, "max_position_embeddings n_positions max_seq_len", own.max_pos, false);
  // Family trait kCanonicalSizeKeys: max_position_embeddings only.
  if (own.has(detail::kCanonicalSizeKeys)) m.max_pos = j.int_or("max_position_embeddings", own.max_pos);
  // Family::max_pos_key: attribute_map max_position_embeddings -> that key (kimi_linear, bailing_hybrid).
  if (rules.max_pos_key)
    m.max_pos = first_int(j, std::string(rules.max_pos_key) + " max_position_embeddings", own.max_pos, false);
  if (j.has("original_max_position_embeddings"))
    m.top_original = j.integer("original_max_position_embeddings");
  else if (rules.original_max_pos)
    m.top_original = rules.original_max_pos;  // a config class field default that always overrides (phi3)
  const detail::HeadDims dims = detail::head_dims(j, m, out.warnings);
  const bool mla = dims.mla;
  const int64_t qk_head_dim = dims.qk, v_head_dim = dims.v;
  out.model_type = own_type;
  out.num_layers = m.layers;
  out.num_heads = m.heads;
  out.max_position_embeddings = m.max_pos;

  // Position tables. Learned rows read from row p + Family::position_offset (modeling_opt.py
  // OPTLearnedPositionalEmbedding, modeling_biogpt.py BioGptLearnedPositionalEmbedding).
  if (rules.method == PositionMethod::learned && rules.position_offset)
    out.learned_position_offset = rules.position_offset;
  if (rules.method == PositionMethod::sinusoidal) {
    SinusoidalConfig s;
    s.dim = m.hidden;  // an odd d_model gets a zero last column (XGLM), as posenc's split layout
    s.layout = SinusoidalLayout::split;
    s.frequencies = rules.sinusoidal;
    s.position_offset = rules.position_offset;
    if (own.has(detail::kSinusoidalRowsAfterPad)) {
      // Kosmos2TextSinusoidalPositionalEmbedding (modeling_kosmos2.py L556-666): token p (padding skipped)
      // reads row p + pad_token_id + 1 of a table of max_position_embeddings + 2 rows, regrown past it.
      const int64_t pad = j.int_or("pad_token_id", 1);
      if (pad < 0 || pad > 1 << 20)
        fail(kOp, j.where, "pad_token_id = ", pad, " is invalid for ", own_type,
             ": position 0 reads row pad_token_id + 1");
      s.position_offset = pad + 1;
    }
    validate(s);
    out.sinusoidal = s;
  }
  if (rules.has(detail::kRobertaRows)) {
    // modeling_roberta.py create_position_ids_from_input_ids: token p (0-based, padding skipped) reads
    // row p + pad_token_id + 1 of max_position_embeddings rows (514 rows, 512 positions for RoBERTa).
    const int64_t pad = j.int_or("pad_token_id", 1);
    if (pad < 0 || pad + 1 >= m.max_pos)
      fail(kOp, j.where, "pad_token_id = ", pad, " is invalid for ", type, ": the position table has ",
           m.max_pos, " rows and position 0 reads row pad_token_id + 1");
    out.learned_position_offset = pad + 1;
    out.max_position_embeddings = m.max_pos - pad - 1;
  }
  if (hooks.tables) hooks.tables(r);  // esm, mpnet, roformer, albert, kosmos_2_5_text_model

  // Windows and layer types. use_rope: 0 on NoPE layers (FamilyHooks::use_rope).
  const int64_t window = detail::sliding_window(j, m);
  r.use_rope.assign(static_cast<size_t>(m.layers), 1);
  if (hooks.use_rope) hooks.use_rope(r);
  const std::vector<std::string> types = detail::layer_types(j, m, r.use_rope, window, out.warnings);
  if (rules.has(detail::kSlidingNeedsWindow) && window <= 0)
    for (const std::string& t : types)
      if (t == "sliding_attention")  // masking_utils.py create_sliding_window_causal_mask raises
        fail(kOp, j.where, "sliding_window is missing: ", own_type, "'s sliding_attention layers need it");
  const std::vector<int64_t> head_dims = detail::layer_head_dims(j, m, types);
  // dots3_note_text: MLA dims per layer type (src/model/dots3.cc, src/model/per_layer.cc); empty elsewhere.
  const detail::MlaLayerDims mla_dims = detail::mla_layer_dims(j, m, dims.v);

  // RoPE parameters: convert_rope_params_to_dict (modeling_rope_utils.py L775-804), with the family
  // overrides of the config classes (the rows, and the families' hooks).
  const bool falcon_alibi = rules.has(detail::kAlibiKey) && j.bool_or("alibi", false);
  // Families whose rotary module a key leaves out (no RoPE on any layer; FamilyHooks::rope_off), and a
  // learned table in place of the rotation (esm).
  bool rope_off = hooks.rope_off ? hooks.rope_off(r) : false;
  if (r.learned_table) rope_off = true;
  const bool rotary = own.method == PositionMethod::rope && !falcon_alibi && !rope_off;
  // The flat dict's partial_rotary_factor as given (the dict's, else the top-level one), for messages.
  std::optional<double> flat_prf;
  std::optional<double> beta;
  if (rotary) {
    r.theta = own.theta;
    if (hooks.rope_base) {
      hooks.rope_base(r);  // gpt_neox's rotary_emb_base / rotary_pct, bamba's forced factor
    } else {
      if (j.has("rope_theta")) r.theta = j.num("rope_theta");
      if (rules.has(detail::kClassPrfOnly))
        r.prf = rules.prf;
      else if (j.has("partial_rotary_factor"))
        r.prf = j.num("partial_rotary_factor");
      else if (rules.has(detail::kRotaryDimPrf) && j.has("rotary_dim"))
        r.prf = static_cast<double>(j.integer("rotary_dim")) / static_cast<double>(m.head_dim);
      else if (own.prf > 0)
        r.prf = own.prf;
    }
    // gptj, codegen: a fixed sin/cos table of base 10000 over rotary_dim (modeling_gptj.py,
    // modeling_codegen.py create_sinusoidal_positions); no rope dict is read.
    // roformer: create_weight's table, base 10000 over the head (modeling_roformer.py L55-68).
    const bool fixed_table = rules.has(detail::kFixedRotaryTable);
    for (const char* k : {"rope_theta", "rope_scaling", "rope_parameters"})
      if (fixed_table && j.has(k))
        out.warnings.push_back(std::string(k) + " is ignored by " + type + " (a fixed table of base 10000)");
    if (fixed_table) r.theta = 1e4;
    if (rules.has(detail::kRopeScalingUnread) && j.has("rope_scaling"))
      out.warnings.push_back("rope_scaling is ignored by " + type +
                             ": transformers 5 reads rope_parameters only (configuration_" + type +
                             ".py's rope_scaling field)");
    // Family trait kRopePerLayerTypeOnly: convert_rope_params_to_dict is a no-op or builds the per-type dicts
    // (mimo_v2_flash, laguna, cohere_compass_text: rope_parameters per layer type, or the class's; step3p5,
    // zaya, dots3_note_text, ultrabert: their hooks built them).
    // The class default rope_parameters: the model's own (embedding_gemma2_text), else its rules family's.
    const char* const default_rope_dict = detail::default_rope_parameters(own_type)
                                              ? detail::default_rope_parameters(own_type)
                                              : detail::default_rope_parameters(type);
    const bool per_type_only = rules.has(detail::kRopePerLayerTypeOnly);
    // Each type's dict carries its own partial_rotary_factor (the top-level one is not read).
    if (rules.has(detail::kPrfPerLayerType)) r.prf.reset();
    if (hooks.rope_keys) hooks.rope_keys(r);  // top-level keys the family does not read
    if (fixed_table) {
      // (the dicts were reported above)
    } else if (per_type_only) {
      if (!rules.has(detail::kRopeScalingFolded) && j.j.contains("rope_scaling")) {
        // Their converts leave rope_scaling in the kwargs (laguna's and mimo_v2_flash's return them, Cohere
        // Compass's pops only rope_type / rope_theta), and PreTrainedConfig's rope_scaling setter then
        // replaces rope_parameters with it (configuration_utils.py L724-733): a non-dict fails there.
        if (!j.at("rope_scaling").is_object())
          fail(kOp, j.where, "rope_scaling = ", detail::json_excerpt(j.at("rope_scaling")),
               " is not supported for ", own_type,
               ": it replaces rope_parameters (PreTrainedConfig's rope_scaling setter; transformers 5.23 ",
               "then fails for model_type '", own_type, "')");
        r.rp = &j.at("rope_scaling"), r.rp_name = "rope_scaling";
        if (j.has("rope_parameters") && j.at("rope_parameters") != *r.rp)
          out.warnings.push_back(j.where + "rope_parameters is replaced by rope_scaling for " + own_type +
                                 " (PreTrainedConfig's rope_scaling setter)");
      } else if (j.has("rope_parameters")) {
        r.rp = &j.at("rope_parameters");
      } else if (!default_rope_dict) {  // a class default {} (its rotary module raises KeyError)
        fail(kOp, j.where, "rope_parameters is missing: it must be a dict per layer type for model_type '",
             own_type, "' (null: no RoPE on that type), which its rotary module reads");
      } else {
        r.owned = json::parse(default_rope_dict), r.rp = &r.owned;
      }
      j.read.insert("rope_scaling");
    } else if (j.has("rope_scaling") && !rules.has(detail::kRopeScalingUnread)) {
      r.rp = &j.at("rope_scaling"), r.rp_name = "rope_scaling";  // legacy wins (L776-777)
      if (j.has("rope_parameters") && j.at("rope_parameters") != *r.rp)
        out.warnings.push_back(j.where +
                               "rope_parameters is ignored: rope_scaling is also given and wins "
                               "(transformers 5 convert_rope_params_to_dict)");
    } else if (j.has("rope_parameters"))
      r.rp = &j.at("rope_parameters");
    j.read.insert("rope_parameters");
    if (r.rp && !r.rp->is_object())
      fail(kOp, j.where, r.rp_name, " = ", r.rp->dump(), " is invalid: must be an object");
    r.local_theta = r.theta;
    if (hooks.rope_dicts) {
      hooks.rope_dicts(r);  // a legacy dict made one per layer type, the bases of each (gemma3_text, ...)
    } else if (!r.rp && default_rope_dict) {
      r.owned = json::parse(default_rope_dict);
      r.rp = &r.owned;
    }
    const json empty = json::object();
    if (r.rp && detail::nested_rope_dict(*r.rp, rules)) {
      for (auto it = r.rp->begin(); it != r.rp->end(); ++it) {
        // laguna's checkpoints keep a stray original_max_position_embeddings beside the per-type dicts,
        // which its rotary module never reads (it looks up each layer type's dict).
        const bool layer_type_key = it.key().find("_attention") != std::string::npos;
        if (!layer_type_key && !it.value().is_object() && !it.value().is_null()) {
          out.warnings.push_back(j.where + r.rp_name + "." + it.key() + " = " +
                                 detail::json_excerpt(it.value()) +
                                 " is not read: the rotary module reads the dict of each layer type");
          continue;
        }
        if (it.value().is_null()) {
          r.nested[it.key()] = std::nullopt;
          continue;
        }  // NoPE layer type
        if (!it.value().is_object())
          fail(kOp, j.where, r.rp_name, ".", it.key(), " must be an object or null");
        Obj d{it.value(), j.where + r.rp_name + "." + it.key() + ".", {}};
        // Family trait kRopePerLayerType: Gemma4TextConfig has no convert_rope_params_to_dict: a sub-dict
        // without rope_theta stays without it (a top-level rope_theta is not copied in) and the rotary module
        // raises KeyError.
        if (rules.has(detail::kRopePerLayerType) && r.rp != &r.owned && !d.has("rope_theta"))
          fail(kOp, d.where, "rope_theta is missing: required for gemma4 (transformers 5 raises KeyError)");
        Model mt = m;  // the layer type's own head_dim (Gemma 4's global layers: 512)
        mt.head_dim = detail::type_head_dim(head_dims, types, it.key(), m.head_dim);
        r.nested[it.key()] = rope_from_dict(d, mt, it.key() == "sliding_attention" ? r.local_theta : r.theta,
                                            r.prf, false, beta);
      }
    } else {
      if (rules.has(detail::kRopePerLayerType) || per_type_only)  // modeling_gemma4.py L1090
        fail(kOp, j.where, r.rp_name, " must be a dict per layer type for ", type, " (model_type '", own_type,
             "')",
             " ({\"full_attention\": {...}, \"sliding_attention\": {...}}): its rotary module reads one per "
             "type");
      Obj d{r.rp ? *r.rp : empty, j.where + r.rp_name + ".", {}};
      r.flat = rope_from_dict(d, m, r.theta, r.prf, true, beta);
      flat_prf =
          d.has("partial_rotary_factor") ? std::optional<double>(d.num("partial_rotary_factor")) : r.prf;
      if (hooks.flat_rope) hooks.flat_rope(r);  // gptj's and codegen's rotary_dim, hy_v4's halves
      // Family trait kAlwaysPairs (deepseek_v32, glm_moe_dsa, longcat_flash): always interleaved (their
      // modular files drop rope_interleave); kRopeInterleaveUnread: the key is not read at all.
      const bool always_pairs = rules.has(detail::kAlwaysPairs);
      if (mla && !rules.has(detail::kRopeInterleaveUnread) && !always_pairs &&
          !j.bool_or("rope_interleave", true))
        r.flat->layout = RopeLayout::half;
      if (always_pairs && !j.bool_or("rope_interleave", true))
        out.warnings.push_back("rope_interleave = false is ignored: transformers 5's " + type +
                               " always rotates interleaved pairs");
    }
    if (hooks.rope_checks) hooks.rope_checks(r);  // keys the family's checkpoints carry beside the dicts
  }
  if (!rotary && !falcon_alibi && own.method != PositionMethod::alibi)
    for (const char* k : {"rope_theta", "rope_parameters", "rope_scaling", "partial_rotary_factor"})
      if (has(j.j, k) && !j.read.count(k)) {
        out.warnings.push_back(std::string(k) + " is not used: model_type '" + type + "' applies no RoPE" +
                               (rope_off ? " with this config" : ""));
        j.read.insert(k);
      }
  j.read.insert("rotary_dim");  // phi: superseded by partial_rotary_factor in transformers 5
  j.read.insert("rope_interleave");
  // rotary_emb_base / rotary_pct are read by gpt_neox only (its hook); in any other family
  // transformers 5 keeps them as inert attributes (CodeQwen1.5's qwen2 config has
  // rotary_emb_base), so they are reported as ignored.

  // Softmax scale (the `scaling` each family's attention passes to the kernel): Family::scale_rule, the
  // model's own row's where it has one (gemma3n_text, muse_spark_text), else its family's.
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim));
  const detail::Family& scale_row = own.scale_rule != detail::ScaleRule::head_dim ? own : rules;
  switch (scale_row.scale_rule) {
    case detail::ScaleRule::head_dim:
      break;
    case detail::ScaleRule::query_pre_attn_scalar:
      scale = std::pow(j.num_or("query_pre_attn_scalar", scale_row.scale_default), -0.5);
      break;
    case detail::ScaleRule::query_pre_attn_scalar_positive: {
      const double scalar = j.num_or("query_pre_attn_scalar", static_cast<double>(qk_head_dim));
      if (!(scalar > 0)) fail(kOp, j.where, "query_pre_attn_scalar = ", scalar, " is invalid: must be > 0");
      scale = std::pow(scalar, -0.5);
      break;
    }
    case detail::ScaleRule::attention_multiplier:
      scale =
          j.num_or("attention_multiplier", scale_row.scale_default != 0 ? scale_row.scale_default : scale);
      break;
    case detail::ScaleRule::half_head:
      scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim) / 2.0);
      break;
    case detail::ScaleRule::one:
      scale = 1.0;
      break;
    case detail::ScaleRule::qk_scale_factor: {
      // Muse: the weightlessly normed query times qk_scale_factor before RoPE (modeling_muse_glimmer.py
      // MuseGlimmerAttention.forward), then the kernel's head_dim^-0.5: RoPE is linear, so the factor is the
      // logits' and the plan's scale carries it (q / k in: the normed ones).
      const double factor = j.num_or("qk_scale_factor", scale_row.scale_default);
      if (!(factor > 0)) fail(kOp, j.where, "qk_scale_factor = ", factor, " is invalid: must be > 0");
      scale *= factor;
      break;
    }
    case detail::ScaleRule::key_multiplier: {
      // Falcon-H1: k_proj(x) times key_multiplier before RoPE (modeling_falcon_h1.py L208): likewise the
      // logits' factor, carried by the plan's scale (k in: k_proj's).
      const double key_multiplier = j.num_or("key_multiplier", 1.0);
      if (!std::isfinite(key_multiplier) || key_multiplier == 0)
        fail(kOp, j.where, "key_multiplier = ", key_multiplier, " is invalid: must be finite and nonzero");
      scale *= key_multiplier;
      break;
    }
    case detail::ScaleRule::scale_attn_weights:  // modeling_gpt2.py, modeling_gpt_bigcode.py
      if (!j.bool_or("scale_attn_weights", true)) scale = 1.0;
      break;
  }
  if (hooks.scale) hooks.scale(r, scale);  // the family's own keys (mpt's attn_config, gemma3n's warning)
  j.read.insert("attention_k_eq_v");       // Gemma 4: values reuse the key projection (not positional)
  if (mla && r.flat && r.flat->scaling.type != RopeScalingType::none && r.flat->scaling.mscale_all_dim &&
      *r.flat->scaling.mscale_all_dim != 0) {
    // modeling_deepseek_v3.py yarn_apply_mscale: scaling *= get_mscale(factor, mscale_all_dim)^2
    const double ms = detail::yarn_mscale(r.flat->scaling.factor, *r.flat->scaling.mscale_all_dim);
    scale *= ms * ms;
  }
  std::optional<double> softcap;
  if (rules.softcap != 0) {
    if (j.has("attn_logit_softcapping"))
      softcap = j.num("attn_logit_softcapping");
    else if (!j.j.contains("attn_logit_softcapping"))
      softcap = rules.softcap;
  }
  // Gemma 3 stores attn_logit_softcapping but never passes it to attention (modeling_gemma3.py).
  for (const char* k : {"attn_logit_softcapping", "final_logit_softcapping", "rope_local_base_freq",
                        "query_pre_attn_scalar", "attention_multiplier", "alibi", "initial_context_length",
                        "use_qk_norm", "original_max_position_embeddings"})
    j.read.insert(k);
  const int64_t chunk = j.int_or("attention_chunk_size", rules.chunk);
  QueryTemperature llama4_temp;
  if (rules.has(detail::kLlama4Temperature) && j.bool_or("attn_temperature_tuning", true)) {
    llama4_temp.kind = QueryTemperature::Kind::llama4;
    llama4_temp.scale = j.num_or("attn_scale", 0.1);
    llama4_temp.floor_scale = j.num_or("floor_scale", 8192);
  }
  j.read.insert("no_rope_layers");
  j.read.insert("no_rope_layer_interval");
  QueryTemperature ministral_temp;
  // Family trait kMinistralTemperature (ministral3, mistral4: modeling_mistral4.py L358-360, L477-481).
  if (rules.has(detail::kMinistralTemperature)) {
    if (!beta)
      fail(kOp, j.where, "rope_parameters.llama_4_scaling_beta is missing: ", type,
           " applies it to every query (modeling_", type, ".py get_llama_4_attn_scale)");
    const int64_t original = r.flat ? r.flat->scaling.original_max_position_embeddings : 0;
    if (original <= 0)  // transformers reads it unconditionally (get_llama_4_attn_scale's floor divisor)
      fail(kOp, j.where, "rope_parameters.original_max_position_embeddings is missing: ", type,
           "'s llama_4_scaling_beta divides positions by it (get_llama_4_attn_scale)");
    ministral_temp = {QueryTemperature::Kind::ministral3, *beta, static_cast<double>(original)};
  }
  if (hooks.attention) hooks.attention(r);  // mllama's cross-attention layers, encoders' own keys
  // BERT's family: causal iff is_decoder (modeling_bert.py L359, L696-708; the CausalLM heads only warn).
  bool bidirectional = rules.has(detail::kCausalIffDecoder) && !j.bool_or("is_decoder", false);
  if (own.has(detail::kBidirectional)) bidirectional = true;
  j.read.insert("is_decoder");
  if (own.has(detail::kBidirectional) && j.has("use_bidirectional_attention")) {
    // (embedding_gemma2_text: no such field; its layers are bidirectional whatever the key says)
    out.warnings.push_back(
        "use_bidirectional_attention = " + detail::json_excerpt(j.at("use_bidirectional_attention")) +
        " is not read by " + own_type + ": every layer attends both ways");
  } else if (rules.has(detail::kBidirectionalVision) && j.has("use_bidirectional_attention")) {
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
  } else if (own.has(detail::kBidirectionalOption) && j.bool_or("use_bidirectional_attention", false)) {
    // step3p5: full layers see every key, sliding layers |q - k| < sliding_window (modeling_step3p7.py
    // L800-809, L880-888; the window unchanged).
    // Gemma3TextModel (EmbeddingGemma): full layers see every key, sliding layers a symmetric window
    // (modeling_gemma3.py L536-538; the window in layer_types.cc).
    bidirectional = true;
  } else if (const char* prefix_lm = detail::wrapper_prefix_lm_note(outer_type)) {
    // The wrapper's own mask (PaliGemma's prefix-LM), whatever its text config says.
    j.read.insert("use_bidirectional_attention");
    out.warnings.push_back(prefix_lm);
  } else if (j.bool_or("use_bidirectional_attention", false)) {
    out.warnings.push_back(
        "use_bidirectional_attention = true is not modeled by posenc: layers shown causal");
  }
  // A wrapper's bidirectional blocks of image tokens, flat or not (the file means the multimodal model).
  if (const char* blocks = detail::wrapper_block_mask_note(outer_type)) out.warnings.push_back(blocks);
  // transformers 5's BERT family has no position_embedding_type: it adds the learned table whatever the
  // key says. A checkpoint trained with another kind does not hold positions in that table: transformers
  // 4's "relative_key" / "relative_key_query" (distance embeddings in every layer, removed in 5) and
  // Jina's "alibi" (remote code, auto_map JinaBert*). Refused rather than planned with untrained rows.
  if (rules.has(detail::kBertFamily) && j.has("position_embedding_type") &&
      j.str("position_embedding_type") != "absolute")
    fail(kOp, j.where, "position_embedding_type = ", detail::json_excerpt(j.at("position_embedding_type")),
         " is not supported for ", type,
         ": transformers 5 adds the learned table instead, which this checkpoint did not train (",
         j.str("position_embedding_type") == "alibi" ? "ALiBi is the remote code of its auto_map"
                                                     : "transformers 4's relative distance embeddings",
         ")");
  const bool inverse_layer_scale =
      rules.has(detail::kInverseLayerScale) && j.bool_or("scale_attn_by_inverse_layer_idx", false);
  if (t5) {
    out.t5_num_buckets = j.int_or("relative_attention_num_buckets", 32);
    out.t5_max_distance = j.int_or("relative_attention_max_distance", 128);
    // Family trait kBiasPerLayer (umt5: modeling_umt5.py L371-378, L342-348): every self-attention layer
    // has_relative_attention_bias.
    out.t5_bias_per_layer = own.has(detail::kBiasPerLayer);
    j.read.insert("is_encoder_decoder");
  }

  // Per-layer lists of the family's own (FamilyHooks::layers).
  r.force_rope.assign(static_cast<size_t>(m.layers), 0);
  if (hooks.layers) hooks.layers(r);  // cohere2_moe's dense prefix, molmo2_text's scaled layers, ...
  // Family trait kWholeHeadApply (molmo2_text on its scaled layers, hy_v4 on every layer): their default rope
  // init rotates the whole head and ignores partial_rotary_factor (modeling_molmo2.py L121-138,
  // modeling_hy_v4.py L93-110), but every other rope type's init reads it (modeling_rope_utils.py L181, L325,
  // L416, L549, L639): cos / sin of int(head_dim * prf) dims, which apply_rotary_pos_emb multiplies with the
  // whole head (modeling_molmo2.py L230-231, modeling_hy_v4.py L151-152): a shape mismatch at the first
  // forward in transformers 5.23.
  const bool whole_head_apply =
      own.has(detail::kWholeHeadApply) &&
      (r.scaled.empty() || std::find(r.scaled.begin(), r.scaled.end(), 1) != r.scaled.end());
  if (whole_head_apply && r.flat && r.flat->scaling.type != RopeScalingType::none &&
      r.flat->effective_rotary_dim() != r.flat->head_dim)
    fail(kOp, j.where, "partial_rotary_factor = ", flat_prf ? detail::json_excerpt(json(*flat_prf)) : "?",
         " with rope type '", rope_scaling_name(r.flat->scaling.type), "' is not supported for ", own_type,
         ": its rotary module then builds cos / sin of ", r.flat->effective_rotary_dim(),
         " dims, which its apply_rotary_pos_emb cannot apply to the ", r.flat->head_dim, "-dim rotated head",
         r.scaled.empty() ? "" : " of its rope_scaling_layers",
         " (transformers 5.23 fails at the first forward; the default rope type ignores the factor)");

  // Per layer. T5: the encoder's num_layers, then the decoder's num_decoder_layers (None: num_layers;
  // SwitchTransformersConfig: 12, Family::decoder_layers); Pix2Struct's text model is a decoder of
  // num_layers.
  const bool t5_decoder_only = own.has(detail::kDecoderOnly);
  const int64_t encoder_layers = t5 && t5_decoder_only ? 0 : m.layers;
  // (SwitchTransformersConfig: a null num_decoder_layers is num_layers too, L92-94.)
  const bool decoder_null = j.j.contains("num_decoder_layers") && j.j.at("num_decoder_layers").is_null();
  const int64_t decoder_layers =
      !t5               ? 0
      : t5_decoder_only ? m.layers
                        : j.int_or("num_decoder_layers",
                                   own.decoder_layers && !decoder_null ? own.decoder_layers : m.layers);
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
    // q/k and v heads of their own sizes (MLA, T5's d_kv, Family trait kOwnHeadDims)
    const bool own_dims = mla || t5 || rules.has(detail::kOwnHeadDims);
    p.qk_head_dim = own_dims ? qk_head_dim : head_dims[i];
    p.v_head_dim = own_dims ? v_head_dim : head_dims[i];
    if (!mla_dims.nope.empty()) {  // dots3_note_text: the layer type's MLA (modeling_dots3_note.py L450-454)
      p.qk_head_dim = mla_dims.nope[i] + head_dims[i];
      p.v_head_dim = mla_dims.v[i];
    }
    p.layer_type = t5 ? (i < encoder_layers ? "encoder" : "decoder") : types[i];
    LayerAttention& a = p.attention;
    a.causal = !(bidirectional || (t5 && i < encoder_layers));
    a.softmax_scale = inverse_layer_scale ? scale / static_cast<double>(i + 1) : scale;
    // dots3_note_text: qk_head_dim^-0.5 of the layer's own head, no yarn mscale (modeling_dots3_note.py L494)
    if (!mla_dims.nope.empty()) a.softmax_scale = 1.0 / std::sqrt(static_cast<double>(p.qk_head_dim));
    a.softcap = softcap;
    a.sinks = rules.has(detail::kSinks);  // Family trait kSinks: one learnable sink per head
    const std::string& lt = p.layer_type;
    // Family trait kWindowOnFullLayers: a set sliding_window masks every full_attention layer.
    if (rules.has(detail::kWindowOnFullLayers) && lt == "full_attention") a.window = window;
    if (lt == "sliding_attention") {
      a.window = window;
      if (window == 0)
        out.warnings.push_back("layer " + std::to_string(i) +
                               " is sliding_attention but "
                               "sliding_window is not set: no window");
    }
    if (lt == "chunked_attention") a.chunk = chunk;
    if (rules.has(detail::kSlidingSinks))
      a.sinks = lt == "sliding_attention";  // sinks on the SWA layers only
    if (rules.has(detail::kMinistralTemperature)) a.temperature = ministral_temp;
    const bool attends = lt != "linear_attention" && lt != "conv" && lt != "moe" && lt != "mlp";
    p.softmax_attention = attends;
    if (r.cross.count(i)) {
      p.layer_type = "cross_attention";  // modeling_mllama.py: attends to vision tokens, no RoPE
      a.causal = false;
    } else if (!attends) {
      p.position = PositionMethod::none;
    } else if (falcon_alibi || own.method == PositionMethod::alibi) {
      p.position = PositionMethod::alibi;
    } else if (own.method != PositionMethod::rope || rope_off) {
      p.position = r.learned_table ? PositionMethod::learned : rope_off ? PositionMethod::none : own.method;
    } else {
      std::optional<RopeConfig> rc = r.flat;
      // molmo2_text: layers outside rope_scaling_layers take rotary_emb_unscaled, the default rope of the
      // same base (modeling_molmo2.py Molmo2TextModel: position_embeddings["scaled" | "unscaled"]).
      // Its compute_default_rope_parameters rotates the whole head, whatever partial_rotary_factor says
      // (modeling_molmo2.py L121-138).
      if (rc && !r.scaled.empty() && !r.scaled[i]) {
        rc->scaling = RopeScaling{};
        rc->rotary_dim = rc->head_dim;
      }
      if (!r.flat) {
        const auto it = r.nested.find(lt);
        if (it == r.nested.end())
          fail(kOp, j.where, "rope_parameters has no entry for layer type '", lt, "' (layer ", i, ")");
        rc = it->second;
      }
      // granite_swa(moe): the layer's own base; 0 = NoPE (modeling_granite_swa.py L390-398, L449-456:
      // one rotary module per distinct base, the rope dict's other fields kept).
      if (!r.layer_theta.empty() && rc) {
        if (r.layer_theta[i] == 0)
          rc.reset();
        else
          rc->base = r.layer_theta[i];
      }
      bool uses = rc.has_value() && r.use_rope[i];
      // Family::rope_layers: exaone4's rule, RoPE iff sliding_window is None or the layer slides
      // (modeling_exaone4.py L233; exaone_moe, kolibri1); cohere2's, iff the layer slides with a window
      // (modeling_cohere2.py L190, L221; flint, modeling_flint.py L280-283; cohere2_moe also on the dense
      // prefix when prefix_dense_sliding_window_pattern is 1, modeling_cohere2_moe.py L298-300, L318-319:
      // force_rope); afmoe's, iff the layer slides (modeling_afmoe.py L359).
      switch (rules.rope_layers) {
        case detail::RopeLayers::all:
          break;
        case detail::RopeLayers::sliding_or_no_window:
          if (window > 0 && lt != "sliding_attention") uses = false;
          break;
        case detail::RopeLayers::sliding_with_window:
          if (!(window > 0 && lt == "sliding_attention") && !r.force_rope[i]) uses = false;
          break;
        case detail::RopeLayers::sliding:
          if (lt != "sliding_attention") uses = false;
          break;
      }
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
      } else if (rules.has(detail::kLlama4Temperature)) {
        a.temperature = llama4_temp;  // NoPE layers only
      }
    }
    out.layers.push_back(std::move(p));
  }
  // Family trait kUseQkNorm: Llama 4's use_qk_norm (default true), Llama4TextL2Norm, weightless, on q and k
  // after RoPE in the RoPE layers (modeling_llama4.py L331-332, L349-356): it cancels a scaled rotation's
  // attention factor (freqs_cis * attention_scaling), as NanoChat's norms do (src/model/rope_dict.cc).
  // Family trait kNormsAfterRope: HunYuan (dense, MoE, VL)'s query_layernorm / key_layernorm, RMS norms per
  // head after RoPE, always (modeling_hunyuan_v1_dense.py L197-199, modeling_hunyuan_vl.py L541-542): the
  // same cancellation.
  const bool norms_after_rope = rules.has(detail::kNormsAfterRope);
  if ((rules.has(detail::kUseQkNorm) && j.bool_or("use_qk_norm", true)) || norms_after_rope)
    for (const LayerPlan& p : out.layers) {
      if (!p.rope) continue;
      const double factor = rope_frequencies(*p.rope, p.rope->original_context()).attention_factor;
      if (factor != 1.0)
        out.warnings.push_back("rope_type '" + std::string(rope_scaling_name(p.rope->scaling.type)) +
                               "' scales cos and sin by " + std::to_string(factor) + ", which " + own_type +
                               (norms_after_rope ? "'s RMS norms of q and k after RoPE cancel"
                                                 : "'s qk_norm (use_qk_norm) after RoPE cancels") +
                               ": normalize after posenc's rotation, or rotate with attention_factor 1 when "
                               "normalizing first");
      break;
    }
  if (hooks.finish) hooks.finish(r);  // zaya's layer type names
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
