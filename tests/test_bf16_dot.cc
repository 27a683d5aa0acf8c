// tests/test_bf16_dot.cc: the vdpbf16ps logits kernels (src/cpu/bf16_dot.h) against a double
// reference on the same numbers: odd head dims (a key row ending inside a vector, a pair padded with
// zero), 1 to 70 keys (vector tails), 1 to 9 query rows (register-block tails), queries that need
// 1, 2 or 3 bf16 parts. The products are exact, so the only error is fp32 summation:
//   |S - exact| <= (parts D + 16) 2^-24 scale sum_d |q_d k_d|   (a bound on recursive summation).
// P V with rounded probabilities (bf16_tile_values): value heads ending inside a vector or a 64-dim
// block, 1 to 64 keys (an odd last pair), 1 to 9 rows (the 4-row blocks' tails), accumulated into O:
//   |O - exact| <= (n + 2) 2^-24 (|O0| + sum_j |p_j v_j|)   (products exact, fp32 summation).
// Skipped on CPUs without AVX512_BF16 (the attention tests then cover the widening path alone).
#include <cmath>

#include "posenc/attention.h"
#include "src/cpu/bf16_dot.h"
#include "src/half.h"
#include "test_util.h"

namespace posenc::test {
namespace {

enum class QueryKind { bf16_values, two_parts, any_fp32 };

std::vector<float> queries(int64_t m, int64_t D, QueryKind kind, uint32_t seed) {
  std::vector<float> q = random_floats(static_cast<size_t>(m * D), seed);
  for (float& x : q) {
    if (kind == QueryKind::bf16_values) x = detail::bf16_to_f32(detail::f32_to_bf16(x));
    if (kind == QueryKind::two_parts)  // 16 significant bits: hi + mid exactly
      x = detail::f32_from_bits(detail::f32_bits(x) & 0xffffff00u);
  }
  return q;
}

struct Problem {
  int64_t m, n, D;
  std::vector<float> q;
  std::vector<uint16_t> k;  // n rows of D, row stride D + 3 (not a multiple of anything)
  int64_t k_stride;
};

Problem make(int64_t m, int64_t n, int64_t D, QueryKind kind) {
  Problem p{m, n, D, queries(m, D, kind, static_cast<uint32_t>(m * 1000 + n * 10 + D)), {}, D + 3};
  const std::vector<float> k = random_floats(static_cast<size_t>(n * p.k_stride), 77);
  for (float x : k) p.k.push_back(detail::f32_to_bf16(x));
  return p;
}

// Checks S (m x n, stride ld) against the double products, and that nothing outside it was written.
void expect_logits(const Problem& p, float scale, const std::vector<float>& S, int64_t ld, int64_t parts) {
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < ld; ++j) {
      if (j >= p.n) {
        ASSERT_EQ(S[i * ld + j], -7.0f) << "wrote past the keys at row " << i << " column " << j;
        continue;
      }
      double exact = 0, magnitude = 0;
      for (int64_t d = 0; d < p.D; ++d) {
        const double term = double(p.q[i * p.D + d]) * detail::bf16_to_f32(p.k[j * p.k_stride + d]);
        exact += term, magnitude += std::abs(term);
      }
      const double bound = (parts * p.D + 16) * std::ldexp(1.0, -24) * scale * magnitude;
      ASSERT_LE(std::abs(S[i * ld + j] - scale * exact), bound) << "row " << i << " key " << j;
    }
}

class Bf16Dot : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::bf16_dot_available()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  }
};

