// src/cpu/attention.cc: fused attention forward (FlashAttention-style online softmax, Dao et al.
// 2022, Algorithm 1) with the positional terms added per tile. Per task, one (problem, head, query
// block):   for each key tile:  S = logits (attention_tile-inl.h);  m' = max(m, rowmax S);
//   P = exp(S - m');  l = e^(m - m') l + rowsum P;  O = e^(m - m') O + P V
//   (Shaw: Pb[i, r] = e^(m - m') Pb[i, r] + sum_{j: r_ij = r} P_ij, the probability per clipped
//   distance, and O += Pb a_v at the end)
// then out = O / l, lse = m + log l. Sinks (gpt-oss) start each row at m = sink_h, l = 1. Memory: O(block)
// per task, O(K * D) for the packed K^T.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/cpu/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "src/cpu/attention.h"
#include "src/cpu/attention_tile-inl.h"
#include "src/cpu/bf16_dot.h"
#include "src/cpu/half-inl.h"
#include "src/cpu/softmax-inl.h"

#include <algorithm>
#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace posenc::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The running state of one query block of one head: Shaw's Pb (m x rows), m and l; its rows of O
// and of the logits are rows [row0, row0 + m) of the task's (a decode step stacks the heads of one
// kv group, so that each key and value row is loaded once for all of them).
struct OnlineSoftmax {
  QueryBlock qb;
  Bf16Queries q16;  // the bf16 dot path's query parts
  int64_t row0 = 0;
  std::vector<float> Pb;
  float mrow[kAttentionBlockQ], lrow[kAttentionBlockQ];
};

// Whether this target can compute the logits of the plan's bf16 keys with vdpbf16ps
// (src/cpu/bf16_dot.h): the AVX-512 target on a CPU with AVX512_BF16 (the lower targets keep their
// widening path, which the tests also run on such a CPU). Not for keys RoPE rotated into fp32 (k16
// empty). The caller also requires every query to be a bf16 value (one part per query: with three,
// vdpbf16ps does 1.5 instructions per element where widening keys for FMAs does 1).
bool CanUseBf16Dots(const AttentionPlan& p) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3  // AVX3 and any better x86 target
  return p.storage == DType::bf16 && !p.k16.empty() && bf16_dot_available();
#else
  (void)p;
  return false;
#endif
}

// Whether this target computes P V with vdpbf16ps: with round_probabilities (every probability a bf16
// value, so the products are exact, src/cpu/bf16_dot.h) on the plan's bf16 values, on the targets of
// CanUseBf16Dots and the CPUs where it pays (bf16_value_dots_available). Whatever the keys (RoPE's
// fp32 keys too) and the queries.
bool CanUseBf16ValueDots(const AttentionPlan& p) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  return p.round_probabilities && p.storage == DType::bf16 && !p.v16.empty() && bf16_value_dots_available();
#else
  (void)p;
  return false;
#endif
}

// A decode step streams its keys and values from memory once, and the per-key work between the
// loads leaves the hardware prefetcher behind: rows this far ahead of those being read are requested
// (measured: 32 rows, 8 KiB of a head's bf16 keys and values, turned 74 ns per key and head at a 32k
// bf16 cache into 62; 64 and 128 rows ahead, or L2 and non-temporal hints, gained nothing).
constexpr int64_t kPrefetchRows = 32;
// Keys per chunk of a decode step's q.k pass, each chunk issuing its rows' prefetches: one burst per
// 64-key tile (512 requests for a bf16 head of 128) stalled on the full miss queue with nothing to
// overlap (32k bf16 cache, 8 / 8 heads, 2 threads: 10.4 -> 8.3 ms a step with this and RowDotsBlock's
// chains, BENCHMARKS.md; spread alone measured 10.1 -> 7.1 ms in one earlier pair of runs).
// A multiple of every RowDotsBlock's and bf16 row block's keys.
constexpr int64_t kPrefetchChunk = 16;
inline void PrefetchRow(const void* row, int64_t bytes) {
  const char* p = static_cast<const char*>(row);
  for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(p + i);  // one per 64-byte line
}

