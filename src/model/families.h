// src/model/families.h: the model_type table, one Family record per type: transformers 5.23's config class
// defaults and the rules of its modeling file, as data (see src/model/families.cc for the rows and the
// citations). Code that numbers cannot say lives in the family's hooks (src/model/hooks.h).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "posenc/absolute.h"
#include "posenc/model.h"

namespace posenc::detail {

// What a family's code does that the numbers of its row do not say, one bit each (Family::traits).
// Each names the row it is looked up on: "own" (the model's type) or "rules" (the family whose positional
// code it runs, Family::rules; the type itself for most rows).
enum FamilyTrait : uint64_t {
  // No softmax attention (Mamba's state-space layers): every layer is linear_attention. (rules)
  kAttentionFree = 1ull << 0,
  // Rotates by -p theta (RopeConfig::reversed): NanoChat's rotate_half returns [x2, -x1]
  // (modeling_nanochat.py apply_rotary_pos_emb); its weightless q / k RMS norms after RoPE commute with it.
  // (own)
  kReversedRotation = 1ull << 1,
  // Self-attention bidirectional on every layer (is_causal = False, create_bidirectional_mask), whatever
  // is_decoder says: ModernBERT, the RoPE embedding encoders, DistilBERT, SqueezeBERT, I-BERT, ALBERT,
  // MPNet, MobileBERT. (own)
  kBidirectional = 1ull << 2,
  // The mask is causal iff is_decoder: BERT's family, RoFormer, ESM. (rules)
  kCausalIffDecoder = 1ull << 3,
  // BERT's encoder family: learned positions (position_embedding_type picks other kinds). (rules)
  kBertFamily = 1ull << 4,
  // Position p reads row p + pad_token_id + 1 (create_position_ids_from_input_ids): RoBERTa's members.
  // (rules)
  kRobertaRows = 1ull << 5,
  // A fixed sin / cos table of base 10000 (GPT-J's and CodeGen's create_sinusoidal_positions over rotary_dim,
  // RoFormer's create_weight over the head): rope_theta and any rope dict are ignored. (rules)
  kFixedRotaryTable = 1ull << 6,
  // rope_parameters hold one dict per layer type only (no flat dict is read): MiMo-V2-Flash, Laguna,
  // Step 3.5, Cohere Compass, ZAYA, Dots 3 Note, UltraBERT. (rules)
  kRopePerLayerTypeOnly = 1ull << 7,
  // MLA rotating pairs (2j, 2j + 1) whatever rope_interleave says (their modular files drop it); a false one
  // is warned as ignored. (rules)
  kAlwaysPairs = 1ull << 8,
  // MLA whose layout does not read rope_interleave at all, silently (DeepSeek-V2, MiniCPM3, Hunyuan 4's
  // halves, Bailing's pairs). (rules)
  kRopeInterleaveUnread = 1ull << 9,
  // One learnable sink per head on every layer (gpt-oss, Flint, Granite SWA, Hunyuan 4). (rules)
  kSinks = 1ull << 10,
  // Sinks on the sliding layers only (MiMoV2FlashAttention.__init__). (rules)
  kSlidingSinks = 1ull << 11,
  // A set sliding_window masks the full_attention layers too (MiniMaxModel.forward). (rules)
  kWindowOnFullLayers = 1ull << 12,
  // One mask for every layer from sliding_window; layer_types is never read (Qwen3MoeModel.forward,
  // PhimoeModel.forward, Ministral3Model.forward). (rules)
  kOneMask = 1ull << 13,
  // The per-layer list is a read-only property: a saved one cannot be loaded (AttributeError). (rules)
  kDerivedLayerList = 1ull << 14,
  // full_attention layers are indexed_attention, rewritten before the legacy names' remap ("attention"
  // then fails): Glm5NextTextConfig.__post_init__, Qwen4ExpTextConfig.__post_init__. (rules)
  kIndexedFullAttention = 1ull << 15,
  // The last layer is forced to full_attention (Gemma4TextConfig.__post_init__). (rules)
  kLastLayerFull = 1ull << 16,
  // sliding_window = sw if use_sliding_window else None (configuration_qwen2.py). (rules)
  kSlidingWindowGate = 1ull << 17,
  // A sliding_window in the config is never applied (Qwen3OmniMoeThinkerTextAttention.__init__,
  // Qwen3OmniMoeThinkerTextModel.forward). (own)
  kWindowIgnored = 1ull << 18,
  // A symmetric window |q - k| <= sliding_window (ModernBERT's encoder): posenc's window is one more. (own)
  kSymmetricWindowPlusOne = 1ull << 19,
  // Bidirectional sliding layers keep |q - k| <= sliding_window, which must be > 0: posenc's window is one
  // more (EmbeddingGemma 2, OpenAI's privacy filter, UltraBERT). (own)
  kInclusiveBidirectionalWindow = 1ull << 20,
  // With use_bidirectional_attention the window becomes sliding_window // 2 + 1
  // (Gemma3TextConfig.__post_init__). (own)
  kHalvedBidirectionalWindow = 1ull << 21,
  // use_bidirectional_attention = true makes every layer bidirectional (EmbeddingGemma, Step 3.5). (own)
  kBidirectionalOption = 1ull << 22,
  // use_bidirectional_attention is "vision" or null (configuration_gemma4.py). (rules)
  kBidirectionalVision = 1ull << 23,
  // One sliding window mask for every layer; layer_types is ignored (OpenAIPrivacyFilterModel.forward).
  // (own)
  kAllSliding = 1ull << 24,
  // layers_block_type wins over layer_types (configuration_nemotron_h.py). (rules)
  kBlockTypeListFirst = 1ull << 25,
  // XGLM's sinusoidal table read at row p + pad_token_id + 1 (Kosmos-2's text decoders). (own)
  kSinusoidalRowsAfterPad = 1ull << 26,
  // max_position_embeddings only (no n_positions or max_seq_len alias): nomic_bert. (own)
  kCanonicalSizeKeys = 1ull << 27,
  // alibi = true replaces RoPE by ALiBi (Falcon). (rules)
  kAlibiKey = 1ull << 28,
  // The class's partial_rotary_factor; a top-level one is not read
  // (MiMoV2FlashRotaryEmbedding.compute_default_rope_parameters). (rules)
  kClassPrfOnly = 1ull << 29,
  // rotary_dim / head_dim as partial_rotary_factor where the config has none
  // (MiniMaxM2Config.convert_rope_params_to_dict). (rules)
  kRotaryDimPrf = 1ull << 30,
  // rope_scaling is not read: the class's own rope_scaling field shadows it (configuration_cohere2_moe.py).
  // (rules)
  kRopeScalingUnread = 1ull << 31,
  // Each layer type's dict carries its own partial_rotary_factor; the top-level one is not read. (rules)
  kPrfPerLayerType = 1ull << 32,
  // The config class folds rope_scaling into its per-type dicts (src/model/step3p5.cc). (rules)
  kRopeScalingFolded = 1ull << 33,
  // rope_parameters may hold an indexed_attention dict (src/model/dots3.cc). (rules)
  kIndexedRopeDict = 1ull << 34,
  // rope_parameters must be one dict per layer type, each with its own rope_theta (Gemma4TextConfig has no
  // convert_rope_params_to_dict; Gemma4TextRotaryEmbedding.__init__ reads rope_parameters[layer_type]).
  // (rules)
  kRopePerLayerType = 1ull << 35,
  // Llama 4's use_qk_norm (default true): weightless L2 norms of q and k after RoPE cancel a scaled
  // rotation's attention factor (Llama4TextAttention). (rules)
  kUseQkNorm = 1ull << 36,
  // RMS norms of q and k per head after RoPE, always (HunYuanDenseV1Attention.forward). (rules)
  kNormsAfterRope = 1ull << 37,
  // q / k and v heads of their own sizes (MLA-like heads: kimi_linear, glm5_next_text, mimo_v2_flash).
  // (rules)
  kOwnHeadDims = 1ull << 38,
  // Mistral's llama_4_scaling_beta query temperature on every layer (get_llama_4_attn_scale). (rules)
  kMinistralTemperature = 1ull << 39,
  // Llama 4's attn_temperature_tuning: a query temperature on its NoPE layers. (rules)
  kLlama4Temperature = 1ull << 40,
  // T5's encoder and decoder stacks of relative buckets (num_layers, num_decoder_layers). (rules)
  kT5Stacks = 1ull << 41,
  // A bucket table in every self-attention layer (UMT5Attention.forward, UMT5LayerSelfAttention).
  // (own)
  kBiasPerLayer = 1ull << 42,
  // A T5 decoder alone, causal iff is_decoder (Pix2StructTextLayerSelfAttention.__init__). (own)
  kDecoderOnly = 1ull << 43,
  // Its sliding_attention layers need sliding_window (create_sliding_window_causal_mask raises). (rules)
  kSlidingNeedsWindow = 1ull << 44,
  // A default rope init that rotates the whole head, applied to the whole head (modeling_hy_v4.py,
  // modeling_molmo2.py): a scaled type's partial rotation fails at the first forward. (own)
  kWholeHeadApply = 1ull << 45,
  // Phi-3's rope names: "su" (its early longrope) and "yarn" are read as longrope (Phi3Config). (rules)
  kPhi3RopeNames = 1ull << 46,
  // HunYuan-VL's xdrope: "dynamic" with NTK alpha, sections of the doubled frequencies
  // (configuration_hunyuan_vl.py convert_rope_params_to_dict). (own)
  kXdRope = 1ull << 47,
  // "dynamic" with alpha is a fixed NTK base, base * alpha^(d / (d - 2))
  // (HunYuanDenseV1RotaryEmbedding.compute_ntk_alpha_rope_parameters). (rules)
  kNtkAlpha = 1ull << 48,
  // The rotary module accepts the default rope type only (RecurrentGemmaRotaryEmbedding.__init__). (rules)
  kDefaultRopeOnly = 1ull << 49,
  // M-RoPE with h / w alternating and the default rope type only (Ernie4_5_VLMoeTextRotaryEmbedding).
  // (own)
  kAlternatingHwMrope = 1ull << 50,
  // Interleaved M-RoPE whatever mrope_interleaved says (apply_interleaved_mrope). (own and rules)
  kInterleavedMrope = 1ull << 51,
  // MLA's partial_rotary_factor = qk_rope / (qk_nope + qk_rope), the default init refused
  // (Mistral4Config.__post_init__). (rules)
  kMlaRopeFactor = 1ull << 52,
  // Phi-3.5-MoE's short_mscale / long_mscale attention factor of longrope (configuration_phimoe.py). (rules)
  kPhimoeMscale = 1ull << 53,
  // head_dim has no default its attention can run (None ** -0.5 raises). (rules)
  kHeadDimRequired = 1ull << 54,
  // head_dim sizes the rotary ladder, so it must be qk_rope_head_dim
  // (LongcatFlashRotaryEmbedding.compute_default_rope_parameters). (rules)
  kRotaryHeadDim = 1ull << 55,
  // scale_attn_by_inverse_layer_idx: layer i's scale divided by i + 1 (modeling_gpt2.py). (rules)
  kInverseLayerScale = 1ull << 56,
};

// The `scaling` a family's attention passes to its kernel (Family::scale_rule, Family::scale_default).
enum class ScaleRule : uint8_t {
  head_dim,                        // qk_head_dim ** -0.5 (a row with rules: the rules family's rule)
  query_pre_attn_scalar,           // query_pre_attn_scalar ** -0.5, scale_default when absent
  query_pre_attn_scalar_positive,  // the same, qk_head_dim when absent, which must be > 0
  attention_multiplier,            // attention_multiplier, scale_default when absent (0: head_dim ** -0.5)
  half_head,                       // (qk_head_dim / 2) ** -0.5
  one,                             // 1: no 1 / sqrt(d) (folded into the initialization, or q / k norms)
  qk_scale_factor,                 // head_dim ** -0.5 times qk_scale_factor (scale_default when absent)
  key_multiplier,                  // head_dim ** -0.5 times key_multiplier (1 when absent; finite, nonzero)
  scale_attn_weights,              // 1 when scale_attn_weights is false, else head_dim ** -0.5
};

// Which layers of a family rotate (Family::rope_layers).
enum class RopeLayers : uint8_t {
  all,                   // every attention layer with a rope dict
  sliding_or_no_window,  // iff sliding_window is None or the layer slides (Exaone4Attention.forward)
  sliding_with_window,   // iff the layer slides with a window (Cohere2Attention)
  sliding,               // iff the layer slides (AfmoeAttention.forward)
};

// The head sizes of a family's attention (Family::head_rule; src/model/per_layer.cc head_dims).
enum class HeadRule : uint8_t {
  standard,     // head_dim, else the class's, else hidden / heads
  mla,          // DeepSeek-V3's latent attention: qk_nope + qk_rope heads, v_head_dim (Family::mla)
  nope_mla,     // latent attention without RoPE: qk_rope_head_dim must be 0 (configuration_glm5_next.py)
  kimi_mla,     // qk_nope + qk_rope heads, nothing rotated (KimiLinearConfig.__post_init__)
  d_kv,         // attribute_map head_dim -> d_kv (T5)
  required,     // head_dim or attention_head_dim, no default (configuration_hunyuan_vl.py)
  given_over,   // hidden / heads, a given head_dim set over it (CohereCompassTextConfig.__post_init__)
  kv_channels,  // attribute_map head_dim -> kv_channels (JetMoeConfig)
  doubled,      // attention_head_dim, head_dim, else 2 * hidden // heads (ZambaConfig.__post_init__)
  fixed,        // d_model // n_heads, always (DbrxAttention.__init__)
  bottleneck,   // intra_bottleneck_size / heads (MobileBertConfig.__post_init__)
  nemotron,     // head_dim, 128 by default; attention_head_dim not read (NemotronHConfig)
};

// How a family fills its layer types when a config has no list (Family::layer_rule;
// src/model/layer_types.cc).
enum class LayerRule : uint8_t {
  full,                  // every layer full_attention
  indexed,               // every layer indexed_attention (DeepseekV32Config.__post_init__)
  linear,                // every layer linear_attention (mamba)
  hybrid,                // every layer hybrid (mamba and attention side by side)
  sliding_unless_every,  // full iff (i + 1) % period == 0, else sliding
  full_every_from_zero,  // full iff i % period == 0, else sliding
  linear_unless_every,   // full iff (i + 1) % period == 0, else linear_attention
  indexed_unless_every,  // indexed iff (i + 1) % period == 0, else linear_attention
  sliding_when_window,   // every layer sliding when sliding_window is set
  sliding_from_layer,    // sliding from max_window_layers on when sliding_window is set
  hook,                  // the family's hook (FamilyHooks::layer_types)
};

// The per_layer_config overrides a family's modeling code reads (src/model/per_layer.cc).
enum class PerLayerConfig : uint8_t {
  refused,          // none: refused by name
  head_dims,        // head_dim per layer; full layers take global_head_dim by default (Gemma 4)
  global_head_dim,  // written by the config class; the rotation takes the global head_dim (Step 3.5)
  mla_dims,         // qk_nope / qk_rope / v_head_dim per layer (Dots 3 Note, src/model/dots3.cc)
};

// A family's top-k indexer (src/model/indexer.cc; posenc/model.h TopkIndexer).
enum class IndexerKind : uint8_t {
  none,
  dsa_halves,         // DeepSeek-V3.2's: rope-first in halves on every layer
  dsa_pairs_shared,   // GLM-5's: pairs, layers sharing selections (indexer_types)
  dsa_flipped,        // Hunyuan 4's: halves on the head's last dims, a schedule of shared layers
  dsa_pairs_indexed,  // Dots 3 Note's: pairs, on its indexed_attention layers only
  block_topk,         // MiniMax-M3's block indexer on its minimax_m3_sparse layers
  qsa_block,          // Qwen4-Exp's QSA block indexer
  kpool,              // GLM-5-Next's k-pool indexer, without RoPE
};

// DeepSeek-V3's latent attention sizes a family's config class fills in (Family::mla).
struct MlaDims {
  int64_t rope = 0, nope = 0, v = 0;  // qk_rope_head_dim, qk_nope_head_dim, v_head_dim (v 0: hidden / heads)
};

struct Family {
  const char* model_type;
  PositionMethod method;  // rope, alibi, t5, learned
  double theta;           // class default_theta (rope_theta when the config omits it)
  int64_t max_pos;        // class default max_position_embeddings
  int64_t head_dim;       // class default head_dim; 0 = hidden_size / num_attention_heads
  double prf;             // class default partial_rotary_factor (kwargs.setdefault); 0 = none
  bool default_uses_prf;  // the family's compute_default_rope_parameters reads partial_rotary_factor
  RopeLayout layout;      // half = rotate_half; interleaved = pairs (2j, 2j + 1)
  uint64_t traits = 0;    // FamilyTrait bits
  // Text models whose positional code is another family's (their modular file imports its rotary module,
  // apply_rotary_pos_emb and attention), with class defaults of their own: that family's rules apply
  // (its model_type here), the plan reports the model's own type. nullptr: the type's own rules.
  const char* rules = nullptr;
  // The class default rope_parameters (JSON text) where it is not {rope_type: default, rope_theta: theta}
  // (gpt_oss's yarn, Gemma 4's per layer type, ...); nullptr otherwise.
  const char* rope_parameters = nullptr;

