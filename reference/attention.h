// reference/attention.h: naive attention with every positional term, materialised scores, in T
// (double for the oracle). RoPE is applied by the caller with ref::rope before calling.
//   content_ij = scale (q_i . k_j + shaw: q_i . a_k[r] + xl: u_h . k_j + (q_i + v_h) . W_R,h R_delta)
//   logit_ij = cap(content_ij) + bias,  cap(x) = softcap tanh(x / softcap) (identity when softcap = 0)
//   p_ij = exp(logit_ij) / (sum_j' exp(logit_ij') + exp(sink_h))   (sink: none when sinks is empty)
//   out_i = sum_j p_ij (v_j + shaw: a_v[r])
//   masked: causal, window, chunk (floor(q_pos / chunk) != floor(k_pos / chunk)), packed segments
//   q (B, Q, H, D), k (B, K, Hkv, D), v (B, K, Hkv, Dv), out (B, Q, H, Dv), lse (B, H, Q);
//   Dv = D unless set (multi-head latent attention: q/k heads 192, v heads 128)
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <vector>

#include "posenc/attention.h"
#include "reference/shaw.h"
#include "reference/transformer_xl.h"

namespace posenc::ref {

template <typename T>
struct AttentionProblem {
  int64_t B = 0, Q = 0, K = 0, H = 0, Hkv = 0, D = 0;
  int64_t Dv = 0;  // 0: D
  bool causal = false;
  int64_t window = 0;
  double scale = 1.0;
  std::vector<int64_t> q_pos, k_pos;  // (B*Q), (B*K)
  std::vector<int64_t> q_seq, k_seq;  // segment of each token (packed sequences); empty = one segment
  AttentionBias::Kind kind = AttentionBias::Kind::none;
  std::vector<double> alibi_slopes;
  bool alibi_symmetric = false;
  RelativeBiasConfig relative;
  std::vector<T> relative_table;   // (rows, H)
  int64_t shaw_max_distance = -1;  // >= 0: Shaw terms with a_k (and a_v when non-empty), (rows, D)
  std::vector<T> shaw_a_k, shaw_a_v;
  int64_t transformer_xl_d_model = 0;  // > 0: Transformer-XL terms, u and v (H, D), w_r (H*D, d_model)
  double transformer_xl_base = 10000.0;
  std::vector<T> transformer_xl_u, transformer_xl_v, transformer_xl_w_r;
  double softcap = 0;    // > 0: logit softcapping (Gemma 2) of the content logit, before the bias
  std::vector<T> sinks;  // (H) learned sink logits (gpt-oss), or empty
  int64_t chunk = 0;     // > 0: chunked attention (Llama 4)

  int64_t value_dim() const { return Dv > 0 ? Dv : D; }
  T cap(T content) const {
    return softcap > 0 ? static_cast<T>(softcap) * std::tanh(content / static_cast<T>(softcap)) : content;
  }
  static int64_t chunk_of(int64_t position, int64_t size) {  // floor division, no overflow at the int64 ends
    return position >= 0 ? position / size : -1 - (-(position + 1)) / size;
  }

