// lab/kernels.cc: see kernels.h (the attention: kernels_attention.cc). Compiled once per Highway target
// (foreach_target); each entry point dispatches once per call (HWY_DYNAMIC_DISPATCH) and splits its work
// into tasks on posenc's pool.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lab/kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"  // Exp
#include "lab/kernels-inl.h"
#include "lab/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "posenc/threads.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::lab::kernels {
namespace HWY_NAMESPACE {
// ---- GELU, tanh approximation (Hendrycks & Gimpel 2016; GPT-2): 0.5 x (1 + tanh(s (x + 0.044715 x^3)))
constexpr float kGeluScale = 0.7978845608028654f;  // s = sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

// tanh as a rational function, odd degree 13 over even degree 6, on x clamped to +-7.9053 (where it
// reaches 1 in fp32): Eigen's ptanh_float (Eigen/src/Core/MathFunctionsImpl.h). Within 2.8e-7 (5 ulp)
// of tanh over [-12, 12] (measured in double, every 1e-5), as Highway's Tanh (4 ulp), at about half
// its cost: one divide, no exponential. |x| < 4e-4 returns x.
template <class D>
HWY_INLINE hn::Vec<D> RationalTanh(D d, hn::Vec<D> x_in) {
  const auto x = hn::Min(hn::Max(x_in, hn::Set(d, -7.90531110763549805f)), hn::Set(d, 7.90531110763549805f));
  const auto x2 = hn::Mul(x, x);
  auto p = hn::MulAdd(x2, hn::Set(d, -2.76076847742355e-16f), hn::Set(d, 2.00018790482477e-13f));
  p = hn::MulAdd(x2, p, hn::Set(d, -8.60467152213735e-11f));
  p = hn::MulAdd(x2, p, hn::Set(d, 5.12229709037114e-08f));
  p = hn::MulAdd(x2, p, hn::Set(d, 1.48572235717979e-05f));
  p = hn::MulAdd(x2, p, hn::Set(d, 6.37261928875436e-04f));
  p = hn::MulAdd(x2, p, hn::Set(d, 4.89352455891786e-03f));
  p = hn::Mul(x, p);
  auto q = hn::MulAdd(x2, hn::Set(d, 1.19825839466702e-06f), hn::Set(d, 1.18534705686654e-04f));
  q = hn::MulAdd(x2, q, hn::Set(d, 2.26843463243900e-03f));
  q = hn::MulAdd(x2, q, hn::Set(d, 4.89352518554385e-03f));
  return hn::IfThenElse(hn::Lt(hn::Abs(x_in), hn::Set(d, 4e-4f)), x_in, hn::Div(p, q));
}
template <class D>
HWY_INLINE hn::Vec<D> GeluTanh(D d, hn::Vec<D> x) {
  const auto x3 = hn::Mul(hn::Mul(x, x), x);
  return RationalTanh(d, hn::Mul(hn::Set(d, kGeluScale), hn::Add(x, hn::Mul(hn::Set(d, kGeluCubic), x3))));
}
template <class D>
HWY_INLINE hn::Vec<D> Gelu(D d, hn::Vec<D> x) {
  return hn::Mul(hn::Mul(hn::Set(d, 0.5f), x), hn::Add(hn::Set(d, 1.0f), GeluTanh(d, x)));
}
// gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) s (1 + 3 * 0.044715 x^2),  t = tanh(s (x + 0.044715 x^3))
template <class D>
HWY_INLINE hn::Vec<D> GeluGradGivenTanh(D d, hn::Vec<D> x, hn::Vec<D> t) {
  const auto one = hn::Set(d, 1.0f), half = hn::Set(d, 0.5f);
  const auto dt = hn::Mul(hn::Mul(hn::Sub(one, hn::Mul(t, t)), hn::Set(d, kGeluScale)),
                          hn::Add(one, hn::Mul(hn::Set(d, 3.0f * kGeluCubic), hn::Mul(x, x))));
  return hn::Add(hn::Mul(half, hn::Add(one, t)), hn::Mul(hn::Mul(half, x), dt));
}
template <class D>
HWY_INLINE hn::Vec<D> GeluGrad(D d, hn::Vec<D> x) {
  return GeluGradGivenTanh(d, x, GeluTanh(d, x));
}

// gelu(x[k]) into out[k] and gelu'(x[k]) into grad[k] for K vectors, their operations interleaved (each
// step for every vector before the next step) so that the core has K independent chains in flight instead
// of one chain of about 40 dependent operations at a time: the same operations, in the same order per
// element, as Gelu and GeluGradGivenTanh (GeluTanh and RationalTanh above), so the same bits.
template <int K, class D>
HWY_INLINE void GeluAndGrad(D d, const hn::Vec<D> (&x)[K], hn::Vec<D> (&out)[K], hn::Vec<D> (&grad)[K]) {
  using V = hn::Vec<D>;
  const V one = hn::Set(d, 1.0f), half = hn::Set(d, 0.5f), scale = hn::Set(d, kGeluScale);
  const V bound = hn::Set(d, 7.90531110763549805f), small = hn::Set(d, 4e-4f);
  V xx[K], u[K], c[K], c2[K], p[K], q[K], t[K];
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) xx[k] = hn::Mul(x[k], x[k]);
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) u[k] = hn::Mul(hn::Set(d, kGeluCubic), hn::Mul(xx[k], x[k]));
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) u[k] = hn::Mul(scale, hn::Add(x[k], u[k]));  // tanh's argument
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) c[k] = hn::Min(hn::Max(u[k], hn::Neg(bound)), bound);
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) c2[k] = hn::Mul(c[k], c[k]);
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) {
    p[k] = hn::MulAdd(c2[k], hn::Set(d, -2.76076847742355e-16f), hn::Set(d, 2.00018790482477e-13f));
    q[k] = hn::MulAdd(c2[k], hn::Set(d, 1.19825839466702e-06f), hn::Set(d, 1.18534705686654e-04f));
  }
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) {
    p[k] = hn::MulAdd(c2[k], p[k], hn::Set(d, -8.60467152213735e-11f));
    q[k] = hn::MulAdd(c2[k], q[k], hn::Set(d, 2.26843463243900e-03f));
  }
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) {
    p[k] = hn::MulAdd(c2[k], p[k], hn::Set(d, 5.12229709037114e-08f));
    q[k] = hn::MulAdd(c2[k], q[k], hn::Set(d, 4.89352518554385e-03f));
  }
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) p[k] = hn::MulAdd(c2[k], p[k], hn::Set(d, 1.48572235717979e-05f));
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) p[k] = hn::MulAdd(c2[k], p[k], hn::Set(d, 6.37261928875436e-04f));
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) p[k] = hn::MulAdd(c2[k], p[k], hn::Set(d, 4.89352455891786e-03f));
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) p[k] = hn::Mul(c[k], p[k]);
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) t[k] = hn::IfThenElse(hn::Lt(hn::Abs(u[k]), small), u[k], hn::Div(p[k], q[k]));
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) {
    const V hx = hn::Mul(half, x[k]), onet = hn::Add(one, t[k]);
    out[k] = hn::Mul(hx, onet);
    const V dt = hn::Mul(hn::Mul(hn::Sub(one, hn::Mul(t[k], t[k])), scale),
                         hn::Add(one, hn::Mul(hn::Set(d, 3.0f * kGeluCubic), xx[k])));
    grad[k] = hn::Add(hn::Mul(half, onet), hn::Mul(hx, dt));
  }
}

