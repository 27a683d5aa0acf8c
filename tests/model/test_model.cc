// tests/model/test_model.cc: ModelPositions from real HuggingFace config.json files (tests/data/hf_configs,
// sources in SOURCES.md) and from small fixtures for the config forms no collected file shows.
// Expected values are derived by hand from transformers 5.23.0 (file/function named per test).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "model_plan.h"
#include "posenc/error.h"
#include "posenc/model.h"
#include "posenc/rope.h"

namespace posenc {
namespace {

using test::expect_plan_error;

const std::string kDir = std::string(POSENC_TEST_DATA_DIR) + "/hf_configs/";

ModelPositions load(const std::string& file) { return model_positions_from_hf_file(kDir + file); }

using test::has_warning;

// Every collected config: parsed (type, layer count, layer 0's method, base, rotary range, window)
// or refused with a message naming its model_type.
struct RealCase {
  const char* file;
  const char* type;  // expected model_type, or the refused type
  int64_t layers;    // 0 = refused
  const char* position0;
  double base0;
  int64_t lo0, hi0, window0, chunk0;
  const char* warning;  // a warning that must be present, or ""
};

// clang-format off
const RealCase kReal[] = {
  {"baichuan__Baichuan2-13B-Chat.json", "baichuan", 40, "alibi", 0, 0, 0, 0, 0, "torch_dtype = bfloat16"},
  {"baichuan__Baichuan2-7B-Base.json", "baichuan", 32, "rope", 1e4, 0, 128, 0, 0, ""},
  {"baichuan__Baichuan-13B-Base.json", "baichuan", 40, "alibi", 0, 0, 0, 0, 0, "torch_dtype = bfloat16"},
  {"baichuan__Baichuan-13B-Chat.json", "baichuan", 40, "alibi", 0, 0, 0, 0, 0, "torch_dtype = bfloat16"},
  // hub test models (hf-tiny-v2, tiny-random: SOURCES.md, eighth collection)
  {"cohere_compass_text__tiny-random-CohereCompassTextForSequenceClassification.json",
   "cohere_compass_text", 2, "rope", 1e4, 0, 8, 0, 0, "rope_parameters.rope_theta = 10000.0 is not read"},
  {"cohere_compass__tiny-random-CohereCompassForConditionalGeneration.json",
   "cohere_compass_text", 2, "rope", 1e4, 0, 8, 0, 0, "rope_parameters.rope_theta = 10000.0 is not read"},
  {"zaya__zaya1.json", "zaya", 0, "", 0, 0, 0, 0, 0, ""},  // rope_scaling false: transformers 5.23 fails too
  // (SOURCES.md); the ktransformers Llama 4 copy is flat (no text_config)
  {"granitemoe__granite-3.1-1b-a400m-instruct.json", "granitemoe", 24, "rope", 1.5e6, 0, 64, 0, 0, ""},
  {"olmo2__OLMo-2-1124-13B-Instruct.json", "olmo2", 40, "rope", 5e5, 0, 128, 0, 0, ""},
  {"kimi_k25__Kimi-K2.5-NVFP4.json", "deepseek_v3", 61, "rope", 5e4, 128, 192, 0, 0,
   "\"kimi_k2\" is read as deepseek_v3"},
  {"laguna__Laguna-S-2.1-FP8.json", "laguna", 48, "rope", 5e5, 0, 64, 0, 0, ""},
  {"qwen3.5__Qwen3.5-27B.json", "qwen3_5", 64, "none", 0, 0, 0, 0, 0, ""},
  {"gemma3__gemma-3-27b-neuron-resave.json", "gemma3_text", 62, "rope", 1e4, 0, 128, 1024, 0,
   "each image's tokens attend to each other both ways"},
  {"llama4__Llama-4-Scout-ktransformers-flattened.json", "llama4_text", 48, "rope", 5e5, 0, 128, 0, 8192,
   "'llama4' without text_config"},
  // (SOURCES.md)
  {"llama__Llama-3.3-70B-Instruct.json", "llama", 80, "rope", 5e5, 0, 128, 0, 0, ""},
  {"mixtral__Mixtral-8x22B-v0.1.json", "mixtral", 56, "rope", 1e6, 0, 128, 0, 0, ""},
  {"qwen3_moe__Qwen3-30B-A3B-FP8.json", "qwen3_moe", 48, "rope", 1e6, 0, 128, 0, 0, ""},
  {"qwen3_moe__Qwen3-Coder-480B-A35B-Instruct.json", "qwen3_moe", 62, "rope", 1e7, 0, 128, 0, 0, ""},
  {"kimi_k2__Kimi-K2-Instruct.json", "deepseek_v3", 61, "rope", 5e4, 128, 192, 0, 0,
   "model_type 'kimi_k2' (remote code"},
  {"deepseek_v32__DeepSeek-V3.2-NVFP4.json", "deepseek_v32", 61, "rope", 1e4, 128, 192, 0, 0,
   "indexed_attention (DeepSeek sparse attention)"},
  {"gemma4__gemma-4-26B-A4B.json", "gemma4_text", 30, "rope", 1e4, 0, 256, 1024, 0, "image tokens attend"},
  {"nemotron_h__NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4.json", "nemotron_h", 88, "none", 0, 0, 0, 0, 0,
   "rope_theta is not used"},
  {"glm_moe_dsa__GLM-5.1.json", "glm_moe_dsa", 78, "rope", 1e6, 192, 256, 0, 0,
   "indexed_attention (DeepSeek sparse attention)"},
  {"glm4_moe__GLM-4.5-Air.json", "glm4_moe", 46, "rope", 1e6, 0, 64, 0, 0, ""},
  {"gpt_oss__gpt-oss-20b.json", "gpt_oss", 24, "rope", 1.5e5, 0, 64, 128, 0, ""},
  {"bert__bert-base-uncased-finetuned-seqcls.json", "bert", 12, "learned", 0, 0, 0, 0, 0, ""},
  {"chatglm__chatglm2-6b.json", "chatglm", 28, "rope", 1e4, 0, 64, 0, 0, "torch_dtype = float16"},
  {"cohere__c4ai-command-r-v01.json", "cohere", 40, "rope", 8e6, 0, 128, 0, 0, ""},
  {"deepseek-v3__DeepSeek-V3.json", "deepseek_v3", 61, "rope", 1e4, 128, 192, 0, 0, ""},
  {"deepseek-v4__DeepSeek-V4-Flash-NVFP4.json", "deepseek_v4", 43, "rope", 1e4, 448, 512, 128, 0, ""},
  {"exaone4.5__EXAONE-4.5-33B.json", "exaone4", 64, "rope", 1e6, 0, 128, 4096, 0, ""},
  {"exaone4__EXAONE-4.0-32B.json", "exaone4", 64, "rope", 1e6, 0, 128, 4096, 0, ""},
  {"gemma3__gemma-3-27b-it.json", "gemma3_text", 62, "rope", 1e4, 0, 128, 1024, 0, 
   "each image's tokens attend to each other both ways"},
  {"gemma3__gemma-3-4b-it.json", "gemma3_text", 34, "rope", 1e4, 0, 256, 1024, 0, 
   "each image's tokens attend to each other both ways"},
  {"glm4-moe__GLM-4.5.json", "glm4_moe", 92, "rope", 1e6, 0, 64, 0, 0, ""},
  {"gpt-oss__gpt-oss-120b.json", "gpt_oss", 36, "rope", 1.5e5, 0, 64, 128, 0, ""},
  {"gpt2__gpt2-large.json", "gpt2", 36, "learned", 0, 0, 0, 0, 0, ""},
  {"laguna__Laguna-XS.2-FP8.json", "laguna", 40, "rope", 5e5, 0, 64, 0, 0,
   "original_max_position_embeddings = 4096"},
  {"lfm2-vl__LFM2.5-VL-1.6B.json", "lfm2", 16, "none", 0, 0, 0, 0, 0, ""},
  {"llama2__Llama-2-7b-chat-hf.json", "llama", 32, "rope", 1e4, 0, 128, 0, 0, ""},
  {"llama3__Llama-3.1-70B-Instruct.json", "llama", 80, "rope", 5e5, 0, 128, 0, 0, ""},
  {"llama3__Llama-3.1-8B-Instruct.json", "llama", 32, "rope", 5e5, 0, 128, 0, 0, ""},
  {"llama3__Llama-3.2-1B-Instruct.json", "llama", 16, "rope", 5e5, 0, 64, 0, 0, ""},
  {"llama3__Llama-3.2-3B-Instruct.json", "llama", 28, "rope", 5e5, 0, 128, 0, 0, ""},
  {"llama4__Llama-4-Maverick-17B-128E-Instruct.json", "llama4_text", 48, "rope", 5e5, 0, 128, 0, 8192, ""},
  {"llama4__Llama-4-Scout-17B-16E-Instruct.json", "llama4_text", 48, "rope", 5e5, 0, 128, 0, 8192,
   "low_freq_factor == high_freq_factor"},
  {"llama__ALLaM-7B-Instruct-preview.json", "llama", 32, "rope", 1e6, 0, 128, 0, 0, ""},
  {"minicpmv__MiniCPM-V-4.json", "minicpmv", 32, "rope", 1e4, 0, 128, 0, 0, ""},
  {"minicpm__MiniCPM-2B-sft-bf16.json", "minicpm", 40, "rope", 1e4, 0, 64, 0, 0, "model_type is missing"},
  {"minicpm__MiniCPM-2B-128k.json", "minicpm", 40, "rope", 1e6, 0, 64, 0, 0, "rope_scaling 'dynamic'"},
  {"minicpm__MiniCPM-S-1B-sft.json", "minicpm", 52, "rope", 1e4, 0, 64, 0, 0, "model_type is missing"},
  {"minicpm__MiniCPM-Embedding.json", "minicpm", 40, "rope", 1e4, 0, 64, 0, 0, "model_type is missing"},
  {"minicpm__SLM_qlora-MiniCPM-1B-sft-bf16.json", "minicpm", 52, "rope", 1e4, 0, 64, 0, 0, ""},
  {"ministral3__Devstral-2-123B-Instruct.json", "ministral3", 88, "rope", 1e6, 0, 128, 0, 0, ""},
  {"mistral3__Devstral-Small-2-24B-Instruct.json", "ministral3", 40, "rope", 1e8, 0, 128, 0, 0, ""},
  {"mistral__Mistral-7B-Instruct-v0.3.json", "mistral", 32, "rope", 1e6, 0, 128, 0, 0, ""},
  {"mixtral__Mixtral-8x7B-v0.1.json", "mixtral", 32, "rope", 1e6, 0, 128, 0, 0, ""},
  {"mllama__Llama-3.2-90B-Vision-Instruct.json", "mllama_text_model", 100, "rope", 5e5, 0, 128, 0, 0, ""},
  {"olmo3__Olmo-3.1-32B-Instruct.json", "olmo3", 64, "rope", 5e5, 0, 128, 4096, 0, ""},
  {"phi1__phi-1.json", "phi", 24, "rope", 1e4, 0, 32, 0, 0, ""},
  {"phi2__phi-2.json", "phi", 32, "rope", 1e4, 0, 32, 0, 0, ""},
  {"phi4__phi-4.json", "phi3", 40, "rope", 2.5e5, 0, 128, 0, 0, ""},
  {"qwen2-vl__Qwen2-VL-2B-Instruct-AWQ.json", "qwen2_vl", 28, "rope", 1e6, 0, 128, 0, 0, ""},
  {"qwen2.5-vl__Qwen2.5-VL-7B-Instruct.json", "qwen2_5_vl", 28, "rope", 1e6, 0, 128, 0, 0, ""},
  {"qwen2.5-vl__olmOCR-2-7B-1025.json", "qwen2_5_vl", 28, "rope", 1e6, 0, 128, 0, 0,
   "top-level key 'sliding_window' is ignored"},  // 32768 at the top, null in text_config
  {"qwen2.5__Qwen2.5-32B-Instruct.json", "qwen2", 64, "rope", 1e6, 0, 128, 0, 0, ""},
  {"qwen2.5__Qwen2.5-7B-Instruct.json", "qwen2", 28, "rope", 1e6, 0, 128, 0, 0, ""},
  {"qwen3-next__Qwen3-Next-80B-A3B-Thinking.json", "qwen3_next", 48, "none", 0, 0, 0, 0, 0, ""},
  {"qwen3.5__Qwen3.5-9B.json", "qwen3_5", 32, "none", 0, 0, 0, 0, 0, ""},
  {"qwen3__Qwen3-32B.json", "qwen3", 64, "rope", 1e6, 0, 128, 0, 0, ""},
  {"qwen3__Qwen3-8B.json", "qwen3", 36, "rope", 1e6, 0, 128, 0, 0, ""},
  {"qwen3__Qwen3-Embedding-0.6B.json", "qwen3", 28, "rope", 1e6, 0, 128, 0, 0, ""},
  {"qwen__Qwen-7B-Chat.json", "qwen", 32, "rope", 1e4, 0, 128, 0, 0, ""},
  {"t5__t5-small.json", "t5", 12, "t5", 0, 0, 0, 0, 0, ""},
  {"voxtral__Voxtral-Mini-3B-2507.json", "llama", 30, "rope", 1e8, 0, 128, 0, 0, ""},
  {"gemma2__gemma-2-9b-it.json", "gemma2", 42, "rope", 1e4, 0, 256, 4096, 0,
   "key 'sliding_window_size' is ignored"},  // an early hub revision's legacy key
  {"smollm3__SmolLM3-3B.json", "smollm3", 36, "rope", 5e6, 0, 128, 0, 0, ""},
  {"llama__CodeLlama-7b-hf.json", "llama", 32, "rope", 1e6, 0, 128, 0, 0, ""},
  {"bloom__bloom-3b.json", "bloom", 30, "alibi", 0, 0, 0, 0, 0, "key 'offset_alibi' is ignored"},
  {"glm4v__GLM-4.1V-9B-Thinking.json", "glm4v_text", 40, "rope", 1e4, 0, 64, 0, 0, "without text_config"},
  {"gpt-neo__gpt-j-6B-rotary-fork.json", "gpt_neo", 0, "", 0, 0, 0, 0, 0, ""},
  // Second collection. gptj: configuration_gptj.py has no `rotary` field (an inert key).
  {"gpt-j__gpt-j-6b.json", "gptj", 28, "rope", 1e4, 0, 64, 0, 0, "key 'rotary' is ignored"},
  {"gpt-neox__gpt-neox-20b.json", "gpt_neox", 44, "rope", 1e4, 0, 24, 0, 0, ""},  // 96 * rotary_pct 0.25
  {"gpt-neox__pythia-410m-chatbot.json", "gpt_neox", 24, "rope", 1e4, 0, 16, 0, 0,
   "partial_rotary_factor is ignored by gpt_neox"},  // rotary_pct wins (configuration_gpt_neox.py)
  {"falcon__falcon-40b-RefinedWeb.json", "RefinedWeb", 60, "rope", 1e4, 0, 64, 0, 0,
   "from position 0 (no cache offset)"},
  {"falcon__falcon-7b-RefinedWeb-early.json", "RefinedWeb", 32, "rope", 1e4, 0, 64, 0, 0,
   "from position 0 (no cache offset)"},
  {"mpt__mpt-7b-instruct.json", "mpt", 32, "alibi", 0, 0, 0, 0, 0, ""},
  // MiMo-V2-Flash: layer 0 full (base 5e6, 64 of 192 dims), its SGLang keys agreeing with transformers'.
  {"mimo-v2-flash__MiMo-V2-Flash.json", "mimo_v2_flash", 48, "rope", 5e6, 0, 64, 0, 0, ""},
  // Nemotron-H: layer 0 is Mamba (no attention, no positions); tests/model/test_model_hybrids.cc has the rest.
  {"nemotron-h__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json", "nemotron_h", 52, "none", 0, 0, 0, 0, 0,
   "rope_theta is not used"},
  {"nemotron-h__Nemotron-H-56B-Base-8K.json", "nemotron_h", 118, "none", 0, 0, 0, 0, 0, ""},
  {"phi3__Phi-3-mini-128k-instruct.json", "phi3", 32, "rope", 1e4, 0, 96, 262144, 0, ""},
  {"deepseek-v2__DeepSeek-V2-Lite.json", "deepseek_v2", 27, "rope", 1e4, 128, 192, 0, 0, ""},
  {"minicpm3__MiniCPM3-4B.json", "minicpm3", 62, "rope", 1e4, 64, 96, 0, 0, ""},
  {"stablelm__stable-code-3b.json", "stablelm_epoch", 32, "rope", 1e6, 0, 20, 0, 0, ""},
  {"gemma__gemma-2b-it-prerelease.json", "gemma", 18, "rope", 1e4, 0, 256, 0, 0, ""},
  {"gemma__codegemma-7b-it.json", "gemma", 28, "rope", 1e4, 0, 256, 0, 0, ""},  // head_dim 256, not 3072 / 16
  {"internlm2__internlm2-chat-1_8b.json", "internlm2", 24, "rope", 1e6, 0, 128, 0, 0, ""},
  {"internlm2__internlm2-chat-7b-rev-2292b86.json", "internlm", 32, "rope", 1e6, 0, 128, 0, 0,
   "InternLM2's code keeps a grown base"},
  {"internlm2__internlm2-chat-7b-rev-03da3f2.json", "internlm", 32, "rope", 1e6, 0, 128, 0, 0,
   "InternLM2's code keeps a grown base"},
  {"qwen1.5__CodeQwen1.5-7B.json", "qwen2", 32, "rope", 1e6, 0, 128, 0, 0,
   "key 'rotary_emb_base' is ignored"},  // inert in Qwen2Config; use_sliding_window false
  {"qwen3-vl__Qwen3-VL-Embedding-8B.json", "qwen3_vl", 36, "rope", 5e6, 0, 128, 0, 0, ""},
  // Third collection.
  {"gpt-bigcode__starcoderbase-7b.json", "gpt_bigcode", 42, "learned", 0, 0, 0, 0, 0, ""},
  {"gpt-neo__gpt-neo-125M.json", "gpt_neo", 12, "learned", 0, 0, 0, 0, 0, ""},  // layer 1: local, 256
  {"phi3__Phi-3-medium-128k-instruct-su.json", "phi3", 40, "rope", 1e4, 0, 128, 131072, 0, "rope_type 'su'"},
  {"starcoder2__starcoder2-7b.json", "starcoder2", 32, "rope", 1e6, 0, 128, 4096, 0, ""},
  {"opt__opt-125m.json", "opt", 12, "learned", 0, 0, 0, 0, 0, ""},
  {"opt__opt-350m.json", "opt", 24, "learned", 0, 0, 0, 0, 0, ""},
  {"roberta__roberta-base.json", "roberta", 12, "learned", 0, 0, 0, 0, 0, ""},
  {"gemma4__gemma-4-E2B-it.json", "gemma4_text", 35, "rope", 1e4, 0, 256, 512, 0, ""},
  {"gemma4__gemma-4-31B-it.json", "gemma4_text", 60, "rope", 1e4, 0, 256, 1024, 0,
   "use_bidirectional_attention = \"vision\""},
  // encoder-decoders (tests/model/test_model_seq2seq.cc): encoder layers first
  {"whisper__whisper-large-v3.json", "whisper", 64, "sinusoidal", 0, 0, 0, 0, 0, ""},
  {"whisper__ivrit-ai-whisper-large-v3-turbo.json", "whisper", 36, "sinusoidal", 0, 0, 0, 0, 0, ""},
  {"whisper__whisper-small.json", "whisper", 24, "sinusoidal", 0, 0, 0, 0, 0, ""},
  {"whisper__whisper-base.json", "whisper", 12, "sinusoidal", 0, 0, 0, 0, 0, ""},
  {"whisper__whisper-large-v2-hindi-finetune.json", "whisper", 64, "sinusoidal", 0, 0, 0, 0, 0, ""},
  {"bart__bart-large.json", "bart", 24, "learned", 0, 0, 0, 0, 0, ""},
  {"bart__bart-large-cnn.json", "bart", 24, "learned", 0, 0, 0, 0, 0, ""},
  {"bart__distilbart-cnn-12-6.json", "bart", 18, "learned", 0, 0, 0, 0, 0, ""},
  {"blenderbot__blenderbot-400M-distill.json", "blenderbot", 14, "learned", 0, 0, 0, 0, 0, ""},
  {"m2m_100__m2m100_418M.json", "m2m_100", 24, "sinusoidal", 0, 0, 0, 0, 0, ""},
  {"m2m_100__nllb-200-distilled-600M.json", "m2m_100", 24, "sinusoidal", 0, 0, 0, 0, 0, ""},
  {"marian__opus-mt-en-zh.json", "marian", 12, "sinusoidal", 0, 0, 0, 0, 0, ""},
  {"marian__opus-mt-zh-en.json", "marian", 12, "sinusoidal", 0, 0, 0, 0, 0, ""},
  {"mbart__mbart-large-50-many-to-many-mmt.json", "mbart", 24, "learned", 0, 0, 0, 0, 0, ""},
  {"mbart__mbart-large-cc25.json", "mbart", 24, "learned", 0, 0, 0, 0, 0, ""},
  {"pegasus__pegasus-cnn_dailymail-samsum-finetune.json", "pegasus", 32, "sinusoidal", 0, 0, 0, 0, 0, ""},
  {"pegasus__pegasus-xsum-finetune.json", "pegasus", 32, "sinusoidal", 0, 0, 0, 0, 0, ""},
  {"t5__flan-t5-base.json", "t5", 24, "t5", 0, 0, 0, 0, 0, ""},
  // ModernBERT encoders: layer 0 is a global layer (full attention, global_rope_theta)
  {"modernbert__ModernBERT-base-finetune-multitask.json", "modernbert", 22, "rope", 1.6e5, 0, 64, 0, 0,
   "position_embedding_type = \"absolute\" is not read by modernbert"},
  {"modernbert__ModernBERT-base-finetune-v5format.json", "modernbert", 22, "rope", 1.6e5, 0, 64, 0, 0,
   "is not read by modernbert"},
  {"modernbert__granite-embedding-english-r2.json", "modernbert", 22, "rope", 8e4, 0, 64, 0, 0,
   "is not read by modernbert"},
  {"modernbert__granite-embedding-small-english-r2.json", "modernbert", 12, "rope", 8e4, 0, 32, 0, 0,
   "position_embedding_type = \"relative_key_query\" is not read by modernbert"},
  {"modernbert__ruri-v3-30m.json", "modernbert", 10, "rope", 1.6e5, 0, 64, 0, 0, "is not read by modernbert"},
  {"distilbert__distilbert-base-uncased-finetuned-sst-2-english.json", "distilbert", 6, "learned", 0, 0, 0,
   0, 0, ""},
  {"distilbert__distilbert-base-uncased-finetune.json", "distilbert", 6, "learned", 0, 0, 0, 0, 0, ""},
  // a Qwen2.5 fine-tune (use_sliding_window false: no window)
  {"qwen2__cogito-v1-preview-qwen-14B.json", "qwen2", 48, "rope", 1e6, 0, 128, 0, 0, ""},
  // encoders: RoFormer (pairs), ESM-2 (rotary), ALBERT, MPNet (learned + buckets)
  {"roformer__roformer_chinese_base.json", "roformer", 12, "rope", 1e4, 0, 64, 0, 0, ""},
  {"esm__esm2_t33_650M_UR50D.json", "esm", 33, "rope", 1e4, 0, 64, 0, 0, ""},
  {"esm__esm2_t6_8M_UR50D.json", "esm", 6, "rope", 1e4, 0, 16, 0, 0, ""},
  {"albert__albert-base-v2.json", "albert", 12, "learned", 0, 0, 0, 0, 0, ""},
  {"albert__albert-large-v2.json", "albert", 24, "learned", 0, 0, 0, 0, 0, ""},
  {"mpnet__all-mpnet-base-v2.json", "mpnet", 12, "t5", 0, 0, 0, 0, 0, ""},
  // MobileBERT: heads of the 128-wide bottleneck (tests/model/test_model_encoders.cc)
  {"mobilebert__mobilebert-uncased-finetune-ner.json", "mobilebert", 24, "learned", 0, 0, 0, 0, 0, ""},
  {"mobilebert__mobilebert-uncased-finetuned-seqcls.json", "mobilebert", 24, "learned", 0, 0, 0, 0, 0, ""},
  // Jina Embeddings v2: model_type bert, ALiBi in its auto_map's remote code (refused)
  {"bert__jina-embeddings-v2-base-en.json", "bert", 0, "", 0, 0, 0, 0, 0, ""},
  {"qwen3_moe__Qwen3-Coder-30B-A3B-Instruct.json", "qwen3_moe", 48, "rope", 1e7, 0, 128, 0, 0, ""},
  // multimodal wrappers with sparse text configs (class defaults)
  {"llava__llava-1.5-7b-hf.json", "llama", 32, "rope", 1e4, 0, 128, 0, 0, ""},
  {"paligemma__paligemma-3b-pt-224.json", "gemma", 18, "rope", 1e4, 0, 256, 0, 0,
   "the prefix (image tokens and prompt, token_type_ids 0) attends both ways"},
};
// clang-format on

TEST(ModelRealConfigs, EveryFileParsesOrIsRefused) {
  for (const RealCase& c : kReal) {
    SCOPED_TRACE(c.file);
    if (c.layers == 0) {
      try {
        load(c.file);
        ADD_FAILURE() << "expected a refusal";
      } catch (const Error& e) {
        const std::string msg = e.what();
        const std::string type = "model_type '" + std::string(c.type) + "' is not ";
        // the family refused, or one of its configs (a key naming what transformers 5 cannot run)
        const bool config =
            msg.find("is not supported for " + std::string(c.type) + ":") != std::string::npos;
        EXPECT_TRUE(msg.find(type + "supported") != std::string::npos ||
                    msg.find(type + "in posenc's model table") != std::string::npos || config)
            << msg;
        if (!config) {
          EXPECT_NE(msg.find("RopeConfig"), std::string::npos) << msg;
        }
      }
      continue;
    }
    const ModelPositions m = load(c.file);
    EXPECT_EQ(m.model_type, c.type);
    EXPECT_EQ(m.num_layers, c.layers);
    ASSERT_EQ(static_cast<int64_t>(m.layers.size()), c.layers);
    const LayerPlan& l = m.layers[0];
    EXPECT_STREQ(position_method_name(l.position), c.position0);
    if (l.rope) {
      EXPECT_EQ(l.rope->base, c.base0);
      EXPECT_EQ(l.rotary_lo, c.lo0);
      EXPECT_EQ(l.rotary_hi, c.hi0);
      EXPECT_NO_THROW(rope_frequencies(*l.rope, m.max_position_embeddings));
    }
    EXPECT_EQ(l.attention.window, c.window0);
    EXPECT_EQ(l.attention.chunk, c.chunk0);
    if (*c.warning)
      EXPECT_TRUE(has_warning(m, c.warning));
    else
      EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
  }
}

TEST(ModelRealConfigs, EveryCollectedFileIsInTheTable) {
  std::set<std::string> listed;
  for (const RealCase& c : kReal) listed.insert(c.file);
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kDir)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    EXPECT_TRUE(listed.count(entry.path().filename().string())) << entry.path() << " has no row in kReal";
  }
  EXPECT_EQ(files, static_cast<int>(listed.size()));
}

