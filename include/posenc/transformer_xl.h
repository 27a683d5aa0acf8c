// posenc/transformer_xl.h: Transformer-XL relative encoding (Dai et al. 2019, arXiv 1901.02860).
//
// The score of query i and key j is  (a) q_i.k_j + (b) q_i.W_R R_{i-j} + (c) u.k_j + (d) v.W_R R_{i-j}
// with R_delta the sinusoid of delta = q_pos - k_pos in the split layout [sin | cos] and frequencies
// base^(-2i/d_model), W_R (H*D, d_model) the relative key projection, u and v (H, D) learned biases.
// These functions compute the position terms (b) + (c) + (d); attention adds (a).
#pragma once
#include <cstdint>

#include "posenc/tensor.h"

namespace posenc {

struct TransformerXLConfig {
  int64_t d_model = 0;  // width of R_delta (even)
  int64_t heads = 0;
  int64_t head_dim = 0;
  double base = 10000.0;
};
void validate(const TransformerXLConfig& config);

// R (N, d_model) for distances (N): the sinusoid Transformer-XL feeds to W_R.
void transformer_xl_sinusoid(const TransformerXLConfig& config, ConstTensorView distances, TensorView out);

// q, k, logits, grad_logits, grads.q and grads.k may be bf16 or fp16 (widened once, computed in fp32,
// each output rounded once); u, v, W_R and their gradients are fp32.
// logits (B, H, Q, K) = (q_i + v_h) . (W_R,h R_{i-j}) + u_h . k_j   (overwrites logits)
//   q (B, Q, H, D), k (B, K, H, D), u and v (H, D), w_r (H*D, d_model)
void transformer_xl_logits(const TransformerXLConfig& config, ConstTensorView q, ConstTensorView k,
                           ConstTensorView u, ConstTensorView v, ConstTensorView w_r,
                           ConstTensorView q_positions, ConstTensorView k_positions, TensorView logits);

struct TransformerXLGrads {
  TensorView q, k, u, v, w_r;  // each += ; shapes as in transformer_xl_logits
};
void transformer_xl_logits_backward(const TransformerXLConfig& config, ConstTensorView q, ConstTensorView k,
                                    ConstTensorView u, ConstTensorView v, ConstTensorView w_r,
                                    ConstTensorView q_positions, ConstTensorView k_positions,
                                    ConstTensorView grad_logits, const TransformerXLGrads& grads);

}  // namespace posenc
