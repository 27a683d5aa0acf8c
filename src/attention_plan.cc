// src/attention_plan.cc: see attention_plan.h. Everything is validated here, before any output
// is touched, so a bad argument leaves the caller's buffers as they were.
#include "src/attention_plan.h"

#include <cmath>

#include "src/check.h"
#include "src/cpu/attention.h"
#include "src/cpu/bias.h"
#include "src/cpu/rope.h"
#include "src/cpu/shaw.h"
#include "src/cpu/transformer_xl.h"

namespace posenc::detail {
namespace {
constexpr const char* kOp = "attention";

std::vector<int64_t> cumulative(const ConstTensorView& cu, const char* name, int64_t total) {
  if (cu.rank != 1 || cu.shape[0] < 2)
    fail(kOp, name, " has shape ", cu.shape_string(), ", expected (N + 1) with N >= 1");
  std::vector<int64_t> c = gather_positions_1d(kOp, name, cu, cu.shape[0]);
  if (c.front() != 0) fail(kOp, name, "[0] = ", c.front(), " is invalid: must be 0");
  for (size_t i = 1; i < c.size(); ++i)
    if (c[i] < c[i - 1]) fail(kOp, name, " = ", to_string(c), " is invalid: must be non-decreasing");
  if (c.back() != total) fail(kOp, name, " ends at ", c.back(), ", expected the ", total, " packed tokens");
  return c;
}
}  // namespace

AttentionPlan::AttentionPlan(const AttentionConfig& cfg, const AttentionInputs& in) : config(cfg) {
  set_inputs(in);
  set_query_temperature();
  set_scores();
  set_bias();
  if (cfg.shaw && cfg.transformer_xl) fail(kOp, "shaw and transformer_xl are alternatives: give one of them");
  set_shaw();
  set_transformer_xl();
}

void AttentionPlan::set_inputs(const AttentionInputs& in) {
  check_view(kOp, "q", in.q, activation_dtype(in.q), {-1, -1, -1, -1});
  B = in.q.shape[0], Q = in.q.shape[1], H = in.q.shape[2], D = in.q.shape[3];
  check_view(kOp, "k", in.k, activation_dtype(in.k), {B, -1, -1, D});
  K = in.k.shape[1], Hkv = in.k.shape[2];
  check_view(kOp, "v", in.v, in.k.dtype, {B, K, Hkv, -1});
  Dv = in.v.shape[3];
  for (auto [name, v] : {std::pair<const char*, const ViewShape*>{"q", &in.q}, {"k", &in.k}, {"v", &in.v}})
    check_unit_last_stride(kOp, name, *v);
  if (D == 0) fail(kOp, "q has shape ", in.q.shape_string(), ": head_dim must be > 0");
  if (Dv == 0) fail(kOp, "v has shape ", in.v.shape_string(), ": its head_dim must be > 0");
  if (Hkv == 0 || H % Hkv != 0)
    fail(kOp, "q has ", H, " heads and k has ", Hkv,
         ": the query heads must be a multiple of the key/value heads");
  if (config.window < 0) fail_arg(kOp, "window", config.window, "must be >= 0 (0 = no window)");
  scale = attention_scale(config, D);
  causal = config.causal;
  window = config.window;

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
      fail(kOp, "cu_seqlens_q has ", cq.size() - 1, " sequences and cu_seqlens_k has ", ck.size() - 1,
           ": they must match");
    for (size_t s = 0; s + 1 < cq.size(); ++s) {
      const int64_t nq = cq[s + 1] - cq[s], nk = ck[s + 1] - ck[s];
      problems.push_back({0, cq[s], nq, ck[s], nk});
      for (int64_t j = 0; j < nk; ++j) k_pos[ck[s] + j] = j;
      for (int64_t i = 0; i < nq; ++i) q_pos[cq[s] + i] = nk - nq + i;
    }
  } else {
    for (int64_t b = 0; b < B; ++b) {
      problems.push_back({b, 0, Q, 0, K});
      for (int64_t j = 0; j < K; ++j) k_pos[b * K + j] = j;
      for (int64_t i = 0; i < Q; ++i) q_pos[b * Q + i] = K - Q + i;
    }
  }
  if (in.q_positions.data != nullptr) q_pos = gather_positions(kOp, in.q_positions, 1, B, Q);
  if (in.k_positions.data != nullptr) k_pos = gather_positions(kOp, in.k_positions, 1, B, K);

  set_storage(in);
  if (config.rotate_values && !config.rope)
    fail(kOp, "rotate_values = true needs rope: the values are rotated like the keys");
  if (config.rope) set_rope();
}

