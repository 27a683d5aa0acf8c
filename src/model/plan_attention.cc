// src/model/plan_attention.cc: the plan stages of the attention modules (src/model/stages.h), after the
// rotary module, as each family's modeling file builds them: the softmax scale each attention passes to its
// kernel (`scaling`), its softcap, chunk and query temperature; then the masks the model's forward creates
// (causal, bidirectional, a wrapper's own); then T5's relative buckets.
#include <cmath>
#include <optional>
#include <string>

#include "src/model/stages.h"
#include "src/rope_plan.h"

namespace posenc::detail {
namespace {

// The scale of the family's rule (Family::scale_rule): the model's own row's where it has one (gemma3n_text,
// muse_spark_text), else its family's; head_dim^-0.5 by default.
double rule_scale(Obj& j, const Model& m, int64_t qk_head_dim) {
  const Family& own = *m.family;
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim));
  const Family& scale_row = own.scale_rule != ScaleRule::head_dim ? own : *m.rules;
  switch (scale_row.scale_rule) {
    case ScaleRule::head_dim:
      break;
    case ScaleRule::query_pre_attn_scalar:
      scale = std::pow(j.num_or("query_pre_attn_scalar", scale_row.scale_default), -0.5);
      break;
    case ScaleRule::query_pre_attn_scalar_positive: {
      const double scalar = j.num_or("query_pre_attn_scalar", static_cast<double>(qk_head_dim));
      if (!(scalar > 0)) fail(kOp, j.where, "query_pre_attn_scalar = ", scalar, " is invalid: must be > 0");
      scale = std::pow(scalar, -0.5);
      break;
    }
    case ScaleRule::attention_multiplier:
      scale =
          j.num_or("attention_multiplier", scale_row.scale_default != 0 ? scale_row.scale_default : scale);
      break;
    case ScaleRule::half_head:
      scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim) / 2.0);
      break;
    case ScaleRule::one:
      scale = 1.0;
      break;
    case ScaleRule::qk_scale_factor: {
      // Muse: the weightlessly normed query times qk_scale_factor before RoPE (modeling_muse_glimmer.py
      // MuseGlimmerAttention.forward), then the kernel's head_dim^-0.5: RoPE is linear, so the factor is the
      // logits' and the plan's scale carries it (q / k in: the normed ones).
      const double factor = j.num_or("qk_scale_factor", scale_row.scale_default);
      if (!(factor > 0)) fail(kOp, j.where, "qk_scale_factor = ", factor, " is invalid: must be > 0");
      scale *= factor;
      break;
    }
    case ScaleRule::key_multiplier: {
      // Falcon-H1: k_proj(x) times key_multiplier before RoPE (modeling_falcon_h1.py
      // FalconH1Attention.forward): likewise the logits' factor, carried by the plan's scale (k in:
      // k_proj's).
      const double key_multiplier = j.num_or("key_multiplier", 1.0);
      if (!std::isfinite(key_multiplier) || key_multiplier == 0)
        fail(kOp, j.where, "key_multiplier = ", key_multiplier, " is invalid: must be finite and nonzero");
      scale *= key_multiplier;
      break;
    }
    case ScaleRule::scale_attn_weights:  // modeling_gpt2.py, modeling_gpt_bigcode.py
      if (!j.bool_or("scale_attn_weights", true)) scale = 1.0;
      break;
  }
  return scale;
}

}  // namespace

