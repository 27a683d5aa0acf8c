// src/cuda/bias-inl.cuh: the per-element logic of the GPU's distance biases, as __host__ __device__
// functions the host tests check against the CPU's Bias::value and relative_bias_row.
//   ALiBi: m d (the causal form -m (q - k)) or -m |d| (symmetric), in double, rounded once (Bias::value).
//   clipped rows: clamp(d, -M, M) + M.
//   T5 rows: a table over d in [-L, L] built on the host by t5_bucket (T5's float32 logs, exactly as the
//   CPU evaluates them: no log on the device), clamped at +-L, where the buckets have saturated.
#pragma once
#include <cstdint>

#include "src/host_device.h"

namespace posenc::cuda {

enum class BiasKind : int { alibi, clipped, row_table };

POSENC_HD inline int64_t clamp_distance(int64_t d, int64_t limit) {
  return d < -limit ? -limit : d > limit ? limit : d;
}

// The table row of distance d: clipped (limit = max_distance) or from rows[-limit .. limit] (T5).
POSENC_HD inline int64_t bias_row(BiasKind kind, int64_t limit, const int32_t* rows, int64_t d) {
  const int64_t c = clamp_distance(d, limit);
  return kind == BiasKind::clipped ? c + limit : rows[c + limit];
}

POSENC_HD inline float alibi_value(double slope, bool symmetric, int64_t d) {
  return static_cast<float>(symmetric ? -slope * static_cast<double>(d < 0 ? -d : d)
                                      : slope * static_cast<double>(d));
}

}  // namespace posenc::cuda
