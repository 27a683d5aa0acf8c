// src/cpu/attention_tile-inl.h: the logits of one (query block, key tile), per target, shared by
// the forward and both backward passes so that they recompute exactly the same numbers.
//   S_ij = cap(scale (q_i . k_j + shaw: q_i . a_k[r_ij] + xl: (q_i + v_h) . rproj_h[delta_ij])) + bias_ij
//   cap(x) = softcap tanh(x / softcap) with a softcap; masked pairs: -inf
#if defined(POSENC_CPU_ATTENTION_TILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_CPU_ATTENTION_TILE_INL_H_
#undef POSENC_CPU_ATTENTION_TILE_INL_H_
#else
#define POSENC_CPU_ATTENTION_TILE_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "src/cpu/attention.h"
#include "src/cpu/tile_gemm-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::cpu {
namespace HWY_NAMESPACE {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One query block of one head, with what its tiles need beyond K^T.
struct QueryBlock {
  int64_t problem, h, hk;  // hk: the key/value head of h
  int64_t i0, m;           // queries [i0, i0 + m) of the problem
  const float* q;          // content rows, stride p.q.stride[1]
  const int64_t* qpos;
  int64_t qmin, qmax;
  const float* qv = nullptr;  // XL: rows of q + v_h (stride H * D)
  std::vector<float> qa;      // Shaw: (m, rows) q_i . a_k[r], unscaled
};

inline QueryBlock MakeQueryBlock(const AttentionPlan& p, int64_t problem, int64_t h, int64_t i0) {
  const AttentionProblem& pr = p.problems[problem];
  QueryBlock qb;
  qb.problem = problem, qb.h = h, qb.hk = h / (p.H / p.Hkv);
  qb.i0 = i0, qb.m = std::min(kAttentionBlockQ, pr.nq - i0);
  qb.q = p.q.at(pr.b, pr.q0 + i0, h);
  qb.qpos = p.q_pos.data() + pr.b * p.Q + pr.q0 + i0;
  const auto [lo, hi] = std::minmax_element(qb.qpos, qb.qpos + qb.m);
  qb.qmin = *lo, qb.qmax = *hi;
  if (p.transformer_xl) qb.qv = p.transformer_xl->qv + ((pr.b * p.Q + pr.q0 + i0) * p.H + h) * p.D;
  return qb;
}

// The per-block products the tiles gather from (Shaw's q a_k^T), once the block is known visible.
inline void PrepareQueryBlock(const AttentionPlan& p, QueryBlock& qb) {
  if (!p.shaw) return;
  qb.qa.resize(static_cast<size_t>(qb.m * p.shaw->rows));
  TileGemm({qb.m, p.shaw->rows, p.D, qb.q, p.q.stride[1], 1, p.shaw->a_k_t, p.shaw->rows, qb.qa.data(),
            p.shaw->rows, 1.0f, false});
}

// Whether the mask leaves any pair of the block and the key positions kpos[0, n) visible.
inline bool TileVisible(const AttentionPlan& p, const QueryBlock& qb, const int64_t* kpos, int64_t n) {
  const auto [lo, hi] = std::minmax_element(kpos, kpos + n);
  if (p.causal && *lo > qb.qmax) return false;
  if (p.window > 0 && (qb.qmin - *hi >= p.window || *lo - qb.qmax >= p.window)) return false;
  // Chunks are ordered like positions: the block's chunks [qmin, qmax] must meet the keys'.
  if (p.chunk > 0 && (p.chunk_of(*lo) > p.chunk_of(qb.qmax) || p.chunk_of(*hi) < p.chunk_of(qb.qmin)))
    return false;
  return true;
}

// s[j] = softcap tanh(s[j] / softcap) for j < n; dcap[j] = 1 - tanh^2, its derivative, when non-null.
HWY_INLINE void Softcap(float* HWY_RESTRICT s, int64_t n, float softcap, float* HWY_RESTRICT dcap) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto cap = hn::Set(d, softcap), inv = hn::Set(d, 1.0f / softcap), one = hn::Set(d, 1.0f);
  int64_t j = 0;
  for (; j + N <= n; j += N) {
    const auto t = hn::Tanh(d, hn::Mul(hn::LoadU(d, s + j), inv));
    hn::StoreU(hn::Mul(cap, t), d, s + j);
    if (dcap) hn::StoreU(hn::NegMulAdd(t, t, one), d, dcap + j);
  }
  for (; j < n; ++j) {  // scalar tail (full-width masked stores would touch the next row)
    const float t = std::tanh(s[j] / softcap);
    s[j] = softcap * t;
    if (dcap) dcap[j] = 1.0f - t * t;
  }
}

