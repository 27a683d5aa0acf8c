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

// Highway's Exp (hwy/contrib/math/math-inl.h, 1.0.3) for float, with the same bits wherever x <= 177 (every
// float checked; past it Highway's overflows to NaN, this to +inf): on AVX-512 its last step, y 2^(q >> 1)
// 2^(q - (q >> 1)) from the exponent's bits (two multiplies by powers of 2, each exact where its product is
// normal, so that only the last rounds), is one VSCALEFPS: y 2^q rounded once. For x >= -104 (else both
// give 0) q >= -150 and y is in [0.7, 1.5), so that the first product is normal and both give the same
// correctly rounded y 2^q. Other targets: hn::Exp itself.
template <class D>
HWY_INLINE hn::Vec<D> ExpScalef(D d, hn::Vec<D> x) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  static_assert(hn::MaxLanes(D()) == 16, "the AVX-512 path is written for whole vectors");
  const hn::Vec<D> half = hn::Set(d, 0.5f), lower = hn::Set(d, -104.0f), neg_zero = hn::Set(d, -0.0f);
  const hn::Vec<D> one = hn::Set(d, 1.0f), one_over_log2 = hn::Set(d, 1.442695040888963407359924681f);
  const hn::RebindToSigned<D> di;
  // q = x / log(2) rounded half away from zero, truncated to int32, as Highway's
  const auto q = hn::ConvertTo(di, hn::MulAdd(x, one_over_log2, hn::Or(half, hn::And(x, neg_zero))));
  const hn::Vec<D> qf = hn::ConvertTo(d, q);
  hn::Vec<D> r = hn::MulAdd(qf, hn::Set(d, -0.693145751953125f), x);  // ExpReduce
  r = hn::MulAdd(qf, hn::Set(d, -1.428606765330187045e-6f), r);
  const hn::Vec<D> x2 = hn::Mul(r, r), x4 = hn::Mul(x2, x2);  // ExpPoly: Estrin, then r + r^2 p(r)
  const hn::Vec<D> p = hn::MulAdd(
      x4,
      hn::MulAdd(hn::Set(d, 0.000198527617612853646278381f), r, hn::Set(d, 0.00139304355252534151077271f)),
      hn::MulAdd(
          x2,
          hn::MulAdd(hn::Set(d, 0.00833336077630519866943359f), r, hn::Set(d, 0.0416664853692054748535156f)),
          hn::MulAdd(hn::Set(d, 0.166666671633720397949219f), r, hn::Set(d, 0.5f))));
  const hn::Vec<D> y = hn::Add(hn::MulAdd(p, hn::Mul(r, r), r), one);
  return hn::IfThenElseZero(hn::Ge(x, lower), hn::Vec<D>{_mm512_scalef_ps(y.raw, qf.raw)});
#else
  return hn::Exp(d, x);
#endif
}

// ExpScalef of K vectors with each step interleaved across them (each step for every vector before the next
// step), so that the core has K independent chains in flight: the same operations per element, the same
// bits.
template <int K, class D>
HWY_INLINE void ExpScalefK(D d, hn::Vec<D> (&x)[K]) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  static_assert(hn::MaxLanes(D()) == 16, "the AVX-512 path is written for whole vectors");
  using V = hn::Vec<D>;
  const V half = hn::Set(d, 0.5f), lower = hn::Set(d, -104.0f), neg_zero = hn::Set(d, -0.0f);
  const V one = hn::Set(d, 1.0f), one_over_log2 = hn::Set(d, 1.442695040888963407359924681f);
  const hn::RebindToSigned<D> di;
  V qf[K], r[K], x2[K], p[K];
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k)
    qf[k] = hn::ConvertTo(
        d, hn::ConvertTo(di, hn::MulAdd(x[k], one_over_log2, hn::Or(half, hn::And(x[k], neg_zero)))));
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) r[k] = hn::MulAdd(qf[k], hn::Set(d, -0.693145751953125f), x[k]);
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) r[k] = hn::MulAdd(qf[k], hn::Set(d, -1.428606765330187045e-6f), r[k]);
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) x2[k] = hn::Mul(r[k], r[k]);
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k)
    p[k] =
        hn::MulAdd(hn::Mul(x2[k], x2[k]),
                   hn::MulAdd(hn::Set(d, 0.000198527617612853646278381f), r[k],
                              hn::Set(d, 0.00139304355252534151077271f)),
                   hn::MulAdd(x2[k],
                              hn::MulAdd(hn::Set(d, 0.00833336077630519866943359f), r[k],
                                         hn::Set(d, 0.0416664853692054748535156f)),
                              hn::MulAdd(hn::Set(d, 0.166666671633720397949219f), r[k], hn::Set(d, 0.5f))));
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) p[k] = hn::Add(hn::MulAdd(p[k], hn::Mul(r[k], r[k]), r[k]), one);
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k)
    x[k] = hn::IfThenElseZero(hn::Ge(x[k], lower), V{_mm512_scalef_ps(p[k].raw, qf[k].raw)});
