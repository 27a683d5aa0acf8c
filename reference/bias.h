// reference/bias.h: naive relative biases (clipped, T5, ALiBi), materialised (H, Q, K).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "posenc/bias.h"

namespace posenc::ref {

// table (rows, H)
template <typename T>
std::vector<T> relative_bias(const RelativeBiasConfig& c, const std::vector<T>& table,
                             const std::vector<int64_t>& q, const std::vector<int64_t>& k) {
  const int64_t H = c.heads, Q = q.size(), K = k.size();
  std::vector<T> out(H * Q * K);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < Q; ++i)
      for (int64_t j = 0; j < K; ++j)
        out[(h * Q + i) * K + j] = table[relative_bias_row(c, k[j] - q[i]) * H + h];
  return out;
}

template <typename T>
std::vector<T> relative_bias_backward(const RelativeBiasConfig& c, const std::vector<T>& grad,
                                      const std::vector<int64_t>& q, const std::vector<int64_t>& k) {
  const int64_t H = c.heads, Q = q.size(), K = k.size();
  std::vector<T> g(c.num_rows() * H, T(0));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < Q; ++i)
      for (int64_t j = 0; j < K; ++j)
        g[relative_bias_row(c, k[j] - q[i]) * H + h] += grad[(h * Q + i) * K + j];
  return g;
}

// ALiBi: -m (q - k), or -m |q - k| when symmetric.
template <typename T>
std::vector<T> alibi(const std::vector<double>& slopes, bool symmetric, const std::vector<int64_t>& q,
                     const std::vector<int64_t>& k) {
  const int64_t H = slopes.size(), Q = q.size(), K = k.size();
  std::vector<T> out(H * Q * K);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < Q; ++i)
      for (int64_t j = 0; j < K; ++j) {
        const double dist = static_cast<double>(q[i] - k[j]);
        out[(h * Q + i) * K + j] = static_cast<T>(-slopes[h] * (symmetric ? std::abs(dist) : dist));
      }
  return out;
}

}  // namespace posenc::ref
