// posenc/attention.h: multi-head attention with any positional encoding, fused: tiled with an
// online softmax (FlashAttention, Dao et al. 2022), so no S x S score matrix is ever built.
//
//   out_i = sum_j softmax_j(logit_ij) (v_j + value_term_ij)
//   logit_ij = scale * (q_i . k_j + vector_terms_ij) + bias_ij,   masked pairs excluded
//
// with, by encoding (RoPE combines with a bias: RoPE + ALiBi, RoPE + T5 are the seeds' hybrids):
//   RoPE            q and k rotated once before the tiles (Rope::forward on copies)
//   ALiBi           bias_ij = -m_h (q_pos - k_pos)           (symmetric: -m_h |q_pos - k_pos|)
//   relative / T5   bias_ij = table[row(k_pos - q_pos), h]
//   sinusoidal, learned, binary: act on the embeddings before attention (nothing to do here)
// Not yet fused (issue: fused attention, continued): Shaw and Transformer-XL terms (use
// shaw_key_logits / transformer_xl_logits with a materialised softmax meanwhile) and the backward.
//
// Shapes: q (B, Q, H, D); k, v (B, K, Hkv, D) with H a multiple of Hkv (grouped-query and
// multi-query attention); out (B, Q, H, D); lse (B, H, Q), the log-sum-exp of each row's logits.
// Any strides with a unit stride on D. Positions are int64 and decide masking: causal means
// k_pos <= q_pos, so a decode step, a chunked prefill and packed sequences all work.
// Fully masked rows (e.g. a window that excludes every key) give out = 0 and lse = -inf.
#pragma once
#include <cstdint>
#include <optional>

#include "posenc/bias.h"
#include "posenc/rope.h"
#include "posenc/tensor.h"

namespace posenc {

// The scalar positional bias inside the logits (at most one; RoPE combines with it).
struct AttentionBias {
  enum class Kind : uint8_t { none, alibi, relative };
  Kind kind = Kind::none;
  AlibiConfig alibi;                 // kind == alibi (alibi.heads must equal H)
  RelativeBiasConfig relative;       // kind == relative: clipped or T5 buckets (relative.heads == H)
  ConstTensorView relative_table;    //   (rows, H)
};

struct AttentionConfig {
  bool causal = false;
  // > 0: a sliding window; keys with |q_pos - k_pos| >= window are masked (with causal, the last
  // `window` positions including the query's own, as Mistral's sliding window).
  int64_t window = 0;
  std::optional<double> scale;  // default 1 / sqrt(D)
  const Rope* rope = nullptr;   // optional rotary encoding of q and k
  AttentionBias bias;
};

struct AttentionInputs {
  ConstTensorView q, k, v;
  // (Q) or (B, Q) and (K) or (B, K). Default: keys at 0 .. K-1 and queries aligned to the end,
  // K-Q .. K-1 (a prefill when Q = K, the newest tokens of a cache otherwise).
  ConstTensorView q_positions, k_positions;
  // Packed variable-length batches (B = 1): (N + 1) int64 cumulative lengths of N sequences in q
  // and in k/v. Sequences never attend to each other; default positions restart in each one.
  ConstTensorView cu_seqlens_q, cu_seqlens_k;
};

// Inputs with default positions and no packing.
inline AttentionInputs qkv(ConstTensorView q, ConstTensorView k, ConstTensorView v) {
  AttentionInputs in;
  in.q = q;
  in.k = k;
  in.v = v;
  return in;
}

// out (B, Q, H, D) f32; lse (B, H, Q) f32, or an empty view (data == nullptr) to skip it.
void attention_forward(const AttentionConfig& config, const AttentionInputs& inputs, TensorView out,
                       TensorView lse);

}  // namespace posenc
