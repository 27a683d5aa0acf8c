// tools/attention_device.h: `posenc attention --device cuda`: the forward and the backward run on a CUDA
// device from host inputs (tools/attention_device.cc).
#pragma once
#include <cstdint>

#include "posenc/attention.h"

namespace posenc::tools {

// Copies the contiguous host inputs (16-bit q, k, v) and the config's tables (the relative table, sinks,
// Shaw's and Transformer-XL's) to the current CUDA device, runs attention_forward `repeat` times, each to
// completion, and copies out and lse back into the host views. Returns the best time in seconds. Refused by
// name in a build without CUDA.
double attention_forward_on_cuda(const AttentionConfig& config, const AttentionInputs& in, TensorView out,
                                 TensorView lse, int64_t repeat);
// The backward likewise: q, k, v, out, lse, grad_out and the tables copied, attention_backward `repeat` times
// into gradients of q, k, v zeroed before each (untimed), each run to completion; the gradients copied back
// into grads' host views (q, k, v only; contiguous, the dtype of grads). Returns the best time in seconds.
double attention_backward_on_cuda(const AttentionConfig& config, const AttentionInputs& in,
                                  ConstTensorView out, ConstTensorView lse, ConstTensorView grad_out,
                                  const AttentionGrads& grads, int64_t repeat);

}  // namespace posenc::tools
