// tests/cuda/test_attention_elements.cc: the GPU attention's per-score logic (src/cuda/attention-inl.cuh) on
// the host, no GPU needed: the learned lookup as the device builds it against the CPU's table rows at every
// distance (far beyond where T5's buckets saturate), Shaw's table rows against the reference's, ALiBi
// within 1.5 fp32 ulp of the CPU's double product, the softcap against the double tanh, the order of terms
// and the mask, NaN for positions beyond 2^53, the end of a row (sinks in the denominator, far above or
// below the logits) against long double, the backward's shortcut for tiles wholly beyond Shaw's max
// distance, and its pair gradients with Shaw's terms summed by distance against the double reference's
// gradients (in fp32, one pair at a time: the tiles' roundings and grouping are the GPU tests' to check);
// Transformer-XL's band and skew against the default positions and the CPU's delta index, and its sinusoids
// against the CPU's double ones.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attention_gradients.h"
#include "posenc/bias.h"
#include "reference/shaw.h"
#include "src/bias_plan.h"
#include "src/cuda/attention-inl.cuh"
#include "src/cuda/attention_backward_sm90_turns.h"
#include "src/cuda/attention_sm90_xl.h"
#include "src/angle.h"
#include "src/cpu/transformer_xl.h"
#include "src/cuda/bias-inl.cuh"
#include "src/transformer_xl_plan.h"
#include "test_util.h"

namespace posenc::test {
namespace {
using cuda::ScoreBias;
using cuda::ScoreTerms;

double ulps(float got, double exact) {
  const float e = static_cast<float>(exact);
  const double ulp = std::nextafter(std::fabs(e), INFINITY) - std::fabs(e);
  return std::fabs(got - exact) / ulp;
}

// The lookup of head h as build_lookup_kernel makes it: table[row(d), h] for d in [-limit, limit].
std::vector<float> lookup_of(const RelativeBiasConfig& c, const std::vector<float>& table, int64_t h,
                             int64_t* limit) {
  std::vector<int32_t> rows;
  cuda::BiasKind kind = cuda::BiasKind::clipped;
  if (c.bucketing == Bucketing::clipped) {
    *limit = c.max_distance;
  } else {
    kind = cuda::BiasKind::row_table;
    rows = detail::saturating_rows(c, limit);
  }
  std::vector<float> out;
  for (int64_t d = -*limit; d <= *limit; ++d)
    out.push_back(table[cuda::bias_row(kind, *limit, rows.data(), d) * c.heads + h]);
  return out;
}

TEST(AttentionElements, LearnedLookupEqualsTheCpuRowsAtEveryDistance) {
  const int64_t H = 3;
  for (const RelativeBiasConfig& c : {RelativeBiasConfig::t5(H), RelativeBiasConfig::t5(H, 32, 128, false),
                                      RelativeBiasConfig::t5(H, 16, 40), RelativeBiasConfig::t5(H, 320, 800),
                                      RelativeBiasConfig::clipped(H, 5), RelativeBiasConfig::clipped(H, 1)}) {
    const std::vector<float> table = random_floats(c.num_rows() * H, 5, -2, 2);
    for (int64_t h = 0; h < H; ++h) {
      int64_t limit = 0;
      const std::vector<float> lookup = lookup_of(c, table, h, &limit);
      ScoreTerms t;
      t.bias = ScoreBias::lookup;
      t.limit = static_cast<int32_t>(limit);
      for (int64_t d = -5000; d <= 5000; ++d)
        ASSERT_EQ(cuda::position_bias(t, d, lookup.data()), table[relative_bias_row(c, d) * H + h])
            << "num_buckets " << c.num_buckets << " max_distance " << c.max_distance << " d " << d;
      for (int64_t d : {int64_t{1} << 40, -(int64_t{1} << 52)})
        ASSERT_EQ(cuda::position_bias(t, d, lookup.data()), table[relative_bias_row(c, d) * H + h]);
    }
  }
}

TEST(AttentionElements, ShawRowsAsTheReference) {
  for (const int32_t L : {0, 1, 6, 128})
    for (const int64_t qp : {int64_t{0}, int64_t{37}, int64_t{1} << 53, -(int64_t{1} << 53)})
      for (int64_t d = -300; d <= 300; ++d)
        ASSERT_EQ(cuda::shaw_row(d, L), ref::shaw_row(L, qp, qp + d)) << "L " << L << " d " << d;
  EXPECT_EQ(cuda::shaw_row(int64_t{1} << 54, 128), 256);
  EXPECT_EQ(cuda::shaw_row(-(int64_t{1} << 54), 128), 0);
}

// The backward's shortcut for a tile whose pairs all take one clipped row: it answers 0 or 2 L exactly when
// every pair of the tile (each key position against each query position) has that row, and -1 otherwise.
TEST(AttentionElements, ShawClippedTileRowIsExact) {
  int shortcuts = 0;
  for (const int32_t L : {1, 2, 5})
    for (int64_t klo = -9; klo <= 9; ++klo)
      for (int64_t khi = klo; khi <= 9; ++khi)
        for (int64_t qlo = -9; qlo <= 9; ++qlo)
          for (int64_t qhi = qlo; qhi <= 9; ++qhi) {
            bool all_first = true, all_last = true;
            for (int64_t k = klo; k <= khi; ++k)
              for (int64_t q = qlo; q <= qhi; ++q) {
                const int r = ref::shaw_row(L, q, k);
                all_first = all_first && r == 0, all_last = all_last && r == 2 * L;
              }
            const int want = all_first ? 0 : all_last ? 2 * L : -1;
            ASSERT_EQ(cuda::shaw_clipped_tile_row(klo, khi, qlo, qhi, L), want)
                << "L " << L << " keys " << klo << ".." << khi << " queries " << qlo << ".." << qhi;
            shortcuts += want >= 0;
          }
  EXPECT_GT(shortcuts, 1000);  // both sides of the diagonal are met, not only the general case
}

TEST(AttentionElements, AlibiWithinOneAndAHalfUlpOfTheDoubleProduct) {
  for (bool symmetric : {false, true}) {
    const std::vector<double> slopes = alibi_slopes({.heads = 12, .symmetric = symmetric});
    for (double slope : slopes) {
      ScoreTerms t;
      t.bias = ScoreBias::alibi;
      t.slope = static_cast<float>(slope);
      t.symmetric = symmetric;
      for (int64_t d : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{-37}, int64_t{4095}, int64_t{-100000},
                        int64_t{(1 << 24) - 1}}) {
        const double exact = symmetric ? -slope * std::fabs(static_cast<double>(d)) : slope * d;
        const float got = cuda::position_bias(t, d, nullptr);
        if (exact == 0) {
          EXPECT_EQ(got, 0.0f);
        } else {
          EXPECT_LE(ulps(got, exact), 1.5) << "slope " << slope << " d " << d;
        }
      }
    }
  }
}

// Three fp32 roundings and tanhf: x / cap (0.5 ulp, carried through tanh with a derivative <= 1), tanhf (2
// ulp: the CUDA Math API's documented bound; glibc's is lower), the product (0.5 ulp): within 3.5 ulps.
TEST(AttentionElements, SoftcapWithinThreeAndAHalfUlpsOfTheDoubleTanh) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> x(-300, 300);
  for (float cap : {1.0f, 30.0f, 50.0f})
    for (int i = 0; i < 20000; ++i) {
      const float v = x(rng);
      const double exact = cap * std::tanh(static_cast<double>(v) / cap);
      ASSERT_LE(ulps(cuda::capped_logit(v, cap), exact), 3.5) << "x " << v << " cap " << cap;
    }
  EXPECT_EQ(cuda::capped_logit(123.5f, 0.0f), 123.5f);
}