#else
  for (int k = 0; k < K; ++k) x[k] = hn::Exp(d, x[k]);
#endif
}

// dst (N, ldd) = the N x N block of rows from src (row i at src + i ld) transposed, in registers: each
// round takes the even lanes of rows 2i and 2i + 1 into row i and their odd lanes into row N/2 + i, which
// moves lane c of row r one bit along the index (r, c); after log2(N) rounds lane r of row c is (r, c).
#if HWY_TARGET != HWY_SCALAR
HWY_INLINE void TransposeBlock(const float* src, int64_t ld, float* dst, int64_t ldd) {
  const DF d;
  constexpr size_t kN = hn::MaxLanes(DF());
  VF r[kN], x[kN];
#pragma GCC unroll 16
  for (size_t i = 0; i < kN; ++i) r[i] = hn::LoadU(d, src + static_cast<int64_t>(i) * ld);
  for (size_t round = 1; round < kN; round *= 2) {
#pragma GCC unroll 16
    for (size_t i = 0; i < kN / 2; ++i) {
      x[i] = hn::ConcatEven(d, r[2 * i + 1], r[2 * i]);
      x[kN / 2 + i] = hn::ConcatOdd(d, r[2 * i + 1], r[2 * i]);
    }
#pragma GCC unroll 16
    for (size_t i = 0; i < kN; ++i) r[i] = x[i];
  }
#pragma GCC unroll 16
  for (size_t i = 0; i < kN; ++i) hn::StoreU(r[i], d, dst + static_cast<int64_t>(i) * ldd);
}
#endif

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

// The lanes of 16 rows' vectors reduced at once, on AVX-512's 16 lanes: lane r of SumsOfLanes16(v) is
// v[r]'s 16 lanes added as SumOfLanes and RowSum's SumOfHalves add them (lane k + lane k + 8, then k + 4,
// k + 2, k + 1: the same bits). Each step combines the halves
// of two rows in one vector (shuffles of 128-bit blocks, then of lanes within them): 15 operations and 30
// shuffles for 16 rows, instead of 16 chains of 4 shuffles and 4 operations, each waiting on the last.
#undef POSENC_LAB_LANE_SUMS16
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
#define POSENC_LAB_LANE_SUMS16 1
HWY_INLINE VF SumsOfLanes16(const VF (&v)[16]) {
  const auto op = [](__m512 a, __m512 b) { return _mm512_add_ps(a, b); };
  // The shuffles below leave the result of input q in lane kRow[q]; kRow is its own inverse, so that
  // input q takes row kRow[q] and row r's result lands in lane r.
  constexpr int kRow[16] = {0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15};
  __m512 l1[8], l2[4], l3[2];
  for (int q = 0; q < 8; ++q) {  // inputs q and q + 8: their lanes k (blocks 0, 1) and k + 8 (blocks 2, 3)
    const __m512 a = v[kRow[q]].raw, b = v[kRow[q + 8]].raw;
    l1[q] = op(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  }
  for (int q = 0; q < 4; ++q)  // blocks 0, 2 against 1, 3: k + 4
    l2[q] = op(_mm512_shuffle_f32x4(l1[q], l1[q + 4], 0x88), _mm512_shuffle_f32x4(l1[q], l1[q + 4], 0xDD));
  for (int q = 0; q < 2; ++q)  // lanes 0, 1 against 2, 3 of each block: k + 2
    l3[q] = op(_mm512_shuffle_ps(l2[q], l2[q + 2], 0x44), _mm512_shuffle_ps(l2[q], l2[q + 2], 0xEE));
  return VF{op(_mm512_shuffle_ps(l3[0], l3[1], 0x88), _mm512_shuffle_ps(l3[0], l3[1], 0xDD))};  // k + 1
}
#else
#define POSENC_LAB_LANE_SUMS16 0
#endif

}  // namespace HWY_NAMESPACE
}  // namespace posenc::lab::kernels
HWY_AFTER_NAMESPACE();

#endif  // POSENC_LAB_KERNELS_INL_H_
