// lab/kernels_attention.cc: the causal attention of kernels.h. Compiled once per Highway target
// (foreach_target); each entry point dispatches once per call and splits its work into tasks on
// posenc's pool.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lab/kernels_attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"  // Exp, Log
#include "lab/kernels-inl.h"
#include "lab/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "posenc/threads.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::lab::kernels {
namespace HWY_NAMESPACE {

// ---- Causal attention over short windows (kernels.h), one task per (sequence, head).
// Layout of a task's scratch, Tp = T and Dp = D rounded up to whole vectors (N lanes), zeros past T and D:
//   S   (T, Tp)  logits, then probabilities P (zero past the diagonal)
//   dS  (T, Tp)  backward: dP, then dS (zero past the diagonal)
//   kt, vt (D, Tp)   keys / values transposed: the B of q k^T and dout v^T, one vector per key run
//   kr, vr, qr, dor (T, Dp)  rows of keys, values, queries, dout: the B of the products along the keys
//                            (used only where D is not whole vectors: else B reads the rows in place)
//   brow, grow (T + Tp)  the head's bias row and its gradient, room for a whole vector past column T-1
//   per_row (2 Tp)       the forward's row maxima and 1 / sum P, the backward's dout_i . out_i
// and with relative vectors (kernels.h; E, F the head's key and value tables, T rows in the bias's order):
//   G   (T, T + Tp)  p E^T (the backward's dout F^T after it), read shifted like the bias row
//   X   (T, Tp)      P or dS shifted to the tables' order: row i's keys 0 .. i at columns T-1-i .. T-1
//   et, ft (D, Tp)   E, F transposed;  er, fr, pr (T, Dp)  rows of E, F and p
//   o2  (T, Dp)      the forward's value term X F
//
// The products C (m, n) = A (m, k) B (k, n) are tiles of kRows x V vectors as in kernels.cc's matrix
// product, with causal limits per block of rows [i, i + rows): Limits(i, rows) -> the range [l0, l1) of k
// and the column vectors nv that the block needs; Store(row, vector, sum) is the epilogue. Skipped
// terms are products with exact zeros (probabilities past the diagonal), so an element's sum does not
// depend on its block.
struct ProductLimits {
  int64_t l0, l1, nv;
};
template <int R, int V, class Store>
HWY_INLINE void AttnTile(const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb, int64_t i,
                         int64_t jv, const ProductLimits& lim, const Store& store) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  VF acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = hn::Zero(d);
  const float* ap = a + i * a_row + lim.l0 * a_col;
  const float* bp = b + lim.l0 * ldb + jv * N;
  for (int64_t l = lim.l0; l < lim.l1; ++l, ap += a_col, bp += ldb) {
    VF bv[V];
    for (int v = 0; v < V; ++v) bv[v] = hn::LoadU(d, bp + v * N);
    for (int r = 0; r < R; ++r) {
      const VF ar = hn::Set(d, ap[r * a_row]);
      for (int v = 0; v < V; ++v) acc[r][v] = hn::MulAdd(ar, bv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) store(i + r, jv + v, acc[r][v]);
}

template <int R, class Limits, class Store>
HWY_INLINE void AttnBlock(const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb,
                          int64_t i, const Limits& limits, const Store& store) {
  const ProductLimits lim = limits(i, R);
  int64_t jv = 0;
  for (; jv + kMaxVecs <= lim.nv; jv += kMaxVecs)
    AttnTile<R, kMaxVecs>(a, a_row, a_col, b, ldb, i, jv, lim, store);
  const int64_t rest = lim.nv - jv;
  if (rest == 1) AttnTile<R, 1>(a, a_row, a_col, b, ldb, i, jv, lim, store);
  if constexpr (kMaxVecs > 2)
    if (rest == 2) AttnTile<R, 2>(a, a_row, a_col, b, ldb, i, jv, lim, store);
  if constexpr (kMaxVecs > 3)
    if (rest == 3) AttnTile<R, 3>(a, a_row, a_col, b, ldb, i, jv, lim, store);
}

// Rows [0, m) in blocks of kAttnRows, then 4, 2 and 1.
constexpr int kAttnRows = TileRows(kMaxVecs);
template <class Limits, class Store>
HWY_INLINE void AttnProduct(int64_t m, const float* a, int64_t a_row, int64_t a_col, const float* b,
                            int64_t ldb, const Limits& limits, const Store& store) {
  static_assert(kAttnRows > 4, "the tail blocks are narrower than a whole block");
  int64_t i = 0;
  for (; i + kAttnRows <= m; i += kAttnRows) AttnBlock<kAttnRows>(a, a_row, a_col, b, ldb, i, limits, store);
  if (i + 4 <= m) AttnBlock<4>(a, a_row, a_col, b, ldb, i, limits, store), i += 4;
  if (i + 2 <= m) AttnBlock<2>(a, a_row, a_col, b, ldb, i, limits, store), i += 2;
  if (i < m) AttnBlock<1>(a, a_row, a_col, b, ldb, i, limits, store);
}

// A scratch of the calling thread, 64-byte aligned, grown as needed.
float* ThreadScratch(size_t floats) {
  thread_local hwy::AlignedFreeUniquePtr<float[]> buf;
  thread_local size_t size = 0;
  if (floats > size) {
    buf = hwy::AllocateAligned<float>(floats);
    size = floats;
  }
  return buf.get();
}

struct AttnTask {
  int64_t T, D, Tp, Dp, N;  // N: lanes
  int64_t b, h;
  const float* row(const ConstRows& x, int64_t t) const { return x.data + (b * T + t) * x.ld + h * D; }
  float* row(const Rows& x, int64_t t) const { return x.data + (b * T + t) * x.ld + h * D; }
  // Vectors of the row block [i, i + rows) that reach the diagonal: keys 0 .. i + rows - 1.
  int64_t causal_vecs(int64_t i, int64_t rows) const { return (std::min(T, i + rows) + N - 1) / N; }
};

// dst (D, Tp) = the T rows from `first` (row j at first + j ld) transposed, zeros past T: whole N x N
// blocks in registers (TransposeBlock), the rest element by element.
void PackTransposed(const AttnTask& t, const float* first, int64_t ld, float* dst) {
  for (int64_t d = 0; d < t.D; ++d) std::fill(dst + d * t.Tp + t.T, dst + (d + 1) * t.Tp, 0.0f);
  int64_t whole_j = 0, whole_d = 0;
#if HWY_TARGET != HWY_SCALAR
  if (t.N > 1) {
    whole_j = t.T / t.N * t.N, whole_d = t.D / t.N * t.N;
    for (int64_t j = 0; j < whole_j; j += t.N)
      for (int64_t d = 0; d < whole_d; d += t.N)
        TransposeBlock(first + j * ld + d, ld, dst + d * t.Tp + j, t.Tp);
  }
#endif
  for (int64_t j = 0; j < t.T; ++j) {
    const float* src = first + j * ld;
    for (int64_t d = j < whole_j ? whole_d : 0; d < t.D; ++d) dst[d * t.Tp + j] = src[d];
  }
}
void PackTransposed(const AttnTask& t, const ConstRows& x, float* dst) {
  PackTransposed(t, t.row(x, 0), x.ld, dst);
}
// dst (T, Dp) = the T rows from `first`, zeros past D.
void PackRows(const AttnTask& t, const float* first, int64_t ld, float* dst) {
  const DF d;
  for (int64_t j = 0; j < t.T; ++j) {
    const float* src = first + j * ld;
    for (int64_t c = 0; c < t.Dp; c += t.N)
      hn::StoreU(LoadPart(d, src + c, static_cast<size_t>(std::clamp<int64_t>(t.D - c, 0, t.N))), d,
                 dst + j * t.Dp + c);
  }
}
void PackRows(const AttnTask& t, const ConstRows& x, float* dst) { PackRows(t, t.row(x, 0), x.ld, dst); }
// The T rows of x as a product's B: in place where they are whole vectors (D = Dp), else packed into dst.
struct RowsB {
  const float* b;
  int64_t ld;
};
RowsB RowsAsB(const AttnTask& t, const ConstRows& x, float* dst) {
  if (t.D == t.Dp) return {t.row(x, 0), x.ld};
  PackRows(t, x, dst);
  return {dst, t.Dp};
}
// The head's bias row, zeros past it (bias null: zeros).
void BiasRow(const AttnTask& t, const float* bias, float* brow) {
  std::fill(brow, brow + t.T + t.Tp, 0.0f);
  if (bias) std::memcpy(brow, bias + t.h * t.T, static_cast<size_t>(t.T) * sizeof(float));
}

// G (rows, T + Tp) = `rows` rows x times the table transposed `tt` (D, Tp), over all T columns; zeros past
// Tp.
void TableProduct(const AttnTask& t, int64_t rows, const float* x, int64_t ld, const float* tt, float* G) {
  const DF d;
  const int64_t Gs = t.T + t.Tp;
  AttnProduct(
      rows, x, ld, 1, tt, t.Tp,
      [&](int64_t, int64_t) {
        return ProductLimits{0, t.D, t.Tp / t.N};
      },
      [&](int64_t i, int64_t jv, VF s) { hn::StoreU(s, d, G + i * Gs + jv * t.N); });
  for (int64_t i = 0; i < rows; ++i) std::fill(G + i * Gs + t.Tp, G + (i + 1) * Gs, 0.0f);
}

// S (rows, Tp) = scale (q k^T + G shifted) + bias for the queries i0 .. i0 + rows - 1, the vectors of each
// row that reach its diagonal (past it: unused). G (rows, T + Tp): p E^T (relative vectors), or null.
void AttnLogits(const AttnTask& t, const Attention& a, int64_t i0, int64_t rows, const float* kt,
                const float* brow, const float* G, float* S) {
  const DF d;
  const VF scale = hn::Set(d, a.scale);
  const int64_t Gs = t.T + t.Tp;
  AttnProduct(
      rows, t.row(a.q, i0), a.q.ld, 1, kt, t.Tp,
      [&](int64_t i, int64_t r) {
        return ProductLimits{0, t.D, t.causal_vecs(i0 + i, r)};
      },
      [&](int64_t i, int64_t jv, VF s) {
        const int64_t j = jv * t.N, at = t.T - 1 - (i0 + i) + j;
        if (G) s = hn::Add(s, hn::LoadU(d, G + i * Gs + at));
        hn::StoreU(hn::MulAdd(s, scale, hn::LoadU(d, brow + at)), d, S + i * t.Tp + j);
      });
}

// X (rows, Tp): row i of S (query i0 + i: keys 0 .. i0 + i) moved to columns T-1-(i0+i) .. T-1 (the
// tables' order), zeros elsewhere.
void ShiftRows(const AttnTask& t, int64_t i0, int64_t rows, const float* S, float* X) {
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t q = i0 + i;
    float* x = X + i * t.Tp;
    std::fill(x, x + t.T - 1 - q, 0.0f);
    std::memcpy(x + t.T - 1 - q, S + i * t.Tp, static_cast<size_t>(q + 1) * sizeof(float));
    std::fill(x + t.T, x + t.Tp, 0.0f);
  }
}
// Limits of a product over X's columns as the sum index (rows i, any columns of the tables' rows):
// row i reaches columns T-1-i .. T-1.
// The same limits serve X^T's rows (the tables' rows m: queries i >= T-1-m).
HWY_INLINE ProductLimits ShiftedLimits(const AttnTask& t, int64_t i, int64_t rows, int64_t nv) {
  return ProductLimits{std::max<int64_t>(0, t.T - i - rows), t.T, nv};
}

// The first K vectors of a row of n > (K - 1) N elements: exp(s - shift), zeros past n, their exponentials
// interleaved (ExpScalefK) and added to sum in order, as ExpRow's loop adds them; returns K N.
template <int K>
HWY_INLINE int64_t ExpVectors(float* s, int64_t n, VF vshift, VF& sum) {
  const DF d;
  constexpr int64_t N = static_cast<int64_t>(hn::MaxLanes(DF()));
  VF e[K];
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) e[k] = hn::Sub(hn::LoadU(d, s + k * N), vshift);
  ExpScalefK(d, e);
  e[K - 1] = hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(n - (K - 1) * N)), e[K - 1]);
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) hn::StoreU(e[k], d, s + k * N), sum = hn::Add(sum, e[k]);
  return K * N;
}