// Each attention module's options: the softmax scale (the rule's, the family's own keys, DeepSeek's yarn
// mscale), the softcap, Llama 4's chunk and NoPE temperature, Mistral's llama_4_scaling_beta temperature.
void plan_scale(Reading& r, Plan& p) {
  Obj& j = r.j;
  const Family& rules = *r.m.rules;
  const std::string& type = r.type;
  p.scale = rule_scale(j, r.m, p.dims.qk);
  if (r.m.hooks->scale) r.m.hooks->scale(r, p.scale);  // the family's own keys (mpt's attn_config, gemma3n's)
  j.read.insert("attention_k_eq_v");  // Gemma 4: values reuse the key projection (not positional)
  if (p.dims.mla && r.flat && r.flat->scaling.type != RopeScalingType::none &&
      r.flat->scaling.mscale_all_dim && *r.flat->scaling.mscale_all_dim != 0) {
    // modeling_deepseek_v3.py yarn_apply_mscale: scaling *= get_mscale(factor, mscale_all_dim)^2
    const double ms = yarn_mscale(r.flat->scaling.factor, *r.flat->scaling.mscale_all_dim);
    p.scale *= ms * ms;
  }
  if (rules.softcap != 0) {
    if (j.has("attn_logit_softcapping"))
      p.softcap = j.num("attn_logit_softcapping");
    else if (!j.j.contains("attn_logit_softcapping"))
      p.softcap = rules.softcap;
  }
  // Gemma 3 stores attn_logit_softcapping but never passes it to attention (modeling_gemma3.py).
  for (const char* k : {"attn_logit_softcapping", "final_logit_softcapping", "rope_local_base_freq",
                        "query_pre_attn_scalar", "attention_multiplier", "alibi", "initial_context_length",
                        "use_qk_norm", "original_max_position_embeddings"})
    j.read.insert(k);
  p.chunk = j.int_or("attention_chunk_size", rules.chunk);
  if (rules.has(kLlama4Temperature) && j.bool_or("attn_temperature_tuning", true)) {
    p.llama4_temp.kind = QueryTemperature::Kind::llama4;
    p.llama4_temp.scale = j.num_or("attn_scale", 0.1);
    p.llama4_temp.floor_scale = j.num_or("floor_scale", 8192);
  }
  j.read.insert("no_rope_layers");
  j.read.insert("no_rope_layer_interval");
  // Family trait kMinistralTemperature (ministral3, mistral4: modeling_mistral4.py get_llama_4_attn_scale,
  // Mistral4Attention.forward).
  if (rules.has(kMinistralTemperature)) {
    if (!p.beta)
      fail(kOp, j.where, "rope_parameters.llama_4_scaling_beta is missing: ", type,
           " applies it to every query (modeling_", type, ".py get_llama_4_attn_scale)");
    const int64_t original = r.flat ? r.flat->scaling.original_max_position_embeddings : 0;
    if (original <= 0)  // transformers reads it unconditionally (get_llama_4_attn_scale's floor divisor)
      fail(kOp, j.where, "rope_parameters.original_max_position_embeddings is missing: ", type,
           "'s llama_4_scaling_beta divides positions by it (get_llama_4_attn_scale)");
    p.ministral_temp = {QueryTemperature::Kind::ministral3, *p.beta, static_cast<double>(original)};
  }
}