TEST(AttentionElements, LogitIsCappedThenBiasedThenMasked) {
  ScoreTerms t;
  t.softcap = 5;
  t.bias = ScoreBias::alibi;
  t.slope = 0.25f;
  const detail::AttentionMask causal{true, 0, 0};
  const float scale = 0.125f, dot = 100.0f;
  // Key 3 before query 10: cap(12.5) + 0.25 (3 - 10).
  EXPECT_EQ(cuda::attention_logit(t, causal, scale, dot, 10, 3, nullptr),
            cuda::capped_logit(12.5f, 5) + 0.25f * -7.0f);
  EXPECT_EQ(cuda::attention_logit(t, causal, scale, dot, 10, 11, nullptr), -INFINITY);  // a future key
  const detail::AttentionMask window{false, 4, 0}, chunks{false, 0, 8};
  EXPECT_EQ(cuda::attention_logit(t, window, scale, dot, 10, 6, nullptr), -INFINITY);
  EXPECT_NE(cuda::attention_logit(t, window, scale, dot, 10, 7, nullptr), -INFINITY);
  EXPECT_EQ(cuda::attention_logit(t, chunks, scale, dot, 8, 7, nullptr), -INFINITY);
  EXPECT_NE(cuda::attention_logit(t, chunks, scale, dot, 8, 15, nullptr), -INFINITY);
  // Positions with no exact distance: NaN, masked or not.
  const int64_t far = (int64_t{1} << 53) + 1;
  EXPECT_TRUE(std::isnan(cuda::attention_logit(t, causal, scale, dot, far, 0, nullptr)));
  EXPECT_TRUE(std::isnan(cuda::attention_logit(t, causal, scale, dot, 0, -far, nullptr)));
}

