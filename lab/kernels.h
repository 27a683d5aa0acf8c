// lab/kernels.h: the SIMD loops under the lab's layers (ops.h), compiled with Highway for every
// target it knows (SSSE3, SSE4, AVX2, AVX-512, ...) and chosen once per call from the CPU's
// features at run time, so that the trainer's speed depends on no library recognising the CPU.
// No SIMD types here; ops.h documents each layer, ops.cc calls these.
//
// The matrix product runs every output element as one chain of fused multiply-adds along k, in
// order, from 0 (or from C's old value when accumulating): the split into tasks, tiles and
// k-blocks changes which core computes an element and when, never its arithmetic, so results do not
// depend on the thread count (nor on the SIMD width, on targets with FMA: AVX2 and up).
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "src/line_floats.h"

namespace posenc::lab::kernels {

using posenc::LineFloats;  // src/line_floats.h

// A matrix operand: element (i, l) at data[i * row + l * col] (a transpose swaps row and col).
struct Matrix {
  const float* data = nullptr;
  int64_t row = 0, col = 0;
};

// C (m, n) at c[i * ldc + j]. With s_ij = sum over l of A (m, k)[i, l] B (k, n)[l, j]:
//   x = s (+ C, with accumulate) (+ bias[j]) (+ residual[i, j]),  C = x;
//   with gelu_out:  gelu_out[i, j] = gelu(x_ij), and with gelu_grad too, C = gelu'(x) in place of x
//   (the MLP's first layer keeps what its backward multiplies by, not the input it would recompute
//   gelu' from; C's whole tiles are then written past the caches where its rows are aligned to a vector:
//   nothing reads them before the backward);
// or, with factor (accumulate false, no bias or residual): C = factor[i, j] * s (the gradient at
// GELU's input from the kept gelu'). residual, gelu_out and factor are (m, n) with C's row stride.
// The epilogue is applied to each output tile while it is in registers, sparing the passes over C
// that separate loops take.
struct Gemm {
  int64_t m = 0, n = 0, k = 0;
  Matrix a, b;
  float* c = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;
  const float* bias = nullptr;
  const float* residual = nullptr;
  float* gelu_out = nullptr;
  bool gelu_grad = false;
  const float* factor = nullptr;
  // Optional: floats [ahead, ahead + ahead_floats) that the caller reads next, requested into L2 a piece
  // per output tile while the product computes (no effect on any result).
  const float* ahead = nullptr;
  int64_t ahead_floats = 0;
};
void gemm(const Gemm& g);

// GELU, tanh approximation: out (n) = gelu(x);  dx (n) += gelu'(x) * dout.
void gelu_forward(float* out, const float* x, int64_t n);
void gelu_backward(float* dx, const float* x, const float* dout, int64_t n);

// out (cols) += x[r * ld + j] for the rows r in order (one chain of adds from out's value, so that rows
// summed in consecutive parts give the same bits as in one call): the gradient of a bias.
void column_sums(float* out, const float* x, int64_t rows, int64_t cols, int64_t ld);

// LayerNorm (layer true) or RMSNorm rows, as ops::norm_forward / ops::norm_backward (ops.h).
void norm_forward(bool layer, float* out, float* mean, float* rstd, const float* inp, const float* weight,
                  const float* bias, float eps, int64_t N, int64_t C);
void norm_backward(bool layer, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                   const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C);
// norm_forward's out again from its mean and rstd (the same bits): out = (x - mean) * rstd * weight
// (+ bias, layer only).
void norm_apply(bool layer, float* out, const float* inp, const float* weight, const float* bias,
                const float* mean, const float* rstd, int64_t N, int64_t C);

// Softmax rows and their cross-entropy losses, and their gradient, as ops::crossentropy_forward and
// ops::crossentropy_backward (ops.h).
void crossentropy_forward(float* probs, float* losses, const float* logits, const int32_t* targets,
                          int32_t ignore, int64_t N, int64_t V);
void crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets, int32_t ignore,
                           float dloss, int64_t N, int64_t V);

