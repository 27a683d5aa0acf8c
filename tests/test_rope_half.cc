// tests/test_rope_half.cc: RoPE on bf16 and fp16 storage. Inputs are rounded to the storage type;
// the library widens them, rotates in fp32 and rounds once. Compared with the double reference
// applied to the same rounded inputs, every element must satisfy
//   |y - exact| <= u |exact| + 16 a 2^-24        (|x| <= 1, a = attention_factor)
// with u the storage type's unit roundoff (bf16 2^-8, fp16 2^-11: the one final rounding, half an
// ulp) and 16 a 2^-24 the fp32 products and cos/sin (a few fp32 ulps each). Truncating instead of
// rounding to nearest would exceed the bound by up to u |exact|. The dims past rotary_dim are copied
// bit for bit. Every case of the RoPE grid (layouts, partial rotary, multimodal, scaling types,
// odd head dims), every SIMD target, positions up to 2^20.
#include <cmath>

#include "posenc/error.h"
#include "posenc/rope.h"
#include "reference/rope.h"
#include "rope_cases.h"
#include "half_storage.h"
#include "test_util.h"

namespace posenc::test {
namespace {

const Storage kStorages[] = {kBf16, kF16};

// Every element within the bound of the file comment; the pass-through dims equal to the input bits.
void expect_rounded_once(const Storage& s, const RopeConfig& cfg, const std::vector<uint16_t>& in,
                         const std::vector<uint16_t>& out, const std::vector<double>& exact, double factor) {
  const int64_t D = cfg.head_dim, R = cfg.effective_rotary_dim();
  double worst = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (static_cast<int64_t>(i % D) >= R) {
      ASSERT_EQ(out[i], in[i]) << "pass-through element " << i;
      continue;
    }
    const double bound = s.unit_roundoff * std::abs(exact[i]) + 16 * factor * std::ldexp(1.0, -24);
    const double err = std::abs(s.value(out[i]) - exact[i]);
    worst = std::max(worst, err / bound);
    ASSERT_LE(err, bound) << s.name << " element " << i << ": " << s.value(out[i]) << " vs " << exact[i];
  }
  EXPECT_GT(worst, 0.05) << "the bound is far from what the rounding reaches: a vacuous test";
}

TEST(RopeHalf, EveryCaseEveryTargetRoundsOnce) {
  std::vector<RopeCase> cases = rope_cases();
  RopeConfig deep;  // positions near 2^20
  deep.head_dim = 128;
  deep.base = 500000;
  cases.push_back({"deep_2^20", deep, 1, 4, 3, 3, (int64_t{1} << 20) - 6});
  for (const RopeCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Rope rope(c.config);
    const int64_t D = c.config.head_dim;
    const std::vector<int64_t> pos = case_positions(c);
    const RopeFrequencies f = rope.frequencies(*std::max_element(pos.begin(), pos.end()) + 1);
    const std::vector<float> q0 = random_floats(c.batch * c.tokens * c.heads * D, 3);
    const std::vector<float> k0 = random_floats(c.batch * c.tokens * c.kv_heads * D, 4);
    for (const Storage& s : kStorages) {
      SCOPED_TRACE(s.name);
      std::vector<uint16_t> q16(q0.size()), k16(k0.size());
      std::vector<double> qd(q0.size()), kd(k0.size());
      for (size_t i = 0; i < q0.size(); ++i) q16[i] = s.round(q0[i]), qd[i] = s.value(q16[i]);
      for (size_t i = 0; i < k0.size(); ++i) k16[i] = s.round(k0[i]), kd[i] = s.value(k16[i]);
      const bool rev = c.config.reversed;
      const auto q_exact = ref::rope<double>(f, c.config.layout, D, qd, pos, c.batch, c.tokens, c.heads, rev);
      const auto k_exact =
          ref::rope<double>(f, c.config.layout, D, kd, pos, c.batch, c.tokens, c.kv_heads, rev);
      const auto q_back = ref::rope<double>(f, c.config.layout, D, qd, pos, c.batch, c.tokens, c.heads, !rev);
      for_each_cpu_target([&](const std::string&) {
        std::vector<uint16_t> q = q16, k = k16;
        rope.forward_qk(view16(q, s.dtype, {c.batch, c.tokens, c.heads, D}),
                        view16(k, s.dtype, {c.batch, c.tokens, c.kv_heads, D}), positions_view(c, pos));
        expect_rounded_once(s, c.config, q16, q, q_exact, f.attention_factor);
        expect_rounded_once(s, c.config, k16, k, k_exact, f.attention_factor);
        // Out of place: the same bits as in place, the input untouched.
        std::vector<uint16_t> in = q16, out(q16.size(), 0x7777);
        rope.forward(view16(in, s.dtype, {c.batch, c.tokens, c.heads, D}),
                     view16(out, s.dtype, {c.batch, c.tokens, c.heads, D}), positions_view(c, pos));
        EXPECT_EQ(out, q);
        EXPECT_EQ(in, q16);
        // The backward (transposed rotation), in place.
        std::vector<uint16_t> g = q16;
        rope.backward(view16(g, s.dtype, {c.batch, c.tokens, c.heads, D}), positions_view(c, pos));
        expect_rounded_once(s, c.config, q16, g, q_back, f.attention_factor);
      });
    }
  }
}

TEST(RopeHalf, StridedViewsOfAFusedQkvBuffer) {
  // q and k as strided views into one bf16 (T, 3, H, D) buffer: v untouched, q and k as if contiguous.
  const int64_t T = 5, H = 2, D = 16;
  RopeConfig rc;
  rc.head_dim = D;
  const Rope rope(rc);
  const std::vector<float> x = random_floats(T * 3 * H * D, 9);
  std::vector<uint16_t> fused(x.size());
  for (size_t i = 0; i < x.size(); ++i) fused[i] = detail::f32_to_bf16(x[i]);
  const std::vector<uint16_t> before = fused;
  std::vector<int64_t> pos = {0, 1, 2, 3, 4};
  TensorView q = view16(fused, DType::bf16, {1, T, H, D}), k = q;
  q.strides = {T * 3 * H * D, 3 * H * D, D, 1};
  k.strides = q.strides;
  k.data = fused.data() + H * D;
  rope.forward_qk(q, k, view(pos.data(), {T}));
  for (int64_t which = 0; which < 3; ++which) {
    std::vector<uint16_t> part, expected;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < H * D; ++e) part.push_back(before[(t * 3 + which) * H * D + e]);
    expected = part;
    if (which < 2) rope.forward(view16(expected, DType::bf16, {1, T, H, D}), view(pos.data(), {T}));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < H * D; ++e)
        ASSERT_EQ(fused[(t * 3 + which) * H * D + e], expected[t * H * D + e])
            << which << " " << t << " " << e;
  }
}

TEST(RopeHalf, MixedOrUnsupportedDtypesAreRejectedAndNothingIsWritten) {
  RopeConfig rc;
  rc.head_dim = 8;
  const Rope rope(rc);
  std::vector<uint16_t> x(8, 0x3c00), out16(8, 0x1111);
  std::vector<float> out32(8, 7.0f);
  std::vector<int64_t> pos = {3};
  try {
    rope.forward(view16(x, DType::f16, {1, 1, 1, 8}), view(out32.data(), {1, 1, 1, 8}),
                 view(pos.data(), {1}));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out has dtype f32, expected the dtype of x, f16"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(out32, std::vector<float>(8, 7.0f));
  EXPECT_THROW(rope.forward(view16(x, DType::f16, {1, 1, 1, 8}), view16(out16, DType::bf16, {1, 1, 1, 8}),
                            view(pos.data(), {1})),
               Error);
  EXPECT_EQ(out16, std::vector<uint16_t>(8, 0x1111));
  std::vector<double> xd(8, 1.0);
  EXPECT_THROW(rope.forward(view(xd.data(), {1, 1, 1, 8}), view(pos.data(), {1})), Error);
}

}  // namespace
}  // namespace posenc::test
