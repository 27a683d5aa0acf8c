// tests/model/test_model_deepseek_v4.cc: DeepSeek-V4's per-layer plan (src/model/deepseek_v4.cc) from its
// real config and from fixtures of the forms it does not show; expected values from transformers 5.23's
// configuration_deepseek_v4.py / modeling_deepseek_v4.py (python/tests/model/test_model_deepseek_v4.py
// compares them with its modules).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "model_plan.h"
#include "posenc/error.h"
#include "posenc/model.h"
#include "posenc/rope.h"

namespace posenc {
namespace {

using test::expect_plan_error;

const std::string kDir = std::string(POSENC_TEST_DATA_DIR) + "/hf_configs/";

// DeepSeek-V4-Flash: compress_ratios [0, 0, 4, 128, 4, ..., 128, 4, 0] cut to 43 layers; RoPE on the last
// 64 of 512 dims in pairs; sliding layers base 10000, compressed ones base 160000 with yarn 16x of 65536
// and attention factor 1; window 128, sinks, scale 512^-0.5, K = V.
TEST(ModelDeepseekV4, FlashPlanFromItsRealConfig) {
  const ModelPositions m = model_positions_from_hf_file(kDir + "deepseek-v4__DeepSeek-V4-Flash-NVFP4.json");
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
  ASSERT_EQ(m.num_layers, 43);
  for (const LayerPlan& l : m.layers) {
    SCOPED_TRACE(l.layer);
    const char* want = l.layer < 2        ? "sliding_attention"
                       : l.layer % 2 == 0 ? "compressed_sparse_attention"
                                          : "heavily_compressed_attention";
    EXPECT_EQ(l.layer_type, want);
    ASSERT_TRUE(l.rope.has_value());
    EXPECT_EQ(l.rope->head_dim, 64);
    EXPECT_EQ(l.rope->effective_rotary_dim(), 64);
    EXPECT_EQ(l.rope->layout, RopeLayout::interleaved);
    EXPECT_EQ(l.rotary_lo, 448);
    EXPECT_EQ(l.rotary_hi, 512);
    EXPECT_EQ(l.qk_head_dim, 512);
    EXPECT_EQ(l.v_head_dim, 512);
    EXPECT_TRUE(l.rotated_values);
    EXPECT_TRUE(l.attention.causal);
    EXPECT_EQ(l.attention.window, 128);
    EXPECT_TRUE(l.attention.sinks);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / std::sqrt(512.0));
    const bool sliding = l.layer < 2, csa = !sliding && l.layer % 2 == 0;
    EXPECT_EQ(l.rope->base, sliding ? 1e4 : 1.6e5);
    EXPECT_EQ(l.rope->scaling.type, sliding ? RopeScalingType::none : RopeScalingType::yarn);
    EXPECT_EQ(l.compressed.has_value(), !sliding);
    if (l.compressed) {
      EXPECT_EQ(l.compressed->rate, csa ? 4 : 128);
      EXPECT_EQ(l.compressed->overlapping, csa);
    }
    EXPECT_EQ(l.indexer.has_value(), csa);
    if (l.indexer) {
      EXPECT_TRUE(l.indexer->over_compressed);
      EXPECT_EQ(l.indexer->topk, 512);
      EXPECT_EQ(l.indexer->heads, 64);
      EXPECT_EQ(l.indexer->head_dim, 128);
      EXPECT_EQ(l.indexer->rotary_lo, 64);  // the index head's last 64 dims (DeepseekV4Indexer.forward)
      EXPECT_EQ(l.indexer->rotary_hi, 128);
      EXPECT_EQ(l.indexer->rope.base, 1.6e5);
    }
  }
  // The compress RoPE, written out (modeling_rope_utils.py _compute_yarn_parameters, dim 64, base 160000,
  // factor 16, original 65536, beta 32 / 1, truncate): correction range floor(15.45) = 15 .. ceil(24.71) =
  // 25, pair i keeps theta_i below it, theta_i / 16 above, and blends linearly between; attention factor 1.
  const RopeFrequencies f = rope_frequencies(*m.layers[2].rope, 1 << 20);
  EXPECT_EQ(f.attention_factor, 1.0);
  for (int i = 0; i < 32; ++i) {
    const double theta = std::pow(1.6e5, -2.0 * i / 64);
    const double ramp = std::clamp((i - 15) / 10.0, 0.0, 1.0);
    EXPECT_NEAR(f.inv_freq[i], theta * (1 - ramp) + theta / 16 * ramp, 1e-15) << i;
  }
  EXPECT_DOUBLE_EQ(rope_frequencies(*m.layers[0].rope).inv_freq[1], std::pow(1e4, -2.0 / 64));
  // A sliding layer is an AttentionConfig with rotate_values; compressed entries are not.
  const Rope main(*m.layers[0].rope);
  const AttentionConfig sliding = m.layers[0].attention_config(&main);
  EXPECT_TRUE(sliding.rotate_values);
  EXPECT_EQ(sliding.rope_offset, 448);
  EXPECT_EQ(sliding.window, 128);
  try {
    (void)m.layers[3].attention_config(nullptr);
    ADD_FAILURE() << "attention_config of a compressed DeepSeek-V4 layer";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("layer 3 (heavily_compressed_attention) attends to compressed entries"),
        std::string::npos)
        << e.what();
  }
}