// ---- The matrix product (register tiles: kernels-inl.h).
// The k-block: B's rows [l0, l0 + kBlockK) of a strip (64 columns on AVX-512: 64 KiB) stay in L1 / L2
// while every tile of the task's rows passes over them. Between blocks the running sums wait in C.
constexpr int64_t kBlockK = 256;
// Rows per task: at most kMaxRows, so that the rows of A a task reads (kMaxRows x kBlockK: 192 KiB)
// stay in L2 while it passes over them, and at least kMinRows where there are enough.
constexpr int64_t kMinRows = 24, kMaxRows = 192;

// B (k, n) as the tiles read it: the rows of strip s (columns [s W, s W + W), W = kMaxVecs vectors)
// at b + s panel + l ldb: the caller's rows (panel W, ldb its row stride), or a copy packed by strips
// (panel k W, ldb W).
struct GemmPlan {
  const float* b;
  int64_t ldb, panel;
};

// The epilogue of one vector of C at offset `at` (row-major index i * ldc + j), columns [j, j + count)
// (kernels.h): C = x = factor * s, + bias, + residual. kFull: count is a whole vector.
template <bool kFull>
HWY_INLINE void Epilogue(const Gemm& g, int64_t at, size_t count, VF x, VF bias) {
  const DF d;
  auto load = [&](const float* p) { return kFull ? hn::LoadU(d, p) : LoadPart(d, p, count); };
  if (g.factor) x = hn::Mul(load(g.factor + at), x);
  if (g.bias) x = hn::Add(x, bias);
  if (g.residual) x = hn::Add(x, load(g.residual + at));
  if (kFull)
    hn::StoreU(x, d, g.c + at);
  else
    StorePart(x, d, g.c + at, count);
}

// Then, with gelu_out, over rows [i, i + rows) and columns [j, j + cols) of C, now x: gelu_out =
// gelu(x) and C = x or gelu'(x), both from one tanh (the same bits as Gelu and GeluGrad). A pass of
// its own over the tile while it is in L1: GELU's temporaries beside a tile's accumulators spilled
// them all to the stack.
HWY_INLINE void GeluEpilogue(const Gemm& g, int64_t i, int64_t rows, int64_t j, int64_t cols) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  if (cols == kMaxVecs * N && g.gelu_grad) {  // a whole tile's rows: kMaxVecs vectors at a time
    for (int64_t r = i; r < i + rows; ++r) {
      float* c = g.c + r * g.ldc + j;
      float* go = g.gelu_out + r * g.ldc + j;
      VF x[kMaxVecs], out[kMaxVecs], grad[kMaxVecs];
#pragma GCC unroll 4
      for (int v = 0; v < kMaxVecs; ++v) x[v] = hn::LoadU(d, c + v * N);
      GeluAndGrad(d, x, out, grad);
#pragma GCC unroll 4
      for (int v = 0; v < kMaxVecs; ++v) hn::StoreU(out[v], d, go + v * N), hn::StoreU(grad[v], d, c + v * N);
    }
    return;
  }
  for (int64_t r = i; r < i + rows; ++r)
    for (int64_t c = j; c < j + cols; c += N) {
      const auto count = static_cast<size_t>(std::min(N, j + cols - c));
      const int64_t at = r * g.ldc + c;
      const VF x = LoadPart(d, g.c + at, count), t = GeluTanh(d, x);
      StorePart(hn::Mul(hn::Mul(hn::Set(d, 0.5f), x), hn::Add(hn::Set(d, 1.0f), t)), d, g.gelu_out + at,
                count);
      if (g.gelu_grad) StorePart(GeluGradGivenTanh(d, x, t), d, g.c + at, count);
    }
}

// Rows [i, i + kRows) x columns [j, j + kVecs N) of C over l in [l0, l1): A's rows from a (A[i, l0],
// then a_row and a_col apart), B's rows from b (B[l0, j], rows ldb apart).
struct Operands {
  const float* a;
  int64_t a_row, a_col;
  const float* b;
  int64_t ldb;
};

// A tile whose last vector is partial (columns past n) goes through `part`, kRows x kVecs vectors
// in the stack, in and out: C's rows copied in (zeros past n) for a running sum, and the sums ended
// from there. Out of line, so that the whole tiles' path calls nothing (the copy's memcpy beside
// it made the compiler keep every accumulator on the stack).
HWY_NOINLINE void LoadPartialTile(const Gemm& g, int64_t i, int64_t j, int rows, int vecs, float* part) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  for (int r = 0; r < rows; ++r)
    for (int v = 0; v < vecs; ++v) {
      const int64_t col = j + v * N;
      const auto count = static_cast<size_t>(std::clamp<int64_t>(g.n - col, 0, N));
      hn::Store(LoadPart(d, g.c + (i + r) * g.ldc + col, count), d, part + (r * vecs + v) * N);
    }
}
HWY_NOINLINE void FinishPartialTile(const Gemm& g, int64_t i, int64_t j, int rows, int vecs, bool last,
                                    const float* part) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  for (int v = 0; v < vecs; ++v) {
    const int64_t col = j + v * N;
    if (col >= g.n) break;
    const auto count = static_cast<size_t>(std::min(N, g.n - col));
    const VF bias = last && g.bias ? LoadPart(d, g.bias + col, count) : hn::Zero(d);
    for (int r = 0; r < rows; ++r) {
      const VF x = hn::Load(d, part + (r * vecs + v) * N);
      if (last)
        Epilogue<false>(g, (i + r) * g.ldc + col, count, x, bias);
      else
        StorePart(x, d, g.c + (i + r) * g.ldc + col, count);
    }
  }
  if (last && g.gelu_out) GeluEpilogue(g, i, rows, j, std::min<int64_t>(vecs * N, g.n - j));
}

// A whole tile's x (kRows x kVecs vectors in `x`, row-major) through GELU: gelu_out = gelu(x) and C =
// gelu'(x) (gelu_grad), GeluAndGrad's operations (the same bits as GeluEpilogue). gelu' is read by nothing
// before the backward, long after: its vectors are streamed past the caches where C's row is aligned (no read
// of the lines before the write, and no other data evicted for them); gelu, which the next product reads, is
// stored.
template <int kRows, int kVecs>
HWY_INLINE void GeluTile(const Gemm& g, const float* x, int64_t i, int64_t j) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  for (int r = 0; r < kRows; ++r) {
    float* c = g.c + (i + r) * g.ldc + j;
    float* go = g.gelu_out + (i + r) * g.ldc + j;
    VF xs[kVecs], out[kVecs], grad[kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) xs[v] = hn::Load(d, x + (r * kVecs + v) * N);
    GeluAndGrad(d, xs, out, grad);
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) hn::StoreU(out[v], d, go + v * N);
    if (reinterpret_cast<uintptr_t>(c) % (static_cast<uintptr_t>(N) * sizeof(float)) == 0) {
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) hn::Stream(grad[v], d, c + v * N);
    } else {
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) hn::StoreU(grad[v], d, c + v * N);
    }
  }
}

