// src/cpu/rope.cc: RoPE rotation and sin/cos rows with Highway, dispatched per chunk of rows.
//   tensors: (B, T, H, D) f32, bf16 or fp16 with a unit stride on D; rotary_dim = 2 * pairs <= D.
//   16-bit rows are widened into an fp32 row, rotated there and rounded once on the way back.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/cpu/rope.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/aligned_allocator.h"
#include "src/cpu/angles-inl.h"
#include "src/cpu/rope.h"
#include "src/cpu/half-inl.h"

#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace posenc::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// half layout (NeoX): pair j = (x[j], x[j + P]).
//   out[j]     = x[j] cos_j - x[j+P] sin_j
//   out[j + P] = x[j+P] cos_j + x[j] sin_j
HWY_INLINE void RotateHalf(const float* HWY_RESTRICT cs, const float* HWY_RESTRICT sn, int64_t pairs,
                           const float* in, float* out) {
  const hn::ScalableTag<float> d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  int64_t j = 0;
  for (; j + n <= pairs; j += n) {
    const auto x1 = hn::LoadU(d, in + j), x2 = hn::LoadU(d, in + pairs + j);
    const auto c = hn::Load(d, cs + j), s = hn::Load(d, sn + j);
    hn::StoreU(hn::NegMulAdd(x2, s, hn::Mul(x1, c)), d, out + j);
    hn::StoreU(hn::MulAdd(x1, s, hn::Mul(x2, c)), d, out + pairs + j);
  }
  // Scalar tail: Highway 1.0.3 emulates MaskedLoad/BlendedStore on SSE4/AVX2 with full-width
  // accesses, which would read and rewrite memory past the row (a race with the next row's thread).
  for (; j < pairs; ++j) {
    const float x1 = in[j], x2 = in[pairs + j];
    out[j] = x1 * cs[j] - x2 * sn[j];
    out[pairs + j] = x2 * cs[j] + x1 * sn[j];
  }
}

// interleaved layout (GPT-J): pair j = (x[2j], x[2j+1]). With per-element tables
//   C[e] = cos_{e/2},  S[e] = -sin_{e/2} (e even) or +sin_{e/2} (e odd)
// out = x * C + swap_adjacent(x) * S.
HWY_INLINE void RotateInterleaved(const float* HWY_RESTRICT cx, const float* HWY_RESTRICT sx,
                                  int64_t rotary_dim, const float* in, float* out) {
  const hn::ScalableTag<float> d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  int64_t e = 0;
  if (n >= 2) {  // a single-lane target cannot swap within a vector
    for (; e + n <= rotary_dim; e += n) {
      const auto x = hn::LoadU(d, in + e);
      hn::StoreU(hn::MulAdd(hn::Reverse2(d, x), hn::Load(d, sx + e), hn::Mul(x, hn::Load(d, cx + e))), d,
                 out + e);
    }
  }
  for (; e < rotary_dim; e += 2) {  // scalar tail (see RotateHalf); rotary_dim - e is even
    const float a = in[e], b = in[e + 1];
    out[e] = a * cx[e] + b * sx[e];
    out[e + 1] = b * cx[e + 1] + a * sx[e + 1];
  }
}

