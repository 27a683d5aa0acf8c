// src/cuda/rope-inl.cuh: RoPE's per-element logic on the GPU, as __host__ __device__ functions that the
// host tests (tests/cuda/test_cuda_elements.cc) run against the CPU backend. Plain C++ under g++.
//   A pair (a, b) is rotated by theta (src/cpu/rope.cc RotateHalf / RotateInterleaved, the same FMAs):
//     a' = a cos - b sin = fma(-b, sin, a cos)      b' = b cos + a sin = fma(a, sin, b cos)
//   with cos and sin already multiplied by the attention factor (sin negated for the inverse rotation).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "src/angle.h"
#include "src/host_device.h"

namespace posenc::cuda {

// Positions whose |p + offset| exceeds 2^53 have no exact double angle; the CPU front end refuses them
// before it computes. The GPU cannot read positions back without synchronizing, so its rows at such
// positions are written as NaN: loud in the output, never a silently wrong rotation.
inline constexpr int64_t kMaxAbsDevicePosition = int64_t{1} << 53;

POSENC_HD inline bool position_in_range(int64_t position, int64_t offset) {
  // Both terms are checked first: p + offset cannot overflow once each is within 2^53.
  const int64_t m = kMaxAbsDevicePosition;
  if (position < -m || position > m || offset < -m || offset > m) return false;
  return position + offset >= -m && position + offset <= m;
}

// cos and sin of pair j's angle (position + offset) * inv_freq, formed in double (src/angle.h), times
// scale (the attention factor); sin negated when inverse.
POSENC_HD inline void pair_cos_sin(int64_t position, int64_t offset, double inv_freq, float scale,
                                   bool inverse, float* cos_out, float* sin_out) {
  float s, c;
  detail::sin_cos_of_angle(static_cast<double>(position + offset) * inv_freq, &s, &c);
  *cos_out = c * scale;
  *sin_out = s * (inverse ? -scale : scale);
}

// The rotated pair, rounded as the CPU kernels round it (a product, then one FMA).
struct RotatedPair {
  float a, b;
};
POSENC_HD inline RotatedPair rotated_pair(float a, float b, float c, float s) {
#if defined(__CUDA_ARCH__)
  return {__fmaf_rn(-b, s, __fmul_rn(a, c)), __fmaf_rn(a, s, __fmul_rn(b, c))};
#else
  return {std::fma(-b, s, a * c), std::fma(a, s, b * c)};
#endif
}
POSENC_HD inline void rotate_pair(float a, float b, float c, float s, float* a_out, float* b_out) {
  const RotatedPair r = rotated_pair(a, b, c, s);
  *a_out = r.a;
  *b_out = r.b;
}

POSENC_HD inline float quiet_nan() {
#if defined(__CUDA_ARCH__)
  return __int_as_float(0x7fc00000);
#else
  return std::numeric_limits<float>::quiet_NaN();
#endif
}

}  // namespace posenc::cuda