// fp32 rows of q (a widened copy for 16-bit storage); 16-bit keys and values stay as they are, read
// in tiles by the backend (widened there), unless RoPE needs rotated fp32 copies of the keys anyway.
void AttentionPlan::set_storage(const AttentionInputs& in) {
  storage = in.k.dtype;
  if (config.round_probabilities && storage != DType::bf16)
    fail(kOp, "round_probabilities = true needs bf16 keys and values (k and v are ", dtype_name(storage),
         "): it rounds P to bf16 for a bf16 P V");
  round_probabilities = config.round_probabilities;
  if (in.q.dtype == DType::f32) {
    q = strided<3>(in.q);
  } else {
    q_wide_.resize(static_cast<size_t>(B * Q * H * D));
    cpu::widen_rows(strided16<3>(in.q), in.q.dtype, D, q_wide_.data());
    q = {q_wide_.data(), {B, Q, H}, {Q * H * D, H * D, D}};
  }
  if (storage == DType::f32) {
    k = strided<3>(in.k), v = strided<3>(in.v);
    return;
  }
  v16 = strided16<3>(in.v);
  if (config.rope) {
    k_wide_.resize(static_cast<size_t>(B * K * Hkv * D));
    cpu::widen_rows(strided16<3>(in.k), storage, D, k_wide_.data());
    k = {k_wide_.data(), {B, K, Hkv}, {K * Hkv * D, Hkv * D, D}};
  } else {
    k16 = strided16<3>(in.k);
  }
}

void AttentionPlan::widen_keys_and_values() {
  if (storage == DType::f32) return;
  if (!k16.empty()) {
    k_wide_.resize(static_cast<size_t>(B * K * Hkv * D));
    cpu::widen_rows(k16, storage, D, k_wide_.data());
    k = {k_wide_.data(), {B, K, Hkv}, {K * Hkv * D, Hkv * D, D}};
  }
  v_wide_.resize(static_cast<size_t>(B * K * Hkv * Dv));
  cpu::widen_rows(v16, storage, Dv, v_wide_.data());
  v = {v_wide_.data(), {B, K, Hkv}, {K * Hkv * Dv, Hkv * Dv, Dv}};
  k16 = {}, v16 = {};
  storage = DType::f32;
  round_probabilities = false;  // the backward differentiates the unrounded softmax
}

// Copies of q and k with dims [rope_offset, rope_offset + rope.head_dim) of every head rotated.
void AttentionPlan::set_rope() {
  const RopeConfig& rc = config.rope->config();
  if (rc.num_position_streams() != 1)
    fail(kOp, "rope is multimodal (", rope_multimodal_name(rc.multimodal),
         "): apply it with Rope::forward_qk before attention, whose positions are one stream");
  if (config.rope_offset < 0 || config.rope_offset > D - rc.head_dim)
    fail(kOp, "rope_offset = ", config.rope_offset, " and rope.head_dim = ", rc.head_dim,
         " do not fit the head_dim of q, ", D, ": need 0 <= rope_offset <= ", D, " - ", rc.head_dim);
  rope_offset = config.rope_offset, rope_dim = rc.head_dim;
  rope_q = plan_rope(*config.rope, q_pos, std::nullopt);
  rope_k = plan_rope(*config.rope, k_pos, std::nullopt);
  q_buf_.resize(B * Q * H * D);
  k_buf_.resize(B * K * Hkv * D);
  const Strided<float, 3> q_rot{q_buf_.data(), {B, Q, H}, {Q * H * D, H * D, D}};
  const Strided<float, 3> k_rot{k_buf_.data(), {B, K, Hkv}, {K * Hkv * D, Hkv * D, D}};
  if (rope_dim != D) {  // the dims that pass, copied; then the range rotated in place
    cpu::copy_rows(q, D, q_buf_.data());
    cpu::copy_rows(k, D, k_buf_.data());
  }
  const HeadRows q_rows{rope_dim == D ? q : q_rot.columns_from(rope_offset), q_rot.columns_from(rope_offset),
                        rope_dim};
  const HeadRows k_rows{rope_dim == D ? k : k_rot.columns_from(rope_offset), k_rot.columns_from(rope_offset),
                        rope_dim};
  rope_apply(*rope_q, {B, Q}, &q_rows, 1, false);
  rope_apply(*rope_k, {B, K}, &k_rows, 1, false);
  q = q_rot, k = k_rot;
  if (config.rotate_values) set_rotated_values();
}

