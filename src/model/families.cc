// src/model/families.cc: the model_type table. Values are transformers 5.23.0's config class
// defaults (models/<type>/configuration_<type>.py: default_theta, max_position_embeddings,
// head_dim, kwargs.setdefault("partial_rotary_factor", ...)) and the layout of each family's
// apply_rotary_pos_emb (rotate_half = half; rotate_every_two / complex pairs / repeat_interleave =
// interleaved). Rows that need more than the numbers cite their lines.
#include "src/model/families.h"

#include <array>
#include <string_view>
#include <utility>

namespace posenc::detail {
namespace {
constexpr RopeLayout H = RopeLayout::half, I = RopeLayout::interleaved;
constexpr PositionMethod R = PositionMethod::rope;
// BERT's family: causal iff is_decoder; RoBERTa's members also read row p + pad_token_id + 1.
constexpr uint64_t kBert = kBertFamily | kCausalIffDecoder, kRoberta = kBert | kRobertaRows;
using F = Family;

// Class default rope_parameters of the families whose default is not {rope_type: default, rope_theta:
// theta} (Family::rope_parameters).
constexpr const char* kGptOssRope =
    R"({"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": false,
      "original_max_position_embeddings": 4096})";
constexpr const char* kMinistral3Rope =
    R"({"type": "yarn", "rope_theta": 1e6, "factor": 16.0, "original_max_position_embeddings": 16384,
      "beta_fast": 32.0, "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0,
      "llama_4_scaling_beta": 0.1})";
// ultrabert: configuration_ultrabert.py UltrabertConfig.__post_init__
constexpr const char* kUltrabertRope =
    R"({"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
      "full_attention": {"rope_type": "default", "rope_theta": 2.56e6}})";
// higgs_audio_v2: configuration_higgs_audio_v2.py HiggsAudioV2Config.__post_init__
constexpr const char* kHiggsAudioV2Rope =
    R"({"rope_type": "llama3", "rope_theta": 5e5, "factor": 32.0,
      "original_max_position_embeddings": 1024, "low_freq_factor": 0.125, "high_freq_factor": 0.5})";
// embedding_gemma2_text: configuration_embedding_gemma2.py EmbeddingGemma2TextConfig.__post_init__
constexpr const char* kEmbeddingGemma2TextRope =
    R"({"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
      "full_attention": {"rope_type": "default", "rope_theta": 1e6}})";
constexpr const char* kGemma4TextRope =
    R"({"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
      "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6}})";
constexpr const char* kApertusRope =
    R"({"rope_type": "llama3", "rope_theta": 1.2e7, "factor": 8.0, "original_max_position_embeddings": 8192,
      "low_freq_factor": 1.0, "high_freq_factor": 4.0})";
// mellum: configuration_mellum.py MellumConfig.__post_init__
constexpr const char* kMellumRope =
    R"({"full_attention": {"rope_type": "default", "rope_theta": 5e5},
      "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})";
// lfm3: configuration_lfm3.py Lfm3Config.__post_init__
constexpr const char* kLfm3Rope =
    R"({"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
      "full_attention": {"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.5}})";
// mistral4: Mistral4Config.__post_init__ (partial_rotary_factor: rope / (nope + rope))
constexpr const char* kMistral4Rope =
    R"({"type": "yarn", "rope_theta": 1e4, "factor": 128.0, "original_max_position_embeddings": 8192,
      "beta_fast": 32.0, "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0,
      "llama_4_scaling_beta": 0.1})";
// mimo_v2_flash: configuration_mimo_v2_flash.py MiMoV2FlashConfig.__post_init__
constexpr const char* kMimoV2FlashRope =
    R"({"full_attention": {"rope_type": "default", "rope_theta": 5e6,
      "partial_rotary_factor": 0.334},
      "sliding_attention": {"rope_type": "default", "rope_theta": 1e4,
      "partial_rotary_factor": 0.334}})";
// laguna: configuration_laguna.py LagunaConfig.__post_init__
constexpr const char* kLagunaRope =
    R"({"full_attention": {"rope_type": "default", "rope_theta": 5e5, "partial_rotary_factor": 0.5},
      "sliding_attention": {"rope_type": "default", "rope_theta": 1e4,
      "partial_rotary_factor": 1.0}})";
// muse_spark_text: configuration_muse_spark.py __post_init__ presets it (its hook reads it)
constexpr const char* kMuseSparkRope = R"({"rope_type": "default", "rope_theta": 5e5})";
constexpr const char* kCwmRope =
    R"({"rope_type": "llama3", "rope_theta": 1e6, "factor": 16.0, "original_max_position_embeddings": 8192,
      "low_freq_factor": 1.0, "high_freq_factor": 4.0})";

