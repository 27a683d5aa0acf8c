// src/transformer_xl.cc: Transformer-XL front end (validation; the loops are in src/cpu/transformer_xl.cc).
#include "posenc/transformer_xl.h"

#include "src/check.h"
#include "src/cpu/transformer_xl.h"
#include "src/widened.h"
#include "src/transformer_xl_plan.h"

#include <algorithm>

namespace posenc {
using detail::check_view;
using detail::fail_arg;

namespace detail {
DeltaIndex::DeltaIndex(std::span<const int64_t> q, std::span<const int64_t> k) {
  if (q.empty() || k.empty()) return;
  const auto [qmin, qmax] = std::minmax_element(q.begin(), q.end());
  const auto [kmin, kmax] = std::minmax_element(k.begin(), k.end());
  lo = *qmin - *kmax;
  const int64_t hi = *qmax - *kmin;
  dense = hi - lo < 4 * static_cast<int64_t>(q.size() + k.size()) + 4096;
  if (dense) {
    for (int64_t d = lo; d <= hi; ++d) deltas.push_back(d);
  } else {  // scattered positions: the distinct deltas only
    for (int64_t a : q)
      for (int64_t b : k) deltas.push_back(a - b);
    std::sort(deltas.begin(), deltas.end());
    deltas.erase(std::unique(deltas.begin(), deltas.end()), deltas.end());
  }
}
}  // namespace detail

namespace {
constexpr const char* kOp = "transformer_xl";

struct Positions {
  std::vector<int64_t> q, k;
};

Positions check_inputs(const TransformerXLConfig& c, ConstTensorView q, ConstTensorView k, ConstTensorView u,
                       ConstTensorView v, ConstTensorView w_r, ConstTensorView q_positions,
                       ConstTensorView k_positions, const ViewShape& logits, const void* logits_data,
                       const char* logits_name) {
  validate(c);
  check_view(kOp, "q", q, DType::f32, {-1, -1, c.heads, c.head_dim});
  check_view(kOp, "k", k, DType::f32, {q.shape[0], -1, c.heads, c.head_dim});
  check_view(kOp, "u", u, DType::f32, {c.heads, c.head_dim});
  check_view(kOp, "v", v, DType::f32, {c.heads, c.head_dim});
  check_view(kOp, "w_r", w_r, DType::f32, {c.heads * c.head_dim, c.d_model});
  check_view(kOp, logits_name, logits, DType::f32, {q.shape[0], c.heads, q.shape[1], k.shape[1]},
             logits_data);
  return {detail::gather_positions_1d(kOp, "q_positions", q_positions, q.shape[1]),
          detail::gather_positions_1d(kOp, "k_positions", k_positions, k.shape[1])};
}

cpu::TransformerXLShapes shapes(const TransformerXLConfig& c, const ViewShape& q, const Positions& pos) {
  return {q.shape[0], c.heads, q.shape[1], static_cast<int64_t>(pos.k.size()), c.head_dim, c.d_model,
          c.base,     pos.q,   pos.k};
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
  cpu::transformer_xl_sinusoid_rows(d, c.d_model, c.base, strided<2>(out));
}

void transformer_xl_logits(const TransformerXLConfig& c, ConstTensorView q, ConstTensorView k,
                           ConstTensorView u, ConstTensorView v, ConstTensorView w_r,
                           ConstTensorView q_positions, ConstTensorView k_positions, TensorView logits) {
  // bf16 / fp16 q, k and logits: widened / rounded once around the fp32 loops (src/widened.h).
  const detail::WidenedInput q32(kOp, "q", q), k32(kOp, "k", k);
  const detail::WidenedOutput logits32(kOp, "logits", logits, false);
  q = q32.view(), k = k32.view(), logits = logits32.view();
  const Positions pos =
      check_inputs(c, q, k, u, v, w_r, q_positions, k_positions, logits, logits.data, "logits");
  const cpu::TransformerXLInputs in{strided<4>(q), strided<4>(k), strided<2>(u), strided<2>(v),
                                    strided<2>(w_r)};
  cpu::transformer_xl_logits(shapes(c, q, pos), in, strided<4>(logits));
  logits32.store();
}

void transformer_xl_logits_backward(const TransformerXLConfig& c, ConstTensorView q, ConstTensorView k,
                                    ConstTensorView u, ConstTensorView v, ConstTensorView w_r,
                                    ConstTensorView q_positions, ConstTensorView k_positions,
                                    ConstTensorView grad_logits, const TransformerXLGrads& grads16) {
  const detail::WidenedInput q32(kOp, "q", q), k32(kOp, "k", k),
      grad_logits32(kOp, "grad_logits", grad_logits);
  const detail::WidenedOutput gq32(kOp, "grads.q", grads16.q, true), gk32(kOp, "grads.k", grads16.k, true);
  q = q32.view(), k = k32.view(), grad_logits = grad_logits32.view();
  TransformerXLGrads g = grads16;  // u, v, w_r: fp32 parameters
  g.q = gq32.view(), g.k = gk32.view();
  const Positions pos = check_inputs(c, q, k, u, v, w_r, q_positions, k_positions, grad_logits,
                                     grad_logits.data, "grad_logits");
  check_view(kOp, "grads.q", g.q, DType::f32, {q.shape[0], q.shape[1], q.shape[2], q.shape[3]});
  check_view(kOp, "grads.k", g.k, DType::f32, {k.shape[0], k.shape[1], k.shape[2], k.shape[3]});
  check_view(kOp, "grads.u", g.u, DType::f32, {c.heads, c.head_dim});
  check_view(kOp, "grads.v", g.v, DType::f32, {c.heads, c.head_dim});
  check_view(kOp, "grads.w_r", g.w_r, DType::f32, {c.heads * c.head_dim, c.d_model});
  const cpu::TransformerXLInputs in{strided<4>(q), strided<4>(k), strided<2>(u), strided<2>(v),
                                    strided<2>(w_r)};
  const cpu::TransformerXLGrads grads{strided<4>(g.q), strided<4>(g.k), strided<2>(g.u), strided<2>(g.v),
                                      strided<2>(g.w_r)};
  cpu::transformer_xl_logits_backward(shapes(c, q, pos), in, strided<4>(grad_logits), grads);
  gq32.store();
  gk32.store();
}

}  // namespace posenc
