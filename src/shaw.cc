// src/shaw.cc: Shaw et al. front end (validation; the loops are in src/cpu/shaw.cc).
#include "posenc/shaw.h"

#include "src/check.h"
#include "src/cpu/shaw.h"
#include "src/widened.h"

namespace posenc {
using detail::check_view;
using detail::fail_arg;

namespace {
constexpr const char* kOp = "shaw";

struct Positions {
  std::vector<int64_t> q, k;
};

// heads_view (B, Q, H, D) fixes B, Q, H; logits_view (B, H, Q, K) fixes K. The shapes that the
// loops take point into `pos`, which the caller keeps alive across the call.
Positions gather(const ShawConfig& c, const ViewShape& heads_view, const void* heads_data,
                 const char* heads_name, const ViewShape& logits_view, const void* logits_data,
                 const char* logits_name, ConstTensorView q_positions, ConstTensorView k_positions) {
  validate(c);
  check_view(kOp, heads_name, heads_view, DType::f32, {-1, -1, -1, c.head_dim}, heads_data);
  const int64_t b = heads_view.shape[0], nq = heads_view.shape[1], h = heads_view.shape[2];
  check_view(kOp, logits_name, logits_view, DType::f32, {b, h, nq, -1}, logits_data);
  return {detail::gather_positions_1d(kOp, "q_positions", q_positions, nq),
          detail::gather_positions_1d(kOp, "k_positions", k_positions, logits_view.shape[3])};
}

cpu::ShawShapes shapes(const ShawConfig& c, const ViewShape& heads_view, const Positions& pos) {
  return {heads_view.shape[0],
          heads_view.shape[2],
          heads_view.shape[1],
          static_cast<int64_t>(pos.k.size()),
          c.head_dim,
          c.max_distance,
          pos.q,
          pos.k};
}

void check_table(const ShawConfig& c, const char* name, const ViewShape& v, const void* data) {
  check_view(kOp, name, v, DType::f32, {c.num_rows(), c.head_dim}, data);
}
}  // namespace

void validate(const ShawConfig& c) {
  if (c.max_distance < 0 || c.max_distance > (int64_t{1} << 20))
    fail_arg(kOp, "max_distance", c.max_distance, "must be in [0, 2^20]");
  if (c.head_dim <= 0) fail_arg(kOp, "head_dim", c.head_dim, "must be > 0");
}

void shaw_key_logits(const ShawConfig& c, ConstTensorView a_k, ConstTensorView q, ConstTensorView q_positions,
                     ConstTensorView k_positions, TensorView logits) {
  // bf16 / fp16 q and logits: widened / rounded once around the fp32 loops (src/widened.h).
  const detail::WidenedInput q32(kOp, "q", q);
  const detail::WidenedOutput logits32(kOp, "logits", logits, false);
  q = q32.view(), logits = logits32.view();
  validate(c);
  check_table(c, "a_k", a_k, a_k.data);
  const Positions pos = gather(c, q, q.data, "q", logits, logits.data, "logits", q_positions, k_positions);
  cpu::shaw_key_logits(shapes(c, q, pos), strided<2>(a_k), strided<4>(q), strided<4>(logits));
  logits32.store();
}

void shaw_key_logits_backward(const ShawConfig& c, ConstTensorView a_k, ConstTensorView q,
                              ConstTensorView q_positions, ConstTensorView k_positions,
                              ConstTensorView grad_logits, TensorView grad_q, TensorView grad_a_k) {
  const detail::WidenedInput q32(kOp, "q", q), grad_logits32(kOp, "grad_logits", grad_logits);
  const detail::WidenedOutput grad_q32(kOp, "grad_q", grad_q, true);
  q = q32.view(), grad_logits = grad_logits32.view(), grad_q = grad_q32.view();
  validate(c);
  check_table(c, "a_k", a_k, a_k.data);
  check_table(c, "grad_a_k", grad_a_k, grad_a_k.data);
  const Positions pos =
      gather(c, q, q.data, "q", grad_logits, grad_logits.data, "grad_logits", q_positions, k_positions);
  check_view(kOp, "grad_q", grad_q, DType::f32, {q.shape[0], q.shape[1], q.shape[2], q.shape[3]});
  cpu::shaw_key_logits_backward(shapes(c, q, pos), strided<2>(a_k), strided<4>(q), strided<4>(grad_logits),
                                strided<4>(grad_q), strided<2>(grad_a_k));
  grad_q32.store();
}

void shaw_value_output(const ShawConfig& c, ConstTensorView a_v, ConstTensorView probs,
                       ConstTensorView q_positions, ConstTensorView k_positions, TensorView out) {
  const detail::WidenedInput probs32(kOp, "probs", probs);
  const detail::WidenedOutput out32(kOp, "out", out, true);
  probs = probs32.view(), out = out32.view();
  validate(c);
  check_table(c, "a_v", a_v, a_v.data);
  const Positions pos = gather(c, out, out.data, "out", probs, probs.data, "probs", q_positions, k_positions);
  cpu::shaw_value_output(shapes(c, out, pos), strided<2>(a_v), strided<4>(probs), strided<4>(out));
  out32.store();
}

void shaw_value_output_backward(const ShawConfig& c, ConstTensorView a_v, ConstTensorView probs,
                                ConstTensorView q_positions, ConstTensorView k_positions,
                                ConstTensorView grad_out, TensorView grad_probs, TensorView grad_a_v) {
  const detail::WidenedInput probs32(kOp, "probs", probs), grad_out32(kOp, "grad_out", grad_out);
  const detail::WidenedOutput grad_probs32(kOp, "grad_probs", grad_probs, true);
  probs = probs32.view(), grad_out = grad_out32.view(), grad_probs = grad_probs32.view();
  validate(c);
  check_table(c, "a_v", a_v, a_v.data);
  check_table(c, "grad_a_v", grad_a_v, grad_a_v.data);
  const Positions pos =
      gather(c, grad_out, grad_out.data, "grad_out", probs, probs.data, "probs", q_positions, k_positions);
  check_view(kOp, "grad_probs", grad_probs, DType::f32,
             {probs.shape[0], probs.shape[1], probs.shape[2], probs.shape[3]});
  cpu::shaw_value_output_backward(shapes(c, grad_out, pos), strided<2>(a_v), strided<4>(probs),
                                  strided<4>(grad_out), strided<4>(grad_probs), strided<2>(grad_a_v));
  grad_probs32.store();
}

}  // namespace posenc
