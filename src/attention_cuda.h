// src/attention_cuda.h: attention_forward on CUDA views (src/attention_cuda.cc), called by the front end
// (src/attention.cc) when q is a CUDA view; refused by name in builds without the CUDA attention.
#pragma once
#include "posenc/attention.h"

namespace posenc::detail {

void attention_forward_cuda(const AttentionConfig& config, const AttentionInputs& inputs, TensorView out,
                            TensorView lse);
// attention_backward on CUDA views: gradients of q, k and v (parameter gradients refused by name).
void attention_backward_cuda(const AttentionConfig& config, const AttentionInputs& inputs,
                             ConstTensorView out, ConstTensorView lse, ConstTensorView grad_out,
                             const AttentionGrads& grads);

}  // namespace posenc::detail