// Gemma 2: configuration_gemma2.py layer_types default: sliding on even layers; modeling_gemma2.py
// Gemma2Attention: scaling = query_pre_attn_scalar^-0.5, softcap = attn_logit_softcapping (50).
TEST(ModelFamilies, Gemma2SoftcapAndAlternatingWindows) {
  const ModelPositions m = load("gemma2__gemma-2-9b-it.json");
  for (const LayerPlan& l : m.layers) {
    SCOPED_TRACE(l.layer);
    EXPECT_EQ(l.attention.window, l.layer % 2 == 0 ? 4096 : 0);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / std::sqrt(224.0));
    ASSERT_TRUE(l.attention.softcap.has_value());
    EXPECT_EQ(*l.attention.softcap, 50.0);
    const AttentionConfig c = l.attention.attention_config();
    EXPECT_EQ(c.softcap, 50.0);
    EXPECT_EQ(c.window, l.attention.window);
  }
}

// Gemma 3: configuration_gemma3.py convert_rope_params_to_dict (legacy rope_scaling -> full
// layers only; rope_local_base_freq default 1e4 -> sliding layers), layer i sliding iff
// (i + 1) % 6 != 0, scale query_pre_attn_scalar^-0.5 (modeling_gemma3.py Gemma3Attention).
TEST(ModelFamilies, Gemma3LocalAndGlobal) {
  const ModelPositions m = load("gemma3__gemma-3-27b-it.json");
  for (const LayerPlan& l : m.layers) {
    SCOPED_TRACE(l.layer);
    ASSERT_TRUE(l.rope);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / std::sqrt(168.0));
    EXPECT_FALSE(l.attention.softcap);  // Gemma 3 never passes attn_logit_softcapping
    if ((l.layer + 1) % 6 != 0) {
      EXPECT_EQ(l.layer_type, "sliding_attention");
      EXPECT_EQ(l.attention.window, 1024);
      EXPECT_EQ(l.rope->base, 1e4);
      EXPECT_EQ(l.rope->scaling.type, RopeScalingType::none);
    } else {
      EXPECT_EQ(l.layer_type, "full_attention");
      EXPECT_EQ(l.attention.window, 0);
      EXPECT_EQ(l.rope->base, 1e6);  // class default rope_theta
      EXPECT_EQ(l.rope->scaling.type, RopeScalingType::linear);
      const RopeFrequencies f = rope_frequencies(*l.rope);
      EXPECT_NEAR(f.inv_freq[10], std::pow(1e6, -20.0 / 128) / 8, 1e-18);
    }
  }
}

