// src/bias_plan.h: the device-independent description of a scalar bias on the logits that depends
// only on d = k_pos - q_pos (T5, clipped, ALiBi), shared by the bias op and the attention plan.
#pragma once
#include <cstdint>
#include <vector>

#include "posenc/bias.h"
#include "src/strided.h"

namespace posenc::detail {

// The bias of one head at one distance.
struct Bias {
  // Either a learned table (rows, H) indexed by relative_bias_row(d) ...
  const RelativeBiasConfig* rows_config = nullptr;
  Strided<const float, 2> table;
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

// The rows of a learned relative bias for every distance, as a device looks them up without positions on
// the host: rows[d + limit] = relative_bias_row(config, d) for d in [-limit, limit], where limit is the
// smallest distance >= max_distance past which the row no longer changes (T5's buckets are monotone in |d|
// and saturate; clipped rows saturate at max_distance), so row(d) = rows[clamp(d, -limit, limit) + limit].
std::vector<int32_t> saturating_rows(const RelativeBiasConfig& config, int64_t* limit);

}  // namespace posenc::detail