// Requests the cache lines of rows [i, i + rows), columns [j, j + cols) of an array with C's row stride,
// for reading (kWrite false) or for writing.
template <bool kWrite>
HWY_INLINE void PrefetchRows(const float* p, int64_t ldc, int64_t i, int rows, int64_t j, int64_t cols) {
  for (int r = 0; r < rows; ++r) {
    const char* row = reinterpret_cast<const char*>(p + (i + r) * ldc + j);
    const int64_t bytes = cols * static_cast<int64_t>(sizeof(float));
    for (int64_t at = 0; at < bytes; at += 64) __builtin_prefetch(row + at, kWrite ? 1 : 0, 3);
    __builtin_prefetch(row + bytes - 1, kWrite ? 1 : 0, 3);  // the last line, where the row straddles one
  }
}

// The lines of the epilogue's operands and outputs over a tile: rows [i, i + rows), columns [j, j + cols).
HWY_NOINLINE void PrefetchEpilogue(const Gemm& g, int64_t i, int rows, int64_t j, int64_t cols, bool fresh) {
  if (g.factor) PrefetchRows<false>(g.factor, g.ldc, i, rows, j, cols);
  if (g.residual) PrefetchRows<false>(g.residual, g.ldc, i, rows, j, cols);
  if (g.gelu_out) PrefetchRows<true>(g.gelu_out, g.ldc, i, rows, j, cols);
  if (fresh && !g.gelu_grad) PrefetchRows<true>(g.c, g.ldc, i, rows, j, cols);  // gelu': streamed (GeluTile)
}

// The tile of rows [i, i + rows) and columns from j requests its share of g.ahead: the region is cut into
// m x strips pieces, piece (s, r) for row r of strip s, whatever the tiles and threads.
HWY_NOINLINE void PrefetchAhead(const Gemm& g, int64_t i, int rows, int64_t j) {
  const DF d;
  const int64_t W = kMaxVecs * static_cast<int64_t>(hn::Lanes(d)), strips = (g.n + W - 1) / W;
  const int64_t bytes = g.ahead_floats * static_cast<int64_t>(sizeof(float));
  const int64_t per = (bytes + g.m * strips - 1) / (g.m * strips), first = (j / W * g.m + i) * per;
  const char* p = reinterpret_cast<const char*>(g.ahead);
  for (int64_t at = first; at < std::min(bytes, first + rows * per); at += 64)
    __builtin_prefetch(p + at, 0, 2);
}

// Rows [i, i + kRows) x columns [j, j + kVecs N) of C over l in [l0, l1). Every loop over the
// accumulators is unrolled, so that they stay in registers.
template <int kRows, int kVecs>
HWY_INLINE void Tile(const Gemm& g, const Operands& o, int64_t i, int64_t j, int64_t l0, int64_t l1) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const bool full = j + kVecs * N <= g.n, fresh = l0 == 0 && !g.accumulate, last = l1 == g.k;
  // What the epilogue reads and writes arrives while the tile computes (from L3: a step's activations
  // pass L2), rather than after it.
  if (last) PrefetchEpilogue(g, i, kRows, j, std::min(kVecs * N, g.n - j), fresh);
  if (last && g.ahead) PrefetchAhead(g, i, kRows, j);
  HWY_ALIGN float part[kRows * kVecs * HWY_MAX_BYTES / sizeof(float)];
  if (!full && !fresh) LoadPartialTile(g, i, j, kRows, kVecs, part);
  VF acc[kRows][kVecs];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v)
      acc[r][v] = fresh  ? hn::Zero(d)
                  : full ? hn::LoadU(d, g.c + (i + r) * g.ldc + j + v * N)
                         : hn::Load(d, part + (r * kVecs + v) * N);
  const float* a = o.a;
  const float* b = o.b;
  for (int64_t l = l0; l < l1; ++l, a += o.a_col, b += o.ldb) {
    VF bv[kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) bv[v] = hn::LoadU(d, b + v * N);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const VF ar = hn::Set(d, a[r * o.a_row]);
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) acc[r][v] = hn::MulAdd(ar, bv[v], acc[r][v]);
    }
  }
  if (!full) {
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) hn::Store(acc[r][v], d, part + (r * kVecs + v) * N);
    FinishPartialTile(g, i, j, kRows, kVecs, last, part);
    return;
  }
  if (!last) {  // between k-blocks the running sums wait in C
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) hn::StoreU(acc[r][v], d, g.c + (i + r) * g.ldc + j + v * N);
    return;
  }
  // The epilogue's operands in locals: the stores (through Highway's may-alias vector type) would otherwise
  // make the compiler reload each of g's fields and test it again for every vector.
  const int64_t ldc = g.ldc, at = i * ldc + j;
  float* const c = g.c + at;
  const float* const factor = g.factor ? g.factor + at : nullptr;
  const float* const residual = g.residual ? g.residual + at : nullptr;
  VF bias[kVecs];
#pragma GCC unroll 4
  for (int v = 0; v < kVecs; ++v) bias[v] = g.bias ? hn::LoadU(d, g.bias + j + v * N) : hn::Zero(d);
  auto finish = [&](auto with_factor, auto with_bias, auto with_residual) {  // as Epilogue, per vector
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) {
        const int64_t e = r * ldc + v * N;
        VF x = acc[r][v];
        if constexpr (decltype(with_factor)::value) x = hn::Mul(hn::LoadU(d, factor + e), x);
        if constexpr (decltype(with_bias)::value) x = hn::Add(x, bias[v]);
        if constexpr (decltype(with_residual)::value) x = hn::Add(x, hn::LoadU(d, residual + e));
        hn::StoreU(x, d, c + e);
      }
  };
  using Yes = std::true_type;
  using No = std::false_type;
  if (g.gelu_grad && !factor) {  // x (+ bias, + residual) to the stack, not to C, which receives gelu' only
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) {
        VF x = acc[r][v];
        if (g.bias) x = hn::Add(x, bias[v]);
        if (residual) x = hn::Add(x, hn::LoadU(d, residual + r * ldc + v * N));
        hn::Store(x, d, part + (r * kVecs + v) * N);
      }
    GeluTile<kRows, kVecs>(g, part, i, j);
    return;
  }
  if (factor && (g.bias || residual)) {  // not a combination the lab's layers use (kernels.h)
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v)
        Epilogue<true>(g, (i + r) * ldc + j + v * N, static_cast<size_t>(N), acc[r][v], bias[v]);
  } else if (factor) {
    finish(Yes{}, No{}, No{});
  } else if (g.bias && residual) {
    finish(No{}, Yes{}, Yes{});
  } else if (g.bias) {
    finish(No{}, Yes{}, No{});
  } else if (residual) {
    finish(No{}, No{}, Yes{});
  } else {
    finish(No{}, No{}, No{});
  }
  if (g.gelu_out) GeluEpilogue(g, i, kRows, j, kVecs * N);
}

