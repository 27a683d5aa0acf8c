// src/cuda/bias.h: the CUDA backend's distance biases (src/cuda/bias.cu), called by src/bias.cc with checked
// views. No CUDA types: the kernels queue on posenc::cuda_stream().
//   out / grad (H, Q, K) f32, bf16 or fp16 (unit stride on K); table / grad_table (rows, H) f32;
//   q_positions (Q), k_positions (K) int64; all in device memory.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/bias.h"
#include "posenc/tensor.h"
#include "src/cuda/bias-inl.cuh"

namespace posenc::cuda {

// What a kernel takes by value: ALiBi slopes (heads), or T5 row tables (2 limit + 1 entries); larger
// problems are refused by name on the device.
inline constexpr int64_t kMaxDeviceBiasHeads = 1024;
inline constexpr int64_t kMaxDeviceRowTable = 2049;  // T5 max_distance up to 1024
// relative_bias_backward keeps one partial sum per row per warp in shared memory.
inline constexpr int64_t kMaxDeviceBiasRows = 1024;

struct DeviceBias {
  BiasKind kind = BiasKind::alibi;
  std::vector<double> slopes;    // alibi: (H)
  bool symmetric = false;        // alibi
  int64_t limit = 0;             // clipped: max_distance; row_table: the table's half width
  std::vector<int32_t> rows;     // row_table: rows[d + limit]
  const float* table = nullptr;  // (rows, H), learned biases
  int64_t table_strides[2] = {};
};

struct DevicePositions {
  const int64_t* data = nullptr;
  int64_t stride = 0;
};

struct BiasBlockLaunch {
  DeviceBias bias;
  int64_t heads = 0, q = 0, k = 0;
  DevicePositions q_positions, k_positions;
  DType dtype = DType::f32;
  void* out = nullptr;
  int64_t out_strides[3] = {};
};
void bias_block(const BiasBlockLaunch& launch);

// grad_table (rows, H) += the sum over (i, j) of grad (H, Q, K) at row(k_j - q_i); every sum in a fixed
// order (deterministic: the same bits run to run), no float atomics.
struct BiasBackwardLaunch {
  DeviceBias bias;  // clipped or row_table
  int64_t num_rows = 0;
  int64_t heads = 0, q = 0, k = 0;
  DevicePositions q_positions, k_positions;
  DType dtype = DType::f32;
  const void* grad = nullptr;
  int64_t grad_strides[3] = {};
  float* grad_table = nullptr;
  int64_t grad_table_strides[2] = {};
};
void bias_block_backward(const BiasBackwardLaunch& launch);

// The learned table's rows as the device looks them up (src/bias.cc): clipped arithmetic, or T5's saturating
// row table (max_distance below kMaxDeviceRowTable / 2, refused by name otherwise).
DeviceBias learned_bias_rows(std::string_view op, const RelativeBiasConfig& config);

}  // namespace posenc::cuda