TEST_F(Bf16Dot, SplitIsExactWithTheFewestParts) {
  const std::pair<QueryKind, int64_t> kinds[] = {
      {QueryKind::bf16_values, 1}, {QueryKind::two_parts, 2}, {QueryKind::any_fp32, 3}};
  for (const auto& [kind, parts] : kinds) {
    const std::vector<float> q = queries(5, 37, kind, 3);
    cpu::Bf16Queries split;
    cpu::split_queries(q.data(), 37, 5, 37, split);
    EXPECT_EQ(split.parts, parts);
    EXPECT_EQ(split.dim, 64);
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t d = 0; d < 64; ++d) {
        float sum = 0;
        for (int64_t part = 0; part < 3; ++part) sum += detail::bf16_to_f32(split.row(part, i)[d]);
        ASSERT_EQ(sum, d < 37 ? q[i * 37 + d] : 0.0f) << "row " << i << " dim " << d;
      }
  }
  // Non-finite values go through the first part alone; the largest floats do not overflow a part.
  const float inf = INFINITY;
  const std::vector<float> q = {inf, -inf, NAN, 3.4028235e38f, -3.4028235e38f, 1e-30f};
  cpu::Bf16Queries split;
  cpu::split_queries(q.data(), 6, 1, 6, split);
  EXPECT_EQ(detail::bf16_to_f32(split.row(0, 0)[0]), inf);
  EXPECT_EQ(detail::bf16_to_f32(split.row(0, 0)[1]), -inf);
  EXPECT_TRUE(std::isnan(detail::bf16_to_f32(split.row(0, 0)[2])));
  for (int64_t d = 3; d < 6; ++d) {
    float sum = 0;
    for (int64_t part = 0; part < split.parts; ++part) sum += detail::bf16_to_f32(split.row(part, 0)[d]);
    EXPECT_EQ(sum, q[d]) << "dim " << d;
  }
}

TEST_F(Bf16Dot, RowLogitsMatchTheReference) {
  for (QueryKind kind : {QueryKind::bf16_values, QueryKind::two_parts, QueryKind::any_fp32})
    for (int64_t D : {1, 2, 15, 32, 33, 64, 127, 128, 256})
      for (int64_t n : {1, 5, 16, 17, 64})
        for (int64_t m : {1, 3, 9}) {
          SCOPED_TRACE("D " + std::to_string(D) + " n " + std::to_string(n) + " m " + std::to_string(m));
          const Problem p = make(m, n, D, kind);
          cpu::Bf16Queries split;
          cpu::split_queries(p.q.data(), D, m, D, split);
          const int64_t ld = 70;
          std::vector<float> S(static_cast<size_t>(m * ld), -7.0f);
          cpu::bf16_row_logits(split, D, p.k.data(), p.k_stride, n, 0.125f, S.data(), ld);
          expect_logits(p, 0.125f, S, ld, split.parts);
        }
}

TEST_F(Bf16Dot, TileLogitsOfPackedPairsMatchTheReference) {
  for (QueryKind kind : {QueryKind::bf16_values, QueryKind::two_parts, QueryKind::any_fp32})
    for (int64_t D : {1, 3, 32, 65, 128})
      for (int64_t nk : {1, 17, 64, 130})
        for (int64_t m : {1, 4, 7}) {
          SCOPED_TRACE("D " + std::to_string(D) + " nk " + std::to_string(nk) + " m " + std::to_string(m));
          const Problem p = make(m, nk, D, kind);
          std::vector<uint16_t> pairs(static_cast<size_t>(cpu::key_pairs_size(D, nk)), 0xffff);
          cpu::pack_key_pairs(p.k.data(), p.k_stride, D, nk, pairs.data());
          cpu::Bf16Queries split;
          cpu::split_queries(p.q.data(), D, m, D, split);
          // Tiles of up to 64 keys, the last one short, each checked as a problem of its own keys.
          for (int64_t j0 = 0; j0 < nk; j0 += 64) {
            const int64_t n = std::min<int64_t>(64, nk - j0);
            Problem tile = p;
            tile.n = n;
            tile.k.assign(p.k.begin() + j0 * p.k_stride, p.k.begin() + (j0 + n) * p.k_stride);
            const int64_t ld = 72;
            std::vector<float> S(static_cast<size_t>(m * ld), -7.0f);
            cpu::bf16_tile_logits(split, D, pairs.data(), nk, j0, n, 2.0f, S.data(), ld);
            expect_logits(tile, 2.0f, S, ld, split.parts);
          }
        }
}