// Llama 4: configuration_llama4.py no_rope_layers default [int((i + 1) % 4 != 0)], layer_types
// chunked_attention on RoPE layers (attention_chunk_size 8192); NoPE layers get the query
// temperature 1 + attn_scale * log1p(floor((p + 1) / floor_scale)) (modeling_llama4.py).
TEST(ModelFamilies, Llama4NoPEAndChunks) {
  const ModelPositions m = load("llama4__Llama-4-Scout-17B-16E-Instruct.json");
  for (const LayerPlan& l : m.layers) {
    SCOPED_TRACE(l.layer);
    if ((l.layer + 1) % 4 == 0) {
      EXPECT_EQ(l.position, PositionMethod::none);
      EXPECT_EQ(l.attention.chunk, 0);
      EXPECT_EQ(l.attention.temperature.kind, QueryTemperature::Kind::llama4);
      EXPECT_DOUBLE_EQ(l.attention.temperature.factor(8190), 1.0);
      EXPECT_DOUBLE_EQ(l.attention.temperature.factor(8191), 1.0 + 0.1 * std::log(2.0));
    } else {
      EXPECT_EQ(l.position, PositionMethod::rope);
      EXPECT_EQ(l.attention.chunk, 8192);
      EXPECT_EQ(l.rope->layout, RopeLayout::interleaved);
      EXPECT_EQ(l.attention.temperature.kind, QueryTemperature::Kind::none);
    }
  }
  // llama3 with low_freq_factor == high_freq_factor == 1 (modeling_rope_utils.py
  // _compute_llama3_parameters): wavelengths > 8192 / 1 divided by 16, the others kept.
  const RopeFrequencies f = rope_frequencies(*m.layers[0].rope);
  for (size_t j = 0; j < f.inv_freq.size(); ++j) {
    const double inv = std::pow(5e5, -2.0 * static_cast<double>(j) / 128);
    EXPECT_DOUBLE_EQ(f.inv_freq[j], 2 * M_PI / inv > 8192 ? inv / 16 : inv) << j;
  }
  EXPECT_EQ(m.layers[0].attention.attention_config().chunk, 8192);  // chunked layers hand over the chunk
  EXPECT_EQ(m.layers[3].attention.attention_config().chunk, 0);     // the NoPE layer attends globally
  const Rope rope(*m.layers[0].rope);
  EXPECT_EQ(m.layers[0].attention_config(&rope).rope_offset, 0);
  EXPECT_THROW(m.layers[3].attention_config(&rope), Error);  // a NoPE layer takes no rope
  EXPECT_EQ(m.layers[3].attention_config().rope, nullptr);
}

// DeepSeek-V3: configuration_deepseek_v3.py head_dim = qk_rope_head_dim; the rope dims are the last
// 64 of the 192-dim q/k head, interleaved pairs; modeling_deepseek_v3.py yarn_apply_mscale:
// scale = 192^-0.5 * (0.1 * mscale_all_dim * ln(40) + 1)^2.
TEST(ModelFamilies, DeepSeekV3) {
  const ModelPositions m = load("deepseek-v3__DeepSeek-V3.json");
  const LayerPlan& l = m.layers[7];
  EXPECT_EQ(l.rotary_lo, 128);
  EXPECT_EQ(l.rotary_hi, 192);
  EXPECT_EQ(l.qk_head_dim, 192);
  EXPECT_EQ(l.rope->head_dim, 64);
  EXPECT_EQ(l.rope->layout, RopeLayout::interleaved);
  EXPECT_EQ(l.rope->scaling.type, RopeScalingType::yarn);
  EXPECT_EQ(l.rope->scaling.factor, 40);
  const double ms = 0.1 * std::log(40.0) + 1;
  EXPECT_DOUBLE_EQ(l.attention.softmax_scale, ms * ms / std::sqrt(192.0));
  EXPECT_NEAR(l.attention.softmax_scale, 0.13523378, 1e-8);           // (1 + 0.1 ln 40)^2 / sqrt(192)
  EXPECT_DOUBLE_EQ(rope_frequencies(*l.rope).attention_factor, 1.0);  // mscale / mscale_all_dim
  EXPECT_EQ(l.v_head_dim, 128);  // configuration_deepseek_v3.py v_head_dim
  // The layer's attention config puts RoPE on [128, 192) and runs q/k heads of 192, v heads of 128.
  const Rope rope(*l.rope);
  const AttentionConfig c = l.attention_config(&rope);
  EXPECT_EQ(c.rope, &rope);
  EXPECT_EQ(c.rope_offset, 128);
  EXPECT_DOUBLE_EQ(*c.scale, l.attention.softmax_scale);
  std::vector<float> q(2 * 2 * 192, 0.5f), k(2 * 192, 0.25f), v(2 * 128, 1.0f), out(2 * 2 * 128, 0.0f);
  attention_forward(
      c, qkv(view(q.data(), {1, 2, 2, 192}), view(k.data(), {1, 2, 1, 192}), view(v.data(), {1, 2, 1, 128})),
      view(out.data(), {1, 2, 2, 128}), TensorView{});
  for (float x : out) EXPECT_FLOAT_EQ(x, 1.0f);  // every value row is 1
  RopeConfig other = *l.rope;
  other.head_dim = other.rotary_dim = 32;
  const Rope wrong(other);
  EXPECT_THROW(l.attention_config(&wrong), Error);
}

// gpt-oss: configuration_gpt_oss.py layer i sliding iff (i + 1) % 2 (window 128), sinks in every
// layer (modeling_gpt_oss.py eager_attention_forward), yarn truncate false, factor 32.
TEST(ModelFamilies, GptOss) {
  const ModelPositions m = load("gpt-oss__gpt-oss-120b.json");
  for (const LayerPlan& l : m.layers) {
    EXPECT_TRUE(l.attention.sinks);
    EXPECT_EQ(l.attention.window, l.layer % 2 == 0 ? 128 : 0) << l.layer;
  }
  const RopeConfig& c = *m.layers[1].rope;
  EXPECT_FALSE(c.scaling.truncate);
  EXPECT_DOUBLE_EQ(rope_frequencies(c).attention_factor, 0.1 * std::log(32.0) + 1);
  EXPECT_EQ(m.layers[0].attention.attention_config().window, 128);  // same semantics as HF
}

TEST(ModelFamilies, CohereInterleavedAndMultimodal) {
  const ModelPositions c = load("cohere__c4ai-command-r-v01.json");
  EXPECT_EQ(c.layers[3].rope->layout, RopeLayout::interleaved);  // modeling_cohere.py rotate_half (pairs)
  const ModelPositions q2 = load("qwen2-vl__Qwen2-VL-2B-Instruct-AWQ.json");
  EXPECT_EQ(q2.layers[0].rope->multimodal, RopeMultimodal::mrope);
  EXPECT_EQ(q2.layers[0].rope->mrope_section, (std::vector<int64_t>{16, 24, 24}));
  const ModelPositions q35 = load("qwen3.5__Qwen3.5-9B.json");
  const LayerPlan& full = q35.layers[3];
  EXPECT_EQ(full.layer_type, "full_attention");
  EXPECT_EQ(full.rope->multimodal, RopeMultimodal::mrope_interleaved);
  EXPECT_EQ(full.rotary_hi, 64);  // 256 * 0.25, honored by qwen3_5's default RoPE
  EXPECT_EQ(full.rope->base, 1e7);
  const ModelPositions t5 = load("t5__t5-small.json");
  EXPECT_FALSE(t5.layers[0].attention.causal);
  EXPECT_TRUE(t5.layers[6].attention.causal);
  EXPECT_EQ(t5.t5_num_buckets, 32);
  EXPECT_EQ(t5.t5_max_distance, 128);
  EXPECT_EQ(t5.layers[0].attention.softmax_scale, 1.0);
  const ModelPositions ms = load("mistral3__Devstral-Small-2-24B-Instruct.json");
  const QueryTemperature& t = ms.layers[0].attention.temperature;
  EXPECT_EQ(t.kind, QueryTemperature::Kind::ministral3);
  EXPECT_DOUBLE_EQ(t.factor(8192), 1 + 0.1 * std::log(2.0));  // get_llama_4_attn_scale, L = 8192
}

// DeepSeek-V2-Lite: configuration_deepseek_v2.py head_dim = qk_rope_head_dim (64) after the 128 nope
// dims; modeling_deepseek_v2.py apply_rotary_emb (complex pairs: interleaved, kept interleaved);
// yarn_apply_mscale: scale = 192^-0.5 * (0.1 * 0.707 * ln(40) + 1)^2; the rotary's attention factor
// get_mscale(40, 0.707) / get_mscale(40, 0.707) = 1 (modeling_rope_utils.py _compute_yarn_parameters).
TEST(ModelFamilies, DeepSeekV2Lite) {
  const ModelPositions m = load("deepseek-v2__DeepSeek-V2-Lite.json");
  EXPECT_EQ(m.max_position_embeddings, 163840);
  for (const LayerPlan& l : m.layers) {
    SCOPED_TRACE(l.layer);
    EXPECT_EQ(l.qk_head_dim, 192);
    EXPECT_EQ(l.rope->head_dim, 64);
    EXPECT_EQ(l.rope->layout, RopeLayout::interleaved);
    EXPECT_EQ(l.rope->scaling.type, RopeScalingType::yarn);
    EXPECT_EQ(l.rope->scaling.factor, 40);
    EXPECT_EQ(l.rope->scaling.original_max_position_embeddings, 4096);
    const double ms = 0.1 * 0.707 * std::log(40.0) + 1;
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, ms * ms / std::sqrt(192.0));
  }
  EXPECT_DOUBLE_EQ(rope_frequencies(*m.layers[0].rope).attention_factor, 1.0);
}

// MiniCPM3: configuration_minicpm3.py head_dim = qk_rope_head_dim (32), the last 32 of 96 q/k dims;
// modeling_minicpm3.py apply_rotary_pos_emb (rotate_half); longrope with original = max = 32768:
// factor 1, attention_factor 1, short factors up to 32768; no mscale_all_dim: scale 96^-0.5.
TEST(ModelFamilies, MiniCPM3) {
  const ModelPositions m = load("minicpm3__MiniCPM3-4B.json");
  const LayerPlan& l = m.layers[61];
  EXPECT_EQ(l.rotary_lo, 64);
  EXPECT_EQ(l.rotary_hi, 96);
  EXPECT_EQ(l.rope->layout, RopeLayout::half);
  EXPECT_EQ(l.rope->scaling.type, RopeScalingType::longrope);
  EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / std::sqrt(96.0));
  const RopeFrequencies f = rope_frequencies(*l.rope, 32768);
  ASSERT_EQ(f.inv_freq.size(), 16u);
  EXPECT_DOUBLE_EQ(f.attention_factor, 1.0);
  EXPECT_NEAR(f.inv_freq[1], std::pow(1e4, -2.0 / 32) / 1.1241891283591912, 1e-15);  // short_factor[1]
}