// DeepSeek-V4's values: a copy of v with the rope range rotated at the key positions (the output's range
// is rotated back at the query positions by the front end: rotate_output_rows).
void AttentionPlan::set_rotated_values() {
  if (storage != DType::f32)
    fail(kOp, "rotate_values = true needs fp32 k and v (they are ", dtype_name(storage), ")");
  if (rope_offset + rope_dim > Dv)
    fail(kOp, "rotate_values = true rotates dims [", rope_offset, ", ", rope_offset + rope_dim,
         ") of the values, whose head_dim is ", Dv);
  rotate_values = true;
  v_buf_.resize(static_cast<size_t>(B * K * Hkv * Dv));
  const Strided<float, 3> v_rot{v_buf_.data(), {B, K, Hkv}, {K * Hkv * Dv, Hkv * Dv, Dv}};
  cpu::copy_rows(v, Dv, v_buf_.data());
  const HeadRows rows{v_rot.columns_from(rope_offset), v_rot.columns_from(rope_offset), rope_dim};
  rope_apply(*rope_k, {B, K}, &rows, 1, false);
  v = v_rot;
}

void AttentionPlan::rotate_output_rows(const Strided<float, 3>& rows, bool back) const {
  const Strided<float, 3> range = rows.columns_from(rope_offset);
  const HeadRows r{range, range, rope_dim};
  rope_apply(*rope_q, {B, Q}, &r, 1, back);
}

void AttentionPlan::set_query_temperature() {
  const QueryTemperature& t = config.query_temperature;
  if (t.kind == QueryTemperature::Kind::none) return;
  if (config.transformer_xl) fail(kOp, "query_temperature and transformer_xl do not combine");
  if (!std::isfinite(t.scale) || std::abs(t.scale) > 1e6)
    fail_arg(kOp, "query_temperature.scale", t.scale, "must be finite, |scale| <= 1e6");
  if (!std::isfinite(t.floor_scale) || !(t.floor_scale >= 1))
    fail_arg(kOp, "query_temperature.floor_scale", t.floor_scale, "must be finite and >= 1");
  if (t.kind == QueryTemperature::Kind::qwen_logn && !(t.floor_scale > 1))
    fail_arg(kOp, "query_temperature.floor_scale", t.floor_scale, "must be > 1 for qwen_logn (log base)");
  q_temperature.resize(q_pos.size());
  for (size_t i = 0; i < q_pos.size(); ++i) {
    const double f = t.factor(q_pos[i]);
    if (!std::isfinite(f)) fail(kOp, "query temperature at position ", q_pos[i], " is ", f, ": not finite");
    q_temperature[i] = static_cast<float>(f);
  }
  std::vector<float> scaled(static_cast<size_t>(B * Q * H * D));
  cpu::scale_query_rows(q, D, q_temperature, scaled.data());
  q_buf_ = std::move(scaled);
  q = {q_buf_.data(), {B, Q, H}, {Q * H * D, H * D, D}};
}

void AttentionPlan::set_scores() {
  if (config.chunk < 0) fail_arg(kOp, "chunk", config.chunk, "must be >= 0 (0 = no chunking)");
  chunk = config.chunk;
  // Bounded below too: a softcap of 1e-45 would be 0 in fp32 (no softcap) while meaning a huge one.
  if (!std::isfinite(config.softcap) || config.softcap < 0 || (config.softcap > 0 && config.softcap < 1e-6) ||
      config.softcap > 1e30)
    fail_arg(kOp, "softcap", config.softcap, "must be 0 (no softcap) or in [1e-6, 1e30]");
  softcap = static_cast<float>(config.softcap);
  if (config.sinks.data != nullptr) {
    check_view(kOp, "sinks", config.sinks, DType::f32, {H});
    for (int64_t h = 0; h < H; ++h) {
      const float x = config.sinks.ptr<float>()[h * config.sinks.strides[0]];
      if (!std::isfinite(x)) fail(kOp, "sinks[", h, "] = ", x, " is invalid: must be finite");
      sinks.push_back(x);
    }
  }
}

void AttentionPlan::set_bias() {
  const AttentionBias& ab = config.bias;
  if (ab.kind == AttentionBias::Kind::alibi) {
    if (ab.alibi.heads != H)
      fail(kOp, "bias.alibi.heads = ", ab.alibi.heads, " differs from the ", H, " heads of q");
    slopes_ = alibi_slopes(ab.alibi);
    bias_.slopes = slopes_.data();
    bias_.symmetric = ab.alibi.symmetric;
  } else if (ab.kind == AttentionBias::Kind::relative) {
    validate(ab.relative);
    if (ab.relative.heads != H)
      fail(kOp, "bias.relative.heads = ", ab.relative.heads, " differs from the ", H, " heads of q");
    check_view(kOp, "bias.relative_table", ab.relative_table, DType::f32, {ab.relative.num_rows(), H});
    bias_.rows_config = &ab.relative;
    bias_.table = strided<2>(ab.relative_table);
  }
  if (ab.kind == AttentionBias::Kind::none) return;
  bias = &bias_;
  const DistanceRange range = distance_range(q_pos, k_pos);  // tabulated per head
  lut_dense = range.use_lut;
  if (range.use_lut) {
    lut_lo = range.lo;
    lut_size = range.size();
    lut = cpu::distance_lut(bias_, H, range);
  }
}

