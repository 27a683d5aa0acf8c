// src/cpu/attention.cc: fused attention forward (FlashAttention-style online softmax, Dao et al.
// 2022, Algorithm 1) with the positional terms added per tile. Per task, one (problem, head, query
// block):   for each key tile:  S = logits (attention_tile-inl.h);  m' = max(m, rowmax S);
//   P = exp(S - m');  l = e^(m - m') l + rowsum P;  O = e^(m - m') O + P V
//   (Shaw: Pb[i, r] = e^(m - m') Pb[i, r] + sum_{j: r_ij = r} P_ij, the probability per clipped
//   distance, and O += Pb a_v at the end)
// then out = O / l, lse = m + log l. Sinks (gpt-oss) start each row at m = sink_h, l = 1. Memory: O(block)
// per task, O(K * D) for the packed K^T.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/cpu/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "src/cpu/attention.h"
#include "src/cpu/attention_tile-inl.h"
#include "src/cpu/softmax-inl.h"

#include <algorithm>
#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace posenc::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The running state of one query block of one head: O (m x D), Shaw's Pb (m x rows), m and l.
struct OnlineSoftmax {
  QueryBlock qb;
  std::vector<float> O, Pb;
  float mrow[kAttentionBlockQ], lrow[kAttentionBlockQ];
};

