// src/cpu/attention.cc: fused attention forward (FlashAttention-style online softmax, Dao et al.
// 2022, Algorithm 1) with the positional bias added per tile. Per task, one (problem, head, query
// block):   for each key tile:  S = scale Q K^T + bias, masked;  m' = max(m, rowmax S);
//   P = exp(S - m');  l = e^(m - m') l + rowsum P;  O = e^(m - m') O + P V
// then out = O / l, lse = m + log l. Memory: O(block) per task, O(K * D) for the packed K^T.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/cpu/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "src/cpu/attention.h"
#include "src/cpu/tile_gemm-inl.h"

#include <algorithm>
#include <cmath>
#include <limits>

HWY_BEFORE_NAMESPACE();
namespace posenc::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int64_t kBlockQ = 64, kBlockK = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// s[j] = exp(s[j] - shift) for j < n (masked entries, -inf, become 0); returns the sum.
HWY_INLINE float ExpShiftSum(float* HWY_RESTRICT s, int64_t n, float shift) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto vshift = hn::Set(d, shift), neg_inf = hn::Set(d, kNegInf);
  auto vsum = hn::Zero(d);
  int64_t j = 0;
  for (; j + N <= n; j += N) {
    const auto x = hn::LoadU(d, s + j);
    const auto e = hn::IfThenElseZero(hn::Lt(neg_inf, x), hn::Exp(d, hn::Sub(x, vshift)));
    hn::StoreU(e, d, s + j);
    vsum = hn::Add(vsum, e);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
  for (; j < n; ++j) {
    s[j] = s[j] == kNegInf ? 0.0f : std::exp(s[j] - shift);
    sum += s[j];
  }
  return sum;
}