// Phi-3-mini-128k: configuration_phi3.py (top-level original_max_position_embeddings 4096, legacy
// "longrope" type, 48 = 96 / 2 factors); modeling_phi3.py: the sliding mask on every layer once
// sliding_window is set (262144 here, above the maximum: never binding).
TEST(ModelFamilies, Phi3Mini128k) {
  const ModelPositions m = load("phi3__Phi-3-mini-128k-instruct.json");
  for (const LayerPlan& l : m.layers) EXPECT_EQ(l.attention.window, 262144) << l.layer;
  const RopeConfig& c = *m.layers[0].rope;
  EXPECT_EQ(c.scaling.original_max_position_embeddings, 4096);
  const RopeFrequencies shrt = rope_frequencies(c, 4096), lng = rope_frequencies(c, 4097);
  ASSERT_EQ(shrt.inv_freq.size(), 48u);
  EXPECT_NEAR(shrt.attention_factor, 1.190238071, 1e-9);      // sqrt(1 + ln(32) / ln(4096))
  EXPECT_DOUBLE_EQ(shrt.inv_freq[0], 1 / 1.1);                // short_factor[0]
  EXPECT_DOUBLE_EQ(lng.inv_freq[0], 1 / 1.0700000524520874);  // long_factor[0]
}

// GPT-J 6B, GPT-NeoX 20B, Gemma 1, MPT, Qwen3-VL: the layouts and scales of their modeling files.
TEST(ModelFamilies, RealConfigsTakeTheLayoutsHeadSizesAndScalesOfTheirModelingFiles) {
  const ModelPositions gj = load("gpt-j__gpt-j-6b.json");  // rotate_every_two; attn / sqrt(head_dim)
  EXPECT_EQ(gj.layers[0].rope->layout, RopeLayout::interleaved);
  EXPECT_EQ(gj.layers[0].qk_head_dim, 256);
  EXPECT_DOUBLE_EQ(gj.layers[0].attention.softmax_scale, 1.0 / 16);
  EXPECT_EQ(gj.max_position_embeddings, 2048);                    // n_positions
  const ModelPositions nx = load("gpt-neox__gpt-neox-20b.json");  // partial rotate_half
  EXPECT_EQ(nx.layers[0].rope->layout, RopeLayout::half);
  EXPECT_DOUBLE_EQ(nx.layers[0].attention.softmax_scale, 1.0 / std::sqrt(96.0));
  const ModelPositions cg = load("gemma__codegemma-7b-it.json");  // head_dim 256 with 16 heads of 3072
  EXPECT_EQ(cg.layers[0].qk_head_dim, 256);
  EXPECT_DOUBLE_EQ(cg.layers[0].attention.softmax_scale, 1.0 / 16);
  const ModelPositions mpt = load("mpt__mpt-7b-instruct.json");  // max_seq_len; softmax_scale null
  EXPECT_EQ(mpt.max_position_embeddings, 2048);
  for (const LayerPlan& l : mpt.layers) {
    EXPECT_EQ(l.position, PositionMethod::alibi);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / std::sqrt(128.0));
  }
  const ModelPositions vl = load("qwen3-vl__Qwen3-VL-Embedding-8B.json");  // text_config, interleaved mRoPE
  EXPECT_EQ(vl.layers[0].rope->multimodal, RopeMultimodal::mrope_interleaved);
  EXPECT_EQ(vl.layers[0].rope->mrope_section, (std::vector<int64_t>{24, 20, 20}));
}

// Remote-code model types posenc does not follow are refused as remote code (the ones it follows:
// tests/model/test_model_remote.cc).
TEST(ModelFamilies, RemoteCodeTypesAreRefusedAsSuch) {
  // (Remote-code types posenc plans: tests/model/test_model_remote.cc.)
  expect_plan_error(R"({"model_type": "internlm", "hidden_size": 4096, "num_attention_heads": 32})",
                    "model_type 'internlm' is not supported: InternLM (1)'s remote code");
  expect_plan_error(
      R"({"model_type": "baichuan", "hidden_size": 2048, "num_attention_heads": 16})",
      "model_type 'baichuan' with hidden_size = 2048 and num_hidden_layers = 32 is not supported");
}

// Small fixtures: the forms no collected file shows. Base keys of a tiny llama-like model.
std::string cfg(const std::string& type, const std::string& extra) {
  return R"({"model_type": ")" + type + R"(", "hidden_size": 256, "num_attention_heads": 4,
             "num_hidden_layers": 4, "max_position_embeddings": 4096)" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

// configuration_gpt_neox.py: rotary_emb_base and rotary_pct win; top-level rope_theta is inert.
TEST(ModelForms, GptNeoXAliases) {
  const ModelPositions m = model_positions_from_hf_json(
      cfg("gpt_neox", R"("rotary_pct": 0.25, "rotary_emb_base": 20000, "rope_theta": 5)"));
  EXPECT_EQ(m.layers[0].rotary_hi, 16);  // int(64 * 0.25)
  EXPECT_EQ(m.layers[0].rope->base, 20000);
  EXPECT_TRUE(has_warning(m, "rope_theta is ignored by gpt_neox"));
  const ModelPositions d = model_positions_from_hf_json(cfg("gpt_neox", ""));
  EXPECT_EQ(d.layers[0].rotary_hi, 16);  // default rotary_pct 0.25
}

// GPT-J: configuration_gptj.py attribute_map (n_embd, n_head, n_layer, n_positions), rotary_dim,
// rotate_every_two (interleaved).
// configuration_gpt_neox.py convert_rope_params_to_dict: top-level partial_rotary_factor is inert too
// (rotary_pct, default 0.25, wins); qwen2 has no rotary_emb_base (Qwen2Config keeps it inert:
// rope_theta or the default 1e4 decides), so it is reported.
TEST(ModelForms, LegacyRotaryKeysOnlyWhereTransformersReadsThem) {
  const ModelPositions nx =
      model_positions_from_hf_json(cfg("gpt_neox", R"("partial_rotary_factor": 0.5, "rope_theta": 5e5)"));
  EXPECT_EQ(nx.layers[0].rotary_hi, 16);  // int(64 * 0.25)
  EXPECT_EQ(nx.layers[0].rope->base, 1e4);
  EXPECT_TRUE(has_warning(nx, "partial_rotary_factor is ignored by gpt_neox"));
  const ModelPositions q =
      model_positions_from_hf_json(cfg("qwen2", R"("rotary_emb_base": 5, "rotary_pct": 0.5)"));
  EXPECT_EQ(q.layers[0].rope->base, 1e4);
  EXPECT_EQ(q.layers[0].rotary_hi, 64);
  EXPECT_TRUE(has_warning(q, "key 'rotary_emb_base' is ignored, as transformers 5's qwen2 ignores it"));
  EXPECT_TRUE(has_warning(q, "key 'rotary_pct' is not understood"));
}

// Text models whose code is another family's, from their class defaults alone (each also in the families
// harness against transformers): GLM-Image's (glm4v_moe's rotation, the whole head without a
// partial_rotary_factor, whose default sections [8, 12, 12] then do not fit: refused as transformers fails),
// Voxtral Realtime's (Mistral's, sliding_window 4096 on every layer), Qwen3-Omni's talker (the thinker's
// interleaved M-RoPE, sections [24, 20, 20], its own base 1e4).
TEST(ModelForms, TextModelsOfOtherFamiliesCode) {
  expect_plan_error(R"({"model_type": "glm_image_text"})", "mrope_section = [8, 12, 12] sums to 32");
  const ModelPositions g = model_positions_from_hf_json(
      R"({"model_type": "glm_image_text", "rope_parameters": {"rope_type": "default", "rope_theta": 1e4,
          "partial_rotary_factor": 0.5}})");
  EXPECT_EQ(g.layers.size(), 40u);
  EXPECT_EQ(g.layers[0].rotary_hi, 64);
  EXPECT_EQ(g.layers[0].rope->layout, RopeLayout::half);
  EXPECT_EQ(g.layers[0].rope->mrope_section, (std::vector<int64_t>{8, 12, 12}));
  const ModelPositions v = model_positions_from_hf_json(R"({"model_type": "voxtral_realtime_text"})");
  for (const LayerPlan& l : v.layers) {
    EXPECT_EQ(l.attention.window, 4096);
    EXPECT_TRUE(l.attention.causal);
    EXPECT_EQ(l.qk_head_dim, 128);
  }
  const ModelPositions q = model_positions_from_hf_json(R"({"model_type": "qwen3_omni_moe_talker_text"})");
  EXPECT_EQ(q.layers.size(), 20u);
  EXPECT_EQ(q.layers[0].rope->base, 1e4);
  EXPECT_EQ(q.layers[0].qk_head_dim, 64);  // hidden / heads: the class has no head_dim
  EXPECT_EQ(q.layers[0].rope->mrope_section, (std::vector<int64_t>{24, 20, 20}));
}

// Kosmos-2's text decoder (configuration_kosmos2.py Kosmos2TextConfig, modeling_kosmos2.py
// Kosmos2TextSinusoidalPositionalEmbedding): its own size names (embed_dim, layers, attention_heads), XGLM's
// fairseq table, token p at row p + pad_token_id + 1, causal.
TEST(ModelForms, Kosmos2TextDecoderIsXglmsTableAtPadPlusOne) {
  const ModelPositions k = model_positions_from_hf_json(R"({"model_type": "kosmos-2", "text_config":
      {"embed_dim": 512, "layers": 3, "attention_heads": 8, "max_position_embeddings": 1024}})");
  EXPECT_EQ(k.model_type, "kosmos_2_text_model");
  ASSERT_EQ(k.layers.size(), 3u);
  ASSERT_TRUE(k.sinusoidal.has_value());
  EXPECT_EQ(k.sinusoidal->dim, 512);
  EXPECT_EQ(k.sinusoidal->position_offset, 2);  // pad_token_id 1 by default
  EXPECT_EQ(k.sinusoidal->frequencies, SinusoidalFrequencies::half_dim_minus_one);
  for (const LayerPlan& l : k.layers) {
    EXPECT_EQ(l.position, PositionMethod::sinusoidal);
    EXPECT_TRUE(l.attention.causal);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / 8.0);  // (512 / 8)^-0.5
  }
  const ModelPositions pad0 =
      model_positions_from_hf_json(R"({"model_type": "kosmos_2_text_model", "pad_token_id": 0})");
  EXPECT_EQ(pad0.sinusoidal->position_offset, 1);
  EXPECT_EQ(pad0.layers.size(), 24u);  // the class's sizes: 2048 / 32 heads, 24 layers
  EXPECT_EQ(pad0.sinusoidal->dim, 2048);
  // Kosmos-2.5's: the same table and rule, and a learned segment row added to the positions (warned).
  const ModelPositions k25 = model_positions_from_hf_json(R"({"model_type": "kosmos_2_5_text_model"})");
  EXPECT_EQ(k25.layers.size(), 24u);
  EXPECT_EQ(k25.sinusoidal->dim, 1536);
  EXPECT_EQ(k25.sinusoidal->position_offset, 2);
  EXPECT_EQ(k25.max_position_embeddings, 4096);
  EXPECT_TRUE(has_warning(k25, "segment_emb"));
}

// Positional-looking keys of real configs that transformers' family never reads (kIgnoredByTransformers)
// are warned as ignored by both, not as "not understood"; the plan is the one transformers runs.
TEST(ModelForms, KeysTransformersNeverReadsAreWarnedAsIgnoredByBoth) {
  const std::pair<const char*, const char*> cases[] = {
      {"bloom__bloom-3b.json", "key 'offset_alibi' is ignored, as transformers 5's bloom ignores it"},
      {"gemma2__gemma-2-9b-it.json", "key 'sliding_window_size' is ignored, as transformers 5's gemma2"},
      {"gpt-j__gpt-j-6b.json", "key 'rotary' is ignored, as transformers 5's gptj ignores it"},
      {"qwen1.5__CodeQwen1.5-7B.json", "key 'rotary_emb_base' is ignored, as transformers 5's qwen2"}};
  for (const auto& [file, warning] : cases) {
    const ModelPositions m = load(file);
    EXPECT_TRUE(has_warning(m, warning)) << file;
    for (const std::string& w : m.warnings) EXPECT_EQ(w.find("not understood"), std::string::npos) << w;
  }
  const ModelPositions c = model_positions_from_hf_json(cfg("cohere2", R"("rotary_pct": 0.5)"));
  EXPECT_TRUE(
      has_warning(c, "key 'rotary_pct' is ignored, as transformers 5's cohere2 ignores it: it rotates"));
  EXPECT_EQ(c.layers[0].rotary_hi, c.layers[0].qk_head_dim);
  const ModelPositions st = model_positions_from_hf_json(cfg("stablelm", R"("rotary_scaling_factor": 2)"));
  EXPECT_TRUE(has_warning(st, "key 'rotary_scaling_factor' is ignored, as transformers 5's stablelm"));
  EXPECT_EQ(st.layers[0].rope->scaling.type, RopeScalingType::none);
  const ModelPositions f = model_positions_from_hf_json(cfg("falcon_h1", R"("attn_layer_indices": [1])"));
  EXPECT_TRUE(has_warning(f, "key 'attn_layer_indices' is ignored, as transformers 5's falcon_h1"));
  for (const LayerPlan& l : f.layers) EXPECT_EQ(l.position, PositionMethod::rope);
}

// Keys naming attention ("attn") or interpolation are positional-looking: unread ones are warned, unless they
// choose kernels, dropout, numerics or a block's wiring (kIrrelevant). The first three are real keys: Phi-4-
// mini's interpolate_factor and full_attn_mod, MiniMax-M2's attn_type_list (transformers reads none of them).
TEST(ModelForms, AttnAndInterpolationKeysAreWarnedUnlessIrrelevant) {
  const ModelPositions m = model_positions_from_hf_json(
      cfg("phi3", R"("interpolate_factor": 1, "full_attn_mod": 1, "attn_type_list": [1, 1],
                     "attn_implementation": "sdpa", "_attn_implementation_autoset": true,
                     "use_flash_attn": true,
                     "attn_output_gate": true, "parallel_attn": true, "reorder_and_upcast_attn": false,
                     "scale_attn_weights": true, "attn_dropout_prob": 0.0)"));
  for (const char* k : {"interpolate_factor", "full_attn_mod", "attn_type_list"})
    EXPECT_TRUE(has_warning(m, std::string("key '") + k + "' is not understood")) << k;
  EXPECT_EQ(m.warnings.size(), 3u) << ::testing::PrintToString(m.warnings);
  // gpt2 reads scale_attn_weights (false: no 1 / sqrt(d)), so it is no leftover there.
  const ModelPositions g = model_positions_from_hf_json(
      R"({"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 1, "scale_attn_weights": false})");
  EXPECT_EQ(g.layers[0].attention.softmax_scale, 1.0);
  EXPECT_TRUE(g.warnings.empty()) << ::testing::PrintToString(g.warnings);
}

