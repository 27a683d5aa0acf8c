// src/model/wrappers.cc: the model_type transformers 5.23 builds a multimodal wrapper's text_config as,
// and the keys its config class fills in: SubConfigSpec.create_subconfig (configuration_utils.py) and each
// wrapper's __post_init__, the config class named per entry.
#include <nlohmann/json.hpp>
#include <string>

#include "src/model/parse.h"

namespace posenc::detail {
namespace {
// Wrappers whose config class (named per entry) names a concrete text class in its sub_configs_defaults'
// "text_config" entry. SubConfigSpec.create_subconfig (configuration_utils.py) maps a dict's
// model_type to a class only for AutoConfig specs: a concrete class builds text_config whatever model_type
// the dict has (or lacks), and to_dict writes the class's model_type. Every such wrapper of transformers 5.23
// is listed, supported text family or not, so that an unsupported one is refused by its own name.
const char* const kWrapperTextClasses[][2] = {
    {"aimv2", "aimv2_text_model"},                      // Aimv2Config
    {"align", "align_text_model"},                      // AlignConfig
    {"altclip", "altclip_text_model"},                  // AltCLIPConfig
    {"aria", "aria_text"},                              // AriaConfig
    {"blip", "blip_text_model"},                        // BlipConfig
    {"bridgetower", "bridgetower_text_model"},          // BridgeTowerConfig
    {"chinese_clip", "chinese_clip_text_model"},        // ChineseCLIPConfig
    {"clap", "clap_text_model"},                        // ClapConfig
    {"clip", "clip_text_model"},                        // CLIPConfig
    {"clipseg", "clipseg_text_model"},                  // CLIPSegConfig
    {"clvp", "clvp_encoder"},                           // ClvpConfig
    {"cohere_compass", "cohere_compass_text"},          // CohereCompassConfig
    {"cosmos3_edge", "cosmos3_edge_text"},              // Cosmos3EdgeConfig
    {"deepseek_ocr2", "deepseek_ocr2_text"},            // DeepseekOcr2Config
    {"diffusion_gemma", "diffusion_gemma_text"},        // DiffusionGemmaConfig
    {"dots3_note", "dots3_note_text"},                  // Dots3NoteConfig
    {"embedding_gemma2", "embedding_gemma2_text"},      // EmbeddingGemma2Config
    {"emu3", "emu3_text_model"},                        // Emu3Config
    {"ernie4_5_vl_moe", "ernie4_5_vl_moe_text"},        // Ernie4_5_VLMoeConfig
    {"flava", "flava_text_model"},                      // FlavaConfig
    {"gemma3", "gemma3_text"},                          // Gemma3Config
    {"gemma3n", "gemma3n_text"},                        // Gemma3nConfig
    {"gemma4", "gemma4_text"},                          // Gemma4Config
    {"gemma4_unified", "gemma4_unified_text"},          // Gemma4UnifiedConfig
    {"glm4v", "glm4v_text"},                            // Glm4vConfig
    {"glm4v_moe", "glm4v_moe_text"},                    // Glm4vMoeConfig
    {"glm5_next", "glm5_next_text"},                    // Glm5NextConfig
    {"glm_image", "glm_image_text"},                    // GlmImageConfig
    {"glm_ocr", "glm_ocr_text"},                        // GlmOcrConfig
    {"granite4_vision", "granite4_vision_text"},        // Granite4VisionConfig
    {"granite_docling", "granite_docling_text"},        // GraniteDoclingConfig
    {"groupvit", "groupvit_text_model"},                // GroupViTConfig
    {"hunyuan_vl", "hunyuan_vl_text"},                  // HunYuanVLConfig
    {"inkling2", "inkling2_text"},                      // Inkling2Config
    {"inkling_mm_model", "inkling_text"},               // InklingConfig
    {"kosmos-2", "kosmos_2_text_model"},                // Kosmos2Config
    {"kosmos-2.5", "kosmos_2_5_text_model"},            // Kosmos2_5Config
    {"llama4", "llama4_text"},                          // Llama4Config
    {"metaclip_2", "metaclip_2_text_model"},            // MetaClip2Config
    {"minimax_m3_vl", "minimax_m3_vl_text"},            // MiniMaxM3VLConfig
    {"mistral_large4", "mistral_large4_text"},          // MistralLarge4Config
    {"mllama", "mllama_text_model"},                    // MllamaConfig
    {"molmo2", "molmo2_text"},                          // Molmo2Config
    {"muse_glimmer", "muse_glimmer_text"},              // MuseGlimmerConfig
    {"muse_spark", "muse_spark_text"},                  // MuseSparkConfig
    {"owlv2", "owlv2_text_model"},                      // Owlv2Config
    {"owlvit", "owlvit_text_model"},                    // OwlViTConfig
    {"paddleocr_vl", "paddleocr_vl_text"},              // PaddleOCRVLConfig
    {"pix2struct", "pix2struct_text_model"},            // Pix2StructConfig
    {"pp_formulanet", "pp_formulanet_text"},            // PPFormulaNetConfig
    {"qwen2_5_omni_thinker", "qwen2_5_omni_text"},      // Qwen2_5OmniThinkerConfig
    {"qwen2_5_vl", "qwen2_5_vl_text"},                  // Qwen2_5_VLConfig
    {"qwen2_vl", "qwen2_vl_text"},                      // Qwen2VLConfig
    {"qwen3_5", "qwen3_5_text"},                        // Qwen3_5Config
    {"qwen3_5_moe", "qwen3_5_moe_text"},                // Qwen3_5MoeConfig
    {"qwen3_omni_moe_thinker", "qwen3_omni_moe_text"},  // Qwen3OmniMoeThinkerConfig
    {"qwen3_vl", "qwen3_vl_text"},                      // Qwen3VLConfig
    {"qwen3_vl_moe", "qwen3_vl_moe_text"},              // Qwen3VLMoeConfig
    {"qwen4_exp", "qwen4_exp_text"},                    // Qwen4ExpConfig
    {"sam3_lite_text", "sam3_lite_text_text_model"},    // Sam3LiteTextConfig
    {"siglip", "siglip_text_model"},                    // SiglipConfig
    {"siglip2", "siglip2_text_model"},                  // Siglip2Config
    {"step3p7", "step3p5"},                             // Step3p7Config
    {"t5gemma2_encoder", "t5gemma2_text"},              // T5Gemma2EncoderConfig
    {"tipsv2", "tipsv2_text_model"},                    // Tipsv2Config
    {"unlimited_ocr", "unlimited_ocr_text"},            // UnlimitedOcrConfig
    {"videoprism", "videoprism_text_model"},            // VideoPrismConfig
    {"xclip", "xclip_text_model"},                      // XCLIPConfig
};

// Wrappers whose sub_configs_defaults give text_config an AutoConfig spec with a default model_type
// (SubConfigSpec(config_class=AutoConfig, model_type=...) in the sub_configs_defaults of the config class
// named per entry). create_subconfig (configuration_utils.py) builds a text_config dict as the class of its
// own model_type, and as the default's class, from the dict's keys alone (the spec's init_kwargs only fill an
// absent text_config, which posenc refuses by the wrapper's name as for kWrapperTextClasses), when it has
// none. Every such wrapper of transformers 5.23 is listed, so that an unsupported default is refused by its
// own name, except exaone4_5: Exaone4_5_Config.__post_init__ reads text_config["model_type"]
// (configuration_exaone4_5.py) and fails without one, and posenc refuses it by the wrapper's name.
const char* const kWrapperDefaultTextTypes[][2] = {
    {"audioflamingo3", "qwen2"},                          // AudioFlamingo3Config
    {"aya_vision", "cohere2"},                            // AyaVisionConfig
    {"blip-2", "opt"},                                    // Blip2Config
    {"cohere2_vision", "cohere2"},                        // Cohere2VisionConfig
    {"cosmos3_omni", "qwen3_vl_text"},                    // Cosmos3OmniConfig
    {"deepseek_vl", "llama"},                             // DeepseekVLConfig
    {"deepseek_vl_hybrid", "llama"},                      // DeepseekVLHybridConfig
    {"fast_vlm", "qwen2"},                                // FastVlmConfig
    {"florence2", "bart"},                                // Florence2Config
    {"fun_asr_nano", "qwen3"},                            // FunAsrNanoConfig
    {"fuyu", "persimmon"},                                // FuyuConfig
    {"gemma4_assistant", "gemma4_text"},                  // Gemma4AssistantConfig
    {"gemma4_unified_assistant", "gemma4_unified_text"},  // Gemma4UnifiedAssistantConfig
    {"glm46v", "glm4v_text"},                             // Glm46VConfig
    {"glmasr", "llama"},                                  // GlmAsrConfig
    {"glmga", "glm4v_text"},                              // GlmgaConfig
    {"got_ocr2", "qwen2"},                                // GotOcr2Config
    {"granite_speech", "granite"},                        // GraniteSpeechConfig
    {"granite_speech_plus", "granite"},                   // GraniteSpeechPlusConfig
    {"grounding-dino", "bert"},                           // GroundingDinoConfig
    {"hyperclovax_vision_v2", "hyperclovax"},             // HyperCLOVAXVisionV2Config
    {"idefics2", "mistral"},                              // Idefics2Config
    {"idefics3", "llama"},                                // Idefics3Config
    {"instructblip", "opt"},                              // InstructBlipConfig
    {"instructblipvideo", "opt"},                         // InstructBlipVideoConfig
    {"internvl", "qwen2"},                                // InternVLConfig
    {"janus", "llama"},                                   // JanusConfig
    {"jev", "qwen3_5_text"},                              // JevConfig
    {"kimi_k25", "deepseek_v3"},                          // Kimi_K25Config
    {"lfm2_vl", "lfm2"},                                  // Lfm2VlConfig
    {"lfm3_vl", "lfm3"},                                  // Lfm3VlConfig
    {"lighton_ocr", "qwen3"},                             // LightOnOcrConfig
    {"llava", "llama"},                                   // LlavaConfig
    {"llava_next", "llama"},                              // LlavaNextConfig
    {"llava_next_video", "llama"},                        // LlavaNextVideoConfig
    {"llava_onevision", "qwen2"},                         // LlavaOnevisionConfig
    {"minicpm_ocr", "qwen3_5_text"},                      // MiniCPMOcrConfig
    {"minicpmv4_6", "qwen3_5_text"},                      // MiniCPMV4_6Config
    {"minicpmv4_7", "qwen3_5_text"},                      // MiniCPMV4_7Config
    {"mistral3", "mistral"},                              // Mistral3Config
    {"mm-grounding-dino", "bert"},                        // MMGroundingDinoConfig
    {"modernvbert", "modernbert"},                        // ModernVBertConfig
    {"moss_transcribe_diarize", "qwen3"},                 // MossTranscribeDiarizeConfig
    {"musicflamingo", "qwen2"},                           // MusicFlamingoConfig
    {"nemo_speechlm", "nemotron_h"},                      // Nemotron3_5TranscribeConfig
    {"nemotron_h_omni", "nemotron_h"},                    // NemotronH_Omni_Reasoning_V3_Config
    {"omdet-turbo", "clip_text_model"},                   // OmDetTurboConfig
    {"ovis2", "qwen2"},                                   // Ovis2Config
    {"paligemma", "gemma"},                               // PaliGemmaConfig
    {"pe_audio", "modernbert"},                           // PeAudioConfig
    {"pe_audio_video", "modernbert"},                     // PeAudioVideoConfig
    {"pe_video", "modernbert"},                           // PeVideoConfig
    {"perception_lm", "llama"},                           // PerceptionLMConfig
    {"pp_chart2table", "qwen2"},                          // PPChart2TableConfig
    {"qianfan_ocr", "qwen3"},                             // QianfanOCRConfig
    {"qwen2_audio", "qwen2"},                             // Qwen2AudioConfig
    {"qwen3_asr", "qwen3"},                               // Qwen3ASRConfig
    {"sam3", "clip_text_model"},                          // Sam3Config
    {"shieldgemma2", "gemma3_text"},                      // ShieldGemma2Config
    {"smolvlm", "llama"},                                 // SmolVLMConfig
    {"ultravbert", "ultrabert"},                          // UltraVBertConfig
    {"vibevoice", "qwen2"},                               // VibeVoiceConfig
    {"vibevoice_asr", "qwen2"},                           // VibeVoiceAsrConfig
    {"video_llama_3", "qwen2"},                           // VideoLlama3Config
    {"video_llava", "llama"},                             // VideoLlavaConfig
    {"vipllava", "llama"},                                // VipLlavaConfig
    {"vision-text-dual-encoder", "bert"},                 // VisionTextDualEncoderConfig
    {"voxtral", "llama"},                                 // VoxtralConfig
    {"voxtral_realtime", "voxtral_realtime_text"},        // VoxtralRealtimeConfig
};

// AutoConfig wrappers whose __post_init__ fills a text_config dict's absent keys from their spec's
// init_kwargs (`{**init_kwargs, **text_config}` in the __post_init__ of the config class named per entry),
// typed or not: those keys, not the text class's defaults, are what transformers builds the text model from.
constexpr const char* kPeText =
    R"({"hidden_size": 1024, "intermediate_size": 2624, "num_hidden_layers": 22, "num_attention_heads": 16})";
const char* const kWrapperTextKwargs[][2] = {
    {"glmasr",  // GlmAsrConfig
     R"({"vocab_size": 59264, "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28,
         "num_attention_heads": 16, "num_key_value_heads": 4, "max_position_embeddings": 8192,
         "rms_norm_eps": 1e-05, "use_cache": true, "eos_token_id": [59246, 59253, 59255],
         "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}})"},
    {"voxtral",  // VoxtralConfig
     R"({"vocab_size": 131072, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 30,
         "num_key_value_heads": 8, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
         "use_cache": true, "rope_theta": 100000000.0, "head_dim": 128})"},
    {"voxtral_realtime",  // VoxtralRealtimeConfig
     R"({"vocab_size": 131072, "hidden_size": 3072, "intermediate_size": 9216, "num_hidden_layers": 26,
         "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
         "rms_norm_eps": 1e-05, "use_cache": true, "rope_theta": 1000000.0, "head_dim": 128,
         "tie_word_embeddings": true, "sliding_window": 8192})"},
    {"pe_audio", kPeText},        // PeAudioConfig
    {"pe_audio_video", kPeText},  // PeAudioVideoConfig
    {"pe_video", kPeText},        // PeVideoConfig
};

