// src/cpu/shaw.h: Shaw et al. (2018) relative position representations, CPU loops. Views arrive
// validated, positions gathered and checked.
//   logits (B, H, Q, K), heads q/out (B, Q, H, D), tables a_k/a_v (rows = 2 max_distance + 1, D)
#pragma once
#include <cstdint>
#include <span>

#include "src/strided.h"

namespace posenc::cpu {

struct ShawShapes {
  int64_t batch, heads, nq, nk, dim, max_distance;
  std::span<const int64_t> q_pos, k_pos;  // (Q), (K)
};
// logits (b, h, i, j) = q_i . a_k[r(i, j)],  r = clip(k_pos - q_pos, -max_distance, max_distance) +
// max_distance
void shaw_key_logits(const ShawShapes& sh, Strided<const float, 2> a_k, Strided<const float, 4> q,
                     Strided<float, 4> out);
// forward: logits = q_i . a_k[r]  ->  grad_q_i += sum_j g_ij a_k[r],  grad_a_k[r] += sum g_ij q_i
void shaw_key_logits_backward(const ShawShapes& sh, Strided<const float, 2> a_k, Strided<const float, 4> q,
                              Strided<const float, 4> grad, Strided<float, 4> grad_q,
                              Strided<float, 2> grad_a_k);
// out_i += sum_j p_ij a_v[r(i, j)]
void shaw_value_output(const ShawShapes& sh, Strided<const float, 2> a_v, Strided<const float, 4> probs,
                       Strided<float, 4> out);
// forward: out_i += sum_j p_ij a_v[r]  ->  grad_probs_ij += grad_out_i . a_v[r],  grad_a_v[r] += sum p_ij
// grad_out_i
void shaw_value_output_backward(const ShawShapes& sh, Strided<const float, 2> a_v,
                                Strided<const float, 4> probs, Strided<const float, 4> grad_out,
                                Strided<float, 4> grad_probs, Strided<float, 2> grad_a_v);

// dst (rows, D) = table, and dst_t (D, rows) = its transpose (the attention's packed Shaw tables).
void shaw_pack_table(Strided<const float, 2> table, float* dst, float* dst_t);

}  // namespace posenc::cpu
