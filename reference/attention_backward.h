// reference/attention_backward.h: the naive backward of ref::attention (reference/attention.h), in
// T (double for the oracle): plain loops, scores materialised row by row, every gradient derived
// by hand from the forward. Each step quotes the forward line it differentiates.
//
//   q (B, Q, H, D), k (B, K, Hkv, D), v (B, K, Hkv, Dv), grad_out (B, Q, H, Dv), as the forward.
//   Returns dq (B, Q, H, D), dk (B, K, Hkv, D), dv (B, K, Hkv, Dv), and the positional parameters' gradients
//   in the layouts of AttentionProblem: relative_table (rows, H); shaw_a_k, shaw_a_v (rows, D);
//   transformer_xl_u, transformer_xl_v (H, D); transformer_xl_w_r (H * D, d_model). A gradient whose
//   parameter is absent is empty.
//
// RoPE: like the forward, this sees q and k already rotated, so dq and dk are w.r.t. the rotated
// q and k. The caller maps them back with the transposed rotation, ref::rope(..., inverse = true)
// (forward: q_rot = a R(theta) q, so dq = a R(-theta) dq_rot; a = attention_factor).
// ALiBi slopes are constants (no gradient). Fully masked rows contribute nothing (out = 0 there).
// lse is an output of the forward that no loss here depends on: it has no incoming gradient.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <vector>

#include "reference/attention.h"

