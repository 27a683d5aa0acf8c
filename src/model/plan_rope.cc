// src/model/plan_rope.cc: the plan stage of the rope parameters (src/model/stages.h), in transformers
// 5.23's order: the config class's convert_rope_params_to_dict (modeling_rope_utils.py
// RotaryEmbeddingConfigMixin.convert_rope_params_to_dict: which dict, rope_theta and partial_rotary_factor
// set into it), with the overrides of each family's config class (its row, its hooks); then
// standardize_rope_params and each rotary module's read of the dict, flat or one per layer type
// (rope_from_dict, src/model/rope_dict.cc).
#include <optional>
#include <string>

#include "src/model/stages.h"

namespace posenc::detail {
namespace {

// The base and the partial rotation before any dict is read: the family's (FamilyHooks::rope_base), else
// rope_theta and partial_rotary_factor as the config class gives them (the class's own factor where it
// ignores the config's, rotary_dim / head_dim where it derives one, the class default).
void read_base_and_prf(Reading& r) {
  Obj& j = r.j;
  const Model& m = r.m;
  const Family& own = *m.family;
  const Family& rules = *m.rules;
  r.theta = own.theta;
  if (m.hooks->rope_base) {
    m.hooks->rope_base(r);  // gpt_neox's rotary_emb_base / rotary_pct, bamba's forced factor
    return;
  }
  if (j.has("rope_theta")) r.theta = j.num("rope_theta");
  if (rules.has(kClassPrfOnly))
    r.prf = rules.prf;
  else if (j.has("partial_rotary_factor"))
    r.prf = j.num("partial_rotary_factor");
  else if (rules.has(kRotaryDimPrf) && j.has("rotary_dim"))
    r.prf = static_cast<double>(j.integer("rotary_dim")) / static_cast<double>(m.head_dim);
  else if (own.prf > 0)
    r.prf = own.prf;
}

// Which dict the config class keeps as rope_parameters (Reading::rp, named rp_name): legacy rope_scaling
// wins over rope_parameters (convert_rope_params_to_dict pops rope_scaling first); a family that reads
// rope_parameters per layer type only keeps its own rules; a fixed table reads none.
void choose_rope_dict(Reading& r, bool fixed_table, const char* default_rope_dict) {
  Obj& j = r.j;
  const Family& rules = *r.m.rules;
  ModelPositions& out = r.out;
  const std::string& own_type = r.own_type;
  if (fixed_table) {
    // (the dicts were reported by plan_rope)
  } else if (rules.has(kRopePerLayerTypeOnly)) {
    if (!rules.has(kRopeScalingFolded) && j.j.contains("rope_scaling")) {
      // Their converts leave rope_scaling in the kwargs (laguna's and mimo_v2_flash's return them, Cohere
      // Compass's pops only rope_type / rope_theta), and PreTrainedConfig's rope_scaling setter then
      // replaces rope_parameters with it (configuration_utils.py PreTrainedConfig.rope_scaling): a non-dict
      // fails there.
      if (!j.at("rope_scaling").is_object())
        fail(kOp, j.where, "rope_scaling = ", json_excerpt(j.at("rope_scaling")), " is not supported for ",
             own_type,
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
  } else if (j.has("rope_scaling") && !rules.has(kRopeScalingUnread)) {
    r.rp = &j.at("rope_scaling"), r.rp_name = "rope_scaling";  // legacy wins (convert_rope_params_to_dict)
    if (j.has("rope_parameters") && j.at("rope_parameters") != *r.rp)
      out.warnings.push_back(j.where +
                             "rope_parameters is ignored: rope_scaling is also given and wins "
                             "(transformers 5 convert_rope_params_to_dict)");
  } else if (j.has("rope_parameters")) {
    r.rp = &j.at("rope_parameters");
  }
  j.read.insert("rope_parameters");
  if (r.rp && !r.rp->is_object())
    fail(kOp, j.where, r.rp_name, " = ", r.rp->dump(), " is invalid: must be an object");
}

// One dict per layer type (Reading::nested; null: a NoPE type), each read with the layer type's own head
// dim and base, as each rotary module reads config.rope_parameters[layer_type].
void read_nested_dicts(Reading& r, Plan& p) {
  Obj& j = r.j;
  const Model& m = r.m;
  const Family& rules = *m.rules;
  for (auto it = r.rp->begin(); it != r.rp->end(); ++it) {
    // laguna's checkpoints keep a stray original_max_position_embeddings beside the per-type dicts,
    // which its rotary module never reads (it looks up each layer type's dict).
    const bool layer_type_key = it.key().find("_attention") != std::string::npos;
    if (!layer_type_key && !it.value().is_object() && !it.value().is_null()) {
      r.out.warnings.push_back(j.where + r.rp_name + "." + it.key() + " = " + json_excerpt(it.value()) +
                               " is not read: the rotary module reads the dict of each layer type");
      continue;
    }
    if (it.value().is_null()) {
      r.nested[it.key()] = std::nullopt;
      continue;
    }  // NoPE layer type
    if (!it.value().is_object()) fail(kOp, j.where, r.rp_name, ".", it.key(), " must be an object or null");
    Obj d{it.value(), j.where + r.rp_name + "." + it.key() + ".", {}};
    // Family trait kRopePerLayerType: Gemma4TextConfig has no convert_rope_params_to_dict: a sub-dict
    // without rope_theta stays without it (a top-level rope_theta is not copied in) and the rotary module
    // raises KeyError.
    if (rules.has(kRopePerLayerType) && r.rp != &r.owned && !d.has("rope_theta"))
      fail(kOp, d.where, "rope_theta is missing: required for gemma4 (transformers 5 raises KeyError)");
    Model mt = m;  // the layer type's own head_dim (Gemma 4's global layers: 512)
    mt.head_dim = type_head_dim(p.head_dims, p.types, it.key(), m.head_dim);
    r.nested[it.key()] = rope_from_dict(d, mt, it.key() == "sliding_attention" ? r.local_theta : r.theta,
                                        r.prf, false, p.beta);
  }
}

// The one dict every rotary layer reads (Reading::flat; an absent dict is the default rope of the base),
// then the family's details of it (FamilyHooks::flat_rope) and MLA's pair layout (rope_interleave).
void read_flat_dict(Reading& r, Plan& p) {
  Obj& j = r.j;
  const Model& m = r.m;
  const Family& rules = *m.rules;
  if (rules.has(kRopePerLayerType) || rules.has(kRopePerLayerTypeOnly))
    // Gemma4TextRotaryEmbedding.__init__ reads rope_parameters[layer_type]
    fail(kOp, j.where, r.rp_name, " must be a dict per layer type for ", r.type, " (model_type '", r.own_type,
         "')",
         " ({\"full_attention\": {...}, \"sliding_attention\": {...}}): its rotary module reads one per "
         "type");
  const json empty = json::object();
  Obj d{r.rp ? *r.rp : empty, j.where + r.rp_name + ".", {}};
  r.flat = rope_from_dict(d, m, r.theta, r.prf, true, p.beta);
  p.flat_prf = d.has("partial_rotary_factor") ? std::optional<double>(d.num("partial_rotary_factor")) : r.prf;
  if (m.hooks->flat_rope) m.hooks->flat_rope(r);  // gptj's and codegen's rotary_dim, hy_v4's halves
  // Family trait kAlwaysPairs (deepseek_v32, glm_moe_dsa, longcat_flash): always interleaved (their
  // modular files drop rope_interleave); kRopeInterleaveUnread: the key is not read at all.
  const bool always_pairs = rules.has(kAlwaysPairs);
  if (p.dims.mla && !rules.has(kRopeInterleaveUnread) && !always_pairs && !j.bool_or("rope_interleave", true))
    r.flat->layout = RopeLayout::half;
  if (always_pairs && !j.bool_or("rope_interleave", true))
    r.out.warnings.push_back("rope_interleave = false is ignored: transformers 5's " + r.type +
                             " always rotates interleaved pairs");
}

// The rope dicts of a family with a rotary module: the base and partial rotation, the keys its class
// ignores, which dict it keeps, the dicts of each layer type or the one flat dict, the family's checks.
void read_rope(Reading& r, Plan& p) {
  Obj& j = r.j;
  const Model& m = r.m;
  const Family& rules = *m.rules;
  const FamilyHooks& hooks = *m.hooks;
  ModelPositions& out = r.out;
  const std::string& type = r.type;
  read_base_and_prf(r);
  // gptj, codegen: a fixed sin/cos table of base 10000 over rotary_dim (modeling_gptj.py,
  // modeling_codegen.py create_sinusoidal_positions); no rope dict is read.
  // roformer: its table, base 10000 over the head (modeling_roformer.py
  // RoFormerSinusoidalPositionalEmbedding.create_weight).
  const bool fixed_table = rules.has(kFixedRotaryTable);
  for (const char* k : {"rope_theta", "rope_scaling", "rope_parameters"})
    if (fixed_table && j.has(k))
      out.warnings.push_back(std::string(k) + " is ignored by " + type + " (a fixed table of base 10000)");
  if (fixed_table) r.theta = 1e4;
  if (rules.has(kRopeScalingUnread) && j.has("rope_scaling"))
    out.warnings.push_back("rope_scaling is ignored by " + type +
                           ": transformers 5 reads rope_parameters only (configuration_" + type +
                           ".py's rope_scaling field)");
  // Family trait kRopePerLayerTypeOnly: convert_rope_params_to_dict is a no-op or builds the per-type dicts
  // (mimo_v2_flash, laguna, cohere_compass_text: rope_parameters per layer type, or the class's; step3p5,
  // zaya, dots3_note_text, ultrabert: their hooks built them).
  // The class default rope_parameters: the model's own (embedding_gemma2_text), else its rules family's.
  const char* const default_rope_dict = default_rope_parameters(r.own_type)
                                            ? default_rope_parameters(r.own_type)
                                            : default_rope_parameters(type);
  // Each type's dict carries its own partial_rotary_factor (the top-level one is not read).
  if (rules.has(kPrfPerLayerType)) r.prf.reset();
  if (hooks.rope_keys) hooks.rope_keys(r);  // top-level keys the family does not read
  choose_rope_dict(r, fixed_table, default_rope_dict);
  r.local_theta = r.theta;
  if (hooks.rope_dicts) {
    hooks.rope_dicts(r);  // a legacy dict made one per layer type, the bases of each (gemma3_text, ...)
  } else if (!r.rp && default_rope_dict) {
    r.owned = json::parse(default_rope_dict);
    r.rp = &r.owned;
  }
  if (r.rp && nested_rope_dict(*r.rp, rules))
    read_nested_dicts(r, p);
  else
    read_flat_dict(r, p);
  if (hooks.rope_checks) hooks.rope_checks(r);  // keys the family's checkpoints carry beside the dicts
}

}  // namespace

// Whether the model rotates (Falcon's alibi key and the families' rope_off leave the rotary module out),
// its rope dicts where it does, and the rope keys of a model that does not, reported as unused.
void plan_rope(Reading& r, Plan& p) {
  Obj& j = r.j;
  const Family& own = *r.m.family;
  p.falcon_alibi = r.m.rules->has(kAlibiKey) && j.bool_or("alibi", false);
  // Families whose rotary module a key leaves out (no RoPE on any layer; FamilyHooks::rope_off), and a
  // learned table in place of the rotation (esm).
  p.rope_off = r.m.hooks->rope_off ? r.m.hooks->rope_off(r) : false;
  if (r.learned_table) p.rope_off = true;
  const bool rotary = own.method == PositionMethod::rope && !p.falcon_alibi && !p.rope_off;
  if (rotary) read_rope(r, p);
  if (!rotary && !p.falcon_alibi && own.method != PositionMethod::alibi)
    for (const char* k : {"rope_theta", "rope_parameters", "rope_scaling", "partial_rotary_factor"})
      if (has(j.j, k) && !j.read.count(k)) {
        r.out.warnings.push_back(std::string(k) + " is not used: model_type '" + r.type +
                                 "' applies no RoPE" + (p.rope_off ? " with this config" : ""));
        j.read.insert(k);
      }
  j.read.insert("rotary_dim");  // phi: superseded by partial_rotary_factor in transformers 5
  j.read.insert("rope_interleave");
  // rotary_emb_base / rotary_pct are read by gpt_neox only (its hook); in any other family
  // transformers 5 keeps them as inert attributes (CodeQwen1.5's qwen2 config has
  // rotary_emb_base), so they are reported as ignored.
}

}  // namespace posenc::detail
