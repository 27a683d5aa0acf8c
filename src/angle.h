// src/angle.h: sin and cos of a rotary angle position * inv_freq formed in double and reduced there, so
// that fp32 sin / cos stay accurate at any position (a float angle is off by up to 0.03 rad at position
// 2^20; __sinf-style float reductions drift to 1e-2 at 131k). The CPU backend reduces to [-pi, pi] in
// double and takes Highway's fp32 Sin / Cos (src/cpu/angles-inl.h); the CUDA backend computes both in
// double and rounds once (sin_cos_of_angle), with no call into CUDA's sincosf and its local-memory
// Payne-Hanek path.
#pragma once
#include <cmath>
#include <cstdint>

#include "src/host_device.h"

namespace posenc::detail {

// 2*pi = kTwoPiHi + kTwoPiLo to ~2^-106: the Cody-Waite reduction is exact for |angle| < 2^40, and
// within a few double ulps of the angle beyond (positions are at most 2^53, where the angle itself is
// only as exact as the product).
inline constexpr double kTwoPiHi = 6.283185307179586;
inline constexpr double kTwoPiLo = 2.4492935982947064e-16;
inline constexpr double kInvTwoPi = 0.15915494309189535;

// angle - 2 pi round(angle / 2 pi), rounded once to float. Each operation rounds as written on both
// devices (no contraction into FMAs: the CPU build passes -ffp-contract=off, the device path uses
// explicitly rounded intrinsics), so the two backends reduce to the same bits.
POSENC_HD inline float reduce_angle(double angle) {
#if defined(__CUDA_ARCH__)
  const double k = rint(__dmul_rn(angle, kInvTwoPi));
  return __double2float_rn(__dsub_rn(__dsub_rn(angle, __dmul_rn(k, kTwoPiHi)), __dmul_rn(k, kTwoPiLo)));
#else
  const double k = std::nearbyint(angle * kInvTwoPi);
  return static_cast<float>((angle - k * kTwoPiHi) - k * kTwoPiLo);
#endif
}

// angle = k pi/2 + r with |r| <= ~pi/4: Cody-Waite with pi/2 = kPiOver2Hi + kPiOver2Lo (to ~2^-106) and
// FMAs, so r is within a double ulp of the exact remainder for |angle| up to 2^53.
inline constexpr double kPiOver2Hi = 1.5707963267948966;
inline constexpr double kPiOver2Lo = 6.123233995736766e-17;
inline constexpr double kTwoOverPi = 0.6366197723675814;

POSENC_HD inline double fma_d(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// sin and cos of `angle`, each rounded once to float: the remainder's Taylor series to r^13 / r^16
// (truncation below 2^-44 for |r| <= pi/4) in double, then the quadrant's signs. The same bits on the
// host and the device (every operation an IEEE multiply, add or fused multiply-add). A second reduction
// pass keeps |r| <= ~pi/4 where the first quotient k is past 2^53 (angles of up to 2^101 are reachable:
// positions to 2^53 times frequencies to 2^48), and the quadrant is k mod 4 taken exactly in double, so
// the results stay in [-1, 1] at any angle (accurate while k * 2^-106 is small: |angle| up to ~2^70).
POSENC_HD inline double round_to_integer(double x) {
#if defined(__CUDA_ARCH__)
  return rint(x);
#else
  return std::nearbyint(x);
#endif
}

POSENC_HD inline void sin_cos_of_angle(double angle, float* sin_out, float* cos_out) {
  const double k = round_to_integer(angle * kTwoOverPi);
  const double r1 = fma_d(-k, kPiOver2Lo, fma_d(-k, kPiOver2Hi, angle));
  const double k2 = round_to_integer(r1 * kTwoOverPi);  // 0 unless k was past 2^53; then below 2^53
  const double r = fma_d(-k2, kPiOver2Lo, fma_d(-k2, kPiOver2Hi, r1));
  const double z = r * r;
  double sp = 1.0 / 6227020800.0;  // 1/13!
  sp = fma_d(sp, z, -1.0 / 39916800.0);
  sp = fma_d(sp, z, 1.0 / 362880.0);
  sp = fma_d(sp, z, -1.0 / 5040.0);
  sp = fma_d(sp, z, 1.0 / 120.0);
  sp = fma_d(sp, z, -1.0 / 6.0);
  const double sin_r = fma_d(sp * z, r, r);
  double cp = 1.0 / 20922789888000.0;  // 1/16!
  cp = fma_d(cp, z, -1.0 / 87178291200.0);
  cp = fma_d(cp, z, 1.0 / 479001600.0);
  cp = fma_d(cp, z, -1.0 / 3628800.0);
  cp = fma_d(cp, z, 1.0 / 40320.0);
  cp = fma_d(cp, z, -1.0 / 720.0);
  cp = fma_d(cp, z, 1.0 / 24.0);
  cp = fma_d(cp, z, -0.5);
  const double cos_r = fma_d(cp, z, 1.0);
  // k mod 4 exactly for any integer-valued double (k / 4 and its floor are exact), and k2's.
  const double k_mod_4 = k - 4.0 * floor(k * 0.25), k2_mod_4 = k2 - 4.0 * floor(k2 * 0.25);
  const int quadrant = (static_cast<int>(k_mod_4) + static_cast<int>(k2_mod_4)) & 3;
  const double s = quadrant == 0 ? sin_r : quadrant == 1 ? cos_r : quadrant == 2 ? -sin_r : -cos_r;
  const double c = quadrant == 0 ? cos_r : quadrant == 1 ? -sin_r : quadrant == 2 ? -cos_r : sin_r;
  *sin_out = static_cast<float>(s);
  *cos_out = static_cast<float>(c);
}

}  // namespace posenc::detail
