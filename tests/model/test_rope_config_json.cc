// tests/model/test_rope_config_json.cc: the HuggingFace config.json parser of RoPE configurations.
#include <cmath>
#include <numbers>

#include "posenc/error.h"
#include "posenc/rope.h"
#include "test_util.h"

namespace posenc::test {
namespace {

TEST(RopeConfigJson, Llama31) {
  const RopeConfig c = rope_config_from_hf_json(R"({
    "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.effective_rotary_dim(), 128);
  EXPECT_EQ(c.base, 500000.0);
  EXPECT_EQ(c.scaling.type, RopeScalingType::llama3);
  EXPECT_EQ(c.scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.layout, RopeLayout::half);
}

// A type posenc's table does not plan is read by the generic rules; a rope_scaling key they do not read is
// named (Hunyuan's remote code: base * alpha^(d / (d - 2)), which the generic dynamic rule would not apply).
TEST(RopeConfigJson, GenericRulesNameTheScalingKeysTheyIgnore) {
  std::vector<std::string> warnings;
  const RopeConfig c = rope_config_from_hf_json(
      R"({"model_type": "hunyuan", "hidden_size": 256, "num_attention_heads": 4, "rope_theta": 10000,
          "max_position_embeddings": 4096,
          "rope_scaling": {"type": "dynamic", "factor": 1.0, "alpha": 1000.0}})",
      &warnings);
  EXPECT_EQ(c.base, 10000);
  bool named = false, generic = false;
  for (const std::string& w : warnings) {
    named = named || w.find("rope_scaling.alpha = 1000") != std::string::npos;
    generic = generic || w.find("read by the generic rules") != std::string::npos;
  }
  EXPECT_TRUE(named) << ::testing::PrintToString(warnings);
  EXPECT_TRUE(generic) << ::testing::PrintToString(warnings);
}

TEST(RopeConfigJson, Phi3LongRopeWithTopLevelOriginalContext) {
  std::string factors = "[";
  for (int i = 0; i < 48; ++i) {
    if (i) factors += ",";
    factors += std::to_string(1.0 + i * 0.1);
  }
  factors += "]";
  const RopeConfig c = rope_config_from_hf_json(
      R"({"hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
          "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
          "rope_scaling": {"type": "longrope", "short_factor": )" +
      factors + R"(, "long_factor": )" + factors + "}}");
  EXPECT_EQ(c.head_dim, 96);
  EXPECT_EQ(c.scaling.type, RopeScalingType::longrope);
  EXPECT_EQ(c.scaling.original_max_position_embeddings, 4096);
  EXPECT_EQ(c.scaling.long_factor.size(), 48u);
}

TEST(RopeConfigJson, Qwen2VlMropeAndPartialRotaryAndGptJ) {
  RopeConfig c =
      rope_config_from_hf_json(R"({"hidden_size": 1536, "num_attention_heads": 12, "rope_theta": 1000000.0,
      "max_position_embeddings": 32768, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}})");
  EXPECT_EQ(c.multimodal, RopeMultimodal::mrope);
  EXPECT_EQ(c.mrope_section, (std::vector<int64_t>{16, 24, 24}));
  EXPECT_EQ(c.scaling.type, RopeScalingType::none);
  c = rope_config_from_hf_json(
      R"({"hidden_size": 2560, "num_attention_heads": 32, "partial_rotary_factor": 0.4})");
  EXPECT_EQ(c.head_dim, 80);
  EXPECT_EQ(c.rotary_dim, 32);
  c = rope_config_from_hf_json(
      R"({"model_type": "gptj", "n_embd": 4096, "head_dim": 256, "rotary_dim": 64})");
  EXPECT_EQ(c.layout, RopeLayout::interleaved);
  EXPECT_EQ(c.rotary_dim, 64);
  c = rope_config_from_hf_json(R"({"text_config": {"hidden_size": 2048, "num_attention_heads": 16,
      "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": true}}})");
  EXPECT_EQ(c.multimodal, RopeMultimodal::mrope_interleaved);
  c = rope_config_from_hf_json(R"({"head_dim": 64, "rope_scaling": {"type": "yarn", "factor": 4.0,
      "original_max_position_embeddings": 32768}})");
  EXPECT_EQ(c.scaling.type, RopeScalingType::yarn);
}

