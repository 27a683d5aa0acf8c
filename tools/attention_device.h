// tools/attention_device.h: `posenc attention --device cuda`: the forward run on a CUDA device from host
// inputs (tools/attention_device.cc).
#pragma once
#include <cstdint>

#include "posenc/attention.h"

namespace posenc::tools {

// Copies the contiguous host inputs (16-bit q, k, v) and the config's tables (relative_table, sinks) to the
// current CUDA device, runs attention_forward `repeat` times, each to completion, and copies out and lse
// back into the host views. Returns the best time in seconds. Refused by name in a build without CUDA.
double attention_forward_on_cuda(const AttentionConfig& config, const AttentionInputs& in, TensorView out,
                                 TensorView lse, int64_t repeat);

}  // namespace posenc::tools
