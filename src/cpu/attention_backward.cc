// src/cpu/attention_backward.cc: fused attention backward (FlashAttention-2, Dao 2023, Algorithm 2).
// Differentiating the forward  S = logits,  P = exp(S - lse),  out = P (V + shaw a_v[r]):
//   delta_i = dO_i . out_i                        (= sum_j P_ij dP_ij)
//   dP_ij   = dO_i . v_j  (+ dO_i . a_v[r_ij])
//   dS_ij   = P_ij (dP_ij - delta_i)              (the gradient of the logit, bias included)
//   dV_j    = sum_i P_ij dO_i          dK_j = scale sum_i dS_ij q_i        dQ_i = scale sum_j dS_ij k_j
//   positional parameters: sums of dS (and of P for a_v) over the pairs that share a distance.
// Two passes so that no two tasks write the same row (results do not depend on the thread count):
//   1. per (problem, kv head, key block): dK, dV over every query block of the heads of the group;
//   2. per (problem, head, query block): dQ and the per-query sums for the positional parameters
//      (Transformer-XL: per head over all blocks, since its d rproj is shared by all of them).
// Tiles are recomputed from lse with the forward's own TileLogits; memory stays O((Q + K) D).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/cpu/attention_backward.cc"
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

// What the backward of one query block needs beyond its logits.
struct BlockGrad {
  const float* dO;  // rows of grad_out, stride io.grad_out.stride[1]
  float lse[kAttentionBlockQ], delta[kAttentionBlockQ];
  std::vector<float> doa;  // Shaw values: (m, rows) dO_i . a_v[r]
};

BlockGrad MakeBlockGrad(const AttentionPlan& p, const AttentionBackwardIO& io,
                        const std::vector<float>& delta, const QueryBlock& qb) {
  const AttentionProblem& pr = p.problems[qb.problem];
  BlockGrad bg;
  const int64_t t0 = pr.q0 + qb.i0;
  bg.dO = io.grad_out.at(pr.b, t0, qb.h);
  for (int64_t i = 0; i < qb.m; ++i) {
    bg.lse[i] = io.lse(pr.b, qb.h, t0 + i);
    bg.delta[i] = delta[(pr.b * p.H + qb.h) * p.Q + t0 + i];
  }
  if (p.shaw && p.shaw->a_v) {
    bg.doa.resize(static_cast<size_t>(qb.m * p.shaw->rows));
    TileGemm({qb.m, p.shaw->rows, p.Dv, bg.dO, io.grad_out.stride[1], 1, p.shaw->a_v_t, p.shaw->rows,
              bg.doa.data(), p.shaw->rows, 1.0f, false});
  }
  return bg;
}

// One tile of the backward: P (probabilities) and dS (logit gradients), both m x n with row
// stride kAttentionBlockK. vt: V^T of the problem's key/value head (PackedTransposed::head).
// dcap: the softcap's derivative per logit (with a softcap), for SoftcapGrad.
void TileGrad(const AttentionPlan& p, const AttentionBackwardIO& io, const QueryBlock& qb,
              const BlockGrad& bg, const float* kt, const float* vt, int64_t kt0, int64_t n,
              float* HWY_RESTRICT P, float* HWY_RESTRICT dS, float* HWY_RESTRICT dcap,
              std::vector<float>& scratch) {
  const AttentionProblem& pr = p.problems[qb.problem];
  const int64_t* kpos = p.k_pos.data() + pr.b * p.K + pr.k0 + kt0;
  TileLogits(p, qb, kt, kt0, n, P, scratch, dcap);
  for (int64_t i = 0; i < qb.m; ++i) ProbsFromLse(P + i * kAttentionBlockK, n, bg.lse[i]);
  TileGemm({qb.m, n, p.Dv, bg.dO, io.grad_out.stride[1], 1, packed_tile(vt, p.Dv, kt0), kPackedTileStride, dS,
            kAttentionBlockK, 1.0f, false});  // dP = dO V^T
  for (int64_t i = 0; i < qb.m; ++i) {
    float* ds = dS + i * kAttentionBlockK;
    const float* pr_i = P + i * kAttentionBlockK;
    if (!bg.doa.empty()) {
      const float* doa = bg.doa.data() + i * p.shaw->rows;
      for (int64_t j = 0; j < n; ++j) ds[j] += doa[p.shaw->row(kpos[j], qb.qpos[i])];
    }
    for (int64_t j = 0; j < n; ++j) ds[j] = pr_i[j] * (ds[j] - bg.delta[i]);
  }
}

