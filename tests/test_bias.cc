// tests/test_bias.cc: T5 buckets, clipped relative bias, ALiBi: vs references, hand-computed
// values, gradients, thread-count independence and bad input.

#include <cmath>

#include "posenc/bias.h"
#include "posenc/error.h"
#include "posenc/threads.h"
#include "reference/bias.h"
#include "test_util.h"

namespace posenc::test {
namespace {

// Distances are key - query. Values computed by hand from T5's formula: with n = |d| (or -d, causal),
// bucket = n below max_exact, else max_exact + floor(log(n / max_exact) / log(max_distance / max_exact)
// * (num_buckets - max_exact)), clamped; bidirectional adds num_buckets/2 for d > 0.
TEST(T5Bucket, HandComputedValuesForTheDefaults) {
  const std::vector<std::pair<int64_t, int64_t>> bidirectional = {
      {0, 0},    {1, 17},   {7, 23},    {8, 24}, {15, 25}, {16, 26},  {31, 27},  {32, 28},   {64, 30},
      {127, 31}, {128, 31}, {1000, 31}, {-1, 1}, {-8, 8},  {-16, 10}, {-64, 14}, {-1000, 15}};
  for (auto [d, b] : bidirectional) EXPECT_EQ(t5_bucket(d, true, 32, 128), b) << "d = " << d;
  const std::vector<std::pair<int64_t, int64_t>> causal = {
      {0, 0},    {1, 0},    {7, 0},    {8, 0},     {15, 0},    {16, 0},    {31, 0},   {32, 0},
      {64, 0},   {127, 0},  {128, 0},  {1000, 0},  {-1, 1},    {-7, 7},    {-15, 15}, {-16, 16},
      {-31, 21}, {-32, 21}, {-64, 26}, {-127, 31}, {-128, 31}, {-1000, 31}};
  for (auto [d, b] : causal) EXPECT_EQ(t5_bucket(d, false, 32, 128), b) << "d = " << d;
}

// Every bucket is reached except, in bidirectional mode, bucket num_buckets/2: d > 0 means n >= 1,
// so the "later key" half starts at num_buckets/2 + 1 (a quirk of T5's function, kept for parity).
TEST(T5Bucket, MonotoneAndCoversEveryBucketButOne) {
  for (bool bidi : {true, false}) {
    std::vector<int> seen(32, 0);
    int64_t last = -1;
    for (int64_t n = 0; n < 5000; ++n) {
      const int64_t b = t5_bucket(-n, bidi, 32, 128);
      EXPECT_GE(b, last);
      last = b;
      seen[b] = 1;
      if (bidi) seen[t5_bucket(n, bidi, 32, 128)] = 1;
    }
    int covered = 0;
    for (int s : seen) covered += s;
    EXPECT_EQ(covered, bidi ? 31 : 32);
    if (bidi) {
      EXPECT_EQ(seen[16], 0);
    }
  }
}

TEST(RelativeBias, ClippedRows) {
  const RelativeBiasConfig c = RelativeBiasConfig::clipped(1, 3);
  EXPECT_EQ(c.num_rows(), 7);
  EXPECT_EQ(relative_bias_row(c, -100), 0);
  EXPECT_EQ(relative_bias_row(c, -3), 0);
  EXPECT_EQ(relative_bias_row(c, 0), 3);
  EXPECT_EQ(relative_bias_row(c, 2), 5);
  EXPECT_EQ(relative_bias_row(c, 9), 6);
}

struct PositionPattern {
  std::string name;
  std::vector<int64_t> q, k;
};
std::vector<PositionPattern> patterns() {
  std::vector<PositionPattern> p;
  std::vector<int64_t> seq(37);
  for (int i = 0; i < 37; ++i) seq[i] = i;
  p.push_back({"self_attention_37", seq, seq});
  p.push_back({"decode_step_at_1000", {1000}, std::vector<int64_t>(seq.begin(), seq.end())});
  for (auto& k : p.back().k) k += 964;
  p.push_back({"chunked_prefill", {40, 41, 42, 43, 44}, seq});
  p.push_back({"scattered_keys", {3, 10}, {0, 2, 9, 30, 31, 100}});
  p.push_back({"length_1", {5}, {5}});
  p.push_back({"huge_gap_no_lut", {0, 1}, {int64_t{1} << 40, 2, 0}});
  return p;
}

TEST(RelativeBias, ForwardMatchesReferenceForT5AndClipped) {
  for (const RelativeBiasConfig& c :
       {RelativeBiasConfig::t5(3, 32, 128, true), RelativeBiasConfig::t5(2, 16, 32, false),
        RelativeBiasConfig::clipped(4, 5), RelativeBiasConfig::clipped(1, 0)}) {
    const std::vector<float> tab = random_floats(c.num_rows() * c.heads, 31);
    for (const PositionPattern& p : patterns()) {
      SCOPED_TRACE(p.name);
      const int64_t Q = p.q.size(), K = p.k.size();
      std::vector<float> out(c.heads * Q * K, -1.0f);
      relative_bias(c, view(tab.data(), {c.num_rows(), c.heads}), view(p.q.data(), {Q}),
                    view(p.k.data(), {K}), view(out.data(), {c.heads, Q, K}));
      EXPECT_EQ(out, ref::relative_bias(c, tab, p.q, p.k));  // a lookup: exact
    }
  }
}

TEST(RelativeBias, BackwardMatchesFiniteDifferencesAndIsThreadCountIndependent) {
  for (const RelativeBiasConfig& c :
       {RelativeBiasConfig::t5(3, 32, 128, true), RelativeBiasConfig::clipped(2, 4)}) {
    const std::vector<float> tab = random_floats(c.num_rows() * c.heads, 32);
    for (const PositionPattern& p : patterns()) {
      SCOPED_TRACE(p.name);
      const int64_t Q = p.q.size(), K = p.k.size();
      const std::vector<float> w = random_floats(c.heads * Q * K, 33);
      std::vector<float> grad(tab.size(), 0.0f);
      relative_bias_backward(c, view(w.data(), {c.heads, Q, K}), view(p.q.data(), {Q}), view(p.k.data(), {K}),
                             view(grad.data(), {c.num_rows(), c.heads}));
      auto loss = [&](const std::vector<double>& t) {
        return dot(ref::relative_bias(c, t, p.q, p.k), to_double(w));
      };
      const auto coords = sample_coords(tab.size(), 200);
      EXPECT_TRUE(
          all_close(gather(grad, coords), finite_difference(loss, to_double(tab), coords), {1e-6, 1e-6}));
    }
  }
  const RelativeBiasConfig c = RelativeBiasConfig::t5(4);
  const int64_t S = 300;
  std::vector<int64_t> pos(S);
  for (int i = 0; i < S; ++i) pos[i] = i;
  const std::vector<float> w = random_floats(4 * S * S, 34);
  std::vector<float> g1(32 * 4, 0.0f), g2(32 * 4, 0.0f);
  set_num_threads(1);
  relative_bias_backward(c, view(w.data(), {4, S, S}), view(pos.data(), {S}), view(pos.data(), {S}),
                         view(g1.data(), {32, 4}));
  set_num_threads(4);
  relative_bias_backward(c, view(w.data(), {4, S, S}), view(pos.data(), {S}), view(pos.data(), {S}),
                         view(g2.data(), {32, 4}));
  set_num_threads(0);
  EXPECT_EQ(g1, g2);
  EXPECT_TRUE(all_close(g1, ref::relative_bias_backward(c, to_double(w), pos, pos), kF32Reduction));
}

TEST(RelativeBias, BadInputLeavesOutputsUntouched) {
  const RelativeBiasConfig c = RelativeBiasConfig::t5(2);
  std::vector<float> tab(64, 0.5f), out(2 * 2 * 3, 7.0f);
  std::vector<int64_t> q = {0, 1}, k = {0, 1, 2};
  auto expect = [&](auto&& call, const std::string& needle) {
    expect_error(call, needle);
    EXPECT_EQ(out, std::vector<float>(12, 7.0f));
  };
  expect(
      [&] {
        relative_bias(c, view(tab.data(), {16, 4}), view(q.data(), {2}), view(k.data(), {3}),
                      view(out.data(), {2, 2, 3}));
      },
      "table has shape [16, 4], expected [32, 2]");
  expect(
      [&] {
        relative_bias(c, view(tab.data(), {32, 2}), view(q.data(), {2}), view(k.data(), {3}),
                      view(out.data(), {2, 3, 2}));
      },
      "out has shape [2, 3, 2], expected [2, 2, 3]");
  RelativeBiasConfig bad = c;
  bad.max_distance = 8;
  expect(
      [&] {
        relative_bias(bad, view(tab.data(), {32, 2}), view(q.data(), {2}), view(k.data(), {3}),
                      view(out.data(), {2, 2, 3}));
      },
      "max_distance = 8 is invalid");
  bad = c;
  bad.heads = 0;
  expect(
      [&] {
        relative_bias(bad, view(tab.data(), {32, 2}), view(q.data(), {2}), view(k.data(), {3}),
                      view(out.data(), {2, 2, 3}));
      },
      "heads = 0");
  EXPECT_THROW(validate(RelativeBiasConfig::clipped(1, -1)), Error);
}

// ---------------------------------------------------------------- ALiBi
TEST(Alibi, PublishedSlopes) {
  AlibiConfig c;
  c.heads = 8;
  const std::vector<double> s8 = alibi_slopes(c);
  for (int i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(s8[i], std::pow(2.0, -(i + 1)));  // 1/2 ... 1/256
  c.heads = 12;  // BLOOM: 1/2..1/256, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5
  const std::vector<double> s12 = alibi_slopes(c);
  const std::vector<double> expected = {0.5,
                                        0.25,
                                        0.125,
                                        0.0625,
                                        1.0 / 32,
                                        1.0 / 64,
                                        1.0 / 128,
                                        1.0 / 256,
                                        std::pow(2, -0.5),
                                        std::pow(2, -1.5),
                                        std::pow(2, -2.5),
                                        std::pow(2, -3.5)};
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(s12[i], expected[i], 1e-15) << i;
  c.heads = 16;
  const std::vector<double> s16 = alibi_slopes(c);
  EXPECT_DOUBLE_EQ(s16[0], std::pow(2.0, -0.5));
  EXPECT_DOUBLE_EQ(s16[15], 1.0 / 256);
}

TEST(Alibi, MptRuleEqualsBloomAtMaxEightAndDiffersOtherwise) {
  for (int64_t h = 1; h <= 64; ++h) {
    AlibiConfig bloom, mpt;
    bloom.heads = mpt.heads = h;
    mpt.slopes = AlibiSlopes::mpt;
    const auto a = alibi_slopes(bloom), b = alibi_slopes(mpt);
    for (int64_t i = 0; i < h; ++i) EXPECT_NEAR(a[i], b[i], 1e-15) << h << " heads, slope " << i;
  }
  AlibiConfig mpt;
  mpt.heads = 4;
  mpt.slopes = AlibiSlopes::mpt;
  mpt.alibi_bias_max = 16;
  EXPECT_DOUBLE_EQ(alibi_slopes(mpt)[0], 1.0 / 16);
}

TEST(Alibi, BiasMatchesReferenceCausalAndSymmetric) {
  for (bool symmetric : {false, true})
    for (int64_t heads : {1, 6, 8}) {
      AlibiConfig c;
      c.heads = heads;
      c.symmetric = symmetric;
      const auto slopes = alibi_slopes(c);
      for (const PositionPattern& p : patterns()) {
        SCOPED_TRACE(p.name);
        const int64_t Q = p.q.size(), K = p.k.size();
        std::vector<float> out(heads * Q * K);
        alibi_bias(c, view(p.q.data(), {Q}), view(p.k.data(), {K}), view(out.data(), {heads, Q, K}));
        EXPECT_TRUE(all_close(out, ref::alibi<double>(slopes, symmetric, p.q, p.k), {0, 1e-7}));
      }
    }
  // The causal form is -m (i - j): zero on the diagonal, -m per step back (1 head: m = 2^-8).
  AlibiConfig c;
  c.heads = 1;
  std::vector<int64_t> pos = {0, 1, 2};
  std::vector<float> out(9);
  alibi_bias(c, view(pos.data(), {3}), view(pos.data(), {3}), view(out.data(), {1, 3, 3}));
  EXPECT_EQ(out[2 * 3 + 2], 0.0f);
  EXPECT_EQ(out[2 * 3 + 0], -2.0f / 256);
  EXPECT_EQ(out[0 * 3 + 2], 2.0f / 256);  // future keys: positive, removed by the causal mask
}

TEST(Alibi, BadInput) {
  AlibiConfig c;
  c.heads = 0;
  EXPECT_THROW(alibi_slopes(c), Error);
  c.heads = 4;
  c.slopes = AlibiSlopes::mpt;
  c.alibi_bias_max = -1;
  EXPECT_THROW(alibi_slopes(c), Error);
  c.heads = 1;
  c.alibi_bias_max = 1075;  // 2^-1075 underflows to a slope of 0 (found by hypothesis)
  expect_error([&] { alibi_slopes(c); }, "alibi_bias_max");
  c.alibi_bias_max = 126;  // the bound: the smallest slope is a normal float32
  for (double s : alibi_slopes(c)) EXPECT_GT(static_cast<float>(s), 0.0f);
}

}  // namespace
}  // namespace posenc::test