  // Set with the builders below (Family{...}.window(4096)...): zero or nullptr when a row does not say.
  const char* aliases = nullptr;  // other model_types read as this one, space-separated (flat wrappers, ...)
  const char* hidden_keys = nullptr;  // the keys of hidden_size, in order (nullptr: the common aliases)
  const char* layers_keys = nullptr;  // the keys of num_hidden_layers, in order (nullptr: the common aliases)
  const char* max_pos_key = nullptr;  // attribute_map max_position_embeddings -> this key, read first
  int64_t original_max_pos = 0;       // class default original_max_position_embeddings (always overrides)
  int64_t position_offset = 0;        // position p reads row p + offset of its learned / sinusoidal table
  SinusoidalFrequencies sinusoidal = SinusoidalFrequencies::half_dim_minus_one;  // sinusoidal tables' w_i
  int64_t sliding_window = 0;              // class default sliding_window (0: None)
  LayerRule layer_rule = LayerRule::full;  // the layer types of a config without a list
  int64_t layer_period = 0;                // LayerRule's period (its class default when layer_key is set)
  const char* layer_key = nullptr;         // the config key of the period (nullptr: fixed)
  int64_t max_window_layers = 0;           // sliding_from_layer: the class default of max_window_layers
  bool pattern_needs_number = false;       // a non-integer sliding_window_pattern needs layer_types
  bool use_sliding_window_gate = false;    // sliding_from_layer: only with use_sliding_window
  // The layer types a given list may hold, space-separated (nullptr: the common ones).
  const char* layer_types = nullptr;
  ScaleRule scale_rule = ScaleRule::head_dim;
  double scale_default = 0;  // ScaleRule's default value (see each rule)
  double softcap = 0;        // class default attn_logit_softcapping (0: none)
  int64_t chunk = 0;         // class default attention_chunk_size (0: none)
  RopeLayers rope_layers = RopeLayers::all;
  HeadRule head_rule = HeadRule::standard;
  MlaDims mla = {};        // HeadRule::mla: the config class's default sizes
  int64_t v_head_dim = 0;  // class default v_head_dim of a standard head (0: the head's)
  PerLayerConfig per_layer_config = PerLayerConfig::refused;
  int64_t global_head_dim = 0;  // PerLayerConfig::head_dims: full layers' head by default
  std::array<int64_t, 3> mrope_section = {0, 0, 0};  // the rotary module's sections when a config has none
  IndexerKind indexer = IndexerKind::none;
  int64_t index_heads = 0;     // class default index_n_heads
  int64_t decoder_layers = 0;  // class default num_decoder_layers (0: num_layers)
  // Keys of the family's configs that carry no positions although their names look positional, or that
  // the reader checks elsewhere (space-separated).
  const char* quiet_keys = nullptr;

