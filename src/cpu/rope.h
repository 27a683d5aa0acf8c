// src/cpu/rope.h: the CPU backend's rotation and sin/cos kernels (RoPE, and the sinusoids of the
// absolute encodings). Front ends validate arguments and compute the frequency table on the host
// (src/rope.cc, src/rope_scaling.cc); nothing here re-validates. A CUDA backend would provide the
// same functions in src/cuda/rope.cu.
#pragma once
#include <cstdint>

#include "posenc/rope.h"
#include "src/rope_plan.h"
#include "src/strided.h"

namespace posenc::cpu {
using detail::AngleTable;
using detail::HeadRows;
using detail::TokenGrid;

// Rotates the first rotary_dim = 2 * pairs elements of every head of every tensor; copies the
// remaining dim - rotary_dim elements when out != in.
void rope_rotate(const AngleTable& angles, TokenGrid grid, RopeLayout layout, const HeadRows* tensors,
                 int num_tensors);

// Writes (or adds, when accumulate) sin and cos of every angle of every row (b, t):
//   sin_out(b, t)[j * elem_stride] = sin(angle_j), likewise cos_out.
struct SinCosOut {
  Strided<float, 2> sin_out, cos_out;  // (B, T)
  int64_t elem_stride = 1;
  bool accumulate = false;
};
void sincos_rows(const AngleTable& angles, TokenGrid grid, const SinCosOut& out);

}  // namespace posenc::cpu