// Row i of S (keys 0 .. i visible, n = i + 1) becomes exp(S - shift), zeros from n to Tp; returns the
// sum of the exponentials, in vector lanes and then ReduceSum (a fixed order).
HWY_INLINE float ExpRow(const AttnTask& t, float* s, int64_t n, float shift) {
  const DF d;
  const int64_t N = t.N;
  const VF vshift = hn::Set(d, shift);
  VF sum = hn::Zero(d);
  int64_t j = 0;
  // Up to 4 vectors at a time, their exponentials interleaved, the sum in the same order
  for (; n - j > 4 * N; j += 4 * N) ExpVectors<4>(s + j, n - j, vshift, sum);
  switch ((n - j + N - 1) / N) {
    case 1:
      j += ExpVectors<1>(s + j, n - j, vshift, sum);
      break;
    case 2:
      j += ExpVectors<2>(s + j, n - j, vshift, sum);
      break;
    case 3:
      j += ExpVectors<3>(s + j, n - j, vshift, sum);
      break;
    case 4:
      j += ExpVectors<4>(s + j, n - j, vshift, sum);
      break;
    default:
      break;
  }
  for (; j + N <= n; j += N) {
    const VF e = ExpScalef(d, hn::Sub(hn::LoadU(d, s + j), vshift));
    hn::StoreU(e, d, s + j);
    sum = hn::Add(sum, e);
  }
  if (j < n) {
    const auto live = hn::FirstN(d, static_cast<size_t>(n - j));
    const VF e = hn::IfThenElseZero(live, ExpScalef(d, hn::Sub(hn::LoadU(d, s + j), vshift)));
    hn::StoreU(e, d, s + j);
    sum = hn::Add(sum, e);
    j += N;
  }
  for (; j < t.Tp; j += N) hn::StoreU(hn::Zero(d), d, s + j);
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

// max(s[0, n)) for 1 <= n <= Tp, exact in any order; NaN if any of them is NaN (cpu::RowMax's result): the
// row's last partial vector is read whole (the rows of S have Tp columns) with the lanes past n masked.
HWY_INLINE float CausalRowMax(const float* s, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF lowest = hn::Set(d, -std::numeric_limits<float>::infinity());
  VF vmax = lowest;
  auto nan = hn::FirstN(d, 0);
  int64_t j = 0;
  for (; j + N <= n; j += N) {
    const VF x = hn::LoadU(d, s + j);
    vmax = hn::Max(vmax, x);
    nan = hn::Or(nan, hn::IsNaN(x));
  }
  if (j < n) {
    const VF x = hn::IfThenElse(hn::FirstN(d, static_cast<size_t>(n - j)), hn::LoadU(d, s + j), lowest);
    vmax = hn::Max(vmax, x);
    nan = hn::Or(nan, hn::IsNaN(x));
  }
  return hn::AllFalse(d, nan) ? hn::GetLane(hn::MaxOfLanes(d, vmax))
                              : std::numeric_limits<float>::quiet_NaN();
}

// The scratch of a task: offsets of its arrays (the layout at the top of this section).
struct AttnScratch {
  float *S, *dS, *kt, *vt, *kr, *vr, *qr, *dor, *brow, *grow, *per_row;
  float *G, *X, *et, *ft, *er, *fr, *pr, *o2;  // relative vectors
};
// `rows`: the query rows of S, G, X and o2 (the backward's T; a block of them in the forward).
AttnScratch TaskScratch(const AttnTask& t, int64_t rows, bool backward, bool rel, bool rel_value) {
  const size_t tt = static_cast<size_t>(rows * t.Tp), dt = static_cast<size_t>(t.D * t.Tp),
               td = static_cast<size_t>(t.T * t.Dp), row = static_cast<size_t>(t.T + t.Tp);
  size_t floats = (backward ? 2 * tt + 2 * dt + 4 * td + 2 * row : tt + dt + td + row) + 2 * t.Tp;
  if (rel) floats += static_cast<size_t>(rows) * row + tt + 2 * dt + 4 * td;
  float* p = ThreadScratch(floats);
  AttnScratch s{};
  auto take = [&](size_t n) {
    float* at = p;
    p += n;
    return at;
  };
  s.S = take(tt), s.kt = take(dt), s.vr = take(td), s.brow = take(row),
  s.per_row = take(2 * static_cast<size_t>(t.Tp));
  if (backward)
    s.dS = take(tt), s.vt = take(dt), s.kr = take(td), s.qr = take(td), s.dor = take(td), s.grow = take(row);
  if (rel) {
    s.G = take(static_cast<size_t>(rows) * row), s.X = take(tt), s.et = take(dt), s.er = take(td);
    s.pr = take(td), s.o2 = take(td);
    if (rel_value) s.ft = take(dt), s.fr = take(td);
  }
  return s;
}

// Requests the lines of rows 0 .. T-1 of head h of sequence b of x into L2: not L1, which a head's
// backward (about 50 KiB of scratch at T 64, D 16) overflows by itself (into L1, the next head's rows
// evicted the current one's scratch: the backward's copies of q and dout rows took 8x longer).
void PrefetchHead(const AttnTask& t, const ConstRows& x, int64_t h) {
  const int64_t bytes = t.D * static_cast<int64_t>(sizeof(float));
  for (int64_t j = 0; j < t.T; ++j) {  // the lines from the row's first byte to its last
    const auto row = reinterpret_cast<uintptr_t>(x.data + (t.b * t.T + j) * x.ld + h * t.D);
    for (uintptr_t line = row & ~uintptr_t{63}; line < row + static_cast<uintptr_t>(bytes); line += 64)
      __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 2);
  }
}

