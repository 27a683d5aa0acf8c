// src/absolute.cc: sinusoidal, learned and binary absolute encodings (front end + CPU loops).
#include <cstring>

#include "check.h"
#include "cpu/kernels.h"
#include "cpu/parallel.h"
#include "posenc/absolute.h"

namespace posenc {
using detail::check_view;
using detail::fail;

namespace {
// Write or add the sinusoid of `positions` (rows of grid) into rows of `out` with strides (b, t).
void sinusoid_rows(const SinusoidalConfig& cfg, const std::vector<int64_t>& positions, cpu::TokenGrid grid,
                   float* base, int64_t stride_b, int64_t stride_t, bool accumulate) {
  const std::vector<double> w = sinusoidal_frequencies(cfg);
  const int64_t half = cfg.dim / 2;
  cpu::AngleTable a;
  a.inv_freq = w.data();
  a.pairs = half;
  a.positions = positions.data();
  a.position_offset = cfg.position_offset;
  cpu::SinCosOut o;
  o.stride_b = stride_b;
  o.stride_t = stride_t;
  o.accumulate = accumulate;
  if (cfg.layout == SinusoidalLayout::interleaved) {  // [s0 c0 s1 c1 ...]
    o.sin_out = base;
    o.cos_out = base + 1;
    o.elem_stride = 2;
  } else {  // [s0 s1 ... | c0 c1 ...] (+ a zero column when dim is odd, as fairseq pads)
    o.sin_out = base;
    o.cos_out = base + half;
    o.elem_stride = 1;
  }
  cpu::sincos_rows(a, grid, o);
  if (cfg.dim % 2 == 1 && !accumulate)
    for (int64_t r = 0; r < grid.rows(); ++r)
      base[(r / grid.tokens) * stride_b + (r % grid.tokens) * stride_t + cfg.dim - 1] = 0.0f;
}
}  // namespace

void sinusoidal_table(const SinusoidalConfig& cfg, ConstTensorView positions, TensorView out) {
  validate(cfg);
  const int64_t n = positions.rank == 1 ? positions.shape[0] : -1;
  check_view("sinusoidal", "out", out, DType::f32, {n, cfg.dim});
  const std::vector<int64_t> pos = detail::gather_positions_1d("sinusoidal", "positions", positions, out.shape[0]);
  detail::check_position_range("sinusoidal", pos, cfg.position_offset);
  if (out.strides[1] != 1) fail("sinusoidal", "out must have a unit stride on its last dimension");
  sinusoid_rows(cfg, pos, {1, out.shape[0]}, out.ptr<float>(), 0, out.strides[0], false);
}

void sinusoidal_add(const SinusoidalConfig& cfg, ConstTensorView positions, TensorView x) {
  validate(cfg);
  check_view("sinusoidal", "x", x, DType::f32, {-1, -1, cfg.dim});
  detail::check_unit_last_stride("sinusoidal", "x", x);
  const std::vector<int64_t> pos = detail::gather_positions("sinusoidal", positions, 1, x.shape[0], x.shape[1]);
  detail::check_position_range("sinusoidal", pos, cfg.position_offset);
  sinusoid_rows(cfg, pos, {x.shape[0], x.shape[1]}, x.ptr<float>(), x.strides[0], x.strides[1], true);
}

// ---------------------------------------------------------------- learned
namespace {
void check_learned_positions(const std::vector<int64_t>& pos, int64_t max_len) {
  for (size_t i = 0; i < pos.size(); ++i)
    if (pos[i] < 0 || pos[i] >= max_len)
      fail("learned", "position ", pos[i], " (index ", i, ") is outside the learned table of max_len = ", max_len,
           ": a learned table cannot encode positions it was not trained with");
}
}  // namespace

void learned_lookup(ConstTensorView table, ConstTensorView positions, TensorView out) {
  check_view("learned", "table", table, DType::f32, {-1, -1});
  const int64_t n = positions.rank == 1 ? positions.shape[0] : -1;
  check_view("learned", "out", out, DType::f32, {n, table.shape[1]});
  const std::vector<int64_t> pos = detail::gather_positions_1d("learned", "positions", positions, out.shape[0]);
  check_learned_positions(pos, table.shape[0]);
  const float* t = table.ptr<float>();
  float* o = out.ptr<float>();
  const int64_t dim = table.shape[1];
  cpu::parallel_chunks(out.shape[0], dim, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      for (int64_t e = 0; e < dim; ++e)
        o[i * out.strides[0] + e * out.strides[1]] = t[pos[i] * table.strides[0] + e * table.strides[1]];
  });
}

