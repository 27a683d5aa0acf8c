// tests/test_simd_helpers.cc: every SIMD helper of the CPU backend against a scalar twin in double,
// on every compiled target, over counts 0 .. 2N + 1 (N = float lanes of the target: no vector, one
// partial, one full, two full plus a tail) and start offsets 0 .. N - 1 into an aligned buffer
// (gemma.cpp's ops_test habit). Each buffer carries sentinel NaNs before, after and between its
// rows: a helper that touches memory past a count or a row fails here before it races in a kernel.
//   tile_gemm-inl.h      TileGemm (C = [C +] alpha A B, A with any strides)
//   attention_tile-inl.h TransposedSums (N sums of N vectors at once)
//   attention_tile-inl.h RowDots (S = scale q k^T from key rows, fp32 or 16-bit widened as loaded)
//   tile_gemm-inl.h      TileGemm with 16-bit B rows (a decode step's P V)
//   softmax-inl.h        ExpShiftSum, ProbsFromLse
//   angles-inl.h         RowAngles, SinCos (aligned by contract: counts are multiples of N)
//   rope.cc              RotateHalf, RotateInterleaved, through Rope::forward/backward (not exposed)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "posenc/rope.h"
#include "reference/rope.h"
#include "test_util.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/test_simd_helpers.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "src/cpu/angles-inl.h"
#include "src/cpu/attention_tile-inl.h"
#include "src/cpu/softmax-inl.h"
#include "src/cpu/tile_gemm-inl.h"

// ------------------------------------------------------------------ target-independent helpers
#ifndef POSENC_TESTS_SIMD_HELPERS_ONCE
#define POSENC_TESTS_SIMD_HELPERS_ONCE
namespace posenc::test {

constexpr uint32_t kSentinelBits = 0x7FA5A5A5u;  // a signalling NaN, compared bit for bit

inline bool is_sentinel(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b == kSentinelBits;
}

// An aligned buffer of sentinels with room for `n` elements at offset `misalign` (plus a guard
// of 64 elements after): the test writes its data into the elements it means, and checks that
// every other element is still the sentinel afterwards.
class Arena {
 public:
  Arena(int64_t n, int64_t misalign) : size_(n + misalign + 64), misalign_(misalign) {
    mem_ = hwy::AllocateAligned<float>(static_cast<size_t>(size_));
    float s;
    std::memcpy(&s, &kSentinelBits, sizeof s);
    for (int64_t i = 0; i < size_; ++i) mem_[i] = s;
    used_.assign(static_cast<size_t>(size_), false);
  }
  float* at(int64_t i) { return mem_.get() + misalign_ + i; }
  void use(int64_t i, float value) {
    *at(i) = value;
    used_[misalign_ + i] = true;
  }
  void mark(int64_t i) { used_[misalign_ + i] = true; }  // an output element: free to change
  ::testing::AssertionResult untouched_outside() const {
    for (int64_t i = 0; i < size_; ++i)
      if (!used_[i] && !is_sentinel(mem_[i]))
        return ::testing::AssertionFailure()
               << "element " << i - misalign_ << " outside the data was written";
    return ::testing::AssertionSuccess();
  }

 private:
  int64_t size_, misalign_;
  hwy::AlignedFreeUniquePtr<float[]> mem_;
  std::vector<bool> used_;
};

inline float value(uint32_t seed, int64_t i) {  // deterministic O(1) values in [-1, 1)
  uint32_t x = seed * 2654435761u + static_cast<uint32_t>(i) * 40503u + 12345u;
  x ^= x >> 13, x *= 0x5bd1e995u, x ^= x >> 15;
  return static_cast<float>(x & 0xffffff) / static_cast<float>(1 << 23) - 1.0f;
}

// fp32 sums of up to 2N + 1 = 33 O(1) products vs double: a few sqrt(33) eps.
constexpr double kSumTol = 2e-6;
// Highway's Exp: 3 ulp (hwy/contrib/math), plus the fp32 rounding of the argument x - shift
// (|x - shift| <= 8: 8 eps ~ 1e-6 absolute in the argument, relative in the result).
constexpr double kExpRelTol = 2e-6;

}  // namespace posenc::test
#endif  // POSENC_TESTS_SIMD_HELPERS_ONCE

