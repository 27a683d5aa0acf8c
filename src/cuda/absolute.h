// src/cuda/absolute.h: the CUDA backend's absolute encodings (src/cuda/absolute.cu), called by
// src/absolute.cc with checked views. No CUDA types: the kernels queue on posenc::cuda_stream().
//   rows (B, T, E) f32, bf16 or fp16 with a unit stride on E; table / grad_table (L, E) f32;
//   positions (B, T) int64 at the given strides (batch stride 0: shared by the batch). Device memory.
#pragma once
#include <cstdint>
#include <vector>

#include "posenc/absolute.h"

namespace posenc::cuda {

struct DeviceRows3 {
  void* data = nullptr;
  int64_t extent[3] = {};   // (B, T, E)
  int64_t strides[3] = {};  // elements
  DType dtype = DType::f32;
};
struct DevicePositions2 {
  const int64_t* data = nullptr;
  int64_t batch_stride = 0, token_stride = 0;
};

// Frequencies a sinusoid kernel takes by value (dims up to 4096); larger ones are refused by name.
inline constexpr int64_t kMaxDeviceSinusoidPairs = 2048;

// rows = (or +=, when accumulate) the sinusoid of position + position_offset, in the config's layout;
// w: the frequencies (dim / 2). Positions past +-2^53 (with the offset) give NaN rows.
void sinusoid_rows(const SinusoidalConfig& config, const std::vector<double>& w,
                   const DevicePositions2& positions, const DeviceRows3& rows, bool accumulate);
// rows = (or +=) table[position]; a position outside [0, L) gives a NaN row (never a read out of bounds).
void learned_rows(const float* table, const int64_t table_strides[2], int64_t table_rows,
                  const DevicePositions2& positions, const DeviceRows3& rows, bool accumulate);
// grad_table (L, E) += the grad rows of each position, summed in token order (deterministic: a stable
// sort of the positions, then one sum per table row). A position outside [0, L) makes every row NaN.
void learned_rows_backward(const DeviceRows3& grad, const DevicePositions2& positions, float* grad_table,
                           const int64_t grad_table_strides[2], int64_t table_rows);

}  // namespace posenc::cuda
