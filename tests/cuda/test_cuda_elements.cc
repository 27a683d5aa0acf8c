// tests/cuda/test_cuda_elements.cc: the CUDA backend's per-element logic on the host (no GPU needed):
// the __host__ __device__ functions the kernels call, run here under g++, against long double sin / cos
// and against the CPU backend on the RoPE case grid.
//   sin_cos_of_angle: within 0.5 fp32 ulp + 2^-40 of the exact sin / cos of the double angle, at angles up
//   to 2^53 (one rounding of a double-accurate value: the CPU's Highway Sin / Cos allow ~3 ulp).
//   The attention mask per pair and per tile (src/attention_mask.h), shared by both backends.
//   A rotation emulated from the kernels' functions: every element within the bound the CPU's 16-bit test
//   holds (|y - exact| <= u |exact| + 16 a 2^-24) and within a few fp32 ulps of the CPU backend.
#include <algorithm>
#include <cmath>
#include <random>

#include "posenc/bias.h"
#include "posenc/rope.h"
#include "reference/rope.h"
#include "src/bias_plan.h"
#include "src/cuda/bias-inl.cuh"
#include "rope_cases.h"
#include "rope_emulation.h"
#include "src/angle.h"
#include "src/attention_mask.h"
#include "src/cuda/rope-inl.cuh"
#include "test_util.h"

namespace posenc::test {
namespace {

// |got - exact| in fp32 ulps of exact (the spacing of floats at |exact|), with 2^-40 absolute forgiven.
double ulp_error(float got, long double exact) {
  const long double err = std::fabs(static_cast<long double>(got) - exact);
  if (err <= std::ldexp(1.0L, -40)) return 0;
  const float e = static_cast<float>(exact);
  const double ulp = std::nextafter(std::fabs(e), INFINITY) - std::fabs(e);
  return static_cast<double>(err / ulp);
}

TEST(CudaElements, SinCosOfAngleIsRoundedOnceFromDoubleAccuracy) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  double worst = 0;
  int checked = 0;
  auto check = [&](double angle) {
    float s, c;
    detail::sin_cos_of_angle(angle, &s, &c);
    const long double a = angle;
    worst = std::max({worst, ulp_error(s, std::sin(a)), ulp_error(c, std::cos(a))});
    ++checked;
  };
  for (int i = 0; i < 200000; ++i) check(4 * unit(rng));  // every quadrant, near 0 and +-pi/2
  for (int k = -8; k <= 8; ++k) {                         // next to multiples of pi/2, where r is smallest
    const double m = k * 1.5707963267948966;
    for (double d = -1e-6; d <= 1e-6; d += 1e-8) check(m + d);
  }
  // RoPE's angles: positions up to 2^31 and 2^53 times frequencies of real ladders (base 1e4 .. 5e6).
  for (double base : {1e4, 5e5, 5e6})
    for (int j = 0; j < 64; ++j) {
      const double inv_freq = std::pow(base, -2.0 * j / 128);
      for (int64_t p : {int64_t{1} << 20, (int64_t{1} << 31) - 1, int64_t{1} << 31, int64_t{1} << 40,
                        (int64_t{1} << 53) - 1, -(int64_t{1} << 53), int64_t{131071}, int64_t{-3}})
        check(static_cast<double>(p) * inv_freq);
    }
  // Angles past 2^53 (k past 2^53: the second reduction pass), to 2^70.
  for (int e = 50; e <= 70; ++e)
    for (int i = 0; i < 200; ++i) check(std::ldexp(1.0 + 0.5 * (unit(rng) + 1), e) * (i % 2 ? -1 : 1));
  EXPECT_LE(worst, 0.5001) << "worst error in fp32 ulps over " << checked << " angles";
  EXPECT_GT(worst, 0.4) << "a vacuous bound";
}

// Every angle a validated configuration reaches (positions to 2^53 times frequencies to 2^48: RoPE's
// smallest scaling and base, sinusoid frequencies to 2^16) gives sin and cos in [-1, 1] with
// s^2 + c^2 = 1 to fp32 accuracy, never the diverging series of an unreduced remainder.
TEST(CudaElements, SinCosStayOnTheCircleAtEveryReachableAngle) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int i = 0; i < 100000; ++i) {
    const double angle = std::ldexp(1.0 + unit(rng), static_cast<int>(rng() % 102)) * (i % 2 ? -1 : 1);
    float s, c;
    detail::sin_cos_of_angle(angle, &s, &c);
    ASSERT_LE(std::abs(s), 1.0f) << angle;
    ASSERT_LE(std::abs(c), 1.0f) << angle;
    ASSERT_NEAR(static_cast<double>(s) * s + static_cast<double>(c) * c, 1.0, 1e-6) << angle;
  }
}