// fn(t) for every sequence and head, in tasks of one sequence and several heads (all of them where
// there are two sequences per thread, else one): a task requests its next head's rows of `rows` (the
// inputs, then the outputs) while it works on one, and on its last head the first head of the next task,
// so that they arrive from memory in the meantime. Each (sequence, head) computes alone, so the split
// does not change its results.
template <class Fn>
void ForEachHead(const Attention& a, int64_t Tp, int64_t Dp, int64_t N, const ConstRows* rows,
                 size_t num_rows, const Fn& fn) {
  const int64_t per = a.B >= 2 * posenc::num_threads() ? a.H : 1, tasks = a.B * a.H / per;
  posenc::parallel_for(tasks, [&](int64_t task) {
    const int64_t b = task * per / a.H, h0 = task * per % a.H;
    AttnTask t{a.T, a.D, Tp, Dp, N, b, h0};
    auto prefetch = [&](int64_t next) {  // the head of index b H + h = next
      const AttnTask n{a.T, a.D, Tp, Dp, N, next / a.H, next % a.H};
      for (size_t x = 0; x < num_rows; ++x) PrefetchHead(n, rows[x], n.h);
    };
    prefetch(b * a.H + h0);  // at once where the previous task ran on another thread
    for (int64_t h = h0; h < h0 + per; ++h) {
      if (b * a.H + h + 1 < a.B * a.H) prefetch(b * a.H + h + 1);
      t.h = h;
      fn(t);
    }
  });
}

