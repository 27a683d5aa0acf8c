// reference/transformer_xl.h: naive Transformer-XL (Dai et al. 2019) position terms, materialised.
//   q (B, Q, H, D), k (B, K, H, D), logits/probs (B, H, Q, K); all contiguous.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace posenc::ref {

// R_delta = [sin(delta w_i) | cos(delta w_i)], w_i = base^(-2i/d_model), in long double.
template <typename T>
void transformer_xl_sinusoid(int64_t delta, int64_t d_model, double base, std::vector<T>& r) {
  const int64_t half = d_model / 2;
  r.resize(d_model);
  for (int64_t e = 0; e < half; ++e) {
    const long double a =
        static_cast<long double>(delta) * std::pow(static_cast<long double>(base), -2.0L * e / d_model);
    r[e] = static_cast<T>(std::sin(a));
    r[half + e] = static_cast<T>(std::cos(a));
  }
}

// Transformer-XL: R_delta = [sin(delta w_i) | cos(delta w_i)], w_i = base^(-2i/d_model);
// logits[b,h,i,j] = (q_i + v_h) . (W_R,h R_{qp[i]-kp[j]}) + u_h . k_j, computed pair by pair.
template <typename T>
std::vector<T> transformer_xl_logits(int64_t d_model, double base, const std::vector<T>& q,
                                     const std::vector<T>& k, const std::vector<T>& u,
                                     const std::vector<T>& v, const std::vector<T>& w_r, int64_t B, int64_t H,
                                     int64_t D, const std::vector<int64_t>& qp,
                                     const std::vector<int64_t>& kp) {
  const int64_t Q = qp.size(), K = kp.size();
  std::vector<T> out(B * H * Q * K);
  std::vector<T> R(d_model);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Q; ++i)
        for (int64_t j = 0; j < K; ++j) {
          transformer_xl_sinusoid(qp[i] - kp[j], d_model, base, R);
          T acc = 0;
          for (int64_t d = 0; d < D; ++d) {
            T rp = 0;
            for (int64_t e = 0; e < d_model; ++e) rp += w_r[(h * D + d) * d_model + e] * R[e];
            acc += (q[((b * Q + i) * H + h) * D + d] + v[h * D + d]) * rp;
            acc += u[h * D + d] * k[((b * K + j) * H + h) * D + d];
          }
          out[((b * H + h) * Q + i) * K + j] = acc;
        }
  return out;
}

}  // namespace posenc::ref
