// src/half.h: bf16 and fp16 storage <-> fp32, scalar, with one rounding to nearest even (IEEE 754
// roundTiesToEven) on the way down. The kernels' vector paths (src/cpu/half-inl.h) must give the
// same bits; these are their tails, the path of targets without F16C, the CUDA backend's conversions
// (src/cuda/), and the tests' oracle.
//   bf16: 1 sign, 8 exponent, 7 mantissa bits (the top half of an fp32); unit roundoff 2^-8.
//   fp16: 1 sign, 5 exponent, 10 mantissa bits; max 65504, subnormals down to 2^-24; unit roundoff 2^-11.
#pragma once
#include <cstdint>
#include <cstring>

#include "src/host_device.h"

namespace posenc::detail {

POSENC_HD inline uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
#endif
}
POSENC_HD inline float f32_from_bits(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
#endif
}

POSENC_HD inline float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

POSENC_HD inline uint16_t f32_to_bf16(float f) {
  const uint32_t b = f32_bits(f);
  if ((b & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((b >> 16) | 0x40u);                     // NaN stays a quiet NaN
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);  // ties to even; overflow gives inf
}

POSENC_HD inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant x 2^-24, exact in fp32
    const float m = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -m : m;
  }
  if (exp == 31)  // inf; NaN quieted with its payload kept (as F16C's vcvtph2ps)
    return f32_from_bits(sign | 0x7f800000u | (mant ? 0x400000u : 0u) | (mant << 13));
  return f32_from_bits(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

// fp32 -> fp16, round to nearest even (F. Giesen's float_to_half_fast3_rtne): subnormal results by
// an fp32 addition that aligns the 10 mantissa bits (the hardware rounds it to nearest even),
// normal ones by adding half an fp16 ulp minus one plus the mantissa's lowest kept bit.
POSENC_HD inline uint16_t f32_to_f16(float f) {
  uint32_t b = f32_bits(f);
  const uint32_t sign = b & 0x80000000u;
  b ^= sign;
  uint32_t o;
  if (b >= (127u + 16u) << 23) {  // beyond fp16's range after rounding: inf, or NaN
    o = b > 0x7f800000u ? 0x7e00u | ((b >> 13) & 0x3ffu) : 0x7c00u;
  } else if (b < 113u << 23) {  // exponent below -14: a subnormal fp16 or zero
    const uint32_t magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    o = f32_bits(f32_from_bits(b) + f32_from_bits(magic)) - magic;
  } else {
    const uint32_t odd = (b >> 13) & 1u;
    b += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + odd;
    o = b >> 13;
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}

}  // namespace posenc::detail
