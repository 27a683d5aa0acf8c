// src/cpu/attention.cc: fused attention forward (FlashAttention-style online softmax, Dao et al.
// 2022, Algorithm 1) with the positional terms added per tile. Per task, one (problem, head, query
// block):   for each key tile:  S = logits (attention_tile-inl.h);  m' = max(m, rowmax S);
//   P = exp(S - m');  l = e^(m - m') l + rowsum P;  O = e^(m - m') O + P V
//   (Shaw: Pb[i, r] = e^(m - m') Pb[i, r] + sum_{j: r_ij = r} P_ij, the probability per clipped
//   distance, and O += Pb a_v at the end)
// then out = O / l, lse = m + log l. Memory: O(block) per task, O(K * D) for the packed K^T.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/cpu/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "src/cpu/attention.h"
#include "src/cpu/attention_tile-inl.h"

#include <algorithm>
#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace posenc::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

void ForwardTask(const AttnPlan& p, const AttnForwardOut& o, const float* kt, int64_t problem, int64_t h, int64_t block) {
  const AttnProblem& pr = p.problems[problem];
  const int64_t D = p.D;
  QueryBlock qb = MakeQueryBlock(p, problem, h, block * kAttnBlockQ);
  PrepareQueryBlock(p, qb);
  const int64_t m = qb.m;
  const float* v = p.v + pr.b * p.v_sb + pr.k0 * p.v_st + qb.hk * p.v_sh;
  const int64_t* kpos = p.k_pos + pr.b * p.K + pr.k0;
  const int64_t rows = p.shaw ? p.shaw->rows : 0;
  const bool shaw_values = p.shaw && p.shaw->a_v;
  alignas(64) float S[kAttnBlockQ * kAttnBlockK];
  std::vector<float> O(static_cast<size_t>(m * D), 0.0f), Pb(shaw_values ? static_cast<size_t>(m * rows) : 0), scratch;
  float mrow[kAttnBlockQ], lrow[kAttnBlockQ];
  std::fill(mrow, mrow + m, kNegInf);
  std::fill(lrow, lrow + m, 0.0f);

  for (int64_t kt0 = 0; kt0 < pr.nk; kt0 += kAttnBlockK) {
    const int64_t n = std::min(kAttnBlockK, pr.nk - kt0);
    if (!TileVisible(p, qb, kpos + kt0, n)) continue;  // half the tiles under a causal mask
    TileLogits(p, qb, kt, pr.nk, kt0, n, S, scratch);
    for (int64_t i = 0; i < m; ++i) {
      float* s = S + i * kAttnBlockK;
      float mx = kNegInf;
      for (int64_t j = 0; j < n; ++j) mx = std::max(mx, s[j]);
      const float m_new = std::max(mrow[i], mx);
      if (m_new == kNegInf) {  // nothing visible yet in this row
        std::fill(s, s + n, 0.0f);
        continue;
      }
      const float alpha = mrow[i] == kNegInf ? 0.0f : std::exp(mrow[i] - m_new);
      lrow[i] = alpha * lrow[i] + ExpShiftSum(s, n, m_new);
      if (alpha != 1.0f) {
        for (int64_t d = 0; d < D; ++d) O[i * D + d] *= alpha;
        if (shaw_values)
          for (int64_t r = 0; r < rows; ++r) Pb[i * rows + r] *= alpha;
      }
      if (shaw_values)
        for (int64_t j = 0; j < n; ++j) Pb[i * rows + p.shaw->row(kpos[kt0 + j], qb.qpos[i])] += s[j];
      mrow[i] = m_new;
    }
    TileGemm({m, D, n, S, kAttnBlockK, 1, v + kt0 * p.v_st, p.v_st, O.data(), D, 1.0f, true});
  }
  if (shaw_values) TileGemm({m, D, rows, Pb.data(), rows, 1, p.shaw->a_v, D, O.data(), D, 1.0f, true});
  for (int64_t i = 0; i < m; ++i) {
    const int64_t t = pr.q0 + qb.i0 + i;
    float* out = o.out + pr.b * o.sb + t * o.st + h * o.sh;
    const float inv = lrow[i] > 0 ? 1.0f / lrow[i] : 0.0f;  // fully masked rows: zeros
    for (int64_t d = 0; d < D; ++d) out[d] = O[i * D + d] * inv;
    if (o.lse) o.lse[pr.b * o.l_sb + h * o.l_sh + t * o.l_st] = lrow[i] > 0 ? mrow[i] + std::log(lrow[i]) : kNegInf;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "src/cpu/parallel.h"

namespace posenc::cpu {
HWY_EXPORT(ForwardTask);

PackedTransposed pack_transposed(const AttnPlan& p, const float* x, int64_t sb, int64_t st, int64_t sh, int64_t min_queries) {
  PackedTransposed packed;
  packed.offset.assign(p.problems.size() + 1, 0);
  for (size_t i = 0; i < p.problems.size(); ++i)
    packed.offset[i + 1] = packed.offset[i] + (p.problems[i].nq > min_queries ? p.Hkv * p.D * p.problems[i].nk : 0);
  packed.data.resize(static_cast<size_t>(packed.offset.back()));
  parallel_for(static_cast<int64_t>(p.problems.size()) * p.Hkv, [&](int64_t t) {
    const int64_t problem = t / p.Hkv, hk = t % p.Hkv;
    const AttnProblem& pr = p.problems[problem];
    if (packed.offset[problem + 1] == packed.offset[problem]) return;
    float* dst = packed.data.data() + packed.offset[problem] + hk * p.D * pr.nk;
    for (int64_t j = 0; j < pr.nk; ++j) {
      const float* src = x + pr.b * sb + (pr.k0 + j) * st + hk * sh;
      for (int64_t d = 0; d < p.D; ++d) dst[d * pr.nk + j] = src[d];
    }
  });
  return packed;
}

void attention_forward(const AttnPlan& p, const AttnForwardOut& o) {
  const PackedTransposed kt = pack_transposed(p, p.k, p.k_sb, p.k_st, p.k_sh, kAttnRowDotQueries);
  // Tasks: (problem, head, query block), listed so the work of one thread stays local.
  struct Task {
    int64_t problem, head, block;
  };
  std::vector<Task> tasks;
  for (size_t i = 0; i < p.problems.size(); ++i)
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t b = 0; b * kAttnBlockQ < p.problems[i].nq; ++b) tasks.push_back({static_cast<int64_t>(i), h, b});
  parallel_for(static_cast<int64_t>(tasks.size()), [&](int64_t t) {
    const Task& task = tasks[t];
    HWY_DYNAMIC_DISPATCH(ForwardTask)(p, o, kt.head(p, task.problem, task.head / (p.H / p.Hkv)), task.problem, task.head,
                                      task.block);
  });
}
}  // namespace posenc::cpu
#endif  // HWY_ONCE
