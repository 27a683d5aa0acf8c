// src/attention.cc: fused attention front end. Validates views, positions and packed lengths,
// rotates q and k once for RoPE, tabulates the positional bias per head over the distances that
// occur (O(H * (Q + K)), never S x S), and hands the tiles to the device backend.
#include "posenc/attention.h"

#include <cmath>

#include "check.h"
#include "cpu/attention.h"

namespace posenc {
using detail::check_view;
using detail::fail;

namespace {
constexpr const char* kOp = "attention";

std::vector<int64_t> cumulative(const ConstTensorView& cu, const char* name, int64_t total) {
  if (cu.rank != 1 || cu.shape[0] < 2) fail(kOp, name, " has shape ", cu.shape_string(), ", expected (N + 1) with N >= 1");
  std::vector<int64_t> c = detail::gather_positions_1d(kOp, name, cu, cu.shape[0]);
  if (c.front() != 0) fail(kOp, name, "[0] = ", c.front(), " is invalid: must be 0");
  for (size_t i = 1; i < c.size(); ++i)
    if (c[i] < c[i - 1]) fail(kOp, name, " = ", detail::to_string(c), " is invalid: must be non-decreasing");
  if (c.back() != total) fail(kOp, name, " ends at ", c.back(), ", expected the ", total, " packed tokens");
  return c;
}
}  // namespace

void attention_forward(const AttentionConfig& config, const AttentionInputs& in, TensorView out, TensorView lse) {
  check_view(kOp, "q", in.q, DType::f32, {-1, -1, -1, -1});
  const int64_t B = in.q.shape[0], Q = in.q.shape[1], H = in.q.shape[2], D = in.q.shape[3];
  check_view(kOp, "k", in.k, DType::f32, {B, -1, -1, D});
  const int64_t K = in.k.shape[1], Hkv = in.k.shape[2];
  check_view(kOp, "v", in.v, DType::f32, {B, K, Hkv, D});
  check_view(kOp, "out", out, DType::f32, {B, Q, H, D});
  for (auto [name, v] : {std::pair<const char*, const ViewShape*>{"q", &in.q}, {"k", &in.k}, {"v", &in.v}, {"out", &out}})
    detail::check_unit_last_stride(kOp, name, *v);
  if (D == 0) fail(kOp, "q has shape ", in.q.shape_string(), ": head_dim must be > 0");
  if (Hkv == 0 || H % Hkv != 0)
    fail(kOp, "q has ", H, " heads and k has ", Hkv, ": the query heads must be a multiple of the key/value heads");
  if (lse.data != nullptr) check_view(kOp, "lse", lse, DType::f32, {B, H, Q});
  if (config.window < 0) detail::fail_arg(kOp, "window", config.window, "must be >= 0 (0 = no window)");
  const double scale = config.scale.value_or(1.0 / std::sqrt(static_cast<double>(D)));
  detail::check_finite(kOp, "scale", scale);

  cpu::AttnPlan plan;
  plan.H = H, plan.Hkv = Hkv, plan.D = D, plan.Q = Q, plan.K = K;
  plan.scale = static_cast<float>(scale);
  plan.causal = config.causal;
  plan.window = config.window;

  // Problems and positions: batch rows, or packed sequences with positions restarting in each.
  const bool packed = in.cu_seqlens_q.data != nullptr || in.cu_seqlens_k.data != nullptr;
  std::vector<int64_t> q_pos(B * Q), k_pos(B * K);
  if (packed) {
    if (in.cu_seqlens_q.data == nullptr || in.cu_seqlens_k.data == nullptr)
      fail(kOp, "packed sequences need both cu_seqlens_q and cu_seqlens_k");
    if (B != 1) fail(kOp, "q has shape ", in.q.shape_string(), ": packed sequences need batch 1");
    const std::vector<int64_t> cq = cumulative(in.cu_seqlens_q, "cu_seqlens_q", Q);
    const std::vector<int64_t> ck = cumulative(in.cu_seqlens_k, "cu_seqlens_k", K);
    if (cq.size() != ck.size())
      fail(kOp, "cu_seqlens_q has ", cq.size() - 1, " sequences and cu_seqlens_k has ", ck.size() - 1, ": they must match");
    for (size_t s = 0; s + 1 < cq.size(); ++s) {
      const int64_t nq = cq[s + 1] - cq[s], nk = ck[s + 1] - ck[s];
      plan.problems.push_back({0, cq[s], nq, ck[s], nk});
      for (int64_t j = 0; j < nk; ++j) k_pos[ck[s] + j] = j;
      for (int64_t i = 0; i < nq; ++i) q_pos[cq[s] + i] = nk - nq + i;
    }
  } else {
    for (int64_t b = 0; b < B; ++b) {
      plan.problems.push_back({b, 0, Q, 0, K});
      for (int64_t j = 0; j < K; ++j) k_pos[b * K + j] = j;
      for (int64_t i = 0; i < Q; ++i) q_pos[b * Q + i] = K - Q + i;
    }
  }
  if (in.q_positions.data != nullptr) q_pos = detail::gather_positions(kOp, in.q_positions, 1, B, Q);
  if (in.k_positions.data != nullptr) k_pos = detail::gather_positions(kOp, in.k_positions, 1, B, K);
  detail::check_position_range(kOp, q_pos);
  detail::check_position_range(kOp, k_pos);
  plan.q_pos = q_pos.data();
  plan.k_pos = k_pos.data();

  // RoPE: rotate copies of q and k once.
  std::vector<float> q_rot, k_rot;
  plan.q = in.q.ptr<float>(), plan.q_sb = in.q.strides[0], plan.q_st = in.q.strides[1], plan.q_sh = in.q.strides[2];
  plan.k = in.k.ptr<float>(), plan.k_sb = in.k.strides[0], plan.k_st = in.k.strides[1], plan.k_sh = in.k.strides[2];
  if (config.rope) {
    const RopeConfig& rc = config.rope->config();
    if (rc.num_position_streams() != 1)
      fail(kOp, "rope is multimodal (", rope_multimodal_name(rc.multimodal),
           "): apply it with Rope::forward_qk before attention, whose positions are one stream");
    if (rc.head_dim != D) fail(kOp, "rope.head_dim = ", rc.head_dim, " differs from the head_dim of q, ", D);
    q_rot.resize(B * Q * H * D);
    k_rot.resize(B * K * Hkv * D);
    config.rope->forward(in.q, view(q_rot.data(), {B, Q, H, D}), view(q_pos.data(), {B, Q}));
    config.rope->forward(in.k, view(k_rot.data(), {B, K, Hkv, D}), view(k_pos.data(), {B, K}));
    plan.q = q_rot.data(), plan.q_sb = Q * H * D, plan.q_st = H * D, plan.q_sh = D;
    plan.k = k_rot.data(), plan.k_sb = K * Hkv * D, plan.k_st = Hkv * D, plan.k_sh = D;
  }
  plan.v = in.v.ptr<float>(), plan.v_sb = in.v.strides[0], plan.v_st = in.v.strides[1], plan.v_sh = in.v.strides[2];
  plan.out = out.ptr<float>(), plan.o_sb = out.strides[0], plan.o_st = out.strides[1], plan.o_sh = out.strides[2];
  if (lse.data != nullptr) plan.lse = lse.ptr<float>(), plan.l_sb = lse.strides[0], plan.l_sh = lse.strides[1], plan.l_st = lse.strides[2];

  // The bias, tabulated per head over the distances that occur.
  cpu::DistanceBias bias;
  std::vector<double> slopes;
  const AttentionBias& ab = config.bias;
  if (ab.kind == AttentionBias::Kind::alibi) {
    if (ab.alibi.heads != H) fail(kOp, "bias.alibi.heads = ", ab.alibi.heads, " differs from the ", H, " heads of q");
    slopes = alibi_slopes(ab.alibi);
    bias.slopes = slopes.data();
    bias.symmetric = ab.alibi.symmetric;
  } else if (ab.kind == AttentionBias::Kind::relative) {
    validate(ab.relative);
    if (ab.relative.heads != H) fail(kOp, "bias.relative.heads = ", ab.relative.heads, " differs from the ", H, " heads of q");
    check_view(kOp, "bias.relative_table", ab.relative_table, DType::f32, {ab.relative.num_rows(), H});
    bias.rows_config = &ab.relative;
    bias.table = ab.relative_table.ptr<float>();
    bias.table_stride_row = ab.relative_table.strides[0];
    bias.table_stride_head = ab.relative_table.strides[1];
  }
  if (ab.kind != AttentionBias::Kind::none) {
    plan.bias = &bias;
    const cpu::DistanceRange range = cpu::distance_range(q_pos, k_pos);
    plan.lut_dense = range.use_lut;
    if (range.use_lut) {
      plan.lut_lo = range.lo;
      plan.lut_size = range.size();
      plan.lut = cpu::distance_lut(bias, H, range);
    }
  }
  cpu::attention_forward(plan);
}

}  // namespace posenc