// ------------------------------------------------------------------ per target
HWY_BEFORE_NAMESPACE();
namespace posenc::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using test::Arena;
using test::value;

int64_t FloatLanes() { return static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>())); }

// C (m x n, ldc = n + 3) = [C +] alpha A (m x k) B (k x n, ldb = n + 1); A row-major or transposed.
// n over 0 .. 2N + 1 and the wide blocks' edges (4N and 8N vectors, plus one and a tail).
void TestTileGemm() {
  const int64_t N = FloatLanes();
  std::vector<int64_t> widths;
  for (int64_t n = 0; n <= 2 * N + 1; ++n) widths.push_back(n);
  for (int64_t n : {4 * N, 4 * N + 1, 6 * N + 3, 8 * N, 8 * N + 1, 12 * N + 5}) widths.push_back(n);
  for (int64_t n : widths)
    for (int64_t m : {0, 1, 2, 3, 4, 5, 6, 7, 11, 13})  // 4- and 6-row blocks and every remainder
      for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{3}, N + 1})
        for (int64_t misalign = 0; misalign < N; ++misalign)
          for (int variant = 0; variant < 2; ++variant) {  // 0: A row-major, set C; 1: A^T, accumulate
            SCOPED_TRACE(::testing::Message() << "m " << m << " n " << n << " k " << k << " misalign "
                                              << misalign << " variant " << variant);
            const bool accumulate = variant == 1;
            const int64_t ldb = n + 1, ldc = n + 3;
            Arena A(m * k, misalign), B(k * ldb, misalign), C(m * ldc, misalign);
            const int64_t a_row = variant == 0 ? k : 1, a_col = variant == 0 ? 1 : m;
            for (int64_t i = 0; i < m; ++i)
              for (int64_t l = 0; l < k; ++l) A.use(i * a_row + l * a_col, value(1, i * k + l));
            for (int64_t l = 0; l < k; ++l)
              for (int64_t j = 0; j < n; ++j) B.use(l * ldb + j, value(2, l * n + j));
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                if (accumulate) C.use(i * ldc + j, value(3, i * n + j));
                C.mark(i * ldc + j);
              }
            const float alpha = 0.75f;
            TileGemm({m, n, k, A.at(0), a_row, a_col, B.at(0), ldb, C.at(0), ldc, alpha, accumulate});
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                double s = 0;
                for (int64_t l = 0; l < k; ++l) s += double(value(1, i * k + l)) * value(2, l * n + j);
                const double expected = (accumulate ? value(3, i * n + j) : 0.0) + alpha * s;
                ASSERT_NEAR(*C.at(i * ldc + j), expected, test::kSumTol) << "C[" << i << ", " << j << "]";
              }
            ASSERT_TRUE(A.untouched_outside());
            ASSERT_TRUE(B.untouched_outside());
            ASSERT_TRUE(C.untouched_outside());
          }
}

// TransposedSums: lane j = the sum of the lanes of vector j, exactly (small integers), each lane
// distinct, on every target.
void TestTransposedSums() {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> d;
  const int64_t N = FloatLanes();
  hn::Vec<decltype(d)> acc[HWY_MAX_BYTES / sizeof(float)];  // a std::vector would not align them
  std::vector<float> lanes(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) {
    for (int64_t l = 0; l < N; ++l) lanes[l] = static_cast<float>((j + 1) * 100 + l * (j % 3 + 1));
    acc[j] = hn::LoadU(d, lanes.data());
  }
  std::vector<float> out(static_cast<size_t>(N));
  hn::StoreU(TransposedSums(d, acc), d, out.data());
  for (int64_t j = 0; j < N; ++j) {
    double want = 0;
    for (int64_t l = 0; l < N; ++l) want += (j + 1) * 100 + l * (j % 3 + 1);
    ASSERT_EQ(out[j], want) << "lane " << j;
  }
}