// The XL columns of a tile: deltas qpos - kpos occupy the delta indices [c0, c0 + w).
struct DeltaSpan {
  int64_t c0 = 0, w = 0;
};
inline DeltaSpan TileDeltaSpan(const TransformerXLTerms& xl, const QueryBlock& qb, const int64_t* kpos,
                               int64_t n) {
  const auto [lo, hi] = std::minmax_element(kpos, kpos + n);
  const int64_t c0 = (*xl.delta)(qb.qmin - *hi), c1 = (*xl.delta)(qb.qmax - *lo);
  return {c0, c1 - c0 + 1};
}

// S (m x n, ld) = scale q k^T from key rows (decode: a few queries, no packed K^T to build): fp32
// rows (Key = float), or 16-bit rows widened as they are loaded (Key = uint16_t, only where
// WidensVectors(dtype)): for one query row per key, where widening the tile first would store and
// reload every key. Two accumulator chains, so that the FMA latency is not paid D / N times in a row.
template <typename Key>
inline void RowDots(int64_t m, int64_t n, int64_t D, const float* q, int64_t q_st, const Key* k, int64_t k_st,
                    float scale, float* HWY_RESTRICT S, int64_t ld, DType dtype = DType::f32) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto load = [&](const Key* x) {
    if constexpr (std::is_same_v<Key, float>) {
      return hn::LoadU(d, x);
    } else {
#if POSENC_STORAGE_VECTORS
      return WidenVector(d, dtype, x);
#else
      static_assert(std::is_same_v<Key, float>, "16-bit keys need WidensVectors");
#endif
    }
  };
  auto value = [&](Key x) -> float {
    if constexpr (std::is_same_v<Key, float>)
      return x;
    else
      return dtype == DType::bf16 ? detail::bf16_to_f32(x) : detail::f16_to_f32(x);
  };
  for (int64_t j = 0; j < n; ++j) {
    const Key* kj = k + j * k_st;
    for (int64_t i = 0; i < m; ++i) {
      const float* qi = q + i * q_st;
      auto acc0 = hn::Zero(d), acc1 = hn::Zero(d);
      int64_t x = 0;
      for (; x + 2 * N <= D; x += 2 * N) {
        acc0 = hn::MulAdd(hn::LoadU(d, qi + x), load(kj + x), acc0);
        acc1 = hn::MulAdd(hn::LoadU(d, qi + x + N), load(kj + x + N), acc1);
      }
      for (; x + N <= D; x += N) acc0 = hn::MulAdd(hn::LoadU(d, qi + x), load(kj + x), acc0);
      float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0, acc1)));
      for (; x < D; ++x) sum += qi[x] * value(kj[x]);
      S[i * ld + j] = scale * sum;
    }
  }
}