TEST(ModelForms, GptJ) {
  const ModelPositions m = model_positions_from_hf_json(
      R"({"model_type": "gptj", "n_embd": 256, "n_head": 4, "n_layer": 2, "n_positions": 1024,
          "rotary_dim": 16})");
  EXPECT_EQ(m.max_position_embeddings, 1024);
  EXPECT_EQ(m.layers[1].rotary_hi, 16);
  EXPECT_EQ(m.layers[1].rope->layout, RopeLayout::interleaved);
  // A fixed table of base 10000: rope dicts are reported, not applied (modeling_gptj.py).
  const ModelPositions r = model_positions_from_hf_json(
      R"({"model_type": "gptj", "n_embd": 256, "n_head": 4, "n_layer": 1, "rope_theta": 5e5,
          "rope_scaling": {"rope_type": "linear", "factor": 4.0}})");
  EXPECT_EQ(r.layers[0].rope->base, 1e4);
  EXPECT_EQ(r.layers[0].rope->scaling.type, RopeScalingType::none);
  EXPECT_TRUE(has_warning(r, "rope_scaling is ignored by gptj (a fixed table of base 10000)"));
}

// CodeGen: GPT-J's table and rotate_every_two (modeling_codegen.py create_sinusoidal_positions,
// rotate_every_two, apply_rotary_pos_emb, CodeGenAttention); rotary_dim 64 by default, null refused (the
// table would span n_embd, not a head).
TEST(ModelForms, CodeGen) {
  const ModelPositions m = model_positions_from_hf_json(
      R"({"model_type": "codegen", "n_embd": 1024, "n_head": 16, "n_layer": 2, "n_positions": 2048})");
  EXPECT_EQ(m.layers[0].rotary_hi, 64);
  EXPECT_EQ(m.layers[0].qk_head_dim, 64);
  EXPECT_EQ(m.layers[0].rope->layout, RopeLayout::interleaved);
  EXPECT_DOUBLE_EQ(m.layers[0].attention.softmax_scale, 0.125);
  EXPECT_EQ(model_positions_from_hf_json(R"({"model_type": "codegen", "n_embd": 1024, "n_head": 16,
                                            "n_layer": 1, "rotary_dim": 32})")
                .layers[0]
                .rotary_hi,
            32);
  expect_plan_error(
      R"({"model_type": "codegen", "n_embd": 1024, "n_head": 16, "n_layer": 1, "rotary_dim": null})",
      "rotary_dim = null is not supported for codegen");
}

// Phi-3 longrope: configuration_phi3.py (top-level original_max_position_embeddings wins; "su" ->
// longrope); modeling_rope_utils.py _compute_longrope_parameters: attention_factor =
// sqrt(1 + ln(131072 / 4096) / ln(4096)); long factors once seq_len > 4096.
TEST(ModelForms, Phi3LongRope) {
  std::string s = "[1", l = "[2";
  for (int i = 1; i < 32; ++i) s += ", 1", l += ", 2";
  const ModelPositions m = model_positions_from_hf_json(
      R"({"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 48, "num_hidden_layers": 2,
          "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
          "rope_scaling": {"type": "su", "short_factor": )" +
      s + R"(], "long_factor": )" + l + "]}}");
  const RopeConfig& c = *m.layers[0].rope;
  EXPECT_EQ(c.scaling.type, RopeScalingType::longrope);
  EXPECT_EQ(c.scaling.original_max_position_embeddings, 4096);
  const RopeFrequencies shrt = rope_frequencies(c, 4096), lng = rope_frequencies(c, 4097);
  EXPECT_NEAR(shrt.attention_factor, 1.190238071, 1e-9);
  EXPECT_DOUBLE_EQ(shrt.inv_freq[3], std::pow(1e4, -6.0 / 64));
  EXPECT_DOUBLE_EQ(lng.inv_freq[3], std::pow(1e4, -6.0 / 64) / 2);
  // A dict factor wins over max / original (transformers 5): factor 1 -> attention_factor 1.
  const ModelPositions f1 = model_positions_from_hf_json(
      R"({"model_type": "llama", "hidden_size": 3072, "num_attention_heads": 48, "num_hidden_layers": 1,
          "max_position_embeddings": 131072, "rope_scaling": {"rope_type": "longrope", "factor": 1.0,
          "original_max_position_embeddings": 4096, "short_factor": )" +
      s + R"(], "long_factor": )" + l + "]}}");
  EXPECT_DOUBLE_EQ(rope_frequencies(*f1.layers[0].rope, 8192).attention_factor, 1.0);
}

TEST(ModelForms, AlibiAndLearned) {
  const ModelPositions b = model_positions_from_hf_json(
      R"({"model_type": "bloom", "n_layer": 2, "n_head": 16, "hidden_size": 1024})");
  EXPECT_EQ(b.layers[1].position, PositionMethod::alibi);
  EXPECT_FALSE(b.layers[1].rope);
  const ModelPositions f = model_positions_from_hf_json(cfg("falcon", R"("alibi": true)"));
  EXPECT_EQ(f.layers[0].position, PositionMethod::alibi);
  const ModelPositions fr = model_positions_from_hf_json(cfg("falcon", ""));
  EXPECT_EQ(fr.layers[0].position, PositionMethod::rope);
  const ModelPositions bert = load("bert__bert-base-uncased-finetuned-seqcls.json");
  EXPECT_FALSE(bert.layers[0].attention.causal);
}

// PreTrainedConfig.convert_rope_params_to_dict / standardize_rope_params (modeling_rope_utils.py).
TEST(ModelForms, RopeParametersPrecedence) {
  // Legacy rope_scaling beats rope_parameters; rope_type beats type.
  const ModelPositions a = model_positions_from_hf_json(
      cfg("llama",
          R"("rope_scaling": {"rope_type": "linear", "type": "dynamic", "factor": 2},
         "rope_parameters": {"rope_type": "linear", "factor": 4})"));
  EXPECT_EQ(a.layers[0].rope->scaling.type, RopeScalingType::linear);
  EXPECT_EQ(a.layers[0].rope->scaling.factor, 2);
  EXPECT_TRUE(has_warning(a, "rope_parameters is ignored"));
  // partial_rotary_factor inside the dict shrinks a scaling type's frequencies, which llama's rotate_half
  // over the whole head cannot apply (transformers 5 fails at the first forward): refused...
  expect_plan_error(cfg("llama", R"("rope_parameters": {"rope_type": "linear", "factor": 2,
                                    "partial_rotary_factor": 0.5, "rope_theta": 1e5})"),
                    "partial_rotary_factor = 0.5 with rope_type 'linear' is not supported for model_type "
                    "'llama': its rotation "
                    "covers all 64 head dims, the frequencies 32");
  // ... while llama's default RoPE ignores it (modeling_llama.py compute_default_rope_parameters).
  const ModelPositions d = model_positions_from_hf_json(cfg("llama", R"("partial_rotary_factor": 0.5)"));
  EXPECT_EQ(d.layers[0].rotary_hi, 64);
  EXPECT_TRUE(has_warning(d, "partial_rotary_factor"));
  // yarn: factor required (KeyError in transformers 5); explicit null derives max / original.
  expect_plan_error(
      cfg("llama", R"("rope_scaling": {"rope_type": "yarn", "original_max_position_embeddings": 1024})"),
      "factor is missing");
  const ModelPositions y = model_positions_from_hf_json(cfg(
      "llama",
      R"("rope_scaling": {"rope_type": "yarn", "factor": null, "original_max_position_embeddings": 1024})"));
  EXPECT_EQ(y.layers[0].rope->scaling.factor, 4);
}

TEST(ModelForms, NestedPerLayerTypeAndWindows) {
  // A transformers-5 Gemma 3 config: rope_parameters nested per layer type.
  const ModelPositions g = model_positions_from_hf_json(
      R"({"model_type": "gemma3_text", "num_hidden_layers": 6, "sliding_window": 512,
          "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                              "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}})");
  EXPECT_EQ(g.layers[5].rope->scaling.type, RopeScalingType::linear);
  EXPECT_EQ(g.layers[5].rope->base, 1e6);
  EXPECT_EQ(g.layers[4].rope->base, 1e4);
  EXPECT_EQ(g.layers[4].attention.window, 512);
  // Qwen2: sliding_window only with use_sliding_window, on layers >= max_window_layers.
  const ModelPositions q = model_positions_from_hf_json(
      cfg("qwen2", R"("use_sliding_window": true, "sliding_window": 16, "max_window_layers": 2)"));
  EXPECT_EQ(q.layers[1].attention.window, 0);
  EXPECT_EQ(q.layers[2].attention.window, 16);
  const ModelPositions q0 = model_positions_from_hf_json(cfg("qwen2", R"("sliding_window": 16)"));
  EXPECT_EQ(q0.layers[3].attention.window, 0);
  // Mistral: every layer; the class default is 4096 (configuration_mistral.py), null = none.
  EXPECT_EQ(model_positions_from_hf_json(cfg("mistral", "")).layers[2].attention.window, 4096);
  const ModelPositions no_window = model_positions_from_hf_json(cfg("mistral", R"("sliding_window": null)"));
  EXPECT_EQ(no_window.layers[2].attention.window, 0);
  const ModelPositions mi = model_positions_from_hf_json(cfg("mistral", R"("sliding_window": 32)"));
  EXPECT_EQ(mi.layers[0].attention.window, 32);
  EXPECT_EQ(mi.layers[0].attention.attention_config().window, 32);
  // Llama 4 no_rope_layers given explicitly: 1 = uses RoPE.
  const ModelPositions l4 =
      model_positions_from_hf_json(cfg("llama4_text", R"("no_rope_layers": [0, 1, 1, 1])"));
  EXPECT_EQ(l4.layers[0].position, PositionMethod::none);
  EXPECT_EQ(l4.layers[3].position, PositionMethod::rope);
}

// proportional (Gemma 4's p-RoPE), modeling_rope_utils.py _compute_proportional_rope_parameters:
// rope_angles = int(0.25 * 64 // 2) = 8 pairs with 1 / 1e6^(2j / 64) (denominator: the full head
// dim), the other 24 pairs 0; all divided by factor (default 1).
TEST(ModelForms, ProportionalRope) {
  const ModelPositions m = model_positions_from_hf_json(
      cfg("llama",
          R"("rope_parameters": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                             "rope_theta": 1e6})"));
  const RopeConfig& c = *m.layers[0].rope;
  EXPECT_EQ(c.scaling.type, RopeScalingType::proportional);
  const RopeFrequencies f = rope_frequencies(c);
  ASSERT_EQ(f.inv_freq.size(), 32u);
  for (size_t j = 0; j < 32; ++j)
    EXPECT_DOUBLE_EQ(f.inv_freq[j], j < 8 ? std::pow(1e6, -2.0 * static_cast<double>(j) / 64) : 0.0) << j;
  // The rotation with a zero frequency is the identity: apply it to check the kernel path.
  Rope rope(c);
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
  std::vector<int64_t> p = {1000};
  rope.forward(view(x.data(), {1, 1, 1, 64}), view(static_cast<const int64_t*>(p.data()), {1}));
  for (size_t i = 8; i < 32; ++i) {
    EXPECT_FLOAT_EQ(x[i], static_cast<float>(i + 1)) << i;
    EXPECT_FLOAT_EQ(x[i + 32], static_cast<float>(i + 33)) << i;
  }
  EXPECT_NE(x[0], 1.0f);
}

