// src/cuda/attention-inl.cuh: the per-score logic of the GPU attention, as __host__ __device__ functions the
// host tests check against the CPU backend. The kernel (src/cuda/attention.cu) computes dot = q_i . k_j on
// tensor cores and applies, per accumulator element, with the element's (query, key) positions:
//   logit = cap(scale_i dot) + bias_h(k_pos - q_pos),  -inf where the mask hides the pair
// in the CPU backend's order (src/cpu/attention_tile-inl.h TileTerms: softcap, then the bias, then the mask),
//   scale_i   the softmax scale times the row's query temperature (the CPU scales q by it: the same product),
//   cap(x)    softcap tanh(x / softcap), or x without a softcap,
//   bias      ALiBi m_h d (symmetric: -m_h |d|), or a per-head lookup over d in [-L, L], clamped at +-L: the
//             clipped table (L = max_distance) or T5's buckets (L where they saturate, rows built on the host
//             by t5_bucket: src/bias_plan.h saturating_rows), staged per head in shared memory.
// ALiBi's product is rounded in fp32 (m_h rounded to fp32, d exact below 2^24): within 1.5 ulp of the bias
// the CPU rounds once from double.
#pragma once
#include <cmath>
#include <cstdint>

#include "src/attention_mask.h"
#include "src/cuda/rope-inl.cuh"
#include "src/host_device.h"

