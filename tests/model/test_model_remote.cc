// tests/model/test_model_remote.cc: model types whose positional code is remote code, planned from the
// authors' modeling files (src/model/remote.cc): their real configs (tests/data/hf_configs) and fixtures for
// the keys those files do not show. The formulas are written out here from the authors' files (function names
// cited); python/tests/model/test_model_remote.py applies the rotations against transcriptions of them.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "model_plan.h"
#include "posenc/attention.h"
#include "posenc/error.h"
#include "posenc/model.h"
#include "posenc/rope.h"

namespace posenc {
namespace {

using test::expect_plan_error;

const std::string kDir = std::string(POSENC_TEST_DATA_DIR) + "/hf_configs/";

ModelPositions load(const std::string& file) { return model_positions_from_hf_file(kDir + file); }

using test::has_warning;

// Every layer alike: RoPE with this layout and rotated range, causal, scale head^-0.5, no window.
void expect_uniform(const ModelPositions& m, int64_t layers, RopeLayout layout, int64_t head,
                    int64_t rotated) {
  ASSERT_EQ(m.num_layers, layers);
  ASSERT_EQ(static_cast<int64_t>(m.layers.size()), layers);
  for (const LayerPlan& l : m.layers) {
    ASSERT_TRUE(l.rope.has_value());
    EXPECT_EQ(l.position, PositionMethod::rope);
    EXPECT_EQ(l.rope->layout, layout);
    EXPECT_EQ(l.rope->head_dim, head);
    EXPECT_EQ(l.rotary_lo, 0);
    EXPECT_EQ(l.rotary_hi, rotated);
    EXPECT_EQ(l.qk_head_dim, head);
    EXPECT_TRUE(l.attention.causal);
    EXPECT_EQ(l.attention.window, 0);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / std::sqrt(static_cast<double>(head)));
  }
}

// Qwen-7B-Chat (modeling_qwen.py): RoPE in halves on the whole 128-dim head, base rotary_emb_base;
// get_ntk_alpha's alpha = max(2^ceil(log2(L / seq_length) + 1) - 1, 1) grows the base to
// base alpha^(128 / 126) for a prompt of L tokens; logn_tensor scales the query at cache index p by
// log(p + 1) / log(seq_length) once p + 1 > seq_length.
TEST(ModelRemote, QwenNtkBaseAndLogNFromItsRealConfig) {
  const ModelPositions m = load("qwen__Qwen-7B-Chat.json");
  EXPECT_EQ(m.model_type, "qwen");
  EXPECT_NE(m.remote_code.find("modeling_qwen.py"), std::string::npos);
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
  expect_uniform(m, 32, RopeLayout::half, 128, 128);
  const LayerPlan& l = m.layers[0];
  EXPECT_EQ(l.rope->scaling.type, RopeScalingType::qwen_dynamic);
  EXPECT_EQ(l.rope->scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(l.attention.temperature.kind, QueryTemperature::Kind::qwen_logn);
  EXPECT_EQ(l.attention.temperature.floor_scale, 8192);
  const Rope rope(*l.rope);
  const std::pair<int64_t, double> alphas[] = {{1, 1},     {8192, 1},  {8193, 3},   {16384, 3},
                                               {16385, 7}, {32768, 7}, {32769, 15}, {100000, 31}};
  for (const auto& [len, alpha] : alphas) {
    const double base = 1e4 * std::pow(alpha, 128.0 / 126.0);
    const RopeFrequencies f = rope.frequencies(len);
    ASSERT_EQ(f.inv_freq.size(), 64u);
    for (int64_t j = 0; j < 64; ++j)
      EXPECT_NEAR(f.inv_freq[j], std::pow(base, -2.0 * j / 128), 1e-15 * std::pow(base, -2.0 * j / 128))
          << "L " << len << " pair " << j;
  }
  const QueryTemperature& t = l.attention.temperature;
  EXPECT_EQ(t.factor(0), 1.0);
  EXPECT_EQ(t.factor(8191), 1.0);  // p + 1 = seq_length: the table's 1
  EXPECT_DOUBLE_EQ(t.factor(8192), std::log(8193.0) / std::log(8192.0));
  EXPECT_DOUBLE_EQ(t.factor(16383), 14.0 / 13.0);  // log(2^14) / log(2^13)
  // The plan's attention config carries the rule; a layer's rope through it.
  const AttentionConfig cfg = l.attention_config(&rope);
  EXPECT_EQ(cfg.query_temperature.kind, QueryTemperature::Kind::qwen_logn);
}

TEST(ModelRemote, QwenKeysAndDefaults) {
  const std::string base = R"({"model_type": "qwen", "hidden_size": 256, "num_attention_heads": 4,
      "num_hidden_layers": 2, "kv_channels": 64, "seq_length": 2048)";
  ModelPositions m = model_positions_from_hf_json(base + R"(, "rotary_pct": 0.5})");
  EXPECT_EQ(m.layers[0].rotary_hi, 32);
  EXPECT_EQ(m.layers[0].rope->effective_rotary_dim(), 32);
  m = model_positions_from_hf_json(base + R"(, "use_dynamic_ntk": false, "use_logn_attn": false})");
  EXPECT_EQ(m.layers[1].rope->scaling.type, RopeScalingType::none);
  EXPECT_EQ(m.layers[1].attention.temperature.kind, QueryTemperature::Kind::none);
  // QWenConfig's first revision: n_embd / n_head / n_layer / n_positions, both rules off by default (no
  // seq_length needed).
  m = model_positions_from_hf_json(R"({"model_type": "qwen", "n_embd": 128, "n_head": 2, "n_layer": 3,
      "n_positions": 6144, "kv_channels": 64, "rotary_emb_base": 5e5})");
  expect_uniform(m, 3, RopeLayout::half, 64, 64);
  EXPECT_EQ(m.layers[0].rope->base, 5e5);
  EXPECT_EQ(m.layers[0].rope->scaling.type, RopeScalingType::none);
  EXPECT_EQ(m.layers[0].attention.temperature.kind, QueryTemperature::Kind::none);
  EXPECT_EQ(m.max_position_embeddings, 6144);
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
  // int(kv_channels * rotary_pct) = 0 rotates nothing in QWen's code, an odd count breaks it: refused.
  expect_plan_error(base + R"(, "rotary_pct": 0.01})",
                    "rotary_pct = 0.01 rotates int(64 * rotary_pct) = 0 dims");
  expect_plan_error(base + R"(, "rotary_pct": 0.05})",
                    "rotary_pct = 0.05 rotates int(64 * rotary_pct) = 3 dims");
  expect_plan_error(base + R"(, "rotary_emb_base": 0})", "rotary_emb_base gives the rotary base 0");
  expect_plan_error(
      R"({"model_type": "qwen", "hidden_size": 256, "num_attention_heads": 4, "kv_channels": 64})",
      "seq_length is missing: QWenModel reads it");
  expect_plan_error(base + R"(, "kv_channels": 32})",
                    "kv_channels = 32 differs from hidden_size / num_attention_heads");
  expect_plan_error(base + R"(, "rotary_pct": 0})", "rotary_pct = 0 is invalid");
  expect_plan_error(base + R"(, "seq_length": 1})", "seq_length = 1 is invalid for use_logn_attn");
}

