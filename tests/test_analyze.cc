// tests/test_analyze.cc: the metrics of `posenc analyze` on hand-built codes with known answers,
// and the analysis of the library's encodings reproducing seed 004's arguments.
#include <cmath>
#include <numeric>
#include <random>

#include "analyze.h"
#include "registry/metrics.h"
#include "test_util.h"

namespace posenc::analyze {
namespace {
using test::expect_error;

// Rows c_p = [cos(w_i p) | sin(w_i p)] (the sinusoid in the split layout), in double.
Codes sinusoid(int64_t n, int64_t pairs, double base = 10000) {
  Codes c{n, 2 * pairs, {}};
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t i = 0; i < pairs; ++i)
      c.data.push_back(std::cos(p * std::pow(base, -static_cast<double>(i) / pairs)));
    for (int64_t i = 0; i < pairs; ++i)
      c.data.push_back(std::sin(p * std::pow(base, -static_cast<double>(i) / pairs)));
  }
  return c;
}

Codes binary(int64_t n, int64_t bits) {
  Codes c{n, bits, {}};
  for (int64_t p = 0; p < n; ++p)
    for (int64_t b = bits - 1; b >= 0; --b) c.data.push_back((p >> b) & 1 ? 1.0 : -1.0);
  return c;
}

TEST(AnalyzeMetrics, TwoEqualCodesGiveUniquenessZero) {
  Codes c = sinusoid(20, 4);
  std::copy(c.row(3), c.row(3) + c.dim, c.data.begin() + 11 * c.dim);  // position 11 := position 3
  const Uniqueness u = uniqueness(c);
  EXPECT_EQ(u.min_distance, 0.0);
  EXPECT_EQ(u.a, 3);
  EXPECT_EQ(u.b, 11);
  EXPECT_GT(u.mean_distance, 0.0);
}

TEST(AnalyzeMetrics, SinusoidalIdentityGivesTheSimilarityCurve) {
  // Seed 004: PE(p) . PE(q) = sum_i cos(w_i (p - q)), so sim(lag) = mean_i cos(w_i lag) exactly.
  const int64_t pairs = 8;
  const Codes c = sinusoid(300, pairs, 100);
  const Neighbours nb = neighbours(c, 20);
  ASSERT_EQ(nb.similarity.size(), 21u);
  for (int64_t lag = 0; lag <= 20; ++lag) {
    double expected = 0;
    for (int64_t i = 0; i < pairs; ++i)
      expected += std::cos(lag * std::pow(100.0, -static_cast<double>(i) / pairs));
    EXPECT_NEAR(nb.similarity[lag], expected / pairs, 1e-12) << lag;
  }
  // And every adjacent pair is equally far apart.
  EXPECT_NEAR(nb.min_ratio, nb.max_ratio, 1e-12);
}

TEST(AnalyzeMetrics, PermutingBinaryPositionsKeepsUniquenessButNotNeighbours) {
  const Codes c = binary(64, 6);
  std::vector<int64_t> perm(64);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(3));
  Codes shuffled{64, 6, {}};
  for (int64_t p : perm) shuffled.data.insert(shuffled.data.end(), c.row(p), c.row(p) + 6);
  EXPECT_EQ(uniqueness(c).min_distance, 2.0);  // one flipped bit of +-1 codes
  EXPECT_EQ(uniqueness(shuffled).min_distance, 2.0);
  EXPECT_NEAR(uniqueness(c).mean_distance, uniqueness(shuffled).mean_distance, 1e-12);
  // Counting order: the 7 -> 8 step flips 4 bits (distance 4), 6 -> 7 one (distance 2).
  EXPECT_DOUBLE_EQ(distance(c, 6, 7), 2.0);
  EXPECT_DOUBLE_EQ(distance(c, 7, 8), 4.0);
  EXPECT_NE(neighbours(c, 4).min_ratio, neighbours(shuffled, 4).min_ratio);
}

TEST(AnalyzeMetrics, LinearCompositionIsExactForRotationsAndNotForNoise) {
  // c_p = A^p c_0 with A block-diagonal rotations: PE(p + k) = A^k PE(p) exactly.
  EXPECT_LT(linear_map_residual(sinusoid(200, 6, 50), 1), 1e-9);
  EXPECT_LT(linear_map_residual(sinusoid(200, 6, 50), 16), 1e-9);
  Codes noise{200, 12, {}};
  std::mt19937 rng(1);
  std::normal_distribution<double> n;
  for (int i = 0; i < 200 * 12; ++i) noise.data.push_back(n(rng));
  EXPECT_GT(linear_map_residual(noise, 1), 0.8);
  EXPECT_GT(linear_map_residual(binary(256, 8), 1), 0.3);
  expect_error([&] { linear_map_residual(noise, 200); }, "offset k = 200");
}