// S (m x n, ld = n + 2) = scale q k^T with q (m x D, q_st = D + 1) and k (n x D, k_st = D + 3):
// m up to 9 (row groups of 4, 2 and 1), n past whole blocks of keys (N / rows) with a tail.
void TestRowDots() {
  const int64_t N = FloatLanes();
  for (int64_t D = 0; D <= 2 * N + 1; ++D)
    for (int64_t misalign = 0; misalign < N; ++misalign)
      for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 1},
                          {2, 3},
                          {1, N + 1},
                          {3, N + 3},
                          {4, 2 * N + 1},
                          {9, 2 * N + 3}}) {
        SCOPED_TRACE(::testing::Message()
                     << "D " << D << " misalign " << misalign << " m " << m << " n " << n);
        const int64_t q_st = D + 1, k_st = D + 3, ld = n + 2;
        Arena q(m * q_st, misalign), k(n * k_st, misalign), S(m * ld, misalign);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t d = 0; d < D; ++d) q.use(i * q_st + d, value(4, i * D + d));
        for (int64_t j = 0; j < n; ++j)
          for (int64_t d = 0; d < D; ++d) k.use(j * k_st + d, value(5, j * D + d));
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) S.mark(i * ld + j);
        RowDots(m, n, D, q.at(0), q_st, k.at(0), k_st, 0.5f, S.at(0), ld);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (int64_t d = 0; d < D; ++d) s += double(value(4, i * D + d)) * value(5, j * D + d);
            ASSERT_NEAR(*S.at(i * ld + j), 0.5 * s, test::kSumTol) << "S[" << i << ", " << j << "]";
          }
        ASSERT_TRUE(q.untouched_outside());
        ASSERT_TRUE(k.untouched_outside());
        ASSERT_TRUE(S.untouched_outside());
      }
}

// RowDots and TileGemm with 16-bit keys / B rows widened as they are loaded (targets where
// WidensVectors), bf16 and fp16, D and n over 0 .. 2N + 1: against double products of the stored
// values. Each 16-bit buffer is exactly as long as its rows (ASan builds catch a read past one).
void TestWidenedProducts() {
#if POSENC_STORAGE_VECTORS
  const int64_t N = FloatLanes();
  for (DType dtype : {DType::bf16, DType::f16}) {
    if (!WidensVectors(dtype)) continue;
    auto store = [&](float x) {
      return dtype == DType::bf16 ? detail::f32_to_bf16(x) : detail::f32_to_f16(x);
    };
    auto load = [&](uint16_t h) {
      return dtype == DType::bf16 ? detail::bf16_to_f32(h) : detail::f16_to_f32(h);
    };
    for (int64_t D = 0; D <= 2 * N + 1; ++D)
      for (auto [m, n] : {std::pair<int64_t, int64_t>{2, 1},
                          {2, 3},
                          {2, 4 * N + 1},
                          {1, 2 * N + 1},
                          {5, 2 * N + 3},
                          {1, 8 * N + 1},
                          {2, 8 * N + 3},
                          {4, 4 * N + 1}}) {
        SCOPED_TRACE(::testing::Message()
                     << "dtype " << int(dtype) << " D " << D << " m " << m << " n " << n);
        const int64_t k_st = D + 3;
        std::vector<float> q(static_cast<size_t>(m * D));
        for (int64_t i = 0; i < m * D; ++i) q[i] = value(4, i);
        std::vector<uint16_t> k(static_cast<size_t>((n - 1) * k_st + D));
        for (size_t i = 0; i < k.size(); ++i) k[i] = store(value(5, static_cast<int64_t>(i)));
        std::vector<float> S(static_cast<size_t>(m * n), -7.0f), S32(S.size(), -7.0f);
        RowDots(m, n, D, q.data(), D, k.data(), k_st, 0.5f, S.data(), n, dtype);
        // The same keys widened first: the fp32 path's bits (the 16-bit storage contract).
        std::vector<float> k32(k.size());
        for (size_t i = 0; i < k.size(); ++i) k32[i] = load(k[i]);
        RowDots(m, n, D, q.data(), D, k32.data(), k_st, 0.5f, S32.data(), n);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (int64_t d = 0; d < D; ++d) s += double(q[i * D + d]) * load(k[j * k_st + d]);
            ASSERT_NEAR(S[i * n + j], 0.5 * s, test::kSumTol) << "RowDots S[" << i << ", " << j << "]";
            ASSERT_EQ(S[i * n + j], S32[i * n + j]) << "RowDots S[" << i << ", " << j << "] vs fp32 keys";
          }
        // C (m x n) += P (m x D) V (D x n): the decode step's P V with value rows of n elements.
        std::vector<uint16_t> v(static_cast<size_t>(D > 0 ? (D - 1) * k_st + n : 0));
        for (size_t i = 0; i < v.size(); ++i) v[i] = store(value(6, static_cast<int64_t>(i)));
        std::vector<float> C(static_cast<size_t>(m * n), 1.0f), C32(C.size(), 1.0f), v32(v.size());
        TileGemm({m, n, D, q.data(), D, 1, nullptr, k_st, C.data(), n, 1.0f, true, v.data(), dtype});
        for (size_t i = 0; i < v.size(); ++i) v32[i] = load(v[i]);
        TileGemm({m, n, D, q.data(), D, 1, v32.data(), k_st, C32.data(), n, 1.0f, true});
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            ASSERT_EQ(C[i * n + j], C32[i * n + j]) << "TileGemm C[" << i << ", " << j << "] vs fp32 rows";
            double c = 1.0;
            for (int64_t l = 0; l < D; ++l) c += double(q[i * D + l]) * load(v[l * k_st + j]);
            ASSERT_NEAR(C[i * n + j], c, test::kSumTol) << "TileGemm C[" << i << ", " << j << "]";
          }
      }
  }
