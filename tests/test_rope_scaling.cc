// tests/test_rope_scaling.cc: host-side RoPE frequency math for every HF rope_scaling type.
#include <cmath>
#include <limits>
#include <numbers>

#include "posenc/error.h"
#include "posenc/rope.h"
#include "test_util.h"

namespace posenc::test {
namespace {

RopeConfig base_config(int64_t head_dim = 128, double theta = 10000) {
  RopeConfig c;
  c.head_dim = head_dim;
  c.base = theta;
  return c;
}

TEST(RopeFrequencies, DefaultIsTheRoFormerLadder) {
  const RopeFrequencies f = rope_frequencies(base_config(8));
  ASSERT_EQ(f.inv_freq.size(), 4u);
  EXPECT_DOUBLE_EQ(f.inv_freq[0], 1.0);
  EXPECT_DOUBLE_EQ(f.inv_freq[1], 0.1);  // 10000^(-2/8)
  EXPECT_DOUBLE_EQ(f.inv_freq[2], 0.01);
  EXPECT_NEAR(f.inv_freq[3], 0.001, 1e-18);
  EXPECT_EQ(f.attention_factor, 1.0);
}

TEST(RopeFrequencies, PartialRotaryUsesRotaryDimInTheExponent) {
  RopeConfig c = base_config(128);
  c.rotary_dim = 32;  // e.g. partial_rotary_factor 0.25
  const RopeFrequencies f = rope_frequencies(c);
  ASSERT_EQ(f.inv_freq.size(), 16u);
  EXPECT_DOUBLE_EQ(f.inv_freq[1], std::pow(10000.0, -2.0 / 32));
}

TEST(RopeFrequencies, LinearDividesEveryFrequency) {
  RopeConfig c = base_config(64);
  c.scaling.type = RopeScalingType::linear;
  c.scaling.factor = 4;
  const RopeFrequencies f = rope_frequencies(c), d = rope_frequencies(base_config(64));
  for (size_t j = 0; j < f.inv_freq.size(); ++j) EXPECT_DOUBLE_EQ(f.inv_freq[j], d.inv_freq[j] / 4);
}

TEST(RopeFrequencies, DynamicNtkGrowsTheBaseOnlyPastMaxPositions) {
  RopeConfig c = base_config(64);
  c.scaling.type = RopeScalingType::dynamic;
  c.scaling.factor = 2;
  c.max_position_embeddings = 2048;
  const RopeFrequencies d = rope_frequencies(base_config(64));
  EXPECT_EQ(rope_frequencies(c, 100).inv_freq, d.inv_freq);
  EXPECT_EQ(rope_frequencies(c, 2048).inv_freq, d.inv_freq);
  // seq_len 4096: base' = base * (factor * 4096/2048 - (factor - 1))^(64/62) = base * 3^(64/62)
  const double grown = 10000.0 * std::pow(3.0, 64.0 / 62.0);
  const RopeFrequencies g = rope_frequencies(c, 4096);
  for (size_t j = 0; j < g.inv_freq.size(); ++j)
    EXPECT_NEAR(g.inv_freq[j], std::pow(grown, -2.0 * j / 64), 1e-15 + 1e-13 * g.inv_freq[j]);
}

TEST(RopeFrequencies, YarnKeepsFastDimsInterpolatesSlowOnesAndScalesAttention) {
  RopeConfig c = base_config(128);
  c.scaling.type = RopeScalingType::yarn;
  c.scaling.factor = 4;
  c.max_position_embeddings = 4096;
  const RopeFrequencies y = rope_frequencies(c), d = rope_frequencies(base_config(128));
  EXPECT_NEAR(y.attention_factor, 0.1 * std::log(4.0) + 1, 1e-15);
  // Correction range (HF find_correction_range): dims rotating more than beta_fast = 32 times over
  // 4096 positions are kept, fewer than beta_slow = 1 time are divided by the factor.
  const double low = std::floor(128 * std::log(4096 / (32 * 2 * std::numbers::pi)) / (2 * std::log(10000.0)));
  const double high = std::ceil(128 * std::log(4096 / (1 * 2 * std::numbers::pi)) / (2 * std::log(10000.0)));
  for (size_t j = 0; j < y.inv_freq.size(); ++j) {
    const double ramp = std::clamp((j - low) / (high - low), 0.0, 1.0);
    EXPECT_NEAR(y.inv_freq[j], d.inv_freq[j] * (1 - ramp) + d.inv_freq[j] / 4 * ramp, 1e-15) << j;
  }
  EXPECT_EQ(y.inv_freq[0], d.inv_freq[0]);
  EXPECT_DOUBLE_EQ(y.inv_freq[63], d.inv_freq[63] / 4);
  // An explicit attention_factor is the final multiplier (applied once, not times 0.1 ln s + 1).
  c.scaling.attention_factor = 1.5;
  EXPECT_EQ(rope_frequencies(c).attention_factor, 1.5);
  // DeepSeek's mscale / mscale_all_dim form.
  c.scaling.attention_factor.reset();
  c.scaling.mscale = 0.707;
  c.scaling.mscale_all_dim = 0.707;
  EXPECT_DOUBLE_EQ(rope_frequencies(c).attention_factor, 1.0);
}

TEST(RopeFrequencies, LongRopeSwitchesFactorsAtTheOriginalContext) {
  RopeConfig c = base_config(96);
  c.max_position_embeddings = 131072;
  c.scaling.type = RopeScalingType::longrope;
  c.scaling.original_max_position_embeddings = 4096;
  c.scaling.short_factor.assign(48, 1.5);
  c.scaling.long_factor.assign(48, 3.0);
  const RopeFrequencies d = rope_frequencies(base_config(96));
  const RopeFrequencies s = rope_frequencies(c, 4096), l = rope_frequencies(c, 4097);
  for (size_t j = 0; j < 48; ++j) {
    EXPECT_DOUBLE_EQ(s.inv_freq[j], d.inv_freq[j] / 1.5);
    EXPECT_DOUBLE_EQ(l.inv_freq[j], d.inv_freq[j] / 3.0);
  }
  // Phi-3: factor = 131072 / 4096 = 32; attention factor sqrt(1 + ln 32 / ln 4096).
  EXPECT_DOUBLE_EQ(s.attention_factor, std::sqrt(1 + std::log(32.0) / std::log(4096.0)));
}

TEST(RopeFrequencies, Llama3KeepsHighFrequenciesDividesLowOnesAndSmoothsBetween) {
  RopeConfig c = base_config(128, 500000);
  c.scaling.type = RopeScalingType::llama3;
  c.scaling.factor = 8;
  c.scaling.low_freq_factor = 1;
  c.scaling.high_freq_factor = 4;
  c.scaling.original_max_position_embeddings = 8192;
  const RopeFrequencies l = rope_frequencies(c), d = rope_frequencies(base_config(128, 500000));
  int kept = 0, divided = 0, smoothed = 0;
  for (size_t j = 0; j < 64; ++j) {
    const double wavelen = 2 * std::numbers::pi / d.inv_freq[j];
    if (wavelen < 8192.0 / 4) {
      EXPECT_EQ(l.inv_freq[j], d.inv_freq[j]);
      ++kept;
    } else if (wavelen > 8192.0) {
      EXPECT_DOUBLE_EQ(l.inv_freq[j], d.inv_freq[j] / 8);
      ++divided;
    } else {
      const double smooth = (8192.0 / wavelen - 1) / (4 - 1);
      EXPECT_DOUBLE_EQ(l.inv_freq[j], (1 - smooth) * d.inv_freq[j] / 8 + smooth * d.inv_freq[j]);
      EXPECT_LT(l.inv_freq[j], d.inv_freq[j]);
      EXPECT_GT(l.inv_freq[j], d.inv_freq[j] / 8);
      ++smoothed;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(smoothed, 0);
}

TEST(RopeFrequencies, FrequencyDivisorsApplyAfterScaling) {
  RopeConfig c = base_config(8);
  c.scaling.type = RopeScalingType::linear;
  c.scaling.factor = 2;
  c.frequency_divisors = {1, 2, 4, 8};
  const RopeFrequencies f = rope_frequencies(c);
  EXPECT_DOUBLE_EQ(f.inv_freq[0], 0.5);
  EXPECT_DOUBLE_EQ(f.inv_freq[2], 0.01 / 2 / 4);
}

TEST(RopeFrequencies, MultimodalStreamAssignment) {
  RopeConfig c = base_config(128, 1e6);
  c.multimodal = RopeMultimodal::mrope;
  c.mrope_section = {16, 24, 24};
  RopeFrequencies f = rope_frequencies(c);
  for (size_t j = 0; j < 64; ++j) EXPECT_EQ(f.stream[j], j < 16 ? 0 : (j < 40 ? 1 : 2)) << j;
  EXPECT_EQ(f.inv_freq, rope_frequencies(base_config(128, 1e6)).inv_freq);
  c.multimodal = RopeMultimodal::mrope_interleaved;  // Qwen3-VL
  c.mrope_section = {24, 20, 20};
  f = rope_frequencies(c);
  const std::vector<std::pair<size_t, int>> expected = {{0, 0},  {1, 1},  {2, 2},  {3, 0},  {4, 1}, {58, 1},
                                                        {59, 2}, {60, 0}, {61, 0}, {62, 0}, {63, 0}};
  for (auto [j, s] : expected) EXPECT_EQ(f.stream[j], s) << j;
  // Sections that do not sum to the pairs: the interleave overwrites h and w below 3h and 3w only
  // (transformers 5.23's qwen4_exp default [11, 11, 10] against a whole 128-pair head; Qwen3-VL's
  // [24, 20, 20] against 32 pairs, past whose end its slices stop).
  c.mrope_section = {11, 11, 10};
  c.head_dim = 256;
  f = rope_frequencies(c);
  ASSERT_EQ(f.stream.size(), 128u);
  for (size_t j = 0; j < 128; ++j)
    EXPECT_EQ(f.stream[j], j % 3 == 1 && j < 33 ? 1 : (j % 3 == 2 && j < 30 ? 2 : 0)) << j;
  c.mrope_section = {24, 20, 20};
  c.head_dim = 64;
  f = rope_frequencies(c);
  for (size_t j = 0; j < 32; ++j) EXPECT_EQ(f.stream[j], j % 3) << j;
  c.head_dim = 128;
  // ERNIE 4.5 VL (modeling_ernie4_5_vl_moe.py recomposition_frequencies): {h, w, t} = {22, 22, 20}; h on the
  // even pairs below 44, w on the odd ones, t above; the frequencies keep their order.
  c.multimodal = RopeMultimodal::mrope_alternating_hw;
  c.mrope_section = {22, 22, 20};
  f = rope_frequencies(c);
  for (size_t j = 0; j < 64; ++j) EXPECT_EQ(f.stream[j], j < 44 ? (j % 2 == 0 ? 1 : 2) : 0) << j;
  EXPECT_EQ(f.inv_freq, rope_frequencies(base_config(128, 1e6)).inv_freq);
  RopeConfig a = base_config(16, 100);
  a.multimodal = RopeMultimodal::axial_2d;
  f = rope_frequencies(a);
  const std::vector<uint8_t> streams = {0, 0, 0, 0, 1, 1, 1, 1};
  EXPECT_EQ(f.stream, streams);
  for (size_t j = 0; j < 4; ++j) {
    EXPECT_DOUBLE_EQ(f.inv_freq[j], std::pow(100.0, -4.0 * j / 16));
    EXPECT_EQ(f.inv_freq[j + 4], f.inv_freq[j]);
  }
}

// The bounds validate() holds a RopeConfig to (posenc/rope.h), on configs built in
// C++ (the JSON forms are in tests/model/test_rope_config_json.cc). Signed overflow (mrope_section sum,
// original_context() + 1) and configs whose frequencies were inf are errors naming the bound.
TEST(RopeFrequencies, BoundsKeepEveryAcceptedConfigFinite) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  RopeConfig c = base_config(64);
  c.multimodal = RopeMultimodal::mrope;
  c.mrope_section = {big, big, 2};  // summed to 0 (mod 2^64) before
  expect_error([&] { validate(c); }, "values must be in [0, 32] (rotary_dim/2)");
  c = base_config(4);
  c.scaling.type = RopeScalingType::longrope;
  c.scaling.short_factor = c.scaling.long_factor = {1, 1};
  c.max_position_embeddings = big;  // Rope's constructor computed original_context() + 1
  expect_error([&] { Rope{c}; },
               "max_position_embeddings = 9223372036854775807 is invalid: must be in [0, 2^53]");
  c.max_position_embeddings = kMaxRopeContext;
  const Rope at_bound(c);
  for (double f : at_bound.frequencies(kMaxRopeContext).inv_freq) EXPECT_TRUE(std::isfinite(f));
  c.scaling.short_factor = {1, 1e-310};
  expect_error([&] { validate(c); },
               "short_factor[1] = 9.9999999999999694e-311 is invalid: must be in [2^-16, 2^16]");
  c = base_config(8);
  c.frequency_divisors = {1, 2, 1e-300, 4};
  expect_error([&] { validate(c); }, "frequency_divisors[2] = 1e-300 is invalid");
  c = base_config(8);
  c.head_dim = kMaxRopeHeadDim + 2;
  expect_error([&] { validate(c); }, "head_dim = 65538 is invalid: must be in [1, 65536]");
  c = base_config(8, 1e-310);
  expect_error([&] { validate(c); }, "base = 9.9999999999999694e-311 is invalid: must be in [2^-16, 2^126]");
  c = base_config(8, 1e300);
  expect_error([&] { validate(c); }, "must be in [2^-16, 2^126]");
  c = base_config(8);
  c.scaling.type = RopeScalingType::llama3;
  c.scaling.original_max_position_embeddings = 8192;
  c.scaling.low_freq_factor = 1e-320;
  expect_error([&] { validate(c); }, "rope_scaling.low_freq_factor");
  c = base_config(8);
  c.scaling.type = RopeScalingType::yarn;
  c.max_position_embeddings = 4096;
  c.scaling.factor = 4;
  c.scaling.mscale = 1e300;
  c.scaling.mscale_all_dim = 1;
  expect_error([&] { validate(c); },
               "rope_scaling.mscale = 1.0000000000000001e+300 is invalid: must be in [-2^16, 2^16]");
}

}  // namespace
}  // namespace posenc::test
