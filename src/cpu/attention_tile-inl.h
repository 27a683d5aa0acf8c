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
#include <cstring>
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

// The positions kpos[0, n) of a tile's keys: their range, and whether they run kpos[0], kpos[0] + 1, ...
// (ordinary positions: then the range costs one pass of compares, with no early exit to vectorize).
struct KeyRange {
  int64_t lo, hi;
  bool unit_run;
};
inline KeyRange TileKeyRange(const int64_t* kpos, int64_t n) {
  bool unit_run = true;
  for (int64_t j = 1; j < n; ++j) unit_run &= kpos[j] == kpos[0] + j;
  if (unit_run) return {kpos[0], kpos[0] + n - 1, true};
  const auto [lo, hi] = std::minmax_element(kpos, kpos + n);
  return {*lo, *hi, false};
}

// Whether the mask leaves any pair of the block and the keys of range k visible.
inline bool TileVisible(const AttentionPlan& p, const QueryBlock& qb, const KeyRange& k) {
  return p.mask().any_visible(qb.qmin, qb.qmax, k.lo, k.hi);
}
inline bool TileVisible(const AttentionPlan& p, const QueryBlock& qb, const int64_t* kpos, int64_t n) {
  return TileVisible(p, qb, TileKeyRange(kpos, n));
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

// r[j] = the sum of the lanes of acc[j], for the N = Lanes(d) vectors acc[0, N): the sums of N
// dot products at once, by a transposing tree (pairs of vectors within 128-bit blocks, then blocks:
// 3 N / 2 shuffles and N - 1 adds for N sums, where N SumOfLanes take about 2 N log2(N) ops).
// Targets whose lane count is not known at compile time sum each vector alone.
template <class D>
HWY_INLINE hwy::HWY_NAMESPACE::Vec<D> TransposedSums(D d, hwy::HWY_NAMESPACE::Vec<D>* acc) {
  namespace hn = hwy::HWY_NAMESPACE;
  constexpr size_t N = hn::MaxLanes(D());
#if HWY_HAVE_SCALABLE
  constexpr bool kFixed = false;
#else
  constexpr bool kFixed = N == 1 || N == 4 || N == 8 || N == 16;
#endif
  if constexpr (!kFixed) {
    alignas(64) float sums[hn::MaxLanes(D())];
    const size_t lanes = hn::Lanes(d);
    for (size_t j = 0; j < lanes; ++j) sums[j] = hn::GetLane(hn::SumOfLanes(d, acc[j]));
    return hn::Load(d, sums);
  } else if constexpr (N == 1) {
    return acc[0];
  } else {
#if HWY_TARGET != HWY_SCALAR  // one lane: no interleaving ops
    using V = hn::Vec<D>;
    const hn::RepartitionToWide<hn::RebindToUnsigned<D>> du64;
    V w[N / 4];  // w[g], block b: the sums over block b of acc[4g .. 4g + 4)
    for (size_t g = 0; g < N / 4; ++g) {
      V* a = acc + 4 * g;
      // [a0 + a2, b0 + b2, a1 + a3, b1 + b3] per block, for the pairs (a, b) = (acc[4g], acc[4g+1]), ...
      const V t01 = hn::Add(hn::InterleaveLower(d, a[0], a[1]), hn::InterleaveUpper(d, a[0], a[1]));
      const V t23 = hn::Add(hn::InterleaveLower(d, a[2], a[3]), hn::InterleaveUpper(d, a[2], a[3]));
      const auto u01 = hn::BitCast(du64, t01), u23 = hn::BitCast(du64, t23);
      w[g] = hn::Add(hn::BitCast(d, hn::InterleaveLower(du64, u01, u23)),
                     hn::BitCast(d, hn::InterleaveUpper(du64, u01, u23)));
    }
    if constexpr (N == 4) {
      return w[0];
    } else {
      // Adjacent blocks: [w0 b0 + b1, w1 b0 + b1, w0 b2 + b3, w1 b2 + b3] (and w2, w3 likewise).
      V x[N / 8];
      for (size_t g = 0; g < N / 8; ++g) {
        const V e = w[2 * g], o = w[2 * g + 1];
        x[g] = hn::Add(hn::OddEvenBlocks(hn::SwapAdjacentBlocks(o), e),
                       hn::OddEvenBlocks(o, hn::SwapAdjacentBlocks(e)));
      }
      if constexpr (N == 8) {
        return x[0];
      } else {
        return hn::Add(hn::ConcatLowerLower(d, x[1], x[0]), hn::ConcatUpperUpper(d, x[1], x[0]));
      }
    }
#endif
  }
}

// The value of one stored key element (Key = float, or 16-bit storage of `dtype`).
template <typename Key>
HWY_INLINE float KeyValue(Key x, DType dtype) {
  if constexpr (std::is_same_v<Key, float>)
    return x;
  else
    return dtype == DType::bf16 ? detail::bf16_to_f32(x) : detail::f16_to_f32(x);
}

// One vector of a key row as fp32 (16-bit rows only where WidensVectors(dtype)).
template <typename Key, class D>
HWY_INLINE hwy::HWY_NAMESPACE::Vec<D> KeyVector(D d, const Key* x, DType dtype) {
  if constexpr (std::is_same_v<Key, float>) {
    (void)dtype;
    return hwy::HWY_NAMESPACE::LoadU(d, x);
  } else {
#if POSENC_STORAGE_VECTORS
    return WidenVector(d, dtype, x);
#else
    static_assert(std::is_same_v<Key, float>, "16-bit keys need WidensVectors");
#endif
  }
}

// The dot of one query row and one key row of D elements: two accumulator chains, SumOfLanes.
template <typename Key, class D>
HWY_INLINE float RowDot(D d, int64_t Dn, const float* q, const Key* k, DType dtype) {
  namespace hn = hwy::HWY_NAMESPACE;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto acc0 = hn::Zero(d), acc1 = hn::Zero(d);
  int64_t x = 0;
  for (; x + 2 * N <= Dn; x += 2 * N) {
    acc0 = hn::MulAdd(hn::LoadU(d, q + x), KeyVector(d, k + x, dtype), acc0);
    acc1 = hn::MulAdd(hn::LoadU(d, q + x + N), KeyVector(d, k + x + N, dtype), acc1);
  }
  for (; x + N <= Dn; x += N) acc0 = hn::MulAdd(hn::LoadU(d, q + x), KeyVector(d, k + x, dtype), acc0);
  float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0, acc1)));
  for (; x < Dn; ++x) sum += q[x] * KeyValue(k[x], dtype);
  return sum;
}