// The row end against long double: logits x_j (natural units) and a sink s. The kernel's weight of value j is
// 2^(x_j log2 e - m) out_factor; exactly, e^x_j / (sum_j e^x_j + e^s). Weights below fp32's normal range may
// flush to 0 (their values' share of the output is below every rounding of it).
void expect_row_end(const std::vector<double>& logits, bool has_sink, double sink) {
  const double m = *std::max_element(logits.begin(), logits.end());
  const float m2 = static_cast<float>(m * 1.4426950408889634);
  float l = 0;  // as the kernel sums: 2^(logit log2 e - m2)
  for (double x : logits) l += std::exp2(static_cast<float>(x * 1.4426950408889634) - m2);
  const cuda::RowEnd end = cuda::finish_row(m2, l, has_sink, static_cast<float>(sink));
  long double denom = has_sink ? std::exp(static_cast<long double>(sink)) : 0.0L;
  for (double x : logits) denom += std::exp(static_cast<long double>(x));
  const long double lse = std::log(denom);
  for (double x : logits) {
    const double weight = std::exp2(static_cast<float>(x * 1.4426950408889634) - m2) * end.out_factor;
    const double exact = static_cast<double>(std::exp(static_cast<long double>(x)) / denom);
    EXPECT_NEAR(weight, exact, 4e-6 * exact + 1e-37) << "x " << x << " m " << m << " sink " << sink;
  }
  EXPECT_NEAR(end.lse, static_cast<double>(lse), 4e-6 * (1 + std::fabs(static_cast<double>(lse))));
}

// A tile the sm_90a kernel gives one bias (whole_tile_kind: the lookup's first or last entry) has that bias
// at every pair of it, for tiles on either side of the clamped distances and straddling them; ALiBi's and no
// bias's tiles are never given one.
TEST(AttentionElements, WholeTileBiasIsEveryPairsBias) {
  std::vector<float> lookup(2 * 20 + 1);
  for (size_t i = 0; i < lookup.size(); ++i) lookup[i] = 0.25f * static_cast<float>(i) - 3.0f;
  ScoreTerms t;
  t.bias = ScoreBias::lookup, t.limit = 20;
  int constant = 0;
  for (int64_t q0 = -300; q0 <= 300; q0 += 37)
    for (int64_t k0 = -300; k0 <= 300; k0 += 41) {
      const int64_t q1 = q0 + 16, k1 = k0 + 24;  // the tile's query and key position ranges
      const int kind = cuda::whole_tile_kind(t, k0 - q1, k1 - q0);
      if (kind != cuda::kWholeTileFirstEntry && kind != cuda::kWholeTileLastEntry) {
        ASSERT_EQ(kind, cuda::kWholeTile);
        continue;
      }
      ++constant;
      const float value = lookup[kind == cuda::kWholeTileFirstEntry ? 0 : 2 * t.limit];
      for (int64_t q = q0; q <= q1; ++q)
        for (int64_t k = k0; k <= k1; ++k) ASSERT_EQ(cuda::position_bias(t, k - q, lookup.data()), value);
    }
  EXPECT_GT(constant, 100);
  ScoreTerms alibi;
  alibi.bias = ScoreBias::alibi, alibi.slope = 0.5f, alibi.limit = 20;
  EXPECT_EQ(cuda::whole_tile_kind(alibi, -1000, -900), cuda::kWholeTile);
  EXPECT_EQ(cuda::whole_tile_kind(ScoreTerms{}, -1000, -900), cuda::kWholeTileNoBias);
}

TEST(AttentionElements, RowEndWithAndWithoutSinks) {
  const std::vector<double> logits = {0.5, -3, 2.25, 1};
  expect_row_end(logits, false, 0);
  expect_row_end(logits, true, 0.7);
  expect_row_end(logits, true, 80);    // the sink dominates: no overflow of 2^(s - m)
  expect_row_end(logits, true, -300);  // a sink far below
  const std::vector<double> far_below = {-200, -201.5};
  expect_row_end(far_below, true, 60);
  // Nothing visible: out 0 and lse -inf, or the sink alone.
  cuda::RowEnd none = cuda::finish_row(-INFINITY, 0, false, 0);
  EXPECT_EQ(none.out_factor, 0.0f);
  EXPECT_EQ(none.lse, -INFINITY);
  none = cuda::finish_row(-INFINITY, 0, true, 1.5f);
  EXPECT_EQ(none.out_factor, 0.0f);
  EXPECT_EQ(none.lse, 1.5f);
  // A NaN logit in the row (fmax dropped it from the max, not from the sum): NaN out and lse, with or
  // without a sink, whatever the max.
  for (float m : {-INFINITY, 3.0f})
    for (bool sink : {false, true}) {
      const cuda::RowEnd bad = cuda::finish_row(m, NAN, sink, 1.5f);
      EXPECT_TRUE(std::isnan(bad.out_factor) && std::isnan(bad.lse)) << m << " " << sink;
    }
}