// Rows [i0, i1) of a strip of kVecs vectors at jv, over B's rows [l0, l1): whole tiles, then the
// rest in tiles of 4, 2 and 1 rows. o: the operands at row i0.
template <int kVecs>
HWY_NOINLINE void Strip(const Gemm& g, const Operands& o, int64_t i0, int64_t i1, int64_t j, int64_t l0,
                        int64_t l1) {
  constexpr int kRows = TileRows(kVecs);
  static_assert(kRows > 4, "the tail tiles are narrower than a whole tile");
  Operands at = o;
  int64_t i = i0;
  for (; i + kRows <= i1; i += kRows, at.a += kRows * o.a_row) Tile<kRows, kVecs>(g, at, i, j, l0, l1);
  if (i + 4 <= i1) Tile<4, kVecs>(g, at, i, j, l0, l1), i += 4, at.a += 4 * o.a_row;
  if (i + 2 <= i1) Tile<2, kVecs>(g, at, i, j, l0, l1), i += 2, at.a += 2 * o.a_row;
  if (i < i1) Tile<1, kVecs>(g, at, i, j, l0, l1);
}

template <int kVecs>
HWY_INLINE void StripOf(int vecs, const Gemm& g, const Operands& o, int64_t i0, int64_t i1, int64_t j,
                        int64_t l0, int64_t l1) {
  if (vecs == kVecs) return Strip<kVecs>(g, o, i0, i1, j, l0, l1);
  if constexpr (kVecs > 1) StripOf<kVecs - 1>(vecs, g, o, i0, i1, j, l0, l1);
}

void GemmImpl(const Gemm& g) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t n_vecs = (g.n + N - 1) / N;
  const int64_t W = kMaxVecs * N, strips = (n_vecs + kMaxVecs - 1) / kMaxVecs;
  GemmPlan p{g.b.data, g.b.row, W};
  // B is read as whole vectors along its rows: a transposed B (the forward's weight^T), or rows that
  // do not end on a whole vector, are first copied into panels, one per strip, each a contiguous
  // block of k rows of W floats (zeros past column n).
  thread_local LineFloats packed;
  if (g.b.col != 1 || g.n % N != 0) {
    packed.resize(static_cast<size_t>(strips * g.k * W));
    for (int64_t st = 0; st < strips; ++st) {
      float* panel = packed.data() + st * g.k * W;
      const int64_t j0 = st * W, cols = std::min(W, g.n - j0);
      if (cols < W)
        for (int64_t l = 0; l < g.k; ++l) std::fill(panel + l * W + cols, panel + (l + 1) * W, 0.0f);
      if (g.b.col == 1) {
        for (int64_t l = 0; l < g.k; ++l)
          std::memcpy(panel + l * W, g.b.data + l * g.b.row + j0, static_cast<size_t>(cols) * sizeof(float));
        continue;
      }
      // A transposed matrix's rows (B's columns, g.b.row 1: the forward's weight^T) in N x N blocks
      // in registers, the rest element by element.
      int64_t whole_j = 0, whole_l = 0;
#if HWY_TARGET != HWY_SCALAR
      if (g.b.row == 1 && N > 1) {
        whole_j = cols / N * N, whole_l = g.k / N * N;
        for (int64_t j = 0; j < whole_j; j += N)
          for (int64_t l = 0; l < whole_l; l += N)
            TransposeBlock(g.b.data + (j0 + j) * g.b.col + l, g.b.col, panel + l * W + j, W);
      }
#endif
      for (int64_t j = 0; j < cols; ++j)
        for (int64_t l = j < whole_j ? whole_l : 0; l < g.k; ++l)
          panel[l * W + j] = g.b.data[l * g.b.row + (j0 + j) * g.b.col];
    }
    p = {packed.data(), W, g.k * W};
  }
  // Tasks: row chunks times groups of strips of kMaxVecs vectors: chunks of at most kMaxRows rows, more
  // of them (down to kMinRows) until every thread has two tasks, and the strips in as few groups as
  // then give every thread two tasks. A task passes each k-block of its rows of A over all of its
  // strips before the next block, so that a block is read from memory once per group rather than
  // once per strip (the weights' gradients, m = OC rows and k = N: with a task per strip, the 8
  // strips of n = 512 read all of dout 8 times). The split changes nothing in any element's
  // arithmetic (kernels.h).
  const bool small = g.m * g.n * std::max<int64_t>(g.k, 1) < (int64_t{1} << 16);
  const int64_t threads = posenc::num_threads();
  int64_t row_chunks = (g.m + kMaxRows - 1) / kMaxRows;
  while (row_chunks * strips < 2 * threads && row_chunks < (g.m + kMinRows - 1) / kMinRows) ++row_chunks;
  const int64_t chunk = small ? g.m : ((g.m + row_chunks - 1) / row_chunks + 5) / 6 * 6;  // whole 6-row tiles
  row_chunks = (g.m + chunk - 1) / chunk;
  const int64_t groups =
      small ? 1 : std::clamp<int64_t>((2 * threads + row_chunks - 1) / row_chunks, 1, strips);
  const int64_t per_group = (strips + groups - 1) / groups;
  posenc::parallel_for(small ? 1 : row_chunks * groups, [&](int64_t t) {
    const int64_t first_strip = t % groups * per_group,
                  last_strip = std::min(strips, first_strip + per_group);
    const int64_t i0 = t / groups * chunk, i1 = std::min(g.m, i0 + chunk);
    int64_t l0 = 0;
    do {  // k = 0 still runs one (empty) block: C = 0 + bias ...
      const int64_t l1 = std::min(g.k, l0 + kBlockK);
      for (int64_t s = first_strip; s < last_strip; ++s) {
        const int64_t jv = s * kMaxVecs;
        const int vecs = static_cast<int>(std::min<int64_t>(kMaxVecs, n_vecs - jv));
        static const float kNothing = 0.0f;  // k = 0: A and B may be null; nothing is read
        Operands o{&kNothing, 0, 0, &kNothing, 0};
        if (l1 > l0)
          o = {g.a.data + i0 * g.a.row + l0 * g.a.col, g.a.row, g.a.col, p.b + s * p.panel + l0 * p.ldb,
               p.ldb};
        StripOf<kMaxVecs>(vecs, g, o, i0, i1, jv * N, l0, l1);
      }
      l0 = l1;
    } while (l0 < g.k);
    if (g.gelu_grad) hwy::FlushStream();  // GeluTile's streamed stores, before the task's end is seen
  });
}