#endif
}

// ExpShiftSum and ProbsFromLse over n logits in [-8, 0], every third one masked (-inf).
void TestSoftmaxHelpers() {
  const int64_t N = FloatLanes();
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  auto logit = [](int64_t j) { return j % 3 == 1 ? kMasked : 4.0f * value(6, j) - 4.0f; };
  for (int64_t n = 0; n <= 2 * N + 1; ++n)
    for (int64_t misalign = 0; misalign < N; ++misalign) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " misalign " << misalign);
      const float shift = 0.25f;
      {
        Arena s(n, misalign);
        for (int64_t j = 0; j < n; ++j) s.use(j, logit(j));
        const float sum = ExpShiftSum(s.at(0), n, shift);
        double expected_sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double e = logit(j) == kMasked ? 0.0 : std::exp(double(logit(j)) - shift);
          expected_sum += e;
          ASSERT_NEAR(*s.at(j), e, test::kExpRelTol * e) << "ExpShiftSum s[" << j << "]";
        }
        ASSERT_NEAR(sum, expected_sum, test::kExpRelTol * expected_sum + 1e-7);
        ASSERT_TRUE(s.untouched_outside());
        // round_probabilities: the same exps, each rounded to bf16 (ties to even) in the vector body and
        // the scalar tail alike; the sum is of the rounded values.
        Arena r(n, misalign);
        for (int64_t j = 0; j < n; ++j) r.use(j, logit(j));
        const float rounded_sum = ExpShiftSum<true>(r.at(0), n, shift);
        double sum_of_rounded = 0;
        for (int64_t j = 0; j < n; ++j) {
          const float want = detail::bf16_to_f32(detail::f32_to_bf16(*s.at(j)));
          ASSERT_EQ(*r.at(j), want) << "ExpShiftSum<true> s[" << j << "]";
          sum_of_rounded += want;
        }
        ASSERT_NEAR(rounded_sum, sum_of_rounded, 1e-6 * (1 + sum_of_rounded));
        ASSERT_TRUE(r.untouched_outside());
      }
      for (float lse : {1.5f, kMasked}) {
        Arena s(n, misalign);
        for (int64_t j = 0; j < n; ++j) s.use(j, logit(j));
        ProbsFromLse(s.at(0), n, lse);
        for (int64_t j = 0; j < n; ++j) {
          const double e = logit(j) == kMasked || lse == kMasked ? 0.0 : std::exp(double(logit(j)) - lse);
          ASSERT_NEAR(*s.at(j), e, test::kExpRelTol * e) << "ProbsFromLse s[" << j << "], lse " << lse;
        }
        ASSERT_TRUE(s.untouched_outside());
      }
    }
}