// Class defaults and rope rules of families without a real config (python/tests/model/test_model_families.py
// checks each against its config class).
TEST(ModelFamilies, ClassDefaultRopeWindowsAndScalesOfFamiliesWithoutARealConfig) {
  // apertus, cwm: llama3 rope_parameters by default (configuration_apertus.py, configuration_cwm.py).
  for (const char* t : {"apertus", "cwm"}) {
    const ModelPositions m = model_positions_from_hf_json(cfg(t, ""));
    EXPECT_EQ(m.layers[0].rope->scaling.type, RopeScalingType::llama3) << t;
  }
  // cwm: full attention on layers 0, 4, ...; the others slide over 8192 keys (configuration_cwm.py).
  const ModelPositions cwm = model_positions_from_hf_json(cfg("cwm", R"("num_hidden_layers": 5)"));
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(cwm.layers[i].attention.window, i % 4 == 0 ? 0 : 8192) << i;
  // minimax_m2: the released checkpoints' rotary_dim becomes partial_rotary_factor = rotary_dim / head_dim
  // (configuration_minimax_m2.py MiniMaxM2Config.convert_rope_params_to_dict), which its default rope reads.
  const ModelPositions mm =
      model_positions_from_hf_json(cfg("minimax_m2", R"("head_dim": 128, "rotary_dim": 64)"));
  EXPECT_EQ(mm.layers[0].rotary_hi, 64);
  EXPECT_EQ(model_positions_from_hf_json(cfg("minimax_m2", R"("head_dim": 128)")).layers[0].rotary_hi, 128);
  expect_plan_error(cfg("minimax_m2", R"("head_dim": 128, "rotary_dim": 256)"), "partial_rotary_factor = 2");
  // vaultgemma: Gemma 2's alternation, softcap 50 and query_pre_attn_scalar 256.
  const ModelPositions vg = model_positions_from_hf_json(cfg("vaultgemma", ""));
  EXPECT_EQ(vg.layers[0].attention.window, 4096);
  EXPECT_EQ(vg.layers[1].attention.window, 0);
  EXPECT_EQ(*vg.layers[0].attention.softcap, 50.0);
  EXPECT_DOUBLE_EQ(vg.layers[0].attention.softmax_scale, 1.0 / 16);
  // granite_docling_text: attention_multiplier 0.015625 by default; phimoe slides every layer.
  EXPECT_EQ(model_positions_from_hf_json(cfg("granite_docling_text", "")).layers[0].attention.softmax_scale,
            0.015625);
  const ModelPositions pm = model_positions_from_hf_json(cfg("phimoe", R"("sliding_window": 64)"));
  for (const LayerPlan& l : pm.layers) EXPECT_EQ(l.attention.window, 64);
  // qwen3_moe, phimoe, ministral3: one mask for every layer; layer_types is not read (with a warning).
  for (const char* t : {"qwen3_moe", "phimoe"}) {
    const ModelPositions lt =
        model_positions_from_hf_json(cfg(t, R"("sliding_window": 16, "use_sliding_window": true,
        "layer_types": ["full_attention", "sliding_attention", "full_attention", "sliding_attention"])"));
    for (const LayerPlan& l : lt.layers) EXPECT_EQ(l.attention.window, 16) << t;
    EXPECT_TRUE(has_warning(lt, "layer_types is ignored by")) << t;
  }
  // phimoe: longrope whose attention factor is short_mscale = long_mscale (Phi-3.5-MoE); other scaled
  // types, unequal or missing mscales are refused; "su" is phi3's alone.
  const std::string factors = "[1.0, 1.5, 2.0, 2.5]";
  auto phimoe = [&](const std::string& extra) {
    return cfg("phimoe", R"("head_dim": 8, "rope_scaling": {"type": "longrope", "short_factor": )" + factors +
                             R"(, "long_factor": )" + factors +
                             R"(, "original_max_position_embeddings": 4096)" + extra + "}");
  };
  const ModelPositions pl =
      model_positions_from_hf_json(phimoe(R"(, "short_mscale": 1.25, "long_mscale": 1.25)"));
  EXPECT_EQ(pl.layers[0].rope->scaling.type, RopeScalingType::longrope);
  EXPECT_EQ(*pl.layers[0].rope->scaling.attention_factor, 1.25);
  expect_plan_error(phimoe(R"(, "short_mscale": 1.25, "long_mscale": 1.5)"),
                    "short_mscale = 1.25 and long_mscale");
  expect_plan_error(phimoe(R"(, "short_mscale": 1.25)"), "long_mscale is missing");
  expect_plan_error(
      cfg("phimoe",
          R"("rope_parameters": {"rope_type": "yarn", "factor": 4.0, "short_mscale": 1.2, "long_mscale": 1.2,
                                 "original_max_position_embeddings": 1024})"),
      "is not supported for model_type 'phimoe'");
  expect_plan_error(
      cfg("llama", R"("rope_scaling": {"type": "su", "short_factor": [1.0], "long_factor": [1.0]})"),
      "read for model_type 'phi3' only");
  // exaone4's and cohere2's RoPE rules tell sliding_window 0 from null: 0 is refused, null is no window.
  for (const char* t : {"exaone4", "exaone_moe", "kolibri1", "cohere2", "flint"}) {
    expect_plan_error(cfg(t, R"("sliding_window": 0)"), "sliding_window = 0 is invalid for model_type");
    EXPECT_EQ(model_positions_from_hf_json(cfg(t, R"("sliding_window": null)")).layers[0].attention.window, 0)
        << t;
  }
  // gemma4: a rope_parameters sub-dict without rope_theta is refused, a top-level rope_theta
  // notwithstanding: transformers' rotary module raises KeyError (Gemma4TextConfig copies nothing in).
  for (const char* top : {"", R"("rope_theta": 5e4, )"})
    expect_plan_error(cfg("gemma4_text", std::string(top) + R"("rope_parameters": {"sliding_attention":
        {"rope_type": "default"}, "full_attention": {"rope_type": "default", "rope_theta": 1e6}})"),
                      "rope_parameters.sliding_attention.rope_theta is missing");
  // aria_text, jais2: head_dim None -> hidden / heads (configuration_aria.py AriaTextConfig.__post_init__).
  for (const char* t : {"aria_text", "jais2"})
    EXPECT_EQ(model_positions_from_hf_json(cfg(t, "")).layers[0].qk_head_dim, 64) << t;
}

// MLA dims, layer patterns, bases and head counts from transformers 5.23's config classes (the harness
// checks each).
TEST(ModelFamilies, ClassDefaultMlaDimsLayerPatternsBasesAndHeadCounts) {
  // glm4_moe_lite, youtu, axk1: DeepSeek-V3's MLA; GLM-4.7-Flash's nope 192 / rope 64 / v 256 defaults.
  const ModelPositions gl = model_positions_from_hf_json(R"({"model_type": "glm4_moe_lite"})");
  EXPECT_EQ(gl.num_layers, 47);
  EXPECT_EQ(gl.layers[0].rotary_lo, 192);
  EXPECT_EQ(gl.layers[0].rotary_hi, 256);
  EXPECT_EQ(gl.layers[0].v_head_dim, 256);
  EXPECT_EQ(gl.layers[0].rope->layout, RopeLayout::interleaved);
  EXPECT_DOUBLE_EQ(gl.layers[0].attention.softmax_scale, 1.0 / 16);
  EXPECT_EQ(model_positions_from_hf_json(R"({"model_type": "youtu", "rope_interleave": false})")
                .layers[0]
                .rope->layout,
            RopeLayout::half);
  // lfm3: conv, conv, full (proportional, base 1e6, half the pairs), conv, sliding (window 256, base 1e4).
  const ModelPositions lf = model_positions_from_hf_json(R"({"model_type": "lfm3", "num_hidden_layers": 5})");
  EXPECT_EQ(lf.layers[0].layer_type, "conv");
  EXPECT_EQ(lf.layers[2].layer_type, "full_attention");
  EXPECT_EQ(lf.layers[2].rope->scaling.type, RopeScalingType::proportional);
  EXPECT_EQ(lf.layers[2].rope->base, 1e6);
  EXPECT_EQ(lf.layers[4].layer_type, "sliding_attention");
  EXPECT_EQ(lf.layers[4].attention.window, 256);
  EXPECT_EQ(lf.layers[4].rope->base, 1e4);
  // dots1: layers from max_window_layers slide when sliding_window is set (no use_sliding_window gate).
  const ModelPositions d1 = model_positions_from_hf_json(cfg("dots1", R"("max_window_layers": 2)"));
  EXPECT_EQ(d1.layers[1].attention.window, 0);
  EXPECT_EQ(d1.layers[2].attention.window, 4096);
  // mellum: rope_parameters per layer type by default (full 5e5, sliding 1e4).
  EXPECT_EQ(model_positions_from_hf_json(cfg("mellum", "")).layers[0].rope->base, 5e5);
  EXPECT_EQ(model_positions_from_hf_json(R"({"model_type": "hy_v3"})").layers[0].rope->base, 11158840);
  // jetmoe: head_dim = kv_channels; heads = num_key_value_heads * num_experts_per_tok, always.
  const ModelPositions jm =
      model_positions_from_hf_json(cfg("jetmoe", R"("kv_channels": 64, "num_key_value_heads": 8)"));
  EXPECT_EQ(jm.num_heads, 16);
  EXPECT_EQ(jm.layers[0].rotary_hi, 64);
  EXPECT_DOUBLE_EQ(jm.layers[0].attention.softmax_scale, 0.125);
  EXPECT_TRUE(has_warning(jm, "num_attention_heads = 4 is replaced by"));
}

// Learned tables: OPT's position p reads row p + 2 of max_position_embeddings + 2 rows
// (modeling_opt.py OPTLearnedPositionalEmbedding); GPT-2, GPT-Neo, StarCoder(Base): row p.
TEST(ModelFamilies, LearnedPositionOffset) {
  const ModelPositions opt = model_positions_from_hf_json(R"({"model_type": "opt"})");  // class defaults
  EXPECT_EQ(opt.learned_position_offset, 2);
  EXPECT_EQ(opt.max_position_embeddings, 2048);
  EXPECT_EQ(opt.num_layers, 12);
  EXPECT_EQ(opt.layers[0].position, PositionMethod::learned);
  EXPECT_DOUBLE_EQ(opt.layers[0].attention.softmax_scale, 1.0 / 8);  // 768 / 12 = 64
  for (const char* t : {"gpt2", "gpt_bigcode", "bert"})
    EXPECT_EQ(model_positions_from_hf_json(cfg(t, "")).learned_position_offset, 0) << t;
  EXPECT_EQ(load("gpt-neo__gpt-neo-125M.json").learned_position_offset, 0);
  EXPECT_EQ(load("gpt2__gpt2-large.json").learned_position_offset, 0);
  EXPECT_EQ(load("opt__opt-350m.json").learned_position_offset, 2);
  // RoBERTa (modeling_roberta.py create_position_ids_from_input_ids): 514 rows, position p reads row
  // p + pad_token_id + 1: 512 positions; bidirectional unless is_decoder (BERT's family alike).
  const ModelPositions rb = load("roberta__roberta-base.json");
  EXPECT_EQ(rb.learned_position_offset, 2);
  EXPECT_EQ(rb.max_position_embeddings, 512);
  EXPECT_FALSE(rb.layers[0].attention.causal);
  EXPECT_TRUE(
      model_positions_from_hf_json(cfg("roberta", R"("is_decoder": true)")).layers[0].attention.causal);
  EXPECT_TRUE(
      model_positions_from_hf_json(cfg("electra", R"("is_decoder": true)")).layers[0].attention.causal);
  EXPECT_EQ(model_positions_from_hf_json(cfg("xlm-roberta", R"("pad_token_id": 0)")).learned_position_offset,
            1);
  expect_plan_error(cfg("camembert", R"("pad_token_id": 4095)"),
                    "pad_token_id = 4095 is invalid for camembert");
  EXPECT_EQ(model_positions_from_hf_json(cfg("biogpt", "")).learned_position_offset, 2);
}

// Gemma 4 (configuration_gemma4.py, modeling_gemma4.py): 5 sliding : 1 full by default with the last
// layer forced full; full layers take global_head_dim (512) and proportional RoPE (0.25 of theta 1e6);
// transformers 5.23's own save writes per_layer_config instead of global_head_dim; scaling 1.0.
TEST(ModelForms, Gemma4PerLayerHeadDims) {
  const std::string base = R"("hidden_size": 1024, "num_attention_heads": 4, "num_hidden_layers": 7)";
  auto gemma4 = [&](const std::string& extra) {
    return model_positions_from_hf_json(R"({"model_type": "gemma4_text", )" + base +
                                        (extra.empty() ? "" : ", " + extra) + "}");
  };
  const ModelPositions m = gemma4("");
  const std::vector<std::string> want = {"sliding_attention", "sliding_attention", "sliding_attention",
                                         "sliding_attention", "sliding_attention", "full_attention",
                                         "full_attention"};  // layer 6 forced full
  ASSERT_EQ(m.layers.size(), 7u);
  for (size_t i = 0; i < 7; ++i) {
    SCOPED_TRACE(i);
    const LayerPlan& l = m.layers[i];
    EXPECT_EQ(l.layer_type, want[i]);
    EXPECT_EQ(l.attention.softmax_scale, 1.0);
    const bool full = want[i] == "full_attention";
    EXPECT_EQ(l.qk_head_dim, full ? 512 : 256);
    EXPECT_EQ(l.v_head_dim, full ? 512 : 256);
    EXPECT_EQ(l.rope->head_dim, full ? 512 : 256);
    EXPECT_EQ(l.rope->base, full ? 1e6 : 1e4);
    EXPECT_EQ(l.rope->scaling.type, full ? RopeScalingType::proportional : RopeScalingType::none);
    EXPECT_EQ(l.attention.window, full ? 0 : 512);
  }
  EXPECT_TRUE(has_warning(m, "forces it to full_attention"));
  // per_layer_config (string keys, as JSON writes them) overrides head_dim; global_head_dim then is inert.
  const ModelPositions p = gemma4(R"("global_head_dim": 128, "per_layer_config": {"5": {"head_dim": 64},
                                      "6": {"head_dim": 64, "num_key_value_heads": 1}})");
  EXPECT_EQ(p.layers[5].qk_head_dim, 64);
  EXPECT_EQ(p.layers[6].rope->head_dim, 64);
  EXPECT_EQ(p.layers[0].qk_head_dim, 256);
  EXPECT_TRUE(has_warning(p, "global_head_dim = 128 is ignored"));
  EXPECT_EQ(gemma4(R"("global_head_dim": 128)").layers[5].rope->head_dim, 128);
  // One rotary setup per layer type needs one head_dim per type; other positional overrides, refused.
  expect_plan_error(
      R"({"model_type": "gemma4_text", )" + base + R"(, "per_layer_config": {"5": {"head_dim": 64}}})",
      "one head_dim per type");
  expect_plan_error(
      R"({"model_type": "gemma4_text", )" + base + R"(, "per_layer_config": {"2": {"sliding_window": 64}}})",
      "per_layer_config.2.sliding_window");
  expect_plan_error(
      R"({"model_type": "gemma4_text", )" + base + R"(, "per_layer_config": {"7": {"head_dim": 64}}})",
      "keys must be layer indices in [0, 7)");
  expect_plan_error(R"({"model_type": "gemma4_text", )" + base + R"(, "per_layer_config": {"x": {}}})",
                    "keys must be layer indices");
  expect_plan_error(R"({"model_type": "gemma4_text", )" + base +
                        R"(, "per_layer_config": {"5": {"head_dim": 0}, "6": {"head_dim": 0}}})",
                    "per_layer_config.5.head_dim = 0 is invalid");
  expect_plan_error(R"({"model_type": "gemma4_text", )" + base + R"(, "use_bidirectional_attention": "all"})",
                    "use_bidirectional_attention = \"all\" is not modeled");
  EXPECT_TRUE(has_warning(gemma4(R"("use_bidirectional_attention": "vision")"), "image tokens"));
  // per_layer_config: null counts as given (no global_head_dim override); a flat rope dict cannot
  // serve Gemma 4's two head dims; other families do not read per_layer_config (refused).
  EXPECT_EQ(gemma4(R"("per_layer_config": null)").layers[5].qk_head_dim, 256);
  expect_plan_error(
      R"({"model_type": "gemma4_text", )" + base + R"(, "rope_parameters": {"rope_theta": 1e4}})",
      "must be a dict per layer type for gemma4");
  expect_plan_error(cfg("llama", R"("per_layer_config": {"1": {"head_dim": 32}})"),
                    "per_layer_config is not modeled by posenc for model_type 'llama'");
}

