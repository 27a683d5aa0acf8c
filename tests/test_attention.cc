// tests/test_attention.cc: the fused attention forward vs the naive double-precision reference,
// for every supported encoding, mask, shape edge case, packed batches, and bad input.

#include <algorithm>
#include <cmath>
#include <numeric>

#include "posenc/attention.h"
#include "posenc/error.h"
#include "posenc/threads.h"
#include "src/half.h"
#include "attention_case.h"

namespace posenc::test {
namespace {

TEST(Attention, EveryEncodingMatchesTheReference) {
  const std::vector<Case> cases = {
      {2, 70, 70, 4, 2, 40, true},     // prefill, K not a multiple of the 64-key tile, GQA 4/2
      {1, 70, 70, 3, 3, 80, false},    // bidirectional, head_dim 80
      {1, 1, 130, 4, 1, 64, true},     // a decode step against a cache of 130 (multi-query)
      {1, 5, 133, 2, 2, 128, true},    // a chunk of a prefill: queries at 128 .. 132
      {1, 1, 1, 1, 1, 40, true},       // length 1
      {1, 67, 67, 2, 1, 64, true, 9},  // sliding window of 9
  };
  for (const Case& c : cases)
    for (Enc e : all_encs()) check_forward(c, e);
}

TEST(Attention, EverySimdTarget) {
  for_each_cpu_target([](const std::string& target) {
    check_forward({1, 70, 70, 2, 1, 40, true}, Enc::rope_alibi, target);
    check_forward({2, 3, 67, 2, 2, 66, false}, Enc::t5, target);
    check_forward({1, 70, 70, 2, 2, 40, true}, Enc::shaw, target);
    check_forward({1, 67, 67, 2, 1, 40, false}, Enc::transformer_xl, target);
    check_forward({2, 3, 130, 4, 2, 66, true}, Enc::rope_t5, target);  // decode path: key rows, no packed K^T
  });
}

// A reversed RoPE (RopeConfig::reversed, NanoChat) inside the attention is its rotation of q and k
// followed by attention without RoPE (the backward rotates back through the same plan).
TEST(Attention, ReversedRopeIsRotationThenAttention) {
  const int64_t B = 1, T = 70, H = 2, D = 16;
  RopeConfig rc;
  rc.head_dim = D;
  rc.reversed = true;
  const Rope rope(rc);
  const std::vector<float> q0 = random_floats(B * T * H * D, 41), k0 = random_floats(B * T * H * D, 42),
                           v = random_floats(B * T * H * D, 43);
  std::vector<float> q = q0, k = k0, fused(q0.size()), plain(q0.size());
  std::vector<int64_t> pos(T);
  std::iota(pos.begin(), pos.end(), 0);
  rope.forward_qk(view(q.data(), {B, T, H, D}), view(k.data(), {B, T, H, D}), view(pos.data(), {T}));
  AttentionConfig cfg;
  cfg.causal = true;
  attention_forward(
      cfg, qkv(view(q.data(), {B, T, H, D}), view(k.data(), {B, T, H, D}), view(v.data(), {B, T, H, D})),
      view(plain.data(), {B, T, H, D}), TensorView{});
  cfg.rope = &rope;
  attention_forward(
      cfg, qkv(view(q0.data(), {B, T, H, D}), view(k0.data(), {B, T, H, D}), view(v.data(), {B, T, H, D})),
      view(fused.data(), {B, T, H, D}), TensorView{});
  EXPECT_TRUE(all_close(fused, std::vector<double>(plain.begin(), plain.end()), kF32Reduction));
  // Against the unreversed RoPE the scores differ (a reversed rotation is not a no-op here).
  RopeConfig usual = rc;
  usual.reversed = false;
  const Rope usual_rope(usual);
  cfg.rope = &usual_rope;
  std::vector<float> other(q0.size());
  attention_forward(
      cfg, qkv(view(q0.data(), {B, T, H, D}), view(k0.data(), {B, T, H, D}), view(v.data(), {B, T, H, D})),
      view(other.data(), {B, T, H, D}), TensorView{});
  EXPECT_FALSE(all_close(other, std::vector<double>(plain.begin(), plain.end()), kF32Reduction));
}

// Flash-decoding: a decode step against more than 2048 keys is split by keys (src/cpu/attention.cc
// kSplitKeys) and merged by log-sum-exp: 5000 keys are three splits, the last one partial; a window
// or chunk leaves whole splits fully masked; sinks belong to the first split only.
TEST(Attention, DecodeAgainstALongCacheIsSplitAndMerged) {
  for (Enc e : {Enc::none, Enc::rope_alibi, Enc::t5, Enc::transformer_xl}) {
    check_forward({1, 1, 5000, 4, 1, 16, true}, e);      // multi-query, one token
    check_forward({2, 3, 4500, 4, 2, 8, true}, e);       // GQA, three tokens, batch 2
    check_forward({1, 2, 5000, 2, 1, 8, true, 100}, e);  // a window: only the last split sees keys
    Case c{1, 1, 5000, 2, 1, 8, false};
    c.sinks = true, c.softcap = 3.0, c.chunk = 1000;  // chunk 4: keys 4000 .. 4999, splits 2 and 3
    check_forward(c, e);
  }
  check_forward({1, 1, 5000, 2, 2, 8, true}, Enc::shaw);  // Shaw's value term: not split, still right
  for_each_cpu_target([](const std::string& target) {
    check_forward({1, 1, 4100, 4, 1, 24, true}, Enc::rope_t5, target);
  });
}

// A decode step stacks the query rows of every head of a kv group (src/cpu/attention.cc): 23 heads
// over one kv head with 3 tokens are 69 rows (more than a 64-row block, not a multiple of the 4-row
// groups), D 20 (a tail past the vectors), 72 keys (a short last tile), split or not.
TEST(Attention, DecodeStacksManyHeadsOfAGroup) {
  for (Enc e : {Enc::none, Enc::rope_alibi, Enc::shaw, Enc::transformer_xl})
    check_forward({1, 3, 72, 23, 1, 20, true}, e);
  check_forward({1, 3, 4500, 23, 1, 20, true}, Enc::rope_t5);  // three splits
  for_each_cpu_target([](const std::string& target) {
    check_forward({1, 3, 72, 23, 1, 20, true}, Enc::rope_alibi, target);
  });
}

// Every (query row, key) logit of a decode step is summed in the same order whatever the rows around
// it: grouped-query attention gives the bits of multi-head attention over repeated keys and values,
// and a step of 3 tokens the bits of 3 steps of one token; on every target, fp32 and bf16 k / v.
TEST(Attention, DecodeLogitsDoNotDependOnTheRowsAroundThem) {
  for_each_cpu_target([](const std::string& target) {
    SCOPED_TRACE(target);
    const int64_t T = 3, K = 72, H = 6, D = 40;
    const std::vector<float> q = random_floats(T * H * D, 5), k = random_floats(K * D, 6),
                             v = random_floats(K * D, 7);
    std::vector<float> k_rep, v_rep;  // (K, H, D): each head's copy of the one kv head
    for (int64_t j = 0; j < K; ++j)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) k_rep.push_back(k[j * D + d]), v_rep.push_back(v[j * D + d]);
    for (DType dtype : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(dtype_name(dtype));
      std::vector<uint16_t> k16, v16, k16_rep, v16_rep;
      for (float x : k) k16.push_back(detail::f32_to_bf16(x));
      for (float x : v) v16.push_back(detail::f32_to_bf16(x));
      for (float x : k_rep) k16_rep.push_back(detail::f32_to_bf16(x));
      for (float x : v_rep) v16_rep.push_back(detail::f32_to_bf16(x));
      auto kv = [&](const std::vector<float>& x32, const std::vector<uint16_t>& x16, int64_t heads) {
        ConstTensorView t = view(
            dtype == DType::f32 ? x32.data() : reinterpret_cast<const float*>(x16.data()), {1, K, heads, D});
        t.dtype = dtype;
        return t;
      };
      AttentionConfig cfg;
      std::vector<float> gqa(T * H * D), mha(T * H * D), one(H * D);
      attention_forward(cfg, qkv(view(q.data(), {1, T, H, D}), kv(k, k16, 1), kv(v, v16, 1)),
                        view(gqa.data(), {1, T, H, D}), TensorView{});
      attention_forward(cfg, qkv(view(q.data(), {1, T, H, D}), kv(k_rep, k16_rep, H), kv(v_rep, v16_rep, H)),
                        view(mha.data(), {1, T, H, D}), TensorView{});
      EXPECT_EQ(gqa, mha);
      for (int64_t t = 0; t < T; ++t) {
        attention_forward(cfg, qkv(view(q.data() + t * H * D, {1, 1, H, D}), kv(k, k16, 1), kv(v, v16, 1)),
                          view(one.data(), {1, 1, H, D}), TensorView{});
        EXPECT_TRUE(std::equal(one.begin(), one.end(), gqa.begin() + t * H * D)) << "token " << t;
      }
    }
  });
}

// A NaN query gives NaN out for its row (never zeros, as a max that dropped the NaN gave when no other
// key was visible), whatever the number of keys, split or not; the other heads are untouched.
TEST(Attention, ANanQueryGivesANanRow) {
  for_each_cpu_target([](const std::string& target) {
    SCOPED_TRACE(target);
    for (int64_t K : {1, 5, 40, 5000}) {  // 5000: split by keys, merged
      const int64_t H = 2, D = 24;
      std::vector<float> q = random_floats(H * D, 3), k = random_floats(K * H * D, 4),
                         v = random_floats(K * H * D, 5);
      q[3] = std::nanf("");  // head 0
      std::vector<float> out(H * D), lse(H);
      attention_forward(
          AttentionConfig{},
          qkv(view(q.data(), {1, 1, H, D}), view(k.data(), {1, K, H, D}), view(v.data(), {1, K, H, D})),
          view(out.data(), {1, 1, H, D}), view(lse.data(), {1, H, 1}));
      for (int64_t d = 0; d < D; ++d) {
        EXPECT_TRUE(std::isnan(out[d])) << "K " << K << " d " << d;
        EXPECT_TRUE(std::isfinite(out[D + d])) << "K " << K << " d " << d;
      }
      EXPECT_TRUE(std::isnan(lse[0]));
    }
  });
}

TEST(Attention, SplitDecodeGivesTheSameBitsForAnyThreadCount) {
  const AttentionCase ac({1, 1, 9000, 8, 1, 32, true}, Enc::rope_alibi);
  auto run = [&](int threads) {
    const int saved = num_threads();
    set_num_threads(threads);
    std::vector<float> out(8 * 32), lse(8);
    attention_forward(ac.config(), ac.inputs(), view(out.data(), {1, 1, 8, 32}), view(lse.data(), {1, 8, 1}));
    set_num_threads(saved);
    out.insert(out.end(), lse.begin(), lse.end());
    return out;
  };
  EXPECT_EQ(run(1), run(3));
}

TEST(Attention, PackedSequencesDoNotAttendToEachOther) {
  // Three sequences of 5, 70 and 1 tokens packed into one batch row; positions restart in each.
  check_forward({1, 76, 76, 2, 1, 64, true, 0, {0, 5, 75, 76}, {0, 5, 75, 76}}, Enc::t5_causal);
  check_forward({1, 76, 76, 2, 2, 40, false, 0, {0, 5, 75, 76}, {0, 5, 75, 76}}, Enc::rope_alibi);
  check_forward({1, 76, 76, 2, 2, 40, true, 0, {0, 5, 75, 76}, {0, 5, 75, 76}}, Enc::shaw);
  check_forward({1, 76, 76, 2, 2, 40, false, 0, {0, 5, 75, 76}, {0, 5, 75, 76}}, Enc::transformer_xl_t5);
  // Decode one token per sequence against caches of 9 and 66 keys.
  check_forward({1, 2, 75, 2, 1, 40, true, 0, {0, 1, 2}, {0, 9, 75}}, Enc::alibi);
}

TEST(Attention, PackedTilesOnEveryTarget) {
  // A decode problem (left out of the packed K^T and value rows) before a chunked prefill of 70 queries
  // against 200 keys: four tiles, the last partial; head dims whose padded rows are 3 and 9 lines.
  for_each_cpu_target([](const std::string& target) {
    check_forward({1, 71, 209, 2, 1, 40, true, 0, {0, 1, 71}, {0, 9, 209}}, Enc::rope_alibi, target);
    check_forward({1, 71, 209, 2, 2, 130, true, 0, {0, 1, 71}, {0, 9, 209}}, Enc::t5, target);
  });
}

TEST(Attention, FullyMaskedRowsGiveZerosAndMinusInfinity) {
  const int64_t K = 10, D = 8;
  std::vector<float> q = random_floats(D, 84), k = random_floats(K * D, 85), v = random_floats(K * D, 86);
  std::vector<int64_t> qp = {100}, kp(K);
  for (int64_t j = 0; j < K; ++j) kp[j] = j;
  AttentionConfig cfg;
  cfg.causal = true;
  cfg.window = 4;  // the query at 100 sees positions 97 .. 100: none exist
  AttentionInputs in =
      qkv(view(q.data(), {1, 1, 1, D}), view(k.data(), {1, K, 1, D}), view(v.data(), {1, K, 1, D}));
  in.q_positions = view(qp.data(), {1});
  in.k_positions = view(kp.data(), {K});
  std::vector<float> out(D, 5.0f), lse(1, 5.0f);
  attention_forward(cfg, in, view(out.data(), {1, 1, 1, D}), view(lse.data(), {1, 1, 1}));
  EXPECT_EQ(out, std::vector<float>(D, 0.0f));
  EXPECT_EQ(lse[0], -INFINITY);
}

TEST(Attention, BadInputIsRejectedAndNothingIsWritten) {
  const int64_t D = 8;
  std::vector<float> q(2 * 4 * D), k(2 * 3 * D), v(2 * 3 * D), out(2 * 4 * D, 7.0f);
  auto expect = [&](const AttentionConfig& cfg, AttentionInputs in, TensorView o, const std::string& needle) {
    try {
      attention_forward(cfg, in, o, TensorView{});
      ADD_FAILURE() << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(out, std::vector<float>(out.size(), 7.0f));
  };
  const AttentionInputs good =
      qkv(view(q.data(), {1, 2, 4, D}), view(k.data(), {1, 2, 3, D}), view(v.data(), {1, 2, 3, D}));
  AttentionConfig cfg;
  expect(cfg, good, view(out.data(), {1, 2, 4, D}), "multiple of the key/value heads");
  AttentionInputs in =
      qkv(view(q.data(), {1, 2, 4, D}), view(k.data(), {1, 3, 2, D}), view(v.data(), {1, 2, 2, D}));
  expect(cfg, in, view(out.data(), {1, 2, 4, D}), "v has shape [1, 2, 2, 8], expected [1, 3, 2, -1]");
  in.v = view(v.data(), {1, 3, 2, D});
  expect(cfg, in, view(out.data(), {1, 2, 4, 4}), "out has shape");
  cfg.window = -1;
  expect(cfg, in, view(out.data(), {1, 2, 4, D}), "window = -1");
  cfg.window = 0;
  cfg.scale = NAN;
  expect(cfg, in, view(out.data(), {1, 2, 4, D}), "scale = nan");
  cfg.scale = 3.4e38;  // finite, but a score of ones times it overflows the softmax's range
  expect(cfg, in, view(out.data(), {1, 2, 4, D}), "scale = 3.4e+38");
  cfg.scale = -2e6;
  expect(cfg, in, view(out.data(), {1, 2, 4, D}), "scale = -2000000");
  cfg.scale.reset();
  cfg.bias.kind = AttentionBias::Kind::alibi;
  cfg.bias.alibi.heads = 3;
  expect(cfg, in, view(out.data(), {1, 2, 4, D}), "bias.alibi.heads = 3");
  cfg.bias = {};
  std::vector<int64_t> cu_q = {0, 1, 3}, cu_k = {0, 3};
  in.cu_seqlens_q = view(cu_q.data(), {3});
  in.cu_seqlens_k = view(cu_k.data(), {2});
  expect(cfg, in, view(out.data(), {1, 2, 4, D}), "cu_seqlens_q ends at 3");
  cu_q = {0, 2};
  in.cu_seqlens_q = view(cu_q.data(), {2});
  in.cu_seqlens_k = {};
  expect(cfg, in, view(out.data(), {1, 2, 4, D}), "need both cu_seqlens_q and cu_seqlens_k");
  RopeConfig rc;
  rc.head_dim = 16;
  const Rope rope(rc);
  in.cu_seqlens_q = {};
  cfg.rope = &rope;
  expect(cfg, in, view(out.data(), {1, 2, 4, D}), "rope.head_dim = 16");
}

}  // namespace
}  // namespace posenc::test
