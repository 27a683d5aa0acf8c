// posenc/shaw.h: relative position representations (Shaw, Uszkoreit, Vaswani 2018, arXiv 1803.02155).
//
//   e_ij = q_i . (k_j + a^K_{r(i,j)}) / sqrt(d)       z_i = sum_j alpha_ij (v_j + a^V_{r(i,j)})
//   r(i, j) = clip(k_pos[j] - q_pos[i], -max_distance, max_distance) + max_distance
// a^K and a^V are (2 * max_distance + 1, D) tables shared across heads. These functions compute the
// two positional terms (the q . a^K logits and the sum_j alpha_ij a^V output); attention adds the
// content terms. Costs O(Q * (2k+1) * D) per (b, h) for the projections plus O(Q * K) lookups.
#pragma once
#include <cstdint>

#include "posenc/tensor.h"

namespace posenc {

struct ShawConfig {
  int64_t max_distance = 0;  // k of the clipping window [-k, k]
  int64_t head_dim = 0;
  int64_t num_rows() const { return 2 * max_distance + 1; }
};
void validate(const ShawConfig& config);

// Activations (q, logits, probs, out and their gradients) may be bf16 or fp16: widened once, computed
// in fp32, each output rounded once; the tables a_k, a_v and their gradients are fp32.
// logits (B, H, Q, K) = q (B, Q, H, D) . a_k[r(i, j)]   (overwrites logits)
void shaw_key_logits(const ShawConfig& config, ConstTensorView a_k, ConstTensorView q,
                     ConstTensorView q_positions, ConstTensorView k_positions, TensorView logits);
// grad_q (B, Q, H, D) += sum_j g_ij a_k[r];  grad_a_k (rows, D) += sum g_ij q_i
void shaw_key_logits_backward(const ShawConfig& config, ConstTensorView a_k, ConstTensorView q,
                              ConstTensorView q_positions, ConstTensorView k_positions,
                              ConstTensorView grad_logits, TensorView grad_q, TensorView grad_a_k);

// out (B, Q, H, D) += sum_j probs (B, H, Q, K) [i, j] * a_v[r(i, j)]
void shaw_value_output(const ShawConfig& config, ConstTensorView a_v, ConstTensorView probs,
                       ConstTensorView q_positions, ConstTensorView k_positions, TensorView out);
// grad_probs (B, H, Q, K) += grad_out_i . a_v[r];  grad_a_v (rows, D) += sum probs_ij grad_out_i
void shaw_value_output_backward(const ShawConfig& config, ConstTensorView a_v, ConstTensorView probs,
                                ConstTensorView q_positions, ConstTensorView k_positions,
                                ConstTensorView grad_out, TensorView grad_probs, TensorView grad_a_v);

}  // namespace posenc
