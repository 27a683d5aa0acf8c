// lab/kernels-inl.h: what the lab's kernel files (kernels.cc, kernels_attention.cc) share per SIMD
// target: the partial loads and stores of a row's last vector, and the register budget of a tile.
#if defined(POSENC_LAB_KERNELS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_LAB_KERNELS_INL_H_
#undef POSENC_LAB_KERNELS_INL_H_
#else
#define POSENC_LAB_KERNELS_INL_H_
#endif

#include <cstddef>
#include <cstring>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::lab::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// The last, partial vector of a row (zeros past `count` when loaded): AVX-512's masked loads and stores
// touch only the lanes they keep; Highway 1.0.3's touch the whole vector on SSE4 / AVX2, past the row's
// end, so there it goes through a buffer on the stack.
template <class D>
HWY_INLINE hn::Vec<D> LoadPart(D d, const float* p, size_t count) {
  if (count == hn::Lanes(d)) return hn::LoadU(d, p);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  return hn::MaskedLoad(hn::FirstN(d, count), d, p);
#else
  HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)] = {};
  std::memcpy(buf, p, count * sizeof(float));
  return hn::Load(d, buf);
#endif
}
template <class D>
HWY_INLINE void StorePart(hn::Vec<D> v, D d, float* p, size_t count) {
  if (count == hn::Lanes(d)) return hn::StoreU(v, d, p);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  hn::BlendedStore(v, hn::FirstN(d, count), d, p);
#else
  HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, count * sizeof(float));
#endif
}

// Register tiles: kRows rows of A times kVecs vectors of B's columns, kRows x kVecs accumulators
// beside the kVecs B vectors and one broadcast of A: 6 x 4 on AVX-512's 32 registers (6 x 64
// columns), 6 x 2 on the 16 of AVX2 and SSE (BLIS's Haswell shape), 8 rows for narrower strips.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int kRegisters = 32, kMaxVecs = 4;
#else
constexpr int kRegisters = 16, kMaxVecs = 2;
#endif
constexpr int TileRows(int vecs) {
  const int fit = (kRegisters - vecs - 1) / vecs;
  return fit < 8 ? fit : 8;
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::lab::kernels
HWY_AFTER_NAMESPACE();

#endif  // POSENC_LAB_KERNELS_INL_H_
