// tests/test_attention_scores.cc: the score-level mechanisms of today's model families inside the
// fused attention, with any encoding: logit softcapping (Gemma 2), learned sinks (gpt-oss) and
// chunked attention (Llama 4). Forward against the double reference, the reference backward
// against finite differences, the library's backward against the reference backward, every SIMD
// target, the KV cache, fully masked rows and bad input.
#include <cmath>
#include <limits>

#include "attention_gradients.h"
#include "posenc/error.h"
#include "posenc/kv_cache.h"

namespace posenc::test {
namespace {

Case with(Case c, double softcap, bool sinks, int64_t chunk) {
  c.softcap = softcap;
  c.sinks = sinks;
  c.chunk = chunk;
  return c;
}

// The mechanisms alone and together; softcap 2 is small enough to bend most logits (|x| ~ 1-3).
struct Mechanism {
  double softcap;
  bool sinks;
  int64_t chunk;
};
const std::vector<Mechanism>& mechanisms() {
  static const std::vector<Mechanism> all = {{2.0, false, 0}, {0, true, 0}, {0, false, 16}, {2.0, true, 16}};
  return all;
}
const std::vector<Enc>& encodings() {
  static const std::vector<Enc> encs = {Enc::none, Enc::rope_alibi, Enc::t5, Enc::shaw, Enc::transformer_xl};
  return encs;
}

TEST(AttentionScores, ForwardMatchesTheReference) {
  const std::vector<Case> shapes = {
      {1, 70, 70, 2, 1, 40, true},     // prefill across two tiles, GQA
      {2, 3, 67, 2, 2, 24, false},     // bidirectional, queries at the end of the keys
      {1, 1, 130, 4, 1, 64, true},     // decode: key rows, heads of a group in lockstep
      {1, 67, 67, 2, 1, 16, true, 9},  // with a sliding window
      {1, 76, 76, 2, 2, 8, true, 0, {0, 5, 75, 76}, {0, 5, 75, 76}},  // packed sequences
  };
  for (const Case& c : shapes)
    for (const Mechanism& m : mechanisms())
      for (Enc e : encodings()) {
        if (e == Enc::transformer_xl && c.Q * c.K * c.D > 40000) continue;  // keep the XL reference quick
        check_forward(with(c, m.softcap, m.sinks, m.chunk), e);
      }
}

TEST(AttentionScores, EverySimdTarget) {
  for_each_cpu_target([](const std::string& target) {
    for (const Mechanism& m : mechanisms()) {
      check_forward(with({1, 70, 70, 2, 1, 40, true}, m.softcap, m.sinks, m.chunk), Enc::rope_alibi, target);
      check_forward(with({2, 3, 130, 4, 2, 66, true}, m.softcap, m.sinks, m.chunk), Enc::t5, target);
      check_library_against_reference(with({1, 70, 70, 2, 1, 20, true}, m.softcap, m.sinks, m.chunk),
                                      Enc::rope_t5);
    }
  });
}

TEST(AttentionScores, ReferenceBackwardMatchesFiniteDifferences) {
  const std::vector<Case> shapes = {
      {1, 5, 7, 2, 1, 4, true},
      {2, 3, 6, 2, 2, 4, false, 3},
      {1, 6, 6, 2, 1, 4, true, 0, {0, 2, 6}, {0, 2, 6}},
  };
  // Chunks of 2 and 3 cut these short sequences into several chunks.
  for (const Case& c : shapes)
    for (Enc e : encodings()) {
      check_reference_against_finite_differences(with(c, 1.5, false, 0), e);
      check_reference_against_finite_differences(with(c, 0, true, 2), e);
      check_reference_against_finite_differences(with(c, 1.5, true, 3), e);
    }
}

TEST(AttentionScores, LibraryBackwardMatchesTheReferenceBackward) {
  const std::vector<Case> shapes = {
      {1, 70, 70, 2, 1, 24, true},
      {2, 3, 67, 2, 2, 24, false},
      {1, 2, 130, 4, 1, 16, true},
      {1, 67, 67, 2, 2, 16, false, 5},
      {1, 76, 76, 2, 1, 8, true, 0, {0, 5, 75, 76}, {0, 5, 75, 76}},
  };
  for (const Case& c : shapes)
    for (const Mechanism& m : mechanisms())
      for (Enc e : encodings()) {
        if (e == Enc::transformer_xl && c.Q * c.K * c.D > 40000) continue;
        check_library_against_reference(with(c, m.softcap, m.sinks, m.chunk), e);
      }
}

// The query temperature of Llama 4 (NoPE layers), Ministral 3 and Qwen 1 (after RoPE): q scaled per
// position, forward and backward, alone and with the other mechanisms (Qwen's with RoPE, as it is used).
TEST(AttentionScores, QueryTemperature) {
  for (int temperature : {1, 2, 3}) {
    for (Enc e : {Enc::none, Enc::rope, Enc::rope_alibi, Enc::t5, Enc::shaw}) {
      if (temperature == 3 && e != Enc::rope) continue;
      Case c{1, 70, 70, 2, 1, 24, true};
      c.temperature = temperature;
      check_forward(c, e);
      check_library_against_reference(c, e);
      c.chunk = 16, c.sinks = true;
      check_forward(c, e);
      check_library_against_reference(c, e);
      Case small{1, 5, 40, 2, 1, 4, true};  // queries at 35..39: past the first floors
      small.temperature = temperature;
      check_reference_against_finite_differences(small, e);
    }
    Case decode{1, 1, 5000, 4, 1, 16, true};  // a split decode step
    decode.temperature = temperature;
    check_forward(decode, Enc::rope);
  }
}

TEST(AttentionScores, ChunksAreFlooredForNegativePositions) {
  // Keys at -5 .. 4, chunk 4: chunks [-8, -4), [-4, 0), [0, 4), [4, 8) (floor, not truncation).
  const int64_t K = 10, D = 8;
  std::vector<float> q = random_floats(K * D, 11), k = random_floats(K * D, 12), v = random_floats(K * D, 13);
  std::vector<int64_t> pos(K);
  for (int64_t j = 0; j < K; ++j) pos[j] = j - 5;
  AttentionConfig cfg;
  cfg.causal = true;
  cfg.chunk = 4;
  AttentionInputs in =
      qkv(view(q.data(), {1, K, 1, D}), view(k.data(), {1, K, 1, D}), view(v.data(), {1, K, 1, D}));
  in.q_positions = view(pos.data(), {K});
  in.k_positions = view(pos.data(), {K});
  std::vector<float> out(K * D), lse(K);
  attention_forward(cfg, in, view(out.data(), {1, K, 1, D}), view(lse.data(), {1, 1, K}));
  // Position -4 starts its chunk: it sees only itself, so out = v and lse = its own logit.
  const float* q4 = &q[1 * D];
  float dot = 0;
  for (int64_t d = 0; d < D; ++d) dot += q4[d] * k[1 * D + d];
  EXPECT_NEAR(lse[1], dot / std::sqrt(static_cast<float>(D)), 1e-5);
  for (int64_t d = 0; d < D; ++d) EXPECT_NEAR(out[1 * D + d], v[1 * D + d], 1e-6);
}

// Found by fuzz/fuzz_attention.cc (inputs kept in fuzz/corpus/attention/), checked by clang's UBSan
// in the ubsan-clang preset: no key at all with several batch rows and kv heads (no pointer offset
// on the empty views), ALiBi at positions near 2^53 (the lookup's index is formed before the
// pointer), and chunk = INT64_MAX with negative positions (chunk_of without overflow).
TEST(AttentionScores, ExtremeShapesAndPositions) {
  {
    const int64_t B = 2, Q = 3, H = 3, D = 4;
    std::vector<float> q = random_floats(B * Q * H * D, 1), kv, out(B * Q * H * D, 9.0f), lse(B * H * Q);
    AttentionConfig cfg;
    cfg.causal = true;
    const AttentionInputs in =
        qkv(view(q.data(), {B, Q, H, D}), view(kv.data(), {B, 0, H, D}), view(kv.data(), {B, 0, H, D}));
    attention_forward(cfg, in, view(out.data(), {B, Q, H, D}), view(lse.data(), {B, H, Q}));
    EXPECT_EQ(out, std::vector<float>(out.size(), 0.0f));  // fully masked rows
    std::vector<float> gq(q.size(), 0.0f);
    AttentionGrads g;
    g.q = view(gq.data(), {B, Q, H, D});
    g.k = view(kv.data(), {B, 0, H, D});
    g.v = view(kv.data(), {B, 0, H, D});
    attention_backward(cfg, in, view(out.data(), {B, Q, H, D}), view(lse.data(), {B, H, Q}),
                       view(out.data(), {B, Q, H, D}), g);
    EXPECT_EQ(gq, std::vector<float>(gq.size(), 0.0f));
  }
  {  // ALiBi is translation invariant: positions near 2^53 give the outputs of positions near 0.
    const int64_t T = 5, H = 2, D = 8;
    const std::vector<float> q = random_floats(T * H * D, 2), k = random_floats(T * D, 3),
                             v = random_floats(T * D, 4);
    AttentionConfig cfg;
    cfg.causal = true;
    cfg.bias.kind = AttentionBias::Kind::alibi;
    cfg.bias.alibi.heads = H;
    std::vector<int64_t> near0 = {0, 1, 2, 3, 4}, far(T);
    for (int64_t t = 0; t < T; ++t) far[t] = (int64_t{1} << 53) - 8 + t;
    std::vector<float> out0(T * H * D), out1(T * H * D);
    for (auto [pos, out] : {std::pair{&near0, &out0}, std::pair{&far, &out1}}) {
      AttentionInputs in =
          qkv(view(q.data(), {1, T, H, D}), view(k.data(), {1, T, 1, D}), view(v.data(), {1, T, 1, D}));
      in.q_positions = view(pos->data(), {T});
      in.k_positions = view(pos->data(), {T});
      attention_forward(cfg, in, view(out->data(), {1, T, H, D}), TensorView{});
    }
    EXPECT_TRUE(all_close(out1, to_double(out0), kF32Reduction));
  }
  {  // chunk INT64_MAX: negative positions in chunk -1, the others in chunk 0 (as chunk 2^40)
    Case c{1, 6, 3, 2, 1, 8, false};  // default positions -3 .. 2 for the queries: Q > K
    c.chunk = std::numeric_limits<int64_t>::max();
    const AttentionCase ac(c, Enc::none);
    std::vector<float> out(c.Q * c.H * c.D, 9.0f);
    attention_forward(ac.config(), ac.inputs(), view(out.data(), {1, c.Q, c.H, c.D}), TensorView{});
    EXPECT_TRUE(all_close(out, ac.reference(ac.flat()).out, kF32Reduction));  // rows at -3 .. -1: no keys, 0
  }
}

TEST(AttentionScores, SinksAloneInAFullyMaskedRow) {
  // With a sink, a row whose keys are all masked keeps the sink: out = 0, lse = sink, and the
  // sink's gradient from that row is 0 (no value, out = 0).
  const int64_t K = 6, D = 4, H = 2;
  std::vector<float> q = random_floats(H * D, 21), k = random_floats(K * D, 22), v = random_floats(K * D, 23);
  std::vector<float> sinks = {0.5f, -1.25f};
  std::vector<int64_t> qp = {100}, kp = {0, 1, 2, 3, 4, 5};
  AttentionConfig cfg;
  cfg.causal = true;
  cfg.window = 3;
  cfg.sinks = view(sinks.data(), {H});
  AttentionInputs in =
      qkv(view(q.data(), {1, 1, H, D}), view(k.data(), {1, K, 1, D}), view(v.data(), {1, K, 1, D}));
  in.q_positions = view(qp.data(), {1});
  in.k_positions = view(kp.data(), {K});
  std::vector<float> out(H * D, 9.0f), lse(H, 9.0f);
  attention_forward(cfg, in, view(out.data(), {1, 1, H, D}), view(lse.data(), {1, H, 1}));
  EXPECT_EQ(out, std::vector<float>(H * D, 0.0f));
  EXPECT_EQ(lse, sinks);
  std::vector<float> gq(H * D, 0.0f), gk(K * D, 0.0f), gv(K * D, 0.0f), gs(H, 0.0f);
  const std::vector<float> go = random_floats(H * D, 24);
  AttentionGrads g;
  g.q = view(gq.data(), {1, 1, H, D});
  g.k = view(gk.data(), {1, K, 1, D});
  g.v = view(gv.data(), {1, K, 1, D});
  g.sinks = view(gs.data(), {H});
  attention_backward(cfg, in, view(out.data(), {1, 1, H, D}), view(lse.data(), {1, H, 1}),
                     view(go.data(), {1, 1, H, D}), g);
  EXPECT_EQ(gs, std::vector<float>(H, 0.0f));
  EXPECT_EQ(gq, std::vector<float>(H * D, 0.0f));
}

// Appends and attends in chunks; every chunk's output equals the full forward's.
TEST(AttentionScores, KVCacheDecodeEqualsTheFullForward) {
  const int64_t B = 1, T = 37, H = 4, Hkv = 2, D = 16;
  for (const Mechanism& m : mechanisms()) {
    const AttentionCase ac(with({B, T, T, H, Hkv, D, true}, m.softcap, m.sinks, m.chunk == 0 ? 0 : 8),
                           Enc::rope_alibi);
    SCOPED_TRACE(ac.describe());
    const AttentionConfig cfg = ac.config();
    std::vector<float> full(B * T * H * D);
    attention_forward(cfg, ac.inputs(), view(full.data(), {B, T, H, D}), TensorView{});
    KVCache cache(B, Hkv, D, cfg.rope);
    for (int64_t t = 0; t < T; ++t) {
      cache.append(view(ac.part(Params::k).data() + t * Hkv * D, {B, 1, Hkv, D}),
                   view(ac.part(Params::v).data() + t * Hkv * D, {B, 1, Hkv, D}));
      std::vector<float> out(H * D);
      cache.attend(cfg, view(ac.part(Params::q).data() + t * H * D, {B, 1, H, D}),
                   view(out.data(), {B, 1, H, D}));
      const std::vector<float> expected(full.begin() + t * H * D, full.begin() + (t + 1) * H * D);
      EXPECT_TRUE(all_close(out, expected, kF32Reduction)) << "token " << t;
    }
  }
}

TEST(AttentionScores, BadInputIsRejectedAndNothingIsWritten) {
  const int64_t D = 8, H = 2;
  std::vector<float> q(H * 3 * D), k(3 * D), v(3 * D), out(H * 3 * D, 7.0f), sinks = {0.0f, 1.0f, 2.0f};
  const AttentionInputs in =
      qkv(view(q.data(), {1, 3, H, D}), view(k.data(), {1, 3, 1, D}), view(v.data(), {1, 3, 1, D}));
  auto expect = [&](const AttentionConfig& cfg, const std::string& needle) {
    try {
      attention_forward(cfg, in, view(out.data(), {1, 3, H, D}), TensorView{});
      ADD_FAILURE() << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(out, std::vector<float>(out.size(), 7.0f));
  };
  AttentionConfig cfg;
  cfg.chunk = -2;
  expect(cfg, "chunk = -2");
  cfg.chunk = 0;
  cfg.softcap = NAN;
  expect(cfg, "softcap = nan");
  cfg.softcap = -1;
  expect(cfg, "softcap = -1");
  cfg.softcap = 1e-300;  // would become the fp32 0, "no softcap" (found by fuzz/fuzz_attention.cc)
  expect(cfg, "softcap = 1e-300");
  cfg.softcap = 0;
  cfg.sinks = view(sinks.data(), {3});
  expect(cfg, "sinks has shape [3], expected [2]");
  sinks[1] = INFINITY;
  cfg.sinks = view(sinks.data(), {H});
  expect(cfg, "sinks[1] = inf");
  cfg.sinks = {};
  cfg.query_temperature = {QueryTemperature::Kind::llama4, 0.1, 0};
  expect(cfg, "query_temperature.floor_scale = 0");
  cfg.query_temperature = {QueryTemperature::Kind::ministral3, NAN, 8};
  expect(cfg, "query_temperature.scale = nan");
  cfg.query_temperature = {QueryTemperature::Kind::qwen_logn, 0, 1};  // log(1) = 0 as a divisor
  expect(cfg, "query_temperature.floor_scale = 1 is invalid: must be > 1 for qwen_logn");
  cfg.query_temperature = {};
  // A sinks gradient without sinks in the config.
  cfg.sinks = {};
  std::vector<float> gq(q.size()), gk(k.size()), gv(v.size()), gs(H, 3.0f), lse(H * 3);
  AttentionGrads g;
  g.q = view(gq.data(), {1, 3, H, D});
  g.k = view(gk.data(), {1, 3, 1, D});
  g.v = view(gv.data(), {1, 3, 1, D});
  g.sinks = view(gs.data(), {H});
  EXPECT_THROW(attention_backward(cfg, in, view(out.data(), {1, 3, H, D}), view(lse.data(), {1, H, 3}),
                                  view(out.data(), {1, 3, H, D}), g),
               Error);
  EXPECT_EQ(gs, std::vector<float>(H, 3.0f));
}

}  // namespace
}  // namespace posenc::test