TEST(CudaElements, PositionsBeyondTwoToThe53AreOutOfRange) {
  const int64_t m = int64_t{1} << 53;
  EXPECT_TRUE(cuda::position_in_range(m, 0));
  EXPECT_TRUE(cuda::position_in_range(-m, 0));
  EXPECT_TRUE(cuda::position_in_range(m - 5, 5));
  EXPECT_FALSE(cuda::position_in_range(m + 1, 0));
  EXPECT_FALSE(cuda::position_in_range(m, 1));
  EXPECT_FALSE(cuda::position_in_range(INT64_MAX, INT64_MIN));
  EXPECT_FALSE(cuda::position_in_range(0, INT64_MIN));
  EXPECT_TRUE(std::isnan(cuda::quiet_nan()));
}

// The rotation's rounding: the product a cos, then one FMA, as the CPU kernels.
TEST(CudaElements, RotatePairRoundsAsTheCpuKernels) {
  const float a = 0.7f, b = -0.3f, c = 0.6f, s = 0.8f;
  float a2, b2;
  cuda::rotate_pair(a, b, c, s, &a2, &b2);
  EXPECT_EQ(a2, std::fma(-b, s, a * c));
  EXPECT_EQ(b2, std::fma(a, s, b * c));
}

struct Storage16 {
  DType dtype;
  double unit_roundoff;
};

TEST(CudaElements, EmulatedRotationMatchesReferenceAndCpuOnTheRopeGrid) {
  for (const RopeCase& rc : rope_cases()) {
    SCOPED_TRACE(rc.name);
    const RopeConfig& cfg = rc.config;
    const Rope rope(cfg);
    const std::vector<int64_t> pos = case_positions(rc);
    int64_t max_pos = 0;
    for (int64_t p : pos) max_pos = std::max(max_pos, p);
    const RopeFrequencies f = rope.frequencies(max_pos + 1);
    const int64_t B = rc.batch, T = rc.tokens, H = rc.heads, D = cfg.head_dim;
    const std::vector<float> x = random_floats(B * T * H * D, 11);
    const double a = f.attention_factor;
    for (bool inverse : {false, true}) {
      const bool applied_inverse = inverse != cfg.reversed;
      const std::vector<double> exact =
          ref::rope(f, cfg.layout, D, to_double(x), pos, B, T, H, applied_inverse);
      // fp32: within 4 fp32 ulps of |x| <= 1 values (two products and the cos / sin roundings).
      const std::vector<float> got =
          emulate_cuda_rope(f, cfg.layout, D, DType::f32, x, pos, B, T, H, applied_inverse);
      EXPECT_TRUE(all_close(got, exact, {4 * a * std::ldexp(1.0, -24), 4 * std::ldexp(1.0, -24)}));
      // ... and close to the CPU backend (whose Sin / Cos carry ~3 ulp).
      std::vector<float> cpu(x.size());
      const std::vector<int64_t> pos_cpu = pos;
      const int64_t streams = cfg.num_position_streams();
      const ConstTensorView pv =
          streams > 1 ? view(pos_cpu.data(), {streams, B, T}) : view(pos_cpu.data(), {B, T});
      if (inverse)
        rope.backward(view(x.data(), {B, T, H, D}), view(cpu.data(), {B, T, H, D}), pv);
      else
        rope.forward(view(x.data(), {B, T, H, D}), view(cpu.data(), {B, T, H, D}), pv);
      EXPECT_TRUE(all_close(got, cpu, {16 * a * std::ldexp(1.0, -24), 0}));
      // 16-bit storage: one rounding of an fp32-accurate value.
      for (const Storage16& s :
           {Storage16{DType::bf16, std::ldexp(1.0, -8)}, Storage16{DType::f16, std::ldexp(1.0, -11)}}) {
        std::vector<uint16_t> bits(x.size());
        std::vector<double> xr(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
          bits[i] = s.dtype == DType::bf16 ? detail::f32_to_bf16(x[i]) : detail::f32_to_f16(x[i]);
          xr[i] = s.dtype == DType::bf16 ? detail::bf16_to_f32(bits[i]) : detail::f16_to_f32(bits[i]);
        }
        const std::vector<double> ex = ref::rope(f, cfg.layout, D, xr, pos, B, T, H, applied_inverse);
        const std::vector<uint16_t> out =
            emulate_cuda_rope(f, cfg.layout, D, s.dtype, bits, pos, B, T, H, applied_inverse);
        for (size_t i = 0; i < out.size(); ++i) {
          const double v = s.dtype == DType::bf16 ? detail::bf16_to_f32(out[i]) : detail::f16_to_f32(out[i]);
          const double bound = s.unit_roundoff * std::abs(ex[i]) + 16 * a * std::ldexp(1.0, -24);
          ASSERT_LE(std::abs(v - ex[i]), bound) << "element " << i;
        }
      }
    }
  }
}

