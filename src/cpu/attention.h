// src/cpu/attention.h: the fused attention of the CPU backend, forward and backward. The front end
// (src/attention.cc) validates and builds the device-independent plan (src/attention_plan.h); the
// kernels only read it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "src/attention_plan.h"
#include "src/line_floats.h"
#include "src/strided.h"

namespace posenc::cpu {
using detail::AttentionPlan;
using detail::AttentionProblem;
using detail::kAttentionBlockK;
using detail::kAttentionBlockQ;
using detail::ShawTerms;
using detail::TransformerXLTerms;

// Rows of this many floats hold `width` floats: whole 64-byte lines, an odd number of them, so that
// the rows of a tile fall in every set of the L1 cache. With a power-of-two row stride every row of a
// tile maps to the same few sets: K^T packed (dim, nk) at nk = 4096 (16 KiB between rows) and value
// rows of 8 heads of 128 (4 KiB) stalled the tile products on their loads (AVX2, 32 KiB 8-way L1:
// BENCHMARKS.md, "Tile strides").
constexpr int64_t padded_row_floats(int64_t width) {
  const int64_t lines = (width + 15) / 16;
  return 16 * (lines % 2 ? lines : lines + 1);
}
constexpr int64_t kPackedTileStride = padded_row_floats(kAttentionBlockK);  // 80 floats for 64 keys

using posenc::LineFloats;  // src/line_floats.h

// A key or value tensor transposed per (problem, kv head), in tiles of kAttentionBlockK keys: tile t
// of a head is `dim` rows of kPackedTileStride floats (row d: element d of keys [64 t, 64 t + 64), the
// last tile's missing keys zero), so the tile products read one contiguous block per tile.
// Or (bf16 keys for vdpbf16ps, src/cpu/bf16_dot.h) `pairs` instead of `data`: K^T in pairs of dims,
// key_pairs_size(dim, nk) elements per head.
struct PackedTransposed {
  std::vector<int64_t> offset;
  LineFloats data;
  std::vector<uint16_t> pairs;
  int64_t dim = 0, per_key = 0;  // pairs' elements per key of one head: dim rounded up to even
  // The floats of one head's tiles.
  static int64_t head_floats(int64_t dim, int64_t nk) {
    return (nk + kAttentionBlockK - 1) / kAttentionBlockK * dim * kPackedTileStride;
  }
  const float* head(const AttentionPlan& p, int64_t problem, int64_t hk) const {
    if (data.empty() || offset[problem + 1] == offset[problem]) return nullptr;
    return data.data() + offset[problem] + hk * head_floats(dim, p.problems[problem].nk);
  }
  const uint16_t* head_pairs(const AttentionPlan& p, int64_t problem, int64_t hk) const {
    if (pairs.empty() || offset[problem + 1] == offset[problem]) return nullptr;
    return pairs.data() + offset[problem] + hk * per_key * p.problems[problem].nk;
  }
};
// The tile of keys [kt0, kt0 + 64) (kt0 a multiple of 64) of a head's packed rows: `dim` rows of
// kPackedTileStride floats.
inline const float* packed_tile(const float* head, int64_t dim, int64_t kt0) {
  return head + kt0 / kAttentionBlockK * dim * kPackedTileStride;
}
inline float* packed_tile(float* head, int64_t dim, int64_t kt0) {
  return head + kt0 / kAttentionBlockK * dim * kPackedTileStride;
}
// x: rows (B, K, Hkv) of `dim` (the plan's D for keys, Dv for values). Problems with at most `min_queries`
// queries are left out (head() is null: the kernels read key rows directly, which a decode step against a
// long cache needs, instead of repacking it).
// x16 (non-empty): the rows in the plan's 16-bit storage instead of x, widened while packed, or
// (bf16_pairs) packed as they are into `pairs`.
PackedTransposed pack_transposed(const AttentionPlan& p, Strided<const float, 3> x, int64_t dim,
                                 int64_t min_queries = 0, Strided<const uint16_t, 3> x16 = {},
                                 bool bf16_pairs = false);
// Rows x (B, K, Hkv) of `dim` copied per (problem, kv head), each padded to `stride` =
// padded_row_floats(dim) floats: the B rows of the tile products (the forward's values, the
// backward's keys), copied once per call rather than by every task that reads them. Problems with
// fewer than `min_queries` queries are left out (head() is null): a few queries read each row once
// or twice, not worth a copy of the cache (chunked prefill against a long cache: 64 queries or more).
struct PackedRows {
  std::vector<int64_t> offset;
  LineFloats data;
  int64_t stride = 0;
  const float* head(const AttentionPlan& p, int64_t problem, int64_t hk) const {
    if (data.empty() || offset[problem + 1] == offset[problem]) return nullptr;
    return data.data() + offset[problem] + hk * stride * p.problems[problem].nk;
  }
};
PackedRows pack_rows(const AttentionPlan& p, Strided<const float, 3> x, int64_t dim, int64_t min_queries);

// Up to this many queries, the forward reads key rows instead of packing K^T.
constexpr int64_t kRowDotQueries = 4;

// The tasks of a pass: (problem, head, block of 64 queries or, by_keys, of 64 keys), in an order
// that keeps one head's work together.
struct AttentionTask {
  int64_t problem, head, block;
  int64_t heads = 1;  // heads [head, head + heads) together
};
std::vector<AttentionTask> attention_tasks(const AttentionPlan& p, int64_t heads, bool by_keys);

// The partial result of one split of the keys: rows ((h - h0) m + i) of O (unnormalized, Dv each),
// m (running max) and l (sum of exp(s - m)).
struct SplitPartial {
  float* O;
  float* m;
  float* l;
};

struct AttentionForwardOut {
  Strided<float, 3> out;       // rows (B, Q, H) of Dv elements (fp32 out)
  Strided<uint16_t, 3> out16;  // the same rows in bf16 / fp16 storage (out_dtype), rounded once
  DType out_dtype = DType::f32;
  Strided<float, 3> lse;  // (B, H, Q), or empty
};
void attention_forward(const AttentionPlan& plan, const AttentionForwardOut& out);

// The backward (FlashAttention-2, Dao 2023, Algorithm 2, in two race-free passes): per key block,
// dK and dV; per query block, dQ and the positional parameter gradients. Tiles are recomputed
// from lse; nothing S x S is stored.
struct AttentionBackwardIO {
  Strided<const float, 3> out;       // rows (B, Q, H) of Dv
  Strided<const float, 3> lse;       // (B, H, Q)
  Strided<const float, 3> grad_out;  // rows (B, Q, H) of Dv
  // Outputs, contiguous, overwritten: dq (B, Q, H, D) w.r.t. the plan's q; dk (B, K, Hkv, D);
  // dv (B, K, Hkv, Dv).
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  // Accumulated (+=) when non-null, contiguous:
  float* relative_table = nullptr;        // (rows, H) with bias->rows_config
  float* shaw_a_k = nullptr;              // (rows, D)
  float* shaw_a_v = nullptr;              // (rows, D)
  double* transformer_xl_u = nullptr;     // (H, D)
  double* transformer_xl_v = nullptr;     // (H, D)
  float* transformer_xl_rproj = nullptr;  // (H, n, D)
  double* sinks = nullptr;                // (H)
};
void attention_backward(const AttentionPlan& plan, const AttentionBackwardIO& io);

// Per-query sums of pass 2 that outlive a task (reduced in a fixed order afterwards).
struct QuerySums {
  float* shaw_gk = nullptr;          // (B*Q, H, rows): sum_j dS_ij over r_ij = r
  float* shaw_pb = nullptr;          // (B*Q, H, rows): sum_j P_ij over r_ij = r
  float* relative = nullptr;         // (tasks, rows) of this task: sum of dS per table row
  const int32_t* row_lut = nullptr;  // table row of distance lut_lo + x, or null: computed
};

// out (B, Q, H, dim) contiguous = rows q (B, Q, H) of dim elements, each times factor[b * Q + t].
void scale_query_rows(Strided<const float, 3> q, int64_t dim, const std::vector<float>& factor, float* out);
// out (B, T, H, dim) contiguous = rows x (B, T, H) of dim elements.
void copy_rows(Strided<const float, 3> x, int64_t dim, float* out);
// out (B, T, H, dim) contiguous fp32 = rows x (B, T, H) of dim bf16 or fp16 elements, widened.
void widen_rows(Strided<const uint16_t, 3> x, DType dtype, int64_t dim, float* out);

// dst (A, B, C, D), any strides, += src of the same extents, contiguous (add false: dst = src): how the
// front end adds (or writes) the backward's contiguous gradients into the caller's views.
void accumulate_into(Strided<float, 4> dst, const float* src, bool add = true);
// The same into bf16 / fp16 storage: each element widened, added to in fp32, rounded once.
void accumulate_into(Strided<uint16_t, 4> dst, DType dtype, const float* src, bool add = true);

}  // namespace posenc::cpu
