// src/cpu/bias.h: biases that depend only on d = k_pos - q_pos (T5, clipped, ALiBi), CPU loops.
// A block of (query, key) pairs is filled from a per-head lookup over the block's distance range,
// so no S x S intermediate exists; the attention kernel uses the same lookup per tile.
#pragma once
#include <cstdint>
#include <vector>

#include "src/bias_plan.h"
#include "src/strided.h"

namespace posenc::cpu {
using detail::Bias;
using detail::distance_range;
using detail::DistanceRange;

// lut[h * range.size() + (d - range.lo)] = bias.value(d, h) for every distance of the range.
std::vector<float> distance_lut(const Bias& bias, int64_t heads, const DistanceRange& range);

// out (H, Q, K) = bias(k_pos[j] - q_pos[i], h).
void bias_block(const Bias& bias, const std::vector<int64_t>& q_pos, const std::vector<int64_t>& k_pos,
                Strided<float, 3> out);

// The same into bf16 / fp16 out (unit stride on K): each row's fp32 values rounded once.
void bias_block16(const Bias& bias, const std::vector<int64_t>& q_pos, const std::vector<int64_t>& k_pos,
                  Strided<uint16_t, 3> out, DType dtype);

// grad_table (rows, H) += the sum of grad (H, Q, K) over pairs mapped to each row; per head in a
// fixed order, so thread-count independent. grad in fp32, or bf16 / fp16 (widened exactly).
void bias_block_backward(const RelativeBiasConfig& config, const std::vector<int64_t>& q_pos,
                         const std::vector<int64_t>& k_pos, Strided<const float, 3> grad,
                         Strided<float, 2> grad_table);
void bias_block_backward(const RelativeBiasConfig& config, const std::vector<int64_t>& q_pos,
                         const std::vector<int64_t>& k_pos, Strided<const uint16_t, 3> grad, DType dtype,
                         Strided<float, 2> grad_table);

}  // namespace posenc::cpu
