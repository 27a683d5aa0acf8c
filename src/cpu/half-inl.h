// src/cpu/half-inl.h: rows of bf16 / fp16 storage widened to fp32 for the computation and
// narrowed back with one rounding to nearest even, per Highway target. Bit-identical to the scalar
// conversions of src/half.h (tested on every target, tests/test_half.cc). Highway 1.0.3's own
// fp32 -> bf16 demotion truncates, and its fp16 emulation below AVX2 truncates and clamps, so bf16
// is rounded here with integer ops and fp16 uses F16C (round to nearest even) on AVX2 and above,
// the scalar code elsewhere.
#if defined(POSENC_CPU_HALF_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_CPU_HALF_INL_H_
#undef POSENC_CPU_HALF_INL_H_
#else
#define POSENC_CPU_HALF_INL_H_
#endif

#include "hwy/highway.h"
#include "posenc/tensor.h"
#include "src/half.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#undef POSENC_STORAGE_VECTORS
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
#define POSENC_STORAGE_VECTORS 0
#else
#define POSENC_STORAGE_VECTORS 1
#endif

// Whether this target widens `dtype` a vector at a time (WidenVector): bf16 wherever Highway has
// vectors, fp16 from AVX2 (F16C) up.
HWY_INLINE bool WidensVectors(DType dtype) {
#if !POSENC_STORAGE_VECTORS
  (void)dtype;
  return false;
#elif HWY_TARGET <= HWY_AVX2
  return dtype == DType::bf16 || dtype == DType::f16;
#else
  return dtype == DType::bf16;
#endif
}

#if POSENC_STORAGE_VECTORS
// One vector of fp32 from Lanes(df) elements of 16-bit storage at src (exact); WidensVectors(dtype).
template <class DF>
HWY_INLINE hn::Vec<DF> WidenVector(DF df, DType dtype, const uint16_t* HWY_RESTRICT src) {
#if HWY_TARGET <= HWY_AVX2
  if (dtype == DType::f16) {
    const hn::Rebind<hwy::float16_t, DF> df16;
    return hn::PromoteTo(df, hn::LoadU(df16, reinterpret_cast<const hwy::float16_t*>(src)));
  }
#endif
  const hn::Rebind<uint16_t, DF> du16;
  const hn::Rebind<uint32_t, DF> du32;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, src))));
}
#endif

// dst[0, n) = src[0, n) as fp32 (exact).
HWY_INLINE void WidenRow(DType dtype, const uint16_t* HWY_RESTRICT src, int64_t n, float* HWY_RESTRICT dst) {
  int64_t i = 0;
#if POSENC_STORAGE_VECTORS
  const hn::ScalableTag<float> df;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const hn::Rebind<uint32_t, decltype(df)> du32;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  if (dtype == DType::bf16) {
    for (; i + N <= n; i += N)
      hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, src + i)))), df,
                 dst + i);
  }
#if HWY_TARGET <= HWY_AVX2
  if (dtype == DType::f16) {
    const hn::Rebind<hwy::float16_t, decltype(df)> df16;
    for (; i + N <= n; i += N)
      hn::StoreU(hn::PromoteTo(df, hn::LoadU(df16, reinterpret_cast<const hwy::float16_t*>(src + i))), df,
                 dst + i);
  }
#endif
#endif
  if (dtype == DType::bf16)
    for (; i < n; ++i) dst[i] = detail::bf16_to_f32(src[i]);
  else
    for (; i < n; ++i) dst[i] = detail::f16_to_f32(src[i]);
}

// dst[0, n) = src[0, n) rounded to the storage type (nearest even).
HWY_INLINE void NarrowRow(DType dtype, const float* HWY_RESTRICT src, int64_t n, uint16_t* HWY_RESTRICT dst) {
  int64_t i = 0;
#if POSENC_STORAGE_VECTORS
  const hn::ScalableTag<float> df;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const hn::Rebind<uint32_t, decltype(df)> du32;
  const hn::Rebind<int32_t, decltype(df)> di32;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  if (dtype == DType::bf16) {
    const auto bias = hn::Set(du32, 0x7fffu), one = hn::Set(du32, 1u), quiet = hn::Set(du32, 0x40u);
    for (; i + N <= n; i += N) {
      const auto v = hn::LoadU(df, src + i);
      const auto bits = hn::BitCast(du32, v);
      const auto rounded =
          hn::ShiftRight<16>(hn::Add(bits, hn::Add(bias, hn::And(hn::ShiftRight<16>(bits), one))));
      const auto nan = hn::Or(hn::ShiftRight<16>(bits), quiet);
      const auto out = hn::IfThenElse(hn::RebindMask(du32, hn::Ne(v, v)), nan, rounded);
      hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di32, out)), du16, dst + i);  // < 2^16: no saturation
    }
  }
#if HWY_TARGET <= HWY_AVX2
  if (dtype == DType::f16) {
    const hn::Rebind<hwy::float16_t, decltype(df)> df16;
    for (; i + N <= n; i += N)
      hn::StoreU(hn::DemoteTo(df16, hn::LoadU(df, src + i)), df16,
                 reinterpret_cast<hwy::float16_t*>(dst + i));
  }
#endif
#endif
  if (dtype == DType::bf16)
    for (; i < n; ++i) dst[i] = detail::f32_to_bf16(src[i]);
  else
    for (; i < n; ++i) dst[i] = detail::f32_to_f16(src[i]);
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::cpu
HWY_AFTER_NAMESPACE();

#endif  // POSENC_CPU_HALF_INL_H_