// ---- Elementwise GELU.
void GeluForwardImpl(float* out, const float* x, int64_t n) {
  posenc::parallel_chunks(n, 16, [&](int64_t i0, int64_t i1) {
    const DF d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    for (int64_t i = i0; i < i1; i += N) {
      const auto count = static_cast<size_t>(std::min(N, i1 - i));
      StorePart(Gelu(d, LoadPart(d, x + i, count)), d, out + i, count);
    }
  });
}

void GeluBackwardImpl(float* dx, const float* x, const float* dout, int64_t n) {
  posenc::parallel_chunks(n, 16, [&](int64_t i0, int64_t i1) {
    const DF d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    for (int64_t i = i0; i < i1; i += N) {
      const auto count = static_cast<size_t>(std::min(N, i1 - i));
      const VF g = hn::Mul(GeluGrad(d, LoadPart(d, x + i, count)), LoadPart(d, dout + i, count));
      StorePart(hn::Add(LoadPart(d, dx + i, count), g), d, dx + i, count);
    }
  });
}

// ---- Sums over rows, one column per lane: each column's sum is one chain of adds from out's value over
// the rows in order, so that a sum over rows [0, n) equals the sums over [0, m) and then [m, n).
// kOut sums at once: term(r, j, count, t) sets t[0 .. kOut) to the vectors of the terms of row r, columns
// [j, j + count); out[o][j] += the terms of t[o].
// A task takes a group of up to kSumVecs vectors of columns (several tasks where there are threads for
// them) and passes over its rows once per 4 of them, their running sums in registers (ColumnSumsPass):
// most of the step's column sums run over chunks of rows that its products have just read or written (L2).
// The groups and passes change no column's order of adds.
constexpr int64_t kSumVecs = 32;
// Vectors [g0, g0 + G) of columns over every row.
template <int kOut, int G, class Term>
HWY_INLINE void ColumnSumsPass(float* const (&out)[kOut], int64_t rows, int64_t cols, int64_t g0,
                               const Term& term) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  size_t count[G];
  VF acc[kOut][G];
#pragma GCC unroll 4
  for (int k = 0; k < G; ++k) {
    count[k] = static_cast<size_t>(std::min(N, cols - (g0 + k) * N));
#pragma GCC unroll 2
    for (int o = 0; o < kOut; ++o) acc[o][k] = LoadPart(d, out[o] + (g0 + k) * N, count[k]);
  }
  for (int64_t r = 0; r < rows; ++r) {
#pragma GCC unroll 4
    for (int k = 0; k < G; ++k) {
      VF t[kOut];
      term(r, (g0 + k) * N, count[k], t);
#pragma GCC unroll 2
      for (int o = 0; o < kOut; ++o) acc[o][k] = hn::Add(acc[o][k], t[o]);
    }
  }
#pragma GCC unroll 4
  for (int k = 0; k < G; ++k)
#pragma GCC unroll 2
    for (int o = 0; o < kOut; ++o) StorePart(acc[o][k], d, out[o] + (g0 + k) * N, count[k]);
}
template <int kOut, class Term>
HWY_INLINE void ColumnSums(float* const (&out)[kOut], int64_t rows, int64_t cols, const Term& term) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t vecs = (cols + N - 1) / N;
  const bool small = rows * cols < (int64_t{1} << 16);
  const int64_t groups = std::max((vecs + kSumVecs - 1) / kSumVecs,
                                  small ? int64_t{1} : std::min<int64_t>(posenc::num_threads(), vecs));
  const int64_t per_group = (vecs + groups - 1) / groups;
  posenc::parallel_for(groups, [&](int64_t task) {
    const int64_t v0 = task * per_group, v1 = std::min(vecs, v0 + per_group);
    // Up to 4 vectors of columns per pass over the rows, their running sums in registers (an array indexed
    // by a run-time vector kept them in memory: every add waited on a store and a load)
    for (int64_t g0 = v0; g0 < v1; g0 += 4) {
      switch (std::min<int64_t>(4, v1 - g0)) {
        case 4:
          ColumnSumsPass<kOut, 4>(out, rows, cols, g0, term);
          break;
        case 3:
          ColumnSumsPass<kOut, 3>(out, rows, cols, g0, term);
          break;
        case 2:
          ColumnSumsPass<kOut, 2>(out, rows, cols, g0, term);
          break;
        default:
          ColumnSumsPass<kOut, 1>(out, rows, cols, g0, term);
          break;
      }
    }
  });
}

void ColumnSumsImpl(float* out, const float* x, int64_t rows, int64_t cols, int64_t ld) {
  const DF d;
  ColumnSums<1>({out}, rows, cols, [&](int64_t r, int64_t j, size_t count, VF* t) {
    t[0] = LoadPart(d, x + r * ld + j, count);
  });
}

// ---- Sums along a row in one order on every target: element i joins running sum i % 16 (as many
// vectors of a 16-lane capped tag as make 16 lanes), the 16 sums are added pairwise, then the
// n % 16 last elements in order. Only adds and multiplies, no FMA: the same bits on every target.
using D16 = hn::CappedTag<float, 16>;
// The sum of v's lanes as RowSum adds them: the upper half onto the lower, until one lane is left.
template <class D>
HWY_INLINE hn::TFromD<D> SumOfHalves(D, hn::Vec<D> v) {
#if HWY_TARGET != HWY_SCALAR
  if constexpr (hn::MaxLanes(D()) > 1) {
    const hn::Half<D> dh;
    return SumOfHalves(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
#endif
  return hn::GetLane(v);
}
// term(i) -> the vector of elements [i, i + Lanes(D16)); tail(i) -> element i.
template <class Term, class Tail>
HWY_INLINE float RowSum(int64_t n, const Term& term, const Tail& tail) {
  const D16 d;
  constexpr int64_t kLanes = 16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d)), per = kLanes / N;
  hn::Vec<D16> acc[16];
  for (int64_t v = 0; v < per; ++v) acc[v] = hn::Zero(d);
  const int64_t whole = n / kLanes * kLanes;
  for (int64_t i = 0; i < whole; i += kLanes)
    for (int64_t v = 0; v < per; ++v) acc[v] = hn::Add(acc[v], term(i + v * N));
  // The pairwise adds: lane k + w onto lane k for w = 8, 4, 2, 1 (vectors onto vectors, then halves)
  for (int64_t w = per / 2; w >= 1; w /= 2)
    for (int64_t v = 0; v < w; ++v) acc[v] = hn::Add(acc[v], acc[v + w]);
  float s = SumOfHalves(d, acc[0]);
  for (int64_t i = whole; i < n; ++i) s += tail(i);
  return s;
}

