// src/cuda/rope.h: the CUDA backend's RoPE (src/cuda/rope.cu), called by the front end (src/rope.cc)
// with views it has checked. No CUDA types: the kernels queue on posenc::cuda_stream().
//   tensors: (B, T, H, D) f32, bf16 or fp16 in device memory, unit stride on D; rotary_dim = 2 * pairs <= D.
//   positions: int64 in device memory, position (s, b, t) at the PositionLayout's strides.
#pragma once
#include <cstdint>

#include "posenc/rope.h"
#include "src/check.h"

namespace posenc::cuda {

// Pairs a kernel takes by value (inv_freq in double and the stream of each): rotary_dim up to 512,
// every head size of today's models (Gemma 4's 512 included). Larger ones are refused by name.
inline constexpr int64_t kMaxDevicePairs = 256;

// One tensor's rows (B, T, H) of `dim` elements; in == out rotates in place.
struct DeviceRows {
  const void* in = nullptr;
  void* out = nullptr;
  int64_t in_strides[3] = {}, out_strides[3] = {};  // (B, T, H), in elements
  int64_t heads = 0;
};

enum class RopeOutput { rotated, gradient_added, gradient_written };

struct RopeLaunch {
  const RopeFrequencies* freq = nullptr;  // inv_freq (pairs), stream, attention_factor
  bool multi_stream = false;
  bool inverse = false;  // the transposed rotation (already combined with RopeConfig::reversed)
  RopeLayout layout = RopeLayout::half;
  DType dtype = DType::f32;
  int64_t dim = 0;  // head_dim
  int64_t batch = 0, tokens = 0;
  detail::PositionLayout positions;
  int64_t position_offset = 0;
  DeviceRows tensors[2];
  int num_tensors = 1;
  // A second rotation of the same rows, at the same positions, before the one rounding to the storage type
  // (KVCache::rerotate: back by one length's table, forward by another's); null: one rotation. Its
  // frequencies must have the first's number of pairs.
  const RopeFrequencies* then_freq = nullptr;
  bool then_inverse = false;
  // Into a gradient: the tensors' in rows are f32 (dtype f32), their out rows of out_dtype, and out += the
  // rotation of in (added) or out = it (written), with one rounding; dims past rotary_dim pass unrotated. No
  // second rotation.
  RopeOutput output = RopeOutput::rotated;
  DType out_dtype = DType::f32;
};
void rope_rotate(const RopeLaunch& launch);

// cos and sin (N, pairs) f32 of flat positions (N) or (S, N): Rope::cos_sin on the device.
struct CosSinLaunch {
  const RopeFrequencies* freq = nullptr;
  bool multi_stream = false;
  bool inverse = false;
  int64_t n = 0;
  detail::PositionLayout positions;  // (s, 0, t)
  float* cos = nullptr;
  float* sin = nullptr;
  int64_t cos_row_stride = 0, sin_row_stride = 0;
};
void rope_cos_sin(const CosSinLaunch& launch);

}  // namespace posenc::cuda