// transformers 5 writes partial_rotary_factor inside rope_parameters only (Qwen3.5-9B's
// text_config: head_dim 256, partial_rotary_factor 0.25 -> 64 rotated dims). It used to be ignored.
TEST(RopeConfigJson, PartialRotaryFactorInsideRopeParametersRealQwen35) {
  const RopeConfig c =
      rope_config_from_hf_file(std::string(POSENC_TEST_DATA_DIR) + "/hf_configs/qwen3.5__Qwen3.5-9B.json");
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.effective_rotary_dim(), 64);
  EXPECT_EQ(c.base, 1e7);
  // The value inside the dict wins over a top-level one (transformers: setdefault into the dict).
  const RopeConfig both = rope_config_from_hf_json(
      R"({"head_dim": 64, "partial_rotary_factor": 1.0,
          "rope_parameters": {"rope_type": "default", "rope_theta": 10000, "partial_rotary_factor": 0.5}})");
  EXPECT_EQ(both.effective_rotary_dim(), 32);
  EXPECT_EQ(
      rope_config_from_hf_json(R"({"head_dim": 64, "partial_rotary_factor": 0.25})").effective_rotary_dim(),
      16);
}

// A model_type posenc's model table plans reads as its family applies RoPE (model_positions_from_hf_json),
// real configs the generic rules would misread: Cohere's pairs (modeling_cohere.py rotate_half on
// interleaved dims), NanoChat's reversed rotation; Gemma 3's two bases and DeepSeek-V2's rotation of
// dims [128, 192) cannot be one RopeConfig and are refused naming ModelPositions, as is a model without
// RoPE; a remote-code type posenc follows (ChatGLM: half the head, pairs) through its plan; one it does
// not follow (Baichuan) and configs without model_type read by the generic rules, the former with a
// warning naming why.
TEST(RopeConfigJson, ModelTypesReadAsTheirFamilyAppliesRope) {
  const std::string dir = std::string(POSENC_TEST_DATA_DIR) + "/hf_configs/";
  std::vector<std::string> warnings;
  const RopeConfig cohere = rope_config_from_hf_file(dir + "cohere__c4ai-command-r-v01.json", &warnings);
  EXPECT_EQ(cohere.layout, RopeLayout::interleaved);
  EXPECT_EQ(cohere.base, 8e6);
  EXPECT_TRUE(warnings.empty());
  const RopeConfig nanochat = rope_config_from_hf_json(
      R"({"model_type": "nanochat", "hidden_size": 1280, "num_attention_heads": 10,
          "num_hidden_layers": 20})");
  EXPECT_TRUE(nanochat.reversed);
  EXPECT_EQ(nanochat.head_dim, 128);
  expect_error([&] { rope_config_from_hf_file(dir + "gemma3__gemma-3-27b-it.json"); },
               "layers 0 (sliding_attention, base 10000) and 5 (full_attention, base 1000000) rotate "
               "differently, which one RopeConfig cannot describe: use model_positions_from_hf_json");
  expect_error([&] { rope_config_from_hf_file(dir + "deepseek-v2__DeepSeek-V2-Lite.json"); },
               "model_type 'deepseek_v2' rotates dims [128, 192) of its 192-dim q/k heads");
  expect_error(
      [&] { rope_config_from_hf_json(R"({"model_type": "bloom", "n_head": 8, "hidden_size": 512})"); },
      "model_type 'bloom' has no RoPE layer (its layers' positions: alibi)");
  warnings.clear();
  const RopeConfig glm = rope_config_from_hf_file(dir + "chatglm__chatglm2-6b.json", &warnings);
  EXPECT_EQ(glm.layout, RopeLayout::interleaved);
  EXPECT_EQ(glm.head_dim, 128);
  EXPECT_EQ(glm.rotary_dim, 64);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(
      warnings[0].find("torch_dtype = float16: ChatGLM2's code builds positions and angles in that dtype"),
      std::string::npos)
      << warnings[0];
  warnings.clear();
  const RopeConfig internlm = rope_config_from_hf_json(
      R"({"model_type": "internlm", "hidden_size": 4096, "num_attention_heads": 32})", &warnings);
  EXPECT_EQ(internlm.layout, RopeLayout::half);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(
      warnings[0].find("model_type 'internlm' is not supported: InternLM (1)'s rotary code is remote code"),
      std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("read by the generic rules"), std::string::npos);
  warnings.clear();
  rope_config_from_hf_json(R"({"head_dim": 64})", &warnings);
  EXPECT_TRUE(warnings.empty());
  // Llama 4 Scout's NoPE layers (every fourth, no_rope_layers) are named; its RoPE layers share one config.
  warnings.clear();
  const RopeConfig scout =
      rope_config_from_hf_file(dir + "llama4__Llama-4-Scout-17B-16E-Instruct.json", &warnings);
  EXPECT_EQ(scout.base, 5e5);
  bool named = false;
  for (const std::string& w : warnings)
    named = named || w.find("12 attention layers (3, 7, 11, 15, 19, 23, 27, 31, ...) rotate nothing") !=
                         std::string::npos;
  EXPECT_TRUE(named) << warnings.size();
  // The model plan's warnings come along (a key it does not understand).
  warnings.clear();
  rope_config_from_hf_json(R"({"model_type": "llama", "rope_bogus_key": 1})", &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("rope_bogus_key"), std::string::npos) << warnings[0];
}