// clang-format off
constexpr Family kFamilies[] = {
  // type            method  theta    max_pos  head_dim prf   prf-aware layout [traits]
  {"llama",          R,      1e4,     2048,    0,       0,    false, H},
  // NanoChat: Llama's default RoPE with every angle negated (reversed_rotation below).
  {"nanochat",       R,      1e4,     2048,    0,       0,    false, H, kReversedRotation},
  {"internlm3",      R,      1e4,     32768,   128,     0,    false, H},  // auto/modeling_auto.py: LlamaModel
  F{"mistral",       R,      1e4,     131072,  0,       0,    false, H}.window(4096)
      .layers(LayerRule::sliding_when_window),
  F{"ministral",     R,      1e4,     131072,  0,       0,    false, H}.window(4096)
      .layers(LayerRule::sliding_when_window),
  F{"ministral3",    R,      1e6,     262144,  128,     0,    false, H, 0, nullptr, kMinistral3Rope}
      .layers(LayerRule::sliding_when_window).with(kOneMask | kMinistralTemperature),
  F{"mixtral",       R,      1e6,     131072,  0,       0,    false, H}
      .layers(LayerRule::sliding_when_window),
  F{"qwen2",         R,      1e4,     32768,   0,       0,    false, H}.window(4096).window_layers(28, true)
      .with(kSlidingWindowGate),
  // Qwen2MoeConfig.__post_init__: odd-numbered layers below max_window_layers slide
  F{"qwen2_moe",     R,      1e4,     32768,   0,       0,    false, H}.layers(LayerRule::hook)
      .with(kSlidingWindowGate),
  F{"qwen3",         R,      1e4,     32768,   128,     0,    false, H}.window(4096).window_layers(28, true)
      .with(kSlidingWindowGate),
  // Qwen3MoeConfig and Glm4MoeConfig have no head_dim field: hidden / heads
  // (modeling_qwen3_moe.py Qwen3MoeAttention.__init__, modeling_glm4_moe.py Glm4MoeAttention.__init__:
  // getattr(config, "head_dim", hidden // heads)).
  F{"qwen3_moe",     R,      1e4,     32768,   0,       0,    false, H}
      .layers(LayerRule::sliding_when_window).with(kOneMask | kSlidingWindowGate),
  F{"qwen2_vl",      R,      1e6,     32768,   0,       0,    false, H}.window_layers(80, true)
      .with(kSlidingWindowGate).alias("qwen2_vl_text"),
  F{"qwen2_5_vl",    R,      1e6,     32768,   0,       0,    false, H}.window_layers(80, true)
      .with(kSlidingWindowGate).alias("qwen2_5_vl_text"),
  F{"qwen3_vl",      R,      5e5,     128000,  128,     0,    false, H}.with(kInterleavedMrope)
      .alias("qwen3_vl_text qwen3_vl_moe_text"),
  F{"qwen3_next",    R,      1e4,     32768,   256,     0.25, true,  H}
      .layers(LayerRule::linear_unless_every, 4, "full_attention_interval"),
  F{"qwen3_5",       R,      1e4,     32768,   256,     0.25, true,  H}
      .layers(LayerRule::linear_unless_every, 4, "full_attention_interval").with(kInterleavedMrope)
      .alias("qwen3_5_text qwen3_5_moe_text"),
  // Qwen4-Exp (Qwen3.8-Flash-Next): qwen3_5's layout with the whole head rotated by default and a QSA block
  // indexer on every indexed_attention layer
  F{"qwen4_exp_text", R,      1e4,     32768,   256,     0,    true,  H}
      .layers(LayerRule::indexed_unless_every, 4, "full_attention_interval")
      .with(kIndexedFullAttention | kInterleavedMrope).allowed("indexed_attention linear_attention")
      .sections(11, 11, 10).indexed(IndexerKind::qsa_block),
  {"phi",            R,      1e4,     2048,    0,       0.5,  true,  H},
  F{"phi3",          R,      1e4,     4096,    0,       1.0,  true,  H}.original(4096)
      .layers(LayerRule::sliding_when_window).with(kPhi3RopeNames),
  F{"deepseek_v2",   R,      1e4,     2048,    0,       0,    false, I}.latent(64, 128, 128)
      .with(kRopeInterleaveUnread),
  F{"deepseek_v3",   R,      1e4,     4096,    0,       0,    false, I}.latent(64, 128, 128),
  F{"minicpm3",      R,      1e4,     32768,   0,       0,    false, H}.latent(32, 64, 0)
      .with(kRopeInterleaveUnread),
  {"gemma",          R,      1e4,     8192,    256,     0,    false, H},
  // configuration_gemma2.py: sliding iff (i + 1) % 2; scale query_pre_attn_scalar^-0.5, softcap 50
  F{"gemma2",        R,      1e4,     8192,    256,     0,    false, H}.window(4096)
      .layers(LayerRule::sliding_unless_every, 2).scale(ScaleRule::query_pre_attn_scalar, 256).soft(50),
  // configuration_gemma3.py: sliding_window_pattern (6); Gemma 3 stores attn_logit_softcapping but never
  // passes it to attention (modeling_gemma3.py)
  F{"gemma3_text",   R,      1e6,     131072,  256,     0,    false, H}.window(4096)
      .layers(LayerRule::sliding_unless_every, 6, "sliding_window_pattern")
      .scale(ScaleRule::query_pre_attn_scalar, 256).with(kHalvedBidirectionalWindow | kBidirectionalOption)
      .alias("gemma3"),
  {"gptj",           R,      1e4,     2048,    0,       0,    false, I, kFixedRotaryTable},
  // GPT-J's table and rotation
  {"codegen",        R,      1e4,     2048,    0,       0,    false, I, kFixedRotaryTable},
  {"gpt_neox",       R,      1e4,     2048,    0,       0.25, true,  H},
  {"gpt_neox_japanese", R,   1e4,     2048,    0,       1.0,  true,  H},  // rotary_pct 1.0
  F{"falcon",        R,      1e4,     2048,    0,       0,    false, H}.with(kAlibiKey),
  {"stablelm",       R,      1e4,     4096,    0,       0.25, true,  H},
  {"cohere",         R,      5e5,     8192,    0,       0,    false, I},
  F{"cohere2",       R,      1e4,     8192,    0,       0,    false, I}.window(4096)
      .layers(LayerRule::sliding_unless_every, 4, "sliding_window_pattern").pattern_number()
      .rotating(RopeLayers::sliding_with_window),
  F{"cohere2_moe",   R,      1e4,     8192,    128,     0,    false, I}.window(4096).layers(LayerRule::hook)
      .rotating(RopeLayers::sliding_with_window).with(kRopeScalingUnread),  // RoPE: sliding + dense prefix
  // rope_parameters per layer type only (null: no RoPE), Qwen3-VL's interleaved M-RoPE in halves
  F{"cohere_compass_text", R, 1e4,     8192,    0,       0,    false, H, kRopePerLayerTypeOnly}.window(4096)
      .heads(HeadRule::given_over).with(kPrfPerLayerType | kInterleavedMrope).sections(24, 20, 20)
      .alias("cohere_compass"),
  // rope per layer type; v head 128
  F{"mimo_v2_flash", R,      1e4,     131072,  192,     0.334, true, H, kRopePerLayerTypeOnly, nullptr,
   kMimoV2FlashRope}.window(129).layers(LayerRule::hook).with(kClassPrfOnly | kOwnHeadDims | kSlidingSinks)
      .v_head(128),
  {"glm",            R,      1e4,     131072,  128,     0.5,  true,  I},
  {"glm4",           R,      1e4,     131072,  128,     0.5,  true,  I},
  {"glm4_moe",       R,      1e4,     131072,  0,       0.5,  true,  H},  // glm4_moe apply_rotary_pos_emb
  F{"starcoder2",    R,      1e4,     4096,    0,       0,    false, H}
      .layers(LayerRule::sliding_when_window),
  {"olmo2",          R,      1e4,     2048,    0,       0,    false, H},
  F{"olmo3",         R,      5e5,     2048,    0,       0,    false, H}.window(4096)
      .layers(LayerRule::sliding_unless_every, 4),
  F{"smollm3",       R,      2e6,     32768,   0,       0,    false, H}.layers(LayerRule::hook),
  F{"exaone4",       R,      1e4,     2048,    0,       0,    false, H}.window(4096)
      .layers(LayerRule::sliding_unless_every, 4, "sliding_window_pattern").pattern_number()
      .rotating(RopeLayers::sliding_or_no_window).alias("exaone4_5_text"),
  // modeling_granite.py: self.scaling = config.attention_multiplier
  F{"granite",       R,      1e4,     2048,    0,       0,    false, H}
      .scale(ScaleRule::attention_multiplier, 1.0),
  {"nemotron",       R,      1e4,     4096,    0,       0.5,  true,  H},
  {"persimmon",      R,      1e4,     16384,   0,       0.5,  true,  H},
  F{"gpt_oss",       R,      1.5e5,   131072,  64,      0,    false, H, 0, nullptr, kGptOssRope}.window(128)
      .layers(LayerRule::sliding_unless_every, 2).with(kSinks),
  F{"llama4_text",   R,      5e5,     131072,  128,     0,    false, I}.chunked(8192)
      .layers(LayerRule::hook).with(kLlama4Temperature | kUseQkNorm).alias("llama4"),
  F{"mllama_text_model", R,   1e4,     131072,  0,       0,    false, H}.alias("mllama"),
  F{"lfm2",          R,      1e6,     128000,  0,       0,    false, H}.layers(LayerRule::hook)
      .alias("lfm2_vl"),
  // global layers: head 512 (per_layer_config); modeling_gemma4.py Gemma4TextAttention: scale 1, q/k RMS
  // norms instead; configuration_gemma4.py: sliding_window_pattern = 6, fixed
  F{"gemma4_text",   R,      1e4,     131072,  256,     0,    false, H, 0, nullptr, kGemma4TextRope}
      .window(512).layers(LayerRule::sliding_unless_every, 6).scale(ScaleRule::one)
      .with(kLastLayerFull | kRopePerLayerType | kBidirectionalVision)
      .per_layer(PerLayerConfig::head_dims, 512).alias("gemma4"),
  // Llama-like families added with python/tests/model/test_model_families.py (class defaults checked there).
  {"arcee",          R,      1e4,     4096,    0,       0,    false, H},  // head_dim None -> hidden / heads
  // repeat_interleave cos, pairs (2j, 2j + 1)
  {"helium",         R,      1e5,     4096,    128,     0,    false, I},
  {"olmo",           R,      1e4,     2048,    0,       0,    false, H},
  {"olmoe",          R,      1e4,     4096,    0,       0,    false, H},
  {"flex_olmo",      R,      5e5,     4096,    0,       0,    false, H},
  F{"granitemoe",    R,      1e4,     2048,    0,       0,    false, H}
      .scale(ScaleRule::attention_multiplier, 1.0),
  F{"granitemoeshared", R,    1e4,     2048,    0,       0,    false, H}
      .scale(ScaleRule::attention_multiplier, 1.0),
  {"ernie4_5",       R,      5e5,     131072,  128,     0,    false, I},  // as helium
  {"ernie4_5_moe",   R,      5e5,     131072,  0,       0,    false, I},
  {"seed_oss",       R,      1e4,     524288,  128,     0,    false, H},
  {"bitnet",         R,      5e5,     2048,    0,       0,    false, H},
  {"solar_open",     R,      1e6,     131072,  128,     0,    false, H},
  // HyperCLOVAXConfig.__post_init__: attention_multiplier None -> head_dim ** -0.5
  F{"hyperclovax",   R,      1e4,     2048,    0,       0,    false, H}
      .scale(ScaleRule::attention_multiplier, 0),
  // llama3 by default (below)
  {"apertus",        R,      1.2e7,   65536,   0,       0,    false, H, 0, nullptr, kApertusRope},
  {"aria_text",      R,      1e4,     2048,    0,     0,    false, H},
  {"jais2",          R,      1e4,     8192,    0,     0,    false, H},
  // rotary_dim -> prf
  F{"minimax_m2",    R,      5e6,     196608,  128,     0,    true,  H}.with(kRotaryDimPrf),
  // minimax_m2 without the rotary_dim conversion, with a block top-k indexer on minimax_m3_sparse layers
  F{"minimax_m3_vl_text", R,  5e6,     524288,  128,     0,    true,  H}.layers(LayerRule::hook)
      .allowed("full_attention minimax_m3_sparse").indexed(IndexerKind::block_topk)
      .quiet("sparse_attention_config").alias("minimax_m3_vl"),
  F{"phimoe",        R,      1e6,     131072,  0,       0,    false, H}
      .layers(LayerRule::sliding_when_window).with(kOneMask | kPhimoeMscale),
  F{"vaultgemma",    R,      1e4,     8192,    256,     0,    false, H}.window(4096)
      .layers(LayerRule::sliding_unless_every, 2).scale(ScaleRule::query_pre_attn_scalar, 256).soft(50),
  // llama3 by default (below)
  // configuration_cwm.py CwmConfig.__post_init__: full on layers 0, 4, 8, ...
  F{"cwm",           R,      1e6,     131072,  128,     0,    false, H, 0, nullptr, kCwmRope}.window(8192)
      .layers(LayerRule::full_every_from_zero, 4),
  F{"exaone_moe",    R,      1e4,     2048,    0,       0,    false, H}.window(4096)
      .layers(LayerRule::sliding_unless_every, 4, "sliding_window_pattern").pattern_number()
      .rotating(RopeLayers::sliding_or_no_window),  // RoPE as exaone4
  // RoPE as exaone4
  // configuration_kolibri1.py: full iff (i + 1) % 5 == 0
  F{"kolibri1",      R,      1e4,     262144,  128,     0,    false, H}.window(513)
      .layers(LayerRule::sliding_unless_every, 5).rotating(RopeLayers::sliding_or_no_window),
  F{"flint",         R,      1e4,     262144,  128,     0,    false, H}.window(513).layers(LayerRule::hook)
      .rotating(RopeLayers::sliding_with_window).with(kSinks),  // RoPE on sliding layers only
  // RoPE on sliding layers only
  // configuration_afmoe.py AfmoeConfig.__post_init__: global_attn_every_n_layers (4)
  F{"afmoe",         R,      1e4,     16384,   128,     0,    false, H}.window(1024)
      .layers(LayerRule::sliding_unless_every, 4, "global_attn_every_n_layers").rotating(RopeLayers::sliding),
  // RoPE iff layer_rope_theta[i] != 0 (by default the sliding layers), whole head, q / k norms before it
  F{"muse_glimmer_text", R,   1e4,     131072,  128,     0,    false, H}.window(2048).layers(LayerRule::hook)
      .scale(ScaleRule::qk_scale_factor, 3.87).with(kSlidingNeedsWindow).alias("muse_glimmer"),
  // runs muse_glimmer_text's positional code: modular_muse_spark.py: MuseSparkTextConfig, its attention and
  // model subclass Muse Glimmer's
  // rope_parameters preset 5e5
  F{"muse_spark_text", R,     1e4,     1048576, 64,      0,    false, H, 0, "muse_glimmer_text",
    kMuseSparkRope}
      .scale(ScaleRule::qk_scale_factor, 5.4730064863875).alias("muse_spark"),
  // configuration_granite_docling.py GraniteDoclingTextConfig: attention_multiplier 0.015625 by default
  F{"granite_docling_text", R, 1e4,    32768,   0,       0,    false, H}
      .scale(ScaleRule::attention_multiplier, 0.015625),
  // Llama-like families checked against transformers 5.23 by python/tests/model/test_model_families.py.
  {"iquestcoder",    R,      1e4,     131072,  128,     0,    false, H},  // auto/modeling_auto.py: LlamaModel
  {"emu3_text_model", R,     1e6,     9216,    0,       0,    false, H},
  // per-head q/k LayerNorm before RoPE
  {"chameleon",      R,      1e4,     4096,    0,       0,    false, H},
  {"hy_v3",          R,      11158840, 131072, 128,     0,    false, H},
  // Dots1Config.__post_init__: sliding from max_window_layers (62), no use_sliding_window gate
  F{"dots1",         R,      1e4,     2048,    0,       0,    false, H}.window(4096)
      .window_layers(62, false),
  // rope_parameters per layer type
  F{"mellum",        R,      1e4,     131072,  128,     0,    false, H, 0, nullptr, kMellumRope}
      .window(1024),
  // conv / sliding / full (proportional)
  F{"lfm3",          R,      1e6,     128000,  128,     0,    false, H, 0, nullptr, kLfm3Rope}.window(256)
      .layers(LayerRule::hook),
  // MLA as deepseek_v3
  F{"youtu",         R,      1e4,     131072,  0,       0,    false, I}.latent(64, 128, 128),
  // MLA as deepseek_v3
  F{"axk1",          R,      1e4,     32768,   0,       0,    false, I}.latent(64, 128, 128),
  // MLA as deepseek_v3 (nope 192, v 256)
  F{"glm4_moe_lite", R,      1e4,     202752,  0,       0,    false, I}.latent(64, 192, 256),
  // MLA; yarn + llama_4_scaling_beta
  F{"mistral4",      R,      1e4,     1048576, 0,       0,    false, I, 0, nullptr, kMistral4Rope}
      .latent(64, 64, 128).with(kMinistralTemperature | kMlaRopeFactor),
  // DeepSeek-V3's MLA with DeepSeek sparse attention's top-k indexer (model.h TopkIndexer).
  F{"deepseek_v32",  R,      1e4,     163840,  0,       0,    false, I, kAlwaysPairs}.latent(64, 128, 128)
      .layers(LayerRule::indexed).allowed("indexed_attention").indexed(IndexerKind::dsa_halves, 64),
  {"deepseek_v4",    R,      1e4,     1048576, 512,     0.125, true, I},  // src/model/deepseek_v4.cc
  // runs deepseek_v32's positional code: modular_axk2.py: DeepSeek-V3.2's rotary module, indexer and rotation
  // (a fused q / gate projection)
  // deepseek_v32's rules
  F{"axk2",          R,      1e4,     131072,  0,       0,    false, I, 0, "deepseek_v32"}
      .latent(32, 64, 64).indexed(IndexerKind::dsa_halves, 16),
  // rope_parameters per layer type, as given (configuration_laguna.py: no conversion); per-layer head counts
  F{"laguna",        R,      5e5,     131072,  128,     0,    true,  H, kRopePerLayerTypeOnly, nullptr,
   kLagunaRope}.with(kPrfPerLayerType).quiet("num_attention_heads_per_layer"),
  // rope_parameters per layer type built from per-layer rope_theta / partial_rotary_factors
  // (src/model/step3p5.cc)
  F{"step3p5",       R,      1e4,     128000,  128,     0,    true,  H, kRopePerLayerTypeOnly}
      .with(kPrfPerLayerType | kRopeScalingFolded | kBidirectionalOption)
      .scale(ScaleRule::query_pre_attn_scalar_positive).per_layer(PerLayerConfig::global_head_dim)
      .quiet("num_sliding_attention_heads attention_other_setting"),
  // GLM-5: nope 192, v 256
  F{"glm_moe_dsa",   R,      1e4,     202752,  0,       0,    false, I, kAlwaysPairs}.latent(64, 192, 256)
      .layers(LayerRule::indexed).allowed("indexed_attention").indexed(IndexerKind::dsa_pairs_shared, 32),
  // Hunyuan 4: DeepSeek-V3.2's MLA and indexer in halves (the indexer's RoPE on its head's last dims), a sink
  // per head, indexer_types sharing
  F{"hy_v4",         R,      1e4,     262144,  0,       0,    false, H}.latent(64, 192, 256)
      .layers(LayerRule::indexed).allowed("indexed_attention").indexed(IndexerKind::dsa_flipped, 16)
      .with(kRopeInterleaveUnread | kSinks | kWholeHeadApply),
  // Dots 3 Note: MLA with dims per layer type (sliding: nope 192, windows of 512, base 5e4; indexed: nope
  // 128, base 8e7, GLM-5's indexer), interleaved (src/model/dots3.cc; configuration_dots3_note.py
  // Dots3NoteTextConfig)
  F{"dots3_note_text", R,     8e7,     524288,  0,       0,    true,  I, kRopePerLayerTypeOnly}
      .latent(64, 128, 128).allowed("full_attention sliding_attention indexed_attention")
      .with(kIndexedRopeDict).per_layer(PerLayerConfig::mla_dims).indexed(IndexerKind::dsa_pairs_indexed, 64)
      .alias("dots3_note"),
  // Two MLA sublayers per decoder layer (attention layers 2i and 2i + 1): V3's rotation.
  F{"longcat_flash", R,      1e4,     131072,  0,       0,    false, I, kAlwaysPairs}.latent(64, 128, 128)
      .with(kRotaryHeadDim),
  // head_dim = kv_channels
  F{"jetmoe",        R,      1e4,     4096,    0,       0,    false, H}.heads(HeadRule::kv_channels),
  // base: attn_config.rope_theta
  F{"dbrx",          R,      1e4,     2048,    0,       0,    false, H}.heads(HeadRule::fixed),
  // RMS norms on q and k after RoPE; dynamic with alpha = a fixed NTK base (modeling_hunyuan_v1_dense.py).
  F{"hunyuan_v1_dense", R,    1e4,     2048,    0,       0,    false, H}
      .with(kNtkAlpha | kNormsAfterRope | kHeadDimRequired),
  F{"hunyuan_v1_moe", R,      1e4,     2048,    0,       0,    false, H}
      .with(kNtkAlpha | kNormsAfterRope | kHeadDimRequired),
  // HunYuan-VL's text model (HunyuanOCR): hunyuan_v1_dense's rules, "xdrope" = dynamic, multi-axis positions
  // runs hunyuan_v1_dense's positional code: modeling_hunyuan_vl.py: HunYuan dense's NTK-alpha rotary module
  // and attention with multi-axis positions
  F{"hunyuan_vl_text", R,     1e4,     2048,    0,       0,    false, H, 0, "hunyuan_v1_dense"}
      .heads(HeadRule::required).with(kXdRope).alias("hunyuan_vl"),
  // Per-layer bases (layer_rope_theta, 0 = NoPE), a sink per head, windows of 128 keys.
  // configuration_granite_swa.py GraniteSWAConfig.__post_init__: full on layers 0, 4, 8, ...;
  // modeling_granite_swa.py GraniteSWAAttention.__init__: a sink per head; self.scaling =
  // config.attention_multiplier
  F{"granite_swa",   R,      1e4,     8192,    0,       0,    false, H}.window(128)
      .layers(LayerRule::full_every_from_zero, 4).scale(ScaleRule::attention_multiplier, 1.0).with(kSinks),
  F{"granitemoe_swa", R,      1e4,     2048,    0,       0,    false, H}.window(128)
      .layers(LayerRule::full_every_from_zero, 4).scale(ScaleRule::attention_multiplier, 1.0).with(kSinks),
  // Hybrids: softmax attention on some layers, state-space / linear attention / recurrence on the others.
  F{"recurrent_gemma", R,     1e4,     0,       0,       0.5,  true,  H}.layers(LayerRule::hook)
      .with(kDerivedLayerList | kDefaultRopeOnly),  // no max_position_embeddings
  F{"minimax",       R,      1e6,     131072,  0,       0,    false, H}.layers(LayerRule::hook)
      .allowed("full_attention linear_attention").with(kWindowOnFullLayers),
  F{"olmo_hybrid",   R,      1e4,     65536,   0,       0,    false, H}.layers(LayerRule::hook)
      .allowed("full_attention linear_attention"),  // rope_theta null: no RoPE
  F{"lfm2_moe",      R,      1e6,     128000,  0,       0,    false, H}.layers(LayerRule::hook)
      .allowed("full_attention conv"),
  // MLA as deepseek_v3 + linear layers
  // configuration_bailing_hybrid.py BailingHybridConfig.__post_init__: full every layer_group_size;
  // attribute_map max_position_embeddings -> model_max_length
  F{"bailing_hybrid", R,      6e6,     262144,  0,       0,    false, I, kRopeInterleaveUnread}
      .latent(64, 128, 128).layers(LayerRule::linear_unless_every, 6, "layer_group_size")
      .allowed("full_attention linear_attention").max_pos_from("model_max_length"),
  // MLA without RoPE: qk heads of qk_nope_head_dim + qk_rope_head_dim, nothing rotated
  // (modeling_kimi_linear.py KimiLinearMLAAttention: "MLA ... with NoPE").
  F{"kimi_linear",   PositionMethod::none, 0, 1048576, 0, 0, false, H}.heads(HeadRule::kimi_mla)
      .layers(LayerRule::hook).allowed("full_attention linear_attention").max_pos_from("model_max_length")
      .with(kOwnHeadDims),
  // GLM-5-Next (GLM-5.3-Flash): NoPE MLA on its indexed_attention layers (qk_rope_head_dim must be 0, a
  // k-pool indexer without RoPE), KDA linear attention elsewhere
  // (modeling_glm5_next.py: "Key change using NoPE")
  F{"glm5_next_text", PositionMethod::none, 0, 1048576, 0, 0, false, H}.heads(HeadRule::nope_mla)
      .layers(LayerRule::hook).allowed("indexed_attention linear_attention")
      .with(kIndexedFullAttention | kOwnHeadDims).indexed(IndexerKind::kpool).alias("glm5_next"),
  // ZAYA: rope_parameters per layer type (hybrid 5e6, hybrid_sliding 1e4, half of the head), CCA convolutions
  // and a norm with a learned key temperature before RoPE (the caller's), src/model/zaya.cc
  {"zaya",           R,      1e4,     131072,  128,     0,    true,  H, kRopePerLayerTypeOnly},
  // Molmo 2: the rope dict on rope_scaling_layers (all by default), plain RoPE of the same base elsewhere
  F{"molmo2_text",   R,      1e4,     36864,   128,     0,    false, H}.with(kWholeHeadApply),
  // Text models with another family's positional code (Family::rules); their own
  // class defaults. M-RoPE sections when a config has none: src/model/rope_dict.cc.
  // runs glm4's positional code: modeling_glm4v.py: rotate_half_llm (pairs), partial rotary
  // prf from rope_parameters, 1.0
  F{"glm4v_text",    R,      1e4,     32768,   0,       0,    true,  I, 0, "glm4"}.sections(8, 12, 12)
      .alias("glm4v"),
  // runs glm4's positional code: modeling_glm_ocr.py: as glm4v
  F{"glm_ocr_text",  R,      1e4,     131072,  0,       0,    true,  I, 0, "glm4"}.sections(8, 12, 12)
      .alias("glm_ocr"),
  // runs glm4_moe's positional code: modeling_glm4v_moe.py: rotate_half, prf 0.5 by default
  F{"glm4v_moe_text", R,      1e4,     65536,   0,       0.5,  true,  H, 0, "glm4_moe"}.sections(8, 12, 12)
      .alias("glm4v_moe"),
  // runs qwen2_5_vl's positional code: modeling_qwen2_5_omni.py: Qwen2.5-VL's thinker text model
  F{"qwen2_5_omni_text", R,   1e6,     32768,   0,       0,    false, H, 0, "qwen2_5_vl"}
      .sections(16, 24, 24),
  // runs qwen3_vl's positional code: modeling_qwen3_omni_moe.py: interleaved M-RoPE, no window
  // head_dim: hidden / heads
  F{"qwen3_omni_moe_text", R, 1e6,     32768,   0,       0,    false, H, 0, "qwen3_vl"}.sections(24, 20, 20)
      .with(kWindowIgnored),
  // Qwen3-Omni's talker (its own class defaults: base 1e4), the thinker's rotary module and attention
  // (modeling_qwen3_omni_moe.py Qwen3OmniMoeTalkerRotaryEmbedding, Qwen3OmniMoeTalkerDecoderLayer)
  // runs qwen3_vl's positional code: modeling_qwen3_omni_moe.py: the thinker's rotary module
  F{"qwen3_omni_moe_talker_text", R, 1e4, 32768, 0,     0,    false, H, 0, "qwen3_vl"}.sections(24, 20, 20),
  // GLM-Image's text model: Glm4vTextConfig's defaults, glm4v_moe's rotary module and attention
  // (modeling_glm_image.py GlmImageTextRotaryEmbedding, apply_rotary_pos_emb, GlmImageTextAttention: prf from
  // rope_parameters, 1.0 when absent)
  // runs glm4_moe's positional code: modeling_glm_image.py: glm4v_moe's rotary and attention
  F{"glm_image_text", R,      1e4,     131072,  0,       0,    true,  H, 0, "glm4_moe"}.sections(8, 12, 12),
  // Speech LLM backbones with Llama's rotary module, rotation and attention: CSM's (modeling_csm.py
  // CsmRotaryEmbedding, apply_rotary_pos_emb; its backbone model sums the codebooks' embeddings per position)
  // and Higgs Audio v2's (modeling_higgs_audio_v2.py HiggsAudioV2RotaryEmbedding, apply_rotary_pos_emb;
  // llama3 scaling by default)
  // runs llama's positional code: modeling_csm.py: Llama's rotary module and attention
  {"csm",            R,      5e5,     2048,    0,       0,    false, H, 0, "llama"},
  // runs llama's positional code: modeling_higgs_audio_v2.py: Llama's (llama3 by default)
  {"higgs_audio_v2", R,      1e4,     2048,    128,     0,    false, H, 0, "llama", kHiggsAudioV2Rope},
  // Voxtral Realtime's text model: Mistral's attention with sliding_window on every layer
  // (modeling_voxtral_realtime.py VoxtralRealtimeTextAttention, VoxtralRealtimeTextModel.forward)
  // runs mistral's positional code: modeling_voxtral_realtime.py: Mistral's, window on all
  {"voxtral_realtime_text", R, 1e4,   131072,  0,       0,    false, H, 0, "mistral"},
  // runs llama's positional code: modeling_paddleocr_vl.py: rotate_half, M-RoPE sections
  F{"paddleocr_vl_text", R,   5e5,     131072,  128,     0,    false, H, 0, "llama"}.sections(16, 24, 24)
      .alias("paddleocr_vl"),
  // runs llama's positional code: modeling_cosmos3_edge.py: Llama + Qwen3-VL's rotary module
  F{"cosmos3_edge_text", R,   1e8,     131072,  128,     0,    false, H, 0, "llama"}.sections(24, 20, 20)
      .with(kInterleavedMrope).alias("cosmos3_edge"),
  // runs llama's positional code: modeling_deepseek_ocr2.py: plain multi-head attention
  // head_dim = hidden / heads
  {"deepseek_ocr2_text", R,  1e4,     2048,    0,       0,    false, H, 0, "llama"},
  // runs granite's positional code: modeling_granite4_vision.py: scaling = attention_multiplier
  F{"granite4_vision_text", R, 1e4,    2048,    0,       0,    false, H, 0, "granite"}
      .alias("granite4_vision"),
  // runs phi3's positional code: modeling_phi4_multimodal.py: Phi-3's attention and longrope
  {"phi4_multimodal", R,     1e4,     131072,  0,       1.0,  true,  H, 0, "phi3"},
  // runs gemma4_text's positional code: modeling_gemma4_unified.py: Gemma4TextAttention
  // global layers: head 512
  F{"gemma4_unified_text", R, 1e4,     262144,  256,     0,    false, H, 0, "gemma4_text"}.window(1024)
      .alias("gemma4_unified"),
  // runs gemma3_text's positional code: modeling_gemma3n.py: Gemma 3's bases and rope dicts
  // scale 1, full every 5th layer
  // configuration_gemma3n.py Gemma3nTextConfig.__post_init__: full iff (i + 1) % 5 == 0; modeling_gemma3n.py
  // Gemma3nTextAttention.__init__: scaling 1.0 with q/k RMS norms, no query_pre_attn_scalar
  F{"gemma3n_text",  R,      1e6,     32768,   256,     0,    false, H, 0, "gemma3_text"}.window(512)
      .layers(LayerRule::sliding_unless_every, 5).scale(ScaleRule::one).quiet("num_kv_shared_layers")
      .alias("gemma3n"),
  // runs ernie4_5_moe's positional code: modeling_ernie4_5_vl_moe.py: pairs, M-RoPE h / w alternating
  // mrope_alternating_hw
  F{"ernie4_5_vl_moe_text", R, 5e5,    131072,  0,       0,    false, I, 0, "ernie4_5_moe"}
      .sections(22, 22, 20).with(kAlternatingHwMrope).alias("ernie4_5_vl_moe"),
  // ModernBERT's decoder: global / local bases, windows of local_attention / 2, causal.
  F{"modernbert-decoder", R,  1.6e5,   8192,    0,       0,    false, H}
      .layers(LayerRule::full_every_from_zero, 3, "global_attn_every_n_layers"),
  // modernbert: modernbert-decoder's rules, both ways
  // runs modernbert-decoder's positional code: modeling_modernbert.py: the encoder of modernbert-decoder's
  // bases, layer pattern and rope dicts (configuration_modernbert.py ModernBertConfig.__post_init__,
  // convert_rope_params_to_dict), bidirectional, a symmetric window (layer_types.cc)
  F{"modernbert",    R,      1.6e5,   8192,    0,       0,    false, H, kBidirectional, "modernbert-decoder"}
      .with(kSymmetricWindowPlusOne),
  // Bidirectional encoders with another family's rotation (always_bidirectional; windows |q - k| <= w,
  // posenc's w + 1): EmbeddingGemma 2 (gemma4_text's per-type dicts and per-layer head dims,
  // modeling_embedding_gemma2.py EmbeddingGemma2RotaryEmbedding, EmbeddingGemma2Attention.__init__), OpenAI's
  // privacy filter (gpt_oss's yarn and sinks, pairs (2j, 2j + 1): modeling_openai_privacy_filter.py
  // apply_rotary_pos_emb, _apply_rotary_emb, eager_attention_forward, OpenAIPrivacyFilterAttention.__init__).
  // runs gemma4_text's positional code: modeling_embedding_gemma2.py: Gemma 4's, bidirectional
  F{"embedding_gemma2_text", R, 1e4,   262144,  256,     0,    false, H, kBidirectional, "gemma4_text",
   kEmbeddingGemma2TextRope}.with(kInclusiveBidirectionalWindow),
  // runs gpt_oss's positional code: modeling_openai_privacy_filter.py: gpt-oss's, bidirectional
  F{"openai_privacy_filter", R, 1.5e5, 131072,  64,      0,    false, I, kBidirectional, "gpt_oss"}
      .with(kInclusiveBidirectionalWindow | kAllSliding),
  // UltraBERT: rope_parameters per layer type (sliding 1e4, full 2.56e6), full attention every third layer,
  // hidden / heads (modeling_ultrabert.py UltrabertRotaryEmbedding, rotate_half,
  // UltrabertAttention.__init__); its checkpoints' keys: src/model/ultrabert.cc
  F{"ultrabert",     R,      1e4,     32768,   0,       0,    false, H,
   kBidirectional | kRopePerLayerTypeOnly,
   nullptr, kUltrabertRope}.window(128).with(kInclusiveBidirectionalWindow),
  // RoPE encoders (Llama's rotation, bidirectional: src/model/families.cc always_bidirectional)
  // runs llama's positional code: modeling_nomic_bert.py: Llama's rotary module and rotate_half over the
  // whole head, bidirectional
  F{"nomic_bert",    R,      1e3,     2048,    0,       0,    false, H, kBidirectional, "llama"}
      .with(kCanonicalSizeKeys),
  // runs llama's positional code: modeling_gte.py: Llama's rotary module and rotate_half over the whole head,
  // bidirectional
  {"gte",            R,      1.6e5,   8192,    0,       0,    false, H, kBidirectional, "llama"},
  // runs llama's positional code: modeling_jina_embeddings_v3.py: Llama's rotary module and rotate_half over
  // the whole head, bidirectional
  {"jina_embeddings_v3", R,  2e4,     8194,    0,       0,    false, H, kBidirectional, "llama"},
  // runs llama's positional code: modeling_eurobert.py: Llama's rotary module and rotate_half over the whole
  // head, bidirectional
  {"eurobert",       R,      1e4,     8192,    0,       0,    false, H, kBidirectional, "llama"},
  // runs llama's positional code: modeling_esmc.py: Llama's rotary module and rotate_half over the whole
  // head, bidirectional
  {"esmc",           R,      1e4,     2048,    0,       0,    false, H, kBidirectional, "llama"},
  // modeling_roformer.py RoFormerSinusoidalPositionalEmbedding.create_weight,
  // RoFormerSelfAttention.apply_rotary_position_embeddings: a fixed base-10000 table, pairs (2j, 2j + 1),
  // causal iff is_decoder; modeling_esm.py: rotate_half when position_embedding_type is "rotary", else a
  // learned table (RoBERTa's rows), causal iff is_decoder.
  {"roformer",       R,      1e4,     1536,    0,       0,    false, I,
   kCausalIffDecoder | kFixedRotaryTable},
  {"esm",            R,      1e4,     1026,    0,       0,    false, H, kCausalIffDecoder},
  // State-space models: no attention, no positions (position_ids are accepted and ignored).
  {"mamba",          PositionMethod::none, 0, 0, 0, 0, false, H, kAttentionFree},
  {"mamba2",         PositionMethod::none, 0, 0, 0, 0, false, H, kAttentionFree},
  {"falcon_mamba",   PositionMethod::none, 0, 0, 0, 0, false, H, kAttentionFree},
  // Recurrent: RWKV's time mixing ("RwkvSelfAttention", a recurrence), xLSTM's mLSTM / sLSTM blocks.
  {"rwkv",           PositionMethod::none, 0, 0, 0, 0, false, H, kAttentionFree},
  {"xlstm",          PositionMethod::none, 0, 0, 0, 0, false, H, kAttentionFree},
  // No positional encoding in the attention layers (modeling_jamba.py, modeling_nemotron_h.py,
  // modeling_zamba.py: apply_rotary_pos_emb is defined but never called).
  F{"jamba",         PositionMethod::none, 0, 262144, 0, 0, false, H}.layers(LayerRule::hook)
      .with(kDerivedLayerList),
  F{"nemotron_h",    PositionMethod::none, 0, 4096, 128, 0, false, H}.heads(HeadRule::nemotron)
      .layers(LayerRule::hook).allowed("full_attention linear_attention moe mlp").with(kBlockTypeListFirst),
  // modeling_zamba.py ZambaAttention.__init__: scaling (head_dim / 2) ** -0.5
  F{"zamba",         PositionMethod::none, 0, 4096, 0, 0, false, H}.heads(HeadRule::doubled)
      .layers(LayerRule::hook).allowed("hybrid linear_attention").scale(ScaleRule::half_head),
  F{"bamba",         R,      1e4,     262144,  0,       0.5,  true,  H}.layers(LayerRule::hook)
      .with(kDerivedLayerList),  // prf forced 0.5 (config)
  // RoPE iff position_embedding_type
  F{"granitemoehybrid", R,    1e4,     2048,    0,       0,    false, H}.layers(LayerRule::linear)
      .allowed("full_attention linear_attention").scale(ScaleRule::attention_multiplier, 1.0),
  // FalconH1Attention.forward: k_proj(x) times key_multiplier before RoPE, the logits' factor
  F{"falcon_h1",     R,      1e4,     8192,    0,       0,    false, H}.layers(LayerRule::hybrid)
      .with(kDerivedLayerList).scale(ScaleRule::key_multiplier),  // mamba + attention in every layer
  // RoPE iff use_mem_rope
  F{"zamba2",        R,      1e4,     4096,    0,       0,    false, H}.heads(HeadRule::doubled)
      .layers(LayerRule::hook).allowed("hybrid linear_attention").scale(ScaleRule::half_head),
  {"bloom",          PositionMethod::alibi,   0, 0,    0, 0, false, H},
  // ModelPositions::sinusoidal
  F{"xglm",          PositionMethod::sinusoidal, 0, 2048, 0, 0, false, H}.offset(2),
  // Kosmos-2's text decoder: XGLM's table, read at row p + pad_token_id + 1 (plan_position_tables)
  F{"kosmos_2_text_model", PositionMethod::sinusoidal, 0, 2048, 0, 0, false, H}
      .size_keys("embed_dim hidden_size", "layers num_hidden_layers").with(kSinusoidalRowsAfterPad),
  // the same, q pre-scaled
  F{"kosmos_2_5_text_model", PositionMethod::sinusoidal, 0, 4096, 0, 0, false, H}
      .size_keys("embed_dim hidden_size", "layers num_hidden_layers").with(kSinusoidalRowsAfterPad),
  F{"ctrl",          PositionMethod::sinusoidal, 0, 256,  0, 0, false, H}
      .frequencies(SinusoidalFrequencies::model_dim),
  {"mpt",            PositionMethod::alibi,   0, 2048, 0, 0, false, H},
  // modeling_t5.py: no 1/sqrt(d) (folded into the initialization)
  F{"t5",            PositionMethod::t5,      0, 0,    0, 0, false, H}.scale(ScaleRule::one).with(kT5Stacks)
      .heads(HeadRule::d_kv),
  // T5's rules (Family::rules); umt5: a bucket table in every layer;
  // pix2struct_text_model: a decoder alone (is_decoder, unidirectional buckets).
  // runs t5's positional code: modeling_mt5.py: T5's buckets (_relative_position_bucket) and unscaled
  // attention
  {"mt5",            PositionMethod::t5,      0, 0,    0, 0, false, H, 0, "t5"},
  // runs t5's positional code: modeling_umt5.py: T5's buckets (_relative_position_bucket) and unscaled
  // attention
  F{"umt5",          PositionMethod::t5,      0, 0,    0, 0, false, H, 0, "t5"}.with(kBiasPerLayer)
      .quiet("scalable_attention"),
  // runs t5's positional code: modeling_switch_transformers.py: T5's buckets (_relative_position_bucket) and
  // unscaled attention
  F{"switch_transformers", PositionMethod::t5, 0, 0,    0, 0, false, H, 0, "t5"}.decoder(12),
  // runs t5's positional code: modeling_pix2struct.py: T5's buckets (_relative_position_bucket) and unscaled
  // attention
  F{"pix2struct_text_model", PositionMethod::t5, 0, 0,  0, 0, false, H, 0, "t5"}.with(kDecoderOnly),
  F{"gpt2",          PositionMethod::learned, 0, 1024, 0, 0, false, H}.scale(ScaleRule::scale_attn_weights)
      .with(kInverseLayerScale),
  {"bert",           PositionMethod::learned, 0, 512,  0, 0, false, H, kBert},
  // modeling_gpt_neo.py _attn: q k^T with no 1/sqrt(d); its layer types: attention_types
  F{"gpt_neo",       PositionMethod::learned, 0, 2048, 0, 0, false, H}.scale(ScaleRule::one)
      .layers(LayerRule::hook),
  F{"gpt_bigcode",   PositionMethod::learned, 0, 1024, 0, 0, false, H}.scale(ScaleRule::scale_attn_weights),
  F{"opt",           PositionMethod::learned, 0, 2048, 0, 0, false, H}.offset(2),
  // learned encoders, row p (ibert: RoBERTa's p + pad_token_id + 1), bidirectional
  {"distilbert",     PositionMethod::learned, 0, 512,  0, 0, false, H, kBidirectional},
  {"squeezebert",    PositionMethod::learned, 0, 512,  0, 0, false, H, kBidirectional},
  {"ibert",          PositionMethod::learned, 0, 512,  0, 0, false, H, kBidirectional | kRoberta},
  {"openai-gpt",     PositionMethod::learned, 0, 512,  0, 0, false, H},
  // ALBERT: row p, bidirectional; MPNet: a learned table (row p + 2) and T5's bidirectional buckets in
  // every layer (ModelPositions::learned_embeddings).
  {"albert",         PositionMethod::learned, 0, 512,  0, 0, false, H, kBidirectional},
  // MobileBERT (modeling_mobilebert.py MobileBertEmbeddings): row p, bidirectional; heads of the bottleneck
  // (src/model/per_layer.cc head_dims).
  F{"mobilebert",    PositionMethod::learned, 0, 512,  0, 0, false, H, kBidirectional}
      .heads(HeadRule::bottleneck),
  {"mpnet",          PositionMethod::t5,      0, 512,  0, 0, false, H, kBidirectional},
  F{"biogpt",        PositionMethod::learned, 0, 1024, 0, 0, false, H}.offset(2),  // row p + 2, as opt
  // BERT's encoders (causal iff is_decoder); the RoBERTa family reads row p + pad_token_id + 1.
  {"electra",        PositionMethod::learned, 0, 512,  0, 0, false, H, kBert},
  {"ernie",          PositionMethod::learned, 0, 512,  0, 0, false, H, kBert},
  {"megatron-bert",  PositionMethod::learned, 0, 512,  0, 0, false, H, kBert},
  {"roc_bert",       PositionMethod::learned, 0, 512,  0, 0, false, H, kBert},
  {"rembert",        PositionMethod::learned, 0, 512,  0, 0, false, H, kBert},
  {"bert-generation", PositionMethod::learned, 0, 512, 0, 0, false, H, kBert},
  {"roberta",        PositionMethod::learned, 0, 512,  0, 0, false, H, kRoberta},
  {"xlm-roberta",    PositionMethod::learned, 0, 512,  0, 0, false, H, kRoberta},
  {"xlm-roberta-xl", PositionMethod::learned, 0, 514,  0, 0, false, H, kRoberta},
  {"camembert",      PositionMethod::learned, 0, 512,  0, 0, false, H, kRoberta},
  {"data2vec-text",  PositionMethod::learned, 0, 512,  0, 0, false, H, kRoberta},
  {"roberta-prelayernorm", PositionMethod::learned, 0, 512, 0, 0, false, H, kRoberta},
  {"xmod",           PositionMethod::learned, 0, 512,  0, 0, false, H, kRoberta},
};
// clang-format on