// Query rows per block of the forward: its logits (rows x Tp floats) within 256 KiB, so that they stay
// in L2 between the product that writes them, the softmax and the product that reads them (a whole head
// at T 1024 is 4 MiB, past L2). Measured on a Zen 4 shared with other work, the evaluation at T 1024 took
// 1.15-1.17 s per 131,072 characters against 1.19 s unblocked: L3 served the whole head nearly as well.
// Every element is the same fixed-order sum whatever the block (AttnProduct): the results are unchanged.
constexpr int64_t kForwardBlockFloats = 65536;

void AttentionForwardImpl(const Attention& a, Rows out, float* lse) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t T = a.T, Tp = (T + N - 1) / N * N, Dp = (a.D + N - 1) / N * N;
  const int64_t block = std::min(T, std::max<int64_t>(64, kForwardBlockFloats / Tp));
  const bool rel = a.rel_key != nullptr, rel_value = rel && a.rel_value != nullptr;
  const ConstRows rows[] = {a.q, a.k, a.v, {out.data, out.ld}, a.p};
  ForEachHead(a, Tp, Dp, N, rows, rel ? 5 : 4, [&](const AttnTask& t) {
    const AttnScratch s = TaskScratch(t, block, false, rel, rel_value);
    PackTransposed(t, a.k, s.kt);
    const RowsB vr = RowsAsB(t, a.v, s.vr);
    BiasRow(t, a.bias, s.brow);
    if (rel) PackTransposed(t, a.rel_key + t.h * a.rel_head_stride, a.D, s.et);
    if (rel_value) PackRows(t, a.rel_value + t.h * a.rel_head_stride, a.D, s.fr);
    float* lse_row = lse + (t.b * a.H + t.h) * T;
    for (int64_t i0 = 0; i0 < T; i0 += block) {
      const int64_t rows = std::min(block, T - i0);
      if (rel) TableProduct(t, rows, t.row(a.p, i0), a.p.ld, s.et, s.G);  // G = p E^T
      AttnLogits(t, a, i0, rows, s.kt, s.brow, rel ? s.G : nullptr, s.S);
      // softmax rows, unnormalized: P = exp(S - max); out = (P V [+ X F]) / sum P. Every row's maximum
      // before the exponentials: a row's exponentials wait on its maximum, another row's maximum does not
      float *m_row = s.per_row, *inv_l = s.per_row + Tp;
      for (int64_t i = 0; i < rows; ++i) m_row[i] = CausalRowMax(s.S + i * Tp, i0 + i + 1);
      for (int64_t i = 0; i < rows; ++i)
        inv_l[i] = ExpRow(t, s.S + i * Tp, i0 + i + 1, m_row[i]);  // the sum, inverted below
      for (int64_t i = 0; i < rows; i += N) {  // lse = m + log l; a NaN row (m NaN, l 0) stays NaN
        const auto count = static_cast<size_t>(std::min(N, rows - i));
        const VF m = hn::LoadU(d, m_row + i), l = hn::LoadU(d, inv_l + i);
        StorePart(hn::Add(m, hn::Log(d, l)), d, lse_row + i0 + i, count);
        hn::StoreU(hn::Div(hn::Set(d, 1.0f), l), d, inv_l + i);
      }
      if (rel_value) {  // o2 = X F: the probabilities in the table's order times its rows
        ShiftRows(t, i0, rows, s.S, s.X);
        AttnProduct(
            rows, s.X, Tp, 1, s.fr, Dp,
            [&](int64_t i, int64_t r) { return ShiftedLimits(t, i0 + i, r, Dp / N); },
            [&](int64_t i, int64_t jv, VF o) { hn::StoreU(o, d, s.o2 + i * Dp + jv * N); });
      }
      AttnProduct(
          rows, s.S, Tp, 1, vr.b, vr.ld,
          [&](int64_t i, int64_t r) {
            return ProductLimits{0, std::min(T, i0 + i + r), Dp / N};
          },
          [&](int64_t i, int64_t jv, VF o) {
            const int64_t c = jv * N;
            if (rel_value) o = hn::Add(o, hn::LoadU(d, s.o2 + i * Dp + c));
            StorePart(hn::Mul(o, hn::Set(d, inv_l[i])), d, t.row(out, i0 + i) + c,
                      static_cast<size_t>(std::min(N, a.D - c)));
          });
    }
  });
}