// Split-K: a row's keys in parts (some empty, as a split past the keys the mask shows), each kept as the
// kernel keeps it, merged: the output and lse of the whole row within fp32 rounding of long double.
TEST(AttentionElements, SplitKPartialRowsMergeToTheWholeRow) {
  std::mt19937 rng(11);
  std::normal_distribution<double> logit(0, 3), value(0, 1);
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 1 + trial * 7, splits = 1 + trial % 9;
    std::vector<double> x(n), v(n);
    for (int j = 0; j < n; ++j) x[j] = logit(rng), v[j] = value(rng);
    std::vector<cuda::MaxSum> max_sum(splits);
    std::vector<float> out(splits);
    const int per = (n + splits - 1) / splits;
    for (int s = 0; s < splits; ++s) {
      float m = -INFINITY, l = 0, o = 0;
      for (int j = s * per; j < std::min(n, (s + 1) * per); ++j)
        m = std::max(m, static_cast<float>(x[j] * 1.4426950408889634));
      for (int j = s * per; j < std::min(n, (s + 1) * per); ++j) {
        const float p = std::exp2(static_cast<float>(x[j] * 1.4426950408889634) - m);
        l += p, o += p * static_cast<float>(v[j]);
      }
      max_sum[s] = {m, l}, out[s] = o;
    }
    float m = 0, l = 0, o = 0;
    cuda::merge_partial_rows({max_sum.data(), out.data(), 1, splits}, &m, &l, &o);
    const cuda::RowEnd end = cuda::finish_row(m, l, false, 0);
    long double denom = 0, num = 0;
    for (int j = 0; j < n; ++j)
      denom += std::exp(static_cast<long double>(x[j])),
          num += std::exp(static_cast<long double>(x[j])) * v[j];
    EXPECT_NEAR(o * end.out_factor, static_cast<double>(num / denom), 1e-5)
        << "n " << n << " splits " << splits;
    EXPECT_NEAR(end.lse, static_cast<double>(std::log(denom)),
                1e-5 * (1 + std::fabs(static_cast<double>(std::log(denom)))));
  }
  // Every split empty: nothing visible. One split NaN: NaN.
  std::vector<cuda::MaxSum> empty = {{-INFINITY, 0}, {-INFINITY, 0}};
  std::vector<float> zeros = {0, 0};
  float m = 0, l = 0, o = 0;
  cuda::merge_partial_rows({empty.data(), zeros.data(), 1, 2}, &m, &l, &o);
  EXPECT_EQ(m, -INFINITY);
  EXPECT_EQ(cuda::finish_row(m, l, false, 0).lse, -INFINITY);
  empty[1] = {2.0f, NAN};
  cuda::merge_partial_rows({empty.data(), zeros.data(), 1, 2}, &m, &l, &o);
  EXPECT_TRUE(std::isnan(cuda::finish_row(m, l, false, 0).lse));
}

// Shaw's backward as the GPU computes it (src/cuda/attention_backward_shaw.cu), element by element in fp32 on
// the host: the rows' products q_i . a^K_r and dO_i . a^V_r, each pair's pair_gradient with them added to the
// dot product and to dP, dK and dV from the pairs, and per row the bins G_ir (dS) and W_ir (P) over the
// distances r = shaw_row(k_pos - q_pos): dQ_i += sum_r G_ir a^K_r, d a^K_r = sum_i G_ir q_i, d a^V_r =
// sum_i W_ir dO_i. Against the double reference's gradients (reference/attention_backward.h, itself checked
// against finite differences in test_attention_reference_backward.cc): fp32 sums of at most a few hundred
// O(1) terms, within 1e-5 of each part's largest gradient plus 1e-4 relative.
std::vector<double> emulated_shaw_gradients(const AttentionCase& ac, const std::vector<float>& grad_out) {
  const Case& c = ac.shape();
  const int64_t D = c.D, R = 2 * c.shaw_max_distance + 1, group = c.H / c.Hkv;
  const std::vector<float>&q = ac.part(Params::q), &k = ac.part(Params::k), &v = ac.part(Params::v);
  const std::vector<float>&a_k = ac.part(Params::a_k), &a_v = ac.part(Params::a_v);
  const ref::AttentionResult<double> fwd = ac.reference(ac.flat());
  const auto dot = [D](const float* x, const float* y) {
    float s = 0;
    for (int64_t d = 0; d < D; ++d) s += x[d] * y[d];
    return s;
  };
  cuda::ScoreTerms terms;
  terms.softcap = static_cast<float>(c.softcap);
  const detail::AttentionMask mask{c.causal, c.window, c.chunk};
  const float scale = static_cast<float>(1 / std::sqrt(static_cast<double>(D)));
  std::vector<double> dq(q.size()), dk(k.size()), dv(v.size()), da_k(a_k.size()), da_v(a_v.size());
  std::vector<float> qa(R), doa(R), G(R), W(R);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t i = 0; i < c.Q; ++i) {
        const int64_t row = (b * c.Q + i) * c.H + h, hk = h / group;
        const float* qi = q.data() + row * D;
        const float* doi = grad_out.data() + row * D;
        std::vector<float> out_i(fwd.out.begin() + row * D, fwd.out.begin() + (row + 1) * D);
        const float delta = dot(doi, out_i.data());
        const float lse2 = static_cast<float>(fwd.lse[(b * c.H + h) * c.Q + i]) * 1.4426950408889634f;
        for (int64_t r = 0; r < R; ++r) {
          qa[r] = dot(qi, a_k.data() + r * D);
          doa[r] = a_v.empty() ? 0.0f : dot(doi, a_v.data() + r * D);
        }
        std::fill(G.begin(), G.end(), 0.0f), std::fill(W.begin(), W.end(), 0.0f);
        std::vector<float> dq_i(D, 0.0f);
        const int64_t qp = ac.q_pos()[b * c.Q + i];
        for (int64_t j = 0; j < c.K; ++j) {
          const int64_t kv = (b * c.K + j) * c.Hkv + hk, kp = ac.k_pos()[b * c.K + j];
          const int r = cuda::shaw_row(kp - qp, static_cast<int32_t>(c.shaw_max_distance));
          const cuda::PairGradient g =
              cuda::pair_gradient(terms, mask, scale, dot(qi, k.data() + kv * D) + qa[r],
                                  dot(doi, v.data() + kv * D) + doa[r], qp, kp, nullptr, lse2, delta);
          for (int64_t d = 0; d < D; ++d) {
            dq_i[d] += g.grad * k[kv * D + d];
            dk[kv * D + d] += g.grad * qi[d];
            dv[kv * D + d] += g.prob * doi[d];
          }
          G[r] += g.grad, W[r] += g.prob;
        }
        for (int64_t r = 0; r < R; ++r)
          for (int64_t d = 0; d < D; ++d) {
            dq_i[d] += G[r] * a_k[r * D + d];
            da_k[r * D + d] += G[r] * qi[d];
            if (!a_v.empty()) da_v[r * D + d] += W[r] * doi[d];
          }
        std::copy(dq_i.begin(), dq_i.end(), dq.begin() + row * D);
      }
  std::vector<double> flat;
  for (int p = 0; p < Params::count; ++p) {
    const std::vector<double>* part = p == Params::q     ? &dq
                                      : p == Params::k   ? &dk
                                      : p == Params::v   ? &dv
                                      : p == Params::a_k ? &da_k
                                      : p == Params::a_v ? &da_v
                                                         : nullptr;
    if (part != nullptr) flat.insert(flat.end(), part->begin(), part->end());
  }
  return flat;
}

