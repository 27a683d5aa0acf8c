// src/cpu/transformer_xl.h: Transformer-XL (Dai et al. 2019) position terms, CPU loops. Views arrive
// validated, positions gathered and checked.
//   logits (B, H, Q, K), q (B, Q, H, D), k (B, K, H, D), u/v (H, D), W_R (H * D, d_model)
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "src/strided.h"
#include "src/transformer_xl_plan.h"

namespace posenc::cpu {
using detail::DeltaIndex;

struct TransformerXLShapes {
  int64_t batch, heads, nq, nk, dim, d_model;
  double base;
  std::span<const int64_t> q_pos, k_pos;  // (Q), (K)
};
struct TransformerXLInputs {
  Strided<const float, 4> q, k;
  Strided<const float, 2> u, v, w_r;
};
struct TransformerXLGrads {  // accumulated (+=)
  Strided<float, 4> q, k;
  Strided<float, 2> u, v, w_r;
};
// logits (b, h, i, j) = (q_i + v_h) . rproj_h(delta_ij) + u_h . k_j,  delta_ij = q_pos[i] - k_pos[j]
void transformer_xl_logits(const TransformerXLShapes& sh, const TransformerXLInputs& in,
                           Strided<float, 4> out);
void transformer_xl_logits_backward(const TransformerXLShapes& sh, const TransformerXLInputs& in,
                                    Strided<const float, 4> grad, const TransformerXLGrads& grads);

// R (n, d_model) in double: [sin(delta w_i) | cos(delta w_i)], w_i = base^(-2i / d_model).
std::vector<double> transformer_xl_sinusoids(std::span<const int64_t> deltas, int64_t d_model, double base);
// out (n, d_model) = R_delta for the given deltas, rounded to float.
void transformer_xl_sinusoid_rows(std::span<const int64_t> deltas, int64_t d_model, double base,
                                  Strided<float, 2> out);
// rproj (H, n, D) = W_R,h R_delta.
std::vector<double> transformer_xl_project(int64_t heads, int64_t dim, int64_t d_model,
                                           Strided<const float, 2> w_r, const std::vector<double>& r,
                                           int64_t n);
// d W_R (H * D, d_model) += sum_delta d rproj_h[delta, d] R_delta[e]   (forward: rproj = W_R R)
void transformer_xl_project_backward(int64_t heads, int64_t dim, int64_t d_model,
                                     const std::vector<float>& d_rproj, const std::vector<double>& r,
                                     int64_t n, Strided<float, 2> grad_w_r);

// The attention's queries: qu = q + u_h (content), qv = q + v_h (position), both (B, Q, H, D)
// contiguous, from rows q (B, Q, H) of D elements.
void transformer_xl_shift_queries(Strided<const float, 3> q, int64_t dim, Strided<const float, 2> u,
                                  Strided<const float, 2> v, float* qu, float* qv);
// rproj (H, n, D) -> (H, D, n).
std::vector<float> transformer_xl_transpose_projection(const std::vector<float>& rproj, int64_t heads,
                                                       int64_t n, int64_t dim);

}  // namespace posenc::cpu