// hidden_size, num_attention_heads, num_hidden_layers (or their aliases) of each config class's
// defaults: generated from transformers 5.23's classes and checked by test_model_families.py
// (test_omitted_keys_take_the_class_defaults drops each key the class fills back).
// clang-format off
constexpr SizeDefaults kSizeDefaults[] = {
      {"afmoe", 2048, 16, 32},
      {"apertus", 4096, 32, 32},
      {"arcee", 2560, 32, 32},
      {"aria_text", 4096, 32, 32},
      {"bert", 768, 12, 12},
      {"roformer", 768, 12, 12},
      {"esm", 768, 12, 12},
      {"albert", 4096, 64, 12},
      {"mobilebert", 512, 4, 24},
      {"mpnet", 768, 12, 12},
      {"xglm", 1024, 16, 24},
      {"kosmos_2_text_model", 2048, 32, 24},
      {"kosmos_2_5_text_model", 1536, 16, 24},
      {"t5", 512, 8, 6},
      {"mt5", 512, 6, 8},
      {"umt5", 512, 6, 8},
      {"switch_transformers", 768, 12, 12},
      {"pix2struct_text_model", 768, 12, 12},
      {"ctrl", 1280, 16, 48},
      {"bitnet", 2560, 20, 30},
      {"bloom", 64, 8, 2},
      {"cohere", 8192, 64, 40},
      {"cohere2", 8192, 64, 40},
      {"cohere2_moe", 8192, 64, 40},
      {"mimo_v2_flash", 4096, 64, 48},
      {"cwm", 6144, 48, 64},
      {"deepseek_v2", 4096, 32, 32},
      {"deepseek_v3", 7168, 128, 61},
      {"ernie4_5", 1024, 16, 18},
      {"ernie4_5_moe", 2560, 20, 28},
      {"exaone4", 4096, 32, 32},
      {"exaone_moe", 4096, 32, 32},
      {"falcon", 4544, 71, 32},
      {"flex_olmo", 4096, 32, 32},
      {"flint", 2048, 32, 49},
      {"gemma", 3072, 16, 28},
      {"gemma2", 2304, 8, 26},
      {"gemma3_text", 2304, 8, 26},
      {"gemma4_text", 2304, 8, 30},
      {"embedding_gemma2_text", 512, 4, 24},
      {"openai_privacy_filter", 640, 14, 8},
      {"ultrabert", 4096, 32, 32},
      {"glm", 4096, 32, 40},
      {"glm4", 4096, 32, 40},
      {"glm4_moe", 4096, 96, 46},
      {"gpt2", 768, 12, 12},
      {"gpt_bigcode", 768, 12, 12},
      {"gpt_neo", 2048, 16, 24},
      {"gpt_neox", 6144, 64, 44},
      {"gpt_neox_japanese", 2560, 32, 32},
      {"gpt_oss", 2880, 64, 36},
      {"gptj", 4096, 16, 28},
      {"codegen", 4096, 16, 28},
      {"granite", 4096, 32, 32},
      {"granite_docling_text", 1024, 16, 28},
      {"granitemoe", 4096, 32, 32},
      {"granitemoeshared", 4096, 32, 32},
      {"helium", 2560, 20, 24},
      {"hyperclovax", 4096, 32, 32},
      {"internlm3", 4096, 32, 48},
      {"jais2", 3328, 26, 32},
      {"kolibri1", 2560, 48, 50},
      {"lfm2", 2560, 32, 32},
      {"llama", 4096, 32, 32},
      {"nanochat", 768, 6, 12},  // configuration_nanochat.py NanoChatConfig
      {"llama4_text", 5120, 40, 48},
      {"minicpm3", 2560, 40, 62},
      {"minimax_m2", 3072, 48, 62},
      {"ministral", 4096, 32, 32},
      {"ministral3", 4096, 32, 34},
      {"mistral", 4096, 32, 32},
      {"mixtral", 4096, 32, 32},
      {"mllama_text_model", 4096, 32, 40},
      {"mpt", 2048, 16, 24},
      {"nemotron", 6144, 48, 32},
      {"olmo", 4096, 32, 32},
      {"olmo2", 4096, 32, 32},
      {"olmo3", 4096, 32, 32},
      {"olmoe", 2048, 16, 16},
      {"opt", 768, 12, 12},
      {"persimmon", 4096, 64, 36},
      {"phi", 2048, 32, 24},
      {"phi3", 3072, 32, 32},
      {"phimoe", 4096, 32, 32},
      {"qwen2", 4096, 32, 32},
      {"qwen2_5_vl_text", 8192, 64, 80},
      {"qwen2_moe", 2048, 16, 24},
      {"qwen2_vl_text", 8192, 64, 80},
      {"qwen3", 4096, 32, 32},
      {"qwen3_5_moe_text", 2048, 16, 40},
      {"qwen3_5_text", 4096, 16, 32},
      {"qwen3_moe", 2048, 32, 24},
      {"qwen3_next", 2048, 16, 48},
      {"qwen3_vl_moe_text", 2048, 16, 24, true},
      {"qwen3_vl_text", 4096, 32, 32},
      {"seed_oss", 4096, 80, 64},
      {"smollm3", 2048, 16, 36},
      {"solar_open", 4096, 64, 48},
      {"stablelm", 2560, 32, 32},
      {"starcoder2", 3072, 24, 30},
      {"vaultgemma", 2304, 8, 26},
      {"iquestcoder", 5120, 40, 80},
      {"emu3_text_model", 4096, 32, 32},
      {"chameleon", 4096, 32, 32},
      {"hy_v3", 4096, 64, 80},
      {"dots1", 4608, 32, 62},
      {"mellum", 2304, 32, 28},
      {"lfm3", 2048, 16, 24},
      {"youtu", 2048, 16, 32},
      {"axk1", 7168, 64, 61},
      {"glm4_moe_lite", 2048, 20, 47},
      {"mistral4", 4096, 32, 36},
      {"deepseek_v32", 7168, 128, 61},
      {"deepseek_v4", 4096, 64, 43},
      {"axk2", 2048, 32, 48},
      {"laguna", 2048, 48, 40},
      {"step3p5", 4096, 64, 45},
      {"muse_glimmer_text", 6656, 32, 52},
      {"hunyuan_vl_text", 4096, 32, 32},
      {"cohere_compass_text", 8192, 64, 40},
      {"minimax_m3_vl_text", 6144, 64, 60},
      {"muse_spark_text", 8192, 128, 62},
      {"glm_moe_dsa", 6144, 64, 78},
      {"longcat_flash", 6144, 64, 56},
      {"jetmoe", 2048, 32, 12},
      {"dbrx", 2048, 16, 24},
      {"roberta", 768, 12, 12},
      {"xlm-roberta", 768, 12, 12},
      {"xlm-roberta-xl", 2560, 32, 36},
      {"camembert", 768, 12, 12},
      {"data2vec-text", 768, 12, 12},
      {"roberta-prelayernorm", 768, 12, 12},
      {"xmod", 768, 12, 12},
      {"electra", 256, 4, 12},
      {"ernie", 768, 12, 12},
      {"megatron-bert", 1024, 16, 24},
      {"roc_bert", 768, 12, 12},
      {"rembert", 1152, 18, 32},
      {"bert-generation", 1024, 16, 24},
      {"openai-gpt", 768, 12, 12},
      {"biogpt", 1024, 16, 24},
      {"hunyuan_v1_dense", 4096, 32, 32},
      {"hunyuan_v1_moe", 4096, 32, 32},
      {"granite_swa", 2560, 20, 24},
      {"granitemoe_swa", 4096, 32, 32},
      {"recurrent_gemma", 2560, 10, 26},
      {"minimax", 4096, 32, 32},
      {"olmo_hybrid", 3840, 30, 32},
      {"lfm2_moe", 2048, 32, 32},
      {"bailing_hybrid", 2560, 32, 42},
      {"kimi_linear", 2304, 32, 27},
      {"glm5_next_text", 4096, 64, 45},
      {"qwen4_exp_text", 2048, 16, 40},
      {"zaya", 2048, 8, 40},
      {"hy_v4", 2816, 32, 34},
      {"dots3_note_text", 5120, 128, 46},
      {"molmo2_text", 4096, 32, 36},
      {"mamba", 768, 0, 32},  // no attention heads
      {"mamba2", 4096, 0, 64},
      {"falcon_mamba", 768, 0, 32},
      {"rwkv", 4096, 0, 32},
      {"xlstm", 4096, 0, 32},
      {"jamba", 4096, 32, 32},
      {"nemotron_h", 4096, 32, 4},
      {"zamba", 3712, 16, 76},
      {"bamba", 4096, 32, 32},
      {"granitemoehybrid", 4096, 32, 32},
      {"falcon_h1", 4096, 32, 32},
      {"zamba2", 2560, 32, 54},
      {"glm4v_text", 4096, 32, 40},
      {"glm_ocr_text", 1024, 16, 16},
      {"glm4v_moe_text", 4096, 96, 46},
      {"qwen2_5_omni_text", 3584, 28, 28},
      {"qwen3_omni_moe_text", 2048, 28, 28},
      {"qwen3_omni_moe_talker_text", 1024, 16, 20},
      {"glm_image_text", 4096, 32, 40},
      {"voxtral_realtime_text", 4096, 32, 32},
      {"csm", 2048, 32, 16},
      {"higgs_audio_v2", 3072, 24, 28},
      {"paddleocr_vl_text", 1024, 16, 18},
      {"cosmos3_edge_text", 2048, 16, 28},
      {"deepseek_ocr2_text", 4096, 32, 32},
      {"granite4_vision_text", 4096, 32, 32},
      {"phi4_multimodal", 3072, 32, 32},
      {"gemma4_unified_text", 2304, 8, 30},
      {"gemma3n_text", 2048, 8, 35},
      {"ernie4_5_vl_moe_text", 2560, 20, 28},
      {"modernbert-decoder", 768, 12, 22},
      {"modernbert", 768, 12, 22},
      {"nomic_bert", 768, 12, 12},
      {"gte", 768, 12, 12},
      {"jina_embeddings_v3", 1024, 16, 24},
      {"eurobert", 768, 12, 12},
      {"esmc", 2560, 40, 80},
      {"distilbert", 768, 12, 6},
      {"squeezebert", 768, 12, 12},
      {"ibert", 768, 12, 12},
};
// clang-format on