// Heads [h0, h1) of one key/value group advance through the key tiles in lockstep, so a tile of
// K and V is read from memory once for all of them (decode with grouped-query attention); other
// tasks have one head. Keys [k_begin, k_end) of the problem: all of them, or one split of a decode
// step's cache (flash-decoding), whose unnormalized O, m and l go to `split` for the merge.
// kt: K^T of the kv head (fp32 or, kt_pairs, bf16 pairs), or null for a decode step's key rows.
// v_rows: the kv head's fp32 value rows packed with v_rows_stride (PackedRows), or null to read them
// where they are.
// bf16_dots: K^T packed in bf16 pairs (CanUseBf16Dots and every query a bf16 value). dot_keys:
// CanUseBf16Dots, read once per call (a decode step's key rows then take vdpbf16ps where its query
// rows are bf16 values). value_dots: CanUseBf16ValueDots, read once per call.
void ForwardTask(const AttentionPlan& p, const AttentionForwardOut& o, const float* kt,
                 const uint16_t* kt_pairs, const float* v_rows, int64_t v_rows_stride, bool bf16_dots,
                 bool dot_keys, bool value_dots, int64_t problem, int64_t h0, int64_t h1, int64_t block,
                 int64_t k_begin, int64_t k_end, const SplitPartial* split) {
  const AttentionProblem& pr = p.problems[problem];
  const int64_t Dv = p.Dv;
  const int64_t* kpos = p.k_pos.data() + pr.b * p.K + pr.k0;
  const int64_t rows = p.shaw ? p.shaw->rows : 0;
  const bool shaw_values = p.shaw && p.shaw->a_v;
  std::vector<OnlineSoftmax> heads(static_cast<size_t>(h1 - h0));
  int64_t R = 0;  // the task's query rows, all heads
  for (int64_t h = h0; h < h1; ++h) {
    OnlineSoftmax& st = heads[h - h0];
    st.qb = MakeQueryBlock(p, problem, h, block * kAttentionBlockQ);
    PrepareQueryBlock(p, st.qb);
    if (bf16_dots) split_queries(st.qb.q, p.q.stride[1], st.qb.m, p.D, st.q16);
    st.row0 = R;
    R += st.qb.m;
    st.Pb.assign(shaw_values ? static_cast<size_t>(st.qb.m * rows) : 0, 0.0f);
    // A sink is one more softmax entry with no value: the running max starts at it, with weight 1
    // (in the first split only).
    const bool sink = !p.sinks.empty() && k_begin == 0;
    std::fill(st.mrow, st.mrow + st.qb.m, sink ? p.sinks[h] : kNegInf);
    std::fill(st.lrow, st.lrow + st.qb.m, sink ? 1.0f : 0.0f);
  }
  const int64_t hk = heads[0].qb.hk;
  std::vector<float> O(static_cast<size_t>(R * Dv), 0.0f), S(static_cast<size_t>(R * kAttentionBlockK));
  const bool key_rows = !kt && !kt_pairs;  // a decode step: key rows read in place
  // P V by vdpbf16ps in prefill tasks only: a decode step's few rows would pay a packing per tile for
  // little reuse (not measured).
  value_dots = value_dots && !key_rows;
  // The q rows of a stacked group, contiguous (one head: its rows where they are).
  std::vector<float> q_group;
  const float* q_rows = heads[0].qb.q;
  int64_t q_stride = p.q.stride[1];
  if (key_rows && heads.size() > 1) {
    q_group.resize(static_cast<size_t>(R * p.D));
    for (const OnlineSoftmax& st : heads)
      for (int64_t i = 0; i < st.qb.m; ++i)
        std::copy_n(st.qb.q + i * p.q.stride[1], p.D, q_group.data() + (st.row0 + i) * p.D);
    q_rows = q_group.data(), q_stride = p.D;
  }
  // Their q.k by vdpbf16ps when every query row of the task is a bf16 value (one part). With three
  // parts it measured no faster than widened keys (4 query rows per kv head, 32k bf16 cache: 40-48
  // vs 41-46 ns per key and head) and slower for one row (72 vs 50 ns), so those widen instead.
  Bf16Queries q16_rows;
  if (key_rows && dot_keys) split_queries(q_rows, q_stride, R, p.D, q16_rows);
  const bool row_dots = q16_rows.parts == 1;
  // 16-bit rows of up to kRowDotQueries query rows are widened inside the q.k and P V products
  // (WidensVectors); more rows share each tile widened once (k_tile, v_tile).
  const bool widen_in_products = R <= kRowDotQueries && WidensVectors(p.storage);
  const bool widen_keys = key_rows && p.k16.data && !row_dots && !widen_in_products;
  const bool widen_values = p.v16.data && !widen_in_products && !value_dots;
  const int64_t v_tile_stride = padded_row_floats(Dv);
  std::vector<float> k_tile(widen_keys ? static_cast<size_t>(kAttentionBlockK * p.D) : 0),
      v_tile(widen_values ? static_cast<size_t>(kAttentionBlockK * v_tile_stride) : 0);
  // value_dots: each tile's value rows in pairs, packed once for every query row of the task.
  static_assert(kAttentionBlockK <= 64, "bf16_tile_values pairs the probabilities of at most 64 keys");
  std::vector<uint16_t> v_pairs(value_dots ? static_cast<size_t>(value_pairs_size(Dv, kAttentionBlockK)) : 0);
  const int64_t k_bytes = p.D * (p.k16.data ? 2 : 4), v_bytes = Dv * (p.v16.data ? 2 : 4);
  std::vector<float> scratch;

  for (int64_t kt0 = k_begin; kt0 < k_end; kt0 += kAttentionBlockK) {
    const int64_t n = std::min(kAttentionBlockK, k_end - kt0);
    const KeyRange keys = TileKeyRange(kpos + kt0, n);
    if (!TileVisible(p, heads[0].qb, keys)) continue;  // half the tiles under a causal mask
    const int64_t key = pr.k0 + kt0;                   // the tile's first key row in the plan
    // S = the logits of every query row of the task.
    if (kt_pairs) {
      for (int64_t j = 0; j < n && widen_values; ++j)
        WidenRow(p.storage, p.v16.at(pr.b, key + j, hk), Dv, v_tile.data() + j * v_tile_stride);
      for (OnlineSoftmax& st : heads)
        bf16_tile_logits(st.q16, p.D, kt_pairs, pr.nk, kt0, n, p.scale, S.data() + st.row0 * kAttentionBlockK,
                         kAttentionBlockK);
    } else if (kt) {
      for (int64_t j = 0; j < n && widen_values; ++j)
        WidenRow(p.storage, p.v16.at(pr.b, key + j, hk), Dv, v_tile.data() + j * v_tile_stride);
      for (OnlineSoftmax& st : heads)
        TileGemm({st.qb.m, n, p.D, st.qb.q, p.q.stride[1], 1, packed_tile(kt, p.D, kt0), kPackedTileStride,
                  S.data() + st.row0 * kAttentionBlockK, kAttentionBlockK, p.scale, false});
    } else {
      // Key rows read in place (a decode step), a chunk of keys at a time; each chunk requests the
      // key and value rows kPrefetchRows ahead, so that the requests are spread through the pass.
      for (int64_t j0 = 0; j0 < n; j0 += kPrefetchChunk) {
        const int64_t nc = std::min(kPrefetchChunk, n - j0);
        for (int64_t j = j0 + kPrefetchRows; j < j0 + nc + kPrefetchRows && kt0 + j < k_end; ++j) {
          PrefetchRow(p.k16.data ? static_cast<const void*>(p.k16.at(pr.b, key + j, hk))
                                 : static_cast<const void*>(p.k.at(pr.b, key + j, hk)),
                      k_bytes);
          PrefetchRow(p.v16.data ? static_cast<const void*>(p.v16.at(pr.b, key + j, hk))
                                 : static_cast<const void*>(p.v.at(pr.b, key + j, hk)),
                      v_bytes);
        }
        for (int64_t j = j0; j < j0 + nc && widen_values; ++j)
          WidenRow(p.storage, p.v16.at(pr.b, key + j, hk), Dv, v_tile.data() + j * v_tile_stride);
        float* S_chunk = S.data() + j0;
        if (widen_keys) {
          for (int64_t j = j0; j < j0 + nc; ++j)
            WidenRow(p.storage, p.k16.at(pr.b, key + j, hk), p.D, k_tile.data() + j * p.D);
        } else if (row_dots) {
          bf16_row_logits(q16_rows, p.D, p.k16.at(pr.b, key + j0, hk), p.k16.stride[1], nc, p.scale, S_chunk,
                          kAttentionBlockK);
#if POSENC_STORAGE_VECTORS
        } else if (p.k16.data) {  // widen_in_products
          RowDots(R, nc, p.D, q_rows, q_stride, p.k16.at(pr.b, key + j0, hk), p.k16.stride[1], p.scale,
                  S_chunk, kAttentionBlockK, p.storage);
#endif
        } else {
          RowDots(R, nc, p.D, q_rows, q_stride, p.k.at(pr.b, key + j0, hk), p.k.stride[1], p.scale, S_chunk,
                  kAttentionBlockK);
        }
      }
      if (widen_keys)
        RowDots(R, n, p.D, q_rows, q_stride, k_tile.data(), p.D, p.scale, S.data(), kAttentionBlockK);
    }
    for (OnlineSoftmax& st : heads) {
      const QueryBlock& qb = st.qb;
      float* S_head = S.data() + st.row0 * kAttentionBlockK;
      TileTerms(p, qb, kt0, n, keys, S_head, scratch, nullptr);
      for (int64_t i = 0; i < qb.m; ++i) {
        float* s = S_head + i * kAttentionBlockK;
        float* Oi = O.data() + (st.row0 + i) * Dv;
        const float m_new = RowMax(s, n, st.mrow[i]);
        if (m_new == kNegInf) {  // nothing visible yet in this row
          std::fill(s, s + n, 0.0f);
          continue;
        }
        if (std::isnan(m_new)) {  // a NaN logit: the row is NaN (exp and max would not all keep it)
          st.mrow[i] = st.lrow[i] = m_new;
          std::fill(Oi, Oi + Dv, m_new);
          std::fill(s, s + n, 0.0f);
          continue;
        }
        const float alpha = st.mrow[i] == kNegInf ? 0.0f : std::exp(st.mrow[i] - m_new);
        st.lrow[i] = alpha * st.lrow[i] +
                     (p.round_probabilities ? ExpShiftSum<true>(s, n, m_new) : ExpShiftSum(s, n, m_new));
        if (alpha != 1.0f) {
          for (int64_t d = 0; d < Dv; ++d) Oi[d] *= alpha;
          if (shaw_values)
            for (int64_t r = 0; r < rows; ++r) st.Pb[i * rows + r] *= alpha;
        }
        if (shaw_values)
          for (int64_t j = 0; j < n; ++j) st.Pb[i * rows + p.shaw->row(kpos[kt0 + j], qb.qpos[i])] += s[j];
        st.mrow[i] = m_new;
      }
    }
    // O += P V for every row of the task at once (each value row loaded once).
    if (value_dots) {
      pack_value_pairs(p.v16.at(pr.b, key, hk), p.v16.stride[1], n, Dv, v_pairs.data());
      bf16_tile_values(R, n, Dv, S.data(), kAttentionBlockK, v_pairs.data(), O.data(), Dv);
    } else if (!v_tile.empty()) {
      TileGemm(
          {R, Dv, n, S.data(), kAttentionBlockK, 1, v_tile.data(), v_tile_stride, O.data(), Dv, 1.0f, true});
    } else if (v_rows) {
      TileGemm({R, Dv, n, S.data(), kAttentionBlockK, 1, v_rows + kt0 * v_rows_stride, v_rows_stride,
                O.data(), Dv, 1.0f, true});
    } else if (!p.v16.data)
      TileGemm({R, Dv, n, S.data(), kAttentionBlockK, 1, p.v.at(pr.b, key, hk), p.v.stride[1], O.data(), Dv,
                1.0f, true});
    else
      TileGemm({R, Dv, n, S.data(), kAttentionBlockK, 1, nullptr, p.v16.stride[1], O.data(), Dv, 1.0f, true,
                p.v16.at(pr.b, key, hk), p.storage});
  }
  if (split) {  // shaw_values never splits (its Pb would need merging too)
    for (const OnlineSoftmax& st : heads)
      for (int64_t i = 0; i < st.qb.m; ++i) {
        const int64_t row = (st.qb.h - h0) * st.qb.m + i;
        std::copy_n(O.data() + (st.row0 + i) * Dv, Dv, split->O + row * Dv);
        split->m[row] = st.mrow[i];
        split->l[row] = st.lrow[i];
      }
    return;
  }
  for (OnlineSoftmax& st : heads) {
    const int64_t m = st.qb.m, h = st.qb.h;
    float* Oh = O.data() + st.row0 * Dv;
    if (shaw_values) TileGemm({m, Dv, rows, st.Pb.data(), rows, 1, p.shaw->a_v, Dv, Oh, Dv, 1.0f, true});
    std::vector<float> row(o.out_dtype == DType::f32 ? 0 : static_cast<size_t>(Dv));
    for (int64_t i = 0; i < m; ++i) {
      const int64_t t = pr.q0 + st.qb.i0 + i;
      float* out = row.empty() ? o.out.at(pr.b, t, h) : row.data();
      // Fully masked rows (l = 0): zeros and lse -inf; a NaN row (a NaN logit) stays NaN.
      const bool live = !(st.lrow[i] <= 0);
      const float inv = live ? 1.0f / st.lrow[i] : 0.0f;
      for (int64_t d = 0; d < Dv; ++d) out[d] = Oh[i * Dv + d] * inv;
      if (!row.empty()) NarrowRow(o.out_dtype, row.data(), Dv, o.out16.at(pr.b, t, h));  // one rounding
      if (!o.lse.empty()) o.lse(pr.b, h, t) = live ? st.mrow[i] + std::log(st.lrow[i]) : kNegInf;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <atomic>
#include <limits>

#include "src/cpu/half.h"
#include "src/cpu/parallel.h"

namespace posenc::cpu {
HWY_EXPORT(ForwardTask);
HWY_EXPORT(CanUseBf16Dots);
HWY_EXPORT(CanUseBf16ValueDots);
constexpr float kNegInfinity = -std::numeric_limits<float>::infinity();

namespace {
// fn(problem, hk, kt0) for every tile of 64 keys of every kv head of the problems packed (a non-empty
// range of `offset`), all of them in one parallel_for: with one kv head (MQA, MLA) and one sequence,
// a task per head would pack on one thread.
template <typename Fn>
void for_each_key_tile(const AttentionPlan& p, const std::vector<int64_t>& offset, Fn&& fn) {
  std::vector<int64_t> first(p.problems.size() + 1, 0);  // the first tile task of each problem
  for (size_t i = 0; i < p.problems.size(); ++i) {
    const int64_t tiles = (p.problems[i].nk + kAttentionBlockK - 1) / kAttentionBlockK;
    first[i + 1] = first[i] + (offset[i + 1] > offset[i] ? p.Hkv * tiles : 0);
  }
  parallel_for(first.back(), [&](int64_t t) {
    const int64_t problem = std::upper_bound(first.begin(), first.end(), t) - first.begin() - 1;
    const int64_t tiles = (p.problems[problem].nk + kAttentionBlockK - 1) / kAttentionBlockK;
    const int64_t u = t - first[problem];
    fn(problem, u / tiles, u % tiles * kAttentionBlockK);
  });
}
}  // namespace

PackedTransposed pack_transposed(const AttentionPlan& p, Strided<const float, 3> x, int64_t dim,
                                 int64_t min_queries, Strided<const uint16_t, 3> x16, bool bf16_pairs) {
  PackedTransposed packed;
  packed.dim = dim;
  packed.per_key = bf16_pairs ? key_pairs_size(dim, 1) : dim;
  packed.offset.assign(p.problems.size() + 1, 0);
  for (size_t i = 0; i < p.problems.size(); ++i) {
    const int64_t nk = p.problems[i].nk;
    const int64_t head = bf16_pairs ? packed.per_key * nk : PackedTransposed::head_floats(dim, nk);
    packed.offset[i + 1] = packed.offset[i] + (p.problems[i].nq > min_queries ? p.Hkv * head : 0);
  }
  if (bf16_pairs) {
    packed.pairs.resize(static_cast<size_t>(packed.offset.back()));
    parallel_for(static_cast<int64_t>(p.problems.size()) * p.Hkv, [&](int64_t t) {
      const int64_t problem = t / p.Hkv, hk = t % p.Hkv;
      const AttentionProblem& pr = p.problems[problem];
      if (packed.offset[problem + 1] == packed.offset[problem]) return;
      pack_key_pairs(x16.at(pr.b, pr.k0, hk), x16.stride[1], dim, pr.nk,
                     packed.pairs.data() + packed.offset[problem] + hk * packed.per_key * pr.nk);
    });
    return packed;
  }
  packed.data.resize(static_cast<size_t>(packed.offset.back()));
  for_each_key_tile(p, packed.offset, [&](int64_t problem, int64_t hk, int64_t kt0) {
    const AttentionProblem& pr = p.problems[problem];
    float* tile = packed_tile(
        packed.data.data() + packed.offset[problem] + hk * PackedTransposed::head_floats(dim, pr.nk), dim,
        kt0);
    std::vector<float> wide(x16.data ? static_cast<size_t>(dim) : 0);
    for (int64_t j = 0; j < std::min(kAttentionBlockK, pr.nk - kt0); ++j) {
      const float* src = x16.data ? wide.data() : x.at(pr.b, pr.k0 + kt0 + j, hk);
      if (x16.data) widen_row(p.storage, x16.at(pr.b, pr.k0 + kt0 + j, hk), dim, wide.data());
      for (int64_t d = 0; d < dim; ++d) tile[d * kPackedTileStride + j] = src[d];
    }
  });
  return packed;
}

PackedRows pack_rows(const AttentionPlan& p, Strided<const float, 3> x, int64_t dim, int64_t min_queries) {
  PackedRows packed;
  packed.stride = padded_row_floats(dim);
  packed.offset.assign(p.problems.size() + 1, 0);
  for (size_t i = 0; i < p.problems.size(); ++i)
    packed.offset[i + 1] =
        packed.offset[i] + (p.problems[i].nq >= min_queries ? p.Hkv * packed.stride * p.problems[i].nk : 0);
  packed.data.resize(static_cast<size_t>(packed.offset.back()));
  for_each_key_tile(p, packed.offset, [&](int64_t problem, int64_t hk, int64_t kt0) {
    const AttentionProblem& pr = p.problems[problem];
    float* dst = packed.data.data() + packed.offset[problem] + (hk * pr.nk + kt0) * packed.stride;
    for (int64_t j = 0; j < std::min(kAttentionBlockK, pr.nk - kt0); ++j)
      std::copy_n(x.at(pr.b, pr.k0 + kt0 + j, hk), dim, dst + j * packed.stride);
  });
  return packed;
}

namespace {
// Whether every element of rows x (any strides) of dim elements is a bf16 value (its low 16 bits zero).
bool every_value_bf16(Strided<const float, 3> x, int64_t dim) {
  std::atomic<bool> all{true};
  parallel_chunks(x.extent[0] * x.extent[1], x.extent[2] * dim, [&](int64_t begin, int64_t end) {
    for (int64_t bt = begin; bt < end && all.load(std::memory_order_relaxed); ++bt)
      for (int64_t h = 0; h < x.extent[2]; ++h) {
        const float* row = x.at(bt / x.extent[1], bt % x.extent[1], h);
        for (int64_t d = 0; d < dim; ++d)
          if (detail::f32_bits(row[d]) & 0xffffu) {
            all.store(false, std::memory_order_relaxed);
            return;
          }
      }
  });
  return all.load();
}
}  // namespace

std::vector<AttentionTask> attention_tasks(const AttentionPlan& p, int64_t heads, bool by_keys) {
  std::vector<AttentionTask> tasks;
  for (size_t i = 0; i < p.problems.size(); ++i) {
    const int64_t n = by_keys ? p.problems[i].nk : p.problems[i].nq,
                  block = by_keys ? kAttentionBlockK : kAttentionBlockQ;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t b = 0; b * block < n; ++b) tasks.push_back({static_cast<int64_t>(i), h, b});
  }
  return tasks;
}

// Flash-decoding (Dao et al. 2023): a decode step against a long cache with few key/value heads
// has fewer tasks than cores, so its keys are cut into splits of kSplitKeys, each an independent
// task; the partial softmaxes are merged by log-sum-exp in split order. The split size is fixed,
// so results do not depend on the thread count.
constexpr int64_t kSplitKeys = 2048;

namespace {
struct ForwardJob {
  AttentionTask task;
  int64_t k_begin, k_end;
  int64_t merge = -1;  // index of its split group, or -1: writes the output itself
};
struct SplitGroup {
  AttentionTask task;
  int64_t first_job, splits, rows;  // rows = heads x queries of the block
  size_t offset;                    // of its partials in the scratch (splits x rows)
};

// out, lse of one split group: m* = max_s m_s, l* = sum_s l_s e^(m_s - m*), O* = sum_s O_s e^(m_s - m*) / l*.
void merge_splits(const AttentionPlan& p, const AttentionForwardOut& o, const SplitGroup& g, const float* O,
                  const float* m, const float* l) {
  const AttentionProblem& pr = p.problems[g.task.problem];
  const int64_t Dv = p.Dv, nq = g.rows / g.task.heads;
  std::vector<double> acc(static_cast<size_t>(Dv));
  std::vector<float> wide(static_cast<size_t>(Dv));  // a 16-bit output row before its rounding
  for (int64_t row = 0; row < g.rows; ++row) {
    const int64_t h = g.task.head + row / nq, t = pr.q0 + g.task.block * kAttentionBlockQ + row % nq;
    float mx = kNegInfinity;
    for (int64_t s = 0; s < g.splits; ++s)  // a NaN split (a NaN logit) makes the row NaN
      mx = std::isnan(m[s * g.rows + row]) || std::isnan(mx) ? NAN : std::max(mx, m[s * g.rows + row]);
    float* out = o.out_dtype == DType::f32 ? o.out.at(pr.b, t, h) : wide.data();
    if (mx == kNegInfinity) {  // fully masked row
      std::fill(out, out + Dv, 0.0f);
      if (!o.lse.empty()) o.lse(pr.b, h, t) = kNegInfinity;
      if (o.out_dtype != DType::f32) narrow_row(o.out_dtype, out, Dv, o.out16.at(pr.b, t, h));
      continue;
    }
    double lsum = 0;
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t s = 0; s < g.splits; ++s) {
      const float ms = m[s * g.rows + row];
      if (ms == kNegInfinity) continue;
      const double w = std::exp(static_cast<double>(ms) - mx);
      lsum += w * l[s * g.rows + row];
      const float* Os = O + (s * g.rows + row) * Dv;
      for (int64_t d = 0; d < Dv; ++d) acc[d] += w * Os[d];
    }
    for (int64_t d = 0; d < Dv; ++d) out[d] = static_cast<float>(acc[d] / lsum);
    if (o.out_dtype != DType::f32) narrow_row(o.out_dtype, out, Dv, o.out16.at(pr.b, t, h));  // one rounding
    if (!o.lse.empty()) o.lse(pr.b, h, t) = static_cast<float>(mx + std::log(lsum));
  }
}
}  // namespace

void attention_forward(const AttentionPlan& p, const AttentionForwardOut& o) {
  // Decided once per call (set_bf16_dot_products between calls must not mix paths within one).
  const bool dot_keys = HWY_DYNAMIC_DISPATCH(CanUseBf16Dots)(p);
  const bool bf16_dots = dot_keys && every_value_bf16(p.q, p.D);
  const bool value_dots = HWY_DYNAMIC_DISPATCH(CanUseBf16ValueDots)(p);
  const PackedTransposed kt = pack_transposed(p, p.k, p.D, kRowDotQueries, p.k16, bf16_dots);
  // fp32 values of the problems with a whole query block or more (16-bit ones are widened per tile).
  const PackedRows v_rows = pack_rows(p, p.v, p.Dv, p.v16.data ? p.Q + 1 : kAttentionBlockQ);
  // Tasks: (problem, head, query block); a decode problem (few queries, key rows read in place)
  // takes the heads of a key/value group together instead, and a long one is split by keys.
  const int64_t group = p.H / p.Hkv;
  const bool splittable = !(p.shaw && p.shaw->a_v);
  std::vector<ForwardJob> jobs;
  std::vector<SplitGroup> groups;
  size_t scratch = 0;
  for (const AttentionTask& t : attention_tasks(p, p.H, false)) {
    const AttentionProblem& pr = p.problems[t.problem];
    const bool decode = pr.nq <= kRowDotQueries;
    if (!decode) {
      jobs.push_back({t, 0, pr.nk});
    } else if (t.head % group == 0) {
      const AttentionTask task{t.problem, t.head, t.block, group};
      const int64_t splits = splittable ? (pr.nk + kSplitKeys - 1) / kSplitKeys : 1;
      if (splits <= 1) {
        jobs.push_back({task, 0, pr.nk});
        continue;
      }
      const int64_t rows = group * pr.nq;
      groups.push_back({task, static_cast<int64_t>(jobs.size()), splits, rows, scratch});
      scratch += static_cast<size_t>(splits * rows);
      for (int64_t s = 0; s < splits; ++s)
        jobs.push_back({task, s * kSplitKeys, std::min(pr.nk, (s + 1) * kSplitKeys),
                        static_cast<int64_t>(groups.size()) - 1});
    }
  }
  std::vector<float> partial_O(scratch * static_cast<size_t>(p.Dv)), partial_m(scratch), partial_l(scratch);
  parallel_for(static_cast<int64_t>(jobs.size()), [&](int64_t j) {
    const ForwardJob& job = jobs[j];
    const AttentionTask& task = job.task;
    SplitPartial split{}, *splitp = nullptr;
    if (job.merge >= 0) {
      const SplitGroup& g = groups[job.merge];
      const size_t at = g.offset + static_cast<size_t>((j - g.first_job) * g.rows);
      split = {partial_O.data() + at * p.Dv, partial_m.data() + at, partial_l.data() + at};
      splitp = &split;
    }
    HWY_DYNAMIC_DISPATCH(ForwardTask)
    (p, o, kt.head(p, task.problem, task.head / group), kt.head_pairs(p, task.problem, task.head / group),
     v_rows.head(p, task.problem, task.head / group), v_rows.stride, bf16_dots, dot_keys, value_dots,
     task.problem, task.head, task.head + task.heads, task.block, job.k_begin, job.k_end, splitp);
  });
  parallel_for(static_cast<int64_t>(groups.size()), [&](int64_t gi) {
    const SplitGroup& g = groups[gi];
    merge_splits(p, o, g, partial_O.data() + g.offset * p.Dv, partial_m.data() + g.offset,
                 partial_l.data() + g.offset);
  });
}

void scale_query_rows(Strided<const float, 3> q, int64_t dim, const std::vector<float>& factor, float* out) {
  const int64_t B = q.extent[0], Q = q.extent[1], H = q.extent[2];
  parallel_chunks(B * Q, H * dim, [&](int64_t begin, int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt)
      for (int64_t h = 0; h < H; ++h) {
        const float* row = q.at(bt / Q, bt % Q, h);
        for (int64_t d = 0; d < dim; ++d) out[(bt * H + h) * dim + d] = row[d] * factor[bt];
      }
  });
}

void copy_rows(Strided<const float, 3> x, int64_t dim, float* out) {
  const int64_t B = x.extent[0], T = x.extent[1], H = x.extent[2];
  parallel_chunks(B * T, H * dim, [&](int64_t begin, int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt)
      for (int64_t h = 0; h < H; ++h) {
        const float* row = x.at(bt / T, bt % T, h);
        std::copy(row, row + dim, out + (bt * H + h) * dim);
      }
  });
}