// ChatGLM2-6B (modeling_chatglm.py): RotaryEmbedding(kv_channels // 2) on the first 64 of 128 dims,
// adjacent pairs, theta_i = 10000^(-2i / 64); seq_length positions; scale 1 / sqrt(kv_channels).
TEST(ModelRemote, ChatGlmHalfTheHeadInPairs) {
  const ModelPositions m = load("chatglm__chatglm2-6b.json");
  EXPECT_NE(m.remote_code.find("modeling_chatglm.py"), std::string::npos);
  expect_uniform(m, 28, RopeLayout::interleaved, 128, 64);
  EXPECT_EQ(m.max_position_embeddings, 32768);
  EXPECT_TRUE(has_warning(m, "torch_dtype = float16: ChatGLM2's code builds positions and angles"));
  EXPECT_EQ(m.warnings.size(), 1u);
  const RopeFrequencies f = rope_frequencies(*m.layers[0].rope);
  ASSERT_EQ(f.inv_freq.size(), 32u);
  for (int64_t i = 0; i < 32; ++i) EXPECT_DOUBLE_EQ(f.inv_freq[i], std::pow(1e4, -2.0 * i / 64));
  // GLM-4-9B-Chat's form: rope_ratio 500 multiplies the base (ChatGLM3 / GLM-4 forward_impl), with a
  // warning naming ChatGLM2-6B-32K's other reading; num_hidden_layers beside num_layers.
  const ModelPositions glm4 = model_positions_from_hf_json(
      R"({"model_type": "chatglm", "hidden_size": 4096, "kv_channels": 128, "num_attention_heads": 32,
          "num_hidden_layers": 40, "num_layers": 40, "rope_ratio": 500, "seq_length": 131072,
          "multi_query_attention": true, "multi_query_group_num": 2, "original_rope": true,
          "torch_dtype": "float32"})");
  expect_uniform(glm4, 40, RopeLayout::interleaved, 128, 64);
  EXPECT_EQ(glm4.layers[0].rope->base, 5e6);
  EXPECT_TRUE(
      has_warning(glm4, "rope_ratio = 500 is read as ChatGLM3's and GLM-4's base = 10000 * rope_ratio"));
  EXPECT_EQ(glm4.warnings.size(), 1u);
  // ChatGLMConfig's kv_channels default is 128 whatever hidden_size / heads is; an explicit null falls
  // back to hidden_size // num_attention_heads (ChatGLMModel.__init__).
  const ModelPositions small = model_positions_from_hf_json(
      R"({"model_type": "chatglm", "hidden_size": 2048, "num_attention_heads": 32})");
  expect_uniform(small, 28, RopeLayout::interleaved, 128, 64);
  const ModelPositions null_kv = model_positions_from_hf_json(
      R"({"model_type": "chatglm", "hidden_size": 2048, "num_attention_heads": 32, "kv_channels": null})");
  expect_uniform(null_kv, 28, RopeLayout::interleaved, 64, 32);
  expect_plan_error(R"({"model_type": "chatglm", "rope_ratio": 1e300})",
                    "rope_ratio = 1e+300 (10000 * rope_ratio) gives the rotary base");
  expect_plan_error(R"({"model_type": "chatglm", "hidden_size": 4096, "num_attention_heads": 32,
                   "position_encoding_2d": true})",
                    "is ChatGLM-6B's first release, whose 2-D RoPE posenc does not model");
  expect_plan_error(
      R"({"model_type": "chatglm", "hidden_size": 4096, "num_attention_heads": 32, "kv_channels": 6})",
      "kv_channels = 6 is invalid");
}

