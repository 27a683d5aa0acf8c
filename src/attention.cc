// src/attention.cc: fused attention front ends. AttentionSetup validates the inputs and builds the
// device plan (positions, rotated q/k, per-head bias lookup over the distances that occur, Shaw
// tables, Transformer-XL projections: O(H (Q + K) D) at most, never S x S); these functions check
// the outputs, run the backend and map its results back onto the caller's views.
#include "posenc/attention.h"

#include "check.h"
#include "src/attention_plan.h"
#include "src/cpu/parallel.h"

namespace posenc {
using detail::check_view;
using detail::fail;

namespace {
constexpr const char* kOp = "attention";

// dst (any strides, rank <= 4, f32) += src (contiguous, same shape).
void add_into(const TensorView& dst, const float* src) {
  Dims shape{}, stride{};
  for (int i = 0; i < 4; ++i) shape[i] = 1, stride[i] = 0;
  for (int i = 0; i < dst.rank; ++i) shape[4 - dst.rank + i] = dst.shape[i], stride[4 - dst.rank + i] = dst.strides[i];
  float* out = dst.ptr<float>();
  cpu::parallel_chunks(shape[0] * shape[1], shape[2] * shape[3], [&](int64_t begin, int64_t end) {
    for (int64_t ab = begin; ab < end; ++ab)
      for (int64_t c = 0; c < shape[2]; ++c)
        for (int64_t d = 0; d < shape[3]; ++d)
          out[(ab / shape[1]) * stride[0] + (ab % shape[1]) * stride[1] + c * stride[2] + d * stride[3]] +=
              src[(ab * shape[2] + c) * shape[3] + d];
  });
}

// An optional parameter gradient: empty, or of the parameter's shape (and only with its encoding).
bool wanted(const TensorView& g, const char* name, bool encoding_present, std::initializer_list<int64_t> shape) {
  if (g.data == nullptr) return false;
  if (!encoding_present) fail(kOp, "grads.", name, " is given but attention has no such encoding");
  check_view(kOp, std::string("grads.") + name, g, DType::f32, shape);
  return true;
}
}  // namespace

void attention_forward(const AttentionConfig& config, const AttentionInputs& in, TensorView out, TensorView lse) {
  detail::AttentionSetup setup(config, in);
  const cpu::AttnPlan& p = setup.plan;
  check_view(kOp, "out", out, DType::f32, {p.B, p.Q, p.H, p.D});
  detail::check_unit_last_stride(kOp, "out", out);
  if (lse.data != nullptr) check_view(kOp, "lse", lse, DType::f32, {p.B, p.H, p.Q});
  cpu::AttnForwardOut o;
  o.out = out.ptr<float>(), o.sb = out.strides[0], o.st = out.strides[1], o.sh = out.strides[2];
  if (lse.data != nullptr) o.lse = lse.ptr<float>(), o.l_sb = lse.strides[0], o.l_sh = lse.strides[1], o.l_st = lse.strides[2];
  cpu::attention_forward(p, o);
}

void attention_backward(const AttentionConfig& config, const AttentionInputs& in, ConstTensorView out, ConstTensorView lse,
                        ConstTensorView grad_out, const AttentionGrads& grads) {
  detail::AttentionSetup setup(config, in);
  const cpu::AttnPlan& p = setup.plan;
  const int64_t B = p.B, Q = p.Q, K = p.K, H = p.H, Hkv = p.Hkv, D = p.D;
  check_view(kOp, "out", out, DType::f32, {B, Q, H, D});
  check_view(kOp, "lse", lse, DType::f32, {B, H, Q});
  check_view(kOp, "grad_out", grad_out, DType::f32, {B, Q, H, D});
  check_view(kOp, "grads.q", grads.q, DType::f32, {B, Q, H, D});
  check_view(kOp, "grads.k", grads.k, DType::f32, {B, K, Hkv, D});
  check_view(kOp, "grads.v", grads.v, DType::f32, {B, K, Hkv, D});
  detail::check_unit_last_stride(kOp, "out", out);
  detail::check_unit_last_stride(kOp, "grad_out", grad_out);
  const bool relative = config.bias.kind == AttentionBias::Kind::relative;
  const int64_t table_rows = relative ? config.bias.relative.num_rows() : 0;
  const int64_t shaw_rows = config.shaw ? config.shaw->config.num_rows() : 0;
  const int64_t d_model = config.transformer_xl ? config.transformer_xl->config.d_model : 0;
  const bool want_table = wanted(grads.relative_table, "relative_table", relative, {table_rows, H});
  const bool want_a_k = wanted(grads.shaw_a_k, "shaw_a_k", config.shaw.has_value(), {shaw_rows, D});
  const bool want_a_v = wanted(grads.shaw_a_v, "shaw_a_v", config.shaw && config.shaw->a_v.data, {shaw_rows, D});
  const bool xl = config.transformer_xl.has_value();
  const bool want_u = wanted(grads.xl_u, "xl_u", xl, {H, D});
  const bool want_v = wanted(grads.xl_v, "xl_v", xl, {H, D});
  const bool want_w_r = wanted(grads.xl_w_r, "xl_w_r", xl, {H * D, d_model});

  std::vector<float> dq(static_cast<size_t>(B * Q * H * D)), dk(static_cast<size_t>(B * K * Hkv * D)), dv(dk.size());
  std::vector<float> d_table(static_cast<size_t>(table_rows * H), 0.0f), d_a_k(static_cast<size_t>(shaw_rows * D), 0.0f),
      d_a_v(d_a_k.size(), 0.0f), d_rproj(want_w_r ? static_cast<size_t>(H * (p.xl ? p.xl->n : 0) * D) : 0, 0.0f);
  std::vector<double> d_u(xl ? static_cast<size_t>(H * D) : 0, 0.0), d_v(d_u.size(), 0.0);
  cpu::AttnBackwardIO io;
  io.out = out.ptr<float>(), io.o_sb = out.strides[0], io.o_st = out.strides[1], io.o_sh = out.strides[2];
  io.lse = lse.ptr<float>(), io.l_sb = lse.strides[0], io.l_sh = lse.strides[1], io.l_st = lse.strides[2];
  io.grad_out = grad_out.ptr<float>(), io.g_sb = grad_out.strides[0], io.g_st = grad_out.strides[1], io.g_sh = grad_out.strides[2];
  io.dq = dq.data(), io.dk = dk.data(), io.dv = dv.data();
  if (want_table) io.relative_table = d_table.data();
  if (want_a_k) io.shaw_a_k = d_a_k.data();
  if (want_a_v) io.shaw_a_v = d_a_v.data();
  if (xl) io.xl_u = d_u.data(), io.xl_v = d_v.data();
  if (want_w_r) io.xl_rproj = d_rproj.data();
  cpu::attention_backward(p, io);

  // Back through RoPE: the gradient w.r.t. the unrotated q and k is the rotation by -theta.
  if (config.rope) {
    config.rope->backward(view(dq.data(), {B, Q, H, D}), view(setup.q_pos.data(), {B, Q}));
    config.rope->backward(view(dk.data(), {B, K, Hkv, D}), view(setup.k_pos.data(), {B, K}));
  }
  add_into(grads.q, dq.data());
  add_into(grads.k, dk.data());
  add_into(grads.v, dv.data());
  if (want_table) add_into(grads.relative_table, d_table.data());
  if (want_a_k) add_into(grads.shaw_a_k, d_a_k.data());
  if (want_a_v) add_into(grads.shaw_a_v, d_a_v.data());
  if (want_u || want_v) {
    const std::vector<float> u(d_u.begin(), d_u.end()), v(d_v.begin(), d_v.end());
    if (want_u) add_into(grads.xl_u, u.data());
    if (want_v) add_into(grads.xl_v, v.data());
  }
  if (want_w_r) {  // d W_R[h D + d, e] = sum_delta d rproj_h[delta, d] R_delta[e]
    const int64_t n = p.xl->n;
    std::vector<float> d_w(static_cast<size_t>(H * D * d_model));
    cpu::parallel_for(H * D, [&](int64_t hd) {
      const int64_t h = hd / D, d = hd % D;
      for (int64_t e = 0; e < d_model; ++e) {
        double s = 0;
        for (int64_t c = 0; c < n; ++c) s += static_cast<double>(d_rproj[(h * n + c) * D + d]) * setup.xl_sinusoids[c * d_model + e];
        d_w[hd * d_model + e] = static_cast<float>(s);
      }
    });
    add_into(grads.xl_w_r, d_w.data());
  }
}

}  // namespace posenc
