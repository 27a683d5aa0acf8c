// src/model/assemble.cc: the reader's assemble stage (src/model/stages.h): each layer's plan from the
// model-wide choices of the plan stages, as each decoder layer's attention module takes them (its head dims,
// mask, scale and rotary embedding), then the warnings of what the config holds and no stage read.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "src/model/stages.h"

namespace posenc::detail {
namespace {

// Family trait kWholeHeadApply (molmo2_text on its scaled layers, hy_v4 on every layer): their default rope
// init rotates the whole head and ignores partial_rotary_factor (modeling_molmo2.py
// Molmo2RotaryEmbedding.compute_default_rope_parameters, modeling_hy_v4.py
// HYV4RotaryEmbedding.compute_default_rope_parameters), but every other rope type's init reads it
// (modeling_rope_utils.py _compute_linear_scaling_rope_parameters, _compute_dynamic_ntk_parameters,
// _compute_yarn_parameters, _compute_longrope_parameters, _compute_llama3_parameters): cos / sin of
// int(head_dim * prf) dims, which apply_rotary_pos_emb multiplies with the whole head (modeling_molmo2.py
// and modeling_hy_v4.py apply_rotary_pos_emb): a shape mismatch at the first forward in transformers 5.23.
void check_whole_head_apply(const Reading& r, const Plan& p) {
  const bool whole_head_apply =
      r.m.family->has(kWholeHeadApply) &&
      (r.scaled.empty() || std::find(r.scaled.begin(), r.scaled.end(), 1) != r.scaled.end());
  if (whole_head_apply && r.flat && r.flat->scaling.type != RopeScalingType::none &&
      r.flat->effective_rotary_dim() != r.flat->head_dim)
    fail(kOp, r.j.where, "partial_rotary_factor = ", p.flat_prf ? json_excerpt(json(*p.flat_prf)) : "?",
         " with rope type '", rope_scaling_name(r.flat->scaling.type), "' is not supported for ", r.own_type,
         ": its rotary module then builds cos / sin of ", r.flat->effective_rotary_dim(),
         " dims, which its apply_rotary_pos_emb cannot apply to the ", r.flat->head_dim, "-dim rotated head",
         r.scaled.empty() ? "" : " of its rope_scaling_layers",
         " (transformers 5.23 fails at the first forward; the default rope type ignores the factor)");
}

// The layers of the plan: T5's encoder num_layers, then its decoder's num_decoder_layers (None: num_layers;
// SwitchTransformersConfig: 12, Family::decoder_layers); Pix2Struct's text model is a decoder of
// num_layers; every other model num_hidden_layers of one stack.
struct Stacks {
  int64_t encoder = 0, decoder = 0;
};
Stacks layer_stacks(Reading& r) {
  Obj& j = r.j;
  const Model& m = r.m;
  const Family& own = *m.family;
  const bool t5 = m.rules->has(kT5Stacks);
  const bool t5_decoder_only = own.has(kDecoderOnly);
  Stacks s;
  s.encoder = t5 && t5_decoder_only ? 0 : m.layers;
  // (SwitchTransformersConfig.__post_init__: a null num_decoder_layers is num_layers too.)
  const bool decoder_null = j.j.contains("num_decoder_layers") && j.j.at("num_decoder_layers").is_null();
  s.decoder = !t5 ? 0
              : t5_decoder_only
                  ? m.layers
                  : j.int_or("num_decoder_layers",
                             own.decoder_layers && !decoder_null ? own.decoder_layers : m.layers);
  // Pix2StructTextModel: is_causal = config.is_decoder (modeling_pix2struct.py
  // Pix2StructTextLayerSelfAttention.__init__), its buckets unidirectional either way
  // (Pix2StructTextAttention.compute_bias): a bidirectional mask over causal buckets is not modeled.
  if (t5_decoder_only && !j.bool_or("is_decoder", true))
    fail(kOp, j.where, "is_decoder = false is not supported for ", r.own_type,
         ": a bidirectional mask over its unidirectional buckets");
  if (s.decoder < 0 || s.decoder > kMaxModelLayers)
    fail(kOp, j.where, "num_decoder_layers = ", s.decoder, " is invalid: must be in [0, ", kMaxModelLayers,
         "]");
  return s;
}

// Layer i's head dims, type and attention options (mask, window, chunk, scale, softcap, sinks, temperature).
void layer_attention(Reading& r, const Plan& p, const Stacks& stacks, int64_t i, LayerPlan& l) {
  const Family& rules = *r.m.rules;
  const bool t5 = rules.has(kT5Stacks);
  const MlaLayerDims& mla_dims = p.mla_dims;
  // q/k and v heads of their own sizes (MLA, T5's d_kv, Family trait kOwnHeadDims)
  const bool own_dims = p.dims.mla || t5 || rules.has(kOwnHeadDims);
  l.qk_head_dim = own_dims ? p.dims.qk : p.head_dims[i];
  l.v_head_dim = own_dims ? p.dims.v : p.head_dims[i];
  if (!mla_dims.nope.empty()) {  // dots3_note_text: the layer type's MLA (Dots3NoteTextAttention.__init__)
    l.qk_head_dim = mla_dims.nope[i] + p.head_dims[i];
    l.v_head_dim = mla_dims.v[i];
  }
  l.layer_type = t5 ? (i < stacks.encoder ? "encoder" : "decoder") : p.types[i];
  LayerAttention& a = l.attention;
  a.causal = !(p.bidirectional || (t5 && i < stacks.encoder));
  a.softmax_scale = p.inverse_layer_scale ? p.scale / static_cast<double>(i + 1) : p.scale;
  // dots3_note_text: qk_head_dim^-0.5 of the layer's own head, no yarn mscale (modeling_dots3_note.py
  // Dots3NoteTextAttention.__init__)
  if (!mla_dims.nope.empty()) a.softmax_scale = 1.0 / std::sqrt(static_cast<double>(l.qk_head_dim));
  a.softcap = p.softcap;
  a.sinks = rules.has(kSinks);  // Family trait kSinks: one learnable sink per head
  const std::string& lt = l.layer_type;
  // Family trait kWindowOnFullLayers: a set sliding_window masks every full_attention layer.
  if (rules.has(kWindowOnFullLayers) && lt == "full_attention") a.window = p.window;
  if (lt == "sliding_attention") {
    a.window = p.window;
    if (p.window == 0)
      r.out.warnings.push_back("layer " + std::to_string(i) +
                               " is sliding_attention but "
                               "sliding_window is not set: no window");
  }
  if (lt == "chunked_attention") a.chunk = p.chunk;
  if (rules.has(kSlidingSinks)) a.sinks = lt == "sliding_attention";  // sinks on the SWA layers only
  if (rules.has(kMinistralTemperature)) a.temperature = p.ministral_temp;
}

// Whether a rope layer of type lt rotates, by Family::rope_layers: exaone4's rule, RoPE iff sliding_window
// is None or the layer slides (modeling_exaone4.py Exaone4Attention.forward; exaone_moe, kolibri1);
// cohere2's, iff the layer slides with a window (modeling_cohere2.py Cohere2Attention.__init__ and
// forward; flint, modeling_flint.py FlintAttention.forward; cohere2_moe also on the dense prefix when
// prefix_dense_sliding_window_pattern is 1, modeling_cohere2_moe.py Cohere2MoeAttention.__init__ and
// forward: force_rope); afmoe's, iff the layer slides (modeling_afmoe.py AfmoeAttention.forward).
bool rotates(RopeLayers rule, const std::string& lt, int64_t window, bool force_rope) {
  switch (rule) {
    case RopeLayers::all:
      return true;
    case RopeLayers::sliding_or_no_window:
      return !(window > 0 && lt != "sliding_attention");
    case RopeLayers::sliding_with_window:
      return (window > 0 && lt == "sliding_attention") || force_rope;
    case RopeLayers::sliding:
      return lt == "sliding_attention";
  }
  return true;
}

// Layer i's rotation: the flat dict's (molmo2_text's unscaled layers the default rope of its base) or its
// layer type's, granite_swa's per-layer base, the family's rope_layers rule; its indexer's cos / sin.
void layer_rope(Reading& r, const Plan& p, int64_t i, const std::vector<std::optional<TopkIndexer>>& indexers,
                LayerPlan& l) {
  Obj& j = r.j;
  const Family& rules = *r.m.rules;
  const std::string& lt = l.layer_type;
  std::optional<RopeConfig> rc = r.flat;
  // molmo2_text: layers outside rope_scaling_layers take rotary_emb_unscaled, the default rope of the
  // same base (modeling_molmo2.py Molmo2TextModel: position_embeddings["scaled" | "unscaled"]).
  // Its compute_default_rope_parameters rotates the whole head, whatever partial_rotary_factor says
  // (modeling_molmo2.py Molmo2RotaryEmbedding.compute_default_rope_parameters).
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
  // granite_swa(moe): the layer's own base; 0 = NoPE (modeling_granite_swa.py GraniteSWAModel.__init__ and
  // forward: one rotary module per distinct base, the rope dict's other fields kept).
  if (!r.layer_theta.empty() && rc) {
    if (r.layer_theta[i] == 0)
      rc.reset();
    else
      rc->base = r.layer_theta[i];
  }
  const bool uses =
      rc.has_value() && r.use_rope[i] && rotates(rules.rope_layers, lt, p.window, r.force_rope[i] != 0);
  if (!uses) {
    if (rules.has(kLlama4Temperature)) l.attention.temperature = p.llama4_temp;  // NoPE layers only
    return;
  }
  const MlaLayerDims& mla_dims = p.mla_dims;
  l.position = PositionMethod::rope;
  l.rope = rc;
  l.rotary_lo = mla_dims.nope.empty() ? r.m.nope : mla_dims.nope[i];
  l.rotary_hi = l.rotary_lo + rc->effective_rotary_dim();
  if (!indexers[i]) return;
  // The indexer rotates with the same cos / sin, in its own layout and range.
  l.indexer = indexers[i];
  const RopeLayout layout = l.indexer->rope.layout;
  l.indexer->rope = *rc;
  l.indexer->rope.layout = layout;
  // dots3_note_text: the first qk_rope_head_dim dims of the layer's own config
  // (Dots3NoteTextIndexer.__init__ and forward)
  if (!mla_dims.nope.empty()) l.indexer->rotary_hi = l.indexer->rotary_lo + rc->effective_rotary_dim();
  if (l.indexer->block_size > 0) {  // MiniMax-M3: the first rotated dims of its head
    if (rc->effective_rotary_dim() > l.indexer->head_dim)
      fail(kOp, j.where, "index_head_dim = ", l.indexer->head_dim, " is smaller than the ",
           rc->effective_rotary_dim(), " rotated dims its indexer slices cos / sin to: unsupported");
    l.indexer->rope.head_dim = l.indexer->head_dim;
    l.indexer->rotary_lo = 0;
    l.indexer->rotary_hi = rc->effective_rotary_dim();
  }
}

// Layer i's positions: none on a layer without softmax attention, mllama's cross-attention layers, ALiBi,
// the family's table or bias, or its rotation (layer_rope).
void layer_position(Reading& r, const Plan& p, int64_t i,
                    const std::vector<std::optional<TopkIndexer>>& indexers, LayerPlan& l) {
  const Family& own = *r.m.family;
  const std::string& lt = l.layer_type;
  const bool attends = lt != "linear_attention" && lt != "conv" && lt != "moe" && lt != "mlp";
  l.softmax_attention = attends;
  if (r.cross.count(i)) {
    l.layer_type = "cross_attention";  // modeling_mllama.py: attends to vision tokens, no RoPE
    l.attention.causal = false;
  } else if (!attends) {
    l.position = PositionMethod::none;
  } else if (p.falcon_alibi || own.method == PositionMethod::alibi) {
    l.position = PositionMethod::alibi;
  } else if (own.method != PositionMethod::rope || p.rope_off) {
    l.position = r.learned_table ? PositionMethod::learned : p.rope_off ? PositionMethod::none : own.method;
  } else {
    layer_rope(r, p, i, indexers, l);
  }
}

// Family trait kUseQkNorm: Llama 4's use_qk_norm (default true), Llama4TextL2Norm, weightless, on q and k
// after RoPE in the RoPE layers (modeling_llama4.py Llama4TextAttention.__init__ and forward): it cancels a
// scaled rotation's attention factor (freqs_cis * attention_scaling), as NanoChat's norms do
// (src/model/rope_dict.cc). Family trait kNormsAfterRope: HunYuan (dense, MoE, VL)'s query_layernorm /
// key_layernorm, RMS norms per head after RoPE, always (modeling_hunyuan_v1_dense.py
// HunYuanDenseV1Attention.forward, modeling_hunyuan_vl.py HunYuanVLDenseV1Attention.forward): the same
// cancellation.
void warn_norms_after_rope(Reading& r) {
  const Family& rules = *r.m.rules;
  const bool norms_after_rope = rules.has(kNormsAfterRope);
  if (!((rules.has(kUseQkNorm) && r.j.bool_or("use_qk_norm", true)) || norms_after_rope)) return;
  for (const LayerPlan& p : r.out.layers) {
    if (!p.rope) continue;
    const double factor = rope_frequencies(*p.rope, p.rope->original_context()).attention_factor;
    if (factor != 1.0)
      r.out.warnings.push_back("rope_type '" + std::string(rope_scaling_name(p.rope->scaling.type)) +
                               "' scales cos and sin by " + std::to_string(factor) + ", which " + r.own_type +
                               (norms_after_rope ? "'s RMS norms of q and k after RoPE cancel"
                                                 : "'s qk_norm (use_qk_norm) after RoPE cancels") +
                               ": normalize after posenc's rotation, or rotate with attention_factor 1 when "
                               "normalizing first");
    break;
  }
}

}  // namespace

// The family's per-layer lists (FamilyHooks::layers), the checks of the whole plan, each layer's plan, the
// warnings of the plan as a whole, and the family's last touches (FamilyHooks::finish).
void assemble_layers(Reading& r, const Plan& p) {
  r.force_rope.assign(static_cast<size_t>(r.m.layers), 0);
  if (r.m.hooks->layers)
    r.m.hooks->layers(r);  // cohere2_moe's dense prefix, molmo2_text's scaled layers, ...
  check_whole_head_apply(r, p);
  const Stacks stacks = layer_stacks(r);
  r.out.num_layers = stacks.encoder + stacks.decoder;
  const std::vector<std::optional<TopkIndexer>> indexers = topk_indexers(r.j, r.m, p.types, r.out.warnings);
  for (int64_t i = 0; i < r.out.num_layers; ++i) {
    LayerPlan l;
    l.layer = i;
    layer_attention(r, p, stacks, i, l);
    layer_position(r, p, i, indexers, l);
    r.out.layers.push_back(std::move(l));
  }
  warn_norms_after_rope(r);
  if (r.m.hooks->finish) r.m.hooks->finish(r);  // zaya's layer type names
}

// The keys no stage read whose names look positional (Obj::warn_unread), and a wrapper's own positional-
// looking keys that text_config lacks or contradicts (the text model reads text_config's).
void warn_unread_keys(Reading& r, const json& root, const Identity& id) {
  r.j.warn_unread(r.out.warnings, r.own_type);
  if (!id.wrapped) return;
  const json& tj = r.j.j;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& k = it.key();
    if (!looks_positional(k) || known_irrelevant_key(k)) continue;
    if (!tj.contains(k) || tj.at(k) != it.value())
      r.out.warnings.push_back("top-level key '" + k + "' is ignored: the text model reads text_config");
  }
}

}  // namespace posenc::detail