// ---- The sum of the squares of n floats in double (a gradient's norm), in RowSum's order: element i's
// square (exact in double) joins running sum i % 16, the 16 sums are added pairwise, then the n % 16 last
// squares in order. The same bits on every target.
double SumOfSquaresImpl(const float* x, int64_t n) {
  const hn::CappedTag<double, 8> dd;
  const hn::Rebind<float, decltype(dd)> df;
  constexpr int64_t kLanes = 16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(dd)), per = kLanes / N;
  hn::Vec<decltype(dd)> acc[kLanes];
  for (int64_t v = 0; v < per; ++v) acc[v] = hn::Zero(dd);
  const int64_t whole = n / kLanes * kLanes;
  for (int64_t i = 0; i < whole; i += kLanes)
    for (int64_t v = 0; v < per; ++v) {
      const auto y = hn::PromoteTo(dd, hn::LoadU(df, x + i + v * N));
      acc[v] = hn::Add(acc[v], hn::Mul(y, y));
    }
  for (int64_t w = per / 2; w >= 1; w /= 2)
    for (int64_t v = 0; v < w; ++v) acc[v] = hn::Add(acc[v], acc[v + w]);
  double s = SumOfHalves(dd, acc[0]);
  for (int64_t i = whole; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

// ---- Norms.
// One row's out = (x - m) * s * w (+ b): the norms' last pass, in the forward and in norm_apply's
// recomputation (the same operations, so the same bits).
HWY_INLINE void NormRowOut(bool layer, float* o, const float* x, const float* weight, const float* bias,
                           float m, float s, int64_t C) {
  const DF d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  const VF vm = hn::Set(d, m), vs = hn::Set(d, s);
  for (int64_t i = 0; i < C; i += L) {
    const auto count = static_cast<size_t>(std::min(L, C - i));
    VF y = hn::Mul(hn::Mul(hn::Sub(LoadPart(d, x + i, count), vm), vs), LoadPart(d, weight + i, count));
    if (layer) y = hn::Add(y, LoadPart(d, bias + i, count));
    StorePart(y, d, o + i, count);
  }
}

// Rows [n, n + 16) of NormForwardImpl, with C a multiple of 16 (RowSum's 16 running sums are then one
// vector per row, with no scalar tail): each row's sums as RowSum adds them, their lanes reduced 16 rows at a
// time (SumsOfLanes16, the same tree), the divisions and square roots in vectors (the same roundings).
#if POSENC_LAB_LANE_SUMS16
HWY_INLINE void NormForwardRows16(bool layer, float* out, float* mean, float* rstd, const float* inp,
                                  const float* weight, const float* bias, float eps, int64_t n, int64_t C) {
  const DF d;
  const VF count = hn::Set(d, static_cast<float>(C));
  VF acc[16];
  if (layer) {
    for (int r = 0; r < 16; ++r) {
      const float* x = inp + (n + r) * C;
      acc[r] = hn::Zero(d);
      for (int64_t i = 0; i < C; i += 16) acc[r] = hn::Add(acc[r], hn::LoadU(d, x + i));
    }
    hn::StoreU(hn::Div(SumsOfLanes16(acc), count), d, mean + n);
  } else {
    hn::StoreU(hn::Zero(d), d, mean + n);
  }
  for (int r = 0; r < 16; ++r) {
    const float* x = inp + (n + r) * C;
    const VF vm = hn::Set(d, mean[n + r]);
    acc[r] = hn::Zero(d);
    for (int64_t i = 0; i < C; i += 16) {
      const VF c = hn::Sub(hn::LoadU(d, x + i), vm);
      acc[r] = hn::Add(acc[r], hn::Mul(c, c));
    }
  }
  const VF var = hn::Div(SumsOfLanes16(acc), count);
  hn::StoreU(hn::Div(hn::Set(d, 1.0f), hn::Sqrt(hn::Add(var, hn::Set(d, eps)))), d, rstd + n);
  for (int r = 0; r < 16; ++r) {
    const float* x = inp + (n + r) * C;
    float* o = out + (n + r) * C;
    const VF vm = hn::Set(d, mean[n + r]), vs = hn::Set(d, rstd[n + r]);
    for (int64_t i = 0; i < C; i += 16) {  // out = (x - m) * s * w (+ b)
      VF y = hn::Mul(hn::Mul(hn::Sub(hn::LoadU(d, x + i), vm), vs), hn::LoadU(d, weight + i));
      if (layer) y = hn::Add(y, hn::LoadU(d, bias + i));
      hn::StoreU(y, d, o + i);
    }
  }
}
#endif

void NormForwardImpl(bool layer, float* out, float* mean, float* rstd, const float* inp, const float* weight,
                     const float* bias, float eps, int64_t N, int64_t C) {
  posenc::parallel_chunks(N, C, [&](int64_t n0, int64_t n1) {
    const D16 d;
    int64_t n = n0;
#if POSENC_LAB_LANE_SUMS16
    if (C % 16 == 0)
      for (; n + 16 <= n1; n += 16) NormForwardRows16(layer, out, mean, rstd, inp, weight, bias, eps, n, C);
#endif
    for (; n < n1; ++n) {
      const float* x = inp + n * C;
      float m = 0.0f;
      if (layer) {
        m = RowSum(
            C, [&](int64_t i) { return hn::LoadU(d, x + i); }, [&](int64_t i) { return x[i]; });
        m /= static_cast<float>(C);
      }
      const auto vm = hn::Set(d, m);
      float var = RowSum(
          C,
          [&](int64_t i) {
            const auto c = hn::Sub(hn::LoadU(d, x + i), vm);
            return hn::Mul(c, c);
          },
          [&](int64_t i) { return (x[i] - m) * (x[i] - m); });
      var /= static_cast<float>(C);
      const float s = 1.0f / std::sqrt(var + eps);
      NormRowOut(layer, out + n * C, x, weight, bias, m, s, C);
      mean[n] = m;
      rstd[n] = s;
    }
  });
}

// out = (x - mean) * rstd * weight (+ bias) from the kept statistics: NormForwardImpl's last pass, the same
// operations per element (mean 0 for rms: x - 0 is x), so the same bits as its out.
void NormApplyImpl(bool layer, float* out, const float* inp, const float* weight, const float* bias,
                   const float* mean, const float* rstd, int64_t N, int64_t C) {
  posenc::parallel_chunks(N, C, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n)
      NormRowOut(layer, out + n * C, inp + n * C, weight, bias, mean[n], rstd[n], C);
  });
}

