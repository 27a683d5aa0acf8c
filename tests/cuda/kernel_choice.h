// tests/cuda/kernel_choice.h: which attention kernels (src/cuda/attention.h) run the calls of a test's scope,
// and the choice from the environment that scripts/gpu_check.sh sets.
#pragma once
#include <cstdlib>
#include <string>

#include "src/cuda/attention.h"

namespace posenc::test {

// Which forward kernel runs the calls of a scope (restored at its end, also when an assertion returns).
struct ForwardKernel {
  explicit ForwardKernel(cuda::AttentionKernel k) : saved(cuda::attention_forward_choice) {
    cuda::attention_forward_choice = k;
  }
  ~ForwardKernel() { cuda::attention_forward_choice = saved; }
  cuda::AttentionKernel saved;
};

// Which backward kernel runs the calls of a scope, as ForwardKernel.
struct BackwardKernel {
  explicit BackwardKernel(cuda::AttentionKernel k) : saved(cuda::attention_backward_choice) {
    cuda::attention_backward_choice = k;
  }
  ~BackwardKernel() { cuda::attention_backward_choice = saved; }
  cuda::AttentionKernel saved;
};

// The kernel a variable of the environment names: sm90 or tiled (anything else: the library's choice).
inline void choose_kernel_from(const char* variable, cuda::AttentionKernel* choice) {
  const char* k = std::getenv(variable);
  if (k != nullptr && std::string(k) == "sm90") *choice = cuda::AttentionKernel::sm90;
  if (k != nullptr && std::string(k) == "tiled") *choice = cuda::AttentionKernel::tiled;
}

}  // namespace posenc::test