// Each task's (T, D) table gradient into part + (b H + h) T D, summed over the sequences in order.
void SumTableParts(const Attention& a, const std::vector<float>& part, float* grad) {
  const int64_t TD = a.T * a.D;
  for (int64_t h = 0; h < a.H; ++h)
    for (int64_t b = 0; b < a.B; ++b) {
      const float* p = part.data() + (b * a.H + h) * TD;
      for (int64_t x = 0; x < TD; ++x) grad[h * TD + x] += p[x];
    }
}

void AttentionBackwardImpl(const Attention& a, ConstRows out, const float* lse, ConstRows dout, Rows dq,
                           Rows dk, Rows dv, float* dbias, const RelativeGrads& rg) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t T = a.T, D = a.D, Tp = (T + N - 1) / N * N, Dp = (D + N - 1) / N * N, Gs = T + Tp;
  const bool rel = a.rel_key != nullptr, rel_value = rel && a.rel_value != nullptr;
  // Each task's bias and table gradients, summed over the sequences in order afterwards.
  std::vector<float> partial(dbias ? static_cast<size_t>(a.B * a.H * T) : 0);
  const auto table_part = static_cast<size_t>(a.B * a.H * T * D);
  std::vector<float> part_key(rel && rg.rel_key ? table_part : 0),
      part_value(rel_value && rg.rel_value ? table_part : 0);
  const ConstRows rows[] = {a.q, a.k, a.v, out, dout, {dq.data, dq.ld}, {dk.data, dk.ld}, {dv.data, dv.ld},
                            a.p};
  ForEachHead(a, Tp, Dp, N, rows, rel ? 9 : 8, [&](const AttnTask& t) {
    const AttnScratch s = TaskScratch(t, T, true, rel, rel_value);
    PackTransposed(t, a.k, s.kt);
    PackTransposed(t, a.v, s.vt);
    const RowsB kr = RowsAsB(t, a.k, s.kr), qr = RowsAsB(t, a.q, s.qr), dor = RowsAsB(t, dout, s.dor);
    BiasRow(t, a.bias, s.brow);
    const float* table_key = rel ? a.rel_key + t.h * a.rel_head_stride : nullptr;
    if (rel) {  // G = p E^T, as the forward
      PackTransposed(t, table_key, D, s.et);
      PackRows(t, table_key, D, s.er);
      PackRows(t, a.p, s.pr);
      TableProduct(t, T, t.row(a.p, 0), a.p.ld, s.et, s.G);
    }
    // 1. P = exp(S - lse), the forward's logits recomputed by the same code
    AttnLogits(t, a, 0, T, s.kt, s.brow, rel ? s.G : nullptr, s.S);
    const float* lse_row = lse + (t.b * a.H + t.h) * T;
    float* dl = s.per_row;               // delta
    auto delta_lanes = [&](int64_t i) {  // delta_i = dout_i . out_i (= sum_j P_ij dP_ij), in lanes
      const float* o = t.row(out, i);
      const float* g = t.row(dout, i);
      VF sum = hn::Zero(d);
      for (int64_t c = 0; c < D; c += N) {
        const auto count = static_cast<size_t>(std::min(N, D - c));
        sum = hn::MulAdd(LoadPart(d, o + c, count), LoadPart(d, g + c, count), sum);
      }
      return sum;
    };
    int64_t first = 0;
#if POSENC_LAB_LANE_SUMS16
    for (; first + 16 <= T; first += 16) {  // the lanes of 16 rows reduced at once (the same bits)
      VF lanes[16];
      for (int r = 0; r < 16; ++r) {
        ExpRow(t, s.S + (first + r) * Tp, first + r + 1, lse_row[first + r]);
        lanes[r] = delta_lanes(first + r);
      }
      hn::StoreU(SumsOfLanes16(lanes), d, dl + first);
    }
#endif
    for (int64_t i = first; i < T; ++i) {
      ExpRow(t, s.S + i * Tp, i + 1, lse_row[i]);
      dl[i] = hn::GetLane(hn::SumOfLanes(d, delta_lanes(i)));
    }
    if (rel_value) {  // G = dout F^T: the value table's part of dP, read shifted
      const float* table_value = a.rel_value + t.h * a.rel_head_stride;
      PackTransposed(t, table_value, D, s.ft);
      TableProduct(t, T, t.row(dout, 0), dout.ld, s.ft, s.G);
    }
    // 2. dP = dout V^T (+ G shifted), then dS = P (dP - delta), zeros past the diagonal
    AttnProduct(
        T, t.row(dout, 0), dout.ld, 1, s.vt, Tp,
        [&](int64_t i, int64_t rows) {
          return ProductLimits{0, D, t.causal_vecs(i, rows)};
        },
        [&](int64_t i, int64_t jv, VF g) {
          const int64_t j = jv * N;
          if (rel_value) g = hn::Add(g, hn::LoadU(d, s.G + i * Gs + T - 1 - i + j));
          const VF p = hn::LoadU(d, s.S + i * Tp + j);
          hn::StoreU(hn::Mul(p, hn::Sub(g, hn::Set(d, dl[i]))), d, s.dS + i * Tp + j);
        });
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = (i / N + 1) * N; j < Tp; j += N) hn::StoreU(hn::Zero(d), d, s.dS + i * Tp + j);
    // 3. dq = scale dS K
    const VF scale = hn::Set(d, a.scale);
    AttnProduct(
        T, s.dS, Tp, 1, kr.b, kr.ld,
        [&](int64_t i, int64_t rows) {
          return ProductLimits{0, std::min(T, i + rows), Dp / N};
        },
        [&](int64_t i, int64_t jv, VF g) {
          const int64_t c = jv * N;
          StorePart(hn::Mul(g, scale), d, t.row(dq, i) + c, static_cast<size_t>(std::min(N, D - c)));
        });
    // 4. dk = scale dS^T Q and dv = P^T dout: rows are keys j, sums over the queries i >= j
    AttnProduct(
        T, s.dS, 1, Tp, qr.b, qr.ld,
        [&](int64_t j, int64_t) {
          return ProductLimits{j, T, Dp / N};
        },
        [&](int64_t j, int64_t jv, VF g) {
          const int64_t c = jv * N;
          StorePart(hn::Mul(g, scale), d, t.row(dk, j) + c, static_cast<size_t>(std::min(N, D - c)));
        });
    AttnProduct(
        T, s.S, 1, Tp, dor.b, dor.ld,
        [&](int64_t j, int64_t) {
          return ProductLimits{j, T, Dp / N};
        },
        [&](int64_t j, int64_t jv, VF g) {
          const int64_t c = jv * N;
          StorePart(g, d, t.row(dv, j) + c, static_cast<size_t>(std::min(N, D - c)));
        });
    // 5. the bias gradient: row i's dS adds onto columns T-1-i .. of grow, rows in order
    if (dbias) {
      std::fill(s.grow, s.grow + T + Tp, 0.0f);
      for (int64_t i = 0; i < T; ++i) {
        float* g = s.grow + T - 1 - i;
        const float* ds = s.dS + i * Tp;
        for (int64_t j = 0; j <= i; j += N)
          hn::StoreU(hn::Add(hn::LoadU(d, g + j), hn::LoadU(d, ds + j)), d, g + j);
      }
      std::memcpy(partial.data() + (t.b * a.H + t.h) * T, s.grow, static_cast<size_t>(T) * sizeof(float));
    }
    // 6. relative vectors: with X = dS in the tables' order, dp = scale X E and dE = scale X^T p; with
    // X = P, dF = X^T dout
    if (rel) {
      ShiftRows(t, 0, T, s.dS, s.X);
      const auto shifted = [&](int64_t i, int64_t rows) { return ShiftedLimits(t, i, rows, Dp / N); };
      AttnProduct(T, s.X, Tp, 1, s.er, Dp, shifted, [&](int64_t i, int64_t jv, VF g) {
        const int64_t c = jv * N;
        StorePart(hn::Mul(g, scale), d, t.row(rg.dp, i) + c, static_cast<size_t>(std::min(N, D - c)));
      });
      if (!part_key.empty()) {
        float* const key_part = part_key.data() + (t.b * a.H + t.h) * T * D;
        AttnProduct(T, s.X, 1, Tp, s.pr, Dp, shifted, [&](int64_t m, int64_t jv, VF g) {
          const int64_t c = jv * N;
          StorePart(hn::Mul(g, scale), d, key_part + m * D + c, static_cast<size_t>(std::min(N, D - c)));
        });
      }
      if (!part_value.empty()) {
        ShiftRows(t, 0, T, s.S, s.X);
        float* const value_part = part_value.data() + (t.b * a.H + t.h) * T * D;
        AttnProduct(T, s.X, 1, Tp, dor.b, dor.ld, shifted, [&](int64_t m, int64_t jv, VF g) {
          const int64_t c = jv * N;
          StorePart(g, d, value_part + m * D + c, static_cast<size_t>(std::min(N, D - c)));
        });
      }
    }
  });
  if (dbias)
    for (int64_t h = 0; h < a.H; ++h)
      for (int64_t b = 0; b < a.B; ++b) {
        const float* p = partial.data() + (b * a.H + h) * T;
        for (int64_t j = 0; j < T; ++j) dbias[h * T + j] += p[j];
      }
  if (!part_key.empty()) SumTableParts(a, part_key, rg.rel_key);
  if (!part_value.empty()) SumTableParts(a, part_value, rg.rel_value);
}