// Kimi K2 (the keys of moonshotai/Kimi-K2-Instruct's config.json): model_type kimi_k2 with DeepSeek-V3's
// remote config class is planned as deepseek_v3, with a warning; without that class it is refused.
TEST(ModelRemote, KimiK2IsDeepSeekV3) {
  const std::string kimi = R"({"architectures": ["DeepseekV3ForCausalLM"],
      "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV3Config"}, "model_type": "kimi_k2",
      "hidden_size": 7168, "num_attention_heads": 64, "num_key_value_heads": 64, "num_hidden_layers": 61,
      "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "kv_lora_rank": 512,
      "q_lora_rank": 1536, "max_position_embeddings": 131072, "rope_theta": 50000.0,
      "rope_scaling": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0,
                       "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"})";
  const ModelPositions m = model_positions_from_hf_json(kimi + "}");
  std::string as_deepseek = kimi + "}";
  as_deepseek.replace(as_deepseek.find("\"kimi_k2\""), 9, "\"deepseek_v3\"");
  const ModelPositions want = model_positions_from_hf_json(as_deepseek);
  ASSERT_EQ(m.layers.size(), 61u);
  EXPECT_EQ(m.model_type, "deepseek_v3");
  EXPECT_TRUE(has_warning(m, "model_type 'kimi_k2' (remote code: auto_map.AutoConfig"));
  for (size_t i = 0; i < m.layers.size(); ++i) {
    EXPECT_EQ(m.layers[i].attention.softmax_scale, want.layers[i].attention.softmax_scale);
    EXPECT_EQ(m.layers[i].rope->scaling.factor, 32.0);
    EXPECT_EQ(m.layers[i].rope->layout, RopeLayout::interleaved);
  }
  // 192^-0.5 (0.1 ln 32 + 1)^2: DeepSeek-V3's mscale_all_dim correction of the softmax scale.
  EXPECT_NEAR(m.layers[0].attention.softmax_scale, std::pow(0.1 * std::log(32.0) + 1, 2) / std::sqrt(192.0),
              1e-6);
  expect_plan_error(R"({"model_type": "kimi_k2", "hidden_size": 64})", "'kimi_k2'");
}