// Rows [n, n + 16) of NormBackwardImpl's dx, with C a multiple of 16, as NormForwardRows16: each row's two
// sums as RowSum adds them, their lanes reduced 16 rows at a time.
#if POSENC_LAB_LANE_SUMS16
HWY_INLINE void NormBackwardRows16(bool layer, float* dinp, const float* dout, const float* inp,
                                   const float* weight, const float* mean, const float* rstd, int64_t n,
                                   int64_t C) {
  const DF d;
  const VF count = hn::Set(d, static_cast<float>(C));
  VF acc_g[16], acc_gx[16];
  for (int r = 0; r < 16; ++r) {
    const float* x = inp + (n + r) * C;
    const float* dy = dout + (n + r) * C;
    const VF vm = hn::Set(d, mean[n + r]), vs = hn::Set(d, rstd[n + r]);
    acc_g[r] = hn::Zero(d), acc_gx[r] = hn::Zero(d);
    for (int64_t i = 0; i < C; i += 16) {
      const VF g = hn::Mul(hn::LoadU(d, dy + i), hn::LoadU(d, weight + i));
      acc_g[r] = hn::Add(acc_g[r], g);
      acc_gx[r] = hn::Add(acc_gx[r], hn::Mul(g, hn::Mul(hn::Sub(hn::LoadU(d, x + i), vm), vs)));
    }
  }
  HWY_ALIGN float g_mean[16], gx_mean[16];
  hn::Store(layer ? hn::Div(SumsOfLanes16(acc_g), count) : hn::Zero(d), d, g_mean);
  hn::Store(hn::Div(SumsOfLanes16(acc_gx), count), d, gx_mean);
  for (int r = 0; r < 16; ++r) {
    const float* x = inp + (n + r) * C;
    const float* dy = dout + (n + r) * C;
    float* dx = dinp + (n + r) * C;
    const VF vm = hn::Set(d, mean[n + r]), vs = hn::Set(d, rstd[n + r]);
    const VF vg = hn::Set(d, g_mean[r]), vgx = hn::Set(d, gx_mean[r]);
    for (int64_t i = 0; i < C; i += 16) {
      const VF xh = hn::Mul(hn::Sub(hn::LoadU(d, x + i), vm), vs);
      const VF gi = hn::Mul(hn::LoadU(d, dy + i), hn::LoadU(d, weight + i));
      const VF t = hn::Mul(vs, hn::Sub(hn::Sub(gi, vg), hn::Mul(xh, vgx)));
      hn::StoreU(hn::Add(hn::LoadU(d, dx + i), t), d, dx + i);
    }
  }
}
#endif

// forward: xhat = (x - m) * s,  out = xhat * w (+ b).  With g = dout * w:
//   layer: dx = s * (g - mean(g) - xhat * mean(g * xhat))
//   rms:   dx = s * (g - xhat * mean(g * xhat))
//   dw += sum over rows of dout * xhat,  db += sum over rows of dout
void NormBackwardImpl(bool layer, float* dinp, float* dweight, float* dbias, const float* dout,
                      const float* inp, const float* weight, const float* mean, const float* rstd, int64_t N,
                      int64_t C) {
  posenc::parallel_chunks(N, C, [&](int64_t n0, int64_t n1) {
    const D16 d;
    const int64_t L = static_cast<int64_t>(hn::Lanes(d));
    int64_t n = n0;
#if POSENC_LAB_LANE_SUMS16
    if (C % 16 == 0)
      for (; n + 16 <= n1; n += 16) NormBackwardRows16(layer, dinp, dout, inp, weight, mean, rstd, n, C);
#endif
    for (; n < n1; ++n) {
      const float* x = inp + n * C;
      const float* dy = dout + n * C;
      const float m = mean[n], s = rstd[n];
      const auto vm = hn::Set(d, m), vs = hn::Set(d, s);
      auto xhat = [&](int64_t i) { return hn::Mul(hn::Sub(hn::LoadU(d, x + i), vm), vs); };
      auto g = [&](int64_t i) { return hn::Mul(hn::LoadU(d, dy + i), hn::LoadU(d, weight + i)); };
      float g_mean = 0.0f;
      if (layer) g_mean = RowSum(C, g, [&](int64_t i) { return dy[i] * weight[i]; }) / static_cast<float>(C);
      const float gx_mean = RowSum(
                                C, [&](int64_t i) { return hn::Mul(g(i), xhat(i)); },
                                [&](int64_t i) { return dy[i] * weight[i] * ((x[i] - m) * s); }) /
                            static_cast<float>(C);
      const auto vg = hn::Set(d, g_mean), vgx = hn::Set(d, gx_mean);
      float* dx = dinp + n * C;
      for (int64_t i = 0; i < C; i += L) {
        const auto count = static_cast<size_t>(std::min(L, C - i));
        const auto xh = hn::Mul(hn::Sub(LoadPart(d, x + i, count), vm), vs);
        const auto gi = hn::Mul(LoadPart(d, dy + i, count), LoadPart(d, weight + i, count));
        const auto t = hn::Mul(vs, hn::Sub(hn::Sub(gi, vg), hn::Mul(xh, vgx)));
        StorePart(hn::Add(LoadPart(d, dx + i, count), t), d, dx + i, count);
      }
    }
  });
  // dw += the rows' dout * xhat, db += the rows' dout: one pass over dout and x
  const DF d;
  auto xhat_term = [&](int64_t r, int64_t j, size_t count) {
    const auto xh =
        hn::Mul(hn::Sub(LoadPart(d, inp + r * C + j, count), hn::Set(d, mean[r])), hn::Set(d, rstd[r]));
    return hn::Mul(LoadPart(d, dout + r * C + j, count), xh);
  };
  if (layer)
    ColumnSums<2>({dweight, dbias}, N, C, [&](int64_t r, int64_t j, size_t count, VF* t) {
      t[0] = xhat_term(r, j, count);
      t[1] = LoadPart(d, dout + r * C + j, count);
    });
  else
    ColumnSums<1>({dweight}, N, C,
                  [&](int64_t r, int64_t j, size_t count, VF* t) { t[0] = xhat_term(r, j, count); });
}

// ---- Softmax and cross-entropy: exponentials in fp32 vectors, their sum and the loss in double.
// Rows go in groups of kSumRows: each row's sum runs over its elements in order, as one chain of double
// adds, and the group's chains interleave (a lone chain waits out every add's latency).
constexpr int64_t kSumRows = 8;
// The largest of z[0, n) (where one is NaN, any of them: the row's sum is NaN then whatever its shift).
HWY_INLINE float RowMaximum(const float* z, int64_t n) {
  const DF d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  const VF lowest = hn::Set(d, -std::numeric_limits<float>::infinity());
  VF m = lowest;
  int64_t v = 0;
  for (; v + L <= n; v += L) m = hn::Max(m, hn::LoadU(d, z + v));
  if (v < n) {
    const auto count = static_cast<size_t>(n - v);
    m = hn::Max(m, hn::IfThenElse(hn::FirstN(d, count), LoadPart(d, z + v, count), lowest));
  }
  return hn::GetLane(hn::MaxOfLanes(d, m));
}
void CrossEntropyForwardImpl(float* probs, float* losses, const float* logits, const int32_t* targets,
                             int32_t ignore, int64_t N, int64_t V) {
  posenc::parallel_chunks(N, V, [&](int64_t n0, int64_t n1) {
    const DF d;
    const int64_t L = static_cast<int64_t>(hn::Lanes(d));
    for (int64_t g0 = n0; g0 < n1; g0 += kSumRows) {
      const int64_t rows = std::min(kSumRows, n1 - g0);
      float zmax[kSumRows], zt[kSumRows];
      double sum[kSumRows] = {};
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t n = g0 + r;
        const float* z = logits + n * V;
        float* p = probs + n * V;
        zmax[r] = RowMaximum(z, V);
        zt[r] = targets[n] != ignore ? z[targets[n]] : 0.0f;  // before p may overwrite z
        for (int64_t v = 0; v < V; v += L) {
          const auto count = static_cast<size_t>(std::min(L, V - v));
          StorePart(hn::Exp(d, hn::Sub(LoadPart(d, z + v, count), hn::Set(d, zmax[r]))), d, p + v, count);
        }
      }
      const float* p0 = probs + g0 * V;
      if (rows == kSumRows) {
        for (int64_t v = 0; v < V; ++v)
          for (int64_t r = 0; r < kSumRows; ++r) sum[r] += p0[r * V + v];
      } else {
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t v = 0; v < V; ++v) sum[r] += p0[r * V + v];
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t n = g0 + r;
        float* p = probs + n * V;
        losses[n] = targets[n] != ignore ? static_cast<float>(std::log(sum[r]) + zmax[r] - zt[r]) : 0.0f;
        const auto inv = hn::Set(d, static_cast<float>(1.0 / sum[r]));
        for (int64_t v = 0; v < V; v += L) {
          const auto count = static_cast<size_t>(std::min(L, V - v));
          StorePart(hn::Mul(LoadPart(d, p + v, count), inv), d, p + v, count);
        }
      }
    }
  });
}