// Wrappers whose __post_init__ builds text_config from a flat config's top-level keys (the config class named
// per entry).
const char* const kWrappersReadingFlatKeys[] = {
    "dots3_note",    // Dots3NoteConfig
    "fuyu",          // FuyuConfig (some keys only: refused flat, kWrapperFlatRefusals)
    "glm5_next",     // Glm5NextConfig
    "hunyuan_vl",    // HunYuanVLConfig
    "paddleocr_vl",  // PaddleOCRVLConfig
    "qwen2_5_vl",    // Qwen2_5_VLConfig
    "qwen2_vl",      // Qwen2VLConfig
};

// Wrappers that build one text model whatever text_config says.
const char* const kWrapperFixedTextTypes[][2] = {
    // Step3p7Config.__post_init__ pops text_config.model_type (configuration_step3p7.py): its text model is
    // always step3p5's.
    {"step3p7", "step3p5"},
};

// Wrappers whose config class reads a flat config's top-level keys only in part: refused flat, with why.
const char* const kWrapperFlatRefusals[][2] = {
    {"fuyu",
     "model_type 'fuyu' without text_config is not read: FuyuConfig builds its persimmon text model "
     "from some of the top-level keys only (FuyuConfig.__post_init__). Pass the text model's keys "
     "as text_config, or a persimmon config"},
};

