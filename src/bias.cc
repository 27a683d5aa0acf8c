// src/bias.cc: front ends of the learned relative biases (clipped, T5) and ALiBi.
#include "check.h"
#include "cpu/distance_bias.h"
#include "posenc/bias.h"

namespace posenc {
using detail::check_view;

namespace {
const char* op_name(const RelativeBiasConfig& c) { return c.bucketing == Bucketing::t5 ? "t5_bias" : "relative_bias"; }

struct Block {
  std::vector<int64_t> q, k;
};
Block gather_block(const char* op, ConstTensorView q_positions, ConstTensorView k_positions, const TensorView& out,
                   int64_t heads) {
  const int64_t nq = q_positions.rank == 1 ? q_positions.shape[0] : -1;
  const int64_t nk = k_positions.rank == 1 ? k_positions.shape[0] : -1;
  check_view(op, "out", out, DType::f32, {heads, nq, nk});
  Block b{detail::gather_positions_1d(op, "q_positions", q_positions, out.shape[1]),
          detail::gather_positions_1d(op, "k_positions", k_positions, out.shape[2])};
  // Distances must not overflow: positions within +-2^53.
  detail::check_position_range(op, b.q);
  detail::check_position_range(op, b.k);
  return b;
}
}  // namespace

void relative_bias(const RelativeBiasConfig& config, ConstTensorView table, ConstTensorView q_positions,
                   ConstTensorView k_positions, TensorView out) {
  validate(config);
  const char* op = op_name(config);
  check_view(op, "table", table, DType::f32, {config.num_rows(), config.heads});
  const Block b = gather_block(op, q_positions, k_positions, out, config.heads);
  cpu::DistanceBias bias;
  bias.rows_config = &config;
  bias.table = table.ptr<float>();
  bias.table_stride_row = table.strides[0];
  bias.table_stride_head = table.strides[1];
  cpu::distance_bias_forward(bias, config.heads, b.q, b.k, out.ptr<float>(), out.strides[0], out.strides[1],
                             out.strides[2]);
}

void relative_bias_backward(const RelativeBiasConfig& config, ConstTensorView grad_out, ConstTensorView q_positions,
                            ConstTensorView k_positions, TensorView grad_table) {
  validate(config);
  const char* op = op_name(config);
  check_view(op, "grad_table", grad_table, DType::f32, {config.num_rows(), config.heads});
  const int64_t nq = q_positions.rank == 1 ? q_positions.shape[0] : -1;
  const int64_t nk = k_positions.rank == 1 ? k_positions.shape[0] : -1;
  check_view(op, "grad_out", grad_out, DType::f32, {config.heads, nq, nk});
  const std::vector<int64_t> q = detail::gather_positions_1d(op, "q_positions", q_positions, grad_out.shape[1]);
  const std::vector<int64_t> k = detail::gather_positions_1d(op, "k_positions", k_positions, grad_out.shape[2]);
  detail::check_position_range(op, q);
  detail::check_position_range(op, k);
  cpu::distance_bias_backward(config, q, k, grad_out.ptr<float>(), grad_out.strides[0], grad_out.strides[1],
                              grad_out.strides[2], grad_table.ptr<float>(), grad_table.strides[0],
                              grad_table.strides[1]);
}

void alibi_bias(const AlibiConfig& config, ConstTensorView q_positions, ConstTensorView k_positions, TensorView out) {
  const std::vector<double> slopes = alibi_slopes(config);
  const Block b = gather_block("alibi", q_positions, k_positions, out, config.heads);
  cpu::DistanceBias bias;
  bias.slopes = slopes.data();
  bias.symmetric = config.symmetric;
  cpu::distance_bias_forward(bias, config.heads, b.q, b.k, out.ptr<float>(), out.strides[0], out.strides[1],
                             out.strides[2]);
}

}  // namespace posenc