TEST(AttentionElements, ShawBackwardBinnedByDistanceMatchesTheReference) {
  Case capped{2, 7, 9, 4, 2, 8, true};
  capped.softcap = 3;
  Case windowed{1, 20, 20, 2, 1, 16, false, 6};
  windowed.shaw_max_distance = 3;
  Case wide{1, 5, 40, 2, 2, 8, false};  // distances beyond L on both sides: the clipped bins
  wide.shaw_max_distance = 2;
  for (const Case& c : {Case{1, 9, 13, 2, 1, 8, false}, capped, windowed, wide})
    for (Enc e : {Enc::shaw, Enc::shaw_keys}) {
      const AttentionCase ac(c, e);
      SCOPED_TRACE(ac.describe());
      const std::vector<float> w = random_floats(c.B * c.Q * c.H * c.D, 93);
      const std::vector<double> want = reference_gradients(ac, ac.flat(), to_double(w));
      const std::vector<double> got = emulated_shaw_gradients(ac, w);
      for (const Params::Part p : {Params::q, Params::k, Params::v, Params::a_k, Params::a_v}) {
        const size_t o = ac.offset(p), n = ac.part(p).size();
        if (n == 0) continue;
        double largest = 0;
        for (size_t i = o; i < o + n; ++i) largest = std::max(largest, std::fabs(want[i]));
        ASSERT_GT(largest, 1e-3) << "part " << p;  // a gradient to compare, not zeros
        for (size_t i = o; i < o + n; ++i)
          ASSERT_LE(std::fabs(got[i] - want[i]), 1e-5 * largest + 1e-4 * std::fabs(want[i]))
              << "part " << p << " element " << i - o;
      }
    }
}

