// src/attention_plan.cc: see attention_plan.h. Everything is validated here, before any output
// is touched, so a bad argument leaves the caller's buffers as they were.
#include "src/attention_plan.h"

#include <cmath>

#include "check.h"

namespace posenc::detail {
namespace {
constexpr const char* kOp = "attention";

std::vector<int64_t> cumulative(const ConstTensorView& cu, const char* name, int64_t total) {
  if (cu.rank != 1 || cu.shape[0] < 2) fail(kOp, name, " has shape ", cu.shape_string(), ", expected (N + 1) with N >= 1");
  std::vector<int64_t> c = gather_positions_1d(kOp, name, cu, cu.shape[0]);
  if (c.front() != 0) fail(kOp, name, "[0] = ", c.front(), " is invalid: must be 0");
  for (size_t i = 1; i < c.size(); ++i)
    if (c[i] < c[i - 1]) fail(kOp, name, " = ", to_string(c), " is invalid: must be non-decreasing");
  if (c.back() != total) fail(kOp, name, " ends at ", c.back(), ", expected the ", total, " packed tokens");
  return c;
}

// A (rows, cols) f32 view copied row-major into dst, and optionally transposed into dst_t.
void copy_table(const ConstTensorView& t, float* dst, float* dst_t) {
  const int64_t rows = t.shape[0], cols = t.shape[1];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float x = t.ptr<float>()[r * t.strides[0] + c * t.strides[1]];
      dst[r * cols + c] = x;
      if (dst_t) dst_t[c * rows + r] = x;
    }
}
}  // namespace

AttentionSetup::AttentionSetup(const AttentionConfig& cfg, const AttentionInputs& in) : config(cfg) {
  set_inputs(in);
  set_bias();
  if (cfg.shaw && cfg.transformer_xl) fail(kOp, "shaw and transformer_xl are alternatives: give one of them");
  set_shaw();
  set_transformer_xl();
}

void AttentionSetup::set_inputs(const AttentionInputs& in) {
  check_view(kOp, "q", in.q, DType::f32, {-1, -1, -1, -1});
  const int64_t B = in.q.shape[0], Q = in.q.shape[1], H = in.q.shape[2], D = in.q.shape[3];
  check_view(kOp, "k", in.k, DType::f32, {B, -1, -1, D});
  const int64_t K = in.k.shape[1], Hkv = in.k.shape[2];
  check_view(kOp, "v", in.v, DType::f32, {B, K, Hkv, D});
  for (auto [name, v] : {std::pair<const char*, const ViewShape*>{"q", &in.q}, {"k", &in.k}, {"v", &in.v}})
    check_unit_last_stride(kOp, name, *v);
  if (D == 0) fail(kOp, "q has shape ", in.q.shape_string(), ": head_dim must be > 0");
  if (Hkv == 0 || H % Hkv != 0)
    fail(kOp, "q has ", H, " heads and k has ", Hkv, ": the query heads must be a multiple of the key/value heads");
  if (config.window < 0) fail_arg(kOp, "window", config.window, "must be >= 0 (0 = no window)");
  const double scale = config.scale.value_or(1.0 / std::sqrt(static_cast<double>(D)));
  check_finite(kOp, "scale", scale);
  plan.B = B, plan.H = H, plan.Hkv = Hkv, plan.D = D, plan.Q = Q, plan.K = K;
  plan.scale = static_cast<float>(scale);
  plan.causal = config.causal;
  plan.window = config.window;

  // Problems and positions: batch rows, or packed sequences with positions restarting in each.
  const bool packed = in.cu_seqlens_q.data != nullptr || in.cu_seqlens_k.data != nullptr;
  q_pos.resize(B * Q), k_pos.resize(B * K);
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
  if (in.q_positions.data != nullptr) q_pos = gather_positions(kOp, in.q_positions, 1, B, Q);
  if (in.k_positions.data != nullptr) k_pos = gather_positions(kOp, in.k_positions, 1, B, K);
  check_position_range(kOp, q_pos);
  check_position_range(kOp, k_pos);
  plan.q_pos = q_pos.data();
  plan.k_pos = k_pos.data();

  plan.q = in.q.ptr<float>(), plan.q_sb = in.q.strides[0], plan.q_st = in.q.strides[1], plan.q_sh = in.q.strides[2];
  plan.k = in.k.ptr<float>(), plan.k_sb = in.k.strides[0], plan.k_st = in.k.strides[1], plan.k_sh = in.k.strides[2];
  plan.v = in.v.ptr<float>(), plan.v_sb = in.v.strides[0], plan.v_st = in.v.strides[1], plan.v_sh = in.v.strides[2];
  if (config.rope) {  // rotate copies of q and k once
    const RopeConfig& rc = config.rope->config();
    if (rc.num_position_streams() != 1)
      fail(kOp, "rope is multimodal (", rope_multimodal_name(rc.multimodal),
           "): apply it with Rope::forward_qk before attention, whose positions are one stream");
    if (rc.head_dim != D) fail(kOp, "rope.head_dim = ", rc.head_dim, " differs from the head_dim of q, ", D);
    q_buf_.resize(B * Q * H * D);
    k_buf_.resize(B * K * Hkv * D);
    config.rope->forward(in.q, view(q_buf_.data(), {B, Q, H, D}), view(q_pos.data(), {B, Q}));
    config.rope->forward(in.k, view(k_buf_.data(), {B, K, Hkv, D}), view(k_pos.data(), {B, K}));
    plan.q = q_buf_.data(), plan.q_sb = Q * H * D, plan.q_st = H * D, plan.q_sh = D;
    plan.k = k_buf_.data(), plan.k_sb = K * Hkv * D, plan.k_st = Hkv * D, plan.k_sh = D;
  }
}