  bool allowed(int64_t b, int64_t i, int64_t j) const {
    if (!q_seq.empty() && q_seq[b * Q + i] != k_seq[b * K + j]) return false;
    const int64_t qp = q_pos[b * Q + i], kp = k_pos[b * K + j];
    if (causal && kp > qp) return false;
    if (window > 0 && (qp - kp >= window || kp - qp >= window)) return false;
    if (chunk > 0 && chunk_of(qp, chunk) != chunk_of(kp, chunk)) return false;
    return true;
  }
};

template <typename T>
struct AttentionResult {
  std::vector<T> out, lse;
  // The conditioning of the logits: the largest |scale| x (sum of |products| of the content and
  // position terms) + |bias| over visible pairs. An fp32 kernel's logit is off by about
  // 2^-24 times this (before softcap); the fuzzer compares with fp32 results only where it is small.
  T largest_logit_terms = 0;
};

template <typename T>
AttentionResult<T> attention(const AttentionProblem<T>& p, const std::vector<T>& q, const std::vector<T>& k,
                             const std::vector<T>& v) {
  const int64_t group = p.H / p.Hkv, Dv = p.value_dim();
  AttentionResult<T> r{std::vector<T>(p.B * p.Q * p.H * Dv, T(0)), std::vector<T>(p.B * p.H * p.Q), T(0)};
  std::vector<T> logit(p.K);
  std::map<int64_t, std::vector<T>> transformer_xl_r;  // R_delta by delta
  auto sinusoid = [&](int64_t delta) -> const std::vector<T>& {
    std::vector<T>& r = transformer_xl_r[delta];
    if (r.empty()) transformer_xl_sinusoid(delta, p.transformer_xl_d_model, p.transformer_xl_base, r);
    return r;
  };
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t i = 0; i < p.Q; ++i) {
        const int64_t hk = h / group;
        const T* qi = &q[((b * p.Q + i) * p.H + h) * p.D];
        T m = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < p.K; ++j) {
          if (!p.allowed(b, i, j)) {
            logit[j] = -std::numeric_limits<T>::infinity();
            continue;
          }
          const T* kj = &k[((b * p.K + j) * p.Hkv + hk) * p.D];
          const int64_t qp = p.q_pos[b * p.Q + i], kp = p.k_pos[b * p.K + j];
          T dot = 0, bias = 0, terms = 0;
          for (int64_t d = 0; d < p.D; ++d) dot += qi[d] * kj[d], terms += std::abs(qi[d] * kj[d]);
          if (p.shaw_max_distance >= 0) {
            const T* a = &p.shaw_a_k[shaw_row(p.shaw_max_distance, qp, kp) * p.D];
            for (int64_t d = 0; d < p.D; ++d) dot += qi[d] * a[d], terms += std::abs(qi[d] * a[d]);
          }
          if (p.transformer_xl_d_model > 0) {
            const std::vector<T>& R = sinusoid(qp - kp);
            for (int64_t d = 0; d < p.D; ++d) {
              T rp = 0;
              for (int64_t e = 0; e < p.transformer_xl_d_model; ++e)
                rp += p.transformer_xl_w_r[(h * p.D + d) * p.transformer_xl_d_model + e] * R[e];
              dot += (qi[d] + p.transformer_xl_v[h * p.D + d]) * rp + p.transformer_xl_u[h * p.D + d] * kj[d];
              terms += std::abs((qi[d] + p.transformer_xl_v[h * p.D + d]) * rp) +
                       std::abs(p.transformer_xl_u[h * p.D + d] * kj[d]);
            }
          }
          switch (p.kind) {
            case AttentionBias::Kind::none:
              break;
            case AttentionBias::Kind::alibi:
              bias = static_cast<T>(-p.alibi_slopes[h] *
                                    (p.alibi_symmetric ? std::abs(double(qp - kp)) : double(qp - kp)));
              break;
            case AttentionBias::Kind::relative:
              bias = p.relative_table[relative_bias_row(p.relative, kp - qp) * p.H + h];
              break;
          }
          logit[j] = p.cap(static_cast<T>(p.scale) * dot) + bias;
          r.largest_logit_terms =
              std::max(r.largest_logit_terms, std::abs(static_cast<T>(p.scale)) * terms + std::abs(bias));
          m = std::max(m, logit[j]);
        }
        if (!p.sinks.empty()) m = std::max(m, p.sinks[h]);
        T* out = &r.out[((b * p.Q + i) * p.H + h) * Dv];
        if (m == -std::numeric_limits<T>::infinity()) {  // fully masked: zeros, lse = -inf
          r.lse[(b * p.H + h) * p.Q + i] = m;
          continue;
        }
        T sum = p.sinks.empty() ? T(0) : std::exp(p.sinks[h] - m);  // the sink: in the sum, no value
        for (int64_t j = 0; j < p.K; ++j) sum += std::exp(logit[j] - m);
        for (int64_t j = 0; j < p.K; ++j) {
          if (logit[j] == -std::numeric_limits<T>::infinity()) continue;
          const T prob = std::exp(logit[j] - m) / sum;
          const T* vj = &v[((b * p.K + j) * p.Hkv + hk) * Dv];
          for (int64_t d = 0; d < Dv; ++d) out[d] += prob * vj[d];
          if (p.shaw_max_distance >= 0 && !p.shaw_a_v.empty()) {
            const T* a =
                &p.shaw_a_v[shaw_row(p.shaw_max_distance, p.q_pos[b * p.Q + i], p.k_pos[b * p.K + j]) * Dv];
            for (int64_t d = 0; d < Dv; ++d) out[d] += prob * a[d];
          }
        }
        r.lse[(b * p.H + h) * p.Q + i] = m + std::log(sum);
      }
  return r;
}

}  // namespace posenc::ref