// configuration_deepseek_v4.py __post_init__: without layer_types or compress_ratios, HCA, HCA, then
// CSA / HCA alternating (CSA at the odd layers); compress_rates and the legacy compress_rate_* set the
// rates; a nested rope_parameters {main, compress} is taken as it is.
TEST(ModelDeepseekV4, DefaultsAndOtherForms) {
  const std::string base = R"({"model_type": "deepseek_v4", "num_hidden_layers": 6, "head_dim": 64,
      "num_attention_heads": 4, "hidden_size": 64, "qk_rope_head_dim": 16, "index_head_dim": 32)";
  const ModelPositions d = model_positions_from_hf_json(base + R"(, "compress_rate_hca": 64})");
  const char* types[] = {"heavily_compressed_attention", "heavily_compressed_attention",
                         "heavily_compressed_attention", "compressed_sparse_attention",
                         "heavily_compressed_attention", "compressed_sparse_attention"};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(d.layers[i].layer_type, types[i]) << i;
    EXPECT_EQ(d.layers[i].compressed->rate, i % 2 && i > 2 ? 4 : 64) << i;
    EXPECT_EQ(d.layers[i].rotary_lo, 48);
    EXPECT_EQ(d.layers[i].rope->scaling.type, RopeScalingType::none);  // no rope_scaling: default
    EXPECT_EQ(d.layers[i].rope->base, 1.6e5);
  }
  EXPECT_EQ(d.layers[3].indexer->rotary_lo, 16);
  const ModelPositions nested = model_positions_from_hf_json(base + R"(, "layer_types": ["sliding_attention",
      "compressed_sparse_attention", "sliding_attention", "sliding_attention", "sliding_attention",
      "sliding_attention"], "compress_rates": {"compressed_sparse_attention": 8, "heavily_compressed_attention": 64},
      "rope_parameters": {"main": {"rope_type": "default", "rope_theta": 5e4, "partial_rotary_factor": 0.5},
                          "compress": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6,
                                       "partial_rotary_factor": 0.5}}})");
  EXPECT_EQ(nested.layers[0].rope->base, 5e4);
  EXPECT_EQ(nested.layers[0].rotary_lo, 32);  // the dicts' own factor: 32 of 64 dims
  EXPECT_EQ(nested.layers[1].rope->scaling.type, RopeScalingType::linear);
  EXPECT_EQ(nested.layers[1].compressed->rate, 8);
  EXPECT_FALSE(nested.layers[2].compressed.has_value());
  expect_plan_error(base + R"(, "compress_ratios": [0, 4, 5, 0, 0, 0]})", "compress_ratios contains 5");
  expect_plan_error(base + R"(, "compress_ratios": [0, 4]})", "compress_ratios has 2 entries, fewer than");
  expect_plan_error(base + R"(, "layer_types": ["full_attention"]})",
                    "layer_types contains \"full_attention\"");
  expect_plan_error(base + R"(, "sliding_window": 0})", "sliding_window = 0 is invalid");
  expect_plan_error(base + R"(, "compress_rates": {"compressed_sparse_attention": 8}})",
                    "compress_rates = {\"compressed_sparse_attention\":8} is invalid: needs");
  // transformers 5 reads rope_scaling over rope_parameters; a nested dict without a factor rotates the whole
  // head (standardize_rope_params fills it from partial_rotary_factor only); a longer layer_types is cut.
  const ModelPositions both = model_positions_from_hf_json(
      base +
      R"(, "rope_scaling": {"type": "linear", "factor": 2.0}, "rope_parameters": {"rope_type": "linear",
      "factor": 4.0}})");
  EXPECT_EQ(both.layers[0].rope->scaling.factor, 2.0);
  EXPECT_TRUE(test::has_warning(both, "rope_parameters is ignored"));
  const ModelPositions whole = model_positions_from_hf_json(
      R"({"model_type": "deepseek_v4", "num_hidden_layers": 2, "head_dim": 64, "num_attention_heads": 4,
          "hidden_size": 64, "qk_rope_head_dim": 16, "index_head_dim": 64, "rope_theta": 5e4,
          "rope_parameters": {"main": {"rope_type": "default"}, "compress": {"rope_type": "default"}}})");
  EXPECT_EQ(whole.layers[0].rotary_lo, 0);
  EXPECT_EQ(whole.layers[0].rope->base, 5e4);
  const ModelPositions cut = model_positions_from_hf_json(base + R"(, "layer_types": ["sliding_attention",
      "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
      "compressed_sparse_attention"]})");
  EXPECT_EQ(cut.num_layers, 6);
  expect_plan_error(base + R"(, "qk_rope_head_dim": 128})", "partial_rotary_factor = 2 is invalid");
}

}  // namespace
}  // namespace posenc
