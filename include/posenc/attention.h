// posenc/attention.h: multi-head attention with any positional encoding, fused: tiled with an
// online softmax (FlashAttention, Dao et al. 2022), so no S x S score matrix is ever built.
//
//   out_i = sum_j p_ij (v_j + value_term_ij),  p_ij = exp(logit_ij) / (sum_j' exp(logit_ij') [+ exp(sink_h)])
//   logit_ij = cap(scale * (q_i . k_j + vector_terms_ij)) + bias_ij,   masked pairs excluded
//   cap(x) = softcap tanh(x / softcap) with a logit softcap, else x
//
// with, by encoding (RoPE combines with a bias: RoPE + ALiBi, RoPE + T5 are the usual hybrids):
//   RoPE            q and k rotated once before the tiles (Rope::forward on copies)
//   ALiBi           bias_ij = -m_h (q_pos - k_pos)           (symmetric: -m_h |q_pos - k_pos|)
//   relative / T5   bias_ij = table[row(k_pos - q_pos), h]
//   Shaw            vector_terms_ij = q_i . a_k[r],  value_term_ij = a_v[r],
//                   r = clip(k_pos - q_pos, -max_distance, max_distance) + max_distance
//   Transformer-XL  vector_terms_ij = u_h . k_j + (q_i + v_h) . W_R,h R(q_pos - k_pos)
//   sinusoidal, learned, binary: act on the embeddings before attention (nothing to do here)
// Shaw and Transformer-XL are alternatives (not combined with each other); either combines with
// RoPE and a bias. Tables are gathered per tile: no S x S matrix in the forward or the backward.
//
// Shapes: q (B, Q, H, D); k (B, K, Hkv, D); v (B, K, Hkv, Dv) with H a multiple of Hkv (grouped-query
// and multi-query attention); out (B, Q, H, Dv); lse (B, H, Q), the log-sum-exp of each row's logits.
// Any strides with a unit stride on the last dimension. Dv may differ from D: DeepSeek-V2/V3's
// multi-head latent attention has q/k heads of 192 (128 without position + 64 rotated) and value
// heads of 128; its absorbed form (FlashMLA) has one key head of 576 whose first 512 dims are the
// value: pass v as a view of k (same data and strides, shape (B, K, 1, 512)), nothing is copied. Positions
// are int64 and decide masking: causal means k_pos <= q_pos, so a decode step, a chunked prefill and packed
// sequences all work. Fully masked rows (e.g. a window that excludes every key) give out = 0 and lse = -inf
// (with sinks: lse = sink_h, the only entry left in the row's softmax).
#pragma once
#include <cstdint>
#include <optional>

#include "posenc/bias.h"
#include "posenc/rope.h"
#include "posenc/shaw.h"
#include "posenc/tensor.h"
#include "posenc/transformer_xl.h"