TEST(AnalyzeMetrics, NoveltyIsZeroForSeenCodesAndBoundedness) {
  const Codes c = sinusoid(100, 4);
  Codes again{10, c.dim, std::vector<double>(c.data.begin(), c.data.begin() + 10 * c.dim)};
  const Novelty nv = novelty(c, again);
  EXPECT_EQ(nv.max_ratio, 0.0);
  EXPECT_LE(nv.new_max_abs, nv.trained_max_abs);
  const Codes far{1, c.dim, std::vector<double>(c.dim, 10.0)};
  EXPECT_GT(novelty(c, far).max_ratio, 5.0);
  EXPECT_EQ(novelty(c, far).new_max_abs, 10.0);
}

TEST(AnalyzeMetrics, FirstMergedDistance) {
  EXPECT_EQ(first_merged_distance([](int64_t d) { return std::clamp<int64_t>(d, -3, 3); }, 100, true), 4);
  EXPECT_EQ(first_merged_distance([](int64_t d) { return d; }, 100, true), -1);
  EXPECT_EQ(first_merged_distance([](int64_t d) { return d < 0 ? -d : d; }, 100, true),
            1);  // +-1 share a code
  EXPECT_EQ(first_merged_distance([](int64_t d) { return d < 0 ? -d : d; }, 100, false), -1);
}

TEST(AnalyzeMetrics, DecayBoundAndRelativeDeviation) {
  const std::vector<double> theta = {1.0, 0.1, 0.01, 0.001};
  EXPECT_DOUBLE_EQ(rope_decay_bound(theta, 0.0), (1.0 + 2 + 3 + 4) / 4);  // |S_j| = j at distance 0
  EXPECT_LT(rope_decay_bound(theta, 50.0), rope_decay_bound(theta, 0.0));
  EXPECT_LT(max_deviation_from_relative([](int64_t m, int64_t n) { return std::cos(0.3 * (m - n)); }, 40),
            1e-15);
  EXPECT_GT(max_deviation_from_relative([](int64_t m, int64_t n) { return static_cast<double>(m * n); }, 40),
            100.0);
}

TEST(Analyze, TheLibrarysEncodingsReproduceTheSeedsArguments) {
  Options o;
  o.length = 128;
  o.extrapolate_to = 256;
  o.dim = 32;
  const std::vector<Report> reports = analyze(o);
  auto find = [&](const std::string& name) {
    for (const Report& r : reports)
      if (r.encoding == name) return r;
    ADD_FAILURE() << name;
    return Report{};
  };
  ASSERT_EQ(reports.size(), 10u);
  using M = Verdict::Mark;
  const Report sin = find("sinusoidal"), bin = find("binary"), learned = find("learned"), t5 = find("t5"),
               rope = find("rope");
  EXPECT_EQ(sin.composability.mark, M::pass);
  EXPECT_EQ(sin.neighbours.mark, M::pass);
  EXPECT_EQ(bin.uniqueness.mark, M::pass);
  EXPECT_EQ(bin.neighbours.mark, M::fail);
  EXPECT_EQ(bin.neighbours.detail["seed_example"]["hamming_7_8"], 4);
  EXPECT_EQ(bin.composability.mark, M::fail);
  EXPECT_EQ(bin.generalization.mark, M::fail);
  EXPECT_EQ(bin.generalization.detail["first_undefined_position"], 128);
  EXPECT_NE(bin.generalization.detail["library_error"].get<std::string>().find("bits"), std::string::npos);
  EXPECT_EQ(learned.generalization.mark, M::fail);
  EXPECT_NE(learned.generalization.detail["library_error"].get<std::string>().find("max_len = 128"),
            std::string::npos)
      << learned.generalization.detail.dump();
  EXPECT_EQ(t5.uniqueness.detail["first_merged_distance"], 9);
  EXPECT_EQ(rope.composability.mark, M::pass);
  EXPECT_EQ(rope.decay["curve"].size(), 9u);  // distances 1, 2, 4, ..., 256
  EXPECT_EQ(find("none").uniqueness.mark, M::fail);
  EXPECT_EQ(find("alibi").generalization.mark, M::pass);
  const nlohmann::json j = to_json(o, reports);
  EXPECT_EQ(j["encodings"].size(), 10u);
}

TEST(Analyze, BadOptionsAreRejected) {
  Options o;
  o.length = 1;
  expect_error([&] { analyze(o); }, "--length = 1");
  o.length = 64;
  o.extrapolate_to = 64;
  expect_error([&] { analyze(o); }, "--extrapolate-to = 64");
  o.extrapolate_to = 128;
  o.dim = 7;
  expect_error([&] { analyze(o); }, "--dim = 7");
  o.dim = 8;
  o.encodings = {"bogus"};
  expect_error([&] { analyze(o); }, "bogus");
}

}  // namespace
}  // namespace posenc::analyze