TEST(RopeConfigJson, ClearErrorsForBadConfigs) {
  auto expect_error = [](const std::string& json, const std::string& needle) {
    try {
      rope_config_from_hf_json(json);
      ADD_FAILURE() << "no error for " << json;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("{\"hidden_size\": 64,", "malformed JSON");
  expect_error("[1, 2]", "must be an object");
  expect_error(R"({"rope_theta": 10000})", "missing head_dim, or hidden_size and num_attention_heads");
  expect_error(R"({"hidden_size": 100, "num_attention_heads": 3})", "not divisible");
  expect_error(R"({"head_dim": 1})", "head_dim = 1 with partial_rotary_factor = 1 gives rotary_dim = 1");
  expect_error(R"({"head_dim": 64, "partial_rotary_factor": 0.01})", "gives rotary_dim = 0");
  expect_error(R"({"head_dim": 64, "rope_theta": "big"})", "rope_theta = \"big\" is invalid");
  expect_error(R"({"head_dim": 64, "rope_scaling": {"type": "linear"}})",
               "missing the required key 'factor'");
  expect_error(R"({"head_dim": 64, "rope_scaling": {"type": "magic", "factor": 2}})",
               "rope_type = \"magic\"");
  expect_error(R"({"head_dim": 64, "max_position_embeddings": 8192, "original_max_position_embeddings": 4096,
                   "rope_scaling": {"type": "longrope", "short_factor": [1, 2], "long_factor": [1, 2]}})",
               "short_factor has 2 values, expected rotary_dim/2 = 32");
  expect_error(R"({"head_dim": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8}})",
               "low_freq_factor");
  expect_error(R"({"head_dim": 64, "partial_rotary_factor": 1.5})", "partial_rotary_factor = 1.5");
  expect_error(R"({"head_dim": 63})", "must be even");
  expect_error(R"({"head_dim": 2, "rope_theta": 0})", "rope_theta = 0");  // found by hypothesis
  expect_error(R"({"head_dim": 64, "rope_parameters": {"rope_theta": 10000, "partial_rotary_factor": 2}})",
               "partial_rotary_factor = 2");
  EXPECT_THROW(rope_config_from_hf_file("/nonexistent/config.json"), Error);
}