void AttentionSetup::set_bias() {
  const AttentionBias& ab = config.bias;
  const int64_t H = plan.H;
  if (ab.kind == AttentionBias::Kind::alibi) {
    if (ab.alibi.heads != H) fail(kOp, "bias.alibi.heads = ", ab.alibi.heads, " differs from the ", H, " heads of q");
    slopes_ = alibi_slopes(ab.alibi);
    bias_.slopes = slopes_.data();
    bias_.symmetric = ab.alibi.symmetric;
  } else if (ab.kind == AttentionBias::Kind::relative) {
    validate(ab.relative);
    if (ab.relative.heads != H) fail(kOp, "bias.relative.heads = ", ab.relative.heads, " differs from the ", H, " heads of q");
    check_view(kOp, "bias.relative_table", ab.relative_table, DType::f32, {ab.relative.num_rows(), H});
    bias_.rows_config = &ab.relative;
    bias_.table = ab.relative_table.ptr<float>();
    bias_.table_stride_row = ab.relative_table.strides[0];
    bias_.table_stride_head = ab.relative_table.strides[1];
  }
  if (ab.kind == AttentionBias::Kind::none) return;
  plan.bias = &bias_;
  const cpu::DistanceRange range = cpu::distance_range(q_pos, k_pos);  // tabulated per head
  plan.lut_dense = range.use_lut;
  if (range.use_lut) {
    plan.lut_lo = range.lo;
    plan.lut_size = range.size();
    plan.lut = cpu::distance_lut(bias_, H, range);
  }
}

void AttentionSetup::set_shaw() {
  if (!config.shaw) return;
  const AttentionShaw& s = *config.shaw;
  validate(s.config);
  if (s.config.head_dim != plan.D) fail(kOp, "shaw.config.head_dim = ", s.config.head_dim, " differs from the head_dim of q, ", plan.D);
  const int64_t rows = s.config.num_rows(), D = plan.D;
  check_view(kOp, "shaw.a_k", s.a_k, DType::f32, {rows, D});
  if (s.a_v.data != nullptr) check_view(kOp, "shaw.a_v", s.a_v, DType::f32, {rows, D});
  shaw_tables_.resize(static_cast<size_t>(4 * rows * D));
  float* t = shaw_tables_.data();
  copy_table(s.a_k, t, t + rows * D);
  shaw_.a_k = t, shaw_.a_k_t = t + rows * D;
  if (s.a_v.data != nullptr) {
    copy_table(s.a_v, t + 2 * rows * D, t + 3 * rows * D);
    shaw_.a_v = t + 2 * rows * D, shaw_.a_v_t = t + 3 * rows * D;
  }
  shaw_.max_distance = s.config.max_distance;
  shaw_.rows = rows;
  plan.shaw = &shaw_;
}

void AttentionSetup::set_transformer_xl() {
  if (!config.transformer_xl) return;
  const AttentionTransformerXL& x = *config.transformer_xl;
  validate(x.config);
  const int64_t B = plan.B, Q = plan.Q, H = plan.H, D = plan.D;
  if (x.config.heads != H) fail(kOp, "transformer_xl.config.heads = ", x.config.heads, " differs from the ", H, " heads of q");
  if (x.config.head_dim != D)
    fail(kOp, "transformer_xl.config.head_dim = ", x.config.head_dim, " differs from the head_dim of q, ", D);
  check_view(kOp, "transformer_xl.u", x.u, DType::f32, {H, D});
  check_view(kOp, "transformer_xl.v", x.v, DType::f32, {H, D});
  check_view(kOp, "transformer_xl.w_r", x.w_r, DType::f32, {H * D, x.config.d_model});
  // Content query q + u (replaces the plan's q) and position query q + v.
  std::vector<float> qu(static_cast<size_t>(B * Q * H * D));
  xl_qv_.resize(qu.size());
  for (int64_t bt = 0; bt < B * Q; ++bt)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) {
        const float q = plan.q[(bt / Q) * plan.q_sb + (bt % Q) * plan.q_st + h * plan.q_sh + d];
        qu[(bt * H + h) * D + d] = q + x.u.ptr<float>()[h * x.u.strides[0] + d * x.u.strides[1]];
        xl_qv_[(bt * H + h) * D + d] = q + x.v.ptr<float>()[h * x.v.strides[0] + d * x.v.strides[1]];
      }
  q_buf_ = std::move(qu);
  plan.q = q_buf_.data(), plan.q_sb = Q * H * D, plan.q_st = H * D, plan.q_sh = D;
  // rproj_h[delta] = W_R,h R_delta for every distinct delta, in double, then stored f32 both ways.
  xl_delta_ = std::make_unique<cpu::DeltaIndex>(q_pos, k_pos);
  const cpu::XLShapes sh{B, H, Q, plan.K, D, x.config.d_model, x.config.base, &q_pos, &k_pos};
  xl_sinusoids = cpu::xl_sinusoids(sh, *xl_delta_);
  const int64_t n = xl_delta_->size();
  const std::vector<double> rproj = cpu::xl_project(sh, cpu::table_of(x.w_r), xl_sinusoids, n);
  xl_rproj_.assign(rproj.begin(), rproj.end());
  xl_rproj_t_.resize(rproj.size());
  for (int64_t h = 0; h < H; ++h)
    for (int64_t c = 0; c < n; ++c)
      for (int64_t d = 0; d < D; ++d) xl_rproj_t_[(h * D + d) * n + c] = xl_rproj_[(h * n + c) * D + d];
  xl_.qv = xl_qv_.data();
  xl_.rproj = xl_rproj_.data();
  xl_.rproj_t = xl_rproj_t_.data();
  xl_.n = n;
  xl_.delta = xl_delta_.get();
  plan.xl = &xl_;
}

}  // namespace posenc::detail
