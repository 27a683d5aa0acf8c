// reference/shaw.h: naive Shaw et al. (2018) position terms, materialised, in any precision.
//   q (B, Q, H, D), k (B, K, H, D), logits/probs (B, H, Q, K); all contiguous.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace posenc::ref {

inline int64_t shaw_row(int64_t kmax, int64_t qpos, int64_t kpos) {
  return std::clamp(kpos - qpos, -kmax, kmax) + kmax;
}

// logits[b,h,i,j] = q[b,i,h] . a_k[row(i, j)]
template <typename T>
std::vector<T> shaw_key_logits(int64_t kmax, const std::vector<T>& a_k, const std::vector<T>& q, int64_t B,
                               int64_t H, int64_t D, const std::vector<int64_t>& qp,
                               const std::vector<int64_t>& kp) {
  const int64_t Q = qp.size(), K = kp.size();
  std::vector<T> out(B * H * Q * K, T(0));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Q; ++i)
        for (int64_t j = 0; j < K; ++j) {
          T acc = 0;
          for (int64_t d = 0; d < D; ++d)
            acc += q[((b * Q + i) * H + h) * D + d] * a_k[shaw_row(kmax, qp[i], kp[j]) * D + d];
          out[((b * H + h) * Q + i) * K + j] = acc;
        }
  return out;
}

// out[b,i,h] = sum_j probs[b,h,i,j] a_v[row(i, j)]
template <typename T>
std::vector<T> shaw_value_output(int64_t kmax, const std::vector<T>& a_v, const std::vector<T>& probs,
                                 int64_t B, int64_t H, int64_t D, const std::vector<int64_t>& qp,
                                 const std::vector<int64_t>& kp) {
  const int64_t Q = qp.size(), K = kp.size();
  std::vector<T> out(B * Q * H * D, T(0));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Q; ++i)
        for (int64_t j = 0; j < K; ++j)
          for (int64_t d = 0; d < D; ++d)
            out[((b * Q + i) * H + h) * D + d] +=
                probs[((b * H + h) * Q + i) * K + j] * a_v[shaw_row(kmax, qp[i], kp[j]) * D + d];
  return out;
}

}  // namespace posenc::ref