// S += the positional terms of the tile (Transformer-XL, Shaw, bias), then softcap and mask: S holds
// scale q k^T on entry, however it was computed.
inline void TileTerms(const AttentionPlan& p, const QueryBlock& qb, int64_t kt0, int64_t n,
                      float* HWY_RESTRICT S, std::vector<float>& scratch, float* HWY_RESTRICT dcap) {
  const AttentionProblem& pr = p.problems[qb.problem];
  const int64_t* kpos = p.k_pos.data() + pr.b * p.K + pr.k0 + kt0;
  if (p.transformer_xl) {  // BD (m x w) = (q + v) rproj_t[c0 .. c0 + w), then gathered by delta
    const TransformerXLTerms& xl = *p.transformer_xl;
    const DeltaSpan span = TileDeltaSpan(xl, qb, kpos, n);
    scratch.resize(static_cast<size_t>(qb.m * span.w));
    TileGemm({qb.m, span.w, p.D, qb.qv, p.H * p.D, 1, xl.rproj_t + qb.h * p.D * xl.n + span.c0, xl.n,
              scratch.data(), span.w, p.scale, false});
    for (int64_t i = 0; i < qb.m; ++i)
      for (int64_t j = 0; j < n; ++j)
        S[i * kAttentionBlockK + j] += scratch[i * span.w + (*xl.delta)(qb.qpos[i] - kpos[j]) - span.c0];
  }
  // Ordinary positions make a tile's keys a unit run: the bias row is then a contiguous slice of
  // the lookup (a vector add); and a tile entirely inside the mask needs no per-pair test.
  bool unit_run = true;
  for (int64_t j = 1; j < n && unit_run; ++j) unit_run = kpos[j] == kpos[0] + j;
  const auto [kmin, kmax] = std::minmax_element(kpos, kpos + n);
  const bool all_visible =
      !(p.causal && *kmax > qb.qmin) &&
      !(p.window > 0 && (qb.qmax - *kmin >= p.window || *kmax - qb.qmin >= p.window)) &&
      !(p.chunk > 0 && (p.chunk_of(qb.qmin) != p.chunk_of(qb.qmax) ||
                        p.chunk_of(*kmin) != p.chunk_of(*kmax) || p.chunk_of(*kmin) != p.chunk_of(qb.qmin)));
  for (int64_t i = 0; i < qb.m; ++i) {
    float* HWY_RESTRICT s = S + i * kAttentionBlockK;
    const int64_t qp = qb.qpos[i];
    if (p.shaw) {
      const float* qa = qb.qa.data() + i * p.shaw->rows;
      for (int64_t j = 0; j < n; ++j) s[j] += p.scale * qa[p.shaw->row(kpos[j], qp)];
    }
    if (p.softcap > 0) Softcap(s, n, p.softcap, dcap ? dcap + i * kAttentionBlockK : nullptr);
    if (p.bias) {
      if (p.lut_dense) {
        const int64_t base = qb.h * p.lut_size - p.lut_lo - qp;  // lut[base + kp] = b_h(kp - qp)
        if (unit_run) {
          const float* HWY_RESTRICT row =
              p.lut.data() + (base + kpos[0]);  // the index first: no wrapped pointer
          for (int64_t j = 0; j < n; ++j) s[j] += row[j];
        } else {
          for (int64_t j = 0; j < n; ++j) s[j] += p.lut[base + kpos[j]];
        }
      } else {
        for (int64_t j = 0; j < n; ++j) s[j] += p.bias->value(kpos[j] - qp, qb.h);
      }
    }
    if (!all_visible)
      for (int64_t j = 0; j < n; ++j)
        if (p.masked(qp, kpos[j])) s[j] = kNegInf;
  }
}

// S (m x n, row stride kAttentionBlockK) = the masked logits of keys [kt0, kt0 + n) of the problem.
// kt: K^T of the problem's key/value head, (D, nk), or null to read key rows (RowDots): the plan's
// fp32 rows, or `key_tile` (n rows of D, contiguous: a tile of 16-bit keys widened by the caller).
// dcap (m x n, same stride): the softcap's derivative per logit, when non-null and softcap > 0.
// scratch: reused across calls.
inline void TileLogits(const AttentionPlan& p, const QueryBlock& qb, const float* kt, int64_t nk, int64_t kt0,
                       int64_t n, float* HWY_RESTRICT S, std::vector<float>& scratch,
                       float* HWY_RESTRICT dcap = nullptr, const float* key_tile = nullptr) {
  const AttentionProblem& pr = p.problems[qb.problem];
  if (kt) {
    TileGemm({qb.m, n, p.D, qb.q, p.q.stride[1], 1, kt + kt0, nk, S, kAttentionBlockK, p.scale, false});
  } else if (key_tile) {
    RowDots(qb.m, n, p.D, qb.q, p.q.stride[1], key_tile, p.D, p.scale, S, kAttentionBlockK);
  } else {
    const float* k = p.k.at(pr.b, pr.k0 + kt0, qb.hk);
    RowDots(qb.m, n, p.D, qb.q, p.q.stride[1], k, p.k.stride[1], p.scale, S, kAttentionBlockK);
  }
  TileTerms(p, qb, kt0, n, S, scratch, dcap);
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::cpu
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
