// src/cpu/tile_gemm-inl.h: the one small matrix product of the attention kernels, per target.
//   C (m x n) = [C +] alpha * A (m x k) * B (k x n)
// A is read element by element with any strides (so A^T costs nothing), B row by row (unit
// stride within a row), C row by row. Register blocking: up to 6 rows of A times 1 to 8 vectors of
// B columns, as many as the target's registers hold (GemmBlockRows).
#if defined(POSENC_CPU_TILE_GEMM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_CPU_TILE_GEMM_INL_H_
#undef POSENC_CPU_TILE_GEMM_INL_H_
#else
#define POSENC_CPU_TILE_GEMM_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"
#include "src/cpu/half-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct GemmArgs {
  int64_t m, n, k;
  const float* a;
  int64_t a_row, a_col;  // element (i, l) at a[i * a_row + l * a_col]
  const float* b;
  int64_t ldb;  // row l at b + l * ldb
  float* c;
  int64_t ldc;
  float alpha;
  bool accumulate;
  // B in bf16 / fp16 storage instead (b null), widened as it is loaded: a decode step's P V reads
  // each value row once, so widening it into a tile first would cost a store and a load per element.
  // Only where WidensVectors(b16_dtype).
  const uint16_t* b16 = nullptr;
  DType b16_dtype = DType::f32;
};

template <int kRows, int kVectors, bool kB16>
HWY_INLINE void GemmBlock(const GemmArgs& g, int64_t i, int64_t j) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  V acc[kRows][kVectors];
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVectors; ++v) acc[r][v] = hn::Zero(d);
  const float* a = g.a + i * g.a_row;
  // k = 0: B may be an empty (null) buffer, and no offset is applied to it.
  const float* b = kB16 || g.k == 0 ? nullptr : g.b + j;
  [[maybe_unused]] const uint16_t* b16 = kB16 && g.k > 0 ? g.b16 + j : nullptr;
  for (int64_t l = 0; l < g.k; ++l, a += g.a_col) {
    if constexpr (kRows == 1) {  // each B vector used once: loaded next to its FMA (no register for all)
      const V ar = hn::Set(d, a[0]);
      for (int v = 0; v < kVectors; ++v) {
#if POSENC_STORAGE_VECTORS
        if constexpr (kB16) {
          acc[0][v] = hn::MulAdd(ar, WidenVector(d, g.b16_dtype, b16 + l * g.ldb + v * N), acc[0][v]);
          continue;
        }
#endif
        acc[0][v] = hn::MulAdd(ar, hn::LoadU(d, b + l * g.ldb + v * N), acc[0][v]);
      }
      continue;
    }
    V bv[kVectors];
    for (int v = 0; v < kVectors; ++v) {
#if POSENC_STORAGE_VECTORS
      if constexpr (kB16) {
        bv[v] = WidenVector(d, g.b16_dtype, b16 + l * g.ldb + v * N);
        continue;
      }
#endif
      bv[v] = hn::LoadU(d, b + l * g.ldb + v * N);
    }
    for (int r = 0; r < kRows; ++r) {
      const V ar = hn::Set(d, a[r * g.a_row]);
      for (int v = 0; v < kVectors; ++v) acc[r][v] = hn::MulAdd(ar, bv[v], acc[r][v]);
    }
  }
  const V alpha = hn::Set(d, g.alpha);
  for (int r = 0; r < kRows; ++r) {
    float* c = g.c + (i + r) * g.ldc + j;
    for (int v = 0; v < kVectors; ++v) {
      V out = hn::Mul(acc[r][v], alpha);
      if (g.accumulate) out = hn::Add(out, hn::LoadU(d, c + v * N));
      hn::StoreU(out, d, c + v * N);
    }
  }
}

// The target's vector registers, and the most rows of A a block takes: 6 x 2 vectors on the
// 16-register targets (BLIS's Haswell micro-kernel shape: 12 accumulators, 2 B vectors and a
// broadcast), 4 x 4 on AVX-512 (measured there, BENCHMARKS.md).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kGemmRegisters = 16, kGemmMaxRows = 6;
#else
constexpr int kGemmRegisters = 32, kGemmMaxRows = 4;
#endif
// The rows of a block of kVectors B vectors: its accumulators, its B vectors and a broadcast in registers.
// One row needs only one B vector at a time (each is used once), so 8 accumulators fit 16 registers: a
// decode step's P V of one row per kv head, 4 vectors wide, was bound by the FMA latency of 4 chains.
constexpr int GemmBlockRows(int kVectors) {
  const int fit = (kGemmRegisters - kVectors - 1) / kVectors;
  if (fit == 0 && kVectors + 2 <= kGemmRegisters) return 1;
  return fit < kGemmMaxRows ? fit : kGemmMaxRows;
}

