// tests/test_transformer_xl.cc: Transformer-XL position terms vs the reference,
// every gradient against central differences of the double-precision reference, bad input.
#include "half_storage.h"
#include "posenc/error.h"
#include "posenc/transformer_xl.h"
#include "reference/transformer_xl.h"
#include "test_util.h"

namespace posenc::test {
namespace {

TEST(TransformerXL, LogitsForwardAndEveryGradient) {
  struct XLCase {
    int64_t B, H, D, d_model;
    std::vector<int64_t> q, k;
  };
  const std::vector<XLCase> cases = {
      {2, 2, 3, 6, {4, 5, 6}, {0, 1, 2, 3, 4, 5, 6}},  // memory + current segment
      {1, 1, 4, 4, {0}, {0}},
      {1, 3, 2, 8, {0, 1}, {5, 1000000, 1}}};  // scattered deltas
  for (const XLCase& s : cases) {
    const TransformerXLConfig c{s.d_model, s.H, s.D, 10000.0};
    const int64_t Q = s.q.size(), K = s.k.size();
    const std::vector<float> q = random_floats(s.B * Q * s.H * s.D, 51),
                             k = random_floats(s.B * K * s.H * s.D, 52);
    const std::vector<float> u = random_floats(s.H * s.D, 53), v = random_floats(s.H * s.D, 54);
    const std::vector<float> w_r = random_floats(s.H * s.D * s.d_model, 55);
    auto views = [&](const std::vector<float>& qq, const std::vector<float>& kk, const std::vector<float>& uu,
                     const std::vector<float>& vv, const std::vector<float>& ww) {
      return std::make_tuple(view(qq.data(), {s.B, Q, s.H, s.D}), view(kk.data(), {s.B, K, s.H, s.D}),
                             view(uu.data(), {s.H, s.D}), view(vv.data(), {s.H, s.D}),
                             view(ww.data(), {s.H * s.D, s.d_model}));
    };
    auto [qv, kv, uv, vv, wv] = views(q, k, u, v, w_r);
    std::vector<float> logits(s.B * s.H * Q * K);
    transformer_xl_logits(c, qv, kv, uv, vv, wv, view(s.q.data(), {Q}), view(s.k.data(), {K}),
                          view(logits.data(), {s.B, s.H, Q, K}));
    auto reference = [&](const std::vector<double>& qq, const std::vector<double>& kk,
                         const std::vector<double>& uu, const std::vector<double>& vvv,
                         const std::vector<double>& ww) {
      return ref::transformer_xl_logits<double>(s.d_model, 10000.0, qq, kk, uu, vvv, ww, s.B, s.H, s.D, s.q,
                                                s.k);
    };
    EXPECT_TRUE(all_close(logits,
                          reference(to_double(q), to_double(k), to_double(u), to_double(v), to_double(w_r)),
                          kF32Reduction));

    const std::vector<float> g = random_floats(logits.size(), 56);
    std::vector<float> gq(q.size(), 0.f), gk(k.size(), 0.f), gu(u.size(), 0.f), gv(v.size(), 0.f),
        gw(w_r.size(), 0.f);
    TransformerXLGrads grads{view(gq.data(), {s.B, Q, s.H, s.D}), view(gk.data(), {s.B, K, s.H, s.D}),
                             view(gu.data(), {s.H, s.D}), view(gv.data(), {s.H, s.D}),
                             view(gw.data(), {s.H * s.D, s.d_model})};
    transformer_xl_logits_backward(c, qv, kv, uv, vv, wv, view(s.q.data(), {Q}), view(s.k.data(), {K}),
                                   view(g.data(), {s.B, s.H, Q, K}), grads);
    const auto gd = to_double(g);
    const Tolerance tol = kF32Reduction;
    auto check = [&](const char* name, const std::vector<float>& analytic, const std::vector<float>& param,
                     int which) {
      SCOPED_TRACE(name);
      auto loss = [&](const std::vector<double>& x) {
        std::vector<double> a[5] = {to_double(q), to_double(k), to_double(u), to_double(v), to_double(w_r)};
        a[which] = x;
        return dot(reference(a[0], a[1], a[2], a[3], a[4]), gd);
      };
      const auto coords = sample_coords(param.size(), 40);
      EXPECT_TRUE(
          all_close(gather(analytic, coords), finite_difference(loss, to_double(param), coords), tol));
    };
    check("q", gq, q, 0);
    check("k", gk, k, 1);
    check("u", gu, u, 2);
    check("v", gv, v, 3);
    check("w_r", gw, w_r, 4);
  }
}

// bf16 / fp16 q, k, logits and grads.q / grads.k: the fp32 op on the widened values, each output
// rounded once (grads widened, added to in fp32, rounded once); u, v, W_R and their gradients fp32.
TEST(TransformerXL, SixteenBitActivationsRoundOnce) {
  const int64_t B = 1, H = 2, D = 4, dm = 8, Q = 3, K = 5;
  const TransformerXLConfig c{dm, H, D, 10000.0};
  std::vector<int64_t> qp = {2, 3, 4}, kp = {0, 1, 2, 3, 4};
  const std::vector<float> u = random_floats(H * D, 71), v = random_floats(H * D, 72),
                           w = random_floats(H * D * dm, 73);
  const ConstTensorView uv = view(u.data(), {H, D}), vv = view(v.data(), {H, D}),
                        wv = view(w.data(), {H * D, dm}), qpv = view(qp.data(), {Q}),
                        kpv = view(kp.data(), {K});
  for (const Storage* st : {&kBf16, &kF16}) {
    SCOPED_TRACE(st->name);
    std::vector<uint16_t> q16, k16, g16;
    const std::vector<float> q = rounded_random(*st, B * Q * H * D, 74, q16),
                             k = rounded_random(*st, B * K * H * D, 75, k16),
                             g = rounded_random(*st, B * H * Q * K, 76, g16);
    std::vector<float> l32(B * H * Q * K);
    std::vector<uint16_t> l16(l32.size());
    transformer_xl_logits(c, view(q.data(), {B, Q, H, D}), view(k.data(), {B, K, H, D}), uv, vv, wv, qpv, kpv,
                          view(l32.data(), {B, H, Q, K}));
    transformer_xl_logits(c, view16(q16, st->dtype, {B, Q, H, D}), view16(k16, st->dtype, {B, K, H, D}), uv,
                          vv, wv, qpv, kpv, view16(l16, st->dtype, {B, H, Q, K}));
    for (size_t i = 0; i < l16.size(); ++i) ASSERT_EQ(l16[i], st->round(l32[i])) << i;
    std::vector<float> gq32(q.size(), 0.5f), gk32(k.size(), 0.5f), gu32(u.size()), gv32(v.size()),
        gw32(w.size());
    std::vector<float> gu16(u.size()), gv16(v.size()), gw16(w.size());
    std::vector<uint16_t> gq16(q.size(), st->round(0.5f)), gk16(k.size(), st->round(0.5f));
    TransformerXLGrads grads32{view(gq32.data(), {B, Q, H, D}), view(gk32.data(), {B, K, H, D}),
                               view(gu32.data(), {H, D}), view(gv32.data(), {H, D}),
                               view(gw32.data(), {H * D, dm})};
    TransformerXLGrads grads16{view16(gq16, st->dtype, {B, Q, H, D}), view16(gk16, st->dtype, {B, K, H, D}),
                               view(gu16.data(), {H, D}), view(gv16.data(), {H, D}),
                               view(gw16.data(), {H * D, dm})};
    transformer_xl_logits_backward(c, view(q.data(), {B, Q, H, D}), view(k.data(), {B, K, H, D}), uv, vv, wv,
                                   qpv, kpv, view(g.data(), {B, H, Q, K}), grads32);
    transformer_xl_logits_backward(c, view16(q16, st->dtype, {B, Q, H, D}),
                                   view16(k16, st->dtype, {B, K, H, D}), uv, vv, wv, qpv, kpv,
                                   view16(g16, st->dtype, {B, H, Q, K}), grads16);
    for (size_t i = 0; i < gq16.size(); ++i) ASSERT_EQ(gq16[i], st->round(gq32[i])) << i;
    for (size_t i = 0; i < gk16.size(); ++i) ASSERT_EQ(gk16[i], st->round(gk32[i])) << i;
    EXPECT_EQ(gu16, gu32);
    EXPECT_EQ(gv16, gv32);
    EXPECT_EQ(gw16, gw32);
  }
}

TEST(TransformerXL, SinusoidIsSplitLayout) {
  const TransformerXLConfig c{4, 1, 1, 10000.0};
  std::vector<int64_t> d = {3};
  std::vector<float> r(4);
  transformer_xl_sinusoid(c, view(d.data(), {1}), view(r.data(), {1, 4}));
  EXPECT_TRUE(all_close(r, std::vector<double>{std::sin(3.0), std::sin(0.03), std::cos(3.0), std::cos(0.03)},
                        kF32Elementwise));
}

TEST(TransformerXL, BadInput) {
  EXPECT_THROW(validate(TransformerXLConfig{5, 1, 1, 10000.0}), Error);
  EXPECT_THROW(validate(TransformerXLConfig{4, 0, 1, 10000.0}), Error);
  EXPECT_THROW(validate(TransformerXLConfig{4, 1, 1, -1.0}), Error);
  const TransformerXLConfig c{4, 1, 2, 10000.0};
  std::vector<float> q(2), k(2), u(2), v(2), w(8), logits(1, 3.0f);
  std::vector<int64_t> p = {0};
  EXPECT_THROW(
      transformer_xl_logits(c, view(q.data(), {1, 1, 1, 2}), view(k.data(), {1, 1, 1, 2}),
                            view(u.data(), {1, 2}), view(v.data(), {1, 2}), view(w.data(), {4, 2}),
                            view(p.data(), {1}), view(p.data(), {1}), view(logits.data(), {1, 1, 1, 1})),
      Error);
  EXPECT_EQ(logits[0], 3.0f);
}

}  // namespace
}  // namespace posenc::test