// Hybrid NoPE: exaone4 global layers (modeling_exaone4.py Exaone4Attention.forward) and cohere2 (RoPE iff the
// layer slides with a window, modeling_cohere2.py Cohere2Attention).
TEST(ModelForms, HybridNoPE) {
  const ModelPositions e = load("exaone4__EXAONE-4.0-32B.json");
  EXPECT_EQ(e.layers[3].position, PositionMethod::none);
  EXPECT_EQ(e.layers[2].position, PositionMethod::rope);
  const ModelPositions c = model_positions_from_hf_json(cfg("cohere2", ""));  // window 4096, pattern 4
  EXPECT_EQ(c.layers[0].position, PositionMethod::rope);
  EXPECT_EQ(c.layers[0].rope->layout, RopeLayout::interleaved);
  EXPECT_EQ(c.layers[3].position, PositionMethod::none);
  const ModelPositions c0 = model_positions_from_hf_json(cfg("cohere2", R"("sliding_window": null)"));
  for (const LayerPlan& l : c0.layers) EXPECT_EQ(l.position, PositionMethod::none);
}

// Families without a collected config, from their config classes (configuration_<type>.py) and
// attention modules (modeling_<type>.py).
TEST(ModelForms, WindowsSoftcapsPartialRotationAndScalesFromClassDefaults) {
  // gemma2: layers 0, 2, ... sliding (4096), softcap 50, scale query_pre_attn_scalar^-0.5 = 1/16.
  const ModelPositions g2 = model_positions_from_hf_json(cfg("gemma2", ""));
  EXPECT_EQ(g2.layers[0].attention.window, 4096);
  EXPECT_EQ(g2.layers[1].attention.window, 0);
  EXPECT_EQ(g2.layers[1].attention.softcap, 50.0);
  EXPECT_DOUBLE_EQ(g2.layers[1].attention.softmax_scale, 1.0 / 16);
  EXPECT_EQ(g2.layers[1].rotary_hi, 256);  // head_dim default 256
  // smollm3: theta 2e6, NoPE every 4th layer; sliding only on NoPE layers with use_sliding_window.
  const ModelPositions sm =
      model_positions_from_hf_json(cfg("smollm3", R"("use_sliding_window": true, "sliding_window": 64)"));
  EXPECT_EQ(sm.layers[0].rope->base, 2e6);
  EXPECT_EQ(sm.layers[3].position, PositionMethod::none);
  EXPECT_EQ(sm.layers[3].attention.window, 64);
  EXPECT_EQ(sm.layers[2].attention.window, 0);
  // minicpm3: rotate_half on the last qk_rope_head_dim (32) of the 96-dim q/k head; yarn mscale.
  const ModelPositions mc = model_positions_from_hf_json(
      cfg("minicpm3",
          R"("rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 1024,
                          "mscale_all_dim": 2})"));
  EXPECT_EQ(mc.layers[0].rotary_lo, 64);
  EXPECT_EQ(mc.layers[0].rotary_hi, 96);
  EXPECT_EQ(mc.layers[0].rope->layout, RopeLayout::half);
  const double ms = 0.1 * 2 * std::log(4.0) + 1;
  EXPECT_DOUBLE_EQ(mc.layers[0].attention.softmax_scale, ms * ms / std::sqrt(96.0));
  // deepseek_v2 (complex pairs) and glm (partial 0.5, interleaved).
  const ModelPositions ds2 = model_positions_from_hf_json(cfg("deepseek_v2", ""));
  EXPECT_EQ(ds2.layers[0].rope->layout, RopeLayout::interleaved);
  const ModelPositions glm = model_positions_from_hf_json(cfg("glm", R"("head_dim": 64)"));
  EXPECT_EQ(glm.layers[0].rotary_hi, 32);
  EXPECT_EQ(glm.layers[0].rope->layout, RopeLayout::interleaved);
  EXPECT_EQ(model_positions_from_hf_json(cfg("stablelm", "")).layers[0].rotary_hi, 16);  // 64 * 0.25
  // granite: attention_multiplier is the scale; gpt2: / (layer + 1) with scale_attn_by_inverse_layer_idx.
  EXPECT_EQ(model_positions_from_hf_json(cfg("granite", R"("attention_multiplier": 0.015625)"))
                .layers[0]
                .attention.softmax_scale,
            0.015625);
  const ModelPositions g =
      model_positions_from_hf_json(cfg("gpt2", R"("scale_attn_by_inverse_layer_idx": true)"));
  EXPECT_DOUBLE_EQ(g.layers[3].attention.softmax_scale, 0.125 / 4);
  // mpt: ALiBi always (modeling_mpt.py build_mpt_alibi_tensor), attn_config.softmax_scale.
  const ModelPositions mpt = model_positions_from_hf_json(
      R"({"model_type": "mpt", "d_model": 256, "n_heads": 4, "n_layers": 2, "max_seq_len": 2048,
          "attn_config": {"alibi": true, "softmax_scale": 0.5}})");
  EXPECT_EQ(mpt.layers[1].position, PositionMethod::alibi);
  EXPECT_EQ(mpt.layers[1].attention.softmax_scale, 0.5);
}

// Class defaults found wrong by python/tests/model/test_model_families.py (transformers 5.23 class
// defaults against each family's own model).
TEST(ModelFamilies, ClassDefaultHeadDimOfQwen3MoeAndGlm4Moe) {
  // Qwen3MoeConfig and Glm4MoeConfig have no head_dim field: the attention takes hidden / heads
  // (modeling_qwen3_moe.py Qwen3MoeAttention.__init__, modeling_glm4_moe.py Glm4MoeAttention.__init__), here
  // 256 / 4 = 64, not Qwen3's 128.
  const ModelPositions q = model_positions_from_hf_json(cfg("qwen3_moe", ""));
  EXPECT_EQ(q.layers[0].qk_head_dim, 64);
  EXPECT_EQ(q.layers[0].rotary_hi, 64);
  EXPECT_DOUBLE_EQ(q.layers[0].attention.softmax_scale, 1.0 / 8);
  // glm4_moe: partial_rotary_factor 0.5 of the 64-dim head, rotate_half.
  const ModelPositions g = model_positions_from_hf_json(cfg("glm4_moe", ""));
  EXPECT_EQ(g.layers[0].qk_head_dim, 64);
  EXPECT_EQ(g.layers[0].rotary_hi, 32);
  EXPECT_EQ(g.layers[0].rope->layout, RopeLayout::half);
  // A real config's head_dim still wins (GLM-4.5, Qwen3-30B-A3B: 128).
  EXPECT_EQ(model_positions_from_hf_json(cfg("qwen3_moe", R"("head_dim": 128)")).layers[0].rotary_hi, 128);
}

TEST(ModelFamilies, LlamaLikeFamiliesBasesHeadDimsLayoutsAndMultipliers) {
  // Class defaults (configuration_<type>.py): default_theta and head_dim (arcee's None: hidden / heads,
  // 256 / 4 here; found by test_model_families.py's "heads" variant). Layout: rotate_half, except
  // helium and ernie4_5(_moe), whose apply_rotary_pos_emb repeat_interleaves cos/sin and rotates
  // pairs (2j, 2j + 1) (modeling_helium.py, modeling_ernie4_5.py).
  struct Case {
    const char* type;
    double theta;
    int64_t head_dim;
    RopeLayout layout;
  };
  const RopeLayout H = RopeLayout::half, I = RopeLayout::interleaved;
  for (const Case& c :
       {Case{"arcee", 1e4, 64, H}, Case{"helium", 1e5, 128, I}, Case{"olmo", 1e4, 64, H},
        Case{"olmoe", 1e4, 64, H}, Case{"flex_olmo", 5e5, 64, H}, Case{"ernie4_5", 5e5, 128, I},
        Case{"ernie4_5_moe", 5e5, 64, I}, Case{"seed_oss", 1e4, 128, H}, Case{"bitnet", 5e5, 64, H},
        Case{"solar_open", 1e6, 128, H}, Case{"granitemoe", 1e4, 64, H}}) {
    const ModelPositions m = model_positions_from_hf_json(cfg(c.type, ""));
    EXPECT_EQ(m.layers[0].rope->base, c.theta) << c.type;
    EXPECT_EQ(m.layers[0].rotary_hi, c.head_dim) << c.type;
    EXPECT_EQ(m.layers[0].rope->layout, c.layout) << c.type;
  }
  // granitemoe, granitemoeshared, hyperclovax: self.scaling = config.attention_multiplier
  // (modeling_granitemoe.py GraniteMoeAttention.__init__, modeling_hyperclovax.py
  // HyperCLOVAXAttention.__init__); 1.0 by default for granite, but head_dim^-0.5 for hyperclovax
  // (configuration_hyperclovax.py HyperCLOVAXConfig.__post_init__).
  EXPECT_DOUBLE_EQ(model_positions_from_hf_json(cfg("hyperclovax", "")).layers[0].attention.softmax_scale,
                   1.0 / std::sqrt(64.0));  // HyperCLOVAXConfig head_dim None -> hidden / heads
  for (const char* t : {"granitemoe", "granitemoeshared", "hyperclovax"}) {
    if (std::string(t) != "hyperclovax") {
      EXPECT_EQ(model_positions_from_hf_json(cfg(t, "")).layers[0].attention.softmax_scale, 1.0) << t;
    }
    EXPECT_EQ(model_positions_from_hf_json(cfg(t, R"("attention_multiplier": 0.015625)"))
                  .layers[0]
                  .attention.softmax_scale,
              0.015625)
        << t;
  }
  // The MoE text models of Qwen3-VL and Qwen3.5 read as their dense twins (same class defaults).
  EXPECT_EQ(model_positions_from_hf_json(cfg("qwen3_vl_moe_text", "")).model_type, "qwen3_vl");
  EXPECT_EQ(model_positions_from_hf_json(cfg("qwen3_5_moe_text", "")).layers[3].rotary_hi,
            64);  // 0.25 of 256
}

// NanoChat (transformers 5.23 configuration_nanochat.py NanoChatConfig, modeling_nanochat.py rotate_half):
// Llama's default RoPE over hidden / heads (768 / 6 = 128 dims), every angle negated (RopeConfig::reversed),
// causal, head^-0.5; under a scaled rope type its weightless q / k norms after RoPE cancel the attention
// factor.
TEST(ModelFamilies, NanoChatReversedRotation) {
  const ModelPositions m = model_positions_from_hf_json(test::model_json("nanochat"));  // class defaults
  ASSERT_EQ(m.layers.size(), 12u);
  const LayerPlan& l = m.layers[0];
  ASSERT_TRUE(l.rope);
  EXPECT_TRUE(l.rope->reversed);
  EXPECT_EQ(l.rope->layout, RopeLayout::half);
  EXPECT_EQ(l.rope->base, 1e4);
  EXPECT_EQ(l.rotary_hi, 128);
  EXPECT_TRUE(l.attention.causal);
  EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / std::sqrt(128.0));
  EXPECT_TRUE(m.warnings.empty()) << m.warnings[0];
  EXPECT_FALSE(model_positions_from_hf_json(cfg("llama", "")).layers[0].rope->reversed);
  const ModelPositions yarn = model_positions_from_hf_json(
      cfg("nanochat", R"("rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0})"));
  EXPECT_TRUE(yarn.layers[0].rope->reversed);
  EXPECT_TRUE(has_warning(yarn, "q_norm / k_norm after RoPE cancel")) << yarn.warnings.size();
  // nanochat's own export (n_layer, n_embd, window_pattern, ...: its auto_map's code) is refused by name.
  EXPECT_NE(test::plan_error(
                test::model_json("nanochat", R"("n_layer": 20, "n_embd": 1280, "window_pattern": "SSSL")"))
                .find("n_layer = 20 is nanochat's remote-code form"),
            std::string::npos);
  EXPECT_NE(
      test::plan_error(test::model_json("nanochat", R"("window_pattern": "SSSL")")).find("window_pattern"),
      std::string::npos);
}

TEST(ModelForms, NonFiniteNumbersOfPythonsJsonDumps) {
  // json.dumps writes NaN / Infinity bare (Mamba-2's time_step_limit [0.0, Infinity]): the
  // model_type decides, and a positional key holding one is named.
  expect_plan_error(R"({"model_type": "hrm_text", "time_step_limit": [0.0, Infinity], "x": NaN})",
                    "model_type 'hrm_text' is not supported");
  const ModelPositions mamba2 =
      model_positions_from_hf_json(R"({"model_type": "mamba2", "time_step_limit": [0.0, Infinity]})");
  EXPECT_EQ(mamba2.num_layers, 64);
  expect_plan_error(cfg("llama", R"("rope_theta": -Infinity, "note": "Infinity \" NaN")"),
                    "rope_theta = \"-Infinity\"");
  const ModelPositions m = model_positions_from_hf_json(cfg("llama", R"("unused_limit": [0.0, Infinity])"));
  EXPECT_EQ(m.layers[0].rope->base, 1e4);
}

