// tests/test_absolute_half.cc: the absolute encodings on bf16 / fp16 activations. The encodings are
// computed in fp32 (angles in double) and rounded once, so the oracle is exact: a 16-bit table is
// the fp32 table rounded to nearest even, element for element; an add is round(x + PE) with x
// widened exactly; learned rows likewise from the fp32 table; the learned backward on a 16-bit
// grad_out equals, bit for bit, the fp32 backward on the widened grad_out (the table's gradient
// stays fp32). The fp32 paths are tested against the double references in test_absolute.cc.
// Positions up to 2^20, odd widths (split layout), every SIMD target.
#include "half_storage.h"
#include "posenc/absolute.h"
#include "posenc/error.h"
#include "test_util.h"

namespace posenc::test {
namespace {

std::vector<int64_t> sample_positions(int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = (i * 7919) % 1000 + (i % 3 == 0 ? (int64_t{1} << 20) - 500 : 0);
  return p;
}

void check_sinusoidal(const SinusoidalConfig& cfg, const Storage& s) {
  SCOPED_TRACE(std::string(s.name) + " dim " + std::to_string(cfg.dim));
  const int64_t B = 2, T = 37, D = cfg.dim;
  const std::vector<int64_t> pos = sample_positions(B * T);
  // table: the fp32 table rounded once
  std::vector<float> table32(B * T * D);
  std::vector<uint16_t> table16(table32.size());
  sinusoidal_table(cfg, view(pos.data(), {B * T}), view(table32.data(), {B * T, D}));
  sinusoidal_table(cfg, view(pos.data(), {B * T}), view16(table16, s.dtype, {B * T, D}));
  for (size_t i = 0; i < table16.size(); ++i) ASSERT_EQ(table16[i], s.round(table32[i])) << i;
  // add: round(widen(x) + PE)
  const std::vector<float> x = random_floats(table32.size(), 5);
  std::vector<uint16_t> x16(x.size());
  for (size_t i = 0; i < x.size(); ++i) x16[i] = s.round(x[i]);
  const std::vector<uint16_t> before = x16;
  sinusoidal_add(cfg, view(pos.data(), {B, T}), view16(x16, s.dtype, {B, T, D}));
  for (size_t i = 0; i < x16.size(); ++i) ASSERT_EQ(x16[i], s.round(s.value(before[i]) + table32[i])) << i;
}

TEST(AbsoluteHalf, SinusoidalTableAndAddRoundOnce) {
  for_each_cpu_target([](const std::string& target) {
    SCOPED_TRACE(target);
    for (const Storage* s : {&kBf16, &kF16}) {
      SinusoidalConfig cfg;
      cfg.dim = 64;
      check_sinusoidal(cfg, *s);
      cfg.dim = 33;  // odd: split layout, zero last column
      cfg.layout = SinusoidalLayout::split;
      cfg.frequencies = SinusoidalFrequencies::half_dim_minus_one;
      cfg.position_offset = 2;
      check_sinusoidal(cfg, *s);
    }
  });
}

TEST(AbsoluteHalf, LearnedLookupAddAndBackward) {
  const int64_t L = 50, E = 24, B = 2, T = 13;
  const std::vector<float> table = random_floats(L * E, 7);
  std::vector<int64_t> pos(B * T);
  for (int64_t i = 0; i < B * T; ++i) pos[i] = (i * 11) % L;
  for (const Storage* s : {&kBf16, &kF16}) {
    SCOPED_TRACE(s->name);
    std::vector<uint16_t> out16(B * T * E);
    learned_lookup(view(table.data(), {L, E}), view(pos.data(), {B * T}),
                   view16(out16, s->dtype, {B * T, E}));
    for (int64_t r = 0; r < B * T; ++r)
      for (int64_t e = 0; e < E; ++e) ASSERT_EQ(out16[r * E + e], s->round(table[pos[r] * E + e]));
    const std::vector<float> x = random_floats(B * T * E, 8);
    std::vector<uint16_t> x16(x.size());
    for (size_t i = 0; i < x.size(); ++i) x16[i] = s->round(x[i]);
    const std::vector<uint16_t> before = x16;
    learned_add(view(table.data(), {L, E}), view(pos.data(), {B, T}), view16(x16, s->dtype, {B, T, E}));
    for (int64_t r = 0; r < B * T; ++r)
      for (int64_t e = 0; e < E; ++e)
        ASSERT_EQ(x16[r * E + e], s->round(s->value(before[r * E + e]) + table[pos[r] * E + e]));
    // backward: a 16-bit grad_out into an fp32 table gradient, as the fp32 backward of its values
    std::vector<float> g32(L * E, 0.25f), g16(L * E, 0.25f), wide(x16.size());
    for (size_t i = 0; i < x16.size(); ++i) wide[i] = s->value(x16[i]);
    learned_backward(view(wide.data(), {B, T, E}), view(pos.data(), {B, T}), view(g32.data(), {L, E}));
    learned_backward(view16(x16, s->dtype, {B, T, E}), view(pos.data(), {B, T}), view(g16.data(), {L, E}));
    EXPECT_EQ(g16, g32);
    EXPECT_NE(g16, std::vector<float>(L * E, 0.25f));
  }
}

TEST(AbsoluteHalf, BadStorageIsRefused) {
  SinusoidalConfig cfg;
  cfg.dim = 8;
  std::vector<int64_t> pos = {0, 1};
  std::vector<double> out64(16);
  expect_error(
      [&] {
        sinusoidal_table(cfg, view(pos.data(), {2}), view(out64.data(), {2, 8}));
      },
      "out has dtype f64, expected f32");
  std::vector<uint16_t> x(2 * 16);
  const TensorView strided16 = [&] {  // every other element: not a unit stride
    TensorView v = strided_view(reinterpret_cast<float*>(x.data()), {1, 2, 8}, {32, 16, 2});
    v.dtype = DType::bf16;
    return v;
  }();
  expect_error([&] { sinusoidal_add(cfg, view(pos.data(), {2}), strided16); }, "unit stride");
}

}  // namespace
}  // namespace posenc::test
