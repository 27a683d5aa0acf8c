// src/model/rope_dict.cc: one rope_parameters / rope_scaling dict of a config.json, standardized as
// transformers 5.23 does (modeling_rope_utils.py standardize_rope_params and the rope init functions' reads
// of it), to a RopeConfig.
#include <array>
#include <cmath>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "src/model/parse.h"
#include "src/model/rope_types.h"

namespace posenc::detail {
namespace {
RopeScalingType scaling_type(const std::string& name, const std::string& where) {
  if (const std::optional<RopeScalingType> type = rope_type_from_name(name)) return *type;
  fail(kOp, where, "rope_type = \"", name, "\" is not supported: expected ", rope_type_names(" or ", true));
}

}  // namespace

bool rope_theta_is_null(const json& j) {
  // convert_rope_params_to_dict (modeling_rope_utils.py): the dict's own rope_theta, else the top-level one
  // (setdefault), legacy rope_scaling winning over rope_parameters.
  const char* dict_key = has(j, "rope_scaling") ? "rope_scaling" : "rope_parameters";
  if (has(j, dict_key) && j.at(dict_key).is_object() && j.at(dict_key).contains("rope_theta"))
    return j.at(dict_key).at("rope_theta").is_null();
  return j.contains("rope_theta") && j.at("rope_theta").is_null();
}

void check_mimo_keys(Obj& j, const json& rope_parameters,
                     const std::map<std::string, std::optional<RopeConfig>>& nested) {
  // MiMo-V2-Flash's checkpoints also carry the values SGLang (the authors' reference) reads; transformers
  // 5 ignores them (convert_rope_params_to_dict is a no-op). Equal values are the same model; a
  // different one leaves the model ambiguous.
  auto agree = [&](const char* key, double used, const char* what) {
    if (j.has(key) && j.num(key) != used)
      fail(kOp, j.where, key, " = ", j.num(key), " differs from the ", what, " ", used,
           " transformers 5 uses (mimo_v2_flash reads rope_parameters per layer type only): ambiguous");
  };
  for (const char* lt : {"full_attention", "sliding_attention"}) {
    const auto it = nested.find(lt);
    const bool full = lt[0] == 'f';
    if (it != nested.end() && it->second)
      agree(full ? "rope_theta" : "swa_rope_theta", it->second->base,
            full ? "full layers' base" : "SWA base");
    const json* d = rope_parameters.contains(lt) ? &rope_parameters.at(lt) : nullptr;
    const bool own = d && d->is_object() && d->contains("partial_rotary_factor") &&
                     d->at("partial_rotary_factor").is_number();
    agree("partial_rotary_factor", own ? d->at("partial_rotary_factor").get<double>() : 0.334,
          "partial_rotary_factor");
  }
  agree("swa_head_dim", static_cast<double>(j.int_or("head_dim", 192)), "head_dim");
  agree("swa_v_head_dim", static_cast<double>(j.int_or("v_head_dim", 128)), "v_head_dim");
  // modeling_mimo_v2_flash.py MiMoV2FlashAttention.__init__: the SWA layers have twice the kv heads and a
  // sink per head, the full layers no sinks.
  agree("swa_num_attention_heads", static_cast<double>(j.int_or("num_attention_heads", 64)), "head count");
  agree("swa_num_key_value_heads", 2.0 * static_cast<double>(j.int_or("num_key_value_heads", 4)),
        "SWA kv head count (twice num_key_value_heads)");
  if (j.bool_or("add_full_attention_sink_bias", false) || !j.bool_or("add_swa_attention_sink_bias", true))
    fail(kOp, j.where,
         "add_full_attention_sink_bias / add_swa_attention_sink_bias differ from transformers 5's ",
         "mimo_v2_flash (sinks on the sliding layers only): ambiguous");
  j.read.insert("attention_value_scale");  // values times 0.707 (not positional)
}

// One standardized rope dict (modeling_rope_utils.py standardize_rope_params) -> RopeConfig.
// `top_level` is false for the sub-dicts of a nested per-layer-type dict (yarn's truncate and the top-level
// original_max_position_embeddings are read from the top-level dict only, in _compute_yarn_parameters and
// standardize_rope_params).
RopeConfig rope_from_dict(Obj& d, const Model& m, double theta, std::optional<double> prf, bool top_level,
                          std::optional<double>& ministral_beta) {
  RopeConfig c;
  std::string rope_type = "default";
  d.read.insert("rope_type");
  d.read.insert("type");
  // rope_type wins over type (setdefault in standardize_rope_params)
  if (const char* key = rope_type_key(d.j)) rope_type = d.str(key);
  const bool phi3_names = m.rules->has(kPhi3RopeNames);
  if (phi3_names && rope_type == "su")
    // Phi3Config.convert_rope_params_to_dict renames "su" only after standardize_rope_params, which
    // does not know "su" and so never copies original_max_position_embeddings into the dict: 5.23's
    // validate_rope then raises KeyError. Early Phi-3 releases ship this type; their own
    // modeling_phi3.py (Phi3SuScaledRotaryEmbedding) and transformers 4.x read it as longrope.
    m.warnings->push_back(
        d.where +
        "rope_type 'su' (Phi-3's early name of longrope): read as longrope with the top-level "
        "original_max_position_embeddings, as Phi-3's own code and transformers 4.x do; "
        "transformers 5.23 fails to load this config (KeyError)");
  // configuration_hunyuan_vl.py convert_rope_params_to_dict: "xdrope" is "dynamic" (with alpha: NTK alpha),
  // whose validation requires factor.
  const bool xdrope = m.family->has(kXdRope);
  if (xdrope && (rope_type == "xdrope" || rope_type == "dynamic")) {
    rope_type = "dynamic";
    if (!d.has("factor"))
      fail(kOp, d.where, "factor is missing: ", m.family->model_type, "'s rope type '", rope_type,
           "' requires it (transformers 5.23 raises KeyError)");
  }
  if (phi3_names && (rope_type == "su" || rope_type == "yarn"))
    rope_type = "longrope";  // Phi3Config (after standardize)
  if (rope_type == "su")
    fail(kOp, d.where,
         "rope_type = \"su\" is Phi-3's early name of longrope, read for model_type 'phi3' only ",
         "(model_type '", m.family->model_type, "' has no such rope type in transformers 5 or 4.x)");
  RopeScaling& s = c.scaling;
  // Hunyuan's checkpoints label a fixed NTK-alpha base "dynamic": base * alpha^(d / (d - 2)) with d =
  // head_dim, no length dependence, factor unused (modeling_hunyuan_v1_dense.py
  // HunYuanDenseV1RotaryEmbedding.__init__, compute_ntk_alpha_rope_parameters).
  const bool hunyuan = m.rules->has(kNtkAlpha);
  const bool ntk_alpha = hunyuan && rope_type == "dynamic" && d.has("alpha") && d.num("alpha") != 0;
  if (ntk_alpha) {
    const double dim = static_cast<double>(m.head_dim);
    if (m.head_dim <= 2) fail(kOp, d.where, "alpha needs head_dim > 2 (its exponent is d / (d - 2))");
    theta = d.num_or("rope_theta", theta) * std::pow(d.num("alpha"), dim / (dim - 2.0));
    if (!(theta > 0) || !std::isfinite(theta))
      fail(kOp, d.where, "alpha = ", d.num("alpha"), " gives the invalid base ", theta);
    d.read.insert("rope_theta");
    d.read.insert("factor");
    rope_type = "default";
    c.base = theta;
  }
  s.type = scaling_type(rope_type, d.where);
  if (m.rules->has(kDefaultRopeOnly) && s.type != RopeScalingType::none)
    fail(kOp, d.where, "rope_type = \"", rope_type, "\" is not supported by ", m.type,
         ": its rotary module accepts 'default' only "
         "(RecurrentGemmaRotaryEmbedding.__init__ raises)");
  if (!(hunyuan && s.type == RopeScalingType::none && d.read.count("alpha")))
    c.base = d.num_or("rope_theta", theta);
  if (d.has("partial_rotary_factor")) prf = d.num("partial_rotary_factor");
  if (m.rules->has(kMlaRopeFactor)) {
    // Mistral4Config.__post_init__: head_dim = nope + rope and partial_rotary_factor = rope / head_dim, so
    // the rope init's int(head_dim * prf) dims are the qk_rope_head_dim MLA rotates
    // (configuration_mistral4.py); posenc's RopeConfig spans those dims alone. The default init ignores the
    // factor and transformers fails: refused, as is a factor that does not give qk_rope_head_dim.
    const int64_t qk = m.nope + m.head_dim;
    if (rope_type == "default")
      fail(kOp, d.where, "rope_type = \"default\" is not supported for ", m.type,
           ": its default init rotates all ", qk, " dims, the attention ", m.head_dim,
           " (transformers 5 fails)");
    if (prf && static_cast<int64_t>(static_cast<double>(qk) * *prf) != m.head_dim)
      fail(kOp, d.where, "partial_rotary_factor = ", *prf, " rotates ", static_cast<int64_t>(qk * *prf),
           " of ", qk, " dims, but ", m.type, "'s attention rotates qk_rope_head_dim = ", m.head_dim);
    prf.reset();
  }
  if (prf && !(*prf > 0 && *prf <= 1))
    fail(kOp, d.where, "partial_rotary_factor = ", *prf, " is invalid: must be in (0, 1]");
  c.head_dim = m.head_dim;
  c.max_position_embeddings = m.max_pos;
  c.layout = m.family->layout;
  c.reversed = m.family->has(kReversedRotation);
  // dim: the model's default ignores prf unless the family's own default reads it (notes 4.1); every scaling
  // init fn reads the dict's prf (modeling_rope_utils.py _compute_linear_scaling_rope_parameters,
  // _compute_dynamic_ntk_parameters, _compute_yarn_parameters, _compute_longrope_parameters,
  // _compute_llama3_parameters).
  double used_prf = 1.0;
  if (s.type == RopeScalingType::proportional) {
    // _compute_proportional_rope_parameters: inv_freq always has head_dim / 2 entries; the dict's
    // partial_rotary_factor is the rotated proportion of them (default 1.0, with a warning).
    s.proportion = prf.value_or(1.0);
    if (!prf) m.warnings->push_back(d.where + "rope_type 'proportional' without partial_rotary_factor: 1.0");
  } else if (s.type != RopeScalingType::none || m.family->default_uses_prf) {
    used_prf = prf.value_or(1.0);
  } else if (prf && *prf < 1) {
    m.warnings->push_back("partial_rotary_factor = " + std::to_string(*prf) + " is ignored by " +
                          m.family->model_type + "'s default RoPE in transformers 5 (all head dims rotate)");
  }
  if (!(used_prf > 0 && used_prf <= 1))  // checked before the cast (a float -> int64 past the range is UB)
    fail(kOp, d.where, "partial_rotary_factor = ", used_prf, " is invalid: must be in (0, 1]");
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(m.head_dim) * used_prf);
  // A family whose default RoPE ignores partial_rotary_factor rotates the whole head in its
  // apply_rotary_pos_emb (rotate_half or pairs over head_dim): the scaled types' fewer frequencies then fail
  // there (cos of rotary_dim columns against the head's; checked for every family in the harness's domain).
  // (Family trait kWholeHeadApply, hy_v4 and molmo2_text: refused by their own rules, which know the layers
  // that scale.)
  const bool own_rule = m.family->has(kWholeHeadApply);
  if (!m.family->default_uses_prf && !own_rule && s.type != RopeScalingType::proportional &&
      c.rotary_dim != m.head_dim)
    fail(kOp, d.where, "partial_rotary_factor = ", used_prf, " with rope_type '", rope_scaling_name(s.type),
         "' is not supported for model_type '", m.family->model_type, "': its rotation covers all ",
         m.head_dim, " head dims, the frequencies ", c.rotary_dim, " (transformers 5 fails)");
  if (s.type != RopeScalingType::none) {
    const bool factor_required =
        s.type != RopeScalingType::longrope && s.type != RopeScalingType::proportional;
    if (d.has("factor"))
      s.factor = d.num("factor");
    else if (d.j.contains("factor") && s.type == RopeScalingType::yarn)
      s.factor = -1;  // explicit null: derive
    else if (factor_required)
      fail(kOp, d.where, "factor is missing: required for rope_type '", rope_type,
           "' (transformers 5 raises KeyError)");
  }
  if (d.has("original_max_position_embeddings"))
    s.original_max_position_embeddings = d.integer("original_max_position_embeddings");
  const bool orig_type = s.type == RopeScalingType::yarn || s.type == RopeScalingType::longrope ||
                         s.type == RopeScalingType::llama3;
  if (orig_type && top_level && m.top_original) s.original_max_position_embeddings = *m.top_original;
  if (orig_type && s.original_max_position_embeddings == 0) s.original_max_position_embeddings = m.max_pos;
  // yarn's explicit null, and longrope without one: max_position_embeddings / original, as transformers 5
  // (_compute_longrope_parameters); the plan then shows the factor the attention factor comes from.
  if (s.factor < 0 || (s.type == RopeScalingType::longrope && !d.has("factor")))
    s.factor = static_cast<double>(m.max_pos) / static_cast<double>(s.original_max_position_embeddings);
  if (d.has("attention_factor")) s.attention_factor = d.num("attention_factor");
  // yarn: `d.get("beta_fast") or 32`: 0 means the default (_compute_yarn_parameters).
  if (d.has("beta_fast") && d.num("beta_fast") != 0) s.beta_fast = d.num("beta_fast");
  if (d.has("beta_slow") && d.num("beta_slow") != 0) s.beta_slow = d.num("beta_slow");
  if (d.has("mscale")) s.mscale = d.num("mscale");
  if (d.has("mscale_all_dim")) s.mscale_all_dim = d.num("mscale_all_dim");
  if (d.has("truncate") && top_level) s.truncate = d.boolean("truncate");
  if (s.type == RopeScalingType::longrope && d.has("factor") && !s.attention_factor) {
    // transformers 5 _compute_longrope_parameters uses the dict's factor when given (posenc's
    // rope_frequencies derives max / original otherwise): fix the attention factor from it.
    const double f = s.factor, orig = static_cast<double>(s.original_max_position_embeddings);
    s.attention_factor = f <= 1 ? 1.0 : std::sqrt(1 + std::log(f) / std::log(orig));
  }
  if (s.type == RopeScalingType::longrope) {
    for (const char* k : {"short_factor", "long_factor"})
      if (!d.has(k)) fail(kOp, d.where, k, " is missing: required for rope_type 'longrope'");
    s.short_factor = d.numbers("short_factor");
    s.long_factor = d.numbers("long_factor");
  }
  if (m.rules->has(kPhimoeMscale) && s.type != RopeScalingType::none) {
    // Phi-3.5-MoE multiplies cos/sin by short_mscale up to the original context and long_mscale past it,
    // instead of longrope's sqrt(1 + ln f / ln original) (modeling_phimoe.py PhimoeRotaryEmbedding.forward,
    // transformers 4.46 and 5.23); both keys are required (configuration_phimoe.py validate_rope raises
    // TypeError). The authors' code is written for longrope only.
    if (s.type != RopeScalingType::longrope)
      fail(kOp, d.where, "rope_type = \"", rope_type, "\" is not supported for model_type '", m.type,
           "': its short_mscale / long_mscale rule is defined "
           "for longrope only (Phi-3.5-MoE)");
    for (const char* k : {"short_mscale", "long_mscale"})
      if (!d.has(k))
        fail(kOp, d.where, k, " is missing: required for ", m.type, "'s longrope (transformers 5 raises)");
    const double short_mscale = d.num("short_mscale"), long_mscale = d.num("long_mscale");
    if (short_mscale != long_mscale)
      fail(kOp, d.where, "short_mscale = ", short_mscale, " and long_mscale = ", long_mscale,
           " differ: posenc's RoPE has one attention factor for both lengths (Phi-3.5-MoE's are equal)");
    s.attention_factor = short_mscale;
  }
  if (s.type == RopeScalingType::llama3) {
    for (const char* k : {"low_freq_factor", "high_freq_factor"})
      if (!d.has(k)) fail(kOp, d.where, k, " is missing: required for rope_type 'llama3'");
    s.low_freq_factor = d.num("low_freq_factor");
    s.high_freq_factor = d.num("high_freq_factor");
    if (s.low_freq_factor == s.high_freq_factor)
      m.warnings->push_back(
          d.where + "low_freq_factor == high_freq_factor = " + std::to_string(s.low_freq_factor) +
          ": a hard switch at wavelength original/low_freq_factor (transformers only warns)");
  }
  // The M-RoPE sections a rotary module takes when the config has none (Family::mrope_section; the other
  // M-RoPE families take sections from their configs only: a config without them plans 1-D RoPE).
  const std::array<int64_t, 3>& own_sections = m.family->mrope_section;
  const std::vector<int64_t> class_sections =
      own_sections[0] == 0 ? std::vector<int64_t>{}
                           : std::vector<int64_t>(own_sections.begin(), own_sections.end());
  // Family trait kXdRope: its sections split contiguous chunks of the doubled frequencies, not M-RoPE's
  // (the family's hook checks them and names what the plan omits).
  if (xdrope) {
    d.read.insert("mrope_section");
    d.read.insert("xdrope_section");
  }
  if (!xdrope && (d.has("mrope_section") || !class_sections.empty())) {
    c.mrope_section =
        d.has("mrope_section") ? d.integers("mrope_section", 0, kMaxModelHeadDim) : class_sections;
    // Family trait kInterleavedMrope: qwen3_vl / qwen3_5 interleave unconditionally (modeling_qwen3_vl.py
    // apply_interleaved_mrope), and so do the models with their rotary module (Qwen3-Omni, Cosmos 3 Edge).
    const bool inter = m.rules->has(kInterleavedMrope) || m.family->has(kInterleavedMrope) ||
                       d.bool_or("mrope_interleaved", false);
    c.multimodal = inter ? RopeMultimodal::mrope_interleaved : RopeMultimodal::mrope;
    if (m.family->has(kAlternatingHwMrope)) c.multimodal = RopeMultimodal::mrope_alternating_hw;
  }
  // Ernie4_5_VLMoeTextRotaryEmbedding.__init__ raises for any other rope type (modeling_ernie4_5_vl_moe.py).
  if (m.family->has(kAlternatingHwMrope) && s.type != RopeScalingType::none)
    fail(kOp, d.where, "rope_type = \"", rope_scaling_name(s.type), "\" is not supported by model_type '",
         m.family->model_type, "': transformers 5 requires \"default\"");
  d.read.insert("mrope_interleaved");
  if (d.has("llama_4_scaling_beta")) ministral_beta = d.num("llama_4_scaling_beta");
  d.read.insert("max_position_embeddings");  // ministral3's default dict carries it; unused
  try {
    validate(c);
  } catch (const Error& e) {
    fail(kOp, "model_type '", m.family->model_type, "': ", e.what());
  }
  if (c.reversed) {
    // NanoChat's weightless RMS norms of q and k after RoPE (modeling_nanochat.py NanoChatAttention.forward)
    // commute with the rotation but cancel a scaled rotation's attention factor: the model never applies it.
    const double factor = rope_frequencies(c, c.original_context()).attention_factor;
    if (factor != 1.0)
      m.warnings->push_back(d.where + "rope_type '" + std::string(rope_scaling_name(s.type)) +
                            "' scales cos and sin by " + std::to_string(factor) + ", which " + m.type +
                            "'s q_norm / k_norm after RoPE cancel: normalize after posenc's rotation, or "
                            "rotate with attention_factor 1 when normalizing first");
  }
  // Unknown keys of a rope dict: every one is reported (the dict is positional by definition).
  for (auto it = d.j.begin(); it != d.j.end(); ++it)
    if (!d.read.count(it.key()))
      m.warnings->push_back("key '" + d.where + it.key() + "' is not understood by posenc: ignored");
  return c;
}

}  // namespace posenc::detail