// Transformer-XL's tiles with default positions: for every (64, 64) tile of sequences of nq queries and nk
// keys (batch rows, and packed sequences shorter than the batch's Q and K), each pair's delta is the band's
// first delta plus its skewed column, the column lies in the band's 127, a full tile's band starts where the
// CPU's delta span of the tile does (src/cpu/attention_tile-inl.h TileDeltaSpan, through the CPU's
// DeltaIndex), the next key tile's band is this one's moved by 64 (the kernel copies this band's first half
// to the next one's second), and every visible pair's delta has a row in the table xl_delta_range gives for
// the batch's Q and K.
TEST(AttentionElements, TransformerXLBandAndSkewForDefaultPositions) {
  constexpr int BM = 64, BN = 64;
  struct Shape {
    int64_t Q, K;                                        // the batch's (packed: the totals)
    std::vector<std::pair<int64_t, int64_t>> sequences;  // (nq, nk) each
  };
  const std::vector<Shape> shapes = {{1, 1, {{1, 1}}},
                                     {70, 70, {{70, 70}}},
                                     {3, 200, {{3, 200}}},
                                     {130, 129, {{130, 129}}},
                                     {200, 64, {{200, 64}}},
                                     {120, 150, {{50, 60}, {0, 10}, {70, 80}}},
                                     {5, 2000, {{1, 1700}, {4, 300}}}};
  for (const Shape& shape : shapes)
    for (const detail::AttentionMask mask :
         {detail::AttentionMask{false, 0, 0}, detail::AttentionMask{true, 0, 0},
          detail::AttentionMask{true, 50, 0}, detail::AttentionMask{false, 20, 0},
          detail::AttentionMask{true, 0, 16}}) {
      const cuda::DeltaRange range = cuda::xl_delta_range(shape.Q, shape.K, mask.causal, mask.window);
      for (const auto& [nq, nk] : shape.sequences) {
        std::vector<int64_t> q_pos(nq), k_pos(nk);  // as the CPU's plan and the device's defaults
        for (int64_t i = 0; i < nq; ++i) q_pos[i] = nk - nq + i;
        for (int64_t j = 0; j < nk; ++j) k_pos[j] = j;
        if (nq == 0 || nk == 0) continue;
        const detail::DeltaIndex index(q_pos, k_pos);
        ASSERT_TRUE(index.dense);
        for (int64_t row0 = 0; row0 < nq; row0 += BM)
          for (int64_t col0 = 0; col0 < nk; col0 += BN) {
            const int64_t first = cuda::xl_band_first_delta(q_pos[row0], k_pos[col0], BN);
            const int rows = static_cast<int>(std::min<int64_t>(BM, nq - row0)),
                      cols = static_cast<int>(std::min<int64_t>(BN, nk - col0));
            if (rows == BM && cols == BN) {  // the CPU's span of a full tile starts at qmin - kmax
              ASSERT_EQ(index(q_pos[row0] - k_pos[col0 + BN - 1]), index(first));
            }
            if (col0 + BN < nk) {  // the next tile's last BN band columns are this tile's first BN
              ASSERT_EQ(cuda::xl_band_first_delta(q_pos[row0], k_pos[col0 + BN], BN) + BN, first);
            }
            for (int r = 0; r < rows; ++r)
              for (int c = 0; c < cols; ++c) {
                const int column = cuda::xl_band_column(r, c, BN);
                const int64_t delta = q_pos[row0 + r] - k_pos[col0 + c];
                ASSERT_GE(column, 0);
                ASSERT_LE(column, BM + BN - 2);
                ASSERT_EQ(delta, first + column) << "nq " << nq << " nk " << nk << " r " << r << " c " << c;
                ASSERT_EQ(index(delta) - index(first), column);
                if (mask.masked(q_pos[row0 + r], k_pos[col0 + c])) continue;
                ASSERT_GE(delta, range.lo) << "Q " << shape.Q << " K " << shape.K << " delta " << delta;
                ASSERT_LT(delta, range.lo + range.n) << "Q " << shape.Q << " K " << shape.K;
              }
          }
      }
    }
  // Causal with more queries than keys: the negative deltas are all masked, the table starts at 0.
  EXPECT_EQ(cuda::xl_delta_range(200, 64, true, 0).lo, 0);
  EXPECT_EQ(cuda::xl_delta_range(200, 64, true, 0).n, 64);
  EXPECT_EQ(cuda::xl_delta_range(3, 200, false, 0).lo, -2);
  EXPECT_EQ(cuda::xl_delta_range(3, 200, false, 0).n, 202);
  EXPECT_EQ(cuda::xl_delta_range(100, 100, false, 20).n, 39);
}

// The backward's deltas pass: for 64 rows at consecutive positions and a block's 64 deltas, every pair at
// one of those deltas whose key exists (0 <= key < nk) is met exactly once, in the tile and at the delta
// column xl_chunk_first_key and xl_chunk_column give, and no pair of the two tiles at another delta is given
// a column in [0, 64).
TEST(AttentionElements, TransformerXLDeltasPassMeetsEveryPairOnce) {
  for (const int64_t qp0 : {int64_t{-130}, int64_t{0}, int64_t{5}, int64_t{64}, int64_t{1000}})
    for (const int64_t d0 :
         {int64_t{-200}, int64_t{-64}, int64_t{-1}, int64_t{0}, int64_t{37}, int64_t{128}}) {
      const int64_t first = cuda::xl_chunk_first_key(qp0, d0);
      std::vector<int> met(64 * 64, 0);  // (row, delta column)
      for (int t = 0; t < 2; ++t)
        for (int r = 0; r < 64; ++r)
          for (int c = 0; c < 64; ++c) {
            const int64_t key = first + 64 * t + c, delta = qp0 + r - key;
            const int column = cuda::xl_chunk_column(r, c, t);
            ASSERT_EQ(column, delta - d0) << "qp0 " << qp0 << " d0 " << d0 << " t " << t;
            if (column >= 0 && column < 64) ++met[r * 64 + column];
          }
      for (int r = 0; r < 64; ++r)
        for (int column = 0; column < 64; ++column)
          ASSERT_EQ(met[r * 64 + column], 1) << "qp0 " << qp0 << " d0 " << d0 << " r " << r;
    }
}

