// src/attention_plan.h: the attention plan, built on the host by the front ends (forward and
// backward) and handed to a backend (src/cpu/attention*.cc; a CUDA one would take the same plan):
// the validated inputs with every buffer the kernels read (positions, rotated q/k, the bias lookup,
// Shaw tables, Transformer-XL projections). O(H (Q + K) D) at most, never S x S. Not movable: the
// plan's views point into its own buffers.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "posenc/attention.h"
#include "src/attention_mask.h"
#include "src/bias_plan.h"
#include "src/rope_plan.h"
#include "src/strided.h"
#include "src/transformer_xl_plan.h"

namespace posenc::detail {

// Tiles: 64 queries x 64 keys (a tile of scores, 16 KiB, stays in L1).
constexpr int64_t kAttentionBlockQ = 64, kAttentionBlockK = 64;

// One independent attention problem: batch row b, queries [q0, q0+nq), keys [k0, k0+nk).
struct AttentionProblem {
  int64_t b, q0, nq, k0, nk;
};

// Shaw et al. (2018) inside the tiles: logit_ij += scale q_i . a_k[r], out_i += sum_j p_ij a_v[r],
// r = clip(k_pos - q_pos, -max_distance, max_distance) + max_distance. Tables (rows, D)
// contiguous, and transposed (D, rows) for the per-block products q a_k^T and dO a_v^T.
struct ShawTerms {
  int64_t max_distance = 0, rows = 0;
  const float* a_k = nullptr;
  const float* a_k_t = nullptr;
  const float* a_v = nullptr;  // null: no value term
  const float* a_v_t = nullptr;
  int64_t row(int64_t k_pos, int64_t q_pos) const {
    const int64_t d = k_pos - q_pos;
    return (d < -max_distance ? -max_distance : d > max_distance ? max_distance : d) + max_distance;
  }
};

// Transformer-XL (Dai et al. 2019) inside the tiles: the content query is q + u (the plan's q),
// and logit_ij += scale (q_i + v_h) . rproj_h[delta_ij], delta = q_pos - k_pos, rproj_h[delta] =
// W_R,h R_delta computed once per distinct delta.
struct TransformerXLTerms {
  const float* qv = nullptr;       // (B, Q, H, D) contiguous: q + v_h
  const float* rproj = nullptr;    // (H, n, D)
  const float* rproj_t = nullptr;  // (H, D, n)
  int64_t n = 0;
  const DeltaIndex* delta = nullptr;
  std::vector<double> sinusoids;  // R (n, d_model) of the distinct deltas, for d W_R
};

class AttentionPlan {
 public:
  AttentionPlan(const AttentionConfig& config, const AttentionInputs& in);
  AttentionPlan(const AttentionPlan&) = delete;
  AttentionPlan& operator=(const AttentionPlan&) = delete;

  const AttentionConfig& config;
  int64_t B = 0, H = 0, Hkv = 0, D = 0, Q = 0, K = 0;  // Q, K: tokens per batch row
  int64_t Dv = 0;                                      // value (and output) head dim
  float scale = 1;
  bool causal = false;
  int64_t window = 0;
  int64_t chunk = 0;                  // chunked attention (0: none)
  float softcap = 0;                  // logit softcap (0: none)
  std::vector<float> sinks;           // (H) sink logits, or empty
  std::vector<int64_t> q_pos, k_pos;  // (B, Q), (B, K)
  std::vector<AttentionProblem> problems;
  // Rows of D contiguous elements: q (B, Q, H) is the content query (rotated for RoPE, + u for
  // Transformer-XL); k (B, K, Hkv); v (B, K, Hkv) rows of Dv.
  Strided<const float, 3> q, k, v;
  // bf16 / fp16 storage of k and v (storage != f32): k16 and v16 hold the rows instead of k and v
  // (k16 empty when RoPE made fp32 copies of the keys). The backend widens them a tile at a time, so
  // a long cache is never widened whole. q is always fp32 here (a widened copy of a 16-bit q).
  DType storage = DType::f32;
  Strided<const uint16_t, 3> k16, v16;
  bool round_probabilities = false;  // AttentionConfig::round_probabilities (bf16 storage only)
  // Scalar bias b_h(k_pos - q_pos): a per-head lookup over [lut_lo, lut_lo + lut_size) when the
  // distances are an ordinary range, else `bias->value` per pair. Null bias: none.
  const Bias* bias = nullptr;
  std::vector<float> lut;
  int64_t lut_lo = 0, lut_size = 0;
  bool lut_dense = false;
  const ShawTerms* shaw = nullptr;
  const TransformerXLTerms* transformer_xl = nullptr;
  // RoPE's rotation of dims [rope_offset, rope_offset + rope_dim) of q and k (the backward rotates
  // their gradients back).
  std::optional<RopePlan> rope_q, rope_k;
  int64_t rope_offset = 0, rope_dim = 0;
  // AttentionConfig::rotate_values: v is a copy with that range rotated at the key positions; the output
  // rows (B, Q, H) of Dv are rotated back at the query positions (back = true), their gradients forward.
  bool rotate_values = false;
  void rotate_output_rows(const Strided<float, 3>& rows, bool back) const;
  // (B, Q) query temperature factors (the plan's q is scaled by them), or empty.
  std::vector<float> q_temperature;

  // The mask (src/attention_mask.h, shared with the CUDA backend).
  AttentionMask mask() const { return {causal, window, chunk}; }
  bool masked(int64_t q_position, int64_t k_position) const { return mask().masked(q_position, k_position); }
  int64_t chunk_of(int64_t position) const { return mask().chunk_of(position); }

  // fp32 copies of 16-bit keys and values, for the backward (which reads k and v whole, several
  // times, and is compute-bound): afterwards storage is f32 and k16, v16 are empty.
  void widen_keys_and_values();

 private:
  void set_inputs(const AttentionInputs& in);
  void set_storage(const AttentionInputs& in);
  void set_rope();
  void set_rotated_values();
  void set_scores();
  void set_query_temperature();
  void set_bias();
  void set_shaw();
  void set_transformer_xl();

  std::vector<float> q_buf_, k_buf_, v_buf_;     // rotated (and + u) copies when needed
  std::vector<float> q_wide_, k_wide_, v_wide_;  // fp32 copies of 16-bit q (and of k for RoPE, of v
                                                 // for the backward)
  Bias bias_;
  std::vector<double> slopes_;
  ShawTerms shaw_;
  std::vector<float> shaw_tables_;  // a_k, a_k^T, a_v, a_v^T
  TransformerXLTerms transformer_xl_;
  std::unique_ptr<DeltaIndex> delta_;
  std::vector<float> qv_, rproj_, rproj_t_;
};

// The forward of a built plan: checks out (B, Q, H, D) and lse (B, H, Q, or empty), then runs the
// backend. attention_forward and KVCache::attend share it.
void attention_forward_planned(const AttentionPlan& plan, TensorView out, TensorView lse);

// The softmax scale of a call with heads of D: the config's, or 1 / sqrt(D); refused (naming `scale`) unless
// finite with |scale| <= 1e6, where fp32 scores times log2(e) stay in range for rows of modest size (the CPU
// and CUDA kernels take the exponent in base 2).
float attention_scale(const AttentionConfig& config, int64_t D);

}  // namespace posenc::detail