namespace posenc::ref {

template <typename T>
struct AttentionGradients {
  std::vector<T> q, k, v;
  std::vector<T> relative_table;
  std::vector<T> shaw_a_k, shaw_a_v;
  std::vector<T> transformer_xl_u, transformer_xl_v, transformer_xl_w_r;
  std::vector<T> sinks;
};

template <typename T>
AttentionGradients<T> attention_backward(const AttentionProblem<T>& p, const std::vector<T>& q,
                                         const std::vector<T>& k, const std::vector<T>& v,
                                         const std::vector<T>& grad_out) {
  const int64_t group = p.H / p.Hkv, D = p.D, Dv = p.value_dim();
  const bool shaw = p.shaw_max_distance >= 0, shaw_values = shaw && !p.shaw_a_v.empty(),
             xl = p.transformer_xl_d_model > 0;
  const T neg_inf = -std::numeric_limits<T>::infinity();
  AttentionGradients<T> g;
  g.q.assign(q.size(), T(0));
  g.k.assign(k.size(), T(0));
  g.v.assign(v.size(), T(0));
  if (p.kind == AttentionBias::Kind::relative) g.relative_table.assign(p.relative_table.size(), T(0));
  if (shaw) g.shaw_a_k.assign(p.shaw_a_k.size(), T(0));
  if (shaw_values) g.shaw_a_v.assign(p.shaw_a_v.size(), T(0));
  if (!p.sinks.empty()) g.sinks.assign(p.sinks.size(), T(0));
  if (xl) {
    g.transformer_xl_u.assign(p.transformer_xl_u.size(), T(0));
    g.transformer_xl_v.assign(p.transformer_xl_v.size(), T(0));
    g.transformer_xl_w_r.assign(p.transformer_xl_w_r.size(), T(0));
  }
  // R_delta exactly as the forward builds it (sin half, then cos half).
  std::map<int64_t, std::vector<T>> transformer_xl_r;
  auto sinusoid = [&](int64_t delta) -> const std::vector<T>& {
    std::vector<T>& r = transformer_xl_r[delta];
    if (r.empty()) transformer_xl_sinusoid(delta, p.transformer_xl_d_model, p.transformer_xl_base, r);
    return r;
  };
  auto shaw_r = [&](int64_t b, int64_t i, int64_t j) {
    return shaw_row(p.shaw_max_distance, p.q_pos[b * p.Q + i], p.k_pos[b * p.K + j]);
  };

  std::vector<T> logit(p.K), content(p.K), prob(p.K), dprob(p.K), rp(D);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t i = 0; i < p.Q; ++i) {
        const int64_t hk = h / group;
        const int64_t row_i = ((b * p.Q + i) * p.H + h) * D;
        const T* qi = &q[row_i];
        const T* dout = &grad_out[((b * p.Q + i) * p.H + h) * Dv];
        T* dqi = &g.q[row_i];
        auto wr = [&](int64_t d, int64_t e) -> int64_t { return (h * D + d) * p.transformer_xl_d_model + e; };
        // rp_d = sum_e W_R[h D + d, e] R_delta[e]: the forward's inner sum, recomputed.
        auto project = [&](const std::vector<T>& R) {
          for (int64_t d = 0; d < D; ++d) {
            rp[d] = 0;
            for (int64_t e = 0; e < p.transformer_xl_d_model; ++e)
              rp[d] += p.transformer_xl_w_r[wr(d, e)] * R[e];
          }
        };

        // 1. Recompute the row of the forward: logits, their max, the probabilities.
        T m = neg_inf;
        for (int64_t j = 0; j < p.K; ++j) {
          logit[j] = neg_inf;
          if (!p.allowed(b, i, j)) continue;
          const T* kj = &k[((b * p.K + j) * p.Hkv + hk) * D];
          const int64_t qp = p.q_pos[b * p.Q + i], kp = p.k_pos[b * p.K + j];
          T dot = 0, bias = 0;
          for (int64_t d = 0; d < D; ++d) dot += qi[d] * kj[d];
          if (shaw) {
            const T* a = &p.shaw_a_k[shaw_r(b, i, j) * D];
            for (int64_t d = 0; d < D; ++d) dot += qi[d] * a[d];
          }
          if (xl) {
            project(sinusoid(qp - kp));
            for (int64_t d = 0; d < D; ++d)
              dot += (qi[d] + p.transformer_xl_v[h * D + d]) * rp[d] + p.transformer_xl_u[h * D + d] * kj[d];
          }
          if (p.kind == AttentionBias::Kind::alibi)
            bias = static_cast<T>(-p.alibi_slopes[h] *
                                  (p.alibi_symmetric ? std::abs(double(qp - kp)) : double(qp - kp)));
          else if (p.kind == AttentionBias::Kind::relative)
            bias = p.relative_table[relative_bias_row(p.relative, kp - qp) * p.H + h];
          content[j] = static_cast<T>(p.scale) * dot;
          logit[j] = p.cap(content[j]) + bias;
          m = std::max(m, logit[j]);
        }
        if (!p.sinks.empty()) m = std::max(m, p.sinks[h]);
        // forward: if (m == -inf) { out = 0; lse = -inf; continue; }  -- a constant: no gradient.
        if (m == neg_inf) continue;
        // forward: sum = exp(sink_h - m) + sum_j exp(logit_j - m)
        T sum = p.sinks.empty() ? T(0) : std::exp(p.sinks[h] - m);
        for (int64_t j = 0; j < p.K; ++j) sum += std::exp(logit[j] - m);
        for (int64_t j = 0; j < p.K; ++j) prob[j] = logit[j] == neg_inf ? T(0) : std::exp(logit[j] - m) / sum;

        // 2. forward: out[d] += prob * vj[d];  out[d] += prob * a_v[r][d]   (out_i = sum_j p_ij (v_j +
        // a_v[r_ij]))
        //    backward: dprob_ij = dout_i . (v_j + a_v[r_ij]);  dv_j += p_ij dout_i;  da_v[r_ij] += p_ij
        //    dout_i
        for (int64_t j = 0; j < p.K; ++j) {
          dprob[j] = 0;
          if (logit[j] == neg_inf) continue;  // forward: masked keys add nothing to out
          const int64_t row_j = ((b * p.K + j) * p.Hkv + hk) * Dv;
          for (int64_t d = 0; d < Dv; ++d) {
            dprob[j] += dout[d] * v[row_j + d];
            g.v[row_j + d] += prob[j] * dout[d];
          }
          if (shaw_values) {
            const int64_t r = shaw_r(b, i, j) * Dv;
            for (int64_t d = 0; d < Dv; ++d) {
              dprob[j] += dout[d] * p.shaw_a_v[r + d];
              g.shaw_a_v[r + d] += prob[j] * dout[d];
            }
          }
        }

        // 3. forward: prob = exp(logit[j] - m) / sum   (softmax over the row; m and sum cancel)
        //    backward: dlogit_ij = p_ij (dprob_ij - sum_j' p_ij' dprob_ij')
        T pdp = 0;
        for (int64_t j = 0; j < p.K; ++j) pdp += prob[j] * dprob[j];
        //    the sink is one more softmax entry with no value (dprob_sink = 0):
        //    dsink_h += p_sink (0 - pdp),  p_sink = exp(sink_h - m) / sum
        if (!p.sinks.empty()) g.sinks[h] += -(std::exp(p.sinks[h] - m) / sum) * pdp;

        for (int64_t j = 0; j < p.K; ++j) {
          if (logit[j] == neg_inf) continue;  // forward: logit[j] = -inf (masked): a constant
          const T dlogit = prob[j] * (dprob[j] - pdp);
          const int64_t qp = p.q_pos[b * p.Q + i], kp = p.k_pos[b * p.K + j];
          const int64_t row_j = ((b * p.K + j) * p.Hkv + hk) * D;
          const T* kj = &k[row_j];
          T* dkj = &g.k[row_j];

          // 4. forward: logit[j] = cap(content), content = scale * dot, + bias;
          //    cap(x) = c tanh(x / c):  dcap/dx = 1 - tanh(x / c)^2  (1 without softcap)
          //    backward: ddot = scale dlogit cap'(content); dbias = dlogit
          T dcap = 1;
          if (p.softcap > 0) {
            const T t = std::tanh(content[j] / static_cast<T>(p.softcap));
            dcap = 1 - t * t;
          }
          const T ddot = static_cast<T>(p.scale) * dlogit * dcap;
          //    forward: bias = relative_table[relative_bias_row(relative, kp - qp) * H + h]
          //    backward: dtable[row, h] += dbias   (ALiBi's bias is a constant)
          if (p.kind == AttentionBias::Kind::relative)
            g.relative_table[relative_bias_row(p.relative, kp - qp) * p.H + h] += dlogit;

          // 5. forward: dot += qi[d] * kj[d]
          //    backward: dq_i += ddot k_j;  dk_j += ddot q_i
          for (int64_t d = 0; d < D; ++d) {
            dqi[d] += ddot * kj[d];
            dkj[d] += ddot * qi[d];
          }
          // 6. forward: dot += qi[d] * a[d]   (a = a_k[r_ij])
          //    backward: dq_i += ddot a_k[r];  da_k[r] += ddot q_i
          if (shaw) {
            const int64_t r = shaw_r(b, i, j) * D;
            for (int64_t d = 0; d < D; ++d) {
              dqi[d] += ddot * p.shaw_a_k[r + d];
              g.shaw_a_k[r + d] += ddot * qi[d];
            }
          }
          // 7. forward: rp = sum_e w_r[(h D + d) d_model + e] R[e];
          //             dot += (qi[d] + v_xl[h D + d]) * rp + u[h D + d] * kj[d]
          //    backward: dq_id += ddot rp_d;  dv_xl_hd += ddot rp_d;
          //              dw_r[(h D + d), e] += ddot (q_id + v_xl_hd) R[e];
          //              du_hd += ddot k_jd;  dk_jd += ddot u_hd
          if (xl) {
            const std::vector<T>& R = sinusoid(qp - kp);
            project(R);
            for (int64_t d = 0; d < D; ++d) {
              dqi[d] += ddot * rp[d];
              g.transformer_xl_v[h * D + d] += ddot * rp[d];
              const T qv = qi[d] + p.transformer_xl_v[h * D + d];
              for (int64_t e = 0; e < p.transformer_xl_d_model; ++e)
                g.transformer_xl_w_r[wr(d, e)] += ddot * qv * R[e];
              g.transformer_xl_u[h * D + d] += ddot * kj[d];
              dkj[d] += ddot * p.transformer_xl_u[h * D + d];
            }
          }
        }
      }
  return g;
}

}  // namespace posenc::ref
