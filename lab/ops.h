// lab/ops.h: the layers of the lab's transformer, forward and backward, in the style of llm.c
// (train_gpt2.c): plain functions over contiguous float arrays, shapes at the top, each backward
// beside its forward. Backwards accumulate (+=) into their gradients unless told to store. Every
// output element is one fixed-order sum, so results do not depend on the thread count. The loops
// are lab/kernels.h's, compiled for every SIMD target and chosen from the CPU's features at run
// time; tests/test_lab_ops.cc checks every op against a double-precision loop on each target and
// every backward against finite differences.
#pragma once
#include <cstdint>

namespace posenc::lab::ops {

// Threads for the lab (posenc's pool: the library's kernels and these loops). n >= 1.
void set_threads(int n);

// out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias (OC) (+ residual (N, OC)); bias and residual
// may be null. With gelu_out (N, OC): also gelu_out = gelu(out), the MLP's first layer; with
// gelu_grad as well, out receives gelu'(x) in place of x (x: the product plus bias), the factor its
// backward multiplies by (Dinp::times), so that the backward need not evaluate gelu' again. Added in
// the store of each output tile: no pass of their own. out may not alias inp, residual or gelu_out.
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N,
                    int64_t C, int64_t OC, const float* residual = nullptr, float* gelu_out = nullptr,
                    bool gelu_grad = false);

// What matmul_backward does with the product dout @ weight (N, C):
enum class Dinp : uint8_t {
  add,    // dinp += it, as every backward
  store,  // dinp = it (dinp need not be zeroed)
  times,  // dinp = factor * it, elementwise: with factor = gelu'(x) (matmul_forward's gelu_grad), the
          // gradient at GELU's input of a layer whose input was gelu(x) (the MLP's projection)
};
// What the caller reads next, requested into L2 a piece at a time while matmul_backward's products compute
// (from L3 or memory, it would otherwise arrive when first read): `floats` from during_dinp during the input
// gradient's product and `floats` from during_dweight during the weights'. Null: nothing. No effect on any
// result.
struct Ahead {
  const float* during_dinp = nullptr;
  const float* during_dweight = nullptr;
  int64_t floats = 0;
};
// dinp (N, C) (+)= dout @ weight;  dweight (OC, C) += dout^T @ inp;  dbias (OC) += sum_n dout[n]
// (dinp or dbias may be null; factor (N, C) with Dinp::times only). dweight's and dbias's elements add
// the rows one after another onto their values, so that the rows passed in consecutive parts give the
// same bits as in one call.
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int64_t C, int64_t OC, Dinp mode = Dinp::add,
                     const float* factor = nullptr, const Ahead& ahead = {});

enum class Norm : uint8_t {
  layer,  // LayerNorm (Ba et al. 2016): (x - mean) * rstd * weight + bias, eps 1e-5
  rms,    // RMSNorm (Zhang & Sennrich 2019): x * rstd * weight with rstd = 1/sqrt(mean(x^2) + eps)
};
inline constexpr float kNormEps = 1e-5f;
// out (N, C); mean, rstd (N) saved for the backward (mean = 0 for rms); bias ignored for rms.
void norm_forward(Norm norm, float* out, float* mean, float* rstd, const float* inp, const float* weight,
                  const float* bias, int64_t N, int64_t C);
// dinp (N, C) +=, dweight (C) +=, dbias (C) += (layer only)
void norm_backward(Norm norm, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                   const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C);
// norm_forward's out (N, C) again from inp and its mean and rstd, bit for bit: the backward recomputes it
// where it needs it instead of keeping it.
void norm_apply(Norm norm, float* out, const float* inp, const float* weight, const float* bias,
                const float* mean, const float* rstd, int64_t N, int64_t C);

// GELU, tanh approximation (Hendrycks & Gimpel 2016; GPT-2): 0.5 x (1 + tanh(s (x + 0.044715 x^3))),
// s = sqrt(2 / pi). out, inp (n)
void gelu_forward(float* out, const float* inp, int64_t n);
// dinp (n) += gelu'(inp) * dout
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n);

// A target that does not count (PyTorch's ignore_index): its loss is 0 and its gradient 0, its
// probabilities are still computed (the synthetic tasks score only their answer positions).
inline constexpr int32_t kIgnoreTarget = -1;

// probs (N, V) = softmax(logits (N, V)); losses (N) = -log probs[n, targets[n]] (the exponentials
// in fp32, their sum and the log-sum-exp in double, so small probabilities keep their digits), 0
// where the target is kIgnoreTarget. probs may alias logits.
void crossentropy_forward(float* probs, float* losses, const float* logits, const int32_t* targets, int64_t N,
                          int64_t V);
// dlogits (N, V) = (probs - onehot(targets)) * dloss, 0 rows for ignored targets
// (dloss: d mean-loss / d loss_n = 1 / number of counted targets)
void crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets, float dloss, int64_t N,
                           int64_t V);

// Reads one float per 64 bytes of [p, p + n), in order, and nothing more: brings an array that the forward
// wrote long before (streamed to memory, or evicted to L3) into the caches in one sequential pass, which the
// hardware's stream prefetcher follows, ahead of a product whose tiles read it in their own order (6 rows x
// 4 lines at a time, 1 KiB apart, a strip of columns at a time) at the end of each tile, where each miss
// stalls the tile. No effect on any result.
void read_ahead(const float* p, int64_t n);

// out (N, C) = scale * wte[tokens[n]]   (wte (V, C))
void embedding_forward(float* out, const int32_t* tokens, const float* wte, float scale, int64_t N,
                       int64_t C);
// dwte (V, C) += scale * dout[n] at row tokens[n], in token order (deterministic)
void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, float scale, int64_t N,
                        int64_t C);

}  // namespace posenc::lab::ops
