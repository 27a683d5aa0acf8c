// src/cpu/attention.h: the fused attention of the CPU backend, forward and backward. The front end
// (src/attention.cc) validates, rotates q/k for RoPE, tabulates the positional terms and builds
// this plan; the kernels only see pointers, strides and tables.
#pragma once
#include <cstdint>
#include <vector>

#include "src/cpu/distance_bias.h"
#include "src/cpu/relative_terms.h"

namespace posenc::cpu {

// Tiles: 64 queries x 64 keys (a tile of scores, 16 KiB, stays in L1).
constexpr int64_t kAttnBlockQ = 64, kAttnBlockK = 64;

// One independent attention problem: batch row b, queries [q0, q0+nq), keys [k0, k0+nk).
struct AttnProblem {
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
// W_R,h R_delta computed once per distinct delta by the front end.
struct XLTerms {
  const float* qv = nullptr;  // (B, Q, H, D) contiguous: q + v_h
  const float* rproj = nullptr;    // (H, n, D)
  const float* rproj_t = nullptr;  // (H, D, n)
  int64_t n = 0;
  const DeltaIndex* delta = nullptr;
};

struct AttnPlan {
  int64_t B = 0, H = 0, Hkv = 0, D = 0, Q = 0, K = 0;  // Q, K: tokens per batch row
  float scale = 1;
  bool causal = false;
  int64_t window = 0;
  const int64_t* q_pos = nullptr;  // (B, Q)
  const int64_t* k_pos = nullptr;  // (B, K)
  std::vector<AttnProblem> problems;
  const float* q = nullptr;  // content query: rotated for RoPE, + u for Transformer-XL
  int64_t q_sb = 0, q_st = 0, q_sh = 0;
  const float* k = nullptr;
  int64_t k_sb = 0, k_st = 0, k_sh = 0;
  const float* v = nullptr;
  int64_t v_sb = 0, v_st = 0, v_sh = 0;
  // Scalar bias b_h(k_pos - q_pos): a per-head lookup over [lut_lo, lut_lo + lut_size) when the
  // distances are an ordinary range, else `bias->value` per pair. Null bias: none.
  const DistanceBias* bias = nullptr;
  std::vector<float> lut;
  int64_t lut_lo = 0, lut_size = 0;
  bool lut_dense = false;
  const ShawTerms* shaw = nullptr;
  const XLTerms* xl = nullptr;

  bool masked(int64_t q_pos, int64_t k_pos) const {
    return (causal && k_pos > q_pos) || (window > 0 && (q_pos - k_pos >= window || k_pos - q_pos >= window));
  }
};

// A key or value tensor transposed per (problem, kv head): (D, nk) at offset[problem] + hk * D * nk,
// so a tile of 64 keys is D contiguous runs for the tile products.
struct PackedTransposed {
  std::vector<int64_t> offset;
  std::vector<float> data;
  const float* head(const AttnPlan& p, int64_t problem, int64_t hk) const {
    if (offset[problem + 1] == offset[problem]) return nullptr;
    return data.data() + offset[problem] + hk * p.D * p.problems[problem].nk;
  }
};
// Problems with at most `min_queries` queries are left out (head() is null: the kernels read key
// rows directly, which a decode step against a long cache needs, instead of repacking it).
PackedTransposed pack_transposed(const AttnPlan& p, const float* x, int64_t sb, int64_t st, int64_t sh,
                                 int64_t min_queries = 0);
// Up to this many queries, the forward reads key rows instead of packing K^T.
constexpr int64_t kAttnRowDotQueries = 4;

// The tasks of a pass: (problem, head, block of 64 queries or, by_keys, of 64 keys), in an order
// that keeps one head's work together.
struct AttnTask {
  int64_t problem, head, block;
  int64_t heads = 1;  // heads [head, head + heads) together
};
std::vector<AttnTask> attn_tasks(const AttnPlan& p, int64_t heads, bool by_keys);

struct AttnForwardOut {
  float* out = nullptr;  // (B, Q, H, D)
  int64_t sb = 0, st = 0, sh = 0;
  float* lse = nullptr;  // (B, H, Q) or null
  int64_t l_sb = 0, l_sh = 0, l_st = 0;
};
void attention_forward(const AttnPlan& plan, const AttnForwardOut& out);

// The backward (FlashAttention-2, Dao 2023, Algorithm 2, in two race-free passes): per key block,
// dK and dV; per query block, dQ and the positional parameter gradients. Tiles are recomputed
// from lse; nothing S x S is stored.
struct AttnBackwardIO {
  const float* out = nullptr;  // (B, Q, H, D)
  int64_t o_sb = 0, o_st = 0, o_sh = 0;
  const float* lse = nullptr;  // (B, H, Q)
  int64_t l_sb = 0, l_sh = 0, l_st = 0;
  const float* grad_out = nullptr;  // (B, Q, H, D)
  int64_t g_sb = 0, g_st = 0, g_sh = 0;
  // Outputs, contiguous, overwritten: dq (B, Q, H, D) w.r.t. the plan's q; dk, dv (B, K, Hkv, D).
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  // Accumulated (+=) when non-null, contiguous:
  float* relative_table = nullptr;       // (rows, H) with bias->rows_config
  float* shaw_a_k = nullptr;             // (rows, D)
  float* shaw_a_v = nullptr;             // (rows, D)
  double* xl_u = nullptr;                // (H, D)
  double* xl_v = nullptr;                // (H, D)
  float* xl_rproj = nullptr;             // (H, n, D)
};
void attention_backward(const AttnPlan& plan, const AttnBackwardIO& io);

// Per-query sums of pass 2 that outlive a task (reduced in a fixed order afterwards).
struct QuerySums {
  float* shaw_gk = nullptr;   // (B*Q, H, rows): sum_j dS_ij over r_ij = r
  float* shaw_pb = nullptr;   // (B*Q, H, rows): sum_j P_ij over r_ij = r
  float* relative = nullptr;  // (tasks, rows) of this task: sum of dS per table row
  const int32_t* row_lut = nullptr;  // table row of distance lut_lo + x, or null: computed
};


}  // namespace posenc::cpu