constexpr std::array<std::string_view, 43> kIrrelevant = {
    "attention_dropout", "attention_bias", "attention_probs_dropout_prob", "attn_pdrop",
    "routed_scaling_factor", "moe_routed_scaling_factor",
    "moe_router_scaling_factor",  // step3p5's MoE output scale
    "hc_sinkhorn_iters",          // GLM-5-Next's mHC residual streams
    "mtp_loss_scaling_factor", "output_attentions", "chunk_size_feed_forward", "cross_attention_hidden_size",
    "add_cross_attention",
    "temperature",                // a generation default in old PretrainedConfig dumps
    "attention_softmax_in_fp32",  // numerics, not positions
    "scale_attention_softmax_in_fp32", "apply_query_key_layer_scaling", "logits_scaling",
    "attention_layernorm", "max_window_size_unused",
    "model_max_length",  // a tokenizer setting
    "use_sliding_window_unused", "attention_out_bias",
    "chunk_size",  // Mamba-2's SSM scan chunk (Nemotron-H, Bamba, ...), not attention chunking
    "mamba_chunk_size",
    // keys with "attn" that choose kernels, dropout, numerics or the block's wiring, not positions or masks
    "attn_dropout_prob", "attn_implementation", "_attn_implementation", "_attn_implementation_autoset",
    "use_flash_attn", "deterministic_flash_attn",
    "reorder_and_upcast_attn",  // GPT-2's fp32 upcast of q k^T
    "attn_output_gate",         // Qwen3-Next / Qwen3.5: a sigmoid gate on the attention output
    "parallel_attn",            // Falcon: attention and MLP side by side in a block
    "num_ln_in_parallel_attn",
    "full_attn_alpha_factor",  // MiniMax: residual scales of the attention blocks
    "full_attn_beta_factor", "linear_attn_alpha_factor", "linear_attn_beta_factor",
    // read for gpt2 and gpt_bigcode, the planned families whose modeling code reads it; a leftover in other
    // files (StarCoder2's; Qwen's modeling_qwen.py sets self.scale_attn_weights = True whatever it says)
    "scale_attn_weights",
    "attention_in_multiplier",  // Falcon-H1: the attention block's input and output scales
    "attention_out_multiplier",
    "moe_router_logit_softcapping"};  // Laguna: a softcap of the MoE router's logits, not attention's