// Rows [i, m) of A, fewer than a whole block, times the column block at j.
template <int kRows, int kVectors, bool kB16>
HWY_INLINE void GemmLastRows(const GemmArgs& g, int64_t i, int64_t j) {
  if constexpr (kRows > 0) {
    if (g.m - i == kRows) return GemmBlock<kRows, kVectors, kB16>(g, i, j);
    GemmLastRows<kRows - 1, kVectors, kB16>(g, i, j);
  }
}

// Columns [j, j + kVectors N) of C for every row: the strip of B they read (k x kVectors N) stays in
// L1 while the blocks of rows pass over it (rows outer, columns inner streamed all of B per block of
// rows: a 64-key tile of K^T is 32 KiB, and the tile products stalled on its loads from L2).
template <int kVectors, bool kB16>
HWY_INLINE void GemmColumns(const GemmArgs& g, int64_t j) {
  constexpr int kRows = GemmBlockRows(kVectors);
  static_assert(kRows > 0, "a block of kVectors B vectors must fit the registers with one row");
  int64_t i = 0;
  for (; i + kRows <= g.m; i += kRows) GemmBlock<kRows, kVectors, kB16>(g, i, j);
  GemmLastRows<kRows - 1, kVectors, kB16>(g, i, j);
}

// The columns in blocks of kVectors B vectors while they last, then narrower ones.
template <int kVectors, bool kB16>
HWY_INLINE void GemmColumnsFrom(const GemmArgs& g, int64_t j) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>()));
  for (; j + kVectors * N <= g.n; j += kVectors * N) GemmColumns<kVectors, kB16>(g, j);
  if constexpr (kVectors > 1) {
    GemmColumnsFrom<kVectors / 2, kB16>(g, j);
  } else {
    for (; j < g.n; ++j)  // scalar tail: no masked accesses past the row (see rope.cc)
      for (int64_t i = 0; i < g.m; ++i) {
        float s = 0;
        for (int64_t l = 0; l < g.k; ++l) {
          const float b = kB16 ? (g.b16_dtype == DType::bf16 ? detail::bf16_to_f32(g.b16[l * g.ldb + j])
                                                             : detail::f16_to_f32(g.b16[l * g.ldb + j]))
                               : g.b[l * g.ldb + j];
          s += g.a[i * g.a_row + l * g.a_col] * b;
        }
        float& c = g.c[i * g.ldc + j];
        c = (g.accumulate ? c : 0.0f) + g.alpha * s;
      }
  }
}

// The widest column blocks whose rows cover the whole of A, or a full block of rows: enough
// independent FMA chains along the k loop (a decode step's P V has 1 to 4 rows), and each row of B
// read in as few passes as fit (at a long cache the rows come from memory: measured, 4 rows over
// 2-vector blocks stalled on 4 passes over each value row). Not inlined: once per target and B type
// rather than at every call site (a dozen block shapes each; inlined, they doubled the compile time of
// the attention kernels), for a call per tile product.
template <bool kB16>
HWY_NOINLINE void TileGemmRows(const GemmArgs& args) {
  const GemmArgs g = args;  // a local copy: stores to C cannot alias its fields, which stay in registers
  const int64_t rows = g.m < kGemmMaxRows ? g.m : kGemmMaxRows;
  if constexpr (GemmBlockRows(8) > 0)
    if (GemmBlockRows(8) >= rows) return GemmColumnsFrom<8, kB16>(g, 0);
  if (GemmBlockRows(4) >= rows) return GemmColumnsFrom<4, kB16>(g, 0);
  GemmColumnsFrom<2, kB16>(g, 0);
}

HWY_INLINE void TileGemm(const GemmArgs& g) {
#if POSENC_STORAGE_VECTORS
  if (g.b16) return TileGemmRows<true>(g);
#endif
  TileGemmRows<false>(g);
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::cpu
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