// forward: logit = cap(content) + bias  ->  dcontent = dlogit * cap'(content): dS becomes the
// gradient of the content logit (what dQ, dK, Shaw's a_k and Transformer-XL see). No-op without a
// softcap.
inline void SoftcapGrad(const AttentionPlan& p, int64_t m, int64_t n, const float* HWY_RESTRICT dcap,
                        float* HWY_RESTRICT dS) {
  if (p.softcap <= 0) return;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) dS[i * kAttentionBlockK + j] *= dcap[i * kAttentionBlockK + j];
}

// Pass 1: dK and dV of keys [kb * 64, kb * 64 + n) of one key/value head.
void KeyBlockTask(const AttentionPlan& p, const AttentionBackwardIO& io, const std::vector<float>& delta,
                  const float* kt, const float* vt, int64_t problem, int64_t hk, int64_t kb) {
  const AttentionProblem& pr = p.problems[problem];
  const int64_t D = p.D, Dv = p.Dv, kt0 = kb * kAttentionBlockK, n = std::min(kAttentionBlockK, pr.nk - kt0);
  const int64_t* kpos = p.k_pos.data() + pr.b * p.K + pr.k0 + kt0;
  alignas(64) float P[kAttentionBlockQ * kAttentionBlockK];
  alignas(64) float dS[kAttentionBlockQ * kAttentionBlockK];
  alignas(64) float dcap[kAttentionBlockQ * kAttentionBlockK];
  std::vector<float> dK(static_cast<size_t>(n * D), 0.0f), dV(static_cast<size_t>(n * Dv), 0.0f), scratch;
  // The block's rows of dO and q, the B of the two products below, copied with padded rows (rows H * D
  // apart, often a power of two, fall in a few L1 sets: padded_row_floats).
  const int64_t do_stride = padded_row_floats(Dv), q_stride = padded_row_floats(D);
  LineFloats dO_rows(static_cast<size_t>(kAttentionBlockQ * do_stride)),
      q_rows(static_cast<size_t>(kAttentionBlockQ * q_stride));
  const int64_t group = p.H / p.Hkv;
  for (int64_t h = hk * group; h < (hk + 1) * group; ++h)
    for (int64_t i0 = 0; i0 < pr.nq; i0 += kAttentionBlockQ) {
      QueryBlock qb = MakeQueryBlock(p, problem, h, i0);
      if (!TileVisible(p, qb, kpos, n)) continue;
      PrepareQueryBlock(p, qb);
      const BlockGrad bg = MakeBlockGrad(p, io, delta, qb);
      TileGrad(p, io, qb, bg, kt, vt, kt0, n, P, dS, dcap, scratch);
      SoftcapGrad(p, qb.m, n, dcap, dS);
      for (int64_t i = 0; i < qb.m; ++i) {
        std::copy_n(bg.dO + i * io.grad_out.stride[1], Dv, dO_rows.data() + i * do_stride);
        std::copy_n(qb.q + i * p.q.stride[1], D, q_rows.data() + i * q_stride);
      }
      TileGemm({n, Dv, qb.m, P, 1, kAttentionBlockK, dO_rows.data(), do_stride, dV.data(), Dv, 1.0f,
                true});  // dV += P^T dO
      TileGemm({n, D, qb.m, dS, 1, kAttentionBlockK, q_rows.data(), q_stride, dK.data(), D, p.scale,
                true});  // dK += s dS^T Q
    }
  for (int64_t j = 0; j < n; ++j) {
    const int64_t row = (pr.b * p.K + pr.k0 + kt0 + j) * p.Hkv + hk;
    std::copy(dK.begin() + j * D, dK.begin() + (j + 1) * D, io.dk + row * D);
    std::copy(dV.begin() + j * Dv, dV.begin() + (j + 1) * Dv, io.dv + row * Dv);
  }
}

