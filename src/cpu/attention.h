// src/cpu/attention.h: the fused attention forward of the CPU backend. The front end
// (src/attention.cc) validates, rotates q/k for RoPE and builds this plan.
#pragma once
#include <cstdint>
#include <vector>

#include "src/cpu/distance_bias.h"

namespace posenc::cpu {

// One independent attention problem: batch row b, queries [q0, q0+nq), keys [k0, k0+nk).
struct AttnProblem {
  int64_t b, q0, nq, k0, nk;
};

struct AttnPlan {
  int64_t H = 0, Hkv = 0, D = 0, Q = 0, K = 0;  // Q, K: tokens per batch row
  float scale = 1;
  bool causal = false;
  int64_t window = 0;
  const int64_t* q_pos = nullptr;  // (B, Q)
  const int64_t* k_pos = nullptr;  // (B, K)
  std::vector<AttnProblem> problems;
  const float* q = nullptr;
  int64_t q_sb = 0, q_st = 0, q_sh = 0;
  const float* k = nullptr;
  int64_t k_sb = 0, k_st = 0, k_sh = 0;
  const float* v = nullptr;
  int64_t v_sb = 0, v_st = 0, v_sh = 0;
  float* out = nullptr;
  int64_t o_sb = 0, o_st = 0, o_sh = 0;
  float* lse = nullptr;  // (B, H, Q) or null
  int64_t l_sb = 0, l_sh = 0, l_st = 0;
  // Scalar bias b_h(k_pos - q_pos): a per-head lookup over [lut_lo, lut_lo + lut_size) when the
  // distances are an ordinary range, else `bias->value` per pair. Null bias: none.
  const DistanceBias* bias = nullptr;
  std::vector<float> lut;
  int64_t lut_lo = 0, lut_size = 0;
  bool lut_dense = false;
};

void attention_forward(const AttnPlan& plan);

}  // namespace posenc::cpu
