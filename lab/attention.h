// lab/attention.h: the causal attention of the lab's model, on the layer's fused qkv buffer.
//
// A configuration whose positional part is RoPE's rotation of q and k and/or a bias of the distance
// (ALiBi, relative / T5 tables), or Shaw's or Transformer-XL's relative vectors (with a bias, without
// RoPE), over windows of up to kMaxKernelWindow tokens, runs on the lab's kernels (kernels.h: one task
// per sequence and head, its T x T logits in cache; RoPE applied here by posenc::Rope, the bias's row
// made by posenc::alibi_bias / relative_bias and its table's gradient by relative_bias_backward; Shaw's
// tables laid out by distance here, Transformer-XL's W_R R and its W_R gradient by posenc's CPU loops,
// in double as posenc's attention does). Everything else (longer evaluation windows, RoPE with Shaw or
// Transformer-XL) runs on posenc's fused attention (posenc/attention.h). Both compute the same
// function; they sum in different orders, so their figures agree to fp32 rounding, not bit for bit.
//
// Shapes: qkv (B, T, 3C) = q | k | v per token, heads of D = C / H within each; out (B, T, C) =
// (B, T, H, D); lse (B, H, T); positions (T) int64, 0 .. T-1 (every window starts at position 0).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels.h"
#include "posenc/attention.h"
#include "posenc/tensor.h"

namespace posenc::lab {

// The longest window the lab's kernels take: their T x T logits per thread (4 MiB at 1024). Up to it
// they ran faster than posenc's tiled attention on one Zen 4 core (4 heads of 16 dims, forward: 1.4
// against 2.0 ms at T 256 x 8 windows, 5.6 against 6.2 ms at T 1024 x 2), at T 2048 as fast.
inline constexpr int64_t kMaxKernelWindow = 1024;

// Whether `config` at window T and head size D runs on the lab's kernels.
bool on_lab_kernels(const AttentionConfig& config, int64_t T, int64_t D);

// The buffers the lab's path reuses from call to call (rotated or shifted q and k, the bias row, the
// relative tables and their gradients), so that a training step allocates nothing.
class LabAttention {
 public:
  void forward(const AttentionConfig& config, const float* qkv, int64_t B, int64_t T, int64_t H, int64_t D,
               ConstTensorView positions, float* out, float* lse);
  // dqkv (B, T, 3C) is stored (overwritten); param_grads' tables (relative_table, Shaw's, XL's) are
  // accumulated; its q, k and v are ignored.
  void backward(const AttentionConfig& config, const float* qkv, int64_t B, int64_t T, int64_t H, int64_t D,
                ConstTensorView positions, const float* out, const float* lse, const float* dout, float* dqkv,
                const AttentionGrads& param_grads);

 private:
  // The kernels' view of one call: RoPE's rotated q and k, the bias row, the relative tables.
  kernels::Attention prepare(const AttentionConfig& config, const float* qkv, int64_t B, int64_t T, int64_t H,
                             int64_t D, ConstTensorView positions);
  void shaw_backward(const AttentionShaw& shaw, const AttentionGrads& grads, int64_t B, int64_t T, int64_t H,
                     int64_t D, float* dqkv) const;
  void transformer_xl_backward(const AttentionTransformerXL& xl, const AttentionGrads& grads, int64_t B,
                               int64_t T, int64_t H, int64_t D, float* dqkv);

  std::vector<float> qk_rot_;               // (B, T, 2C): q | k rotated by RoPE
  std::vector<float> rope_cos_, rope_sin_;  // (T, rotary_dim / 2): its tables
  std::vector<float> shifted_;              // (2, B, T, C): Transformer-XL's q + u_h, then q + v_h
  std::vector<float> bias_, dbias_;
  std::vector<int64_t> last_;                     // {T - 1}: the query the bias row is seen from
  std::vector<float> table_key_, table_value_;    // kernels.h's relative tables: (T, D) Shaw, (H, T, D) XL
  std::vector<float> dtable_key_, dtable_value_;  // (H, T, D)
  std::vector<float> dp_;                         // (B, T, C): the position queries' gradient
  std::vector<int64_t> deltas_;                   // Transformer-XL: 0 .. T-1
  std::vector<double> sinusoids_;                 //   its R (T, d_model) for those distances
};

}  // namespace posenc::lab