// The sinusoids R_delta the device tabulates (angle delta w_e formed in double, sin and cos rounded once,
// src/angle.h) within one fp32 ulp of the CPU's double ones, at small and large distances.
TEST(AttentionElements, TransformerXLSinusoidsAsTheCpu) {
  for (const int64_t d_model : {int64_t{12}, int64_t{64}, int64_t{1024}})
    for (const double base : {100.0, 10000.0}) {
      std::vector<int64_t> deltas;
      for (int64_t d = -300; d <= 300; d += 7) deltas.push_back(d);
      for (int64_t d : {int64_t{1} << 20, -(int64_t{1} << 31), (int64_t{1} << 31) - 1}) deltas.push_back(d);
      const std::vector<double> r = cpu::transformer_xl_sinusoids(deltas, d_model, base);
      const int64_t half = d_model / 2;
      for (size_t m = 0; m < deltas.size(); ++m)
        for (int64_t e = 0; e < half; ++e) {
          // the device's arithmetic (src/cuda/attention_xl.cu xl_sinusoid_kernel)
          const double w = std::pow(base, -2.0 * static_cast<double>(e) / static_cast<double>(d_model));
          float s, c;
          detail::sin_cos_of_angle(static_cast<double>(deltas[m]) * w, &s, &c);
          ASSERT_LE(ulps(s, r[m * d_model + e]), 1.0) << "delta " << deltas[m] << " e " << e;
          ASSERT_LE(ulps(c, r[m * d_model + half + e]), 1.0) << "delta " << deltas[m] << " e " << e;
        }
    }
}

// The sm_90a backward's walk (src/cuda/attention_backward_sm90_turns.h) against every pair, for masks of
// every kind (causal, bidirectional and causal windows, chunks, both) and shapes with partial tiles, decoding
// rows and rows before the first key: a tile the view calls hidden has no visible pair and one it calls
// whole no masked one (Mask32's 32-bit chunks as the 64-bit mask); a row tile's visible blocks are
// consecutive in block order (the premise of sm90_turn_of's bisection), and its turn at each is the number
// of blocks before it that see the tile. The turns' counters and the table's slots of packed sequences
// (empty ones, partial tiles) are distinct and within their counts.
TEST(AttentionElements, Sm90BackwardTurnsAgainstEveryPair) {
  const auto mask = [](bool causal, int64_t window, int64_t chunk) {
    detail::AttentionMask m;
    m.causal = causal, m.window = window, m.chunk = chunk;
    return m;
  };
  const detail::AttentionMask masks[] = {mask(false, 0, 0),   mask(true, 0, 0),  mask(true, 100, 0),
                                         mask(false, 70, 0),  mask(true, 0, 48), mask(false, 0, 200),
                                         mask(true, 300, 256)};
  const std::pair<int64_t, int64_t> shapes[] = {{70, 70}, {300, 650}, {129, 1000}, {24, 500},
                                                {1, 300}, {200, 50},  {640, 640},  {65, 129}};
  for (const detail::AttentionMask& m64 : masks)
    for (const auto& [nq, nk] : shapes) {
      SCOPED_TRACE("causal " + std::to_string(m64.causal) + " window " + std::to_string(m64.window) +
                   " chunk " + std::to_string(m64.chunk) + " nq " + std::to_string(nq) + " nk " +
                   std::to_string(nk));
      const cuda::Mask32 m32(m64);
      const int64_t row_tiles = (nq + 63) / 64, key_tiles = (nk + 127) / 128;
      for (int64_t m = 0; m < row_tiles; ++m) {
        std::vector<bool> seen(static_cast<size_t>(key_tiles));
        for (int64_t x = 0; x < key_tiles; ++x) {
          const int64_t n = cuda::sm90_key_tile_of(m64.causal, x, key_tiles);
          const cuda::TileView view = cuda::sm90_tile_view(m32, nq, nk, m, n);
          bool any = false, all = true;
          for (int64_t i = m * 64; i < std::min(nq, m * 64 + 64); ++i)
            for (int64_t j = n * 128; j < std::min(nk, n * 128 + 128); ++j) {
              const int64_t q = nk - nq + i;
              ASSERT_EQ(m32.masked(q, j), m64.masked(q, j)) << "q " << q << " k " << j;
              any |= !m64.masked(q, j), all &= !m64.masked(q, j);
            }
          ASSERT_TRUE(view.any || !any) << "row tile " << m << " key tile " << n << " skipped";
          ASSERT_TRUE(!view.all || all) << "row tile " << m << " key tile " << n << " called whole";
          seen[static_cast<size_t>(x)] = view.any;
        }
        int64_t before = 0;
        for (int64_t x = 0; x < key_tiles; ++x) {
          if (!seen[static_cast<size_t>(x)]) continue;
          ASSERT_TRUE(before == 0 || seen[static_cast<size_t>(x - 1)]) << "row tile " << m << " block " << x;
          ASSERT_EQ(cuda::sm90_turn_of(m32, m64.causal, nq, nk, m, x, key_tiles), before)
              << "row tile " << m << " block " << x;
          ++before;
        }
      }
    }
  const std::vector<int64_t> lengths = {0, 1, 63, 64, 65, 130, 0, 200, 127, 128, 129};
  int64_t total = 0;
  for (int64_t n : lengths) total += n;
  const int64_t problems = static_cast<int64_t>(lengths.size());
  std::set<int64_t> counters, slots;
  int64_t offset = 0;
  for (int64_t z = 0; z < problems; ++z) {
    for (int64_t t = 0; t * 64 < lengths[z]; ++t) {
      const int64_t c = cuda::sm90_turn_index(true, offset, z, t, (total + 63) / 64);
      ASSERT_TRUE(counters.insert(c).second) << "sequence " << z << " row tile " << t;
      ASSERT_LT(c, (total + 63) / 64 + problems + 1);
    }
    for (int64_t x = 0; x * 128 < lengths[z]; ++x) {
      const int64_t slot = cuda::sm90_table_slot(true, offset, z, x, (total + 127) / 128);
      ASSERT_TRUE(slots.insert(slot).second) << "sequence " << z << " key tile " << x;
      ASSERT_LT(slot, (total + 127) / 128 + problems);
    }
    offset += lengths[z];
  }
}

