// src/cpu/softmax-inl.h: the exp/sum helpers of the attention kernels' softmax, per target: the
// forward's online softmax (attention.cc) and the backward's recomputed probabilities
// (attention_backward.cc). Masked logits are -inf and become probability 0.
//   s (n) f32, any alignment; only s[0, n) is read and written (scalar tails, see rope.cc).
#if defined(POSENC_CPU_SOFTMAX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_CPU_SOFTMAX_INL_H_
#undef POSENC_CPU_SOFTMAX_INL_H_
#else
#define POSENC_CPU_SOFTMAX_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "src/half.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::cpu {
namespace HWY_NAMESPACE {

// max(init, s[0, n)), exact in any order; NaN if any of them is NaN (a NaN logit makes its row NaN,
// wherever it sits: an fp max would drop it or keep it depending on its operand order).
HWY_INLINE float RowMax(const float* HWY_RESTRICT s, int64_t n, float init) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto vmax = hn::Set(d, init);
  auto nan = hn::IsNaN(vmax);
  int64_t j = 0;
  for (; j + N <= n; j += N) {
    const auto x = hn::LoadU(d, s + j);
    vmax = hn::Max(vmax, x);
    nan = hn::Or(nan, hn::IsNaN(x));
  }
  float mx = hn::GetLane(hn::MaxOfLanes(d, vmax));
  bool any_nan = !hn::AllFalse(d, nan);
  for (; j < n; ++j) {
    mx = std::max(mx, s[j]);
    any_nan = any_nan || std::isnan(s[j]);
  }
  return any_nan ? std::numeric_limits<float>::quiet_NaN() : mx;
}

// s[j] = exp(s[j] - shift) for j < n (masked entries, -inf, become 0; NaN stays NaN); returns the sum.
// kRoundBf16 (AttentionConfig::round_probabilities): each exp rounded to the nearest bf16 value, ties
// to even (as vcvtneps2bf16 and detail::f32_to_bf16), kept in fp32; the sum is of the rounded values.
template <bool kRoundBf16 = false>
HWY_INLINE float ExpShiftSum(float* HWY_RESTRICT s, int64_t n, float shift) {
  namespace hn = hwy::HWY_NAMESPACE;
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto vshift = hn::Set(d, shift), neg_inf = hn::Set(d, kMasked);
  auto vsum = hn::Zero(d);
  int64_t j = 0;
  for (; j + N <= n; j += N) {
    const auto x = hn::LoadU(d, s + j);
    // Zero exactly where masked (-inf): a NaN logit stays NaN, as in the scalar tail.
    auto e = hn::IfThenZeroElse(hn::Eq(x, neg_inf), hn::Exp(d, hn::Sub(x, vshift)));
    if constexpr (kRoundBf16) {  // e in [0, 1] here (a NaN row never reaches the softmax)
      const hn::RebindToUnsigned<decltype(d)> du;
      const auto bits = hn::BitCast(du, e);
      const auto odd = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
      e = hn::BitCast(d,
                      hn::And(hn::Add(bits, hn::Add(hn::Set(du, 0x7fffu), odd)), hn::Set(du, 0xffff0000u)));
    }
    hn::StoreU(e, d, s + j);
    vsum = hn::Add(vsum, e);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
  for (; j < n; ++j) {
    s[j] = s[j] == kMasked ? 0.0f : std::exp(s[j] - shift);
    if constexpr (kRoundBf16) s[j] = detail::bf16_to_f32(detail::f32_to_bf16(s[j]));
    sum += s[j];
  }
  return sum;
}

// P = exp(S - lse) in place (0 where masked or where the whole row is masked, lse = -inf).
HWY_INLINE void ProbsFromLse(float* HWY_RESTRICT s, int64_t n, float lse) {
  namespace hn = hwy::HWY_NAMESPACE;
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  if (lse == kMasked) {
    std::fill(s, s + n, 0.0f);
    return;
  }
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  // A probability is at most 1: a recomputed logit can exceed lse by its rounding, and under a huge
  // scale that is an ulp of ~1e31, whose exp overflows (fuzz/corpus/attention: scale 1e30 with ALiBi
  // gave dv = inf). s - lse > 0 is clamped to 0; a NaN stays NaN (a NaN row's gradients stay NaN).
  const auto vlse = hn::Set(d, lse), neg_inf = hn::Set(d, kMasked), zero = hn::Zero(d);
  int64_t j = 0;
  for (; j + N <= n; j += N) {
    const auto x = hn::LoadU(d, s + j);
    const auto e = hn::Sub(x, vlse);
    const auto p = hn::Exp(d, hn::IfThenElse(hn::Gt(e, zero), zero, e));
    hn::StoreU(hn::IfThenZeroElse(hn::Eq(x, neg_inf), p), d, s + j);
  }
  for (; j < n; ++j) {
    const float e = s[j] - lse;
    s[j] = s[j] == kMasked ? 0.0f : std::exp(e > 0 ? 0.0f : e);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::cpu
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
