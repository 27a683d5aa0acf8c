// src/absolute.cc: front ends of the absolute encodings (sinusoidal, learned, binary): validation
// and the frequencies in double; the loops are in src/cpu/absolute.cc.
#include "posenc/absolute.h"

#include <array>
#include <cmath>

#include "src/check.h"
#include "src/cpu/absolute.h"

#if POSENC_WITH_CUDA
#include "src/cuda/absolute.h"
#include "src/cuda/device.h"
#endif

namespace posenc {
using detail::check_positive;
using detail::check_view;
using detail::fail;
using detail::fail_arg;

// ---------------------------------------------------------------- sinusoidal
const char* sinusoidal_layout_name(SinusoidalLayout layout) {
  return layout == SinusoidalLayout::split ? "split" : "interleaved";
}
const char* sinusoidal_frequencies_name(SinusoidalFrequencies frequencies) {
  return frequencies == SinusoidalFrequencies::model_dim ? "model_dim" : "half_dim_minus_one";
}

void validate(const SinusoidalConfig& c) {
  const char* op = "sinusoidal";
  if (c.dim <= 0) fail_arg(op, "dim", c.dim, "must be > 0");
  if (c.layout == SinusoidalLayout::interleaved && c.dim % 2 != 0)
    fail_arg(op, "dim", c.dim, "must be even for the interleaved layout (odd dims: use the split layout)");
  check_positive(op, "base", c.base);
  // Frequencies are base^(-e) with e in [0, 1]. base >= 2^-16 keeps them <= 2^16, so every angle
  // position * frequency (|position| <= 2^53) stays within 2^69, where the angle reduction and the
  // fp32 sin/cos still give values in [-1, 1] (base = 5e-324 gave inf; 2^-126 gave |sin| > 1 at
  // position 2^20); base <= 2^126 keeps the smallest one a normal float32 > 0.
  if (c.base < 0x1p-16 || c.base > 0x1p126)
    fail_arg(op, "base", c.base,
             "must lie in [2^-16, 2^126] (frequencies base^(-e), 0 <= e <= 1, in [2^-126, 2^16])");
  if (c.frequencies == SinusoidalFrequencies::half_dim_minus_one && c.dim / 2 < 2)
    fail_arg(op, "dim", c.dim, "must be >= 4 for frequencies 'half_dim_minus_one' (divides by dim/2 - 1)");
  if (c.position_offset > detail::kMaxAbsPosition || c.position_offset < -detail::kMaxAbsPosition)
    fail_arg(op, "position_offset", c.position_offset, "must lie in [-2^53, 2^53]");
}

std::vector<double> sinusoidal_frequencies(const SinusoidalConfig& c) {
  validate(c);
  const int64_t half = c.dim / 2;
  const double denominator = c.frequencies == SinusoidalFrequencies::model_dim
                                 ? static_cast<double>(c.dim) / 2.0
                                 : static_cast<double>(half - 1);
  std::vector<double> w(half);
  for (int64_t i = 0; i < half; ++i) w[i] = std::pow(c.base, -static_cast<double>(i) / denominator);
  return w;
}

// ---------------------------------------------------------------- the CUDA path
namespace {

#if POSENC_WITH_CUDA
// Rows (B, T, E) of a checked view of device memory; a 2-D view (N, E) is one batch of N rows.
cuda::DeviceRows3 device_rows(const char* op, const char* name, const ViewShape& v, void* data) {
  cuda::check_device_memory(op, name, v, data);
  if (std::string_view(op) == "sinusoidal" && v.shape[v.rank - 1] / 2 > cuda::kMaxDeviceSinusoidPairs)
    fail(op, "dim = ", v.shape[v.rank - 1], " is larger than the CUDA backend takes (",
         2 * cuda::kMaxDeviceSinusoidPairs + 1, ")");
  cuda::DeviceRows3 r;
  r.data = data;
  r.dtype = v.dtype;
  if (v.rank == 2) {
    r.extent[0] = 1, r.extent[1] = v.shape[0], r.extent[2] = v.shape[1];
    r.strides[0] = 0, r.strides[1] = v.strides[0], r.strides[2] = v.strides[1];
  } else {
    for (int d = 0; d < 3; ++d) r.extent[d] = v.shape[d], r.strides[d] = v.strides[d];
  }
  return r;
}

// Positions of rows (B, T): (T) or (B, T) on the device; for 2-D rows (N, E), (N).
cuda::DevicePositions2 device_positions(const char* op, ConstTensorView positions,
                                        const cuda::DeviceRows3& rows) {
  const detail::PositionLayout p =
      detail::check_positions(op, positions, 1, rows.extent[0], rows.extent[1], Device::cuda);
  cuda::check_device_memory(op, "positions", positions, positions.data);
  return {p.data, p.batch_stride, p.token_stride};
}
#endif
}  // namespace

void sinusoidal_table(const SinusoidalConfig& cfg, ConstTensorView positions, TensorView out) {
  const std::vector<double> w = sinusoidal_frequencies(cfg);
  if (out.device == Device::cuda) {
#if POSENC_WITH_CUDA
    const int64_t n = positions.rank == 1 ? positions.shape[0] : -1;
    check_view("sinusoidal", "out", out, detail::activation_dtype(out), {n, cfg.dim}, out.data, Device::cuda);
    detail::check_unit_last_stride("sinusoidal", "out", out);
    if (positions.rank != 1)
      fail("sinusoidal", "positions has shape ", positions.shape_string(), ", expected (N)");
    const cuda::DeviceRows3 rows = device_rows("sinusoidal", "out", out, out.data);
    cuda::sinusoid_rows(cfg, w, device_positions("sinusoidal", positions, rows), rows, false);
    return;
#else
    detail::fail_without_cuda("sinusoidal", "out");
#endif
  }
  const int64_t n = positions.rank == 1 ? positions.shape[0] : -1;
  const DType dtype = detail::activation_dtype(out);
  check_view("sinusoidal", "out", out, dtype, {n, cfg.dim});
  const std::vector<int64_t> pos =
      detail::gather_positions_1d("sinusoidal", "positions", positions, out.shape[0]);
  detail::check_position_range("sinusoidal", pos, cfg.position_offset);
  if (out.strides[1] != 1) fail("sinusoidal", "out must have a unit stride on its last dimension");
  // Rows (1, N): the batch stride is never used.
  if (dtype == DType::f32)
    cpu::sinusoid_rows(cfg, w, pos, {out.ptr<float>(), {1, out.shape[0]}, {0, out.strides[0]}}, false);
  else
    cpu::sinusoid_rows16(cfg, w, pos, {out.ptr<uint16_t>(), {1, out.shape[0]}, {0, out.strides[0]}}, dtype,
                         false);
}

void sinusoidal_add(const SinusoidalConfig& cfg, ConstTensorView positions, TensorView x) {
  const std::vector<double> w = sinusoidal_frequencies(cfg);
  const DType dtype = detail::activation_dtype(x);
  check_view("sinusoidal", "x", x, dtype, {-1, -1, cfg.dim}, x.data, x.device);
  detail::check_unit_last_stride("sinusoidal", "x", x);
  if (x.device == Device::cuda) {
#if POSENC_WITH_CUDA
    const cuda::DeviceRows3 rows = device_rows("sinusoidal", "x", x, x.data);
    cuda::sinusoid_rows(cfg, w, device_positions("sinusoidal", positions, rows), rows, true);
    return;
#else
    detail::fail_without_cuda("sinusoidal", "x");
#endif
  }
  const std::vector<int64_t> pos =
      detail::gather_positions("sinusoidal", positions, 1, x.shape[0], x.shape[1]);
  detail::check_position_range("sinusoidal", pos, cfg.position_offset);
  if (dtype == DType::f32)
    cpu::sinusoid_rows(cfg, w, pos, strided<2>(x), true);
  else
    cpu::sinusoid_rows16(cfg, w, pos, strided16<2>(x), dtype, true);
}

// ---------------------------------------------------------------- learned
namespace {
void check_learned_positions(const std::vector<int64_t>& pos, int64_t max_len) {
  for (size_t i = 0; i < pos.size(); ++i)
    if (pos[i] < 0 || pos[i] >= max_len)
      fail("learned", "position ", pos[i], " (index ", i,
           ") is outside the learned table of max_len = ", max_len,
           ": a learned table cannot encode positions it was not trained with");
}
}  // namespace

// The learned ops on device memory: rows = (or +=) table[positions], a NaN row for a position outside it.
#if POSENC_WITH_CUDA
namespace {
void learned_rows_cuda(ConstTensorView table, ConstTensorView positions, const ViewShape& v, void* data,
                       const char* name, bool accumulate) {
  cuda::check_device_memory("learned", "table", table, table.data);
  if (v.dtype != DType::f32) detail::check_unit_last_stride("learned", name, v);
  const cuda::DeviceRows3 rows = device_rows("learned", name, v, data);
  const int64_t strides[2] = {table.strides[0], table.strides[1]};
  cuda::learned_rows(table.ptr<float>(), strides, table.shape[0],
                     device_positions("learned", positions, rows), rows, accumulate);
}
}  // namespace
#endif

void learned_lookup(ConstTensorView table, ConstTensorView positions, TensorView out) {
  check_view("learned", "table", table, DType::f32, {-1, -1}, table.data, out.device);
  const int64_t n = positions.rank == 1 ? positions.shape[0] : -1;
  const DType dtype = detail::activation_dtype(out);
  check_view("learned", "out", out, dtype, {n, table.shape[1]}, out.data, out.device);
  if (out.device == Device::cuda) {
#if POSENC_WITH_CUDA
    if (positions.rank != 1)
      fail("learned", "positions has shape ", positions.shape_string(), ", expected (N)");
    learned_rows_cuda(table, positions, out, out.data, "out", false);
    return;
#else
    detail::fail_without_cuda("learned", "out");
#endif
  }
  const std::vector<int64_t> pos =
      detail::gather_positions_1d("learned", "positions", positions, out.shape[0]);
  check_learned_positions(pos, table.shape[0]);
  if (dtype != DType::f32) {  // the fp32 table's rows, rounded once
    detail::check_unit_last_stride("learned", "out", out);
    const Strided<uint16_t, 3> rows{
        out.ptr<uint16_t>(), {1, out.shape[0], table.shape[1]}, {0, out.strides[0], out.strides[1]}};
    cpu::learned_rows16(strided<2>(table), pos, rows, dtype, false);
    return;
  }
  const Strided<float, 3> rows{
      out.ptr<float>(), {1, out.shape[0], table.shape[1]}, {0, out.strides[0], out.strides[1]}};
  cpu::learned_rows(strided<2>(table), pos, rows, false);
}

void learned_add(ConstTensorView table, ConstTensorView positions, TensorView x) {
  check_view("learned", "table", table, DType::f32, {-1, -1}, table.data, x.device);
  const DType dtype = detail::activation_dtype(x);
  check_view("learned", "x", x, dtype, {-1, -1, table.shape[1]}, x.data, x.device);
  if (x.device == Device::cuda) {
#if POSENC_WITH_CUDA
    learned_rows_cuda(table, positions, x, x.data, "x", true);
    return;
#else
    detail::fail_without_cuda("learned", "x");
#endif
  }
  const std::vector<int64_t> pos = detail::gather_positions("learned", positions, 1, x.shape[0], x.shape[1]);
  check_learned_positions(pos, table.shape[0]);
  if (dtype != DType::f32) {
    detail::check_unit_last_stride("learned", "x", x);
    cpu::learned_rows16(strided<2>(table), pos, strided16<3>(x), dtype, true);
    return;
  }
  cpu::learned_rows(strided<2>(table), pos, strided<3>(x), true);
}

void learned_backward(ConstTensorView grad_out, ConstTensorView positions, TensorView grad_table) {
  check_view("learned", "grad_table", grad_table, DType::f32, {-1, -1}, grad_table.data, grad_out.device);
  const int64_t dim = grad_table.shape[1];
  const DType dtype = detail::activation_dtype(grad_out);  // 16-bit grad_out: widened; grad_table stays fp32
  if (grad_out.device == Device::cuda) {
#if POSENC_WITH_CUDA
    if (grad_out.rank == 2)
      check_view("learned", "grad_out", grad_out, dtype, {-1, dim}, grad_out.data, Device::cuda);
    else
      check_view("learned", "grad_out", grad_out, dtype, {-1, -1, dim}, grad_out.data, Device::cuda);
    cuda::check_device_memory("learned", "grad_table", grad_table, grad_table.data);
    const cuda::DeviceRows3 rows =
        device_rows("learned", "grad_out", grad_out, const_cast<void*>(grad_out.data));
    const int64_t strides[2] = {grad_table.strides[0], grad_table.strides[1]};
    cuda::learned_rows_backward(rows, device_positions("learned", positions, rows), grad_table.ptr<float>(),
                                strides, grad_table.shape[0]);
    return;
#else
    detail::fail_without_cuda("learned", "grad_out");
#endif
  }
  Strided<const float, 3> grad;
  Strided<const uint16_t, 3> grad16;
  std::vector<int64_t> pos;
  if (grad_out.rank == 2) {  // (T, E): one batch row
    check_view("learned", "grad_out", grad_out, dtype, {-1, dim});
    const std::array<int64_t, 3> extent = {1, grad_out.shape[0], dim},
                                 stride = {0, grad_out.strides[0], grad_out.strides[1]};
    grad = {grad_out.ptr<float>(), extent, stride};
    grad16 = {grad_out.ptr<uint16_t>(), extent, stride};
    pos = detail::gather_positions_1d("learned", "positions", positions, grad_out.shape[0]);
  } else {
    check_view("learned", "grad_out", grad_out, dtype, {-1, -1, dim});
    grad = strided<3>(grad_out);
    grad16 = strided16<3>(grad_out);
    pos = detail::gather_positions("learned", positions, 1, grad_out.shape[0], grad_out.shape[1]);
  }
  check_learned_positions(pos, grad_table.shape[0]);
  if (dtype != DType::f32) {
    detail::check_unit_last_stride("learned", "grad_out", grad_out);
    cpu::learned_rows_backward16(grad16, dtype, pos, strided<2>(grad_table));
    return;
  }
  cpu::learned_rows_backward(grad, pos, strided<2>(grad_table));
}

// ---------------------------------------------------------------- binary
void validate(const BinaryConfig& c) {
  if (c.bits < 1 || c.bits > 62) fail_arg("binary", "bits", c.bits, "must be in [1, 62]");
}

int64_t binary_bits_for_length(int64_t max_len) {
  if (max_len < 1) fail_arg("binary", "max_len", max_len, "must be >= 1");
  int64_t bits = 1;
  while (bits < 62 && (int64_t{1} << bits) < max_len) ++bits;
  return bits;
}

void binary_table(const BinaryConfig& cfg, ConstTensorView positions, TensorView out) {
  validate(cfg);
  const int64_t n = positions.rank == 1 ? positions.shape[0] : -1;
  check_view("binary", "out", out, DType::f32, {n, cfg.bits});
  const std::vector<int64_t> pos =
      detail::gather_positions_1d("binary", "positions", positions, out.shape[0]);
  for (size_t i = 0; i < pos.size(); ++i) {
    if (pos[i] < 0 || pos[i] >= (int64_t{1} << cfg.bits)) {
      int64_t needed = 1;
      while (needed < 62 && (pos[i] >> needed) != 0) ++needed;
      fail("binary", "position ", pos[i], " (index ", i, ") does not fit in bits = ", cfg.bits,
           pos[i] < 0 ? std::string(": positions must be >= 0")
                      : ": it needs " + std::to_string(needed) + " bits");
    }
  }
  cpu::binary_rows(cfg.bits, cfg.signed_values ? -1.0f : 0.0f, pos, strided<2>(out));
}

}  // namespace posenc