void AttentionPlan::set_shaw() {
  if (!config.shaw) return;
  const AttentionShaw& s = *config.shaw;
  validate(s.config);
  if (s.config.head_dim != D)
    fail(kOp, "shaw.config.head_dim = ", s.config.head_dim, " differs from the head_dim of q, ", D);
  const int64_t rows = s.config.num_rows();
  check_view(kOp, "shaw.a_k", s.a_k, DType::f32, {rows, D});
  if (s.a_v.data != nullptr) {
    if (Dv != D) fail(kOp, "shaw.a_v needs value heads of the q/k head_dim ", D, ", v has ", Dv);
    check_view(kOp, "shaw.a_v", s.a_v, DType::f32, {rows, D});
  }
  shaw_tables_.resize(static_cast<size_t>(4 * rows * D));
  float* t = shaw_tables_.data();
  cpu::shaw_pack_table(strided<2>(s.a_k), t, t + rows * D);
  shaw_.a_k = t, shaw_.a_k_t = t + rows * D;
  if (s.a_v.data != nullptr) {
    cpu::shaw_pack_table(strided<2>(s.a_v), t + 2 * rows * D, t + 3 * rows * D);
    shaw_.a_v = t + 2 * rows * D, shaw_.a_v_t = t + 3 * rows * D;
  }
  shaw_.max_distance = s.config.max_distance;
  shaw_.rows = rows;
  shaw = &shaw_;
}

void AttentionPlan::set_transformer_xl() {
  if (!config.transformer_xl) return;
  const AttentionTransformerXL& x = *config.transformer_xl;
  validate(x.config);
  if (x.config.heads != H)
    fail(kOp, "transformer_xl.config.heads = ", x.config.heads, " differs from the ", H, " heads of q");
  if (x.config.head_dim != D)
    fail(kOp, "transformer_xl.config.head_dim = ", x.config.head_dim, " differs from the head_dim of q, ", D);
  check_view(kOp, "transformer_xl.u", x.u, DType::f32, {H, D});
  check_view(kOp, "transformer_xl.v", x.v, DType::f32, {H, D});
  check_view(kOp, "transformer_xl.w_r", x.w_r, DType::f32, {H * D, x.config.d_model});
  // Content query q + u (replaces the plan's q) and position query q + v.
  std::vector<float> qu(static_cast<size_t>(B * Q * H * D));
  qv_.resize(qu.size());
  cpu::transformer_xl_shift_queries(q, D, strided<2>(x.u), strided<2>(x.v), qu.data(), qv_.data());
  q_buf_ = std::move(qu);
  q = {q_buf_.data(), {B, Q, H}, {Q * H * D, H * D, D}};
  // rproj_h[delta] = W_R,h R_delta for every distinct delta, in double, then stored f32 both ways.
  delta_ = std::make_unique<DeltaIndex>(q_pos, k_pos);
  transformer_xl_.sinusoids = cpu::transformer_xl_sinusoids(delta_->deltas, x.config.d_model, x.config.base);
  const int64_t n = delta_->size();
  const std::vector<double> rproj =
      cpu::transformer_xl_project(H, D, x.config.d_model, strided<2>(x.w_r), transformer_xl_.sinusoids, n);
  rproj_.assign(rproj.begin(), rproj.end());
  rproj_t_ = cpu::transformer_xl_transpose_projection(rproj_, H, n, D);
  transformer_xl_.qv = qv_.data();
  transformer_xl_.rproj = rproj_.data();
  transformer_xl_.rproj_t = rproj_t_.data();
  transformer_xl_.n = n;
  transformer_xl_.delta = delta_.get();
  transformer_xl = &transformer_xl_;
}

float attention_scale(const AttentionConfig& config, int64_t D) {
  const double s = config.scale.value_or(1.0 / std::sqrt(static_cast<double>(D)));
  check_finite(kOp, "scale", s);
  if (std::abs(s) > 1e6)
    fail_arg(kOp, "scale", s,
             "must be within [-1e6, 1e6] (the scores would overflow the softmax's fp32 range)");
  return static_cast<float>(s);
}

}  // namespace posenc::detail