  constexpr Family with(uint64_t t) const {
    Family f = *this;
    f.traits |= t;
    return f;
  }
  constexpr Family alias(const char* a) const {
    Family f = *this;
    f.aliases = a;
    return f;
  }
  constexpr Family size_keys(const char* hidden, const char* layers) const {
    Family f = *this;
    f.hidden_keys = hidden, f.layers_keys = layers;
    return f;
  }
  constexpr Family max_pos_from(const char* key) const {
    Family f = *this;
    f.max_pos_key = key;
    return f;
  }
  constexpr Family original(int64_t n) const {
    Family f = *this;
    f.original_max_pos = n;
    return f;
  }
  constexpr Family offset(int64_t n) const {
    Family f = *this;
    f.position_offset = n;
    return f;
  }
  constexpr Family frequencies(SinusoidalFrequencies w) const {
    Family f = *this;
    f.sinusoidal = w;
    return f;
  }
  constexpr Family window(int64_t w) const {
    Family f = *this;
    f.sliding_window = w;
    return f;
  }
  constexpr Family layers(LayerRule r, int64_t period = 0, const char* key = nullptr) const {
    Family f = *this;
    f.layer_rule = r, f.layer_period = period, f.layer_key = key;
    return f;
  }
  constexpr Family pattern_number() const {
    Family f = *this;
    f.pattern_needs_number = true;
    return f;
  }
  constexpr Family window_layers(int64_t n, bool gated) const {
    Family f = *this;
    f.layer_rule = LayerRule::sliding_from_layer, f.max_window_layers = n, f.use_sliding_window_gate = gated;
    return f;
  }
  constexpr Family allowed(const char* types) const {
    Family f = *this;
    f.layer_types = types;
    return f;
  }
  constexpr Family scale(ScaleRule r, double d = 0) const {
    Family f = *this;
    f.scale_rule = r, f.scale_default = d;
    return f;
  }
  constexpr Family soft(double cap) const {
    Family f = *this;
    f.softcap = cap;
    return f;
  }
  constexpr Family chunked(int64_t n) const {
    Family f = *this;
    f.chunk = n;
    return f;
  }
  constexpr Family rotating(RopeLayers r) const {
    Family f = *this;
    f.rope_layers = r;
    return f;
  }
  constexpr Family heads(HeadRule r) const {
    Family f = *this;
    f.head_rule = r;
    return f;
  }
  constexpr Family latent(int64_t rope, int64_t nope, int64_t v) const {
    Family f = *this;
    f.head_rule = HeadRule::mla, f.mla = {rope, nope, v};
    return f;
  }
  constexpr Family v_head(int64_t n) const {
    Family f = *this;
    f.v_head_dim = n;
    return f;
  }
  constexpr Family per_layer(PerLayerConfig p, int64_t global = 0) const {
    Family f = *this;
    f.per_layer_config = p, f.global_head_dim = global;
    return f;
  }
  constexpr Family sections(int64_t t, int64_t h, int64_t w) const {
    Family f = *this;
    f.mrope_section = {t, h, w};
    return f;
  }
  constexpr Family indexed(IndexerKind k, int64_t index_heads_default = 0) const {
    Family f = *this;
    f.indexer = k, f.index_heads = index_heads_default;
    return f;
  }
  constexpr Family decoder(int64_t n) const {
    Family f = *this;
    f.decoder_layers = n;
    return f;
  }
  constexpr Family quiet(const char* keys) const {
    Family f = *this;
    f.quiet_keys = keys;
    return f;
  }

