// tests/test_attention_backward.cc: the fused attention backward against central finite
// differences of the double-precision reference forward, for every encoding and its parameters,
// across tile edges, GQA, decode shapes, windows and packed sequences; plus determinism.

#include <cmath>
#include <cstdint>
#include <vector>

#include "attention_case.h"
#include "posenc/error.h"
#include "posenc/threads.h"

namespace posenc::test {
namespace {

// fp32 gradients of sums over ~100 keys of O(1) terms, vs exact ones: a few 1e-6 absolute.
constexpr Tolerance kGrad{2e-5, 2e-4};

struct Grads {
  std::vector<float> part[Params::count];
};

// Forward (for out and lse) then backward with grad_out = w, accumulating into zeroed grads (or, with
// accumulate false, written into grads that start as `start`).
Grads run_backward(const AttentionCase& ac, const std::vector<float>& w, bool accumulate = true,
                   float start = 0.0f) {
  const Case& c = ac.shape();
  std::vector<float> out(c.B * c.Q * c.H * c.D), lse(c.B * c.H * c.Q);
  const AttentionConfig cfg = ac.config();
  const AttentionInputs in = ac.inputs();
  attention_forward(cfg, in, view(out.data(), {c.B, c.Q, c.H, c.D}), view(lse.data(), {c.B, c.H, c.Q}));
  Grads g;
  for (int p = 0; p < Params::count; ++p)
    g.part[p].assign(ac.part(static_cast<Params::Part>(p)).size(), start);
  AttentionGrads ag;
  ag.accumulate = accumulate;
  ag.q = view(g.part[Params::q].data(), {c.B, c.Q, c.H, c.D});
  ag.k = view(g.part[Params::k].data(), {c.B, c.K, c.Hkv, c.D});
  ag.v = view(g.part[Params::v].data(), {c.B, c.K, c.Hkv, c.D});
  if (cfg.bias.kind == AttentionBias::Kind::relative)
    ag.relative_table = view(g.part[Params::table].data(), {cfg.bias.relative.num_rows(), c.H});
  if (cfg.shaw) {
    const int64_t rows = cfg.shaw->config.num_rows();
    ag.shaw_a_k = view(g.part[Params::a_k].data(), {rows, c.D});
    if (cfg.shaw->a_v.data) ag.shaw_a_v = view(g.part[Params::a_v].data(), {rows, c.D});
  }
  if (cfg.transformer_xl) {
    ag.transformer_xl_u = view(g.part[Params::u].data(), {c.H, c.D});
    ag.transformer_xl_v = view(g.part[Params::v_xl].data(), {c.H, c.D});
    ag.transformer_xl_w_r = view(g.part[Params::w_r].data(), {c.H * c.D, cfg.transformer_xl->config.d_model});
  }
  attention_backward(cfg, in, view(out.data(), {c.B, c.Q, c.H, c.D}), view(lse.data(), {c.B, c.H, c.Q}),
                     view(w.data(), {c.B, c.Q, c.H, c.D}), ag);
  return g;
}

void check_gradients(const Case& c, Enc e, size_t coords_per_part = 12) {
  const AttentionCase ac(c, e);
  SCOPED_TRACE(ac.describe());
  const std::vector<float> w = random_floats(c.B * c.Q * c.H * c.D, 91);
  const std::vector<double> wd = to_double(w);
  const Grads g = run_backward(ac, w);
  const auto loss = [&](const std::vector<double>& f) { return dot(ac.reference(f).out, wd); };
  const std::vector<double> f = ac.flat();
  for (int p = 0; p < Params::count; ++p) {
    const auto part = static_cast<Params::Part>(p);
    if (ac.part(part).empty()) continue;
    SCOPED_TRACE(::testing::Message() << "part " << p);
    std::vector<size_t> coords = sample_coords(ac.part(part).size(), coords_per_part, 17 + p);
    std::vector<size_t> flat_coords;
    for (size_t i : coords) flat_coords.push_back(i + ac.offset(part));
    EXPECT_TRUE(all_close(gather(g.part[p], coords), finite_difference(loss, f, flat_coords), kGrad));
  }
}

TEST(AttentionBackward, EveryEncodingMatchesFiniteDifferences) {
  const std::vector<Case> cases = {
      {1, 70, 70, 2, 1, 40, true},  // two key and query tiles, the second partial; GQA 2/1
      {2, 3, 67, 2, 2, 24, false},  // bidirectional, a chunk of queries at the end of 67 keys
      {1, 1, 66, 2, 1, 8, true},    // a decode step
  };
  for (const Case& c : cases)
    for (Enc e : all_encs()) {
      if ((e == Enc::transformer_xl || e == Enc::transformer_xl_t5) && c.Q * c.K * c.D > 20000)
        continue;  // the XL reference is slow
      check_gradients(c, e);
    }
  for (Enc e : {Enc::transformer_xl, Enc::transformer_xl_t5}) {
    check_gradients({1, 70, 70, 2, 1, 4, true}, e);  // XL across tiles, small head_dim to keep it quick
    check_gradients({2, 5, 9, 2, 2, 6, false}, e);
  }
}

TEST(AttentionBackward, EverySimdTargetAndWideHeads) {
  for_each_cpu_target([](const std::string&) {
    check_gradients({1, 70, 70, 2, 1, 66, true}, Enc::rope_shaw, 6);  // head_dim 66: vector tails
    check_gradients({1, 9, 70, 2, 2, 20, false}, Enc::t5, 6);
    // A decode problem before a prefill of 65 queries against 135 keys (three tiles of packed K^T, V^T
    // and key rows; two query blocks, the second of one row).
    check_gradients({1, 66, 140, 2, 1, 8, true, 0, {0, 1, 66}, {0, 5, 140}}, Enc::alibi, 6);
  });
  check_gradients({1, 66, 66, 2, 1, 128, true}, Enc::rope_alibi, 8);
  check_gradients({1, 3, 66, 4, 2, 80, true}, Enc::clipped, 8);
}

TEST(AttentionBackward, WindowsAndPackedSequences) {
  check_gradients({1, 67, 67, 2, 1, 16, true, 9}, Enc::rope_t5);
  check_gradients({1, 67, 67, 2, 2, 16, false, 5}, Enc::shaw);
  check_gradients({1, 76, 76, 2, 1, 8, true, 0, {0, 5, 75, 76}, {0, 5, 75, 76}}, Enc::rope_alibi);
  check_gradients({1, 76, 76, 2, 2, 8, false, 0, {0, 5, 75, 76}, {0, 5, 75, 76}}, Enc::shaw);
  check_gradients({1, 2, 75, 2, 1, 8, true, 0, {0, 1, 2}, {0, 9, 75}}, Enc::t5_causal);
}

TEST(AttentionBackward, FullyMaskedRowsGetZeroGradients) {
  AttentionCase ac({1, 3, 10, 1, 1, 8, true, 2}, Enc::t5);
  // Queries at 7, 8, 9 with window 2 see keys; move them far past every key: no key visible.
  std::vector<int64_t> qp = {100, 101, 102};
  const Case& c = ac.shape();
  AttentionInputs in = ac.inputs();
  in.q_positions = view(qp.data(), {3});
  const AttentionConfig cfg = ac.config();
  std::vector<float> out(c.Q * c.D), lse(c.Q), w = random_floats(c.Q * c.D, 5);
  attention_forward(cfg, in, view(out.data(), {1, 3, 1, 8}), view(lse.data(), {1, 1, 3}));
  std::vector<float> gq(out.size(), 0.0f), gk(c.K * c.D, 0.0f), gv(gk.size(), 0.0f),
      gt(cfg.bias.relative.num_rows(), 0.0f);
  AttentionGrads ag;
  ag.q = view(gq.data(), {1, 3, 1, 8}), ag.k = view(gk.data(), {1, 10, 1, 8}),
  ag.v = view(gv.data(), {1, 10, 1, 8});
  ag.relative_table = view(gt.data(), {cfg.bias.relative.num_rows(), 1});
  attention_backward(cfg, in, view(out.data(), {1, 3, 1, 8}), view(lse.data(), {1, 1, 3}),
                     view(w.data(), {1, 3, 1, 8}), ag);
  for (const auto* g : {&gq, &gk, &gv, &gt}) EXPECT_EQ(*g, std::vector<float>(g->size(), 0.0f));
}

TEST(AttentionBackward, SameBitsForAnyThreadCount) {
  for (Enc e : {Enc::rope_t5, Enc::shaw, Enc::transformer_xl}) {
    const AttentionCase ac({2, 130, 130, 4, 2, 16, true}, e);
    const std::vector<float> w = random_floats(2 * 130 * 4 * 16, 3);
    const int saved = num_threads();
    set_num_threads(1);
    const Grads one = run_backward(ac, w);
    set_num_threads(3);
    const Grads three = run_backward(ac, w);
    set_num_threads(saved);
    for (int p = 0; p < Params::count; ++p)
      EXPECT_EQ(one.part[p], three.part[p]) << enc_name(e) << " part " << p;
  }
}

TEST(AttentionBackward, GradientsAccumulate) {
  const AttentionCase ac({1, 5, 5, 1, 1, 8, true}, Enc::t5);
  const std::vector<float> w = random_floats(5 * 8, 4);
  const Grads g = run_backward(ac, w);
  // Run again on top of the same buffers: everything doubles.
  const Case& c = ac.shape();
  std::vector<float> out(c.Q * c.D), lse(c.Q);
  const AttentionConfig cfg = ac.config();
  attention_forward(cfg, ac.inputs(), view(out.data(), {1, 5, 1, 8}), view(lse.data(), {1, 1, 5}));
  Grads twice = g;
  AttentionGrads ag;
  ag.q = view(twice.part[Params::q].data(), {1, 5, 1, 8});
  ag.k = view(twice.part[Params::k].data(), {1, 5, 1, 8});
  ag.v = view(twice.part[Params::v].data(), {1, 5, 1, 8});
  ag.relative_table = view(twice.part[Params::table].data(), {cfg.bias.relative.num_rows(), 1});
  attention_backward(cfg, ac.inputs(), view(out.data(), {1, 5, 1, 8}), view(lse.data(), {1, 1, 5}),
                     view(w.data(), {1, 5, 1, 8}), ag);
  for (int p : {Params::q, Params::k, Params::v, Params::table})
    for (size_t i = 0; i < g.part[p].size(); ++i) EXPECT_EQ(twice.part[p][i], 2 * g.part[p][i]);
}

// AttentionGrads::accumulate = false: every gradient written, the views' NaN never read; the same bits as
// added into zeros. In fp32 views for every parameter, and in bf16 views of q, k and v (one rounding).
TEST(AttentionBackward, GradientsWrittenWhenNotAccumulated) {
  for (Enc e : {Enc::rope_t5, Enc::shaw, Enc::transformer_xl}) {
    const AttentionCase ac({2, 70, 70, 4, 2, 16, true}, e);
    const std::vector<float> w = random_floats(2 * 70 * 4 * 16, 5);
    const Grads added = run_backward(ac, w);
    const Grads written = run_backward(ac, w, false, std::nanf(""));
    for (int p = 0; p < Params::count; ++p)
      EXPECT_EQ(added.part[p], written.part[p]) << enc_name(e) << " part " << p;
  }
  const AttentionCase ac({1, 9, 9, 2, 1, 16, true}, Enc::rope);
  const Case& c = ac.shape();
  const AttentionConfig cfg = ac.config();
  std::vector<float> out(c.Q * c.H * c.D), lse(c.H * c.Q);
  attention_forward(cfg, ac.inputs(), view(out.data(), {1, c.Q, c.H, c.D}), view(lse.data(), {1, c.H, c.Q}));
  const std::vector<float> w = random_floats(out.size(), 6);
  std::vector<uint16_t> bits[2][3];
  for (const bool add : {true, false}) {
    std::vector<uint16_t>* g = bits[add ? 0 : 1];
    const uint16_t start = add ? 0 : 0xffff;  // +0, or a NaN
    g[0].assign(c.Q * c.H * c.D, start), g[1].assign(c.K * c.Hkv * c.D, start);
    g[2].assign(c.K * c.Hkv * c.D, start);
    AttentionGrads ag;
    ag.accumulate = add;
    const auto bf16 = [&](std::vector<uint16_t>& x, int64_t T, int64_t H) {
      TensorView v = view(reinterpret_cast<float*>(x.data()), {1, T, H, c.D});
      v.dtype = DType::bf16;
      return v;
    };
    ag.q = bf16(g[0], c.Q, c.H), ag.k = bf16(g[1], c.K, c.Hkv), ag.v = bf16(g[2], c.K, c.Hkv);
    attention_backward(cfg, ac.inputs(), view(out.data(), {1, c.Q, c.H, c.D}),
                       view(lse.data(), {1, c.H, c.Q}), view(w.data(), {1, c.Q, c.H, c.D}), ag);
  }
  for (int t = 0; t < 3; ++t) EXPECT_EQ(bits[0][t], bits[1][t]) << "bf16 gradient " << t;
}

TEST(AttentionBackward, BadInputIsRejectedAndNothingIsWritten) {
  const AttentionCase ac({1, 4, 4, 2, 2, 8, true}, Enc::none);
  std::vector<float> out(64), lse(8), w(64), gq(64, 7.0f), gk(64, 7.0f), gv(64, 7.0f), gt(32, 7.0f);
  AttentionGrads ag;
  ag.q = view(gq.data(), {1, 4, 2, 8}), ag.k = view(gk.data(), {1, 4, 2, 8}),
  ag.v = view(gv.data(), {1, 4, 2, 8});
  auto expect = [&](const AttentionGrads& g, TensorView lse_view, const std::string& needle) {
    try {
      attention_backward(ac.config(), ac.inputs(), view(out.data(), {1, 4, 2, 8}), lse_view,
                         view(w.data(), {1, 4, 2, 8}), g);
      ADD_FAILURE() << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    for (const auto* b : {&gq, &gk, &gv, &gt}) EXPECT_EQ(*b, std::vector<float>(b->size(), 7.0f));
  };
  expect(ag, view(lse.data(), {1, 4, 2}), "lse has shape [1, 4, 2], expected [1, 2, 4]");
  AttentionGrads bad = ag;
  bad.k = view(gk.data(), {1, 4, 2, 4});
  expect(bad, view(lse.data(), {1, 2, 4}), "grads.k has shape");
  bad = ag;
  bad.relative_table = view(gt.data(), {16, 2});
  expect(bad, view(lse.data(), {1, 2, 4}),
         "grads.relative_table is given but attention has no such encoding");
  expect(ag, TensorView{}, "lse");
}

}  // namespace
}  // namespace posenc::test
