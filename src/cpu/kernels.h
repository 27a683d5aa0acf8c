// src/cpu/kernels.h: the CPU backend's entry points. Front ends (src/*.cc) validate arguments,
// compute parameter tables on the host and call these; nothing here re-validates. A CUDA backend
// would provide the same functions in src/cuda/.
#pragma once
#include <cstdint>

namespace posenc::cpu {

// Rows of a (B, T, ...) token grid; row n = (b, t) = (n / tokens, n % tokens).
struct TokenGrid {
  int64_t batch = 0, tokens = 0;
  int64_t rows() const { return batch * tokens; }
};

// The angle of pair j for row n: positions[stream[j] * rows + n] + position_offset, times inv_freq[j].
// cos and sin are multiplied by `scale`; sin is negated when `inverse` (the transposed rotation).
struct AngleTable {
  const double* inv_freq = nullptr;  // (pairs,)
  const uint8_t* stream = nullptr;   // (pairs,) or null for a single stream
  int64_t pairs = 0;
  const int64_t* positions = nullptr;  // (streams, rows) contiguous
  int64_t position_offset = 0;
  double scale = 1.0;
  bool inverse = false;
};

// One (B, T, H, D) tensor to rotate: `in` may equal `out` (in place). Strides in elements.
struct HeadRows {
  const float* in = nullptr;
  float* out = nullptr;
  int64_t heads = 0, dim = 0;
  int64_t in_stride_b = 0, in_stride_t = 0, in_stride_h = 0;
  int64_t out_stride_b = 0, out_stride_t = 0, out_stride_h = 0;
};

enum class PairLayout : uint8_t { half, interleaved };

// Rotates the first rotary_dim = 2 * pairs elements of every head of every tensor; copies the
// remaining dim - rotary_dim elements when out != in.
void rope_rotate(const AngleTable& angles, TokenGrid grid, PairLayout layout, const HeadRows* tensors,
                 int num_tensors);

// Writes (or adds, when accumulate) sin and cos of every angle of every row:
//   sin_out[b * stride_b + t * stride_t + j * elem_stride], likewise cos_out.
struct SinCosOut {
  float* sin_out = nullptr;
  float* cos_out = nullptr;
  int64_t stride_b = 0, stride_t = 0, elem_stride = 1;
  bool accumulate = false;
};
void sincos_rows(const AngleTable& angles, TokenGrid grid, const SinCosOut& out);

}  // namespace posenc::cpu