// Heads [h0, h1) of one key/value group advance through the key tiles in lockstep, so a tile of
// K and V is read from memory once for all of them (decode with grouped-query attention); other
// tasks have one head.
void ForwardTask(const AttentionPlan& p, const AttentionForwardOut& o, const float* kt, int64_t problem,
                 int64_t h0, int64_t h1, int64_t block) {
  const AttentionProblem& pr = p.problems[problem];
  const int64_t D = p.D;
  const int64_t* kpos = p.k_pos.data() + pr.b * p.K + pr.k0;
  const int64_t rows = p.shaw ? p.shaw->rows : 0;
  const bool shaw_values = p.shaw && p.shaw->a_v;
  std::vector<OnlineSoftmax> heads(static_cast<size_t>(h1 - h0));
  for (int64_t h = h0; h < h1; ++h) {
    OnlineSoftmax& st = heads[h - h0];
    st.qb = MakeQueryBlock(p, problem, h, block * kAttentionBlockQ);
    PrepareQueryBlock(p, st.qb);
    st.O.assign(static_cast<size_t>(st.qb.m * D), 0.0f);
    st.Pb.assign(shaw_values ? static_cast<size_t>(st.qb.m * rows) : 0, 0.0f);
    // A sink is one more softmax entry with no value: the running max starts at it, with weight 1.
    std::fill(st.mrow, st.mrow + st.qb.m, p.sinks.empty() ? kNegInf : p.sinks[h]);
    std::fill(st.lrow, st.lrow + st.qb.m, p.sinks.empty() ? 0.0f : 1.0f);
  }
  const float* v = p.v.at(pr.b, pr.k0, heads[0].qb.hk);
  alignas(64) float S[kAttentionBlockQ * kAttentionBlockK];
  std::vector<float> scratch;

  for (int64_t kt0 = 0; kt0 < pr.nk; kt0 += kAttentionBlockK) {
    const int64_t n = std::min(kAttentionBlockK, pr.nk - kt0);
    if (!TileVisible(p, heads[0].qb, kpos + kt0, n)) continue;  // half the tiles under a causal mask
    for (OnlineSoftmax& st : heads) {
      const QueryBlock& qb = st.qb;
      const int64_t m = qb.m;
      TileLogits(p, qb, kt, pr.nk, kt0, n, S, scratch);
      for (int64_t i = 0; i < m; ++i) {
        float* s = S + i * kAttentionBlockK;
        float mx = kNegInf;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, s[j]);
        const float m_new = std::max(st.mrow[i], mx);
        if (m_new == kNegInf) {  // nothing visible yet in this row
          std::fill(s, s + n, 0.0f);
          continue;
        }
        const float alpha = st.mrow[i] == kNegInf ? 0.0f : std::exp(st.mrow[i] - m_new);
        st.lrow[i] = alpha * st.lrow[i] + ExpShiftSum(s, n, m_new);
        if (alpha != 1.0f) {
          for (int64_t d = 0; d < D; ++d) st.O[i * D + d] *= alpha;
          if (shaw_values)
            for (int64_t r = 0; r < rows; ++r) st.Pb[i * rows + r] *= alpha;
        }
        if (shaw_values)
          for (int64_t j = 0; j < n; ++j) st.Pb[i * rows + p.shaw->row(kpos[kt0 + j], qb.qpos[i])] += s[j];
        st.mrow[i] = m_new;
      }
      TileGemm({m, D, n, S, kAttentionBlockK, 1, v + kt0 * p.v.stride[1], p.v.stride[1], st.O.data(), D, 1.0f,
                true});
    }
  }
  for (OnlineSoftmax& st : heads) {
    const int64_t m = st.qb.m, h = st.qb.h;
    if (shaw_values)
      TileGemm({m, D, rows, st.Pb.data(), rows, 1, p.shaw->a_v, D, st.O.data(), D, 1.0f, true});
    for (int64_t i = 0; i < m; ++i) {
      const int64_t t = pr.q0 + st.qb.i0 + i;
      float* out = o.out.at(pr.b, t, h);
      const float inv = st.lrow[i] > 0 ? 1.0f / st.lrow[i] : 0.0f;  // fully masked rows: zeros
      for (int64_t d = 0; d < D; ++d) out[d] = st.O[i * D + d] * inv;
      if (!o.lse.empty()) o.lse(pr.b, h, t) = st.lrow[i] > 0 ? st.mrow[i] + std::log(st.lrow[i]) : kNegInf;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "src/cpu/parallel.h"

namespace posenc::cpu {
HWY_EXPORT(ForwardTask);

PackedTransposed pack_transposed(const AttentionPlan& p, Strided<const float, 3> x, int64_t min_queries) {
  PackedTransposed packed;
  packed.offset.assign(p.problems.size() + 1, 0);
  for (size_t i = 0; i < p.problems.size(); ++i)
    packed.offset[i + 1] =
        packed.offset[i] + (p.problems[i].nq > min_queries ? p.Hkv * p.D * p.problems[i].nk : 0);
  packed.data.resize(static_cast<size_t>(packed.offset.back()));
  parallel_for(static_cast<int64_t>(p.problems.size()) * p.Hkv, [&](int64_t t) {
    const int64_t problem = t / p.Hkv, hk = t % p.Hkv;
    const AttentionProblem& pr = p.problems[problem];
    if (packed.offset[problem + 1] == packed.offset[problem]) return;
    float* dst = packed.data.data() + packed.offset[problem] + hk * p.D * pr.nk;
    for (int64_t j = 0; j < pr.nk; ++j) {
      const float* src = x.at(pr.b, pr.k0 + j, hk);
      for (int64_t d = 0; d < p.D; ++d) dst[d * pr.nk + j] = src[d];
    }
  });
  return packed;
}

std::vector<AttentionTask> attention_tasks(const AttentionPlan& p, int64_t heads, bool by_keys) {
  std::vector<AttentionTask> tasks;
  for (size_t i = 0; i < p.problems.size(); ++i) {
    const int64_t n = by_keys ? p.problems[i].nk : p.problems[i].nq,
                  block = by_keys ? kAttentionBlockK : kAttentionBlockQ;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t b = 0; b * block < n; ++b) tasks.push_back({static_cast<int64_t>(i), h, b});
  }
  return tasks;
}

void attention_forward(const AttentionPlan& p, const AttentionForwardOut& o) {
  const PackedTransposed kt = pack_transposed(p, p.k, kRowDotQueries);
  // Tasks: (problem, head, query block); a decode problem (few queries, key rows read in place)
  // takes the heads of a key/value group together instead.
  const int64_t group = p.H / p.Hkv;
  std::vector<AttentionTask> tasks;
  for (const AttentionTask& t : attention_tasks(p, p.H, false)) {
    const bool decode = p.problems[t.problem].nq <= kRowDotQueries;
    if (!decode)
      tasks.push_back(t);
    else if (t.head % group == 0)
      tasks.push_back({t.problem, t.head, t.block, group});
  }
  parallel_for(static_cast<int64_t>(tasks.size()), [&](int64_t t) {
    const AttentionTask& task = tasks[t];
    HWY_DYNAMIC_DISPATCH(ForwardTask)
    (p, o, kt.head(p, task.problem, task.head / group), task.problem, task.head, task.head + task.heads,
     task.block);
  });
}

void accumulate_into(Strided<float, 4> dst, const float* src) {
  const auto [n0, n1, n2, n3] = dst.extent;
  parallel_chunks(n0 * n1, n2 * n3, [&](int64_t begin, int64_t end) {
    for (int64_t ab = begin; ab < end; ++ab)
      for (int64_t c = 0; c < n2; ++c)
        for (int64_t d = 0; d < n3; ++d) dst(ab / n1, ab % n1, c, d) += src[(ab * n2 + c) * n3 + d];
  });
}
}  // namespace posenc::cpu
#endif  // HWY_ONCE