// Transformer-XL's band on the sm_90a forward (src/cuda/attention_sm90_xl.h), step by step as its producer
// and consumers walk it: runs of consecutive key tiles, after gaps too. At every key tile, each warpgroup's
// band holds, at each pair's column, the table row of that pair's delta: warpgroup 0 forms its chunk from the
// step's rows, warpgroup 1 from the step before's, and the two steps before a run bring the older chunks.
// The chunks' stores and the pairs' reads each meet 32 banks per warp, in either half.
TEST(AttentionElements, Sm90TransformerXLBandAgainstEveryPair) {
  constexpr int kKeys = cuda::kSm90XLKeys;
  struct Step {
    int tile, chunk;
  };
  const std::vector<std::vector<int>> runs = {{0, 1, 2, 3, 4, 5}, {3, 4, 7, 8, 9}, {0}, {5}, {2, 3, 10, 12}};
  for (const int64_t qp0 : {int64_t{0}, int64_t{63}, int64_t{200}, int64_t{1000}})
    for (const std::vector<int>& tiles : runs) {
      const int64_t lo = -500;  // the table's first delta
      std::vector<Step> steps;
      int last = -2;
      for (const int t : tiles) {
        const int first = static_cast<int>(cuda::xl_band_first_delta(qp0, int64_t{kKeys} * t, kKeys) - lo);
        if (t != last + 1)
          for (const int step : {cuda::kSm90XLChunkAhead2, cuda::kSm90XLChunkAhead1})
            steps.push_back({step, cuda::sm90_xl_chunk_first(first, step)});
        last = t;
        steps.push_back({t, first});
      }
      for (int g = 0; g < 2; ++g) {
        SCOPED_TRACE("warpgroup " + std::to_string(g) + ", first row at " + std::to_string(qp0));
        std::vector<int64_t> band(2 * kKeys * cuda::kXLBandRows, INT64_MIN);
        int new_half = 1;
        for (size_t i = 0; i < steps.size(); ++i) {
          if (cuda::sm90_xl_forms(steps[i].tile)) {
            ASSERT_TRUE(g == 0 || i > 0) << "warpgroup 1 forms a chunk without a step before";
            const Step& rows = steps[g == 0 ? i : i - 1];
            new_half ^= 1;
            for (int j = 0; j < kKeys; ++j)
              for (int r = 0; r < 64; ++r) band[cuda::sm90_xl_chunk_at(j, r, new_half)] = rows.chunk + j;
          }
          if (steps[i].tile < 0) continue;
          const int t = steps[i].tile;
          for (int r = 0; r < 64; ++r)
            for (int c = 0; c < kKeys; ++c) {
              const int64_t delta = (qp0 + 64 * g + r) - (int64_t{kKeys} * t + c);
              ASSERT_EQ(band[cuda::sm90_xl_band_at(cuda::xl_band_column(r, c, kKeys), r, new_half)],
                        delta - lo)
                  << "tile " << t << " pair (" << r << ", " << c << ")";
            }
        }
      }
    }
  // Banks: a warp's lanes hold rows 16 w + l / 4 (+ 8) and columns 2 (l % 4) + 8 k (+ 1) of the accumulators.
  for (int half = 0; half < 2; ++half)
    for (int w = 0; w < 4; ++w)
      for (int k = 0; k < kKeys / 8; ++k)
        for (int v = 0; v < 4; ++v) {
          std::set<int> stores, reads;
          for (int l = 0; l < 32; ++l) {
            const int r = 16 * w + l / 4 + 8 * (v / 2), c = 8 * k + 2 * (l % 4) + v % 2;
            stores.insert(cuda::sm90_xl_chunk_at(c, r, half) % 32);
            reads.insert(cuda::sm90_xl_band_at(cuda::xl_band_column(r, c, kKeys), r, half) % 32);
          }
          EXPECT_EQ(stores.size(), 32u)
              << "stores, half " << half << " warp " << w << " k " << k << " v " << v;
          EXPECT_EQ(reads.size(), 32u) << "reads, half " << half << " warp " << w << " k " << k << " v " << v;
        }
}

}  // namespace
}  // namespace posenc::test
