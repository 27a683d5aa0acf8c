// src/cpu/angles-inl.h: per-row angles and their sin/cos, for every Highway target.
// Angles are formed and reduced to [-pi, pi] in double, then converted to float: fp32 sin/cos
// stay accurate at any position (Highway's Sin/Cos lose accuracy past |x| ~ 39000 on non-FMA
// targets, and a float angle itself is off by up to 0.03 rad at position 2^20).
#if defined(POSENC_CPU_ANGLES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_CPU_ANGLES_INL_H_
#undef POSENC_CPU_ANGLES_INL_H_
#else
#define POSENC_CPU_ANGLES_INL_H_
#endif

#include <cmath>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "src/angle.h"
#include "src/cpu/rope.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// angle[j] for row n, reduced to [-pi, pi]; entries [pairs, padded) are zero.
HWY_INLINE void RowAngles(const AngleTable& a, int64_t rows, int64_t n, float* HWY_RESTRICT angle,
                          int64_t padded) {
  using detail::reduce_angle;  // x - 2 pi round(x / 2 pi), src/angle.h (the CUDA backend's too)
  if (a.stream == nullptr) {   // one position stream: a loop the compiler vectorises for the target
    const double p = static_cast<double>(a.positions[n] + a.position_offset);
    for (int64_t j = 0; j < a.pairs; ++j) angle[j] = reduce_angle(p * a.inv_freq[j]);
  } else {
    for (int64_t j = 0; j < a.pairs; ++j)
      angle[j] = reduce_angle(static_cast<double>(a.positions[a.stream[j] * rows + n] + a.position_offset) *
                              a.inv_freq[j]);
  }
  for (int64_t j = a.pairs; j < padded; ++j) angle[j] = 0.0f;
}

// sin/cos of `padded` angles (a multiple of the vector length), times scale; sin negated if inverse.
HWY_INLINE void SinCos(const float* HWY_RESTRICT angle, int64_t padded, float scale, bool inverse,
                       float* HWY_RESTRICT sin_out, float* HWY_RESTRICT cos_out) {
  const hn::ScalableTag<float> d;
  const auto vscale = hn::Set(d, scale);
  const auto vsin_scale = hn::Set(d, inverse ? -scale : scale);
  // Highway's fp32 Sin/Cos can return 1 + 2^-23 near the extrema (e.g. sinusoidal position 291,
  // found by hypothesis): clamped to [-1, 1], two ops beside the polynomials.
  const auto one = hn::Set(d, 1.0f), minus_one = hn::Set(d, -1.0f);
  for (int64_t j = 0; j < padded; j += static_cast<int64_t>(hn::Lanes(d))) {
    const auto x = hn::Load(d, angle + j);
    const auto s = hn::Min(hn::Max(hn::Sin(d, x), minus_one), one);
    const auto c = hn::Min(hn::Max(hn::Cos(d, x), minus_one), one);
    hn::Store(hn::Mul(s, vsin_scale), d, sin_out + j);
    hn::Store(hn::Mul(c, vscale), d, cos_out + j);
  }
}

HWY_INLINE int64_t PaddedPairs(int64_t pairs) {
  const hn::ScalableTag<float> d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  return (pairs + n - 1) / n * n;
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::cpu
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