// InternLM2 (modeling_internlm2.py): Llama's halves on the whole head, base rope_theta, rope_scaling
// {type: linear | dynamic, factor >= 1} only; the early 7b revisions say model_type "internlm".
TEST(ModelRemote, InternLm2AndItsEarlyType) {
  const ModelPositions small = load("internlm2__internlm2-chat-1_8b.json");
  expect_uniform(small, 24, RopeLayout::half, 128, 128);
  EXPECT_EQ(small.layers[0].rope->base, 1e6);
  EXPECT_EQ(small.layers[0].rope->scaling.type, RopeScalingType::none);
  EXPECT_TRUE(small.warnings.empty()) << small.warnings.front();
  const ModelPositions early = load("internlm2__internlm2-chat-7b-rev-2292b86.json");
  EXPECT_EQ(early.model_type, "internlm");
  expect_uniform(early, 32, RopeLayout::half, 128, 128);
  const RopeConfig& rc = *early.layers[0].rope;
  EXPECT_EQ(rc.scaling.type, RopeScalingType::dynamic);
  EXPECT_EQ(rc.scaling.factor, 2.0);
  // InternLM2DynamicNTKScalingRotaryEmbedding._set_cos_sin_cache, seq_len L > M = 32768:
  // base (factor L / M - (factor - 1))^(d / (d - 2)).
  const double grown = 1e6 * std::pow(2.0 * 65536 / 32768 - 1, 128.0 / 126.0);
  EXPECT_NEAR(rope_frequencies(rc, 65536).inv_freq[1], std::pow(grown, -2.0 / 128), 1e-15);
  EXPECT_EQ(rope_frequencies(rc, 32768).inv_freq[1], std::pow(1e6, -2.0 / 128));
  EXPECT_TRUE(has_warning(early, "InternLM2's code keeps a grown base for later, shorter sequences"));
  const std::string head = R"({"model_type": "internlm2", "hidden_size": 256, "num_attention_heads": 4, )";
  const ModelPositions linear =
      model_positions_from_hf_json(head + R"("rope_scaling": {"type": "linear", "factor": 4}})");
  EXPECT_EQ(linear.layers[0].rope->scaling.type, RopeScalingType::linear);
  EXPECT_EQ(linear.num_layers, 32);  // InternLM2Config's default
  expect_plan_error(head + R"("rope_scaling": {"type": "yarn", "factor": 4}})",
                    "must be \"linear\" or \"dynamic\"");
  expect_plan_error(head + R"("rope_scaling": {"type": "linear", "factor": 0.5}})",
                    "is invalid for InternLM2");
  expect_plan_error(head + R"("rope_scaling": {"rope_type": "linear", "factor": 2}})",
                    "is invalid for InternLM2");
  expect_plan_error(
      R"({"model_type": "internlm", "architectures": ["InternLMForCausalLM"], "hidden_size": 256,
                   "num_attention_heads": 4})",
      "InternLM (1)'s remote code");
}

// stable-code-3b (modeling_stablelm_epoch.py): rope_pct 0.25 of the 80-dim head (20 dims) in halves.
TEST(ModelRemote, StableLmEpochRotatesRopePct) {
  const ModelPositions m = load("stablelm__stable-code-3b.json");
  expect_uniform(m, 32, RopeLayout::half, 80, 20);
  EXPECT_EQ(m.layers[0].rope->base, 1e6);
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
  const ModelPositions other = model_positions_from_hf_json(
      R"({"model_type": "stablelm_epoch", "hidden_size": 256, "num_attention_heads": 4,
          "num_hidden_layers": 2, "rope_pct": 0.5, "rotary_scaling_factor": 4.0})");
  EXPECT_EQ(other.layers[0].rotary_hi, 32);
  EXPECT_TRUE(has_warning(other, "rotary_scaling_factor = 4.0 is never read by modeling_stablelm_epoch.py"));
  expect_plan_error(R"({"model_type": "stablelm_epoch", "rope_pct": 0.001})",
                    "rope_pct = 0.001 rotates int(80 * rope_pct) = 0");
}