// RowAngles for pairs 0 .. 2N + 1 (zero padding up to PaddedPairs) and SinCos over the padded
// count: aligned by contract (Load/Store), so only counts are swept.
void TestAngles() {
  const int64_t N = FloatLanes();
  for (int64_t pairs = 0; pairs <= 2 * N + 1; ++pairs)
    for (bool inverse : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "pairs " << pairs << " inverse " << inverse);
      std::vector<double> inv_freq(static_cast<size_t>(pairs));
      for (int64_t j = 0; j < pairs; ++j)
        inv_freq[j] = std::pow(500.0, -double(j) / std::max<int64_t>(pairs, 1));
      const std::vector<int64_t> positions = {3, 70000};
      AngleTable a;
      a.inv_freq = inv_freq.data();
      a.pairs = pairs;
      a.positions = positions.data();
      const int64_t padded = PaddedPairs(pairs);
      ASSERT_EQ(padded % N, 0);
      ASSERT_GE(padded, pairs);
      ASSERT_LT(padded, pairs + N);
      Arena angle(padded, 0), sn(padded, 0), cs(padded, 0);
      for (int64_t j = 0; j < padded; ++j) angle.mark(j), sn.mark(j), cs.mark(j);
      for (int64_t row = 0; row < 2; ++row) {
        RowAngles(a, 2, row, angle.at(0), padded);
        SinCos(angle.at(0), padded, 1.25f, inverse, sn.at(0), cs.at(0));
        for (int64_t j = 0; j < padded; ++j) {
          const double theta = j < pairs ? double(positions[row]) * inv_freq[j] : 0.0;
          const double reduced = std::remainder(theta, 2 * std::numbers::pi);
          ASSERT_NEAR(*angle.at(j), reduced, 1e-6) << "angle " << j;
          // fp32 sin/cos of a reduced angle in [-pi, pi]: a few ulp of O(1).
          ASSERT_NEAR(*sn.at(j), (inverse ? -1.25 : 1.25) * std::sin(theta), 2e-6) << "sin " << j;
          ASSERT_NEAR(*cs.at(j), 1.25 * std::cos(theta), 2e-6) << "cos " << j;
        }
      }
      ASSERT_TRUE(angle.untouched_outside());
      ASSERT_TRUE(sn.untouched_outside());
      ASSERT_TRUE(cs.untouched_outside());
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::cpu
HWY_AFTER_NAMESPACE();

// ------------------------------------------------------------------ the tests
#if HWY_ONCE
namespace posenc::cpu {
HWY_EXPORT(FloatLanes);
HWY_EXPORT(TestTileGemm);
HWY_EXPORT(TestTransposedSums);
HWY_EXPORT(TestRowDots);
HWY_EXPORT(TestWidenedProducts);
HWY_EXPORT(TestSoftmaxHelpers);
HWY_EXPORT(TestAngles);
// Dispatched from here, not as HWY_DYNAMIC_DISPATCH(cpu::X) from posenc::test: a build of one target
// (POSENC_BASELINE_FLAGS) dispatches statically, to N_AVX2::X, which only this namespace can name.
int64_t DispatchFloatLanes() { return HWY_DYNAMIC_DISPATCH(FloatLanes)(); }
void DispatchTileGemm() { HWY_DYNAMIC_DISPATCH(TestTileGemm)(); }
void DispatchTransposedSums() { HWY_DYNAMIC_DISPATCH(TestTransposedSums)(); }
void DispatchRowDots() { HWY_DYNAMIC_DISPATCH(TestRowDots)(); }
void DispatchWidenedProducts() { HWY_DYNAMIC_DISPATCH(TestWidenedProducts)(); }
void DispatchSoftmaxHelpers() { HWY_DYNAMIC_DISPATCH(TestSoftmaxHelpers)(); }
void DispatchAngles() { HWY_DYNAMIC_DISPATCH(TestAngles)(); }
}  // namespace posenc::cpu

namespace posenc::test {
namespace {

TEST(SimdHelpers, TileGemm) {
  for_each_cpu_target([](const std::string&) { cpu::DispatchTileGemm(); });
}
TEST(SimdHelpers, TransposedSums) {
  for_each_cpu_target([](const std::string&) { cpu::DispatchTransposedSums(); });
}
TEST(SimdHelpers, RowDots) {
  for_each_cpu_target([](const std::string&) { cpu::DispatchRowDots(); });
}
TEST(SimdHelpers, RowDotsAndTileGemmOn16BitRows) {
  for_each_cpu_target([](const std::string&) { cpu::DispatchWidenedProducts(); });
}
TEST(SimdHelpers, ExpShiftSumAndProbsFromLse) {
  for_each_cpu_target([](const std::string&) { cpu::DispatchSoftmaxHelpers(); });
}
TEST(SimdHelpers, RowAnglesAndSinCos) {
  for_each_cpu_target([](const std::string&) { cpu::DispatchAngles(); });
}

// The rotation kernels (RotateHalf, RotateInterleaved in src/cpu/rope.cc) are reached through the
// public API: pairs 1 .. 2N + 1 (rotary_dim 2 .. 4N + 2, the interleaved kernel's vector runs over
// elements, the half kernel's over pairs), head_dim = rotary_dim or + 3 (a copied tail), each row
// starting at offsets 0 .. N - 1 from an aligned buffer; in place and out of place; the backward
// too. Versus ref::rope in double; rows are separated by sentinel gaps.
TEST(SimdHelpers, RopeRotationCountsAndMisalignments) {
  for_each_cpu_target([](const std::string&) {
    const int64_t N = cpu::DispatchFloatLanes();
    const std::vector<int64_t> pos = {5, 1000};
    for (RopeLayout layout : {RopeLayout::half, RopeLayout::interleaved})
      for (int64_t pairs = 1; pairs <= 2 * N + 1; ++pairs)
        for (int64_t extra : {0, 3}) {
          const int64_t R = 2 * pairs, D = R + extra, T = 2, row = D + 1;  // one sentinel between rows
          RopeConfig rc;
          rc.head_dim = D;
          rc.rotary_dim = R;
          rc.layout = layout;
          rc.base = 100;
          const Rope rope(rc);
          std::vector<double> x(static_cast<size_t>(T * D));
          for (int64_t i = 0; i < T * D; ++i) x[i] = value(7, i);
          const std::vector<double> expected =
              ref::rope<double>(rope.frequencies(), layout, D, x, pos, 1, T, 1);
          const std::vector<double> back =
              ref::rope<double>(rope.frequencies(), layout, D, x, pos, 1, T, 1, true);
          for (int64_t misalign = 0; misalign < N; ++misalign)
            for (bool in_place : {true, false}) {
              SCOPED_TRACE(::testing::Message()
                           << rope_layout_name(layout) << " rotary " << R << " head_dim " << D << " misalign "
                           << misalign << (in_place ? " in place" : ""));
              Arena in(T * row, misalign), out(T * row, misalign);
              for (int64_t t = 0; t < T; ++t)
                for (int64_t d = 0; d < D; ++d)
                  in.use(t * row + d, static_cast<float>(x[t * D + d])), out.mark(t * row + d);
              for (bool inverse : {false, true}) {
                Arena& dst = in_place ? in : out;
                if (inverse && in_place)  // restore the input
                  for (int64_t t = 0; t < T; ++t)
                    for (int64_t d = 0; d < D; ++d) *in.at(t * row + d) = static_cast<float>(x[t * D + d]);
                const TensorView src_v = strided_view(in.at(0), {1, T, 1, D}, {T * row, row, D, 1});
                const TensorView dst_v = strided_view(dst.at(0), {1, T, 1, D}, {T * row, row, D, 1});
                const ConstTensorView pv = view(pos.data(), {T});
                if (!inverse)
                  in_place ? rope.forward(dst_v, pv) : rope.forward(src_v, dst_v, pv);
                else
                  in_place ? rope.backward(dst_v, pv) : rope.backward(src_v, dst_v, pv);
                const std::vector<double>& want = inverse ? back : expected;
                for (int64_t t = 0; t < T; ++t)
                  for (int64_t d = 0; d < D; ++d)  // fp32 rotation of O(1) values: a few ulp
                    ASSERT_NEAR(*dst.at(t * row + d), want[t * D + d], 2e-6)
                        << "t " << t << " d " << d << " inverse " << inverse;
                ASSERT_TRUE(in.untouched_outside());
                ASSERT_TRUE(out.untouched_outside());
              }
            }
        }
  });
}

}  // namespace
}  // namespace posenc::test
#endif  // HWY_ONCE
