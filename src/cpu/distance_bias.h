// src/cpu/distance_bias.h: biases that depend only on d = k_pos - q_pos (T5, clipped, ALiBi).
// A block of (query, key) pairs is filled from a per-head lookup over the block's distance range,
// so no S x S intermediate exists; the attention kernel calls the same code per tile.
#pragma once
#include <cstdint>
#include <vector>

#include "posenc/bias.h"

namespace posenc::cpu {

struct DistanceBias {
  // Either a learned table (rows, H) indexed by relative_bias_row(d) ...
  const RelativeBiasConfig* rows_config = nullptr;
  const float* table = nullptr;
  int64_t table_stride_row = 0, table_stride_head = 0;
  // ... or ALiBi slopes: bias = m * d (causal form -m (q - k)) or -m |d| (symmetric).
  const double* slopes = nullptr;
  bool symmetric = false;

  float value(int64_t d, int64_t head) const;
};

// The distance range [lo, hi] of a block; `use_lut` when small enough to tabulate.
struct DistanceRange {
  int64_t lo = 0, hi = -1;
  bool use_lut = false;
  int64_t size() const { return hi - lo + 1; }
};
DistanceRange distance_range(const std::vector<int64_t>& q_pos, const std::vector<int64_t>& k_pos);
// lut[h * range.size() + (d - range.lo)] = bias.value(d, h) for every distance of the range.
std::vector<float> distance_lut(const DistanceBias& bias, int64_t heads, const DistanceRange& range);

// out (H, Q, K) with strides (sh, sq, sk).
void distance_bias_forward(const DistanceBias& bias, int64_t heads, const std::vector<int64_t>& q_pos,
                           const std::vector<int64_t>& k_pos, float* out, int64_t sh, int64_t sq, int64_t sk);

// grad_table (rows, H) += the sum of grad (H, Q, K) over pairs mapped to each row; per head in a
// fixed order, so thread-count independent.
void distance_bias_backward(const RelativeBiasConfig& config, const std::vector<int64_t>& q_pos,
                            const std::vector<int64_t>& k_pos, const float* grad, int64_t sh, int64_t sq,
                            int64_t sk, float* grad_table, int64_t gt_stride_row, int64_t gt_stride_head);

}  // namespace posenc::cpu