// Falcon's first releases (modelling_RW.py): n_head / n_layer, RoPE of base 10000 on the whole head,
// or ALiBi with alibi true.
TEST(ModelRemote, RefinedWebRotaryOrAlibi) {
  const ModelPositions big = load("falcon__falcon-40b-RefinedWeb.json");
  expect_uniform(big, 60, RopeLayout::half, 64, 64);
  EXPECT_EQ(big.num_heads, 128);
  EXPECT_EQ(big.layers[0].rope->base, 1e4);
  const ModelPositions early = load("falcon__falcon-7b-RefinedWeb-early.json");
  expect_uniform(early, 32, RopeLayout::half, 64, 64);
  EXPECT_EQ(early.num_heads, 71);
  EXPECT_TRUE(has_warning(early, "first files rotate each call's q and k from position 0"));
  const ModelPositions alibi = model_positions_from_hf_json(
      R"({"model_type": "RefinedWebModel", "hidden_size": 512, "n_head": 8, "n_layer": 2, "alibi": true})");
  for (const LayerPlan& l : alibi.layers) {
    EXPECT_EQ(l.position, PositionMethod::alibi);
    EXPECT_FALSE(l.rope.has_value());
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / 8);
  }
}

// MiniCPM-V-4: its language model is transformers' LlamaForCausalLM of this config.
TEST(ModelRemote, MiniCpmVIsItsLlama) {
  const ModelPositions m = load("minicpmv__MiniCPM-V-4.json");
  EXPECT_EQ(m.model_type, "minicpmv");
  EXPECT_NE(m.remote_code.find("LlamaForCausalLM"), std::string::npos);
  expect_uniform(m, 32, RopeLayout::half, 128, 128);
  EXPECT_EQ(m.layers[0].rope->scaling.type, RopeScalingType::longrope);
  EXPECT_EQ(m.layers[0].rope->scaling.short_factor.size(), 64u);
  // The type's other releases build other language models (2.6: Qwen2): refused by their version.
  expect_plan_error(
      R"({"model_type": "minicpmv", "version": 2.6, "hidden_size": 3584, "num_attention_heads": 28})",
      "model_type 'minicpmv' with version = 2.6 is not supported");
}

// MiniCPM 1 / 2 (modeling_minicpm.py MiniCPMRotaryEmbedding): halves on hidden / heads, base rope_theta;
// their files have no model_type (auto_map names MiniCPMConfig). MiniCPM-2B-128k: dynamic, factor 4.
TEST(ModelRemote, MiniCpmFromItsRealConfigs) {
  const ModelPositions m = load("minicpm__MiniCPM-2B-sft-bf16.json");
  EXPECT_EQ(m.model_type, "minicpm");
  EXPECT_TRUE(has_warning(m, "model_type is missing: read as 'minicpm'"));
  expect_uniform(m, 40, RopeLayout::half, 64, 64);
  EXPECT_EQ(m.layers[0].rope->base, 1e4);
  EXPECT_EQ(m.max_position_embeddings, 4096);
  const ModelPositions k = load("minicpm__MiniCPM-2B-128k.json");
  EXPECT_EQ(k.layers[0].rope->scaling.type, RopeScalingType::dynamic);
  EXPECT_EQ(k.layers[0].rope->scaling.factor, 4.0);
  // The dynamic base past max_position_embeddings: base (4 L / 65536 - 3)^(64 / 62).
  const Rope rope(*k.layers[0].rope);
  const double base = 1e6 * std::pow(4.0 * 131072 / 65536 - 3, 64.0 / 62.0);
  EXPECT_NEAR(rope.frequencies(131072).inv_freq[1], std::pow(base, -2.0 / 64), 1e-12);
  const ModelPositions e = load("minicpm__MiniCPM-Embedding.json");
  EXPECT_FALSE(e.layers[0].attention.causal);  // is_causal false
}