// S (kRows x nb, ld) = scale times the dots of kRows query rows with the next nb <= kKeys = Lanes /
// kRows keys: one accumulator per pair (each key vector loaded once for the kRows rows), all summed
// at once by TransposedSums. A short block (the tile's last keys) computes its missing keys on the
// last live key's row and stores nb columns, so that every pair is summed in the same order
// wherever it sits. Only where Lanes is known at compile time and at least kRows.
template <int kRows, typename Key>
HWY_INLINE void RowDotsBlock(int64_t D, const float* q, int64_t q_st, const Key* k, int64_t k_st, DType dtype,
                             int64_t nb, float scale, float* HWY_RESTRICT S, int64_t ld) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  constexpr int64_t N = static_cast<int64_t>(hn::MaxLanes(d)), kKeys = N / kRows;
  const int64_t Dv = D - D % N;  // whole vectors of each row; the rest by scalars
  // Every pair's accumulator advances in the same pass along the rows: kRows x kKeys independent FMA
  // chains (one chain per key, key after key, was FMA-latency-bound: 16 dependent FMAs a key at D 128).
  const Key* kj[kKeys];
#pragma GCC unroll 16
  for (int64_t jj = 0; jj < kKeys; ++jj) kj[jj] = k + std::min(jj, nb - 1) * k_st;
  V acc[N];
#pragma GCC unroll 16
  for (int64_t a = 0; a < N; ++a) acc[a] = hn::Zero(d);
  for (int64_t x = 0; x < Dv; x += N) {
    V qv[kRows];
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) qv[r] = hn::LoadU(d, q + r * q_st + x);
#pragma GCC unroll 16
    for (int64_t jj = 0; jj < kKeys; ++jj) {
      const V kv = KeyVector(d, kj[jj] + x, dtype);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) acc[r * kKeys + jj] = hn::MulAdd(qv[r], kv, acc[r * kKeys + jj]);
    }
  }
  V sums = TransposedSums(d, acc);  // lane r kKeys + jj: row r, key jj
  if (Dv < D) {
    alignas(64) float rest[N];
    for (int r = 0; r < kRows; ++r)
      for (int64_t jj = 0; jj < kKeys; ++jj) {
        float t = 0;
        for (int64_t x = Dv; x < D; ++x)
          t += q[r * q_st + x] * KeyValue(k[std::min(jj, nb - 1) * k_st + x], dtype);
        rest[r * kKeys + jj] = t;
      }
    sums = hn::Add(sums, hn::Load(d, rest));
  }
  sums = hn::Mul(sums, hn::Set(d, scale));
  if (kRows == 1 && nb == kKeys) {
    hn::StoreU(sums, d, S);
  } else {
    alignas(64) float out[N];
    hn::Store(sums, d, out);
    if (nb == kKeys) {  // a fixed-size copy per row: one move each (a loop of nb compiled to a generic copy)
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) std::memcpy(S + r * ld, out + r * kKeys, kKeys * sizeof(float));
    } else {
      for (int r = 0; r < kRows; ++r)
        for (int64_t jj = 0; jj < nb; ++jj) S[r * ld + jj] = out[r * kKeys + jj];
    }
  }
}

