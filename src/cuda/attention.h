// src/cuda/attention.h: the CUDA backend's fused attention forward (src/cuda/attention.cu), called by the
// front end (src/attention_cuda.cc) with views it has checked. No CUDA types: the kernels queue on
// posenc::cuda_stream().
//   q (B, Q, H, D), k (B, K, Hkv, D), v (B, K, Hkv, Dv) bf16 or fp16, rows 16-byte aligned; out (B, Q, H, Dv)
//   of the same dtype; lse (B, H, Q) f32 or null. Positions (B, Q) and (B, K) int64 at the given strides: the
//   front end materializes default ones. Packed sequences: B = 1 and cu_seqlens (N + 1) int64 in device
//   memory.
#pragma once
#include <cstdint>
#include <memory>

#include "posenc/attention.h"
#include "posenc/tensor.h"
#include "src/attention_mask.h"
#include "src/cuda/attention-inl.cuh"
#include "src/cuda/bias.h"

namespace posenc::cuda {

// Head dims: q / k (D) and v (Dv) each a multiple of 8 from 8 to kMaxAttentionHeadDim (others are refused
// by name), zero-padded to whole 64-column tiles (zero columns add nothing to Q K^T; padded output columns
// are not stored). The forward's tiles: q / k columns (64, 128, 192 or 256) and the output's columns a block
// computes (64 with q / k's 64, else 128: a part of v, one block per part), so that the output's accumulators
// stay in registers: (64, 64), (128, 128), (192, 128), (256, 128). The backward's: one width for both, the
// larger of the two padded, 64 to 256.
inline constexpr int64_t kMaxAttentionHeadDim = 256;
struct AttentionTileDims {
  int64_t qk = 0, v = 0, v_parts = 0;
};
inline AttentionTileDims attention_tile_dims(int64_t D, int64_t Dv) {
  AttentionTileDims t;
  t.qk = D <= 64 && Dv <= 64 ? 64 : D <= 128 ? 128 : (D + 63) / 64 * 64;
  t.v = t.qk == 64 ? 64 : 128;
  t.v_parts = (Dv + t.v - 1) / t.v;
  return t;
}
inline int64_t attention_backward_tile_dim(int64_t D, int64_t Dv) {
  return ((D > Dv ? D : Dv) + 63) / 64 * 64;
}
// Shaw on the GPU: distances up to 128 (the rows' q . a^K products and value sums, (64, 2 L + 1) floats each,
// sit in shared memory beside the tiles) and heads up to 128 (two compiled tile pairs, (64, 64), (128, 128)).
inline constexpr int64_t kMaxShawDistance = 128;
inline constexpr int64_t kMaxShawHeadDim = 128;
// Transformer-XL on the GPU: heads up to 128 (the (64, 64) and (128, 128) tile pairs), default positions
// only.
inline constexpr int64_t kMaxTransformerXLHeadDim = 128;
// Heads whose ALiBi slopes a kernel takes by value.
inline constexpr int64_t kMaxAttentionHeads = 1024;

struct QueryRotation {
  const float* cos = nullptr;  // null: no rotation in the kernel
  const float* sin = nullptr;
  int64_t table_rows_per_batch = 0;
  int pairs = 0, offset = 0;
  bool interleaved = false;
};

struct AttentionLaunch {
  DType dtype = DType::bf16;  // q, k, v and out
  int64_t B = 0, Q = 0, K = 0, H = 0, Hkv = 0, D = 0, Dv = 0;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  int64_t q_strides[3] = {}, k_strides[3] = {}, v_strides[3] = {}, out_strides[3] = {};  // (B, T, H)
  float* lse = nullptr;
  int64_t lse_strides[3] = {};  // (B, H, Q)
  const int64_t* q_pos = nullptr;
  const int64_t* k_pos = nullptr;
  int64_t q_pos_stride = 0, k_pos_stride = 0;  // per batch row (0: shared by the rows)
  // Whether q_pos and k_pos are the default ones (attention_default_positions), which kernels may compute
  // instead of reading.
  bool default_positions = false;
  // Packed sequences (B = 1): offsets of N sequences in q and in k / v; null for batch rows.
  const int64_t* cu_seqlens_q = nullptr;
  const int64_t* cu_seqlens_k = nullptr;
  int64_t sequences = 0;
  float scale = 1;
  detail::AttentionMask mask;
  float softcap = 0;  // 0: none
  // The scalar bias: none, ALiBi (slopes by value, H <= kMaxAttentionHeads) or a learned table read through
  // its rows (clipped, or T5's saturating row table), staged per head as a lookup over [-limit, limit].
  bool has_bias = false;
  DeviceBias bias;
  const float* sinks = nullptr;  // (H) f32 in device memory, at sinks_stride, or null
  int64_t sinks_stride = 0;
  QueryTemperature temperature;  // per query row, from its position
  // Shaw's relative representations (forward only), or null: a_k (2 L + 1, D) and a_v (2 L + 1, Dv) or
  // null, f32 in device memory at their strides; L <= kMaxShawDistance, D and Dv <= kMaxShawHeadDim.
  int64_t shaw_max_distance = 0;
  const float* shaw_a_k = nullptr;
  const float* shaw_a_v = nullptr;
  int64_t shaw_a_k_strides[2] = {}, shaw_a_v_strides[2] = {};
  // Transformer-XL's terms (default positions), or null: u and v (H, D) and w_r (H D, d_model)
  // f32 in device memory at their strides; D <= kMaxTransformerXLHeadDim.
  const float* xl_u = nullptr;
  const float* xl_v = nullptr;
  const float* xl_w_r = nullptr;
  int64_t xl_u_strides[2] = {}, xl_v_strides[2] = {}, xl_w_r_strides[2] = {};
  int64_t xl_d_model = 0;
  double xl_base = 10000.0;
  // RoPE's rotation of q left to the kernel (attention_forward_rotates_q; q then as given, not rotated): each
  // query token's cos and sin of its pairs (Rope::cos_sin's (N, pairs) tables: N = Q tokens shared by the
  // batch rows, table_rows_per_batch 0, or B x Q, table_rows_per_batch Q) and the pairs' place in the head
  // (dims offset + j and offset + j + pairs, or offset + 2 j and offset + 2 j + 1 interleaved).
  QueryRotation q_rotation;
};
// Whether attention_forward runs this launch on the sm_90a kernel with heads up to 192, which rotates q
// itself (q_rotation).
bool attention_forward_rotates_q(const AttentionLaunch& launch);
void attention_forward(const AttentionLaunch& launch);
// Which kernel runs a forward both can take: on a Hopper GPU, the sm_90a kernel (src/cuda/attention_sm90.cu:
// wgmma, TMA, warp-specialized) where it fits and its row blocks fill the GPU (automatic); or always the
// tiled kernel (src/cuda/attention_forward.cuh), or the sm_90a kernel wherever it fits, even on a few
// row blocks: the GPU tests run both on their small shapes.
enum class AttentionKernel { automatic, tiled, sm90 };
inline AttentionKernel attention_forward_choice = AttentionKernel::automatic;
// Whether the current device runs the sm_90a kernel (a compute capability 9.0 GPU, and this build has its
// code), and how many launches it has had: the GPU tests check that their shapes ran on it.
bool attention_sm90_available();
inline int64_t attention_sm90_launches = 0;
inline int64_t attention_sm90_q_rotations = 0;  // of those, the launches that rotated q (q_rotation)
// The same for the backward (src/cuda/attention_backward_sm90.cu against the tiled passes): automatic, on a
// Hopper GPU where it fits and its key tiles fill the GPU; tiled; or sm90 wherever it fits.
inline AttentionKernel attention_backward_choice = AttentionKernel::automatic;
inline int64_t attention_sm90_backward_launches = 0;

// Decoding rows (src/cuda/attention_decode.cu): the forward of launches with at most kMaxDecodeRows query
// rows per kv head (Q x H / Hkv), batch rows (not packed), without Shaw's or Transformer-XL's terms, on the
// CUDA cores, the heads of a group in one block. Splits of the keys (attention_decode_splits: two blocks per
// multiprocessor) write partial rows ((B, H, Q, splits) of Dv floats and MaxSum) for the tiled kernel's
// merge; one split writes out and lse. terms, slopes (kMaxAttentionHeads) and lookup as set_score_bias gives
// them.
inline constexpr int64_t kMaxDecodeRows = 16;
bool attention_decode_fits(const AttentionLaunch& launch);
int64_t attention_decode_splits(const AttentionLaunch& launch);
void attention_decode(const AttentionLaunch& launch, const ScoreTerms& terms, const float* slopes,
                      const float* lookup, int64_t splits, float* partial_out, MaxSum* partial_max_sum);
// The forward's shared memory per block for these head dims (with Shaw's tables of shaw_rows distances, or
// 0; with Transformer-XL's band), and the most a block may have on the current device (0 where it cannot be
// read).
int64_t attention_forward_shared_bytes(int64_t D, int64_t Dv, int64_t shaw_rows, bool shaw_values,
                                       bool transformer_xl = false);
int64_t max_shared_bytes_per_block();
// The current device's multiprocessors (0 where they cannot be read): how many blocks fill it.
int64_t multiprocessor_count();

// The backward (src/cuda/attention_backward.cu) of the forward described by `forward` (its q and k RoPE's
// rotated copies): fresh fp32 gradients dq (B, Q, H, D), dk (B, K, Hkv, D) and dv (B, K, Hkv, Dv),
// contiguous, with respect to the q and k the kernels read. out and grad_out (B, Q, H, Dv) of the forward's
// dtype, lse (B, H, Q) f32.
// Where the keys blocks store dK or dV: the caller's gradient view (data non-null; its storage type, each
// element rounded once as it is added into or written to it) or, data null, the launch's fp32 scratch.
struct KeyGradientOut {
  void* data = nullptr;
  int64_t strides[3] = {};  // (B, K, Hkv), in elements; unit stride on the head dim
  DType dtype = DType::f32;
  bool add = true;
};

struct AttentionBackwardLaunch {
  AttentionLaunch forward;
  const void* out = nullptr;
  const void* grad_out = nullptr;
  int64_t out_strides[3] = {}, grad_out_strides[3] = {};
  const float* lse = nullptr;
  int64_t lse_strides[3] = {};
  float* dq = nullptr;  // fp32 scratch (B, Q, H, D), zeroed (the blocks add into it)
  float* dk = nullptr;  // fp32 scratch (B, K, Hkv, D), where dk_out has no view
  float* dv = nullptr;  // fp32 scratch (B, K, Hkv, Dv), where dv_out has no view
  // dK and dV straight into the caller's views, where the front end can take them so (no RoPE on k; every
  // row written, or added into): no scratch and no pass after the kernels for them.
  KeyGradientOut dk_out, dv_out;
  float* grad_sinks = nullptr;  // (H) at grad_sinks_stride, added into; null: not wanted
  int64_t grad_sinks_stride = 0;
  float* grad_table = nullptr;  // (table_rows, H) of the learned bias, added into; null: not wanted
  int64_t grad_table_strides[2] = {};
  int64_t table_rows = 0;
  // Shaw's tables (forward.shaw_a_k non-null; tiles up to kMaxShawHeadDim): (2 L + 1, D) f32 at their
  // strides, added into; null: not wanted.
  float* grad_shaw_a_k = nullptr;
  float* grad_shaw_a_v = nullptr;
  int64_t grad_shaw_a_k_strides[2] = {}, grad_shaw_a_v_strides[2] = {};
  // Transformer-XL's parameters (forward.xl_u non-null): u and v (H, D), w_r (H D, d_model), f32 at their
  // strides, added into; null: not wanted.
  float* grad_xl_u = nullptr;
  float* grad_xl_v = nullptr;
  float* grad_xl_w_r = nullptr;
  int64_t grad_xl_u_strides[2] = {}, grad_xl_v_strides[2] = {}, grad_xl_w_r_strides[2] = {};
};
void attention_backward(const AttentionBackwardLaunch& launch);
// Shaw's backward (src/cuda/attention_backward_shaw.cu): the shared memory its queries pass takes per block
// for these head dims and shaw_rows = 2 L + 1 distances (its bins of dS and P, (64, 2 L + 1) floats each,
// beside the tiles), and the device memory it takes besides the gradients: the rows' products with a^K and
// a^V, (B, heads, Q, 2 L + 1) fp32 each for a wave of heads within attention_shaw_table_bytes, and at most
// attention_table_partial_bytes of partial sums at a time.
int64_t attention_backward_shaw_shared_bytes(int64_t D, int64_t Dv, int64_t shaw_rows);
// Transformer-XL's backward (src/cuda/attention_backward_xl.cu): the most shared memory one of its passes
// takes per block for these head dims (its keys pass: the band's rows and products beside the tiles).
int64_t attention_backward_xl_shared_bytes(int64_t D, int64_t Dv);
// The learned table's gradient: its per-block partial sums take at most this many bytes at a time (the keys
// pass runs in waves of key tiles beyond). A variable so that the GPU tests can run several waves on small
// shapes.
inline int64_t attention_table_partial_bytes = int64_t{64} << 20;
// Shaw's backward: its rows' products take at most this many bytes at a time (or one kv head's, with its
// query heads, where that alone is more): the passes run in waves of kv heads beyond. A variable, as above.
inline int64_t attention_shaw_table_bytes = int64_t{256} << 20;

// grad (B, T, H, D) f32, bf16 or fp16 at `strides` (unit stride on D) += g (contiguous fp32, 16-byte
// aligned, D a multiple of 4), rounded once; add false: grad = g.
void accumulate_gradient(const float* g, void* grad, DType dtype, const int64_t strides[3], int64_t B,
                         int64_t T, int64_t H, int64_t D, bool add = true);
// A parameter's fp32 gradient view (rows, cols) at (row_stride, col_stride) set to 0: what the kernels then
// add into when the caller asks for the gradients written, not added.
void zero_gradient(float* grad, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride);

class DeviceScratch;

// Transformer-XL's tables (src/cuda/attention_xl.cu) over the deltas [lo, lo + n) a visible pair of the
// launch can have (its longest sequences', of longest_q queries and longest_k keys): rproj (H, n, D) rows of
// the storage type and v_h . rproj_h (H, n) f32, in stream-ordered device memory.
struct XLTables {
  std::unique_ptr<DeviceScratch> rproj, vr;
  int64_t lo = 0, n = 0, longest_q = 0, longest_k = 0;
};
XLTables transformer_xl_tables(const AttentionLaunch& launch);
// d w_r (H D, d_model) f32, contiguous, = sum over the deltas m in [lo, lo + n) of d rproj[h][m][d] R_m[e]
// from d rproj (H, n, D) f32 (on the tensor cores, both operands in two bf16 parts: within about 2^-15 of
// sum_m |d rproj| |R|).
void transformer_xl_weight_gradient(const AttentionLaunch& launch, const float* d_rproj, int64_t lo,
                                    int64_t n, float* out);
// The launch's scalar bias for a kernel: terms' kind (and symmetry, limit), ALiBi's slopes
// (kMaxAttentionHeads, zero past H), or the per-head lookup of a learned bias, (H, 2 limit + 1) f32 built in
// stream-ordered device memory (returned; *lookup points into it).
std::unique_ptr<DeviceScratch> set_score_bias(const AttentionLaunch& launch, ScoreTerms* terms, float* slopes,
                                              const float** lookup);

// Default positions into (B, Q) and (B, K) int64 device buffers: keys 0 .. K-1 and queries aligned to the
// end, K-Q .. K-1 per batch row; packed (cu_seqlens, N sequences): restarting in each sequence.
struct DefaultPositionsLaunch {
  int64_t B = 0, Q = 0, K = 0;
  const int64_t* cu_seqlens_q = nullptr;
  const int64_t* cu_seqlens_k = nullptr;
  int64_t sequences = 0;
  int64_t* q_pos = nullptr;  // null: not wanted
  int64_t* k_pos = nullptr;
};
void attention_default_positions(const DefaultPositionsLaunch& launch);

// Rows (B, T, H) of `dim` 16-bit elements at `strides` into a contiguous (B, T, H, dim) buffer (dim a
// multiple of 8, rows 16-byte aligned): the copies RoPE rotates before attention.
void copy_head_rows(const void* in, const int64_t strides[3], int64_t B, int64_t T, int64_t H, int64_t dim,
                    void* out);

}  // namespace posenc::cuda
