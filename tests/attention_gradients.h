// tests/attention_gradients.h: the two oracles of attention's gradients, shared by the tests of
// every encoding (test_attention_reference_backward.cc) and of the score-level mechanisms
// (test_attention_scores.cc):
//   1. the naive backward (reference/attention_backward.h) against central finite differences of
//      the naive forward, all in double, every coordinate of every parameter;
//   2. the library's fused attention_backward against that naive backward, every element.
#pragma once
#include <algorithm>
#include <cmath>

#include "attention_case.h"
#include "reference/attention_backward.h"

namespace posenc::test {

// The reference gradients in the flat layout of AttentionCase::flat(), q and k w.r.t. the
// unrotated inputs (the transposed rotation applied, as RoPE's backward).
inline std::vector<double> reference_gradients(const AttentionCase& ac, const std::vector<double>& f,
                                               const std::vector<double>& grad_out) {
  const ref::AttentionProblem<double> p = ac.reference_problem(f);
  // rotate_values: out = R(-t) o', so d o' = R(t) d out; v' = R(s) v, so dv = R(s)^T dv'.
  const bool rv = ac.shape().rotate_values;
  const int64_t Dv = ac.shape().dv();
  ref::AttentionGradients<double> g = ref::attention_backward<double>(
      p, ac.rotated(ac.slice(f, Params::q), Params::q), ac.rotated(ac.slice(f, Params::k), Params::k),
      ac.values(f), rv ? ac.rotated_rows(grad_out, true, Dv, false) : grad_out);
  if (rv) g.v = ac.rotated_rows(g.v, false, Dv, true);
  const std::vector<double>* parts[Params::count] = {nullptr,
                                                     nullptr,
                                                     &g.v,
                                                     &g.relative_table,
                                                     &g.shaw_a_k,
                                                     &g.shaw_a_v,
                                                     &g.transformer_xl_u,
                                                     &g.transformer_xl_v,
                                                     &g.transformer_xl_w_r,
                                                     &g.sinks};
  const std::vector<double> dq = ac.rotated(g.q, Params::q, true), dk = ac.rotated(g.k, Params::k, true);
  parts[Params::q] = &dq;
  parts[Params::k] = &dk;
  std::vector<double> flat;
  for (int i = 0; i < Params::count; ++i) {
    EXPECT_EQ(parts[i]->size(), ac.part(static_cast<Params::Part>(i)).size()) << "part " << i;
    flat.insert(flat.end(), parts[i]->begin(), parts[i]->end());
  }
  return flat;
}

// --- 1. naive backward vs finite differences, in double -----------------------------------------

// Central differences with h = 1e-5 on O(1) inputs: truncation h^2 |f'| / 6 ~ 1e-11 and
// cancellation eps |f| / h ~ 1e-11 (f is a sum of O(10) terms of O(1)); both double. Measured:
// at most ~1.5e-10 apart. The tolerance leaves 10x; a dropped term of one pair would be O(1e-3).
constexpr Tolerance kF64Gradient{2e-9, 1e-8};

inline void check_reference_against_finite_differences(const Case& c, Enc e) {
  const AttentionCase ac(c, e, 29);
  SCOPED_TRACE(ac.describe());
  const std::vector<double> w = to_double(random_floats(c.B * c.Q * c.H * c.dv(), 93));
  const std::vector<double> f = ac.flat();
  const std::vector<double> analytic = reference_gradients(ac, f, w);
  const auto loss = [&](const std::vector<double>& x) { return dot(ac.reference(x).out, w); };
  std::vector<size_t> every(f.size());
  for (size_t i = 0; i < f.size(); ++i) every[i] = i;
  const std::vector<double> numeric = finite_difference(loss, f, every, 1e-5);
  for (int p = 0; p < Params::count; ++p) {
    const auto part = static_cast<Params::Part>(p);
    const size_t o = ac.offset(part), n = ac.part(part).size();
    if (n == 0) continue;
    SCOPED_TRACE(::testing::Message() << "part " << p);
    const std::vector<double> a(analytic.begin() + o, analytic.begin() + o + n),
        d(numeric.begin() + o, numeric.begin() + o + n);
    EXPECT_TRUE(all_close(a, d, kF64Gradient));
    double largest = 0;  // not vacuous: every part has a gradient far from zero
    for (double x : d) largest = std::max(largest, std::abs(x));
    EXPECT_GT(largest, 1e-3);
  }
}

// --- 2. the fused fp32 backward vs the naive double backward ------------------------------------

// The library computes in fp32 (logits, exp, tile products accumulated over up to 133 keys and
// 70 queries) against exact gradients: a sum of n O(1) products in fp32 is off by a few
// sqrt(n) eps ~ 1e-6 for n ~ 100 (measured: at most 1.3e-6 over this grid and every target).
// atol is relative to the part's largest gradient (its scale, at least 1):
//   q, k, v, Shaw's a_v, XL's u and v:  1e-5 x scale (about 8x the measured worst);
//   table rows, Shaw's a_k, XL's W_R: sums of dS over up to Q K pairs that share a distance,
//   accumulated in fp32 per task before the double reduction: 2e-5 x scale;
// rtol 1e-4 for every element: half the finite-difference test's kGrad (2e-4, sampled
// coordinates), since no finite-difference error enters here.
struct PartTolerance {
  double atol_scale, rtol;
};
inline PartTolerance part_tolerance(Params::Part p) {
  switch (p) {
    case Params::table:
    case Params::a_k:
    case Params::w_r:
      return {2e-5, 1e-4};
    default:
      return {1e-5, 1e-4};
  }
}

inline std::vector<float> library_gradients(const AttentionCase& ac, const std::vector<float>& w) {
  const Case& c = ac.shape();
  const int64_t Dv = c.dv();
  std::vector<float> out(c.B * c.Q * c.H * Dv), lse(c.B * c.H * c.Q);
  const AttentionConfig cfg = ac.config();
  const AttentionInputs in = ac.inputs();
  attention_forward(cfg, in, view(out.data(), {c.B, c.Q, c.H, Dv}), view(lse.data(), {c.B, c.H, c.Q}));
  std::vector<float> flat(ac.flat().size(), 0.0f);
  auto at = [&](Params::Part p) { return flat.data() + ac.offset(p); };
  AttentionGrads ag;
  ag.q = view(at(Params::q), {c.B, c.Q, c.H, c.D});
  ag.k = view(at(Params::k), {c.B, c.K, c.Hkv, c.D});
  ag.v = view(at(Params::v), {c.B, c.K, c.Hkv, Dv});
  if (cfg.bias.kind == AttentionBias::Kind::relative)
    ag.relative_table = view(at(Params::table), {cfg.bias.relative.num_rows(), c.H});
  if (cfg.shaw) {
    const int64_t rows = cfg.shaw->config.num_rows();
    ag.shaw_a_k = view(at(Params::a_k), {rows, c.D});
    if (cfg.shaw->a_v.data) ag.shaw_a_v = view(at(Params::a_v), {rows, c.D});
  }
  if (cfg.transformer_xl) {
    ag.transformer_xl_u = view(at(Params::u), {c.H, c.D});
    ag.transformer_xl_v = view(at(Params::v_xl), {c.H, c.D});
    ag.transformer_xl_w_r = view(at(Params::w_r), {c.H * c.D, cfg.transformer_xl->config.d_model});
  }
  if (cfg.sinks.data) ag.sinks = view(at(Params::sinks), {c.H});
  attention_backward(cfg, in, view(out.data(), {c.B, c.Q, c.H, Dv}), view(lse.data(), {c.B, c.H, c.Q}),
                     view(w.data(), {c.B, c.Q, c.H, Dv}), ag);
  return flat;
}

inline void check_library_against_reference(const Case& c, Enc e) {
  const AttentionCase ac(c, e);
  SCOPED_TRACE(ac.describe());
  const std::vector<float> w = random_floats(c.B * c.Q * c.H * c.dv(), 91);
  const std::vector<double> expected = reference_gradients(ac, ac.flat(), to_double(w));
  const std::vector<float> actual = library_gradients(ac, w);
  for (int p = 0; p < Params::count; ++p) {
    const auto part = static_cast<Params::Part>(p);
    const size_t o = ac.offset(part), n = ac.part(part).size();
    if (n == 0) continue;
    SCOPED_TRACE(::testing::Message() << "part " << p);
    const std::vector<float> a(actual.begin() + o, actual.begin() + o + n);
    const std::vector<double> x(expected.begin() + o, expected.begin() + o + n);
    double scale = 1;
    for (double v : x) scale = std::max(scale, std::abs(v));
    const PartTolerance t = part_tolerance(part);
    EXPECT_TRUE(all_close(a, x, {t.atol_scale * scale, t.rtol}));
  }
}

// The shapes of tests/test_attention.cc and tests/test_attention_backward.cc: tile edges (70 = 64
// + 6 queries and keys), GQA and multi-query, decode against a cache, head_dim tails (66, 80),
// windows, packed sequences, a chunk of queries at the end of the keys.
}  // namespace posenc::test