namespace posenc {

// The scalar positional bias inside the logits (at most one; RoPE combines with it).
struct AttentionBias {
  enum class Kind : uint8_t { none, alibi, relative };
  Kind kind = Kind::none;
  AlibiConfig alibi;               // kind == alibi (alibi.heads must equal H)
  RelativeBiasConfig relative;     // kind == relative: clipped or T5 buckets (relative.heads == H)
  ConstTensorView relative_table;  //   (rows, H)
};

// Shaw et al. (2018): tables shared by the heads. config.head_dim must equal D (and Dv, with a_v).
struct AttentionShaw {
  ShawConfig config;
  ConstTensorView a_k;  // (rows, D)
  ConstTensorView a_v;  // (rows, D), or empty (data == nullptr) for the key term only
};

// Transformer-XL (Dai et al. 2019). config.heads == H and config.head_dim == D.
struct AttentionTransformerXL {
  TransformerXLConfig config;
  ConstTensorView u, v;  // (H, D)
  ConstTensorView w_r;   // (H * D, d_model)
};

// A multiplier on the query after RoPE that grows with the position (applied per token).
struct QueryTemperature {
  enum class Kind : uint8_t { none, llama4, ministral3, qwen_logn };
  Kind kind = Kind::none;
  // llama4 (modeling_llama4.py Llama4TextAttention.forward, NoPE layers only), p = cache index:
  //   q *= 1 + attn_scale * log(1 + floor((p + 1) / floor_scale))
  // ministral3 (modeling_ministral3.py get_llama_4_attn_scale), p = position id:
  //   q *= 1 + beta * log(1 + floor(p / original_max_position_embeddings))
  // qwen_logn (Qwen 1's use_logn_attn, remote code modeling_qwen.py QWenAttention logn_tensor), p = cache
  // index, S = seq_length > 1 (scale unused):
  //   q *= log(p + 1) / log(S) where p + 1 > S, else 1
  double scale = 0;        // attn_scale or llama_4_scaling_beta
  double floor_scale = 0;  // floor_scale or original_max_position_embeddings (qwen_logn: seq_length)
  double factor(int64_t p) const;
};
const char* query_temperature_name(QueryTemperature::Kind kind);  // "none", "llama4", ...

struct AttentionConfig {
  bool causal = false;
  // > 0: a sliding window; keys with |q_pos - k_pos| >= window are masked (with causal, the last
  // `window` positions including the query's own, as Mistral's sliding window).
  int64_t window = 0;
  // Default 1 / sqrt(D); finite, |scale| <= 1e6 (past it a score of unit-sized rows overflows the fp32
  // softmax's range, whose exponent is taken in base 2: NaN, never a number).
  std::optional<double> scale;
  const Rope* rope = nullptr;  // optional rotary encoding of q and k
  // RoPE rotates dims [rope_offset, rope_offset + rope.head_dim) of every q/k head; the others pass.
  // 0 with rope.head_dim == D rotates the whole head. DeepSeek-V2/V3: the last qk_rope_head_dim = 64
  // of 192 (rope_offset 128, interleaved layout); absorbed MLA: [512, 576).
  int64_t rope_offset = 0;
  AttentionBias bias;
  std::optional<AttentionShaw> shaw;
  std::optional<AttentionTransformerXL> transformer_xl;
  // > 0: chunked attention (Llama 4's attention_chunk_size): a query sees only the keys of its own
  // chunk, floor(q_pos / chunk) == floor(k_pos / chunk) (transformers masking_utils chunked_overlay;
  // with causal, the chunk's keys up to the query).
  int64_t chunk = 0;
  // > 0: logit softcapping (Gemma 2, Grok): the content logit x = scale (q . k + vector terms)
  // becomes softcap * tanh(x / softcap), before the scalar bias and the mask are added, which is
  // where FlashAttention-2 (apply_softcap, then mask.apply_mask with ALiBi) and ggml
  // (ggml_compute_forward_flash_attn_ext: s = softcap tanh(s), then s += slope * mask) apply it.
  double softcap = 0;
  // Learned attention sinks (gpt-oss): (H) f32, one logit per head that joins every row's softmax
  // denominator without a value (transformers modeling_gpt_oss eager_attention_forward: the sink
  // column is concatenated to the logits, softmaxed, then dropped). Not scaled. Empty: none.
  ConstTensorView sinks;
  // Position-dependent query temperature (Llama 4's attn_temperature_tuning on NoPE layers,
  // Ministral 3's llama_4_scaling_beta): q_i *= temperature.factor(q_pos_i), after RoPE, before
  // every score term; its gradient scales dq by the same factor. Not with transformer_xl.
  QueryTemperature query_temperature;
  // bf16 keys and values only, opt-in: every probability is rounded once to bf16 before P V, as GPU
  // flash attention feeds P to its bf16 tensor cores: the numerics of a bf16 P V, whose prefill runs on
  // vdpbf16ps on AMD CPUs with AVX512_BF16 (exact products, fp32 sums; set_bf16_dot_products) and on
  // fp32 FMAs of the same rounded P elsewhere (Intel's vdpbf16ps has half the FMA's rate: BENCHMARKS.md).
  // Each output row is sum_j p~_j v_j / sum_j p~_j with p~_j = p_j (1 + d_j), |d_j| <= 2^-8: still a convex
  // combination of the value rows, each weight within ~2^-7 relative of the exact one, so the output is off
  // by at most ~2^-7 max_j |v_j| before its one rounding to bf16. Off (the default): P stays fp32. The
  // backward recomputes unrounded probabilities from lse (the log of the rounded sum): the gradient of the
  // unrounded softmax, its rows summing to 1 within ~2^-8.
  bool round_probabilities = false;
  // DeepSeek-V4's rotated values (its K = V; modeling_deepseek_v4.py DeepseekV4Attention.forward): v's dims
  // [rope_offset, rope_offset + rope.head_dim) are rotated at the key positions like k's, and the output's
  // same dims rotated back at the query's position, o_t = R(-t) sum_s p_ts R(s) v_s = sum_s p_ts R(s - t)
  // v_s: values that carry relative positions (times af^2 on those dims for a rope of attention factor af, as
  // transformers scales cos / sin both ways). Needs rope, Dv >= rope_offset + rope.head_dim, fp32 v and out;
  // not in the KV cache.
  bool rotate_values = false;
};

// Storage: q, k, v in f32, bf16 or f16 (k and v share one; q may differ, e.g. f32 q against a
// bf16 cache). 16-bit keys and values are widened a tile at a time in the forward; products,
// softmax and every accumulation are fp32, and a 16-bit out is rounded once.
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

// out (B, Q, H, Dv) f32, bf16 or f16; lse (B, H, Q) f32, or an empty view (data == nullptr) to skip it.
void attention_forward(const AttentionConfig& config, const AttentionInputs& inputs, TensorView out,
                       TensorView lse);

// Gradients, accumulated (+=) like every backward of the library: zero them for a fresh gradient.
// q, k, v are required (shapes of the inputs); a parameter gradient left empty is skipped.
struct AttentionGrads {
  TensorView q, k, v;
  TensorView relative_table;      // (rows, H), with bias.kind == relative
  TensorView shaw_a_k, shaw_a_v;  // (rows, D), with shaw
  // (H, D), (H, D), (H * D, d_model), with transformer_xl
  TensorView transformer_xl_u, transformer_xl_v, transformer_xl_w_r;
  TensorView sinks;  // (H), with config.sinks
  // true: every gradient is added into its view (+=), as the library's other backwards do; false: written
  // (=), each view's previous contents neither read nor kept, so that a caller with fresh buffers (an
  // autograd function's outputs) needs no zero fill first and the backward no read of one. The views must
  // not overlap the inputs (on CUDA the kernels store into them while others still read q, k, v).
  bool accumulate = true;
};

// The backward of attention_forward from its out and lse (FlashAttention-2: tiles are recomputed,
// only the row log-sum-exp is kept). grad_out (B, Q, H, Dv). RoPE's rotation is differentiated
// too: grads.q and grads.k are w.r.t. the unrotated q and k. Deterministic for any thread count. The
// gradients are added into the views, or written with grads.accumulate = false.
// 16-bit storage: out, grad_out and each of grads.q, grads.k, grads.v may be bf16 or f16 too (the
// inputs are widened once to fp32; each gradient element is computed and added in fp32 and rounded
// once); lse and the parameter gradients are f32.
void attention_backward(const AttentionConfig& config, const AttentionInputs& inputs, ConstTensorView out,
                        ConstTensorView lse, ConstTensorView grad_out, const AttentionGrads& grads);

// The forward's q.k of bf16 keys by the CPU's bf16 dot product (vdpbf16ps, AVX512_BF16) where every
// query is a bf16 value, and its P V with round_probabilities: the same exact products, fp32 sums in
// another order (docs/conventions.md, Numerics). On
// by default where the CPU has it, unless the environment sets POSENC_BF16_DOT=0. Off, a 16-bit
// attention is bit for bit the fp32 computation of its widened values on every CPU. Call it between
// attention calls, not during one.
void set_bf16_dot_products(bool enabled);
// Whether that path runs: enabled, and the CPU has AVX512_BF16.
bool bf16_dot_products();

}  // namespace posenc