void RopeRotateRows(const AngleTable& a, TokenGrid grid, RopeLayout layout, const HeadRows* tensors,
                    int num_tensors, int64_t row_begin, int64_t row_end) {
  const int64_t pairs = a.pairs, rotary_dim = 2 * pairs;
  const int64_t padded = PaddedPairs(pairs);
  // angle | cos | sin (padded), then the per-element tables of the interleaved layout.
  auto scratch = hwy::AllocateAligned<float>(3 * padded + 4 * padded);
  float* angle = scratch.get();
  float* cs = angle + padded;
  float* sn = cs + padded;
  float* cx = sn + padded;
  float* sx = cx + 2 * padded;
  hwy::AlignedFreeUniquePtr<float[]> wide;  // one widened 16-bit row
  for (int i = 0; i < num_tensors; ++i)
    if (tensors[i].dtype != DType::f32 && !wide) wide = hwy::AllocateAligned<float>(2 * padded);
  for (int64_t r = row_begin; r < row_end; ++r) {
    RowAngles(a, grid.rows(), r, angle, padded);
    SinCos(angle, padded, static_cast<float>(a.scale), a.inverse, sn, cs);
    if (layout == RopeLayout::interleaved) {
      for (int64_t j = 0; j < pairs; ++j) {
        cx[2 * j] = cx[2 * j + 1] = cs[j];
        sx[2 * j] = -sn[j];
        sx[2 * j + 1] = sn[j];
      }
      for (int64_t e = rotary_dim; e < 2 * padded; ++e) cx[e] = sx[e] = 0.0f;
    }
    const int64_t b = r / grid.tokens, t = r % grid.tokens;
    for (int i = 0; i < num_tensors; ++i) {
      const HeadRows& x = tensors[i];
      if (x.dtype != DType::f32) {
        for (int64_t h = 0; h < x.in16.extent[2]; ++h) {
          const uint16_t* in = x.in16.at(b, t, h);
          uint16_t* out = x.out16.at(b, t, h);
          WidenRow(x.dtype, in, rotary_dim, wide.get());
          if (layout == RopeLayout::half)
            RotateHalf(cs, sn, pairs, wide.get(), wide.get());
          else
            RotateInterleaved(cx, sx, rotary_dim, wide.get(), wide.get());
          NarrowRow(x.dtype, wide.get(), rotary_dim, out);
          if (out != in && x.dim > rotary_dim)
            std::memcpy(out + rotary_dim, in + rotary_dim,
                        sizeof(uint16_t) * static_cast<size_t>(x.dim - rotary_dim));
        }
        continue;
      }
      for (int64_t h = 0; h < x.in.extent[2]; ++h) {
        const float* in = x.in.at(b, t, h);
        float* out = x.out.at(b, t, h);
        if (layout == RopeLayout::half)
          RotateHalf(cs, sn, pairs, in, out);
        else
          RotateInterleaved(cx, sx, rotary_dim, in, out);
        if (out != in && x.dim > rotary_dim)
          std::memcpy(out + rotary_dim, in + rotary_dim,
                      sizeof(float) * static_cast<size_t>(x.dim - rotary_dim));
      }
    }
  }
}

void SinCosRowsImpl(const AngleTable& a, TokenGrid grid, const SinCosOut& o, int64_t row_begin,
                    int64_t row_end) {
  // No pairs (a 1-wide split sinusoid: only its zero column): nothing to write, and Highway's
  // allocator aborts on a 0-byte request.
  if (a.pairs == 0) return;
  const int64_t padded = PaddedPairs(a.pairs);
  auto scratch = hwy::AllocateAligned<float>(3 * padded);
  float* angle = scratch.get();
  float* sn = angle + padded;
  float* cs = sn + padded;
  for (int64_t r = row_begin; r < row_end; ++r) {
    RowAngles(a, grid.rows(), r, angle, padded);
    SinCos(angle, padded, static_cast<float>(a.scale), a.inverse, sn, cs);
    float* so = o.sin_out.at(r / grid.tokens, r % grid.tokens);
    float* co = o.cos_out.at(r / grid.tokens, r % grid.tokens);
    const int64_t es = o.elem_stride;
    if (o.accumulate) {
      for (int64_t j = 0; j < a.pairs; ++j) {
        so[j * es] += sn[j];
        co[j * es] += cs[j];
      }
    } else {
      for (int64_t j = 0; j < a.pairs; ++j) {
        so[j * es] = sn[j];
        co[j * es] = cs[j];
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "src/cpu/parallel.h"

namespace posenc::cpu {
HWY_EXPORT(RopeRotateRows);
HWY_EXPORT(SinCosRowsImpl);

void rope_rotate(const AngleTable& angles, TokenGrid grid, RopeLayout layout, const HeadRows* tensors,
                 int num_tensors) {
  int64_t work_per_row = 0;
  for (int i = 0; i < num_tensors; ++i)
    work_per_row += (tensors[i].dtype == DType::f32 ? tensors[i].in.extent[2] : tensors[i].in16.extent[2]) *
                    tensors[i].dim;
  parallel_chunks(grid.rows(), work_per_row, [&](int64_t begin, int64_t end) {
    HWY_DYNAMIC_DISPATCH(RopeRotateRows)(angles, grid, layout, tensors, num_tensors, begin, end);
  });
}

void sincos_rows(const AngleTable& angles, TokenGrid grid, const SinCosOut& out) {
  parallel_chunks(grid.rows(), 8 * angles.pairs, [&](int64_t begin, int64_t end) {
    HWY_DYNAMIC_DISPATCH(SinCosRowsImpl)(angles, grid, out, begin, end);
  });
}
}  // namespace posenc::cpu
#endif  // HWY_ONCE