// Positional-looking keys of real configs that transformers 5.23's family reads nowhere (neither its
// configuration nor its modeling file mentions them), with what it reads instead.
struct IgnoredKey {
  std::string_view model_type, key, instead;
};
constexpr IgnoredKey kIgnoredByTransformers[] = {
    {"bloom", "offset_alibi", "its ALiBi slopes come from the head count alone"},
    {"gemma2", "sliding_window_size", "its window is sliding_window"},
    {"gptj", "rotary", "it rotates rotary_dim dims on every layer"},
    {"qwen2", "rotary_emb_base", "its base is rope_theta"},
    {"cohere2", "rotary_pct", "it rotates the whole head"},
    {"stablelm", "rotary_scaling_factor", "its scaling is rope_parameters"},
    {"falcon_h1", "attn_layer_indices", "every layer has attention beside its Mamba mixer"},
};

// Every Family::rules names a row, which follows no other row's rules.
constexpr bool rules_name_rows() {
  for (const Family& f : kFamilies) {
    if (!f.rules) continue;
    bool found = false;
    for (const Family& r : kFamilies)
      if (std::string_view(r.model_type) == f.rules) found = r.rules == nullptr;
    if (!found) return false;
  }
  return true;
}
static_assert(rules_name_rows(), "a Family::rules names no row, or a row that has rules of its own");
}  // namespace

