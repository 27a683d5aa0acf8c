// src/model/wrappers.cc: the model_type transformers 5.23 builds a multimodal wrapper's text_config as,
// and the keys its config class fills in: SubConfigSpec.create_subconfig (configuration_utils.py L248-256)
// and each wrapper's __post_init__, the line cited per entry.
#include <nlohmann/json.hpp>
#include <string>

#include "src/model/parse.h"

namespace posenc::detail {
namespace {
// Wrappers whose config class names a concrete text class in sub_configs_defaults (the line cited: its
// "text_config" entry). SubConfigSpec.create_subconfig (configuration_utils.py L248-256) maps a dict's
// model_type to a class only for AutoConfig specs: a concrete class builds text_config whatever model_type
// the dict has (or lacks), and to_dict writes the class's model_type. Every such wrapper of transformers 5.23
// is listed, supported text family or not, so that an unsupported one is refused by its own name.
const char* const kWrapperTextClasses[][2] = {
    {"aimv2", "aimv2_text_model"},                      // configuration_aimv2.py L144
    {"align", "align_text_model"},                      // configuration_align.py L192
    {"altclip", "altclip_text_model"},                  // configuration_altclip.py L155
    {"aria", "aria_text"},                              // configuration_aria.py L122
    {"blip", "blip_text_model"},                        // configuration_blip.py L146
    {"bridgetower", "bridgetower_text_model"},          // configuration_bridgetower.py L132
    {"chinese_clip", "chinese_clip_text_model"},        // configuration_chinese_clip.py L154
    {"clap", "clap_text_model"},                        // configuration_clap.py L173
    {"clip", "clip_text_model"},                        // configuration_clip.py L158
    {"clipseg", "clipseg_text_model"},                  // configuration_clipseg.py L163
    {"clvp", "clvp_encoder"},                           // configuration_clvp.py L219
    {"cohere_compass", "cohere_compass_text"},          // configuration_cohere_compass.py L167
    {"cosmos3_edge", "cosmos3_edge_text"},              // configuration_cosmos3_edge.py L160
    {"deepseek_ocr2", "deepseek_ocr2_text"},            // configuration_deepseek_ocr2.py L273
    {"diffusion_gemma", "diffusion_gemma_text"},        // configuration_diffusion_gemma.py L200
    {"dots3_note", "dots3_note_text"},                  // configuration_dots3_note.py L394
    {"embedding_gemma2", "embedding_gemma2_text"},      // configuration_embedding_gemma2.py L162
    {"emu3", "emu3_text_model"},                        // configuration_emu3.py L133
    {"ernie4_5_vl_moe", "ernie4_5_vl_moe_text"},        // configuration_ernie4_5_vl_moe.py L193
    {"flava", "flava_text_model"},                      // configuration_flava.py L239
    {"gemma3", "gemma3_text"},                          // configuration_gemma3.py L202
    {"gemma3n", "gemma3n_text"},                        // configuration_gemma3n.py L471
    {"gemma4", "gemma4_text"},                          // configuration_gemma4.py L365
    {"gemma4_unified", "gemma4_unified_text"},          // configuration_gemma4_unified.py L326
    {"glm4v", "glm4v_text"},                            // configuration_glm4v.py L161
    {"glm4v_moe", "glm4v_moe_text"},                    // configuration_glm4v_moe.py L196
    {"glm5_next", "glm5_next_text"},                    // configuration_glm5_next.py L293
    {"glm_image", "glm_image_text"},                    // configuration_glm_image.py L171
    {"glm_ocr", "glm_ocr_text"},                        // configuration_glm_ocr.py L162
    {"granite4_vision", "granite4_vision_text"},        // configuration_granite4_vision.py L126
    {"granite_docling", "granite_docling_text"},        // configuration_granite_docling.py L173
    {"groupvit", "groupvit_text_model"},                // configuration_groupvit.py L135
    {"hunyuan_vl", "hunyuan_vl_text"},                  // configuration_hunyuan_vl.py L263
    {"inkling2", "inkling2_text"},                      // configuration_inkling2.py L201
    {"inkling_mm_model", "inkling_text"},               // configuration_inkling.py L266
    {"kosmos-2", "kosmos_2_text_model"},                // configuration_kosmos2.py L103
    {"kosmos-2.5", "kosmos_2_5_text_model"},            // configuration_kosmos2_5.py L113
    {"llama4", "llama4_text"},                          // configuration_llama4.py L226
    {"metaclip_2", "metaclip_2_text_model"},            // configuration_metaclip_2.py L157
    {"minimax_m3_vl", "minimax_m3_vl_text"},            // configuration_minimax_m3_vl.py L190
    {"mistral_large4", "mistral_large4_text"},          // configuration_mistral_large4.py L249
    {"mllama", "mllama_text_model"},                    // configuration_mllama.py L177
    {"molmo2", "molmo2_text"},                          // configuration_molmo2.py L196
    {"muse_glimmer", "muse_glimmer_text"},              // configuration_muse_glimmer.py L198
    {"muse_spark", "muse_spark_text"},                  // configuration_muse_spark.py L275
    {"owlv2", "owlv2_text_model"},                      // configuration_owlv2.py L107
    {"owlvit", "owlvit_text_model"},                    // configuration_owlvit.py L104
    {"paddleocr_vl", "paddleocr_vl_text"},              // configuration_paddleocr_vl.py L164
    {"pix2struct", "pix2struct_text_model"},            // configuration_pix2struct.py L172
    {"pp_formulanet", "pp_formulanet_text"},            // configuration_pp_formulanet.py L133
    {"qwen2_5_omni_thinker", "qwen2_5_omni_text"},      // configuration_qwen2_5_omni.py L256
    {"qwen2_5_vl", "qwen2_5_vl_text"},                  // configuration_qwen2_5_vl.py L182
    {"qwen2_vl", "qwen2_vl_text"},                      // configuration_qwen2_vl.py L159
    {"qwen3_5", "qwen3_5_text"},                        // configuration_qwen3_5.py L174
    {"qwen3_5_moe", "qwen3_5_moe_text"},                // configuration_qwen3_5_moe.py L186
    {"qwen3_omni_moe_thinker", "qwen3_omni_moe_text"},  // configuration_qwen3_omni_moe.py L223
    {"qwen3_vl", "qwen3_vl_text"},                      // configuration_qwen3_vl.py L130
    {"qwen3_vl_moe", "qwen3_vl_moe_text"},              // configuration_qwen3_vl_moe.py L177
    {"qwen4_exp", "qwen4_exp_text"},                    // configuration_qwen4_exp.py L308
    {"sam3_lite_text", "sam3_lite_text_text_model"},    // configuration_sam3_lite_text.py L178
    {"siglip", "siglip_text_model"},                    // configuration_siglip.py L137
    {"siglip2", "siglip2_text_model"},                  // configuration_siglip2.py L146
    {"step3p7", "step3p5"},                             // configuration_step3p7.py L319
    {"t5gemma2_encoder", "t5gemma2_text"},              // configuration_t5gemma2.py L184
    {"tipsv2", "tipsv2_text_model"},                    // configuration_tipsv2.py L168
    {"unlimited_ocr", "unlimited_ocr_text"},            // configuration_unlimited_ocr.py L280
    {"videoprism", "videoprism_text_model"},            // configuration_videoprism.py L126
    {"xclip", "xclip_text_model"},                      // configuration_x_clip.py L138
};

// Wrappers whose sub_configs_defaults give text_config an AutoConfig spec with a default model_type
// (SubConfigSpec(config_class=AutoConfig, model_type=...), the line cited). create_subconfig
// (configuration_utils.py L248-256) builds a text_config dict as the class of its own model_type, and as
// the default's class, from the dict's keys alone (the spec's init_kwargs only fill an absent text_config,
// which posenc refuses by the wrapper's name as for kWrapperTextClasses), when it has none. Every such
// wrapper of transformers 5.23 is listed, so that an unsupported default is refused by its own name, except
// exaone4_5: Exaone4_5_Config.__post_init__ reads text_config["model_type"] (configuration_exaone4_5.py L80)
// and fails without one, and posenc refuses it by the wrapper's name.
const char* const kWrapperDefaultTextTypes[][2] = {
    {"audioflamingo3", "qwen2"},                          // configuration_audioflamingo3.py L99
    {"aya_vision", "cohere2"},                            // configuration_aya_vision.py L49
    {"blip-2", "opt"},                                    // configuration_blip_2.py L149
    {"cohere2_vision", "cohere2"},                        // configuration_cohere2_vision.py L46
    {"cosmos3_omni", "qwen3_vl_text"},                    // configuration_cosmos3_omni.py L51
    {"deepseek_vl", "llama"},                             // configuration_deepseek_vl.py L51
    {"deepseek_vl_hybrid", "llama"},                      // configuration_deepseek_vl_hybrid.py L54
    {"fast_vlm", "qwen2"},                                // configuration_fast_vlm.py L63
    {"florence2", "bart"},                                // configuration_florence2.py L111
    {"fun_asr_nano", "qwen3"},                            // configuration_fun_asr_nano.py L89
    {"fuyu", "persimmon"},                                // configuration_fuyu.py L41
    {"gemma4_assistant", "gemma4_text"},                  // configuration_gemma4_assistant.py L64
    {"gemma4_unified_assistant", "gemma4_unified_text"},  // configuration_gemma4_unified_assistant.py L59
    {"glm46v", "glm4v_text"},                             // configuration_glm46v.py L56
    {"glmasr", "llama"},                                  // configuration_glmasr.py L85
    {"glmga", "glm4v_text"},                              // configuration_glmga.py L56
    {"got_ocr2", "qwen2"},                                // configuration_got_ocr2.py L91
    {"granite_speech", "granite"},                        // configuration_granite_speech.py L114
    {"granite_speech_plus", "granite"},                   // configuration_granite_speech_plus.py L125
    {"grounding-dino", "bert"},                           // configuration_grounding_dino.py L87
    {"hyperclovax_vision_v2", "hyperclovax"},             // configuration_hyperclovax_vision_v2.py L48
    {"idefics2", "mistral"},                              // configuration_idefics2.py L117
    {"idefics3", "llama"},                                // configuration_idefics3.py L81
    {"instructblip", "opt"},                              // configuration_instructblip.py L146
    {"instructblipvideo", "opt"},                         // configuration_instructblipvideo.py L150
    {"internvl", "qwen2"},                                // configuration_internvl.py L110
    {"janus", "llama"},                                   // configuration_janus.py L130
    {"jev", "qwen3_5_text"},                              // configuration_jev.py L121
    {"kimi_k25", "deepseek_v3"},                          // configuration_kimi_k25.py L69
    {"lfm2_vl", "lfm2"},                                  // configuration_lfm2_vl.py L36
    {"lfm3_vl", "lfm3"},                                  // configuration_lfm3_vl.py L67
    {"lighton_ocr", "qwen3"},                             // configuration_lighton_ocr.py L69
    {"llava", "llama"},                                   // configuration_llava.py L67
    {"llava_next", "llama"},                              // configuration_llava_next.py L56
    {"llava_next_video", "llama"},                        // configuration_llava_next_video.py L81
    {"llava_onevision", "qwen2"},                         // configuration_llava_onevision.py L74
    {"minicpm_ocr", "qwen3_5_text"},                      // configuration_minicpm_ocr.py L81
    {"minicpmv4_6", "qwen3_5_text"},                      // configuration_minicpmv4_6.py L88
    {"minicpmv4_7", "qwen3_5_text"},                      // configuration_minicpmv4_7.py L100
    {"mistral3", "mistral"},                              // configuration_mistral3.py L52
    {"mm-grounding-dino", "bert"},                        // configuration_mm_grounding_dino.py L89
    {"modernvbert", "modernbert"},                        // configuration_modernvbert.py L62
    {"moss_transcribe_diarize", "qwen3"},                 // configuration_moss_transcribe_diarize.py L98
    {"musicflamingo", "qwen2"},                           // configuration_musicflamingo.py L64
    {"nemo_speechlm", "nemotron_h"},                      // configuration_nemotron3_5_transcribe.py L251
    {"nemotron_h_omni", "nemotron_h"},                    // configuration_nemotron_h_omni.py L61
    {"omdet-turbo", "clip_text_model"},                   // configuration_omdet_turbo.py L109
    {"ovis2", "qwen2"},                                   // configuration_ovis2.py L80
    {"paligemma", "gemma"},                               // configuration_paligemma.py L64
    {"pe_audio", "modernbert"},                           // configuration_pe_audio.py L107
    {"pe_audio_video", "modernbert"},                     // configuration_pe_audio_video.py L98
    {"pe_video", "modernbert"},                           // configuration_pe_video.py L106
    {"perception_lm", "llama"},                           // configuration_perception_lm.py L34
    {"pp_chart2table", "qwen2"},                          // configuration_pp_chart2table.py L90
    {"qianfan_ocr", "qwen3"},                             // configuration_qianfan_ocr.py L115
    {"qwen2_audio", "qwen2"},                             // configuration_qwen2_audio.py L95
    {"qwen3_asr", "qwen3"},                               // configuration_qwen3_asr.py L101
    {"sam3", "clip_text_model"},                          // configuration_sam3.py L230
    {"shieldgemma2", "gemma3_text"},                      // configuration_shieldgemma2.py L65
    {"smolvlm", "llama"},                                 // configuration_smolvlm.py L89
    {"ultravbert", "ultrabert"},                          // configuration_ultravbert.py L44
    {"vibevoice", "qwen2"},                               // configuration_vibevoice.py L78
    {"vibevoice_asr", "qwen2"},                           // configuration_vibevoice_asr.py L68
    {"video_llama_3", "qwen2"},                           // configuration_video_llama_3.py L68
    {"video_llava", "llama"},                             // configuration_video_llava.py L58
    {"vipllava", "llama"},                                // configuration_vipllava.py L58
    {"vision-text-dual-encoder", "bert"},                 // configuration_vision_text_dual_encoder.py L55
    {"voxtral", "llama"},                                 // configuration_voxtral.py L95
    {"voxtral_realtime", "voxtral_realtime_text"},        // configuration_voxtral_realtime.py L150
};

// AutoConfig wrappers whose __post_init__ fills a text_config dict's absent keys from their spec's
// init_kwargs (`{**init_kwargs, **text_config}`, the line cited), typed or not: those keys, not the text
// class's defaults, are what transformers builds the text model from.
constexpr const char* kPeText =
    R"({"hidden_size": 1024, "intermediate_size": 2624, "num_hidden_layers": 22, "num_attention_heads": 16})";
const char* const kWrapperTextKwargs[][2] = {
    {"glmasr",  // configuration_glmasr.py L113
     R"({"vocab_size": 59264, "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28,
         "num_attention_heads": 16, "num_key_value_heads": 4, "max_position_embeddings": 8192,
         "rms_norm_eps": 1e-05, "use_cache": true, "eos_token_id": [59246, 59253, 59255],
         "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}})"},
    {"voxtral",  // configuration_voxtral.py L122
     R"({"vocab_size": 131072, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 30,
         "num_key_value_heads": 8, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
         "use_cache": true, "rope_theta": 100000000.0, "head_dim": 128})"},
    {"voxtral_realtime",  // configuration_voxtral_realtime.py L184
     R"({"vocab_size": 131072, "hidden_size": 3072, "intermediate_size": 9216, "num_hidden_layers": 26,
         "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
         "rms_norm_eps": 1e-05, "use_cache": true, "rope_theta": 1000000.0, "head_dim": 128,
         "tie_word_embeddings": true, "sliding_window": 8192})"},
    {"pe_audio", kPeText},        // configuration_pe_audio.py L127
    {"pe_audio_video", kPeText},  // configuration_pe_audio_video.py L118
    {"pe_video", kPeText},        // configuration_pe_video.py L126
};

