// tests/test_seed_claims.cc: every claim of ../shared/seeds that can be checked numerically,
// checked with posenc's own encodings, including the one the seeds get wrong.
#include <cmath>
#include <set>

#include "posenc/absolute.h"
#include "posenc/bias.h"
#include "test_util.h"

namespace posenc::test {
namespace {

std::vector<int64_t> positions_up_to(int64_t n) {  // 0, 1, ..., n - 1
  std::vector<int64_t> pos(n);
  for (int64_t i = 0; i < n; ++i) pos[i] = i;
  return pos;
}

std::vector<float> sinusoid(int64_t dim, int64_t n, double base = 10000) {
  SinusoidalConfig c;
  c.dim = dim;
  c.base = base;
  const std::vector<int64_t> pos = positions_up_to(n);
  std::vector<float> out(n * dim);
  sinusoidal_table(c, view(pos.data(), {n}), view(out.data(), {n, dim}));
  return out;
}

double dot_rows(const std::vector<float>& t, int64_t dim, int64_t a, int64_t b) {
  double s = 0;
  for (int64_t e = 0; e < dim; ++e) s += static_cast<double>(t[a * dim + e]) * t[b * dim + e];
  return s;
}

// Seed 001 section 4 derives PE_i . PE_j = d/2 cos((i-j)/10000) - d/2 cos((i+j)/10000). That is
// wrong: the sum runs over sin*sin + cos*cos of each frequency, which gives sum_k cos(w_k (i - j)),
// independent of i + j (seed 004 states this correctly). posenc's tables show both facts.
TEST(SeedClaims, Seed001DotProductFormulaIsWrongAndSeed004IsRight) {
  const int64_t d = 64;
  const std::vector<float> pe = sinusoid(d, 200);
  double worst_seed001 = 0;
  for (int64_t i : {3, 50, 120})
    for (int64_t j : {0, 10, 199}) {
      const double actual = dot_rows(pe, d, i, j);
      const double seed001 = d / 2.0 * std::cos((i - j) / 10000.0) - d / 2.0 * std::cos((i + j) / 10000.0);
      worst_seed001 = std::max(worst_seed001, std::abs(actual - seed001));
      double seed004 = 0;
      for (int64_t k = 0; k < d / 2; ++k) seed004 += std::cos(std::pow(10000.0, -2.0 * k / d) * (i - j));
      EXPECT_NEAR(actual, seed004, 1e-4);
    }
  EXPECT_GT(worst_seed001, 1.0);  // off by whole units, not rounding
  // A function of i - j only: the same offset gives the same product anywhere.
  EXPECT_NEAR(dot_rows(pe, d, 10, 3), dot_rows(pe, d, 190, 183), 1e-4);
}

// Seed 003: every position has a unique code; low dimensions vary fast (short periods), high
// dimensions slowly; the period grows with the dimension.
TEST(SeedClaims, Seed003UniquenessAndFrequencyLadder) {
  const int64_t d = 32, n = 1000;
  const std::vector<float> pe = sinusoid(d, n);
  double min_distance = INFINITY;
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = a + 1; b < n; ++b) {
      double s = 0;
      for (int64_t e = 0; e < d; ++e) s += std::pow(static_cast<double>(pe[a * d + e]) - pe[b * d + e], 2);
      min_distance = std::min(min_distance, std::sqrt(s));
    }
  EXPECT_GT(min_distance, 1e-3);
  // Mean |PE(p+1) - PE(p)| per dimension pair decreases from low to high dimensions.
  double previous = INFINITY;
  for (int64_t i = 0; i < d / 2; ++i) {
    double change = 0;
    for (int64_t p = 0; p + 1 < n; ++p) change += std::abs(pe[(p + 1) * d + 2 * i] - pe[p * d + 2 * i]);
    EXPECT_LT(change, previous) << "dimension pair " << i;
    previous = change;
  }
  SinusoidalConfig c;
  c.dim = d;
  const std::vector<double> w = sinusoidal_frequencies(c);
  for (size_t i = 1; i < w.size(); ++i) EXPECT_GT(2 * M_PI / w[i], 2 * M_PI / w[i - 1]);  // periods grow
}

// Seed 004: binary codes are unique but neighbours can differ in every bit (7 -> 8), while
// sinusoidal neighbours are all equally close.
TEST(SeedClaims, Seed004BinaryUniqueButNotLocal) {
  const int64_t bits = 8, n = 256;
  BinaryConfig c;
  c.bits = bits;
  c.signed_values = false;
  const std::vector<int64_t> pos = positions_up_to(n);
  std::vector<float> code(n * bits);
  binary_table(c, view(pos.data(), {n}), view(code.data(), {n, bits}));
  std::set<std::vector<float>> distinct;
  int max_neighbour_hamming = 0;
  for (int64_t p = 0; p < n; ++p) {
    distinct.insert(std::vector<float>(code.begin() + p * bits, code.begin() + (p + 1) * bits));
    if (p + 1 < n) {
      int h = 0;
      for (int64_t b = 0; b < bits; ++b) h += code[p * bits + b] != code[(p + 1) * bits + b];
      max_neighbour_hamming = std::max(max_neighbour_hamming, h);
    }
  }
  EXPECT_EQ(distinct.size(), static_cast<size_t>(n));
  EXPECT_EQ(max_neighbour_hamming, bits);  // 127 -> 128 flips all 8 bits
  const std::vector<float> pe = sinusoid(16, n);
  double lo = INFINITY, hi = 0;
  for (int64_t p = 0; p + 1 < n; ++p) {
    double s = 0;
    for (int64_t e = 0; e < 16; ++e)
      s += std::pow(static_cast<double>(pe[(p + 1) * 16 + e]) - pe[p * 16 + e], 2);
    lo = std::min(lo, s);
    hi = std::max(hi, s);
  }
  EXPECT_NEAR(lo, hi, 1e-5);  // ||PE(p+1) - PE(p)|| is the same for every p
}

// Seed 000's RelativePositionBias: nn.Embedding(2 * max_position - 1, heads) indexed by
// key - query + (2 * max_position - 1) // 2: posenc's clipped bias with K = max_position - 1.
TEST(SeedClaims, Seed000RelativePositionBiasIsTheClippedBias) {
  const int64_t heads = 3, max_position = 6, rows = 2 * max_position - 1;
  const RelativeBiasConfig c = RelativeBiasConfig::clipped(heads, max_position - 1);
  ASSERT_EQ(c.num_rows(), rows);
  const std::vector<float> table = random_floats(rows * heads, 61);
  std::vector<int64_t> pos = {0, 1, 2, 3, 4, 5};
  std::vector<float> out(heads * 6 * 6);
  relative_bias(c, view(table.data(), {rows, heads}), view(pos.data(), {6}), view(pos.data(), {6}),
                view(out.data(), {heads, 6, 6}));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t q = 0; q < 6; ++q)
      for (int64_t k = 0; k < 6; ++k)
        EXPECT_EQ(out[(h * 6 + q) * 6 + k], table[(k - q + rows / 2) * heads + h]);
}

}  // namespace
}  // namespace posenc::test