// The masks the model's forward creates: the family's attention options (FamilyHooks::attention), causal
// or bidirectional (is_decoder, use_bidirectional_attention, a wrapper's prefix-LM or image blocks), BERT's
// position_embedding_type refused where it is not the learned table, GPT-2's per-layer scale.
void plan_masks(Reading& r, Plan& p, const std::string& outer_type) {
  Obj& j = r.j;
  const Family& own = *r.m.family;
  const Family& rules = *r.m.rules;
  ModelPositions& out = r.out;
  if (r.m.hooks->attention) r.m.hooks->attention(r);  // mllama's cross-attention layers, encoders' own keys
  // BERT's family: causal iff is_decoder (modeling_bert.py BertLayer.__init__,
  // BertModel._create_attention_masks; the CausalLM heads only warn).
  p.bidirectional = rules.has(kCausalIffDecoder) && !j.bool_or("is_decoder", false);
  if (own.has(kBidirectional)) p.bidirectional = true;
  j.read.insert("is_decoder");
  if (own.has(kBidirectional) && j.has("use_bidirectional_attention")) {
    // (embedding_gemma2_text: no such field; its layers are bidirectional whatever the key says)
    out.warnings.push_back(
        "use_bidirectional_attention = " + json_excerpt(j.at("use_bidirectional_attention")) +
        " is not read by " + r.own_type + ": every layer attends both ways");
  } else if (rules.has(kBidirectionalVision) && j.has("use_bidirectional_attention")) {
    // configuration_gemma4.py: "all" (every token, a halved symmetric window) or "vision" (image
    // tokens among themselves; text stays causal).
    const std::string mode = j.str("use_bidirectional_attention");
    if (mode != "vision")
      fail(kOp, j.where, "use_bidirectional_attention = ", json_excerpt(j.at("use_bidirectional_attention")),
           " is not modeled by posenc (Gemma 4: \"vision\" or null)");
    out.warnings.push_back(
        "use_bidirectional_attention = \"vision\": image tokens attend to each other "
        "both ways, which the caller's mask must add; text layers shown causal");
  } else if (own.has(kBidirectionalOption) && j.bool_or("use_bidirectional_attention", false)) {
    // step3p5: full layers see every key, sliding layers |q - k| < sliding_window (modeling_step3p7.py
    // _bidirectional_window_overlay, Step3p7TextModel.forward; the window unchanged).
    // Gemma3TextModel (EmbeddingGemma): full layers see every key, sliding layers a symmetric window
    // (modeling_gemma3.py Gemma3TextModel.forward; the window in layer_types.cc).
    p.bidirectional = true;
  } else if (const char* prefix_lm = wrapper_prefix_lm_note(outer_type)) {
    // The wrapper's own mask (PaliGemma's prefix-LM), whatever its text config says.
    j.read.insert("use_bidirectional_attention");
    out.warnings.push_back(prefix_lm);
  } else if (j.bool_or("use_bidirectional_attention", false)) {
    out.warnings.push_back(
        "use_bidirectional_attention = true is not modeled by posenc: layers shown causal");
  }
  // A wrapper's bidirectional blocks of image tokens, flat or not (the file means the multimodal model).
  if (const char* blocks = wrapper_block_mask_note(outer_type)) out.warnings.push_back(blocks);
  // transformers 5's BERT family has no position_embedding_type: it adds the learned table whatever the
  // key says. A checkpoint trained with another kind does not hold positions in that table: transformers
  // 4's "relative_key" / "relative_key_query" (distance embeddings in every layer, removed in 5) and
  // Jina's "alibi" (remote code, auto_map JinaBert*). Refused rather than planned with untrained rows.
  if (rules.has(kBertFamily) && j.has("position_embedding_type") &&
      j.str("position_embedding_type") != "absolute")
    fail(kOp, j.where, "position_embedding_type = ", json_excerpt(j.at("position_embedding_type")),
         " is not supported for ", r.type,
         ": transformers 5 adds the learned table instead, which this checkpoint did not train (",
         j.str("position_embedding_type") == "alibi" ? "ALiBi is the remote code of its auto_map"
                                                     : "transformers 4's relative distance embeddings",
         ")");
  p.inverse_layer_scale =
      rules.has(kInverseLayerScale) && j.bool_or("scale_attn_by_inverse_layer_idx", false);
}

// T5's relative buckets (Family trait kT5Stacks): the bucket count and the largest distance bucketed.
void plan_t5_buckets(Reading& r) {
  if (!r.m.rules->has(kT5Stacks)) return;
  Obj& j = r.j;
  r.out.t5_num_buckets = j.int_or("relative_attention_num_buckets", 32);
  r.out.t5_max_distance = j.int_or("relative_attention_max_distance", 128);
  // Family trait kBiasPerLayer (umt5: modeling_umt5.py UMT5LayerSelfAttention.__init__,
  // UMT5Attention.forward): every self-attention layer has_relative_attention_bias.
  r.out.t5_bias_per_layer = r.m.family->has(kBiasPerLayer);
  j.read.insert("is_encoder_decoder");
}

}  // namespace posenc::detail