// Wrappers whose __post_init__ builds text_config from a flat config's top-level keys (the line cited).
const char* const kWrappersReadingFlatKeys[] = {
    "dots3_note",    // configuration_dots3_note.py L409-411
    "fuyu",          // configuration_fuyu.py L75-82 (some keys only: refused flat, kWrapperFlatRefusals)
    "glm5_next",     // configuration_glm5_next.py L308-311
    "hunyuan_vl",    // configuration_hunyuan_vl.py L281-290
    "paddleocr_vl",  // configuration_paddleocr_vl.py L179-185
    "qwen2_5_vl",    // configuration_qwen2_5_vl.py L196-202
    "qwen2_vl",      // configuration_qwen2_vl.py L173-179
};

// Wrappers that build one text model whatever text_config says (the line cited).
const char* const kWrapperFixedTextTypes[][2] = {
    // Step3p7Config pops text_config.model_type (configuration_step3p7.py L331-332): its text model is
    // always step3p5's.
    {"step3p7", "step3p5"},
};

// Wrappers whose config class reads a flat config's top-level keys only in part: refused flat, with why.
const char* const kWrapperFlatRefusals[][2] = {
    {"fuyu",
     "model_type 'fuyu' without text_config is not read: FuyuConfig builds its persimmon text model "
     "from some of the top-level keys only (configuration_fuyu.py L75-82). Pass the text model's keys "
     "as text_config, or a persimmon config"},
};

// Multimodal masks a wrapper's model adds over its text model's causal layers, which the caller's mask must
// add: a prefix-LM (read in place of its text config's use_bidirectional_attention), or bidirectional blocks.
const char* const kWrapperPrefixLmNotes[][2] = {
    // PaliGemmaConfig sets text_config.use_bidirectional_attention (L90-93), but the mask is PaliGemma's
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