// Multimodal masks a wrapper's model adds over its text model's causal layers, which the caller's mask must
// add: a prefix-LM (read in place of its text config's use_bidirectional_attention), or bidirectional blocks.
const char* const kWrapperPrefixLmNotes[][2] = {
    // PaliGemmaConfig.__post_init__ sets text_config.use_bidirectional_attention, but the mask is PaliGemma's
    // own: causal, with the prefix (token_type_ids == 0: image and prompt) bidirectional.
    {"paligemma",
     "paligemma: the prefix (image tokens and prompt, token_type_ids 0) attends both ways (prefix-LM), "
     "which the caller's mask must add; and its positions start at 1 (position_ids = arange + 1: the "
     "same attention, other rotated keys); layers shown causal"},
};
const char* const kWrapperBlockMaskNotes[][2] = {
    // Molmo2Model: one block of every image / frame token in prefill (flat or not: the file means the
    // multimodal model).
    {"molmo2",
     "molmo2: in prefill its image and frame tokens (mm_token_type_ids 1) attend to each other both "
     "ways, as one block, which the caller's mask must add; text layers shown causal"},
    // Gemma3Model: each image's tokens attend to each other both ways (get_block_sequence_ids_for_mask).
    {"gemma3",
     "gemma3: each image's tokens attend to each other both ways (token_type_ids 1), which the caller's "
     "mask must add; text layers shown causal"},
};

