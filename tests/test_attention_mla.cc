// tests/test_attention_mla.cc: multi-head latent attention's head shapes inside the fused attention
// (DeepSeek-V2/V3, modeling_deepseek_v3.py DeepseekV3Attention): q/k heads of D = nope + rope dims,
// value heads of Dv != D, RoPE on the sub-range [rope_offset, D) of each q/k head (interleaved, as
// DeepSeek), and the absorbed form (FlashMLA) where one key head's first Dv dims are the value.
// Forward against the double reference, the reference backward against finite differences, the
// library's backward against the reference backward, every SIMD target, split decoding and bad input.
#include <cmath>

#include "attention_gradients.h"
#include "posenc/error.h"
#include "half_storage.h"
#include "posenc/kv_cache.h"

namespace posenc::test {
namespace {

// DeepSeek's proportions at test size: D = 12 = 8 without position + 4 rotated, Dv = 8 (192 =
// 128 + 64, 128 in the model); and shapes where the value head is the larger one.
Case mla(Case c, int64_t Dv, int64_t rope_offset) {
  c.Dv = Dv;
  c.rope_offset = rope_offset;
  c.rope_layout = RopeLayout::interleaved;
  return c;
}

const std::vector<Enc>& encodings() {
  static const std::vector<Enc> encs = {Enc::none,    Enc::rope, Enc::rope_alibi,
                                        Enc::rope_t5, Enc::t5,   Enc::transformer_xl};
  return encs;
}

TEST(AttentionMla, ForwardMatchesTheReference) {
  const std::vector<Case> shapes = {
      mla({1, 70, 70, 4, 1, 24, true}, 16, 16),   // prefill across two tiles, MQA, v smaller
      mla({2, 3, 67, 2, 2, 20, false}, 36, 12),   // bidirectional, v larger, odd tails
      mla({1, 1, 130, 4, 1, 40, true}, 32, 32),   // decode: key rows, heads of a group in lockstep
      mla({1, 67, 67, 2, 1, 12, true, 9}, 8, 8),  // sliding window, D 12 = 8 + 4, Dv 8
      mla({1, 76, 76, 2, 2, 10, true, 0, {0, 5, 75, 76}, {0, 5, 75, 76}}, 6, 4),  // packed
      mla({1, 70, 70, 2, 1, 24, true}, 16, 0),  // RoPE on the first 24 of 24, v 16
  };
  for (const Case& c : shapes)
    for (Enc e : encodings()) {
      if (e == Enc::transformer_xl && c.Q * c.K * c.D > 40000) continue;  // keep the XL reference quick
      check_forward(c, e);
      Case capped = c;  // with the score-level mechanisms of the same families
      capped.softcap = 2.0, capped.sinks = true;
      check_forward(capped, e);
    }
}

TEST(AttentionMla, SplitDecodeAgainstALongCache) {
  // Flash-decoding splits the keys; the partial outputs and their merge have Dv columns.
  check_forward(mla({1, 1, 5000, 8, 1, 24, true}, 16, 16), Enc::rope);
  check_forward(mla({2, 2, 4200, 4, 2, 12, true}, 20, 8), Enc::rope_alibi);
}

TEST(AttentionMla, EverySimdTarget) {
  for_each_cpu_target([](const std::string& target) {
    check_forward(mla({1, 70, 70, 4, 1, 24, true}, 16, 16), Enc::rope_t5, target);
    check_forward(mla({1, 1, 130, 4, 1, 40, true}, 36, 32), Enc::rope, target);
    check_library_against_reference(mla({1, 70, 70, 2, 1, 20, true}, 12, 12), Enc::rope_alibi);
  });
}

TEST(AttentionMla, ReferenceBackwardMatchesFiniteDifferences) {
  const std::vector<Case> shapes = {
      mla({1, 5, 7, 2, 1, 6, true}, 4, 2),
      mla({2, 3, 6, 2, 2, 4, false, 3}, 6, 2),
      mla({1, 6, 6, 2, 1, 6, true, 0, {0, 2, 6}, {0, 2, 6}}, 3, 4),
  };
  for (const Case& c : shapes)
    for (Enc e : encodings()) check_reference_against_finite_differences(c, e);
}

TEST(AttentionMla, LibraryBackwardMatchesTheReferenceBackward) {
  const std::vector<Case> shapes = {
      mla({1, 70, 70, 4, 1, 24, true}, 16, 16),
      mla({2, 3, 67, 2, 2, 20, false}, 36, 12),
      mla({1, 2, 130, 4, 1, 12, true}, 8, 8),
      mla({1, 67, 67, 2, 2, 16, false, 5}, 24, 8),
      mla({1, 76, 76, 2, 1, 10, true, 0, {0, 5, 75, 76}, {0, 5, 75, 76}}, 6, 4),
  };
  for (const Case& c : shapes)
    for (Enc e : encodings()) {
      if (e == Enc::transformer_xl && c.Q * c.K * c.D > 40000) continue;
      check_library_against_reference(c, e);
      Case capped = c;
      capped.softcap = 2.0, capped.sinks = true;
      check_library_against_reference(capped, e);
    }
}

// The absorbed form (FlashMLA): one key head of D = Dv + rope dims per token; the value is the
// key's first Dv dims, passed as a view of the same memory. Equal to the same attention with the
// value copied out, forward and backward (the gradients of the shared buffer add up).
TEST(AttentionMla, AbsorbedFormSharesTheKeyBuffer) {
  const int64_t Q = 67, K = 67, H = 8, Dv = 16, R = 8, D = Dv + R;
  RopeConfig rc;
  rc.head_dim = R;
  rc.base = 500;
  rc.layout = RopeLayout::interleaved;
  const Rope rope(rc);
  AttentionConfig cfg;
  cfg.causal = true;
  cfg.rope = &rope;
  cfg.rope_offset = Dv;
  const std::vector<float> q = random_floats(Q * H * D, 5), kv = random_floats(K * D, 6);
  std::vector<float> v_copy(K * Dv);
  for (int64_t j = 0; j < K; ++j) std::copy(&kv[j * D], &kv[j * D] + Dv, &v_copy[j * Dv]);
  const ConstTensorView qv = view(q.data(), {1, Q, H, D}), kview = view(kv.data(), {1, K, 1, D});
  const ConstTensorView shared = strided_view(kv.data(), {1, K, 1, Dv}, {K * D, D, D, 1});
  std::vector<float> out(Q * H * Dv), lse(H * Q), out_copy(out.size()), lse_copy(lse.size());
  attention_forward(cfg, qkv(qv, kview, shared), view(out.data(), {1, Q, H, Dv}),
                    view(lse.data(), {1, H, Q}));
  attention_forward(cfg, qkv(qv, kview, view(v_copy.data(), {1, K, 1, Dv})),
                    view(out_copy.data(), {1, Q, H, Dv}), view(lse_copy.data(), {1, H, Q}));
  EXPECT_EQ(out, out_copy);
  EXPECT_EQ(lse, lse_copy);

  const std::vector<float> go = random_floats(Q * H * Dv, 7);
  std::vector<float> gq(q.size(), 0.0f), gkv(kv.size(), 0.0f), gq2(q.size(), 0.0f), gk2(kv.size(), 0.0f),
      gv2(v_copy.size(), 0.0f);
  AttentionGrads g;
  g.q = view(gq.data(), {1, Q, H, D});
  g.k = view(gkv.data(), {1, K, 1, D});
  g.v = strided_view(gkv.data(), {1, K, 1, Dv}, {K * D, D, D, 1});  // accumulates into the same rows
  attention_backward(cfg, qkv(qv, kview, shared), view(out.data(), {1, Q, H, Dv}),
                     view(lse.data(), {1, H, Q}), view(go.data(), {1, Q, H, Dv}), g);
  AttentionGrads g2;
  g2.q = view(gq2.data(), {1, Q, H, D});
  g2.k = view(gk2.data(), {1, K, 1, D});
  g2.v = view(gv2.data(), {1, K, 1, Dv});
  attention_backward(cfg, qkv(qv, kview, view(v_copy.data(), {1, K, 1, Dv})), view(out.data(), {1, Q, H, Dv}),
                     view(lse.data(), {1, H, Q}), view(go.data(), {1, Q, H, Dv}), g2);
  EXPECT_EQ(gq, gq2);
  for (int64_t j = 0; j < K; ++j)
    for (int64_t d = 0; d < D; ++d) {
      const float expected = gk2[j * D + d] + (d < Dv ? gv2[j * Dv + d] : 0.0f);
      ASSERT_FLOAT_EQ(gkv[j * D + d], expected) << "key " << j << " dim " << d;
    }
}

// RoPE on a sub-range moves only those dims: the others of q and k reach the scores unrotated.
TEST(AttentionMla, RopeOffsetRotatesOnlyItsRange) {
  const int64_t D = 12, lo = 8;
  RopeConfig rc;
  rc.head_dim = D - lo;
  rc.base = 100;
  const Rope rope(rc);
  // q and k nonzero only in [0, lo): a rotation of [lo, D) cannot change q . k, so the scores
  // equal those without RoPE (lse compared), whatever the positions.
  std::vector<float> q(3 * D, 0.0f), k(5 * D, 0.0f), v = random_floats(5 * 4, 3);
  const std::vector<float> r = random_floats(8 * lo, 4);
  for (int64_t t = 0; t < 3; ++t) std::copy(&r[t * lo], &r[t * lo] + lo, &q[t * D]);
  for (int64_t t = 0; t < 5; ++t) std::copy(&r[(3 + t) * lo], &r[(3 + t) * lo] + lo, &k[t * D]);
  const AttentionInputs in =
      qkv(view(q.data(), {1, 3, 1, D}), view(k.data(), {1, 5, 1, D}), view(v.data(), {1, 5, 1, 4}));
  AttentionConfig with_rope, without;
  with_rope.rope = &rope;
  with_rope.rope_offset = lo;
  std::vector<float> out1(12), lse1(3), out2(12), lse2(3);
  attention_forward(with_rope, in, view(out1.data(), {1, 3, 1, 4}), view(lse1.data(), {1, 1, 3}));
  attention_forward(without, in, view(out2.data(), {1, 3, 1, 4}), view(lse2.data(), {1, 1, 3}));
  EXPECT_EQ(out1, out2);
  EXPECT_EQ(lse1, lse2);
  // Nonzero in the range: now the scores change (the test above is not vacuous).
  q[lo] = 1.0f, k[D + lo] = 1.0f;  // dim lo of query 0 (position 2) and key 1: angle 1 x inv_freq_0
  attention_forward(with_rope, in, view(out1.data(), {1, 3, 1, 4}), view(lse1.data(), {1, 1, 3}));
  attention_forward(without, in, view(out2.data(), {1, 3, 1, 4}), view(lse2.data(), {1, 1, 3}));
  EXPECT_NE(lse1, lse2);
}

// DeepSeek-V4's attention (modeling_deepseek_v4.py DeepseekV4Attention): K = V, RoPE in pairs on the last
// dims of q, k and v, the output rotated back at the query's position (rotate_values), with a window
// and sinks: forward against the reference, its backward against finite differences, the library's
// backward against it; and every SIMD target.
Case v4(Case c) {
  c = mla(c, 0, c.D - 4);
  c.rotate_values = true;
  return c;
}

TEST(AttentionMla, RotatedValues) {
  for (Case c :
       {v4({1, 70, 70, 4, 1, 12, true}), v4({2, 5, 9, 2, 1, 8, true}), v4({1, 1, 40, 2, 1, 8, true})}) {
    check_forward(c, Enc::rope);
    check_library_against_reference(c, Enc::rope);
    c.window = 16, c.sinks = true;
    check_forward(c, Enc::rope);
    check_library_against_reference(c, Enc::rope);
  }
  check_reference_against_finite_differences(v4({1, 3, 5, 2, 1, 8, true}), Enc::rope);
  // GQA, and a rope whose attention factor (1.5) scales q, k, v and the output's rotation back.
  Case scaled = v4({1, 9, 9, 4, 2, 8, true});
  scaled.rope_attention_factor = true, scaled.sinks = true;
  check_forward(scaled, Enc::rope);
  check_library_against_reference(scaled, Enc::rope);
  Case small = v4({1, 3, 5, 2, 1, 8, true});
  small.rope_attention_factor = true, small.sinks = true;
  check_reference_against_finite_differences(small, Enc::rope);
  {  // not vacuous: the rotation of the values changes the output
    const Case rotated = v4({1, 3, 9, 2, 1, 8, true});
    Case plain = rotated;
    plain.rotate_values = false;
    const AttentionCase a(rotated, Enc::rope), b(plain, Enc::rope);
    const std::vector<double> x = a.reference(a.flat()).out, y = b.reference(b.flat()).out;
    double diff = 0;
    for (size_t i = 0; i < x.size(); ++i) diff = std::max(diff, std::abs(x[i] - y[i]));
    EXPECT_GT(diff, 0.05);
  }
  Case sinks = v4({1, 4, 6, 2, 1, 8, true});
  sinks.window = 3, sinks.sinks = true;
  check_reference_against_finite_differences(sinks, Enc::rope);
  for_each_cpu_target([](const std::string& target) {
    check_forward(v4({1, 70, 70, 2, 1, 20, true}), Enc::rope, target);
  });
}

TEST(AttentionMla, RotatedValuesBadInput) {
  const int64_t D = 8, H = 2;
  std::vector<float> q(H * 3 * D), k(3 * D), v(3 * D), out(H * 3 * D, 7.0f);
  std::vector<uint16_t> v16(3 * D), k16(3 * D), out16(H * 3 * D, 7);
  RopeConfig rc;
  rc.head_dim = 4;
  const Rope rope(rc);
  auto expect = [&](const AttentionConfig& cfg, const AttentionInputs& in, TensorView o,
                    const std::string& needle) {
    try {
      attention_forward(cfg, in, o, TensorView{});
      ADD_FAILURE() << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(out, std::vector<float>(out.size(), 7.0f));
    EXPECT_EQ(out16, std::vector<uint16_t>(out16.size(), 7));
  };
  const AttentionInputs in =
      qkv(view(q.data(), {1, 3, H, D}), view(k.data(), {1, 3, 1, D}), view(v.data(), {1, 3, 1, D}));
  AttentionConfig cfg;
  cfg.rotate_values = true;
  expect(cfg, in, view(out.data(), {1, 3, H, D}), "rotate_values = true needs rope");
  cfg.rope = &rope;
  cfg.rope_offset = 4;
  const AttentionInputs narrow =
      qkv(view(q.data(), {1, 3, H, D}), view(k.data(), {1, 3, 1, D}), view(v.data(), {1, 3, 1, 6}));
  expect(cfg, narrow, view(out.data(), {1, 3, H, 6}),
         "rotates dims [4, 8) of the values, whose head_dim is 6");
  const AttentionInputs half = qkv(view(q.data(), {1, 3, H, D}), view16(k16, DType::bf16, {1, 3, 1, D}),
                                   view16(v16, DType::bf16, {1, 3, 1, D}));
  expect(cfg, half, view(out.data(), {1, 3, H, D}),
         "rotate_values = true needs fp32 k and v (they are bf16)");
  expect(cfg, in, view16(out16, DType::bf16, {1, 3, H, D}), "rotate_values = true needs an fp32 out");
  RopeConfig whole;
  whole.head_dim = D;
  const Rope cache_rope(whole);
  KVCache cache(1, 1, D, &cache_rope);
  cfg.rope = &cache_rope;
  cache.append(view(k.data(), {1, 3, 1, D}), view(v.data(), {1, 3, 1, D}));
  cfg.rope_offset = 0;
  try {
    cache.attend(cfg, view(q.data(), {1, 3, H, D}), view(out.data(), {1, 3, H, D}));
    ADD_FAILURE() << "rotate_values in the KV cache";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rotate_values = true is not supported by the KV cache"),
              std::string::npos);
  }
}

TEST(AttentionMla, BadInputIsRejectedAndNothingIsWritten) {
  const int64_t D = 12, Dv = 8, H = 2;
  std::vector<float> q(H * 3 * D), k(3 * D), v(3 * Dv), out(H * 3 * Dv, 7.0f), wrong(H * 3 * D, 7.0f);
  const AttentionInputs in =
      qkv(view(q.data(), {1, 3, H, D}), view(k.data(), {1, 3, 1, D}), view(v.data(), {1, 3, 1, Dv}));
  auto expect = [&](const AttentionConfig& cfg, const AttentionInputs& inputs, TensorView o,
                    const std::string& needle) {
    try {
      attention_forward(cfg, inputs, o, TensorView{});
      ADD_FAILURE() << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(out, std::vector<float>(out.size(), 7.0f));
    EXPECT_EQ(wrong, std::vector<float>(wrong.size(), 7.0f));
  };
  RopeConfig rc;
  rc.head_dim = 4;
  const Rope rope(rc);
  AttentionConfig cfg;
  cfg.rope = &rope;
  cfg.rope_offset = 9;  // [9, 13) does not fit 12
  expect(cfg, in, view(out.data(), {1, 3, H, Dv}), "rope_offset = 9 and rope.head_dim = 4 do not fit");
  cfg.rope_offset = -1;
  expect(cfg, in, view(out.data(), {1, 3, H, Dv}), "rope_offset = -1");
  cfg.rope_offset = 8;
  // out of the q/k head size instead of the value head size
  expect(cfg, in, view(wrong.data(), {1, 3, H, D}), "out has shape [1, 3, 2, 12], expected [1, 3, 2, 8]");
  AttentionConfig shaw;
  AttentionShaw s;
  s.config.max_distance = 2;
  s.config.head_dim = D;
  std::vector<float> a(5 * D);
  s.a_k = view(a.data(), {5, D});
  s.a_v = view(a.data(), {5, D});
  shaw.shaw = s;
  expect(shaw, in, view(out.data(), {1, 3, H, Dv}), "shaw.a_v needs value heads of the q/k head_dim 12");
  const AttentionInputs empty_v =
      qkv(view(q.data(), {1, 3, H, D}), view(k.data(), {1, 3, 1, D}), view(v.data(), {1, 3, 1, 0}));
  expect(AttentionConfig{}, empty_v, view(out.data(), {1, 3, H, 0}), "its head_dim must be > 0");
}

}  // namespace
}  // namespace posenc::test
