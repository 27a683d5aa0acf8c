// tests/test_half.cc: bf16 and fp16 storage conversions. The scalar conversions (src/half.h) against
// a reference written from the formats' definitions (value = m 2^e, round to nearest even in
// double), every fp16 value and sweeps of fp32 values with the ties, overflow and subnormal edges;
// then the vector conversions (src/cpu/half-inl.h) bit for bit against the scalar ones on every
// SIMD target, at every length up to a few vectors (tails).
#include <cmath>
#include <limits>
#include <random>

#include "src/cpu/half.h"
#include "src/half.h"
#include "test_util.h"

namespace posenc::test {
namespace {

using detail::bf16_to_f32;
using detail::f16_to_f32;
using detail::f32_to_bf16;
using detail::f32_to_f16;

// The value of x rounded to a binary format with `mantissa` stored bits, minimum normal exponent
// emin and largest finite value max_finite, to nearest even; +-inf past max + half an ulp.
double round_to_format(float x, int mantissa, int emin, double max_finite) {
  if (std::isnan(x) || std::isinf(x)) return x;
  const double a = std::abs(static_cast<double>(x));
  if (a == 0) return x;
  const int e = std::max(static_cast<int>(std::floor(std::log2(a))), emin);
  const double ulp = std::ldexp(1.0, e - mantissa);
  const double r = std::nearbyint(a / ulp) * ulp;  // a / ulp is exact; nearbyint rounds ties to even
  const double top = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(max_finite))) - mantissa);
  const double v = a >= max_finite + top / 2 ? std::numeric_limits<double>::infinity() : r;
  return std::signbit(x) ? -v : v;
}
double round_to_f16(float x) { return round_to_format(x, 10, -14, 65504.0); }
double round_to_bf16(float x) { return round_to_format(x, 7, -126, 3.3895313892515355e38); }

// fp32 values: random magnitudes over the whole exponent range, and the edges of each format.
std::vector<float> sweep() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          65504.0f,
                          65519.99f,
                          65520.0f,
                          65536.0f,
                          1e-8f,
                          2.9802322e-8f,
                          5.9604645e-8f,
                          8.940697e-8f,
                          6.1035156e-5f,
                          6.097555e-5f,
                          3.4e38f,
                          -3.4e38f,
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::denorm_min(),
                          1.0f + 1.0f / 256,
                          1.0f + 3.0f / 256,
                          1.0f + 1.0f / 2048,
                          1.0f + 3.0f / 2048};
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffffffffu);
  for (int i = 0; i < 200000; ++i) {
    const float f = detail::f32_from_bits(bits(rng));
    if (!std::isnan(f)) v.push_back(f);
  }
  for (int e = -30; e <= 20; ++e)  // exact ties of both formats at many exponents
    for (int m : {1, 3, 5, 255, 1023}) {
      v.push_back(std::ldexp(1.0f + (2 * m + 1) / 2048.0f, e));
      v.push_back(std::ldexp(1.0f + (2 * m + 1) / 256.0f, e));
    }
  return v;
}

TEST(Half, EveryFp16ValueWidensExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t exp = (h >> 10) & 31, mant = h & 1023;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (exp == 31) {
      EXPECT_EQ(std::isnan(f), mant != 0) << h;
      if (mant == 0) {
        EXPECT_EQ(f, sign * std::numeric_limits<float>::infinity());
      }
      continue;
    }
    const double expected = exp == 0
                                ? sign * mant * std::ldexp(1.0, -24)
                                : sign * (1.0 + mant / 1024.0) * std::ldexp(1.0, static_cast<int>(exp) - 15);
    ASSERT_EQ(static_cast<double>(f), expected) << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;
    ASSERT_EQ(f32_to_f16(f), h) << "round trip " << h;  // every fp16 value survives fp32
  }
}

TEST(Half, NarrowingRoundsToNearestEven) {
  for (float x : sweep()) {
    const float h = f16_to_f32(f32_to_f16(x)), b = bf16_to_f32(f32_to_bf16(x));
    ASSERT_EQ(static_cast<double>(h), round_to_f16(x)) << x;
    ASSERT_EQ(static_cast<double>(b), round_to_bf16(x)) << x;
    ASSERT_EQ(std::signbit(h), std::signbit(x)) << x;
    ASSERT_EQ(std::signbit(b), std::signbit(x)) << x;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(nan))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(nan))));
  EXPECT_TRUE(
      std::isnan(bf16_to_f32(f32_to_bf16(detail::f32_from_bits(0x7f800001u)))));  // not rounded to inf
}

TEST(Half, VectorConversionsEqualTheScalarOnesOnEveryTarget) {
  std::vector<float> values = sweep();
  values.resize(4096);
  values[7] = std::numeric_limits<float>::quiet_NaN();
  values[100] = -std::numeric_limits<float>::infinity();
  values[101] = detail::f32_from_bits(0x7f800001u);  // a signaling NaN
  for_each_cpu_target([&](const std::string& target) {
    for (DType dtype : {DType::bf16, DType::f16}) {
      SCOPED_TRACE(target + (dtype == DType::bf16 ? " bf16" : " f16"));
      for (int64_t n = 0; n <= 70; ++n) {
        for (int64_t offset : {0, 1, 3}) {  // misaligned rows
          const float* src = values.data() + (offset + 53 * n) % 4000;
          std::vector<uint16_t> narrow(n + 1, 0xabcd), expected(n);
          for (int64_t i = 0; i < n; ++i)
            expected[i] = dtype == DType::bf16 ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
          cpu::narrow_row(dtype, src, n, narrow.data());
          for (int64_t i = 0; i < n; ++i) {
            const bool nan = std::isnan(src[i]);
            if (nan)  // NaNs stay NaNs (quiet); payload details are the hardware's
              ASSERT_TRUE(std::isnan(dtype == DType::bf16 ? bf16_to_f32(narrow[i]) : f16_to_f32(narrow[i])));
            else
              ASSERT_EQ(narrow[i], expected[i]) << "element " << i << " of " << n << ": " << src[i];
          }
          EXPECT_EQ(narrow[n], 0xabcd) << "wrote past the row";
          std::vector<float> wide(n + 1, -5.0f);
          cpu::widen_row(dtype, narrow.data(), n, wide.data());
          for (int64_t i = 0; i < n; ++i) {
            const float e = dtype == DType::bf16 ? bf16_to_f32(narrow[i]) : f16_to_f32(narrow[i]);
            if (std::isnan(e))
              ASSERT_TRUE(std::isnan(wide[i]));
            else
              ASSERT_EQ(detail::f32_bits(wide[i]), detail::f32_bits(e)) << "element " << i;
          }
          EXPECT_EQ(wide[n], -5.0f) << "wrote past the row";
        }
      }
    }
  });
}

}  // namespace
}  // namespace posenc::test