template <size_t N>
const char* lookup(const char* const (&table)[N][2], const std::string& outer) {
  for (const auto& w : table)
    if (outer == w[0]) return w[1];
  return nullptr;
}
}  // namespace

std::string wrapper_fixed_text_type(const std::string& outer) {
  const char* fixed = lookup(kWrapperFixedTextTypes, outer);
  return fixed ? fixed : "";
}
const char* wrapper_flat_refusal(const std::string& outer) { return lookup(kWrapperFlatRefusals, outer); }
const char* wrapper_prefix_lm_note(const std::string& outer) { return lookup(kWrapperPrefixLmNotes, outer); }
const char* wrapper_block_mask_note(const std::string& outer) {
  return lookup(kWrapperBlockMaskNotes, outer);
}

bool wrapper_reads_flat_keys(const std::string& outer) {
  for (const char* w : kWrappersReadingFlatKeys)
    if (outer == w) return true;
  return false;
}

// A wrapper's text_config as its config class passes it on: the dict, over kWrapperTextKwargs's keys.
json wrapper_text_config(const std::string& outer, const json& text_config) {
  for (const auto& w : kWrapperTextKwargs)
    if (outer == w[0]) {
      json out = json::parse(w[1]);
      for (auto it = text_config.begin(); it != text_config.end(); ++it) out[it.key()] = it.value();
      return out;
    }
  return text_config;
}

// The text class's model_type of a wrapper in kWrapperTextClasses, or nullptr.
const char* wrapper_text_class(const std::string& outer) {
  for (const auto& w : kWrapperTextClasses)
    if (outer == w[0]) return w[1];
  return nullptr;
}

// The default text model_type of a wrapper in kWrapperDefaultTextTypes, or nullptr.
const char* wrapper_default_text_type(const std::string& outer) {
  for (const auto& w : kWrapperDefaultTextTypes)
    if (outer == w[0]) return w[1];
  return nullptr;
}

// The model_type transformers builds a wrapper's text_config as: its concrete text class's (the dict's
// model_type ignored), else the dict's model_type (AutoConfig specs), else the AutoConfig spec's default,
// else the wrapper's own type.
std::string wrapper_text_type(const std::string& outer, const json& text_config) {
  if (const char* cls = wrapper_text_class(outer)) return cls;
  if (has(text_config, "model_type") && text_config.at("model_type").is_string())
    return text_config.at("model_type").get<std::string>();
  if (const char* fallback = wrapper_default_text_type(outer)) return fallback;
  return outer;
}

}  // namespace posenc::detail
