// tests/test_output_bounds.cc: every main op writes its outputs and nothing else. Outputs (and,
// where an op reads them, inputs) live in Guarded buffers (tests/canary.h): sentinel NaNs before,
// after and between the rows of each view. A write past a row or past the end fails intact(); a
// read past the end of an input shows up as a non-finite output. Shapes are chosen so that rows
// end off every vector width (head_dim 6, 22, 66; sequence lengths 67, 70), on every SIMD target.
#include <vector>

#include "canary.h"
#include "posenc/absolute.h"
#include "posenc/attention.h"
#include "posenc/bias.h"
#include "posenc/rope.h"
#include "posenc/shaw.h"
#include "posenc/transformer_xl.h"
#include "test_util.h"

namespace posenc::test {
namespace {

std::vector<int64_t> iota(int64_t n, int64_t from = 0) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

Guarded guarded_input(std::initializer_list<int64_t> shape, uint32_t seed,
                      std::initializer_list<int64_t> strides = {}) {
  Guarded g(shape, strides);
  g.fill(random_floats(static_cast<size_t>(g.numel()), seed));
  return g;
}

Guarded zeros(std::initializer_list<int64_t> shape, std::initializer_list<int64_t> strides = {}) {
  Guarded g(shape, strides);
  g.fill(std::vector<float>(static_cast<size_t>(g.numel()), 0.0f));
  return g;
}

#define EXPECT_GUARDED(g)            \
  do {                               \
    EXPECT_TRUE((g).intact()) << #g; \
    EXPECT_TRUE((g).finite()) << #g; \
  } while (0)

TEST(OutputBounds, RopeOutOfPlaceAndInPlaceOnStridedViews) {
  for_each_cpu_target([](const std::string&) {
    for (RopeLayout layout : {RopeLayout::half, RopeLayout::interleaved})
      for (auto [D, R] : {std::pair<int64_t, int64_t>{6, 6}, {22, 22}, {66, 66}, {66, 40}, {10, 2}}) {
        SCOPED_TRACE(::testing::Message() << rope_layout_name(layout) << " D " << D << " rotary " << R);
        RopeConfig rc;
        rc.head_dim = D;
        rc.rotary_dim = R;
        rc.layout = layout;
        const Rope rope(rc);
        const int64_t B = 2, T = 5, H = 3;
        const std::vector<int64_t> pos = iota(T, 7);
        // Out of place: contiguous input and output.
        Guarded x = guarded_input({B, T, H, D}, 1), out({B, T, H, D});
        rope.forward(x.view(), out.view(), view(pos.data(), {T}));
        EXPECT_GUARDED(out);
        EXPECT_GUARDED(x);
        rope.backward(out.view(), x.view(), view(pos.data(), {T}));  // and the backward, out of place
        EXPECT_GUARDED(x);
        // In place on q and k with gaps between heads (3), tokens (5) and batch rows (7).
        const int64_t sh = D + 3, st = H * sh + 5, sb = T * st + 7, Hk = 1, skh = D + 1, skt = Hk * skh + 2;
        Guarded q = guarded_input({B, T, H, D}, 2, {sb, st, sh, 1});
        Guarded k = guarded_input({B, T, Hk, D}, 3, {T * skt + 4, skt, skh, 1});
        rope.forward_qk(q.view(), k.view(), view(pos.data(), {T}));
        EXPECT_GUARDED(q);
        EXPECT_GUARDED(k);
        rope.backward(q.view(), view(pos.data(), {T}));
        EXPECT_GUARDED(q);
        // cos/sin tables (N, R/2) with a gap between rows.
        Guarded c({T, R / 2}, {R / 2 + 3, 1}), s({T, R / 2}, {R / 2 + 3, 1});
        rope.cos_sin(view(pos.data(), {T}), c.view(), s.view());
        EXPECT_GUARDED(c);
        EXPECT_GUARDED(s);
      }
  });
}

TEST(OutputBounds, SinusoidalTable) {
  for_each_cpu_target([](const std::string&) {
    for (SinusoidalLayout layout : {SinusoidalLayout::interleaved, SinusoidalLayout::split})
      for (int64_t dim : {2, 6, 22, 66, 7}) {
        if (dim % 2 && layout == SinusoidalLayout::interleaved) continue;
        SCOPED_TRACE(::testing::Message() << "dim " << dim);
        SinusoidalConfig cfg;
        cfg.dim = dim;
        cfg.layout = layout;
        const std::vector<int64_t> pos = iota(9, 3);
        Guarded table({9, dim}), strided({9, dim}, {dim + 5, 1});
        sinusoidal_table(cfg, view(pos.data(), {9}), table.view());
        sinusoidal_table(cfg, view(pos.data(), {9}), strided.view());
        EXPECT_GUARDED(table);
        EXPECT_GUARDED(strided);
        Guarded x = zeros({2, 9, dim}, {9 * (dim + 2) + 1, dim + 2, 1});
        sinusoidal_add(cfg, view(pos.data(), {9}), x.view());
        EXPECT_GUARDED(x);
      }
  });
}

TEST(OutputBounds, AlibiAndRelativeBiasBlocks) {
  for_each_cpu_target([](const std::string&) {
    const int64_t H = 3;
    for (auto [Q, K] : {std::pair<int64_t, int64_t>{1, 67}, {5, 5}, {70, 70}, {3, 17}}) {
      SCOPED_TRACE(::testing::Message() << "Q " << Q << " K " << K);
      const std::vector<int64_t> qp = iota(Q, K - Q), kp = iota(K);
      for (bool symmetric : {false, true}) {
        AlibiConfig a;
        a.heads = H;
        a.symmetric = symmetric;
        Guarded out({H, Q, K}), gapped({H, Q, K}, {Q * (K + 3) + 2, K + 3, 1});
        alibi_bias(a, view(qp.data(), {Q}), view(kp.data(), {K}), out.view());
        alibi_bias(a, view(qp.data(), {Q}), view(kp.data(), {K}), gapped.view());
        EXPECT_GUARDED(out);
        EXPECT_GUARDED(gapped);
      }
      for (const RelativeBiasConfig& c :
           {RelativeBiasConfig::clipped(H, 5), RelativeBiasConfig::t5(H, 16, 40, false)}) {
        const Guarded table = guarded_input({c.num_rows(), H}, 4);
        Guarded out({H, Q, K}), gapped({H, Q, K}, {Q * (K + 1) + 9, K + 1, 1});
        relative_bias(c, table.view(), view(qp.data(), {Q}), view(kp.data(), {K}), out.view());
        relative_bias(c, table.view(), view(qp.data(), {Q}), view(kp.data(), {K}), gapped.view());
        EXPECT_GUARDED(out);
        EXPECT_GUARDED(gapped);
        Guarded grad = zeros({c.num_rows(), H});
        relative_bias_backward(c, out.view(), view(qp.data(), {Q}), view(kp.data(), {K}), grad.view());
        EXPECT_GUARDED(grad);
      }
    }
  });
}

TEST(OutputBounds, ShawAndTransformerXLLogits) {
  for_each_cpu_target([](const std::string&) {
    const int64_t B = 2, H = 2, Q = 7, K = 67;
    const std::vector<int64_t> qp = iota(Q, K - Q), kp = iota(K);
    for (int64_t D : {6, 22}) {
      SCOPED_TRACE(::testing::Message() << "D " << D);
      ShawConfig sc;
      sc.max_distance = 4;
      sc.head_dim = D;
      const Guarded a_k = guarded_input({sc.num_rows(), D}, 5), a_v = guarded_input({sc.num_rows(), D}, 6);
      const Guarded q = guarded_input({B, Q, H, D}, 7), k = guarded_input({B, K, H, D}, 8);
      Guarded logits({B, H, Q, K}, {H * Q * (K + 2), Q * (K + 2), K + 2, 1});
      shaw_key_logits(sc, a_k.view(), q.view(), view(qp.data(), {Q}), view(kp.data(), {K}), logits.view());
      EXPECT_GUARDED(logits);
      Guarded out = zeros({B, Q, H, D}, {Q * H * (D + 1), H * (D + 1), D + 1, 1});
      const Guarded probs = guarded_input({B, H, Q, K}, 9);
      shaw_value_output(sc, a_v.view(), probs.view(), view(qp.data(), {Q}), view(kp.data(), {K}), out.view());
      EXPECT_GUARDED(out);
      Guarded gq = zeros({B, Q, H, D}), ga_k = zeros({sc.num_rows(), D});
      shaw_key_logits_backward(sc, a_k.view(), q.view(), view(qp.data(), {Q}), view(kp.data(), {K}),
                               probs.view(), gq.view(), ga_k.view());
      EXPECT_GUARDED(gq);
      EXPECT_GUARDED(ga_k);

      TransformerXLConfig xc;
      xc.d_model = 10;
      xc.heads = H;
      xc.head_dim = D;
      const Guarded u = guarded_input({H, D}, 10), v = guarded_input({H, D}, 11),
                    w_r = guarded_input({H * D, 10}, 12);
      Guarded xl({B, H, Q, K}, {H * Q * (K + 3) + 1, Q * (K + 3), K + 3, 1});
      transformer_xl_logits(xc, q.view(), k.view(), u.view(), v.view(), w_r.view(), view(qp.data(), {Q}),
                            view(kp.data(), {K}), xl.view());
      EXPECT_GUARDED(xl);
      TransformerXLGrads g;
      Guarded g_q = zeros({B, Q, H, D}), g_k = zeros({B, K, H, D}), g_u = zeros({H, D}), g_v = zeros({H, D}),
              g_w = zeros({H * D, 10});
      g.q = g_q.view(), g.k = g_k.view(), g.u = g_u.view(), g.v = g_v.view(), g.w_r = g_w.view();
      transformer_xl_logits_backward(xc, q.view(), k.view(), u.view(), v.view(), w_r.view(),
                                     view(qp.data(), {Q}), view(kp.data(), {K}), probs.view(), g);
      for (const Guarded* x : {&g_q, &g_k, &g_u, &g_v, &g_w}) EXPECT_GUARDED(*x);
      Guarded r({K, 10}, {13, 1});
      std::vector<int64_t> dist = iota(K, -30);
      transformer_xl_sinusoid(xc, view(dist.data(), {K}), r.view());
      EXPECT_GUARDED(r);
    }
  });
}

// Attention forward (out, lse) and backward (dq, dk, dv and the parameter gradients), every output
// strided with gaps, for the encodings whose gradients the backward writes.
TEST(OutputBounds, AttentionForwardAndBackward) {
  for_each_cpu_target([](const std::string&) {
    struct Shape {
      int64_t B, Q, K, H, Hkv, D;
    };
    for (const Shape s : {Shape{1, 70, 70, 2, 1, 22}, Shape{2, 3, 67, 2, 2, 6}, Shape{1, 1, 66, 4, 2, 66}})
      for (int enc = 0; enc < 4; ++enc) {  // plain + RoPE, T5, Shaw (keys and values), Transformer-XL
        const auto [B, Q, K, H, Hkv, D] = s;
        SCOPED_TRACE(::testing::Message() << "Q " << Q << " K " << K << " D " << D << " encoding " << enc);
        RopeConfig rc;
        rc.head_dim = D;
        const Rope rope(rc);
        AttentionConfig cfg;
        cfg.causal = true;
        const RelativeBiasConfig t5 = RelativeBiasConfig::t5(H, 16, 40, false);
        const Guarded table = guarded_input({t5.num_rows(), H}, 20);
        ShawConfig sc;
        sc.max_distance = 5;
        sc.head_dim = D;
        const Guarded a_k = guarded_input({sc.num_rows(), D}, 21),
                      a_v = guarded_input({sc.num_rows(), D}, 22);
        TransformerXLConfig xc;
        xc.d_model = 8;
        xc.heads = H;
        xc.head_dim = D;
        const Guarded u = guarded_input({H, D}, 23), v_xl = guarded_input({H, D}, 24),
                      w_r = guarded_input({H * D, 8}, 25);
        if (enc == 0) cfg.rope = &rope;
        if (enc == 1) {
          cfg.bias.kind = AttentionBias::Kind::relative;
          cfg.bias.relative = t5;
          cfg.bias.relative_table = table.view();
        }
        if (enc == 2) cfg.shaw = AttentionShaw{sc, a_k.view(), a_v.view()};
        if (enc == 3) cfg.transformer_xl = AttentionTransformerXL{xc, u.view(), v_xl.view(), w_r.view()};

        const Guarded q = guarded_input({B, Q, H, D}, 26, {Q * H * (D + 2), H * (D + 2), D + 2, 1});
        const Guarded k = guarded_input({B, K, Hkv, D}, 27), v = guarded_input({B, K, Hkv, D}, 28);
        const AttentionInputs in = qkv(q.view(), k.view(), v.view());
        Guarded out({B, Q, H, D}, {Q * H * (D + 3) + 1, H * (D + 3), D + 3, 1});
        Guarded lse({B, H, Q}, {H * (Q + 2), Q + 2, 1});
        attention_forward(cfg, in, out.view(), lse.view());
        EXPECT_GUARDED(out);
        EXPECT_GUARDED(lse);

        const Guarded grad_out = guarded_input({B, Q, H, D}, 29);
        Guarded dq = zeros({B, Q, H, D}, {Q * H * (D + 1) + 3, H * (D + 1), D + 1, 1});
        Guarded dk = zeros({B, K, Hkv, D}, {K * Hkv * (D + 4), Hkv * (D + 4), D + 4, 1});
        Guarded dv = zeros({B, K, Hkv, D}, {K * Hkv * D + 5, Hkv * D + 2, D, 1});
        Guarded dtable = zeros({t5.num_rows(), H}), da_k = zeros({sc.num_rows(), D}),
                da_v = zeros({sc.num_rows(), D});
        Guarded du = zeros({H, D}), dv_xl = zeros({H, D}), dw_r = zeros({H * D, 8});
        AttentionGrads g;
        g.q = dq.view(), g.k = dk.view(), g.v = dv.view();
        if (enc == 1) g.relative_table = dtable.view();
        if (enc == 2) g.shaw_a_k = da_k.view(), g.shaw_a_v = da_v.view();
        if (enc == 3)
          g.transformer_xl_u = du.view(), g.transformer_xl_v = dv_xl.view(),
          g.transformer_xl_w_r = dw_r.view();
        attention_backward(cfg, in, out.view(), lse.view(), grad_out.view(), g);
        for (const Guarded* x : {&dq, &dk, &dv, &dtable, &da_k, &da_v, &du, &dv_xl, &dw_r})
          EXPECT_GUARDED(*x);
      }
  });
}

// The canary itself: a write one past a row, into a gap, or before the start is caught.
TEST(OutputBounds, CanariesCatchStrayWrites) {
  Guarded g({2, 3}, {5, 1});
  g.fill({1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(g.intact());
  g.data()[3] = 0.0f;  // the gap after row 0
  EXPECT_FALSE(g.intact());
  Guarded end({4});
  end.data()[4] = 0.0f;  // one past the end
  EXPECT_FALSE(end.intact());
  Guarded start({4});
  start.data()[-1] = 1.0f;
  EXPECT_FALSE(start.intact());
  Guarded read({2});
  EXPECT_FALSE(read.finite());  // never written: still the sentinel
}

}  // namespace
}  // namespace posenc::test
