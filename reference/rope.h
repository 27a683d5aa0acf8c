// reference/rope.h: naive RoPE, the test oracle. Plain loops over (b, t, h, pair), templated on
// the scalar type; the rotation is written out from the RoFormer formula, nothing shared with the
// kernels except the host-side frequency table (RopeFrequencies), which is the spec.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "posenc/rope.h"

namespace posenc::ref {

// x: (B, T, H, D) contiguous; positions: (S, B, T) contiguous. Returns the rotated copy.
// inverse = true applies R(-theta): the backward, and RopeConfig::reversed's forward.
template <typename T>
std::vector<T> rope(const RopeFrequencies& f, RopeLayout layout, int64_t head_dim, const std::vector<T>& x,
                    const std::vector<int64_t>& positions, int64_t B, int64_t T_, int64_t H,
                    bool inverse = false) {
  const int64_t pairs = static_cast<int64_t>(f.inv_freq.size());
  std::vector<T> out = x;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T_; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = ((b * T_ + t) * H + h) * head_dim;
        for (int64_t j = 0; j < pairs; ++j) {
          const int64_t pos = positions[(f.stream[j] * B + b) * T_ + t];
          const long double theta = static_cast<long double>(pos) * static_cast<long double>(f.inv_freq[j]);
          const T c = static_cast<T>(std::cos(theta) * f.attention_factor);
          const T s = static_cast<T>(std::sin(theta) * f.attention_factor) * (inverse ? T(-1) : T(1));
          const int64_t ia = layout == RopeLayout::half ? j : 2 * j;
          const int64_t ib = layout == RopeLayout::half ? j + pairs : 2 * j + 1;
          const T xa = x[base + ia], xb = x[base + ib];
          out[base + ia] = xa * c - xb * s;
          out[base + ib] = xb * c + xa * s;
        }
      }
  return out;
}

}  // namespace posenc::ref
