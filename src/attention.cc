// src/attention.cc: fused attention front ends. The AttentionPlan validates the inputs and holds
// what the kernels read; these functions check the outputs, run the backend and map its results
// back onto the caller's views.
#include "posenc/attention.h"

#include <cmath>

#include "src/attention_cuda.h"
#include "src/attention_plan.h"
#include "src/check.h"
#include "src/cpu/attention.h"
#include "src/cpu/bf16_dot.h"
#include "src/cpu/transformer_xl.h"
#include "src/query_temperature.h"

namespace posenc {
using detail::check_view;

double QueryTemperature::factor(int64_t p) const {
  return detail::query_temperature_factor(kind, scale, floor_scale, p);
}

const char* query_temperature_name(QueryTemperature::Kind kind) {
  switch (kind) {
    case QueryTemperature::Kind::none:
      return "none";
    case QueryTemperature::Kind::llama4:
      return "llama4";
    case QueryTemperature::Kind::ministral3:
      return "ministral3";
    case QueryTemperature::Kind::qwen_logn:
      return "qwen_logn";
  }
  return "?";
}

using detail::fail;

namespace {
constexpr const char* kOp = "attention";

// An optional parameter gradient: empty, or of the parameter's shape (and only with its encoding).
bool wanted(const TensorView& g, const char* name, bool encoding_present,
            std::initializer_list<int64_t> shape) {
  if (g.data == nullptr) return false;
  if (!encoding_present) fail(kOp, "grads.", name, " is given but attention has no such encoding");
  check_view(kOp, std::string("grads.") + name, g, DType::f32, shape);
  return true;
}

// A validated view of rank <= 4 as (A, B, C, D), leading dimensions of extent 1.
Strided<float, 4> as_rank4(const TensorView& v) {
  Strided<float, 4> s;
  s.data = v.ptr<float>();
  for (int i = 0; i < 4; ++i) s.extent[i] = 1, s.stride[i] = 0;
  for (int i = 0; i < v.rank; ++i)
    s.extent[4 - v.rank + i] = v.shape[i], s.stride[4 - v.rank + i] = v.strides[i];
  return s;
}

// fp32 rows (B, Q, H) of a checked (B, Q, H, dim) view: its own for fp32, else widened into `wide`.
Strided<const float, 3> rows_f32(const ConstTensorView& x, int64_t dim, std::vector<float>& wide) {
  if (detail::activation_dtype(x) == DType::f32) return strided<3>(x);
  const int64_t B = x.shape[0], T = x.shape[1], H = x.shape[2];
  wide.resize(static_cast<size_t>(B * T * H * dim));
  cpu::widen_rows(strided16<3>(x), x.dtype, dim, wide.data());
  return {wide.data(), {B, T, H}, {T * H * dim, H * dim, dim}};
}

// grad (rank 4, fp32 or 16-bit) += g (contiguous fp32).
// grad += g, or grad = g (add false).
void accumulate_gradient(const TensorView& grad, const float* g, bool add) {
  if (detail::activation_dtype(grad) == DType::f32) {
    cpu::accumulate_into(as_rank4(grad), g, add);
    return;
  }
  Strided<uint16_t, 4> s = strided16<4>(grad);
  cpu::accumulate_into(s, grad.dtype, g, add);
}
}  // namespace

void detail::attention_forward_planned(const AttentionPlan& plan, TensorView out, TensorView lse) {
  const DType out_dtype = detail::activation_dtype(out);
  check_view(kOp, "out", out, out_dtype, {plan.B, plan.Q, plan.H, plan.Dv});
  detail::check_unit_last_stride(kOp, "out", out);
  if (lse.data != nullptr) check_view(kOp, "lse", lse, DType::f32, {plan.B, plan.H, plan.Q});
  cpu::AttentionForwardOut o;
  o.out_dtype = out_dtype;
  if (out_dtype == DType::f32)
    o.out = strided<3>(out);
  else
    o.out16 = strided16<3>(out);
  if (lse.data != nullptr) o.lse = strided<3>(lse);
  if (plan.rotate_values && out_dtype != DType::f32)
    fail(kOp, "rotate_values = true needs an fp32 out (it is ", dtype_name(out_dtype),
         "): the output is rotated back before any rounding");
  cpu::attention_forward(plan, o);
  if (plan.rotate_values) plan.rotate_output_rows(strided<3>(out), true);  // o_t = R(-t) sum p R(s) v
}

void attention_forward(const AttentionConfig& config, const AttentionInputs& in, TensorView out,
                       TensorView lse) {
  if (in.q.device == Device::cuda) {
    detail::attention_forward_cuda(config, in, out, lse);
    return;
  }
  detail::attention_forward_planned(detail::AttentionPlan(config, in), out, lse);
}

void attention_backward(const AttentionConfig& config, const AttentionInputs& in, ConstTensorView out,
                        ConstTensorView lse, ConstTensorView grad_out, const AttentionGrads& grads) {
  if (in.q.device == Device::cuda) {
    detail::attention_backward_cuda(config, in, out, lse, grad_out, grads);
    return;
  }
  // 16-bit storage (any of q, k and v, out, grad_out, and each of grads.q, grads.k, grads.v): the
  // inputs are widened once to fp32 (the backward is compute-bound and reads them several times),
  // the gradients computed in fp32 and rounded once as they are added into 16-bit views.
  detail::AttentionPlan p(config, in);
  p.widen_keys_and_values();
  const int64_t B = p.B, Q = p.Q, K = p.K, H = p.H, Hkv = p.Hkv, D = p.D, Dv = p.Dv;
  check_view(kOp, "out", out, detail::activation_dtype(out), {B, Q, H, Dv});
  check_view(kOp, "lse", lse, DType::f32, {B, H, Q});
  check_view(kOp, "grad_out", grad_out, detail::activation_dtype(grad_out), {B, Q, H, Dv});
  check_view(kOp, "grads.q", grads.q, detail::activation_dtype(grads.q), {B, Q, H, D});
  check_view(kOp, "grads.k", grads.k, detail::activation_dtype(grads.k), {B, K, Hkv, D});
  check_view(kOp, "grads.v", grads.v, detail::activation_dtype(grads.v), {B, K, Hkv, Dv});
  detail::check_unit_last_stride(kOp, "out", out);
  detail::check_unit_last_stride(kOp, "grad_out", grad_out);
  for (auto [name, v] : {std::pair<const char*, const ViewShape*>{"grads.q", &grads.q},
                         {"grads.k", &grads.k},
                         {"grads.v", &grads.v}})
    if (detail::activation_dtype(*v) != DType::f32)
      detail::check_unit_last_stride(kOp, name, *v);  // 16-bit rows
  std::vector<float> out_wide, grad_out_wide;
  Strided<const float, 3> out_rows = rows_f32(out, Dv, out_wide),
                          grad_out_rows = rows_f32(grad_out, Dv, grad_out_wide);
  // rotate_values: out = af R(-t) o' on the RoPE range (o' the kernel's output, af the rope's attention
  // factor), so o' = R(t) out / af and d o' = af R(t) grad_out: fp32 copies rotated at the query positions.
  // rope_apply scales by af both ways, so the rotated out is divided by af^2 on the RoPE range.
  std::vector<float> out_rot, grad_out_rot;
  if (p.rotate_values) {
    for (auto [rows, copy] : {std::pair{&out_rows, &out_rot}, std::pair{&grad_out_rows, &grad_out_rot}}) {
      copy->resize(static_cast<size_t>(B * Q * H * Dv));
      cpu::copy_rows(*rows, Dv, copy->data());
      const Strided<float, 3> r{copy->data(), {B, Q, H}, {Q * H * Dv, H * Dv, Dv}};
      p.rotate_output_rows(r, false);
      *rows = r;
    }
    const double af = p.rope_q->freq.attention_factor;
    const auto undo = static_cast<float>(1.0 / (af * af));
    for (int64_t row = 0; undo != 1.0f && row < B * Q * H; ++row)
      for (int64_t d = p.rope_offset; d < p.rope_offset + p.rope_dim; ++d) out_rot[row * Dv + d] *= undo;
  }
  const bool relative = config.bias.kind == AttentionBias::Kind::relative;
  const int64_t table_rows = relative ? config.bias.relative.num_rows() : 0;
  const int64_t shaw_rows = config.shaw ? config.shaw->config.num_rows() : 0;
  const bool xl = config.transformer_xl.has_value();
  const int64_t d_model = xl ? config.transformer_xl->config.d_model : 0;
  const bool want_table = wanted(grads.relative_table, "relative_table", relative, {table_rows, H});
  const bool want_a_k = wanted(grads.shaw_a_k, "shaw_a_k", config.shaw.has_value(), {shaw_rows, D});
  const bool want_a_v =
      wanted(grads.shaw_a_v, "shaw_a_v", config.shaw && config.shaw->a_v.data, {shaw_rows, D});
  const bool want_u = wanted(grads.transformer_xl_u, "transformer_xl_u", xl, {H, D});
  const bool want_v = wanted(grads.transformer_xl_v, "transformer_xl_v", xl, {H, D});
  const bool want_sinks = wanted(grads.sinks, "sinks", config.sinks.data != nullptr, {H});
  const bool want_w_r = wanted(grads.transformer_xl_w_r, "transformer_xl_w_r", xl, {H * D, d_model});

  const int64_t n = xl ? p.transformer_xl->n : 0;
  std::vector<float> dq(static_cast<size_t>(B * Q * H * D)), dk(static_cast<size_t>(B * K * Hkv * D)),
      dv(static_cast<size_t>(B * K * Hkv * Dv));
  std::vector<float> d_table(static_cast<size_t>(table_rows * H), 0.0f);
  std::vector<float> d_a_k(static_cast<size_t>(shaw_rows * D), 0.0f), d_a_v(d_a_k.size(), 0.0f);
  std::vector<float> d_rproj(want_w_r ? static_cast<size_t>(H * n * D) : 0, 0.0f);
  std::vector<double> d_u(xl ? static_cast<size_t>(H * D) : 0, 0.0), d_v(d_u.size(), 0.0);
  std::vector<double> d_sinks(want_sinks ? static_cast<size_t>(H) : 0, 0.0);
  cpu::AttentionBackwardIO io;
  io.out = out_rows, io.lse = strided<3>(lse), io.grad_out = grad_out_rows;
  io.dq = dq.data(), io.dk = dk.data(), io.dv = dv.data();
  if (want_table) io.relative_table = d_table.data();
  if (want_a_k) io.shaw_a_k = d_a_k.data();
  if (want_a_v) io.shaw_a_v = d_a_v.data();
  if (xl) io.transformer_xl_u = d_u.data(), io.transformer_xl_v = d_v.data();
  if (want_w_r) io.transformer_xl_rproj = d_rproj.data();
  if (want_sinks) io.sinks = d_sinks.data();
  cpu::attention_backward(p, io);

  // forward: q_t = factor(q_pos) q_rot  ->  dq_rot = factor dq_t (a scalar per row).
  if (!p.q_temperature.empty()) {
    std::vector<float> scaled(dq.size());
    cpu::scale_query_rows({dq.data(), {B, Q, H}, {Q * H * D, H * D, D}}, D, p.q_temperature, scaled.data());
    dq = std::move(scaled);
  }
  // Back through RoPE: the gradient w.r.t. the unrotated q and k is the rotation by -theta.
  if (p.rope_q) {  // dims [rope_offset, rope_offset + rope_dim) only
    const Strided<float, 3> dq_rows =
        Strided<float, 3>{dq.data(), {B, Q, H}, {Q * H * D, H * D, D}}.columns_from(p.rope_offset);
    const Strided<float, 3> dk_rows =
        Strided<float, 3>{dk.data(), {B, K, Hkv}, {K * Hkv * D, Hkv * D, D}}.columns_from(p.rope_offset);
    const detail::HeadRows q_rows{dq_rows, dq_rows, p.rope_dim}, k_rows{dk_rows, dk_rows, p.rope_dim};
    detail::rope_apply(*p.rope_q, {B, Q}, &q_rows, 1, true);
    detail::rope_apply(*p.rope_k, {B, K}, &k_rows, 1, true);
  }
  if (p.rotate_values) {  // v' = R(s) v: dv = R(s)^T dv'
    const Strided<float, 3> dv_rows =
        Strided<float, 3>{dv.data(), {B, K, Hkv}, {K * Hkv * Dv, Hkv * Dv, Dv}}.columns_from(p.rope_offset);
    const detail::HeadRows v_rows{dv_rows, dv_rows, p.rope_dim};
    detail::rope_apply(*p.rope_k, {B, K}, &v_rows, 1, true);
  }
  const bool add = grads.accumulate;
  accumulate_gradient(grads.q, dq.data(), add);
  accumulate_gradient(grads.k, dk.data(), add);
  accumulate_gradient(grads.v, dv.data(), add);
  if (want_table) cpu::accumulate_into(as_rank4(grads.relative_table), d_table.data(), add);
  if (want_a_k) cpu::accumulate_into(as_rank4(grads.shaw_a_k), d_a_k.data(), add);
  if (want_a_v) cpu::accumulate_into(as_rank4(grads.shaw_a_v), d_a_v.data(), add);
  if (want_u || want_v) {
    const std::vector<float> u(d_u.begin(), d_u.end()), v(d_v.begin(), d_v.end());
    if (want_u) cpu::accumulate_into(as_rank4(grads.transformer_xl_u), u.data(), add);
    if (want_v) cpu::accumulate_into(as_rank4(grads.transformer_xl_v), v.data(), add);
  }
  if (want_sinks) {
    const std::vector<float> d(d_sinks.begin(), d_sinks.end());
    cpu::accumulate_into(as_rank4(grads.sinks), d.data(), add);
  }
  if (want_w_r) {  // forward: rproj_h[delta] = W_R,h R_delta; its backward adds into the view
    const Strided<float, 2> w_r = strided<2>(grads.transformer_xl_w_r);
    for (int64_t i = 0; !add && i < w_r.extent[0]; ++i)
      for (int64_t j = 0; j < w_r.extent[1]; ++j) w_r(i, j) = 0.0f;
    cpu::transformer_xl_project_backward(H, D, d_model, d_rproj, p.transformer_xl->sinusoids, n, w_r);
  }
}

void set_bf16_dot_products(bool enabled) { cpu::set_bf16_dot_enabled(enabled); }
bool bf16_dot_products() { return cpu::bf16_dot_available(); }

}  // namespace posenc