// S (m x n, ld) = scale q k^T from key rows (decode: a few queries, no packed K^T to build): fp32
// rows (Key = float), or 16-bit rows widened as they are loaded (Key = uint16_t, only where
// WidensVectors(dtype)): widening a tile first would store and reload every key. Up to 4 query
// rows at a time share each key load (a decode step's heads of one kv group), each pair has its own
// accumulator, summed by TransposedSums. Every pair is summed in the same order (vectors along the
// row, then the same tree) whatever its place in a block or the number of rows, and the same for
// fp32 and widened keys: so 16-bit storage gives the fp32 kernel's bits, and a query's logits do
// not depend on how many heads share its kv head or how many tokens a decode step attends.
template <typename Key>
inline void RowDots(int64_t m, int64_t n, int64_t D, const float* q, int64_t q_st, const Key* k, int64_t k_st,
                    float scale, float* HWY_RESTRICT S, int64_t ld, DType dtype = DType::f32) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> d;
#if HWY_HAVE_SCALABLE || HWY_TARGET == HWY_SCALAR
  constexpr bool kBlocks = false;  // lanes unknown at compile time, or one
#else
  constexpr bool kBlocks = hn::MaxLanes(d) >= 4;
#endif
  int64_t i = 0;
  if constexpr (kBlocks) {
    constexpr int64_t kN = static_cast<int64_t>(hn::MaxLanes(d));
    for (; i < m;) {
      const int rows = m - i >= 4 ? 4 : m - i >= 2 ? 2 : 1;
      const int64_t keys = kN / rows;
      const float* qi = q + i * q_st;
      float* Si = S + i * ld;
      for (int64_t j = 0; j < n; j += keys) {
        const Key* kj = k + j * k_st;
        const int64_t nb = std::min(keys, n - j);
        if (rows == 4)
          RowDotsBlock<4>(D, qi, q_st, kj, k_st, dtype, nb, scale, Si + j, ld);
        else if (rows == 2)
          RowDotsBlock<2>(D, qi, q_st, kj, k_st, dtype, nb, scale, Si + j, ld);
        else
          RowDotsBlock<1>(D, qi, q_st, kj, k_st, dtype, nb, scale, Si + j, ld);
      }
      i += rows;
    }
  }
  for (; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) S[i * ld + j] = scale * RowDot(d, D, q + i * q_st, k + j * k_st, dtype);
}

// S += the positional terms of the tile (Transformer-XL, Shaw, bias), then softcap and mask: S holds
// scale q k^T on entry, however it was computed. keys: the tile's TileKeyRange.
inline void TileTerms(const AttentionPlan& p, const QueryBlock& qb, int64_t kt0, int64_t n,
                      const KeyRange& keys, float* HWY_RESTRICT S, std::vector<float>& scratch,
                      float* HWY_RESTRICT dcap) {
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
  const bool unit_run = keys.unit_run;
  const int64_t kmin = keys.lo, kmax = keys.hi;
  const bool all_visible = p.mask().all_visible(qb.qmin, qb.qmax, kmin, kmax);
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
// kt: K^T of the problem's key/value head (PackedTransposed::head), or null to read key rows (RowDots):
// the plan's fp32 rows, or `key_tile` (n rows of D, contiguous: a tile of 16-bit keys widened by the
// caller). dcap (m x n, same stride): the softcap's derivative per logit, when non-null and
// softcap > 0. scratch: reused across calls.
inline void TileLogits(const AttentionPlan& p, const QueryBlock& qb, const float* kt, int64_t kt0, int64_t n,
                       float* HWY_RESTRICT S, std::vector<float>& scratch, float* HWY_RESTRICT dcap = nullptr,
                       const float* key_tile = nullptr) {
  const AttentionProblem& pr = p.problems[qb.problem];
  if (kt) {
    TileGemm({qb.m, n, p.D, qb.q, p.q.stride[1], 1, packed_tile(kt, p.D, kt0), kPackedTileStride, S,
              kAttentionBlockK, p.scale, false});
  } else if (key_tile) {
    RowDots(qb.m, n, p.D, qb.q, p.q.stride[1], key_tile, p.D, p.scale, S, kAttentionBlockK);
  } else {
    const float* k = p.k.at(pr.b, pr.k0 + kt0, qb.hk);
    RowDots(qb.m, n, p.D, qb.q, p.q.stride[1], k, p.k.stride[1], p.scale, S, kAttentionBlockK);
  }
  TileTerms(p, qb, kt0, n, TileKeyRange(p.k_pos.data() + pr.b * p.K + pr.k0 + kt0, n), S, scratch, dcap);
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::cpu
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
