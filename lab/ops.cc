// lab/ops.cc: see ops.h.
#include "ops.h"

#include <algorithm>
#include <cmath>

#include "kernels.h"
#include "posenc/error.h"
#include "posenc/threads.h"

namespace posenc::lab::ops {

void set_threads(int n) { posenc::set_num_threads(n); }

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N,
                    int64_t C, int64_t OC, const float* residual, float* gelu_out, bool gelu_grad) {
  // out[n, o] = sum_c inp[n, c] weight[o, c] + bias[o] (+ residual[n, o]): A = inp, B = weight^T.
  // The epilogue reads residual after out holds partial sums (k-blocks): the two must differ.
  if (out == inp || out == residual || out == gelu_out)
    throw Error(std::string("lab ops: matmul_forward's out aliases its ") +
                (out == inp        ? "inp"
                 : out == residual ? "residual"
                                   : "gelu_out") +
                ": give it a buffer of its own");
  kernels::Gemm g;
  g.m = N, g.n = OC, g.k = C;
  g.a = {inp, C, 1};
  g.b = {weight, 1, C};
  g.c = out, g.ldc = OC;
  if (gelu_grad && gelu_out == nullptr)
    throw Error("lab ops: matmul_forward's gelu_grad is true without gelu_out: gelu' goes with gelu");
  g.bias = bias, g.residual = residual, g.gelu_out = gelu_out, g.gelu_grad = gelu_grad;
  kernels::gemm(g);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int64_t C, int64_t OC, Dinp mode, const float* factor,
                     const Ahead& ahead) {
  if ((mode == Dinp::times) != (factor != nullptr))
    throw Error(std::string("lab ops: matmul_backward's factor is ") + (factor ? "set" : "null") +
                " with mode " + (mode == Dinp::times ? "times" : "add or store") +
                ": it is given exactly with times");
  // forward: out[n, o] = sum_c inp[n, c] weight[o, c] + bias[o]
  if (dinp != nullptr) {  // dinp (N, C) (+)= dout (N, OC) @ weight (OC, C)
    kernels::Gemm g;
    g.m = N, g.n = C, g.k = OC;
    g.a = {dout, OC, 1};
    g.b = {weight, C, 1};
    g.c = dinp, g.ldc = C;
    g.accumulate = mode == Dinp::add;
    g.factor = factor;
    g.ahead = ahead.during_dinp, g.ahead_floats = ahead.during_dinp ? ahead.floats : 0;
    kernels::gemm(g);
  }
  // dweight (OC, C) += dout^T (OC, N) @ inp (N, C): each element's sum runs over the N rows in order
  kernels::Gemm g;
  g.m = OC, g.n = C, g.k = N;
  g.a = {dout, 1, OC};
  g.b = {inp, C, 1};
  g.c = dweight, g.ldc = C;
  g.accumulate = true;
  g.ahead = ahead.during_dweight, g.ahead_floats = ahead.during_dweight ? ahead.floats : 0;
  kernels::gemm(g);
  if (dbias != nullptr) kernels::column_sums(dbias, dout, N, OC, OC);
}

void norm_forward(Norm norm, float* out, float* mean, float* rstd, const float* inp, const float* weight,
                  const float* bias, int64_t N, int64_t C) {
  kernels::norm_forward(norm == Norm::layer, out, mean, rstd, inp, weight, bias, kNormEps, N, C);
}

void norm_backward(Norm norm, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                   const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C) {
  kernels::norm_backward(norm == Norm::layer, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

void norm_apply(Norm norm, float* out, const float* inp, const float* weight, const float* bias,
                const float* mean, const float* rstd, int64_t N, int64_t C) {
  kernels::norm_apply(norm == Norm::layer, out, inp, weight, bias, mean, rstd, N, C);
}

void gelu_forward(float* out, const float* inp, int64_t n) { kernels::gelu_forward(out, inp, n); }

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
  kernels::gelu_backward(dinp, inp, dout, n);
}

void crossentropy_forward(float* probs, float* losses, const float* logits, const int32_t* targets, int64_t N,
                          int64_t V) {
  kernels::crossentropy_forward(probs, losses, logits, targets, kIgnoreTarget, N, V);
}

void crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets, float dloss, int64_t N,
                           int64_t V) {
  kernels::crossentropy_backward(dlogits, probs, targets, kIgnoreTarget, dloss, N, V);
}

void read_ahead(const float* p, int64_t n) {
  constexpr int64_t kLine = 16;  // floats
  // Four lines per step into four running sums, so that no load waits on another's add; the volatile store
  // keeps the loads.
  float sum[4] = {};
  int64_t i = 0;
  for (; i + 4 * kLine <= n; i += 4 * kLine)
    for (int s = 0; s < 4; ++s) sum[s] += p[i + s * kLine];
  for (; i < n; i += kLine) sum[0] += p[i];
  volatile float sink = sum[0] + sum[1] + sum[2] + sum[3];
  (void)sink;
}

void embedding_forward(float* out, const int32_t* tokens, const float* wte, float scale, int64_t N,
                       int64_t C) {
  posenc::parallel_chunks(N, C, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t i = 0; i < C; ++i) out[n * C + i] = scale * wte[tokens[n] * C + i];
  });
}

void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, float scale, int64_t N,
                        int64_t C) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < C; ++i) dwte[tokens[n] * C + i] += scale * dout[n * C + i];
}

}  // namespace posenc::lab::ops