void AttentionExpImpl(const float* x, float* ours, float* highway, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t i = 0; i < n; i += N) {
    const auto count = static_cast<size_t>(std::min(N, n - i));
    const VF v = LoadPart(d, x + i, count);
    StorePart(ExpScalef(d, v), d, ours + i, count);
    StorePart(hn::Exp(d, v), d, highway + i, count);
  }
}

// RoPE (kernels.h): the loop of posenc's RotateHalf (src/cpu/rope.cc), whole vectors of pairs and then
// a scalar tail, on the tables of each row's token.
void RopeRotateImpl(const float* cos, const float* sin, int64_t pairs, ConstRows in, Rows out, int64_t B,
                    int64_t T, int64_t H, int64_t D) {
  posenc::parallel_for(B * T, [&](int64_t bt) {
    const DF d;
    const int64_t n = static_cast<int64_t>(hn::Lanes(d)), t = bt % T;
    const float* cs = cos + t * pairs;
    const float* sn = sin + t * pairs;
    for (int64_t h = 0; h < H; ++h) {
      const float* x = in.data + bt * in.ld + h * D;
      float* o = out.data + bt * out.ld + h * D;
      int64_t j = 0;
      for (; j + n <= pairs; j += n) {
        const VF x1 = hn::LoadU(d, x + j), x2 = hn::LoadU(d, x + pairs + j);
        const VF c = hn::LoadU(d, cs + j), s = hn::LoadU(d, sn + j);
        hn::StoreU(hn::NegMulAdd(x2, s, hn::Mul(x1, c)), d, o + j);
        hn::StoreU(hn::MulAdd(x1, s, hn::Mul(x2, c)), d, o + pairs + j);
      }
      for (; j < pairs; ++j) {
        const float x1 = x[j], x2 = x[pairs + j];
        o[j] = x1 * cs[j] - x2 * sn[j];
        o[pairs + j] = x2 * cs[j] + x1 * sn[j];
      }
      if (o != x && D > 2 * pairs)
        std::memcpy(o + 2 * pairs, x + 2 * pairs, static_cast<size_t>(D - 2 * pairs) * sizeof(float));
    }
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::lab::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::lab::kernels {
HWY_EXPORT(AttentionForwardImpl);
HWY_EXPORT(AttentionBackwardImpl);
HWY_EXPORT(RopeRotateImpl);
HWY_EXPORT(AttentionExpImpl);

void attention_exp(const float* x, float* ours, float* highway, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(AttentionExpImpl)(x, ours, highway, n);
}

void rope_rotate(const float* cos, const float* sin, int64_t pairs, ConstRows in, Rows out, int64_t B,
                 int64_t T, int64_t H, int64_t D) {
  if (B <= 0 || T <= 0 || H <= 0 || pairs <= 0) return;
  HWY_DYNAMIC_DISPATCH(RopeRotateImpl)(cos, sin, pairs, in, out, B, T, H, D);
}

void attention_forward(const Attention& a, Rows out, float* lse) {
  if (a.B <= 0 || a.T <= 0 || a.H <= 0 || a.D <= 0) return;
  HWY_DYNAMIC_DISPATCH(AttentionForwardImpl)(a, out, lse);
}
void attention_backward(const Attention& a, ConstRows out, const float* lse, ConstRows dout, Rows dq, Rows dk,
                        Rows dv, float* dbias, const RelativeGrads& rel) {
  if (a.B <= 0 || a.T <= 0 || a.H <= 0 || a.D <= 0) return;
  HWY_DYNAMIC_DISPATCH(AttentionBackwardImpl)(a, out, lse, dout, dq, dk, dv, dbias, rel);
}
}  // namespace posenc::lab::kernels
#endif  // HWY_ONCE