TEST_F(Bf16Dot, ValuePairsInterleaveRowsAndPadWithZeros) {
  for (int64_t Dv : {1, 16, 17, 40})
    for (int64_t n : {1, 2, 5, 64}) {
      const int64_t stride = Dv + 5, width = (Dv + 15) / 16 * 16;
      std::vector<uint16_t> v(static_cast<size_t>(n * stride));
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint16_t>(i + 1);  // never zero
      std::vector<uint16_t> pairs(static_cast<size_t>(cpu::value_pairs_size(Dv, n)), 0xffff);
      ASSERT_EQ(static_cast<int64_t>(pairs.size()), (n + 1) / 2 * width * 2);
      cpu::pack_value_pairs(v.data(), stride, n, Dv, pairs.data());
      for (int64_t j = 0; j < (n + 1) / 2 * 2; ++j)
        for (int64_t d = 0; d < width; ++d) {
          const uint16_t want = j < n && d < Dv ? v[j * stride + d] : 0;
          ASSERT_EQ(pairs[((j / 2) * width + d) * 2 + j % 2], want)
              << "Dv " << Dv << " n " << n << " key " << j << " dim " << d;
        }
    }
}

TEST_F(Bf16Dot, TileValuesMatchTheReference) {
  for (int64_t Dv : {1, 15, 16, 17, 64, 65, 100, 128, 256})
    for (int64_t n : {1, 2, 17, 63, 64})
      for (int64_t m : {1, 3, 4, 5, 9}) {
        SCOPED_TRACE("Dv " + std::to_string(Dv) + " n " + std::to_string(n) + " m " + std::to_string(m));
        const uint32_t seed = static_cast<uint32_t>(m * 1000 + n * 10 + Dv);
        // Probabilities as the softmax leaves them: bf16 values in [0, 1], some exactly 0 or 1. The
        // row stride ldp leaves columns past n holding NaN, which must not be read (NaN times the zero
        // padding of an odd n's last pair is still NaN).
        const int64_t ldp = 70, ldo = Dv + 7, v_stride = Dv + 3;
        std::vector<float> P = random_floats(static_cast<size_t>(m * ldp), seed, 0.0f, 1.0f);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < ldp; ++j) {
            float& x = P[i * ldp + j];
            x = j >= n        ? NAN
                : j % 7 == 3  ? 0.0f
                : j % 11 == 5 ? 1.0f
                              : detail::bf16_to_f32(detail::f32_to_bf16(x));
          }
        std::vector<uint16_t> v;
        for (float x : random_floats(static_cast<size_t>(n * v_stride), seed + 1, -4.0f, 4.0f))
          v.push_back(detail::f32_to_bf16(x));
        std::vector<float> O = random_floats(static_cast<size_t>(m * ldo), seed + 2);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t d = Dv; d < ldo; ++d) O[i * ldo + d] = -7.0f;
        const std::vector<float> O0 = O;
        std::vector<uint16_t> pairs(static_cast<size_t>(cpu::value_pairs_size(Dv, n)));
        cpu::pack_value_pairs(v.data(), v_stride, n, Dv, pairs.data());
        cpu::bf16_tile_values(m, n, Dv, P.data(), ldp, pairs.data(), O.data(), ldo);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t d = 0; d < ldo; ++d) {
            if (d >= Dv) {
              ASSERT_EQ(O[i * ldo + d], -7.0f) << "wrote past Dv at row " << i << " dim " << d;
              continue;
            }
            double exact = O0[i * ldo + d], magnitude = std::abs(exact);
            for (int64_t j = 0; j < n; ++j) {
              const double term = double(P[i * ldp + j]) * detail::bf16_to_f32(v[j * v_stride + d]);
              exact += term, magnitude += std::abs(term);
            }
            const double bound = (n + 2) * std::ldexp(1.0, -24) * magnitude;
            ASSERT_LE(std::abs(O[i * ldo + d] - exact), bound) << "row " << i << " dim " << d;
          }
      }
}

// The public switch (posenc/attention.h) turns the path off and on again where the CPU has it.
TEST(Bf16DotSwitch, PublicSwitchTurnsThePathOffAndOn) {
  const bool before = bf16_dot_products();
  set_bf16_dot_products(false);
  EXPECT_FALSE(bf16_dot_products());
  EXPECT_FALSE(cpu::bf16_dot_available());
  set_bf16_dot_products(true);
  EXPECT_EQ(bf16_dot_products(), cpu::bf16_dot_available());
  set_bf16_dot_products(before);
}

}  // namespace
}  // namespace posenc::test