// dlogits = probs * dloss, minus dloss at the target; rows of ignored targets 0.
void CrossEntropyBackwardImpl(float* dlogits, const float* probs, const int32_t* targets, int32_t ignore,
                              float dloss, int64_t N, int64_t V) {
  posenc::parallel_chunks(N, V, [&](int64_t n0, int64_t n1) {
    const DF d;
    const int64_t L = static_cast<int64_t>(hn::Lanes(d));
    const VF scale = hn::Set(d, dloss);
    for (int64_t n = n0; n < n1; ++n) {
      float* g = dlogits + n * V;
      const bool counted = targets[n] != ignore;
      for (int64_t v = 0; v < V; v += L) {
        const auto count = static_cast<size_t>(std::min(L, V - v));
        const VF x = counted ? hn::Mul(LoadPart(d, probs + n * V + v, count), scale) : hn::Zero(d);
        StorePart(x, d, g + v, count);
      }
      if (counted) g[targets[n]] -= dloss;
    }
  });
}

// ---- AdamW: the scalar update's operations in its order (no FMA), so the same bits on every target.
void AdamWImpl(const AdamWStep& s, float* params, const float* grads, float* m, float* v, int64_t n) {
  const DF d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  const auto b1 = hn::Set(d, s.b1), b2 = hn::Set(d, s.b2), ob1 = hn::Set(d, 1 - s.b1),
             ob2 = hn::Set(d, 1 - s.b2);
  const auto c1 = hn::Set(d, s.c1), c2 = hn::Set(d, s.c2), lr = hn::Set(d, s.lr), eps = hn::Set(d, s.eps);
  const auto decay = hn::Set(d, s.decay), clip = hn::Set(d, s.clip_scale);
  for (int64_t i = 0; i < n; i += L) {
    const auto count = static_cast<size_t>(std::min(L, n - i));
    const auto g = hn::Mul(LoadPart(d, grads + i, count), clip);
    const auto mi = hn::Add(hn::Mul(b1, LoadPart(d, m + i, count)), hn::Mul(ob1, g));
    const auto vi = hn::Add(hn::Mul(b2, LoadPart(d, v + i, count)), hn::Mul(hn::Mul(ob2, g), g));
    const auto mhat = hn::Div(mi, c1), vhat = hn::Div(vi, c2);
    const auto p = LoadPart(d, params + i, count);
    const auto step = hn::Add(hn::Div(mhat, hn::Add(hn::Sqrt(vhat), eps)), hn::Mul(decay, p));
    StorePart(hn::Sub(p, hn::Mul(lr, step)), d, params + i, count);
    StorePart(mi, d, m + i, count);
    StorePart(vi, d, v + i, count);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::lab::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::lab::kernels {
HWY_EXPORT(GemmImpl);
HWY_EXPORT(GeluForwardImpl);
HWY_EXPORT(GeluBackwardImpl);
HWY_EXPORT(ColumnSumsImpl);
HWY_EXPORT(NormForwardImpl);
HWY_EXPORT(NormBackwardImpl);
HWY_EXPORT(NormApplyImpl);
HWY_EXPORT(CrossEntropyForwardImpl);
HWY_EXPORT(CrossEntropyBackwardImpl);
HWY_EXPORT(AdamWImpl);
HWY_EXPORT(SumOfSquaresImpl);

void gemm(const Gemm& g) {
  if (g.m <= 0 || g.n <= 0) return;
  HWY_DYNAMIC_DISPATCH(GemmImpl)(g);
}
void gelu_forward(float* out, const float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(GeluForwardImpl)(out, x, n); }
void gelu_backward(float* dx, const float* x, const float* dout, int64_t n) {
  HWY_DYNAMIC_DISPATCH(GeluBackwardImpl)(dx, x, dout, n);
}
void column_sums(float* out, const float* x, int64_t rows, int64_t cols, int64_t ld) {
  HWY_DYNAMIC_DISPATCH(ColumnSumsImpl)(out, x, rows, cols, ld);
}
void norm_forward(bool layer, float* out, float* mean, float* rstd, const float* inp, const float* weight,
                  const float* bias, float eps, int64_t N, int64_t C) {
  HWY_DYNAMIC_DISPATCH(NormForwardImpl)(layer, out, mean, rstd, inp, weight, bias, eps, N, C);
}
void norm_backward(bool layer, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                   const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C) {
  HWY_DYNAMIC_DISPATCH(NormBackwardImpl)(layer, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}
void norm_apply(bool layer, float* out, const float* inp, const float* weight, const float* bias,
                const float* mean, const float* rstd, int64_t N, int64_t C) {
  HWY_DYNAMIC_DISPATCH(NormApplyImpl)(layer, out, inp, weight, bias, mean, rstd, N, C);
}
void crossentropy_forward(float* probs, float* losses, const float* logits, const int32_t* targets,
                          int32_t ignore, int64_t N, int64_t V) {
  HWY_DYNAMIC_DISPATCH(CrossEntropyForwardImpl)(probs, losses, logits, targets, ignore, N, V);
}
void crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets, int32_t ignore,
                           float dloss, int64_t N, int64_t V) {
  HWY_DYNAMIC_DISPATCH(CrossEntropyBackwardImpl)(dlogits, probs, targets, ignore, dloss, N, V);
}
double sum_of_squares(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(SumOfSquaresImpl)(x, n); }
void adamw(const AdamWStep& s, float* params, const float* grads, float* m, float* v, int64_t n) {
  HWY_DYNAMIC_DISPATCH(AdamWImpl)(s, params, grads, m, v, n);
}
}  // namespace posenc::lab::kernels
#endif  // HWY_ONCE