// Found by fuzzing (fuzz/fuzz_config_json.cc; the inputs are in fuzz/corpus/config_json):
// each was undefined behaviour, a crash or a config accepted that gave NaN/inf; now an Error naming
// the key, its value and the bound.
TEST(RopeConfigJson, HostileConfigsAreErrorsNamingTheKeyAndTheBound) {
  auto expect_error = [](const std::string& json, const std::string& needle) {
    try {
      rope_config_from_hf_json(json);
      ADD_FAILURE() << "no error for " << json.substr(0, 200);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_LT(std::string(e.what()).size(), 400u) << "messages quote at most an excerpt of a value";
    }
  };
  // 100,000 nested lists: dump() in the error message recursed once per level (stack overflow).
  const std::string deep =
      R"({"head_dim": 64, "rope_theta": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  expect_error(deep, "nests objects and arrays more than 64 levels deep");
  // Brackets inside strings do not nest.
  EXPECT_EQ(
      rope_config_from_hf_json(R"({"head_dim": 64, "note": ")" + std::string(100, '[') + R"("})").head_dim,
      64);
  // A long value is quoted as an excerpt; so is nlohmann's message, which quotes a whole number.
  std::string ones = "[1";
  for (int i = 0; i < 5000; ++i) ones += ",1";
  expect_error(R"({"head_dim": 64, "rope_theta": )" + ones + "]}", "rope_theta = [1,1,1,");
  expect_error(R"({"head_dim": 64, "rope_theta": )" + ones + "]}",
               "(10003 characters) is invalid: must be a number");
  expect_error(R"({"head_dim": 64, "rope_theta": )" + std::string(10000, '1') + "}",
               "number overflow parsing");
  // float -> int64 casts out of range (UB): head_dim * partial_rotary_factor, mrope_section 1e300.
  expect_error(R"({"head_dim": 9223372036854775807})",
               "head_dim = 9223372036854775807 is invalid: must be in [1, 65536]");
  expect_error(R"({"head_dim": 18446744073709551615})",
               "head_dim = 18446744073709551615 is invalid: must be at most 2^63 - 1");
  expect_error(R"({"head_dim": 1000000000})", "must be in [1, 65536]");  // 4 GB per table before
  expect_error(R"({"hidden_size": -9223372036854775808, "num_attention_heads": 1})",
               "hidden_size = -9223372036854775808");
  expect_error(R"({"hidden_size": 4294967296, "num_attention_heads": 2})", "gives head_dim = 2147483648");
  expect_error(R"({"head_dim": 64, "rope_scaling": {"type": "mrope", "mrope_section": [1e300, 16, 16]}})",
               "contains 1.0000000000000001e+300: must hold integers in [0, 65536]");
  // signed overflow summing mrope_section; original_context() + 1 at INT64_MAX.
  expect_error(R"({"head_dim": 64, "rope_scaling": {"type": "mrope",
                   "mrope_section": [9223372036854775807, 9223372036854775807, 2]}})",
               "must hold integers in [0, 65536]");
  expect_error(R"({"head_dim": 64, "rope_scaling": {"type": "mrope", "mrope_section": [60000, 60000, 2]}})",
               "values must be in [0, 32]");
  expect_error(R"({"head_dim": 4, "max_position_embeddings": 9223372036854775807,
                   "rope_scaling": {"type": "longrope", "short_factor": [1, 1], "long_factor": [1, 1]}})",
               "max_position_embeddings = 9223372036854775807 is invalid: must be in [0, 2^53]");
  // Scale parameters that made an accepted config produce NaN or inf.
  expect_error(R"({"head_dim": 64, "rope_theta": 1e-310})",
               "rope_theta = 9.9999999999999694e-311 is invalid: must be in [2^-16, 2^126]");
  expect_error(R"({"head_dim": 64, "rope_scaling": {"type": "linear", "factor": 1e-310}})",
               "rope_scaling.factor = 9.9999999999999694e-311 is invalid: must be in [2^-16, 2^16]");
  expect_error(R"({"head_dim": 64, "max_position_embeddings": 4096,
                   "rope_scaling": {"type": "yarn", "factor": 4, "beta_fast": 1e-307}})",
               "rope_scaling.beta_fast = 9.9999999999999991e-308 is invalid: must be in [2^-16, 2^16]");
  expect_error(R"({"head_dim": 64, "max_position_embeddings": 4096,
                   "rope_scaling": {"type": "yarn", "factor": 4, "attention_factor": 1e39}})",
               "rope_scaling.attention_factor = 9.9999999999999994e+38 is invalid: must be in [2^-16, 2^16]");
  // Derived attention factor: 0.1 * mscale * ln(4) + 1 < 0.
  expect_error(
      R"({"head_dim": 64, "max_position_embeddings": 4096,
                   "rope_scaling": {"type": "yarn", "factor": 4, "mscale": -100, "mscale_all_dim": 1}})",
      "the attention factor rope_scaling 'yarn' derives (factor = 4, mscale = -100, mscale_all_dim = 1) "
      "is -11.");
  expect_error(R"({"head_dim": 64, "max_position_embeddings": 4096, "rope_scaling": {"type": "yarn",
                   "factor": 4, "mscale": 1, "mscale_all_dim": -7.2134752044448169}})",
               "must be in [2^-16, 2^16]");
  // The bounds themselves are accepted, and their frequencies finite.
  for (const char* ok :
       {R"({"head_dim": 64, "rope_theta": 1.52587890625e-05})",
        R"({"head_dim": 64, "rope_theta": 8.507059173023462e+37,
                             "rope_scaling": {"type": "linear", "factor": 65536}})",
        R"({"head_dim": 65536, "rope_scaling": {"type": "linear", "factor": 1.52587890625e-05}})"}) {
    const Rope rope(rope_config_from_hf_json(ok));
    for (double f : rope.frequencies(0).inv_freq) ASSERT_TRUE(std::isfinite(f)) << ok;
  }
}

}  // namespace
}  // namespace posenc::test
