// src/rope_plan.h: RoPE's device-independent plan, the internal entry that other ops (the attention
// plan, the KV cache) use to rotate rows whose positions they have already gathered and checked,
// without going back through the public Rope API (which would validate and gather again).
#pragma once
#include <optional>
#include <vector>

#include "posenc/rope.h"
#include "src/strided.h"

namespace posenc::detail {

// YaRN's get_mscale (modeling_rope_utils.py, modeling_deepseek_v3.py): 1 for scale <= 1, else
// 0.1 mscale ln(scale) + 1. The attention factor of yarn (rope_scaling.cc) and DeepSeek-V3's softmax scale
// correction (the config reader) both read it.
double yarn_mscale(double scale, double mscale);

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

// One tensor to rotate: rows (B, T, H) of `dim` contiguous elements; `in` may equal `out` (in place).
// fp32 rows are in/out; bf16 or fp16 storage (dtype) is in16/out16: widened to fp32, rotated in fp32
// and rounded once to the storage type (pass-through dims are copied bit for bit).
struct HeadRows {
  Strided<const float, 3> in;
  Strided<float, 3> out;
  int64_t dim = 0;
  DType dtype = DType::f32;
  Strided<const uint16_t, 3> in16{};
  Strided<uint16_t, 3> out16{};
};

struct RopePlan {
  std::vector<int64_t> positions;  // (S, B, T) contiguous, range-checked
  RopeFrequencies freq;            // for the call's sequence length (a copy: a few hundred bytes)
  RopeLayout layout = RopeLayout::half;
  bool multi_stream = false;
  bool reversed = false;  // RopeConfig::reversed: every rotation transposed

  // `inverse` rotates back (a backward, a context shift undone); with `reversed` the two swap.
  AngleTable angles(bool inverse) const;
};

// seq_len: as RopeCall::seq_len; default max(position) + 1 (HF's dynamic_rope_update).
RopePlan plan_rope(const Rope& rope, std::vector<int64_t> positions, std::optional<int64_t> seq_len);

// Rotates (or, inverse, rotates back) rows (B, T, H) of the tensors by the plan's angles.
void rope_apply(const RopePlan& plan, TokenGrid grid, const HeadRows* tensors, int num_tensors, bool inverse);

// On CUDA views (the attention backward's dq and dk): target += R^T grad (add) or target = R^T grad, the
// rotation's gradient at the positions, with one rounding to target's storage type. grad: (B, T, H, head_dim)
// f32; target: its shape, f32, bf16 or fp16; unit strides on D. No sequence length: the types whose
// frequencies depend on it are refused by name, as Rope::backward on CUDA views refuses them without one.
void rope_backward_into_gradient_cuda(const Rope& rope, ConstTensorView grad, TensorView target,
                                      ConstTensorView positions, bool add);

}  // namespace posenc::detail
