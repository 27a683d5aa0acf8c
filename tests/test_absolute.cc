// tests/test_absolute.cc: sinusoidal, learned and binary encodings vs references, the seeds'
// claims, gradients and bad input.

#include <cmath>

#include "posenc/absolute.h"
#include "posenc/error.h"
#include "posenc/threads.h"
#include "reference/absolute.h"
#include "test_util.h"

namespace posenc::test {
namespace {

std::vector<float> table(const SinusoidalConfig& c, const std::vector<int64_t>& pos) {
  std::vector<float> out(pos.size() * c.dim, -9.0f);
  sinusoidal_table(c, view(pos.data(), {static_cast<int64_t>(pos.size())}),
                   view(out.data(), {static_cast<int64_t>(pos.size()), c.dim}));
  return out;
}

// Seed 003's worked example: position 2, d_model 4 -> (sin 2, cos 2, sin 0.02, cos 0.02).
TEST(Sinusoidal, SeedWorkedExample) {
  SinusoidalConfig c;
  c.dim = 4;
  const std::vector<float> pe = table(c, {2});
  EXPECT_TRUE(all_close(pe, std::vector<double>{std::sin(2.0), std::cos(2.0), std::sin(0.02), std::cos(0.02)},
                        kF32Elementwise));
}

TEST(Sinusoidal, MatchesReferenceForEveryConventionOnEveryTarget) {
  const std::vector<int64_t> pos = {0, 1, 2, 3, 50, 511, 4096, 65535, (1 << 20) - 3, 1 << 20};
  for (auto layout : {SinusoidalLayout::interleaved, SinusoidalLayout::split})
    for (auto freqs : {SinusoidalFrequencies::model_dim, SinusoidalFrequencies::half_dim_minus_one})
      for (int64_t dim : {4, 6, 18, 64, 130, 512})
        for (int64_t offset : {0, 2}) {
          SinusoidalConfig c;
          c.dim = dim;
          c.layout = layout;
          c.frequencies = freqs;
          c.position_offset = offset;
          SCOPED_TRACE(::testing::Message() << "dim " << dim << " layout " << int(layout) << " freqs "
                                            << int(freqs) << " offset " << offset);
          const auto expected = ref::sinusoidal<double>(c, pos);
          for_each_cpu_target(
              [&](const std::string&) { EXPECT_TRUE(all_close(table(c, pos), expected, kF32Elementwise)); });
        }
}

TEST(Sinusoidal, OddDimensionInSplitLayoutPadsAZeroColumn) {
  SinusoidalConfig c;
  c.dim = 7;
  c.layout = SinusoidalLayout::split;
  const std::vector<float> pe = table(c, {5, 9});
  EXPECT_EQ(pe[6], 0.0f);
  EXPECT_EQ(pe[13], 0.0f);
  EXPECT_TRUE(all_close(pe, ref::sinusoidal<double>(c, {5, 9}), kF32Elementwise));
  // dim 1: no frequency pair, only the zero column (found by test_bad_input.py: Highway's aligned
  // allocator aborted on the 0-pair scratch).
  c.dim = 1;
  EXPECT_EQ(table(c, {0, 3}), (std::vector<float>{0.0f, 0.0f}));
}

// Seed 004: PE(p) . PE(q) = sum_i cos(w_i (p - q)), a function of p - q alone.
TEST(Sinusoidal, DotProductIdentity) {
  SinusoidalConfig c;
  c.dim = 64;
  const std::vector<double> w = sinusoidal_frequencies(c);
  const std::vector<int64_t> pos = {0, 3, 17, 100, 1000, 12345};
  const std::vector<float> pe = table(c, pos);
  for (size_t a = 0; a < pos.size(); ++a)
    for (size_t b = 0; b < pos.size(); ++b) {
      double dot = 0, identity = 0;
      for (int64_t e = 0; e < 64; ++e) dot += static_cast<double>(pe[a * 64 + e]) * pe[b * 64 + e];
      for (double wi : w) identity += std::cos(wi * static_cast<double>(pos[a] - pos[b]));
      EXPECT_NEAR(dot, identity, 1e-5) << pos[a] << " " << pos[b];
    }
}

TEST(Sinusoidal, AddToEmbeddingsEqualsTablePlusInputWithBatchPositions) {
  SinusoidalConfig c;
  c.dim = 10;
  const int64_t B = 2, T = 3;
  const std::vector<float> x0 = random_floats(B * T * 10, 21);
  std::vector<float> x = x0;
  std::vector<int64_t> pos = {0, 1, 2, 7, 8, 9};  // (B, T): the second sequence continues at 7
  sinusoidal_add(c, view(pos.data(), {B, T}), view(x.data(), {B, T, 10}));
  const auto pe = ref::sinusoidal<double>(c, pos);
  std::vector<double> expected(x0.size());
  for (size_t i = 0; i < x0.size(); ++i) expected[i] = x0[i] + pe[i];
  EXPECT_TRUE(all_close(x, expected, kF32Elementwise));
}

TEST(Sinusoidal, BadInput) {
  SinusoidalConfig c;
  c.dim = 5;
  std::vector<int64_t> pos = {1};
  std::vector<float> out(5, 3.0f);
  EXPECT_THROW(sinusoidal_table(c, view(pos.data(), {1}), view(out.data(), {1, 5})), Error);
  EXPECT_EQ(out, std::vector<float>(5, 3.0f));
  c.dim = 4;
  c.base = 0;
  EXPECT_THROW(validate(c), Error);
  c.base = 5e-324;  // 1 / base overflows: the frequencies would be inf (found by hypothesis)
  expect_error([&] { validate(c); }, "base");
  expect_error([&] { validate(c); }, "2^-16");
  c.base = 0x1p-17;
  EXPECT_THROW(validate(c), Error);
  c.base = 0x1p127;
  EXPECT_THROW(validate(c), Error);
  for (double base : {0x1p-16, 0x1p126}) {  // the bounds themselves: frequencies and table finite
    c.base = base;
    for (double w : sinusoidal_frequencies(c))
      EXPECT_TRUE(std::isfinite(w) && static_cast<float>(w) > 0) << w;
    std::vector<int64_t> far = {-(int64_t{1} << 53), 1, (int64_t{1} << 53) - 12345};
    std::vector<float> table(3 * 4);
    sinusoidal_table(c, view(far.data(), {3}), view(table.data(), {3, 4}));
    for (float v : table) EXPECT_TRUE(std::isfinite(v) && std::abs(v) <= 1.0f) << base;
  }
  // |sin|, |cos| <= 1 exactly on every target (Highway's fp32 polynomials returned 1 + 2^-23)
  for_each_cpu_target([&](const std::string& target) {
    SinusoidalConfig wide;
    wide.dim = 64;
    std::vector<int64_t> many(4096);
    for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int64_t>(i) * 7919 + 291;
    std::vector<float> t(many.size() * 64);
    sinusoidal_table(wide, view(many.data(), {4096}), view(t.data(), {4096, 64}));
    for (float v : t) ASSERT_LE(std::abs(v), 1.0f) << target;
  });
  c.base = 10000;
  EXPECT_THROW(sinusoidal_table(c, view(pos.data(), {1}), view(out.data(), {1, 5})), Error);  // wrong dim
}

// ---------------------------------------------------------------- learned
TEST(Learned, LookupAddAndBackwardMatchReference) {
  const int64_t L = 16, D = 7;
  const std::vector<float> tab = random_floats(L * D, 22);
  const std::vector<int64_t> pos = {0, 15, 3, 3, 9, 0};  // repeats exercise the scatter-add
  std::vector<float> out(pos.size() * D);
  learned_lookup(view(tab.data(), {L, D}), view(pos.data(), {6}), view(out.data(), {6, D}));
  EXPECT_EQ(out, ref::learned_lookup(tab, D, pos));
  std::vector<float> x = random_floats(pos.size() * D, 23), x0 = x;
  learned_add(view(tab.data(), {L, D}), view(pos.data(), {2, 3}), view(x.data(), {2, 3, D}));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i], x0[i] + out[i]);

