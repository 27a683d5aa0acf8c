// src/transformer_xl.cc: Transformer-XL front end (validation, then src/cpu/transformer_xl.cc).
#include <cmath>

#include "check.h"
#include "cpu/relative_terms.h"
#include "posenc/transformer_xl.h"

namespace posenc {
using cpu::heads_of;
using cpu::logits_of;
using cpu::table_of;
using detail::check_view;
using detail::fail;
using detail::fail_arg;

namespace {
constexpr const char* kOp = "transformer_xl";


struct Prepared {
  std::vector<int64_t> q_pos, k_pos;
  cpu::XLShapes shapes{};
  cpu::XLParams params;
};

Prepared prepare(const TransformerXLConfig& c, ConstTensorView q, ConstTensorView k, ConstTensorView u,
                 ConstTensorView v, ConstTensorView w_r, ConstTensorView q_positions, ConstTensorView k_positions,
                 const ViewShape& logits, const void* logits_data, const char* logits_name) {
  validate(c);
  check_view(kOp, "q", q, DType::f32, {-1, -1, c.heads, c.head_dim});
  check_view(kOp, "k", k, DType::f32, {q.shape[0], -1, c.heads, c.head_dim});
  check_view(kOp, "u", u, DType::f32, {c.heads, c.head_dim});
  check_view(kOp, "v", v, DType::f32, {c.heads, c.head_dim});
  check_view(kOp, "w_r", w_r, DType::f32, {c.heads * c.head_dim, c.d_model});
  check_view(kOp, logits_name, logits, DType::f32, {q.shape[0], c.heads, q.shape[1], k.shape[1]}, logits_data);
  Prepared p;
  p.q_pos = detail::gather_positions_1d(kOp, "q_positions", q_positions, q.shape[1]);
  p.k_pos = detail::gather_positions_1d(kOp, "k_positions", k_positions, k.shape[1]);
  detail::check_position_range(kOp, p.q_pos);
  detail::check_position_range(kOp, p.k_pos);
  p.params = {heads_of(q), heads_of(k), table_of(u), table_of(v), table_of(w_r)};
  return p;
}
}  // namespace

void validate(const TransformerXLConfig& c) {
  if (c.d_model <= 0 || c.d_model % 2 != 0) fail_arg(kOp, "d_model", c.d_model, "must be even and > 0");
  if (c.heads <= 0) fail_arg(kOp, "heads", c.heads, "must be > 0");
  if (c.head_dim <= 0) fail_arg(kOp, "head_dim", c.head_dim, "must be > 0");
  detail::check_positive(kOp, "base", c.base);
}

void transformer_xl_sinusoid(const TransformerXLConfig& c, ConstTensorView distances, TensorView out) {
  validate(c);
  const int64_t n = distances.rank == 1 ? distances.shape[0] : -1;
  check_view(kOp, "out", out, DType::f32, {n, c.d_model});
  const std::vector<int64_t> d = detail::gather_positions_1d(kOp, "distances", distances, out.shape[0]);
  detail::check_position_range(kOp, d);
  const int64_t half = c.d_model / 2;
  for (int64_t m = 0; m < out.shape[0]; ++m)
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(d[m]) * std::pow(c.base, -2.0 * static_cast<double>(i) / static_cast<double>(c.d_model));
      out.ptr<float>()[m * out.strides[0] + i * out.strides[1]] = static_cast<float>(std::sin(a));
      out.ptr<float>()[m * out.strides[0] + (half + i) * out.strides[1]] = static_cast<float>(std::cos(a));
    }
}

void transformer_xl_logits(const TransformerXLConfig& c, ConstTensorView q, ConstTensorView k, ConstTensorView u,
                           ConstTensorView v, ConstTensorView w_r, ConstTensorView q_positions,
                           ConstTensorView k_positions, TensorView logits) {
  Prepared p = prepare(c, q, k, u, v, w_r, q_positions, k_positions, logits, logits.data, "logits");
  p.shapes = {q.shape[0], c.heads, q.shape[1], k.shape[1], c.head_dim, c.d_model, c.base, &p.q_pos, &p.k_pos};
  cpu::transformer_xl_logits(p.shapes, p.params, {logits.ptr<float>(), logits.ptr<float>(), logits.strides});
}

void transformer_xl_logits_backward(const TransformerXLConfig& c, ConstTensorView q, ConstTensorView k,
                                    ConstTensorView u, ConstTensorView v, ConstTensorView w_r,
                                    ConstTensorView q_positions, ConstTensorView k_positions,
                                    ConstTensorView grad_logits, const TransformerXLGrads& g) {
  Prepared p = prepare(c, q, k, u, v, w_r, q_positions, k_positions, grad_logits, grad_logits.data, "grad_logits");
  check_view(kOp, "grads.q", g.q, DType::f32, {q.shape[0], q.shape[1], q.shape[2], q.shape[3]});
  check_view(kOp, "grads.k", g.k, DType::f32, {k.shape[0], k.shape[1], k.shape[2], k.shape[3]});
  check_view(kOp, "grads.u", g.u, DType::f32, {c.heads, c.head_dim});
  check_view(kOp, "grads.v", g.v, DType::f32, {c.heads, c.head_dim});
  check_view(kOp, "grads.w_r", g.w_r, DType::f32, {c.heads * c.head_dim, c.d_model});
  p.shapes = {q.shape[0], c.heads, q.shape[1], k.shape[1], c.head_dim, c.d_model, c.base, &p.q_pos, &p.k_pos};
  const cpu::XLParams grads{heads_of(g.q), heads_of(g.k), table_of(g.u), table_of(g.v), table_of(g.w_r)};
  cpu::transformer_xl_logits_backward(p.shapes, p.params, {nullptr, grad_logits.ptr<float>(), grad_logits.strides}, grads);
}

}  // namespace posenc