void ForwardTask(const AttnPlan& p, const float* kt, int64_t problem, int64_t h, int64_t qb) {
  const AttnProblem& pr = p.problems[problem];
  const int64_t D = p.D, hk = h / (p.H / p.Hkv);
  const int64_t i0 = qb * kBlockQ, m = std::min(kBlockQ, pr.nq - i0);
  const float* q = p.q + pr.b * p.q_sb + (pr.q0 + i0) * p.q_st + h * p.q_sh;
  const float* v = p.v + pr.b * p.v_sb + pr.k0 * p.v_st + hk * p.v_sh;
  const int64_t* qpos = p.q_pos + pr.b * p.Q + pr.q0 + i0;
  const int64_t* kpos = p.k_pos + pr.b * p.K + pr.k0;
  alignas(64) float S[kBlockQ * kBlockK];
  std::vector<float> O(static_cast<size_t>(m * D), 0.0f);
  float mrow[kBlockQ], lrow[kBlockQ];
  std::fill(mrow, mrow + m, kNegInf);
  std::fill(lrow, lrow + m, 0.0f);
  const auto [qmin_it, qmax_it] = std::minmax_element(qpos, qpos + m);
  const int64_t qmin = *qmin_it, qmax = *qmax_it;

  for (int64_t kt0 = 0; kt0 < pr.nk; kt0 += kBlockK) {
    const int64_t n = std::min(kBlockK, pr.nk - kt0);
    const auto [kmin_it, kmax_it] = std::minmax_element(kpos + kt0, kpos + kt0 + n);
    // Skip tiles the mask excludes entirely (half of them under a causal mask).
    if (p.causal && *kmin_it > qmax) continue;
    if (p.window > 0 && (qmin - *kmax_it >= p.window || *kmin_it - qmax >= p.window)) continue;
    TileGemm({m, n, D, q, p.q_st, 1, kt + kt0, pr.nk, S, kBlockK, p.scale, false});
    for (int64_t i = 0; i < m; ++i) {
      float* s = S + i * kBlockK;
      const int64_t qp = qpos[i];
      if (p.bias) {
        if (p.lut_dense) {
          const int64_t base = h * p.lut_size - p.lut_lo - qp;  // lut[base + kp] = b_h(kp - qp)
          for (int64_t j = 0; j < n; ++j) s[j] += p.lut[base + kpos[kt0 + j]];
        } else {
          for (int64_t j = 0; j < n; ++j) s[j] += p.bias->value(kpos[kt0 + j] - qp, h);
        }
      }
      for (int64_t j = 0; j < n; ++j) {
        const int64_t kp = kpos[kt0 + j];
        if ((p.causal && kp > qp) || (p.window > 0 && (qp - kp >= p.window || kp - qp >= p.window))) s[j] = kNegInf;
      }
      float mx = kNegInf;
      for (int64_t j = 0; j < n; ++j) mx = std::max(mx, s[j]);
      const float m_new = std::max(mrow[i], mx);
      if (m_new == kNegInf) {  // nothing visible yet in this row
        std::fill(s, s + n, 0.0f);
        continue;
      }
      const float alpha = mrow[i] == kNegInf ? 0.0f : std::exp(mrow[i] - m_new);
      lrow[i] = alpha * lrow[i] + ExpShiftSum(s, n, m_new);
      if (alpha != 1.0f)
        for (int64_t d = 0; d < D; ++d) O[i * D + d] *= alpha;
      mrow[i] = m_new;
    }
    TileGemm({m, D, n, S, kBlockK, 1, v + kt0 * p.v_st, p.v_st, O.data(), D, 1.0f, true});
  }
  for (int64_t i = 0; i < m; ++i) {
    float* out = p.out + pr.b * p.o_sb + (pr.q0 + i0 + i) * p.o_st + h * p.o_sh;
    const float inv = lrow[i] > 0 ? 1.0f / lrow[i] : 0.0f;  // fully masked rows: zeros
    for (int64_t d = 0; d < D; ++d) out[d] = O[i * D + d] * inv;
    if (p.lse) p.lse[pr.b * p.l_sb + h * p.l_sh + (pr.q0 + i0 + i) * p.l_st] = lrow[i] > 0 ? mrow[i] + std::log(lrow[i]) : kNegInf;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "src/cpu/parallel.h"

namespace posenc::cpu {
HWY_EXPORT(ForwardTask);

void attention_forward(const AttnPlan& p) {
  // K^T packed per (problem, kv head): (D, nk), so a key tile is D contiguous runs for the GEMM.
  std::vector<int64_t> kt_offset(p.problems.size() + 1, 0);
  for (size_t i = 0; i < p.problems.size(); ++i) kt_offset[i + 1] = kt_offset[i] + p.Hkv * p.D * p.problems[i].nk;
  std::vector<float> kt(static_cast<size_t>(kt_offset.back()));
  const int64_t packs = static_cast<int64_t>(p.problems.size()) * p.Hkv;
  parallel_for(packs, [&](int64_t t) {
    const AttnProblem& pr = p.problems[t / p.Hkv];
    const int64_t hk = t % p.Hkv;
    float* dst = kt.data() + kt_offset[t / p.Hkv] + hk * p.D * pr.nk;
    for (int64_t j = 0; j < pr.nk; ++j) {
      const float* src = p.k + pr.b * p.k_sb + (pr.k0 + j) * p.k_st + hk * p.k_sh;
      for (int64_t d = 0; d < p.D; ++d) dst[d * pr.nk + j] = src[d];
    }
  });
  // Tasks: (problem, head, query block), listed so the work of one thread stays local.
  struct Task {
    int64_t problem, head, block;
  };
  std::vector<Task> tasks;
  for (size_t i = 0; i < p.problems.size(); ++i)
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t b = 0; b * 64 < p.problems[i].nq; ++b) tasks.push_back({static_cast<int64_t>(i), h, b});
  parallel_for(static_cast<int64_t>(tasks.size()), [&](int64_t t) {
    const Task& task = tasks[t];
    const float* kt_head = kt.data() + kt_offset[task.problem] + (task.head / (p.H / p.Hkv)) * p.D * p.problems[task.problem].nk;
    HWY_DYNAMIC_DISPATCH(ForwardTask)(p, kt_head, task.problem, task.head, task.block);
  });
}
}  // namespace posenc::cpu
#endif  // HWY_ONCE