// ---- Causal attention over short windows: each sequence of the batch is one window of T tokens at
// positions 0 .. T-1, as in the lab's model. Per sequence b and head h, for queries i and keys j <= i:
//   S_ij = scale q_i . k_j + bias[h, T-1 - (i - j)]
//   P_i = softmax(S_i),  out_i = sum_j P_ij v_j,  lse_i = log sum_j exp S_ij
// bias (H, T), or null: a bias that depends on the distance i - j only, stored as the logits of the
// last query (T-1) against keys 0 .. T-1 (posenc::alibi_bias / relative_bias with q_positions {T-1}
// and k_positions 0 .. T-1); query i reads the slice that ends at column T-1:
//   bias[h] = [ b(T-1) b(T-2) ... b(1) b(0) ]     b(d): the bias at distance d = i - j
//   query i, keys 0 .. i  ->  columns T-1-i .. T-1
// One task per (sequence, head), its T x T logits in a scratch of its thread (T^2 floats: meant for
// the lab's lengths; lab/attention.h sends longer windows to posenc's attention). Each element is one
// fixed-order sum (fused multiply-adds along the keys or the head's dimensions; softmax sums in a
// fixed vector order), so results do not depend on the thread count.
//
// Rows: element d of token t of sequence b, head h at data[(b T + t) ld + h D + d] (q, k and v in the
// lab's fused (N, 3C) buffer: ld = 3C; out (N, C): ld = C).
struct ConstRows {
  const float* data = nullptr;
  int64_t ld = 0;
};
struct Rows {
  float* data = nullptr;
  int64_t ld = 0;
};
//
// Relative vectors (Shaw's a^K and a^V, Transformer-XL's W_R R), optional: per head h a key table
// E_h and a value table F_h of T rows of D each, in the bias row's order (row m holds the vector of
// distance T-1-m: row T-1-(i-j) is the pair (i, j)'s), and rows p of position queries:
//   S_ij = scale (q_i . k_j + p_i . E_h[T-1-(i-j)]) + bias[h, T-1-(i-j)]
//   out_i = sum_j P_ij (v_j + F_h[T-1-(i-j)])
// (Shaw: p = q, E and F its tables read by the clipped distance; Transformer-XL: q = q + u_h,
// p = q + v_h, E_h = W_R,h R, no F.) Table h starts at rel_key + h * rel_head_stride (0: one table for
// every head); rel_value null: no value term.
struct Attention {
  int64_t B = 0, T = 0, H = 0, D = 0;
  float scale = 0;
  ConstRows q, k, v;
  const float* bias = nullptr;  // (H, T), or null
  ConstRows p;                  // with rel_key
  const float* rel_key = nullptr;
  const float* rel_value = nullptr;
  int64_t rel_head_stride = 0;
};
// out: rows (B, T, H) of D; lse (B, H, T).
void attention_forward(const Attention& a, Rows out, float* lse);
// The gradients of the relative vectors: dp rows (B, T, H) of D, stored; d rel_key and d rel_value
// (H, T, D), per head whatever rel_head_stride, accumulated (the sum over the sequences, in order), or
// null (none).
struct RelativeGrads {
  Rows dp;
  float* rel_key = nullptr;
  float* rel_value = nullptr;
};
// The backward from the forward's out and lse (the probabilities recomputed from lse):
//   dP = dout V^T (+ dout_i . F_h[T-1-(i-j)]),  dS_ij = P_ij (dP_ij - dout_i . out_i),  dq = scale dS K,
//   dk = scale dS^T Q,  dv = P^T dout,  dbias[h, T-1 - d] += the sum of dS_ij over the pairs at distance d,
//   every sequence; with relative vectors, dp_i = scale sum_j dS_ij E_h[T-1-(i-j)],
//   dE_h[T-1-d] += scale sum of dS_ij p_i and dF_h[T-1-d] += sum of P_ij dout_i over the pairs at distance d.
// dq, dk, dv rows are stored (overwritten); dbias (H, T) is accumulated, or null (no bias gradient).
void attention_backward(const Attention& a, ConstRows out, const float* lse, ConstRows dout, Rows dq, Rows dk,
                        Rows dv, float* dbias, const RelativeGrads& rel = {});

// The attention's exponential (e^x as Highway's Exp, on AVX-512 with one VSCALEFPS for its last step:
// kernels-inl.h) into `ours` and Highway's Exp itself into `highway`, of n floats x: for the tests.
void attention_exp(const float* x, float* ours, float* highway, int64_t n);

// RoPE's rotation in the half layout (pair j = (x_j, x_{P+j}), P = pairs), of rows (B, T, H) of D >= 2P
// from `in` into `out` (the same rows: in place; else dims past 2P are copied):
//   out_j = x_j cos_tj - x_{P+j} sin_tj,  out_{P+j} = x_{P+j} cos_tj + x_j sin_tj
// cos and sin (T, P) are token t's tables (posenc::Rope::cos_sin), applied with the arithmetic of
// posenc's rotation, so that the rows are its bits; its gradient is the same with sin negated.
void rope_rotate(const float* cos, const float* sin, int64_t pairs, ConstRows in, Rows out, int64_t B,
                 int64_t T, int64_t H, int64_t D);

// sum over i of x_i^2 (n floats) in double: the squares are exact, their sum in a fixed order of 16
// running sums (the same bits on every target), to within n ulp of double of the exact sum.
double sum_of_squares(const float* x, int64_t n);

// AdamW on params[begin, end), as AdamW::step (optimizer.h): g = grad * clip_scale,
// m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, p -= lr (m / c1 / (sqrt(v / c2) + eps) + decay p).
struct AdamWStep {
  float b1, b2, c1, c2, lr, eps, decay, clip_scale;
};
void adamw(const AdamWStep& s, float* params, const float* grads, float* m, float* v, int64_t n);

}  // namespace posenc::lab::kernels