// MiniCPM4 (MiniCPMLongRoPE): rope_scaling.rope_type; longrope's factors per pair, cos / sin times
// sqrt(1 + ln(max_pos / original) / ln(original)), long factors once the table exceeds original (built at
// max_position_embeddings: long from the start when that is longer).
TEST(ModelRemote, MiniCpm4LongRopeAndTheValidation) {
  auto config = [](const std::string& max_pos, const std::string& scaling) {
    return R"({"model_type": "minicpm", "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 2,
               "max_position_embeddings": )" +
           max_pos + R"(, "rope_scaling": )" + scaling + "}";
  };
  const std::string factors = R"("short_factor": [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
      1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
      "long_factor": [2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
                      2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2])";
  const std::string longrope =
      R"({"rope_type": "longrope", "original_max_position_embeddings": 4096, )" + factors + "}";
  const ModelPositions same = model_positions_from_hf_json(config("4096", longrope));
  const RopeScaling& s = same.layers[0].rope->scaling;
  EXPECT_EQ(s.type, RopeScalingType::longrope);
  EXPECT_DOUBLE_EQ(*s.attention_factor, 1.0);
  EXPECT_EQ(s.short_factor[0], 1.0);
  EXPECT_TRUE(has_warning(same, "keeps it for every later call"));
  const ModelPositions longer = model_positions_from_hf_json(config("16384", longrope));
  const RopeScaling& l = longer.layers[0].rope->scaling;
  EXPECT_EQ(l.short_factor[0], 2.0);  // long at every length
  EXPECT_DOUBLE_EQ(*l.attention_factor, std::sqrt(1 + std::log(4.0) / std::log(4096.0)));
  EXPECT_EQ(Rope(*longer.layers[0].rope).frequencies(16).inv_freq[0], 0.5);
  expect_plan_error(config("4096", R"({"rope_type": "longrope", )" + factors + "}"),
                    "original_max_position_embeddings is missing");
  expect_plan_error(config("4096", R"({"type": "linear", "factor": 2})"), "must be {\"type\"");  // int
  expect_plan_error(config("4096", R"({"type": "longrope", "factor": 2.0})"), "linear or dynamic");
  expect_plan_error(config("4096", R"({"factor": 2.0})"), "MiniCPM4 its \"rope_type\"");
  const ModelPositions linear =
      model_positions_from_hf_json(config("4096", R"({"type": "linear", "factor": 2.0})"));
  EXPECT_EQ(linear.layers[0].rope->scaling.type, RopeScalingType::linear);
  const ModelPositions sparse = model_positions_from_hf_json(
      R"({"model_type": "minicpm", "sparse_config": {"dense_len": 8192}, "head_dim": 32})");
  EXPECT_TRUE(has_warning(sparse, "sparse_config (InfLLM v2): below dense_len = 8192"));
  EXPECT_TRUE(has_warning(sparse, "head_dim = 32 is not read"));
  expect_uniform(sparse, 32, RopeLayout::half, 128, 128);  // the class defaults: 4096 / 32
}

// Baichuan: the 7B files rotate (base 10000, halves), the 13B ones add ALiBi; config.json names neither:
// Baichuan-7B's class BaiChuanForCausalLM, else the sizes vLLM and llama.cpp use.
TEST(ModelRemote, BaichuanRopeOrAlibiBySize) {
  const ModelPositions alibi = load("baichuan__Baichuan2-13B-Chat.json");
  EXPECT_EQ(alibi.max_position_embeddings, 4096);  // model_max_length
  for (const LayerPlan& l : alibi.layers) {
    EXPECT_EQ(l.position, PositionMethod::alibi);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1 / std::sqrt(128.0));
    EXPECT_TRUE(l.attention.causal);
  }
  const ModelPositions v2 = model_positions_from_hf_json(
      R"({"model_type": "baichuan", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
          "max_position_embeddings": 4096, "architectures": ["BaichuanForCausalLM"]})");
  expect_uniform(v2, 32, RopeLayout::half, 128, 128);
  EXPECT_EQ(v2.layers[0].rope->base, 1e4);
  const ModelPositions v1 = model_positions_from_hf_json(
      R"({"architectures": ["BaiChuanForCausalLM"], "hidden_size": 512, "num_attention_heads": 4,
          "num_hidden_layers": 3, "torch_dtype": "float16",
          "auto_map": {"AutoConfig": "configuration_baichuan.BaiChuanConfig"}})");
  expect_uniform(v1, 3, RopeLayout::half, 128, 128);
  EXPECT_TRUE(has_warning(v1, "rotates in it"));
  EXPECT_TRUE(has_warning(v1, "read as 'baichuan'"));
  expect_plan_error(R"({"model_type": "baichuan", "hidden_size": 4096, "num_attention_heads": 32,
                        "num_hidden_layers": 40})",
                    "hidden_size = 4096 and num_hidden_layers = 40 is not supported");
}

}  // namespace
}  // namespace posenc
