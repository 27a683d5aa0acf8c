// src/shaw.cc: Shaw et al. front end (validation, then src/cpu/shaw.cc).
#include "check.h"
#include "cpu/relative_terms.h"
#include "posenc/shaw.h"

namespace posenc {
using cpu::heads_of;
using cpu::logits_of;
using cpu::table_of;
using detail::check_view;
using detail::fail_arg;

namespace {
constexpr const char* kOp = "shaw";


struct Prepared {
  std::vector<int64_t> q, k;
  cpu::ShawShapes shapes;
};

// heads_view (B, Q, H, D) fixes B, Q, H; logits_view (B, H, Q, K) fixes K.
Prepared prepare(const ShawConfig& c, const ViewShape& heads_view,
                 const void* heads_data, const char* heads_name, const ViewShape& logits_view, const void* logits_data,
                 const char* logits_name, ConstTensorView q_positions, ConstTensorView k_positions) {
  validate(c);
  check_view(kOp, heads_name, heads_view, DType::f32, {-1, -1, -1, c.head_dim}, heads_data);
  const int64_t b = heads_view.shape[0], nq = heads_view.shape[1], h = heads_view.shape[2];
  check_view(kOp, logits_name, logits_view, DType::f32, {b, h, nq, -1}, logits_data);
  Prepared p;
  p.q = detail::gather_positions_1d(kOp, "q_positions", q_positions, nq);
  p.k = detail::gather_positions_1d(kOp, "k_positions", k_positions, logits_view.shape[3]);
  detail::check_position_range(kOp, p.q);
  detail::check_position_range(kOp, p.k);
  p.shapes = {b, h, nq, logits_view.shape[3], c.head_dim, c.max_distance, &p.q, &p.k};
  return p;
}
}  // namespace

void validate(const ShawConfig& c) {
  if (c.max_distance < 0 || c.max_distance > (int64_t{1} << 20)) fail_arg(kOp, "max_distance", c.max_distance, "must be in [0, 2^20]");
  if (c.head_dim <= 0) fail_arg(kOp, "head_dim", c.head_dim, "must be > 0");
}

void shaw_key_logits(const ShawConfig& c, ConstTensorView a_k, ConstTensorView q, ConstTensorView q_positions,
                     ConstTensorView k_positions, TensorView logits) {
  validate(c);
  check_view(kOp, "a_k", a_k, DType::f32, {c.num_rows(), c.head_dim});
  Prepared p = prepare(c, q, q.data, "q", logits, logits.data, "logits", q_positions, k_positions);
  p.shapes.q_pos = &p.q;
  p.shapes.k_pos = &p.k;
  cpu::shaw_key_logits(p.shapes, table_of(a_k), heads_of(q), logits_of(logits));
}

void shaw_key_logits_backward(const ShawConfig& c, ConstTensorView a_k, ConstTensorView q, ConstTensorView q_positions,
                              ConstTensorView k_positions, ConstTensorView grad_logits, TensorView grad_q,
                              TensorView grad_a_k) {
  validate(c);
  check_view(kOp, "a_k", a_k, DType::f32, {c.num_rows(), c.head_dim});
  check_view(kOp, "grad_a_k", grad_a_k, DType::f32, {c.num_rows(), c.head_dim});
  Prepared p = prepare(c, q, q.data, "q", grad_logits, grad_logits.data, "grad_logits", q_positions, k_positions);
  check_view(kOp, "grad_q", grad_q, DType::f32, {q.shape[0], q.shape[1], q.shape[2], q.shape[3]});
  p.shapes.q_pos = &p.q;
  p.shapes.k_pos = &p.k;
  cpu::shaw_key_logits_backward(p.shapes, table_of(a_k), heads_of(q), logits_of(grad_logits), heads_of(grad_q),
                                table_of(grad_a_k));
}

void shaw_value_output(const ShawConfig& c, ConstTensorView a_v, ConstTensorView probs, ConstTensorView q_positions,
                       ConstTensorView k_positions, TensorView out) {
  validate(c);
  check_view(kOp, "a_v", a_v, DType::f32, {c.num_rows(), c.head_dim});
  Prepared p = prepare(c, out, out.data, "out", probs, probs.data, "probs", q_positions, k_positions);
  p.shapes.q_pos = &p.q;
  p.shapes.k_pos = &p.k;
  cpu::shaw_value_output(p.shapes, table_of(a_v), logits_of(probs), heads_of(out));
}

void shaw_value_output_backward(const ShawConfig& c, ConstTensorView a_v, ConstTensorView probs,
                                ConstTensorView q_positions, ConstTensorView k_positions, ConstTensorView grad_out,
                                TensorView grad_probs, TensorView grad_a_v) {
  validate(c);
  check_view(kOp, "a_v", a_v, DType::f32, {c.num_rows(), c.head_dim});
  check_view(kOp, "grad_a_v", grad_a_v, DType::f32, {c.num_rows(), c.head_dim});
  Prepared p = prepare(c, grad_out, grad_out.data, "grad_out", probs, probs.data, "probs", q_positions,
                       k_positions);
  check_view(kOp, "grad_probs", grad_probs, DType::f32, {probs.shape[0], probs.shape[1], probs.shape[2], probs.shape[3]});
  p.shapes.q_pos = &p.q;
  p.shapes.k_pos = &p.k;
  cpu::shaw_value_output_backward(p.shapes, table_of(a_v), logits_of(probs), heads_of(grad_out), logits_of(grad_probs),
                                  table_of(grad_a_v));
}

}  // namespace posenc