namespace posenc::cuda {

enum class ScoreBias : int { none, alibi, lookup };

// What the logit of one head needs besides the dot product and the positions.
struct ScoreTerms {
  float softcap = 0;  // 0: none
  ScoreBias bias = ScoreBias::none;
  float slope = 0;  // alibi: m_h
  bool symmetric = false;
  int32_t limit = 0;  // lookup: L (the table holds 2 L + 1 values, d = -L .. L)
};

POSENC_HD inline float capped_logit(float x, float softcap) {
  return softcap > 0 ? softcap * tanhf(x / softcap) : x;
}

// bias_h(d) for d = k_pos - q_pos; lookup: table[clamp(d, -L, L) + L].
POSENC_HD inline float position_bias(const ScoreTerms& t, int64_t d, const float* table) {
  if (t.bias == ScoreBias::alibi) {
    const float a = static_cast<float>(d < 0 && t.symmetric ? -d : d);
    return t.symmetric ? -t.slope * a : t.slope * a;
  }
  if (t.bias == ScoreBias::lookup) {
    const int64_t c = d < -t.limit ? -t.limit : d > t.limit ? t.limit : d;
    return table[c + t.limit];
  }
  return 0.0f;
}

// Shaw's table row of a pair (reference/shaw.h shaw_row): r = clamp(k_pos - q_pos, -L, L) + L, for
// distances of exact positions (|d| <= 2^54: no overflow).
POSENC_HD inline int shaw_row(int64_t d, int32_t L) {
  return static_cast<int>((d < -L ? -L : d > L ? L : d) + L);
}

// The row every pair of a tile takes when all take the same clipped one, from the tile's key positions
// [keys_lo, keys_hi] and query positions [rows_lo, rows_hi]: 0 when every key lies L or more before every
// query, 2 L when L or more after, -1 otherwise (the pairs' rows are then found one by one).
POSENC_HD inline int shaw_clipped_tile_row(int64_t keys_lo, int64_t keys_hi, int64_t rows_lo, int64_t rows_hi,
                                           int32_t L) {
  if (keys_hi - rows_lo <= -L) return 0;
  if (keys_lo - rows_hi >= L) return 2 * L;
  return -1;
}

// Transformer-XL (Dai et al. 2019) on the GPU's tiles, for default positions (keys 0 .. nk - 1 and queries
// nk - nq .. nk - 1 of each sequence: consecutive both ways). The deltas q_pos - k_pos of a (BM, BN) tile
// whose first row and first key sit at positions qp0 and kp0 form a band of BM + BN - 1 values,
//   delta(r, c) = (qp0 + r) - (kp0 + c) = first + xl_band_column(r, c),  first = qp0 - kp0 - (BN - 1),
// so the tile's position term is one product of its rows with the band's rproj rows, read skewed.
POSENC_HD inline int64_t xl_band_first_delta(int64_t qp0, int64_t kp0, int block_n) {
  return qp0 - kp0 - (block_n - 1);
}
POSENC_HD inline int xl_band_column(int r, int c, int block_n) { return r - c + block_n - 1; }

// The band's products are kept in shared memory by band column, (band columns, kXLBandRows) floats: a row
// stride of 4 mod 32 banks, so that the accumulators' stores (a quad's lanes 2 band columns apart, 8 rows)
// and the skewed reads (band column r - c + 63 at row r) each meet 32 banks.
inline constexpr int kXLBandRows = 68;

// The backward's deltas pass: a block owns 64 deltas [d0, d0 + 64) of one head. The pairs of 64 rows at
// consecutive positions qp0 .. qp0 + 63 whose deltas it owns have keys at positions
// [qp0 - d0 - 63, qp0 - d0 + 63] (default positions: a key's position is its index in its sequence), two
// tiles of 64 keys from xl_chunk_first_key: in the first, the pairs (r, c) with c >= r, in the second those
// with c < r, each at delta column xl_chunk_column(r, c, tile) (delta - d0).
POSENC_HD inline int64_t xl_chunk_first_key(int64_t qp0, int64_t d0) { return qp0 - d0 - 63; }
POSENC_HD inline int xl_chunk_column(int r, int c, int tile) { return r - c + 63 - 64 * tile; }

// The deltas rproj is tabulated over, [lo, lo + n): with default positions every sequence's lie in
// [1 - Q, K - 1] (nq <= Q queries, nk <= K keys), visible ones >= 0 when causal and within (-window, window)
// with a window (n = 0: no pair is visible). Other deltas a tile's band meets belong to masked pairs or to
// rows and keys past the sequence, and read zero rows.
struct DeltaRange {
  int64_t lo, n;
};
POSENC_HD inline DeltaRange xl_delta_range(int64_t Q, int64_t K, bool causal, int64_t window) {
  int64_t lo = 1 - Q, hi = K - 1;
  if (causal && lo < 0) lo = 0;
  if (window > 0) lo = lo > 1 - window ? lo : 1 - window, hi = hi < window - 1 ? hi : window - 1;
  return {lo, hi >= lo ? hi - lo + 1 : 0};
}

// What a kernel does per score of a tile (src/cuda/attention_sm90.cu): the mask test and the bias per pair
// (a partial tile); no mask and the bias per pair (ALiBi, or a lookup whose pairs' distances differ); no mask
// and one bias for every pair, the lookup's first or last entry (T5's and the clipped table's distances
// clamp at -L and L, so a tile wholly beyond them sees one value: most tiles of a long causal attention);
// no mask and no bias.
enum TileKind : int { kPartialTile, kWholeTile, kWholeTileFirstEntry, kWholeTileLastEntry, kWholeTileNoBias };

// The kind of a tile the mask leaves whole, from the range [d_lo, d_hi] of its pairs' k_pos - q_pos.
POSENC_HD inline int whole_tile_kind(const ScoreTerms& t, int64_t d_lo, int64_t d_hi) {
  if (t.bias == ScoreBias::none) return kWholeTileNoBias;
  if (t.bias == ScoreBias::lookup && d_hi <= -t.limit) return kWholeTileFirstEntry;
  if (t.bias == ScoreBias::lookup && d_lo >= t.limit) return kWholeTileLastEntry;
  return kWholeTile;
}

// The logit of a pair (natural units); -inf where masked; NaN for positions the CPU refuses (|p| > 2^53: no
// exact distance to mask or bias by), so that the row's output is NaN, never a silently wrong number.
POSENC_HD inline float attention_logit(const ScoreTerms& t, const detail::AttentionMask& mask, float scale,
                                       float dot, int64_t q_pos, int64_t k_pos, const float* table) {
  if (!position_in_range(q_pos, 0) || !position_in_range(k_pos, 0)) return quiet_nan();
  if (mask.masked(q_pos, k_pos)) return -INFINITY;
  return capped_logit(scale * dot, t.softcap) + position_bias(t, k_pos - q_pos, table);
}

// The backward of one pair (src/cuda/attention_backward-inl.cuh) from its recomputed dot product and
// dP = dO_i . v_j: P = 2^(logit log2 e - lse_i log2 e) (0 where masked, NaN for positions out of range),
// dlogit = P (dP - D_i) (the gradient of the logit, which the learned bias sees) and grad = dlogit
// d(logit)/d(dot) (the row's scale, times 1 - tanh^2 under a softcap: what dQ, dK and Shaw's a^K see). With
// Shaw's terms the caller passes dot = q_i . k_j + q_i . a^K_r and dp = dO_i . (v_j + a^V_r).
struct PairGradient {
  float prob, dlogit, grad;
};
POSENC_HD inline PairGradient pair_gradient(const ScoreTerms& t, const detail::AttentionMask& mask,
                                            float scale, float dot, float dp, int64_t q_pos, int64_t k_pos,
                                            const float* table, float lse2, float row_term) {
  constexpr float kLog2e = 1.4426950408889634f;
  const float logit = attention_logit(t, mask, scale, dot, q_pos, k_pos, table);
  const float prob = exp2f(logit * kLog2e - lse2);
  float slope = scale;
  if (t.softcap > 0) {
    const float th = tanhf(scale * dot / t.softcap);
    slope *= 1.0f - th * th;
  }
  const float dlogit = prob * (dp - row_term);
  return {prob, dlogit, dlogit * slope};
}

// The end of a row's online softmax (Milakov & Gimelshein 2018; FlashAttention): m = the row's largest logit
// times log2(e) (-inf when every key was masked), l = sum_j 2^(logit_j log2 e - m). A sink s_h (natural
// units) joins the denominator without a value. Returns the factor of the accumulated sum_j 2^(...) v_j that
// gives the output row (0 for a row with nothing visible: out = 0), and the row's log-sum-exp in natural
// units
// (-inf, or the sink alone). A NaN sum (a NaN logit met the row) makes both NaN.
struct RowEnd {
  float out_factor, lse;
};
POSENC_HD inline RowEnd finish_row(float m, float l, bool has_sink, float sink) {
  constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
  if (l != l) return {quiet_nan(), quiet_nan()};  // a NaN logit (a position out of range) met the row
  if (!has_sink) {
    if (m == -INFINITY || !(l > 0)) return {0.0f, -INFINITY};
    return {1.0f / l, (m + log2f(l)) * kLn2};
  }
  const float s2 = sink * kLog2e;
  if (m == -INFINITY || !(l > 0)) return {0.0f, sink};
  // Both terms relative to the larger exponent: no overflow for a sink far above the logits.
  const float top = m > s2 ? m : s2;
  const float denom = l * exp2f(m - top) + exp2f(s2 - top);
  return {exp2f(m - top) / denom, (top + log2f(denom)) * kLn2};
}

// Split-K: the partial rows of one (row, head) from `splits` blocks, each over its share of the keys: (max,
// sum) in finish_row's units (m, l) and o_s = sum over its keys of 2^(logit log2 e - m_s) v_d for one dim d
// (at stride `stride` between splits). Merged in split order (the same bits run to run) into the (m, l, o)
// one pass over every key keeps, up to rounding: m = max m_s, l = sum l_s 2^(m_s - m), o likewise. A split
// that saw nothing (m_s = -inf, l_s = o_s = 0) adds nothing; a NaN sum (a position out of range) makes l NaN.
struct alignas(8) MaxSum {
  float max, sum;
};
struct PartialRows {
  const MaxSum* max_sum;
  const float* out;
  int64_t stride;
  int64_t splits;
};
POSENC_HD inline void merge_partial_rows(const PartialRows& p, float* m, float* l, float* o) {
  float top = -INFINITY, sum = 0, acc = 0;
  for (int64_t s = 0; s < p.splits; ++s) top = p.max_sum[s].max > top ? p.max_sum[s].max : top;
  for (int64_t s = 0; s < p.splits; ++s) {
    const MaxSum ms = p.max_sum[s];
    if (ms.sum != ms.sum) {
      sum = ms.sum;
      break;
    }
    if (ms.max == -INFINITY) continue;
    const float w = exp2f(ms.max - top);
    sum += ms.sum * w;
    acc += p.out[s * p.stride] * w;
  }
  *m = top, *l = sum, *o = acc;
}

}  // namespace posenc::cuda