// T5's and the clipped rows as the device looks them up (a saturating row table built on the host, or
// clamping) equal relative_bias_row at every distance, near and far.
TEST(CudaElements, SaturatingBiasRowsEqualTheCpuRows) {
  std::vector<RelativeBiasConfig> configs = {RelativeBiasConfig::t5(4),
                                             RelativeBiasConfig::t5(4, 32, 128, false),
                                             RelativeBiasConfig::t5(2, 64, 512),
                                             RelativeBiasConfig::t5(2, 8, 5),
                                             RelativeBiasConfig::t5(1, 4, 2, true),
                                             RelativeBiasConfig::clipped(3, 16),
                                             RelativeBiasConfig::clipped(3, 0)};
  for (const RelativeBiasConfig& c : configs) {
    SCOPED_TRACE(std::to_string(c.num_buckets) + " buckets, max_distance " + std::to_string(c.max_distance));
    int64_t limit = 0;
    const std::vector<int32_t> rows = detail::saturating_rows(c, &limit);
    EXPECT_GE(limit, c.max_distance);
    EXPECT_EQ(rows.size(), static_cast<size_t>(2 * limit + 1));
    const cuda::BiasKind kind =
        c.bucketing == Bucketing::clipped ? cuda::BiasKind::clipped : cuda::BiasKind::row_table;
    std::vector<int64_t> distances;
    for (int64_t d = -8 * limit - 40; d <= 8 * limit + 40; ++d) distances.push_back(d);
    for (int64_t d : {int64_t{1} << 40, -(int64_t{1} << 40), int64_t{1} << 53, -(int64_t{1} << 53)})
      distances.push_back(d);
    for (int64_t d : distances)
      ASSERT_EQ(
          cuda::bias_row(kind, kind == cuda::BiasKind::clipped ? c.max_distance : limit, rows.data(), d),
          relative_bias_row(c, d))
          << "d = " << d;
  }
}

TEST(CudaElements, AlibiValueEqualsTheCpuBias) {
  for (bool symmetric : {false, true}) {
    const std::vector<double> slopes = alibi_slopes({.heads = 12});
    detail::Bias b;
    b.slopes = slopes.data();
    b.symmetric = symmetric;
    for (int64_t h = 0; h < 12; ++h)
      for (int64_t d :
           {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{4097}, int64_t{-123456}, int64_t{1} << 40})
        EXPECT_EQ(cuda::alibi_value(slopes[h], symmetric, d), b.value(d, h)) << h << " " << d;
  }
}

}  // namespace
}  // namespace posenc::test

namespace posenc::test {
namespace {

// The tile tests against the per-pair rule, brute force over random tiles: any_visible false only when
// every pair is masked, all_visible true only when none is; both exact for unit runs under causal and
// window masks (what the kernels skip or test per pair is decided by these).
TEST(CudaElements, TileMaskClassificationAgreesWithThePairRule) {
  std::mt19937_64 rng(3);
  int exact_checked = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    detail::AttentionMask m;
    m.causal = rng() % 2;
    m.window = rng() % 3 == 0 ? static_cast<int64_t>(rng() % 40) + 1 : 0;
    m.chunk = rng() % 3 == 0 ? static_cast<int64_t>(rng() % 40) + 1 : 0;
    const bool unit_runs = rng() % 2;
    const int64_t nq = static_cast<int64_t>(rng() % 8) + 1, nk = static_cast<int64_t>(rng() % 8) + 1;
    const int64_t q0 = static_cast<int64_t>(rng() % 200) - 100,
                  k0 = q0 + static_cast<int64_t>(rng() % 80) - 40;
    std::vector<int64_t> qs(nq), ks(nk);
    for (int64_t i = 0; i < nq; ++i) qs[i] = unit_runs ? q0 + i : q0 + static_cast<int64_t>(rng() % 30);
    for (int64_t j = 0; j < nk; ++j) ks[j] = unit_runs ? k0 + j : k0 + static_cast<int64_t>(rng() % 30);
    int visible = 0;
    for (int64_t q : qs)
      for (int64_t k : ks) visible += !m.masked(q, k);
    const auto [qmin, qmax] = std::minmax_element(qs.begin(), qs.end());
    const auto [kmin, kmax] = std::minmax_element(ks.begin(), ks.end());
    const bool any = m.any_visible(*qmin, *qmax, *kmin, *kmax),
               all = m.all_visible(*qmin, *qmax, *kmin, *kmax);
    if (!any) ASSERT_EQ(visible, 0) << trial;
    if (all) ASSERT_EQ(visible, nq * nk) << trial;
    if (unit_runs && m.chunk == 0) {
      ASSERT_EQ(any, visible > 0) << trial;
      ASSERT_EQ(all, visible == nq * nk) << trial;
      ++exact_checked;
    }
  }
  EXPECT_GT(exact_checked, 1000);
  const detail::AttentionMask chunks{false, 0, 8};  // chunk_of at the int64 ends, without overflow
  EXPECT_EQ(chunks.chunk_of(INT64_MIN), INT64_MIN / 8);
  EXPECT_EQ(chunks.chunk_of(-1), -1);
  EXPECT_EQ(chunks.chunk_of(INT64_MAX), INT64_MAX / 8);
}

}  // namespace
}  // namespace posenc::test
