// src/query_temperature.h: the query temperature's factor per position (posenc/attention.h QueryTemperature),
// as a __host__ __device__ function: QueryTemperature::factor on the CPU and the CUDA attention's rows share
// it.
#pragma once
#include <cmath>
#include <cstdint>

#include "posenc/attention.h"
#include "src/host_device.h"

namespace posenc::detail {

POSENC_HD inline double query_temperature_factor(QueryTemperature::Kind kind, double scale,
                                                 double floor_scale, int64_t p) {
  const double pos = static_cast<double>(p);
  switch (kind) {
    case QueryTemperature::Kind::none:
      return 1.0;
    case QueryTemperature::Kind::llama4:
      return 1.0 + scale * log1p(floor((pos + 1.0) / floor_scale));
    case QueryTemperature::Kind::ministral3:
      return 1.0 + scale * log1p(floor(pos / floor_scale));
    case QueryTemperature::Kind::qwen_logn:  // logn_list = [math.log(i, seq_length) if i > seq_length else 1
                                             // ...]
      return pos + 1.0 > floor_scale ? log(pos + 1.0) / log(floor_scale) : 1.0;
  }
  return 1.0;
}

}  // namespace posenc::detail