  constexpr bool has(uint64_t trait) const { return (traits & trait) != 0; }
};

// Whether a space-separated list holds `name` as one of its words.
bool in_list(const char* list, std::string_view name);

// Whether the type's row has the trait (false for a type without a row).
bool has_trait(const std::string& model_type, FamilyTrait trait);

// nullptr when posenc has no entry for the type.
const Family* find_family(const std::string& model_type);
// The type a model_type is read as: the row whose aliases list it (gemma3 -> gemma3_text, a flat
// qwen3_vl_moe_text -> qwen3_vl, ...), else the type itself.
std::string canonical_type(const std::string& model_type);
// The family whose rules a model type follows: its row's (Family::rules), else its own.
std::string rules_type(const std::string& model_type);
// The config class's default sizes, for configs that omit them (save_pretrained keeps them, but
// hand-written and sparse configs, e.g. Gemma 3's, do not).
struct SizeDefaults {
  const char* model_type;  // the text config's model_type (qwen3_vl_moe_text differs from qwen3_vl_text)
  int64_t hidden, heads, layers;
  // The class derives head_dim (None -> hidden / heads) where its family's row has a fixed one
  // (Qwen3VLMoeTextConfig beside Qwen3-VL's 128).
  bool derived_head_dim = false;
};
const SizeDefaults* find_size_defaults(const std::string& model_type);
// The class default rope_parameters (JSON text) of a family whose default is not {rope_type: default,
// rope_theta: theta}, e.g. gpt_oss's yarn; nullptr otherwise. Used when a config has neither
// rope_parameters nor rope_scaling.
const char* default_rope_parameters(const std::string& model_type);
// Non-empty: why the type is refused (remote code, or a family posenc does not model yet).
std::string refusal_reason(const std::string& model_type);
// Keys known to carry no positional meaning although their names look positional.
bool known_irrelevant_key(const std::string& key);
bool looks_positional(const std::string& key);
// Non-empty (what transformers reads instead) for a key of model_type that transformers 5.23 never reads.
std::string ignored_by_transformers(const std::string& model_type, const std::string& key);
// BERT's encoder family (learned positions, bidirectional unless is_decoder); roberta_like: its
// members whose position p reads row p + pad_token_id + 1 (create_position_ids_from_input_ids).
bool bert_like(const std::string& model_type);
// Families without any softmax attention (Mamba's state-space layers): every layer is linear_attention.
bool attention_free(const std::string& model_type);
bool roberta_like(const std::string& model_type);
// Encoders whose mask is causal iff is_decoder (BERT's family, RoFormer, ESM).
bool causal_iff_decoder(const std::string& model_type);
// Families whose rotation turns by -p theta (RopeConfig::reversed): NanoChat.
bool reversed_rotation(const std::string& model_type);
// Encoders whose self-attention is bidirectional on every layer (ModernBERT, the RoPE embedding
// encoders, DistilBERT, SqueezeBERT).
bool always_bidirectional(const std::string& model_type);

}  // namespace posenc::detail