  // Backward vs finite differences of loss = sum(w * lookup(table)).
  const std::vector<float> w = random_floats(pos.size() * D, 24);
  std::vector<float> grad(L * D, 0.0f);
  learned_backward(view(w.data(), {6, D}), view(pos.data(), {6}), view(grad.data(), {L, D}));
  auto loss = [&](const std::vector<double>& t) { return dot(ref::learned_lookup(t, D, pos), to_double(w)); };
  const auto coords = sample_coords(L * D, 200);
  EXPECT_TRUE(all_close(gather(grad, coords), finite_difference(loss, to_double(tab), coords), {1e-6, 1e-6}));
  // It accumulates (+=) and is independent of the thread count.
  std::vector<float> g1(L * D, 1.0f), g2(L * D, 1.0f);
  const std::vector<float> big_w = random_floats(4000 * D, 25);
  std::vector<int64_t> big_pos(4000);
  for (int i = 0; i < 4000; ++i) big_pos[i] = (i * 7) % L;
  set_num_threads(1);
  learned_backward(view(big_w.data(), {4000, D}), view(big_pos.data(), {4000}), view(g1.data(), {L, D}));
  set_num_threads(4);
  learned_backward(view(big_w.data(), {4000, D}), view(big_pos.data(), {4000}), view(g2.data(), {L, D}));
  set_num_threads(0);
  EXPECT_EQ(g1, g2);
  const auto expected = ref::learned_backward(to_double(big_w), L, D, big_pos);
  std::vector<double> expected_plus_one(expected.size());
  for (size_t i = 0; i < expected.size(); ++i) expected_plus_one[i] = expected[i] + 1;
  EXPECT_TRUE(all_close(g1, expected_plus_one, kF32Reduction));
}