// Hostile numbers found by fuzz/fuzz_config_json.cc (inputs kept in fuzz/corpus/config_json/): each is
// an error naming the key before any cast, sum or allocation (clang's UBSan checks the casts).
TEST(ModelForms, HostileSizesAreRefusedBeforeAnyCastOrAllocation) {
  expect_plan_error(cfg("llama", R"("head_dim": 9223372036854775807)"),
                    "head_dim = 9223372036854775807 is invalid");
  expect_plan_error(cfg("llama", R"("head_dim": 18446744073709551615)"), "larger than the int64 range");
  expect_plan_error(cfg("llama", R"("partial_rotary_factor": 1e300,
                               "rope_scaling": {"rope_type": "linear", "factor": 2})"),
                    "partial_rotary_factor = 1.0000000000000001e+300 is invalid: must be in (0, 1]");
  expect_plan_error(cfg("qwen2_vl", R"("rope_scaling": {"type": "mrope", "mrope_section": [1e300, 24, 24]})"),
                    "mrope_section contains 1.0000000000000001e+300: must be integers in [0, 65536]");
  expect_plan_error(
      R"({"model_type": "mllama", "text_config": {"model_type": "mllama_text_model", "hidden_size": 64,
                   "num_attention_heads": 4, "num_hidden_layers": 4, "cross_attention_layers": [1e300]}})",
      "cross_attention_layers contains 1.0000000000000001e+300");
  expect_plan_error(cfg("llama", R"("num_hidden_layers": 100000000)"),
                    "num_hidden_layers = 100000000 is invalid");
  expect_plan_error(R"({"model_type": "t5", "d_model": 64, "num_heads": 4, "num_layers": 2,
                   "num_decoder_layers": 9223372036854775807})",
                    "num_decoder_layers = 9223372036854775807 is invalid");
  // ministral3's llama_4_scaling_beta divides positions by the original context: required.
  expect_plan_error(R"({"model_type": "ministral3", "hidden_size": 64, "num_attention_heads": 4,
                   "num_hidden_layers": 2, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                   "llama_4_scaling_beta": 0.1}})",
                    "original_max_position_embeddings is missing");
  // Layer-type periods of 0 divide by zero in Python (ZeroDivisionError) and did in C++ (found by
  // fuzz_config_json; the input is kept in fuzz/corpus/config_json).
  expect_plan_error(cfg("qwen3_next", R"("full_attention_interval": 0)"),
                    "full_attention_interval = 0 is invalid: must be >= 1");
  expect_plan_error(cfg("gemma3_text", R"("sliding_window_pattern": 0, "sliding_window": 512)"),
                    "sliding_window_pattern = 0 is invalid: must be >= 1");
  expect_plan_error(cfg("cohere2", R"("sliding_window_pattern": -4, "sliding_window": 512)"),
                    "sliding_window_pattern = -4 is invalid: must be >= 1");
  expect_plan_error(cfg("smollm3", R"("no_rope_layer_interval": 0)"),
                    "no_rope_layer_interval = 0 is invalid");
  // max_window_layers below 0: every layer slides, as `i >= max_window_layers` makes it in Python.
  const ModelPositions qwen2 = model_positions_from_hf_json(
      cfg("qwen2", R"("max_window_layers": -3, "use_sliding_window": true, "sliding_window": 512)"));
  for (const LayerPlan& layer : qwen2.layers) EXPECT_EQ(layer.attention.window, 512) << layer.layer;
}

// Llama 4's qk_norm after RoPE cancels a scaled rotation's attention factor (yarn's 0.1 ln(factor) + 1):
// named; without qk_norm (use_qk_norm false, Maverick's form), or with llama3's factor 1, nothing.
TEST(ModelForms, Llama4QkNormCancelsTheAttentionFactor) {
  const std::string yarn = R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0,
      "original_max_position_embeddings": 1024})";
  const ModelPositions m = model_positions_from_hf_json(cfg("llama4_text", yarn));
  EXPECT_TRUE(has_warning(m, "which llama4_text's qk_norm (use_qk_norm) after RoPE cancels"));
  const ModelPositions off =
      model_positions_from_hf_json(cfg("llama4_text", yarn + R"(, "use_qk_norm": false)"));
  EXPECT_FALSE(has_warning(off, "qk_norm"));
  const ModelPositions scout =
      model_positions_from_hf_file(kDir + "llama4__Llama-4-Scout-17B-16E-Instruct.json");
  EXPECT_FALSE(has_warning(scout, "qk_norm"));
}

TEST(ModelForms, WarningsForUnknownPositionalKeys) {
  const ModelPositions m = model_positions_from_hf_json(
      cfg("llama", R"("rope_foo": 1, "my_window": 3, "vocab_size": 5, "attention_dropout": 0.0,
                      "rope_scaling": {"rope_type": "linear", "factor": 2, "extra": 1})"));
  EXPECT_TRUE(has_warning(m, "'rope_foo'"));
  EXPECT_TRUE(has_warning(m, "'my_window'"));
  EXPECT_TRUE(has_warning(m, "'rope_scaling.extra'"));
  EXPECT_EQ(m.warnings.size(), 3u);
  const ModelPositions w = model_positions_from_hf_json(
      R"({"model_type": "gemma3", "rope_theta": 5, "text_config": {"num_hidden_layers": 2}})");
  EXPECT_TRUE(has_warning(w, "top-level key 'rope_theta' is ignored"));
}

TEST(ModelForms, BadInput) {
  expect_plan_error("{", "malformed JSON");
  expect_plan_error("[1]", "must be an object");
  expect_plan_error(R"({"hidden_size": 8})", "model_type is missing");
  // Omitted sizes take the class defaults (LlamaConfig: 32 heads); a wrong type or value is an error.
  EXPECT_EQ(model_positions_from_hf_json(R"({"model_type": "llama", "hidden_size": 256})").num_heads, 32);
  expect_plan_error(R"({"model_type": "llama", "hidden_size": 256, "num_attention_heads": "4"})",
                    "num_attention_heads");
  expect_plan_error(R"({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 0})",
                    "num_attention_heads = 0 is invalid");
  expect_plan_error(cfg("llama", R"("rope_theta": "big")"), "rope_theta = \"big\"");
  expect_plan_error(cfg("llama", R"("rope_scaling": {"rope_type": "ntk-by-parts", "factor": 2})"),
                    "rope_type");
  expect_plan_error(cfg("llama", R"("layer_types": ["full_attention"])"), "layer_types");
  expect_plan_error(cfg("llama", R"("rope_scaling": {"rope_type": "llama3", "factor": 8})"),
                    "low_freq_factor");
  expect_plan_error(cfg("internlm", ""), "model_type 'internlm' is not supported");
  expect_plan_error(cfg("some_new_model", ""), "model_type 'some_new_model' is not in posenc's model table");
}

TEST(ModelForms, NumbersOutOfRangeAreMalformedJson) {
  // nlohmann reports 1e400 as out_of_range, not parse_error: it escaped both parsers before.
  const std::string text = R"({"model_type": "llama", "head_dim": 64, "rope_theta": 1e400})";
  EXPECT_THROW(model_positions_from_hf_json(text), Error);
  EXPECT_THROW(rope_config_from_hf_json(text), Error);
  try {
    rope_config_from_hf_json(text);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("malformed JSON"), std::string::npos) << e.what();
  }
}

TEST(ModelForms, ConfigFilesMustBeSmallRegularFiles) {
  // A FIFO would block, /dev/zero never ends, a directory is no file: refused before any read.
  auto expect_file_error = [](const std::string& path, const std::string& needle) {
    for (int parser = 0; parser < 2; ++parser) {
      try {
        if (parser == 0)
          model_positions_from_hf_file(path);
        else
          rope_config_from_hf_file(path);
        ADD_FAILURE() << path;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      }
    }
  };
  expect_file_error("/dev/zero", "is not a regular file");
  expect_file_error("/tmp", "is not a regular file");
  expect_file_error("/nonexistent/config.json", "cannot open config file");
}

// ModernBERT, the encoder (configuration_modernbert.py, modeling_modernbert.py): full attention on every
// global_attn_every_n_layers-th layer from 0 with base global_rope_theta, the others sliding with
// local_rope_theta; bidirectional, |q - k| <= local_attention // 2 on sliding layers (posenc's window one
// more: |q - k| < window).
TEST(ModelFamilies, ModernBertEncoder) {
  const ModelPositions m = model_positions_from_hf_json(R"({"model_type": "modernbert"})");
  ASSERT_EQ(m.num_layers, 22);
  for (const LayerPlan& l : m.layers) {
    SCOPED_TRACE(l.layer);
    const bool full = l.layer % 3 == 0;
    EXPECT_EQ(l.layer_type, full ? "full_attention" : "sliding_attention");
    ASSERT_TRUE(l.rope);
    EXPECT_EQ(l.rope->base, full ? 1.6e5 : 1e4);
    EXPECT_FALSE(l.attention.causal);
    EXPECT_EQ(l.attention.window, full ? 0 : 65);
    EXPECT_EQ(l.rotary_hi, 64);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 0.125);
  }
  const ModelPositions w = model_positions_from_hf_json(
      R"({"model_type": "modernbert", "local_attention": 256, "global_attn_every_n_layers": 2,
          "global_rope_theta": 5e4, "num_hidden_layers": 4})");
  EXPECT_EQ(w.layers[1].attention.window, 129);
  EXPECT_EQ(w.layers[2].layer_type, "full_attention");
  EXPECT_EQ(w.layers[2].rope->base, 5e4);
  EXPECT_TRUE(has_warning(model_positions_from_hf_json(R"({"model_type": "modernbert", "rope_theta": 1e4})"),
                          "rope_theta is not read by modernbert"));
  // Beside a saved layer_types the period decides nothing, in transformers 5 too (configuration_modernbert.py
  // ModernBertConfig.__post_init__): no warning that calls it not understood.
  const ModelPositions saved = model_positions_from_hf_json(
      R"({"model_type": "modernbert", "global_attn_every_n_layers": 2, "num_hidden_layers": 2,
          "layer_types": ["sliding_attention", "full_attention"]})");
  EXPECT_EQ(saved.layers[0].layer_type, "sliding_attention");
  EXPECT_TRUE(saved.warnings.empty()) << ::testing::PrintToString(saved.warnings);
}

// Encoders bidirectional whatever is_decoder says (modeling_ibert.py IBertModel.forward,
// modeling_distilbert.py DistilBertSelfAttention.__init__); nomic's remote-code keys, which NomicBertConfig
// does not map, are reported and not read; DistilBERT's sinusoidal_pos_embds only initializes its learned
// table.
TEST(ModelFamilies, EncoderForms) {
  for (const char* type : {"ibert", "distilbert", "gte", "modernbert"}) {
    SCOPED_TRACE(type);
    const ModelPositions m =
        model_positions_from_hf_json(std::string(R"({"model_type": ")") + type + R"(", "is_decoder": true})");
    for (const LayerPlan& l : m.layers) EXPECT_FALSE(l.attention.causal);
  }
  const ModelPositions n = model_positions_from_hf_json(
      R"({"model_type": "nomic_bert", "n_embd": 384, "n_head": 6, "n_layer": 4, "n_positions": 8192,
          "rotary_emb_base": 1000, "rotary_emb_fraction": 1.0, "rotary_emb_interleaved": false})");
  EXPECT_EQ(n.num_layers, 12);
  EXPECT_EQ(n.num_heads, 12);
  EXPECT_EQ(n.max_position_embeddings, 2048);
  EXPECT_EQ(n.layers[0].rotary_hi, 64);
  EXPECT_EQ(n.layers[0].rope->base, 1000.0);
  EXPECT_EQ(n.warnings.size(), 7u);
  EXPECT_TRUE(has_warning(n, "n_positions = 8192 is not read by transformers 5's nomic_bert"));
  EXPECT_TRUE(has_warning(
      model_positions_from_hf_json(R"({"model_type": "distilbert", "sinusoidal_pos_embds": true})"),
      "only initializes distilbert's learned table"));
}

TEST(ModelFamilies, SinusoidalFamiliesCarryTheirTable) {
  // modeling_xglm.py XGLMSinusoidalPositionalEmbedding: fairseq's [sin | cos], w_i = 10000^(-i / (dim/2 -
  // 1)), position p at row p + 2; attribute_map num_attention_heads -> attention_heads.
  const ModelPositions x = model_positions_from_hf_json(
      R"({"model_type": "xglm", "d_model": 64, "attention_heads": 4, "num_layers": 3})");
  ASSERT_TRUE(x.sinusoidal.has_value());
  EXPECT_EQ(x.sinusoidal->dim, 64);
  EXPECT_EQ(x.sinusoidal->layout, SinusoidalLayout::split);
  EXPECT_EQ(x.sinusoidal->frequencies, SinusoidalFrequencies::half_dim_minus_one);
  EXPECT_EQ(x.sinusoidal->position_offset, 2);
  EXPECT_EQ(x.num_heads, 4);
  for (const LayerPlan& l : x.layers) {
    EXPECT_EQ(l.position, PositionMethod::sinusoidal);
    EXPECT_TRUE(l.attention.causal);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 0.25);  // head 16
  }
  // modeling_ctrl.py positional_encoding: [sin | cos], w_i = 10000^(-2i / dim), position p at row p.
  const ModelPositions c =
      model_positions_from_hf_json(R"({"model_type": "ctrl", "n_embd": 32, "n_head": 2, "n_layer": 2})");
  ASSERT_TRUE(c.sinusoidal.has_value());
  EXPECT_EQ(c.sinusoidal->frequencies, SinusoidalFrequencies::model_dim);
  EXPECT_EQ(c.sinusoidal->position_offset, 0);
  EXPECT_EQ(c.max_position_embeddings, 256);  // n_positions
  EXPECT_FALSE(load("llama2__Llama-2-7b-chat-hf.json").sinusoidal.has_value());
}

}  // namespace
}  // namespace posenc
