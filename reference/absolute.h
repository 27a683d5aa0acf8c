// reference/absolute.h: naive sinusoidal, learned and binary encodings.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "posenc/absolute.h"

namespace posenc::ref {

// (N, dim), straight from the formulas: PE(p, 2i) = sin(p w_i), PE(p, 2i+1) = cos(p w_i) (interleaved).
template <typename T>
std::vector<T> sinusoidal(const SinusoidalConfig& c, const std::vector<int64_t>& positions) {
  const int64_t half = c.dim / 2;
  std::vector<T> out(positions.size() * c.dim, T(0));
  for (size_t n = 0; n < positions.size(); ++n)
    for (int64_t i = 0; i < half; ++i) {
      const long double exponent = c.frequencies == SinusoidalFrequencies::model_dim
                                       ? 2.0L * i / c.dim
                                       : static_cast<long double>(i) / (half - 1);
      const long double w = std::pow(static_cast<long double>(c.base), -exponent);
      const long double a = static_cast<long double>(positions[n] + c.position_offset) * w;
      const int64_t is = c.layout == SinusoidalLayout::interleaved ? 2 * i : i;
      const int64_t ic = c.layout == SinusoidalLayout::interleaved ? 2 * i + 1 : half + i;
      out[n * c.dim + is] = static_cast<T>(std::sin(a));
      out[n * c.dim + ic] = static_cast<T>(std::cos(a));
    }
  return out;
}

template <typename T>
std::vector<T> learned_lookup(const std::vector<T>& table, int64_t dim,
                              const std::vector<int64_t>& positions) {
  std::vector<T> out(positions.size() * dim);
  for (size_t n = 0; n < positions.size(); ++n)
    for (int64_t e = 0; e < dim; ++e) out[n * dim + e] = table[positions[n] * dim + e];
  return out;
}

template <typename T>
std::vector<T> learned_backward(const std::vector<T>& grad_out, int64_t max_len, int64_t dim,
                                const std::vector<int64_t>& positions) {
  std::vector<T> g(max_len * dim, T(0));
  for (size_t n = 0; n < positions.size(); ++n)
    for (int64_t e = 0; e < dim; ++e) g[positions[n] * dim + e] += grad_out[n * dim + e];
  return g;
}

template <typename T>
std::vector<T> binary(int64_t bits, bool signed_values, const std::vector<int64_t>& positions) {
  std::vector<T> out(positions.size() * bits);
  for (size_t n = 0; n < positions.size(); ++n) {
    int64_t p = positions[n];
    for (int64_t b = bits - 1; b >= 0; --b, p /= 2)  // least significant digit is the last column
      out[n * bits + b] = (p % 2) ? T(1) : (signed_values ? T(-1) : T(0));
  }
  return out;
}

}  // namespace posenc::ref