// Pass 2: dQ of one query block of one head, and its positional sums.
void QueryBlockTask(const AttentionPlan& p, const AttentionBackwardIO& io, const std::vector<float>& delta,
                    const PackedTransposed& kt, const PackedTransposed& vt, const PackedRows& k_rows,
                    int64_t problem, int64_t h, int64_t i0, const QuerySums& sums) {
  const AttentionProblem& pr = p.problems[problem];
  const int64_t D = p.D;
  QueryBlock qb = MakeQueryBlock(p, problem, h, i0);
  PrepareQueryBlock(p, qb);
  const BlockGrad bg = MakeBlockGrad(p, io, delta, qb);
  const int64_t m = qb.m, rows = p.shaw ? p.shaw->rows : 0;
  const float* kt_h = kt.head(p, problem, qb.hk);
  const float* vt_h = vt.head(p, problem, qb.hk);
  const float* krows = k_rows.head(p, problem, qb.hk);  // null without keys
  const int64_t* kpos = p.k_pos.data() + pr.b * p.K + pr.k0;
  alignas(64) float P[kAttentionBlockQ * kAttentionBlockK];
  alignas(64) float dS[kAttentionBlockQ * kAttentionBlockK];
  alignas(64) float dcap[kAttentionBlockQ * kAttentionBlockK];
  std::vector<float> dQ(static_cast<size_t>(m * D), 0.0f),
      dQpos(p.transformer_xl ? static_cast<size_t>(m * D) : 0, 0.0f);
  std::vector<float> gk(static_cast<size_t>(m * rows), 0.0f), pb(static_cast<size_t>(m * rows), 0.0f), g,
      scratch;
  for (int64_t kt0 = 0; kt0 < pr.nk; kt0 += kAttentionBlockK) {
    const int64_t n = std::min(kAttentionBlockK, pr.nk - kt0);
    if (!TileVisible(p, qb, kpos + kt0, n)) continue;
    TileGrad(p, io, qb, bg, kt_h, vt_h, kt0, n, P, dS, dcap, scratch);
    if (sums.relative)  // the bias is added after the softcap: its gradient is dS itself
      for (int64_t i = 0; i < m; ++i) {
        const float* ds = dS + i * kAttentionBlockK;
        const int64_t qp = qb.qpos[i];
        if (sums.row_lut) {
          for (int64_t j = 0; j < n; ++j) sums.relative[sums.row_lut[kpos[kt0 + j] - qp - p.lut_lo]] += ds[j];
        } else {
          for (int64_t j = 0; j < n; ++j)
            sums.relative[relative_bias_row(*p.bias->rows_config, kpos[kt0 + j] - qp)] += ds[j];
        }
      }
    SoftcapGrad(p, m, n, dcap, dS);
    TileGemm({m, D, n, dS, kAttentionBlockK, 1, krows + kt0 * k_rows.stride, k_rows.stride, dQ.data(), D,
              p.scale, true});  // dQ += s dS K
    if (p.shaw)
      for (int64_t i = 0; i < m; ++i) {
        const float* ds = dS + i * kAttentionBlockK;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t r = p.shaw->row(kpos[kt0 + j], qb.qpos[i]);
          gk[i * rows + r] += ds[j];
          pb[i * rows + r] += P[i * kAttentionBlockK + j];
        }
      }
    if (p.transformer_xl) {  // G[i, c] = sum of dS over the keys at delta index c0 + c
      const TransformerXLTerms& xl = *p.transformer_xl;
      const DeltaSpan span = TileDeltaSpan(xl, qb, kpos + kt0, n);
      g.assign(static_cast<size_t>(m * span.w), 0.0f);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          g[i * span.w + (*xl.delta)(qb.qpos[i] - kpos[kt0 + j]) - span.c0] += dS[i * kAttentionBlockK + j];
      const float* rproj = xl.rproj + (qb.h * xl.n + span.c0) * D;
      TileGemm({m, D, span.w, g.data(), span.w, 1, rproj, D, dQpos.data(), D, p.scale, true});
      if (io.transformer_xl_rproj)
        TileGemm({span.w, D, m, g.data(), 1, span.w, qb.qv, p.H * D,
                  io.transformer_xl_rproj + (qb.h * xl.n + span.c0) * D, D, p.scale, true});
    }
  }
  if (p.transformer_xl) {  // du_h = sum_i dQ_i (content part), dv_h = sum_i dQpos_i
    for (int64_t i = 0; i < m; ++i)
      for (int64_t d = 0; d < D; ++d) {
        if (io.transformer_xl_u) io.transformer_xl_u[h * D + d] += dQ[i * D + d];
        if (io.transformer_xl_v) io.transformer_xl_v[h * D + d] += dQpos[i * D + d];
        dQ[i * D + d] += dQpos[i * D + d];
      }
  }
  if (p.shaw)
    TileGemm({m, D, rows, gk.data(), rows, 1, p.shaw->a_k, D, dQ.data(), D, p.scale, true});  // += s Gk a_k
  for (int64_t i = 0; i < m; ++i) {
    const int64_t bt = pr.b * p.Q + pr.q0 + i0 + i;
    std::copy(dQ.begin() + i * D, dQ.begin() + (i + 1) * D, io.dq + (bt * p.H + h) * D);
    if (sums.shaw_gk)
      std::copy(gk.begin() + i * rows, gk.begin() + (i + 1) * rows, sums.shaw_gk + (bt * p.H + h) * rows);
    if (sums.shaw_pb)
      std::copy(pb.begin() + i * rows, pb.begin() + (i + 1) * rows, sums.shaw_pb + (bt * p.H + h) * rows);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "src/cpu/parallel.h"

namespace posenc::cpu {
HWY_EXPORT(KeyBlockTask);
HWY_EXPORT(QueryBlockTask);

namespace {
// delta (B, H, Q) = rowsum(dO * out).
std::vector<float> output_dots(const AttentionPlan& p, const AttentionBackwardIO& io) {
  std::vector<float> delta(static_cast<size_t>(p.B * p.H * p.Q));
  parallel_chunks(p.B * p.Q, p.H * p.Dv, [&](int64_t begin, int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt) {
      const int64_t b = bt / p.Q, t = bt % p.Q;
      for (int64_t h = 0; h < p.H; ++h) {
        const float* o = io.out.at(b, t, h);
        const float* g = io.grad_out.at(b, t, h);
        double s = 0;
        for (int64_t d = 0; d < p.Dv; ++d) s += static_cast<double>(o[d]) * g[d];
        delta[(b * p.H + h) * p.Q + t] = static_cast<float>(s);
      }
    }
  });
  return delta;
}

// table (rows, D) += factor * sum over (token, head) of w[token, head, r] * x[token, head, :].
void reduce_rows(const AttentionPlan& p, const std::vector<float>& w, int64_t rows, Strided<const float, 3> x,
                 float factor, float* table) {
  parallel_for(rows, [&](int64_t r) {
    std::vector<double> acc(static_cast<size_t>(p.D), 0.0);
    for (int64_t bt = 0; bt < p.B * p.Q; ++bt)
      for (int64_t h = 0; h < p.H; ++h) {
        const double c = w[(bt * p.H + h) * rows + r];
        if (c == 0) continue;
        const float* xr = x.at(bt / p.Q, bt % p.Q, h);
        for (int64_t d = 0; d < p.D; ++d) acc[d] += c * xr[d];
      }
    for (int64_t d = 0; d < p.D; ++d) table[r * p.D + d] += static_cast<float>(factor * acc[d]);
  });
}
}  // namespace

void attention_backward(const AttentionPlan& p, const AttentionBackwardIO& io) {
  const std::vector<float> delta = output_dots(p, io);
  if (io.sinks)  // forward: the sink is a softmax entry without value: d sink_h = -sum_i p_sink,i delta_i
    for (int64_t h = 0; h < p.H; ++h) {
      double s = 0;
      for (int64_t b = 0; b < p.B; ++b)
        for (int64_t t = 0; t < p.Q; ++t)
          s += std::exp(static_cast<double>(p.sinks[h]) - io.lse(b, h, t)) * delta[(b * p.H + h) * p.Q + t];
      io.sinks[h] -= s;
    }
  const PackedTransposed kt = pack_transposed(p, p.k, p.D);
  const PackedTransposed vt = pack_transposed(p, p.v, p.Dv);
  const PackedRows k_rows = pack_rows(p, p.k, p.D, 1);  // dQ's B: key rows, padded

  // Pass 1: dK, dV, per (problem, key/value head, key block).
  const std::vector<AttentionTask> key_tasks = attention_tasks(p, p.Hkv, true);
  std::fill(io.dk, io.dk + p.B * p.K * p.Hkv * p.D, 0.0f);  // keys outside every problem stay 0
  std::fill(io.dv, io.dv + p.B * p.K * p.Hkv * p.Dv, 0.0f);
  parallel_for(static_cast<int64_t>(key_tasks.size()), [&](int64_t t) {
    const AttentionTask& task = key_tasks[t];
    HWY_DYNAMIC_DISPATCH(KeyBlockTask)
    (p, io, delta, kt.head(p, task.problem, task.head), vt.head(p, task.problem, task.head), task.problem,
     task.head, task.block);
  });

  // Pass 2: dQ and the per-query sums. Transformer-XL: one task per head (its d rproj is per head).
  const std::vector<AttentionTask> query_tasks = attention_tasks(p, p.H, false);
  const int64_t rows = p.shaw ? p.shaw->rows : 0;
  std::vector<float> shaw_gk(io.shaw_a_k ? static_cast<size_t>(p.B * p.Q * p.H * rows) : 0, 0.0f);
  std::vector<float> shaw_pb(io.shaw_a_v ? static_cast<size_t>(p.B * p.Q * p.H * rows) : 0, 0.0f);
  const int64_t table_rows = io.relative_table ? p.bias->rows_config->num_rows() : 0;
  std::vector<float> relative(static_cast<size_t>(table_rows) * query_tasks.size(), 0.0f);
  std::vector<int32_t> row_lut;
  if (io.relative_table && p.lut_dense)
    for (int64_t d = p.lut_lo; d < p.lut_lo + p.lut_size; ++d)
      row_lut.push_back(static_cast<int32_t>(relative_bias_row(*p.bias->rows_config, d)));
  std::fill(io.dq, io.dq + p.B * p.Q * p.H * p.D, 0.0f);
  auto run = [&](int64_t t) {
    const AttentionTask& task = query_tasks[t];
    QuerySums sums;
    sums.shaw_gk = shaw_gk.empty() ? nullptr : shaw_gk.data();
    sums.shaw_pb = shaw_pb.empty() ? nullptr : shaw_pb.data();
    sums.relative = table_rows ? relative.data() + t * table_rows : nullptr;
    sums.row_lut = row_lut.empty() ? nullptr : row_lut.data();
    HWY_DYNAMIC_DISPATCH(QueryBlockTask)
    (p, io, delta, kt, vt, k_rows, task.problem, task.head, task.block * kAttentionBlockQ, sums);
  };
  if (p.transformer_xl) {
    parallel_for(p.H, [&](int64_t h) {
      for (size_t t = 0; t < query_tasks.size(); ++t)
        if (query_tasks[t].head == h) run(static_cast<int64_t>(t));
    });
  } else {
    parallel_for(static_cast<int64_t>(query_tasks.size()), run);
  }

  // Parameter gradients, reduced in a fixed order.
  if (table_rows)
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t r = 0; r < table_rows; ++r) {
        double s = 0;
        for (size_t t = 0; t < query_tasks.size(); ++t)
          if (query_tasks[t].head == h) s += relative[t * table_rows + r];
        io.relative_table[r * p.H + h] += static_cast<float>(s);
      }
  if (io.shaw_a_k) reduce_rows(p, shaw_gk, rows, p.q, p.scale, io.shaw_a_k);
  if (io.shaw_a_v) reduce_rows(p, shaw_pb, rows, io.grad_out, 1.0f, io.shaw_a_v);
}
}  // namespace posenc::cpu
#endif  // HWY_ONCE