bool in_list(const char* list, std::string_view name) {
  if (!list) return false;
  for (std::string_view rest = list; !rest.empty();) {
    const size_t end = rest.find(' ');
    if (rest.substr(0, end) == name) return true;
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return false;
}

const Family* find_family(const std::string& model_type) {
  for (const Family& f : kFamilies)
    if (model_type == f.model_type) return &f;
  return nullptr;
}

std::string canonical_type(const std::string& model_type) {
  for (const Family& f : kFamilies)
    if (in_list(f.aliases, model_type)) return f.model_type;
  return model_type;
}

std::string rules_type(const std::string& model_type) {
  const Family* f = find_family(model_type);
  return f && f->rules ? f->rules : model_type;
}

const SizeDefaults* find_size_defaults(const std::string& model_type) {
  for (const SizeDefaults& d : kSizeDefaults)
    if (model_type == d.model_type) return &d;
  return nullptr;
}

std::string refusal_reason(const std::string& t) {
  // (Remote-code types, not in transformers 5.23.0, are planned from the authors' files or refused there:
  // src/model/remote.cc.)
  // In transformers 5.23, with positional code posenc does not model yet (each family's modeling file).
  static const char* const kInkling =
      "its positions are a content-dependent relative bias (r_proj(x_q) . proj[:, q - k]) and short "
      "convolutions, without RoPE";
  static const char* const kMerged =
      "merged attention (one softmax over rotated self keys and unrotated encoder keys)";
  static const std::pair<const char*, std::string> kNotModeled[] = {
      {"mistral_large4_text",
       "its rotary frequencies times exp(alpha) of a checkpoint tensor (LeRoPE: rotary_emb.alpha) and "
       "its queries times learned per-head s_h ln(p + 1) + b_h (SSMax), neither in config.json"},
      {"inkling_text", kInkling},
      {"inkling2_text", kInkling},
      {"diffusion_gemma_text", "its bidirectional canvas decoding (a second pass over the prompt's cache)"},
      {"unlimited_ocr_text",
       "its reference sliding window (the whole prefill stays visible: a mask that depends on the prompt's "
       "length at run time)"},
      {"led", "its encoder's Longformer attention (attention_window, global tokens)"},
      {"bigbird_pegasus", "its encoder's block-sparse attention (global, sliding and random blocks)"},
      {"big_bird", "its block-sparse attention (global, sliding and random blocks)"},
      {"pegasus_x", "its encoder's block-local attention with global tokens"},
      {"longt5", "its encoder's local / transient-global attention"},
      {"t5gemma2", std::string("its decoder's ") + kMerged},
      {"t5gemma2_decoder", std::string("its ") + kMerged},
      {"prophetnet", "its content-dependent relative bias and n-gram streams"},
      {"udop", "its 2-D layout embeddings and bounding-box relative buckets"},
      {"cpmant", "its segment-pair relative buckets and prompt prefix"},
      {"beam", "its full layers' query temperature (1 + (p + 1) / 2048)^0.1"},
      {"doge", "its content-dependent key bias and top-k key selection"},
      {"diffllama", "its differential attention (two softmax maps per head, subtracted)"},
      // Encoders with attention or positions of their own (transformers 5.23's modeling_<type>.py):
      // deberta: with relative_attention, c2p / p2c terms of each layer's projections of shared relative
      // embeddings (build_relative_position, DisentangledSelfAttention.__init__), the query scaled by (head
      // (1 + len(pos_att_type)))^-0.5 (DisentangledSelfAttention.forward); deberta-v2: the same, log-bucketed
      // with position_buckets (make_log_bucket_position, DisentangledSelfAttention.__init__); xlnet:
      // Transformer-XL's r_w_bias / r_r_bias terms over sinusoidal relative encodings and a segment term
      // (XLNetRelativeAttention.rel_attn_core, XLNetModel.relative_positional_encoding); funnel:
      // relative_shift / factorized position terms over pooled sequences (configuration_funnel.py
      // FunnelConfig.attention_type; modeling_funnel.py FunnelAttentionStructure.get_position_embeds,
      // pool_tensor, FunnelRelMultiheadAttention.relative_positional_attention); longformer: windows of
      // attention_window // 2 keys a side and global tokens (LongformerSelfAttention.__init__,
      // LongformerEncoder.forward); reformer: LSH and chunked local attention, axial position embeddings
      // (AxialPositionEmbeddings, ReformerEmbeddings, LSHSelfAttention, LocalSelfAttention); nystromformer:
      // landmarks (NystromformerSelfAttention); yoso: hashed sampling (hashing, YosoSelfAttention); mra:
      // block-sparse multi-resolution (get_block_idxes, MraSelfAttention); fnet: FFTs instead of attention
      // (fftn, FNetBasicFourierTransform); convbert: span-based dynamic convolution heads beside
      // num_attention_heads // head_ratio attention heads (SeparableConv1D, ConvBertSelfAttention.__init__);
      // layoutlm: bounding-box embeddings added to the learned rows (LayoutLMEmbeddings); tapas: row / column
      // token types and positions reset per cell (TapasEmbeddings); luke: entity positions as the mean of
      // their words' rows (LukeEntityEmbeddings) and entity-aware queries (LukeSelfAttention.__init__).
      {"deberta",
       "its disentangled attention (with relative_attention: content-to-position and position-to-content "
       "terms over relative positions, projected by each layer)"},
      {"deberta-v2",
       "its disentangled attention (with relative_attention: content-to-position and position-to-content "
       "terms over relative positions, log-bucketed with position_buckets, projected by each layer)"},
      {"xlnet",
       "its relative attention (Transformer-XL's content and position terms over sinusoidal relative "
       "encodings, and a segment term)"},
      {"funnel", "its relative attention over pooled sequences (attention_type relative_shift / factorized)"},
      {"longformer", "its sliding-window attention with global tokens (attention_window)"},
      {"reformer", "its LSH and chunked local attention with axial position embeddings"},
      {"nystromformer", "its Nystrom approximation of attention (landmark queries and keys)"},
      {"yoso", "its LSH-sampled approximate attention"},
      {"mra", "its multi-resolution approximate attention"},
      {"fnet", "its Fourier token mixing (no attention)"},
      {"convbert", "its span-based dynamic convolution heads beside attention (head_ratio)"},
      {"layoutlm", "its 2-D layout embeddings of bounding boxes, added beside the learned positions"},
      {"tapas", "its table row / column embeddings and per-cell reset positions"},
      {"luke",
       "its entity positions (the mean of each entity's word position embeddings) and entity-aware "
       "attention"},
      {"git", "its bidirectional image prefix"},
      {"pi0", "its prefix-LM and action-block bidirectional masks"},
      {"hrm_text", "its recurrent stacks and prefix-LM mask"},
  };
  for (const auto& [type, why] : kNotModeled)
    if (t == type) return why + " is not modeled by posenc yet";
  return {};
}

const char* default_rope_parameters(const std::string& t) {
  const Family* f = find_family(t);
  return f ? f->rope_parameters : nullptr;
}

bool has_trait(const std::string& t, FamilyTrait trait) {
  const Family* f = find_family(t);
  return f && (f->traits & trait) != 0;
}

bool attention_free(const std::string& t) { return has_trait(t, kAttentionFree); }
bool reversed_rotation(const std::string& t) { return has_trait(t, kReversedRotation); }
bool always_bidirectional(const std::string& t) { return has_trait(t, kBidirectional); }
bool roberta_like(const std::string& t) { return has_trait(t, kRobertaRows); }
bool bert_like(const std::string& t) { return has_trait(t, kBertFamily); }
bool causal_iff_decoder(const std::string& t) { return has_trait(t, kCausalIffDecoder); }

bool known_irrelevant_key(const std::string& key) {
  for (std::string_view k : kIrrelevant)
    if (key == k) return true;
  return false;
}

std::string ignored_by_transformers(const std::string& model_type, const std::string& key) {
  for (const IgnoredKey& k : kIgnoredByTransformers)
    if (model_type == k.model_type && key == k.key) return std::string(k.instead);
  return {};
}

bool looks_positional(const std::string& key) {
  // "attn" and "interpolat": full_attn_idxs (LFM2's attention layers) went unread without a word.
  for (std::string_view s : {"rope", "rotary", "position", "window", "alibi", "attention", "attn",
                             "interpolat", "scaling", "theta", "chunk", "sink", "softcap", "temperature"})
    if (key.find(s) != std::string::npos) return true;
  return false;
}

}  // namespace posenc::detail