void learned_add(ConstTensorView table, ConstTensorView positions, TensorView x) {
  check_view("learned", "table", table, DType::f32, {-1, -1});
  check_view("learned", "x", x, DType::f32, {-1, -1, table.shape[1]});
  const std::vector<int64_t> pos = detail::gather_positions("learned", positions, 1, x.shape[0], x.shape[1]);
  check_learned_positions(pos, table.shape[0]);
  const float* t = table.ptr<float>();
  float* o = x.ptr<float>();
  const int64_t dim = table.shape[1], tokens = x.shape[1];
  cpu::parallel_chunks(x.shape[0] * tokens, dim, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* row = o + (r / tokens) * x.strides[0] + (r % tokens) * x.strides[1];
      for (int64_t e = 0; e < dim; ++e) row[e * x.strides[2]] += t[pos[r] * table.strides[0] + e * table.strides[1]];
    }
  });
}

void learned_backward(ConstTensorView grad_out, ConstTensorView positions, TensorView grad_table) {
  check_view("learned", "grad_table", grad_table, DType::f32, {-1, -1});
  const int64_t dim = grad_table.shape[1];
  int64_t batch = 1, tokens = 0;
  int64_t sb = 0, st = 0, se = 0;
  if (grad_out.rank == 2) {
    check_view("learned", "grad_out", grad_out, DType::f32, {-1, dim});
    tokens = grad_out.shape[0];
    st = grad_out.strides[0];
    se = grad_out.strides[1];
  } else {
    check_view("learned", "grad_out", grad_out, DType::f32, {-1, -1, dim});
    batch = grad_out.shape[0];
    tokens = grad_out.shape[1];
    sb = grad_out.strides[0];
    st = grad_out.strides[1];
    se = grad_out.strides[2];
  }
  const std::vector<int64_t> pos = grad_out.rank == 2
      ? detail::gather_positions_1d("learned", "positions", positions, tokens)
      : detail::gather_positions("learned", positions, 1, batch, tokens);
  check_learned_positions(pos, grad_table.shape[0]);
  const float* g = grad_out.ptr<float>();
  float* gt = grad_table.ptr<float>();
  // Each chunk of columns is summed over rows in row order: the result is thread-count independent.
  cpu::parallel_chunks(dim, batch * tokens, [&](int64_t e0, int64_t e1) {
    for (int64_t r = 0; r < batch * tokens; ++r) {
      const float* src = g + (r / tokens) * sb + (r % tokens) * st;
      float* dst = gt + pos[r] * grad_table.strides[0];
      for (int64_t e = e0; e < e1; ++e) dst[e * grad_table.strides[1]] += src[e * se];
    }
  });
}

// ---------------------------------------------------------------- binary
void binary_table(const BinaryConfig& cfg, ConstTensorView positions, TensorView out) {
  validate(cfg);
  const int64_t n = positions.rank == 1 ? positions.shape[0] : -1;
  check_view("binary", "out", out, DType::f32, {n, cfg.bits});
  const std::vector<int64_t> pos = detail::gather_positions_1d("binary", "positions", positions, out.shape[0]);
  for (size_t i = 0; i < pos.size(); ++i) {
    if (pos[i] < 0 || pos[i] >= (int64_t{1} << cfg.bits)) {
      int64_t needed = 1;
      while (needed < 62 && (pos[i] >> needed) != 0) ++needed;
      fail("binary", "position ", pos[i], " (index ", i, ") does not fit in bits = ", cfg.bits,
           pos[i] < 0 ? std::string(": positions must be >= 0") : ": it needs " + std::to_string(needed) + " bits");
    }
  }
  const float zero = cfg.signed_values ? -1.0f : 0.0f;
  float* o = out.ptr<float>();
  for (int64_t i = 0; i < out.shape[0]; ++i)
    for (int64_t b = 0; b < cfg.bits; ++b)  // most significant bit first
      o[i * out.strides[0] + b * out.strides[1]] = ((pos[i] >> (cfg.bits - 1 - b)) & 1) ? 1.0f : zero;
}

}  // namespace posenc
