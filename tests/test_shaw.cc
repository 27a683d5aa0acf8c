// tests/test_shaw.cc: Shaw et al. position terms vs the reference,
// every gradient against central differences of the double-precision reference, bad input.
#include "half_storage.h"
#include "posenc/error.h"
#include "posenc/shaw.h"
#include "reference/shaw.h"
#include "test_util.h"

namespace posenc::test {
namespace {

struct Shape {
  int64_t B, H, D, kmax;
  std::vector<int64_t> q, k;
};
std::vector<Shape> shapes() {
  return {{2, 3, 5, 2, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}},
          {1, 1, 8, 0, {7}, {0, 3, 7}},
          {1, 2, 3, 4, {100, 101}, {90, 95, 99, 100, 101, 150}},
          {1, 1, 1, 1, {0}, {0}}};
}

TEST(Shaw, KeyLogitsForwardAndBackward) {
  for (const Shape& s : shapes()) {
    const ShawConfig c{s.kmax, s.D};
    const int64_t Q = s.q.size(), K = s.k.size();
    const std::vector<float> a_k = random_floats(c.num_rows() * s.D, 41),
                             q = random_floats(s.B * Q * s.H * s.D, 42);
    std::vector<float> logits(s.B * s.H * Q * K, -5.0f);
    shaw_key_logits(c, view(a_k.data(), {c.num_rows(), s.D}), view(q.data(), {s.B, Q, s.H, s.D}),
                    view(s.q.data(), {Q}), view(s.k.data(), {K}), view(logits.data(), {s.B, s.H, Q, K}));
    EXPECT_TRUE(all_close(
        logits, ref::shaw_key_logits<double>(s.kmax, to_double(a_k), to_double(q), s.B, s.H, s.D, s.q, s.k),
        kF32Reduction));
    const std::vector<float> w = random_floats(logits.size(), 43);
    std::vector<float> gq(q.size(), 0.0f), ga(a_k.size(), 0.0f);
    shaw_key_logits_backward(c, view(a_k.data(), {c.num_rows(), s.D}), view(q.data(), {s.B, Q, s.H, s.D}),
                             view(s.q.data(), {Q}), view(s.k.data(), {K}), view(w.data(), {s.B, s.H, Q, K}),
                             view(gq.data(), {s.B, Q, s.H, s.D}), view(ga.data(), {c.num_rows(), s.D}));
    auto loss_q = [&](const std::vector<double>& x) {
      return dot(ref::shaw_key_logits<double>(s.kmax, to_double(a_k), x, s.B, s.H, s.D, s.q, s.k),
                 to_double(w));
    };
    auto loss_a = [&](const std::vector<double>& x) {
      return dot(ref::shaw_key_logits<double>(s.kmax, x, to_double(q), s.B, s.H, s.D, s.q, s.k),
                 to_double(w));
    };
    const auto cq = sample_coords(q.size()), ca = sample_coords(a_k.size());
    EXPECT_TRUE(all_close(gather(gq, cq), finite_difference(loss_q, to_double(q), cq), kF32Reduction));
    EXPECT_TRUE(all_close(gather(ga, ca), finite_difference(loss_a, to_double(a_k), ca), kF32Reduction));
  }
}

TEST(Shaw, ValueOutputForwardAndBackward) {
  for (const Shape& s : shapes()) {
    const ShawConfig c{s.kmax, s.D};
    const int64_t Q = s.q.size(), K = s.k.size();
    const std::vector<float> a_v = random_floats(c.num_rows() * s.D, 44),
                             p = random_floats(s.B * s.H * Q * K, 45, 0, 1);
    const std::vector<float> out0 = random_floats(s.B * Q * s.H * s.D, 46);
    std::vector<float> out = out0;  // accumulates
    shaw_value_output(c, view(a_v.data(), {c.num_rows(), s.D}), view(p.data(), {s.B, s.H, Q, K}),
                      view(s.q.data(), {Q}), view(s.k.data(), {K}), view(out.data(), {s.B, Q, s.H, s.D}));
    auto expected =
        ref::shaw_value_output<double>(s.kmax, to_double(a_v), to_double(p), s.B, s.H, s.D, s.q, s.k);
    for (size_t i = 0; i < expected.size(); ++i) expected[i] += out0[i];
    EXPECT_TRUE(all_close(out, expected, kF32Reduction));
    const std::vector<float> w = random_floats(out.size(), 47);
    std::vector<float> gp(p.size(), 0.0f), ga(a_v.size(), 0.0f);
    shaw_value_output_backward(c, view(a_v.data(), {c.num_rows(), s.D}), view(p.data(), {s.B, s.H, Q, K}),
                               view(s.q.data(), {Q}), view(s.k.data(), {K}),
                               view(w.data(), {s.B, Q, s.H, s.D}), view(gp.data(), {s.B, s.H, Q, K}),
                               view(ga.data(), {c.num_rows(), s.D}));
    auto loss_p = [&](const std::vector<double>& x) {
      return dot(ref::shaw_value_output<double>(s.kmax, to_double(a_v), x, s.B, s.H, s.D, s.q, s.k),
                 to_double(w));
    };
    auto loss_a = [&](const std::vector<double>& x) {
      return dot(ref::shaw_value_output<double>(s.kmax, x, to_double(p), s.B, s.H, s.D, s.q, s.k),
                 to_double(w));
    };
    const auto cp = sample_coords(p.size()), ca = sample_coords(a_v.size());
    EXPECT_TRUE(all_close(gather(gp, cp), finite_difference(loss_p, to_double(p), cp), kF32Reduction));
    EXPECT_TRUE(all_close(gather(ga, ca), finite_difference(loss_a, to_double(a_v), ca), kF32Reduction));
  }
}

// bf16 / fp16 activations (q, logits, probs, out and their gradients): the fp32 op on the widened
// values, each output rounded once (accumulating outputs: widened, added to in fp32, rounded once).
TEST(Shaw, SixteenBitActivationsRoundOnce) {
  const ShawConfig c{3, 8};
  const int64_t B = 2, H = 2, Q = 5, K = 7, D = 8;
  std::vector<int64_t> qp = {2, 3, 4, 5, 6}, kp = {0, 1, 2, 3, 4, 5, 6};
  const std::vector<float> a = random_floats(c.num_rows() * D, 61);
  const ConstTensorView av = view(a.data(), {c.num_rows(), D}), qpv = view(qp.data(), {Q}),
                        kpv = view(kp.data(), {K});
  for (const Storage* st : {&kBf16, &kF16}) {
    SCOPED_TRACE(st->name);
    std::vector<uint16_t> q16, g16, acc16;
    const std::vector<float> q = rounded_random(*st, B * Q * H * D, 62, q16),
                             g = rounded_random(*st, B * H * Q * K, 63, g16);
    const std::vector<float> acc = rounded_random(*st, B * Q * H * D, 64, acc16);
    // key logits (overwrite)
    std::vector<float> l32(B * H * Q * K);
    std::vector<uint16_t> l16(l32.size(), 0x7777);
    shaw_key_logits(c, av, view(q.data(), {B, Q, H, D}), qpv, kpv, view(l32.data(), {B, H, Q, K}));
    shaw_key_logits(c, av, view16(q16, st->dtype, {B, Q, H, D}), qpv, kpv,
                    view16(l16, st->dtype, {B, H, Q, K}));
    for (size_t i = 0; i < l16.size(); ++i) ASSERT_EQ(l16[i], st->round(l32[i])) << i;
    // key logits backward: grad_q accumulates, the table's gradient stays fp32
    std::vector<float> gq32 = acc, ga32(a.size(), 0.0f), ga16(a.size(), 0.0f);
    std::vector<uint16_t> gq16 = acc16;
    shaw_key_logits_backward(c, av, view(q.data(), {B, Q, H, D}), qpv, kpv, view(g.data(), {B, H, Q, K}),
                             view(gq32.data(), {B, Q, H, D}), view(ga32.data(), {c.num_rows(), D}));
    shaw_key_logits_backward(c, av, view16(q16, st->dtype, {B, Q, H, D}), qpv, kpv,
                             view16(g16, st->dtype, {B, H, Q, K}), view16(gq16, st->dtype, {B, Q, H, D}),
                             view(ga16.data(), {c.num_rows(), D}));
    for (size_t i = 0; i < gq16.size(); ++i) ASSERT_EQ(gq16[i], st->round(gq32[i])) << i;
    EXPECT_EQ(ga16, ga32);
    // value output (accumulates into out)
    std::vector<float> o32 = acc;
    std::vector<uint16_t> o16 = acc16;
    shaw_value_output(c, av, view(g.data(), {B, H, Q, K}), qpv, kpv, view(o32.data(), {B, Q, H, D}));
    shaw_value_output(c, av, view16(g16, st->dtype, {B, H, Q, K}), qpv, kpv,
                      view16(o16, st->dtype, {B, Q, H, D}));
    for (size_t i = 0; i < o16.size(); ++i) ASSERT_EQ(o16[i], st->round(o32[i])) << i;
  }
  // A 16-bit output of the wrong shape: an error, nothing written.
  std::vector<uint16_t> q16(B * Q * H * D, 0x3c00), bad(7, 0x1234);
  expect_error(
      [&] {
        shaw_key_logits(c, av, view16(q16, DType::f16, {B, Q, H, D}), qpv, kpv,
                        view16(bad, DType::f16, {1, 1, 1, 7}));
      },
      "logits has shape");
  EXPECT_EQ(bad, std::vector<uint16_t>(7, 0x1234));
}

TEST(Shaw, BadInput) {
  const ShawConfig c{2, 4};
  std::vector<float> a(5 * 4), q(1 * 2 * 1 * 4), logits(1 * 1 * 2 * 3, 9.0f);
  std::vector<int64_t> qp = {0, 1}, kp = {0, 1, 2};
  EXPECT_THROW(shaw_key_logits(c, view(a.data(), {4, 4}), view(q.data(), {1, 2, 1, 4}), view(qp.data(), {2}),
                               view(kp.data(), {3}), view(logits.data(), {1, 1, 2, 3})),
               Error);
  EXPECT_THROW(shaw_key_logits(c, view(a.data(), {5, 4}), view(q.data(), {1, 2, 1, 4}), view(qp.data(), {2}),
                               view(kp.data(), {2}), view(logits.data(), {1, 1, 2, 3})),
               Error);
  EXPECT_THROW(validate(ShawConfig{-1, 4}), Error);
  EXPECT_EQ(logits, std::vector<float>(6, 9.0f));
}

}  // namespace
}  // namespace posenc::test