void widen_rows(Strided<const uint16_t, 3> x, DType dtype, int64_t dim, float* out) {
  const int64_t B = x.extent[0], T = x.extent[1], H = x.extent[2];
  parallel_chunks(B * T, H * dim, [&](int64_t begin, int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt)
      for (int64_t h = 0; h < H; ++h)
        widen_row(dtype, x.at(bt / T, bt % T, h), dim, out + (bt * H + h) * dim);
  });
}

void accumulate_into(Strided<float, 4> dst, const float* src, bool add) {
  // Named copies, not a structured binding: clang 14 cannot capture those in the lambda below.
  const int64_t n0 = dst.extent[0], n1 = dst.extent[1], n2 = dst.extent[2], n3 = dst.extent[3];
  parallel_chunks(n0 * n1, n2 * n3, [&](int64_t begin, int64_t end) {
    for (int64_t ab = begin; ab < end; ++ab)
      for (int64_t c = 0; c < n2; ++c)
        for (int64_t d = 0; d < n3; ++d) {
          float& x = dst(ab / n1, ab % n1, c, d);
          x = add ? x + src[(ab * n2 + c) * n3 + d] : src[(ab * n2 + c) * n3 + d];
        }
  });
}

void accumulate_into(Strided<uint16_t, 4> dst, DType dtype, const float* src, bool add) {
  const int64_t n0 = dst.extent[0], n1 = dst.extent[1], n2 = dst.extent[2], n3 = dst.extent[3];
  parallel_chunks(n0 * n1, n2 * n3, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(n3));
    for (int64_t ab = begin; ab < end; ++ab)
      for (int64_t c = 0; c < n2; ++c) {
        uint16_t* x = dst.at(ab / n1, ab % n1, c, 0);  // unit stride: checked by the front end
        if (add) {
          widen_row(dtype, x, n3, row.data());
          for (int64_t d = 0; d < n3; ++d) row[d] += src[(ab * n2 + c) * n3 + d];
        } else {
          std::copy_n(src + (ab * n2 + c) * n3, n3, row.data());
        }
        narrow_row(dtype, row.data(), n3, x);
      }
  });
}
}  // namespace posenc::cpu
#endif  // HWY_ONCE
