// tests/test_shaw.cc: Shaw et al. position terms vs the reference,
// every gradient against central differences of the double-precision reference, bad input.
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