// The seeds' point: a learned table cannot run past its length. posenc says so, never clamps.
TEST(Learned, PositionPastTheTableIsAnErrorNamingPositionAndLength) {
  const std::vector<float> tab(8 * 4, 1.0f);
  std::vector<int64_t> pos = {0, 8};
  std::vector<float> out(2 * 4, 5.0f);
  try {
    learned_lookup(view(tab.data(), {8, 4}), view(pos.data(), {2}), view(out.data(), {2, 4}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("position 8 (index 1) is outside the learned table of max_len = 8"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(out, std::vector<float>(8, 5.0f));
  pos = {-1, 0};
  EXPECT_THROW(learned_lookup(view(tab.data(), {8, 4}), view(pos.data(), {2}), view(out.data(), {2, 4})),
               Error);
  std::vector<float> grad(32, 0.0f);
  pos = {0, 99};
  EXPECT_THROW(learned_backward(view(out.data(), {2, 4}), view(pos.data(), {2}), view(grad.data(), {8, 4})),
               Error);
  EXPECT_EQ(grad, std::vector<float>(32, 0.0f));
}

// ---------------------------------------------------------------- binary
TEST(Binary, SeedExampleSevenAndEightAreFarApart) {
  BinaryConfig c;
  c.bits = 4;
  c.signed_values = false;
  std::vector<int64_t> pos = {7, 8};
  std::vector<float> out(8);
  binary_table(c, view(pos.data(), {2}), view(out.data(), {2, 4}));
  EXPECT_EQ(out, (std::vector<float>{0, 1, 1, 1, 1, 0, 0, 0}));
  int hamming = 0;
  for (int b = 0; b < 4; ++b) hamming += out[b] != out[4 + b];
  EXPECT_EQ(hamming, 4);
}

TEST(Binary, MatchesReferenceAndBitsForLength) {
  BinaryConfig c;
  c.bits = 9;
  std::vector<int64_t> pos(512);
  for (int i = 0; i < 512; ++i) pos[i] = i;
  std::vector<float> out(512 * 9);
  binary_table(c, view(pos.data(), {512}), view(out.data(), {512, 9}));
  EXPECT_EQ(out, ref::binary<float>(9, true, pos));
  EXPECT_EQ(binary_bits_for_length(1), 1);
  EXPECT_EQ(binary_bits_for_length(2), 1);
  EXPECT_EQ(binary_bits_for_length(256), 8);
  EXPECT_EQ(binary_bits_for_length(257), 9);
}

// Seed 004: trained at length 256 (8 bits), position 300 needs 9 bits: the code overflows.
TEST(Binary, PositionThatNeedsMoreBitsIsAnError) {
  BinaryConfig c;
  c.bits = binary_bits_for_length(256);
  std::vector<int64_t> pos = {300};
  std::vector<float> out(8, 2.0f);
  try {
    binary_table(c, view(pos.data(), {1}), view(out.data(), {1, 8}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("position 300 (index 0) does not fit in bits = 8: it needs 9 bits"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(out, std::vector<float>(8, 2.0f));
  c.bits = 0;
  EXPECT_THROW(validate(c), Error);
}

}  // namespace
}  // namespace posenc::test
