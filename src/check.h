// src/check.h: argument validation shared by every front end. Each failure throws posenc::Error
// with "<op>: <argument> = <value> is invalid: <requirement>".
#pragma once
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/error.h"
#include "posenc/tensor.h"

namespace posenc::detail {

template <typename... Parts>
[[noreturn]] void fail(std::string_view op, const Parts&... parts) {
  std::ostringstream os;
  os.precision(17);
  os << op << ": ";
  (os << ... << parts);
  throw Error(os.str());
}

template <typename V>
[[noreturn]] void fail_arg(std::string_view op, std::string_view arg, const V& value,
                           std::string_view requirement) {
  fail(op, arg, " = ", value, " is invalid: ", requirement);
}

inline void check_finite(std::string_view op, std::string_view arg, double value) {
  if (!std::isfinite(value)) fail_arg(op, arg, value, "must be finite");
}
inline void check_positive(std::string_view op, std::string_view arg, double value) {
  check_finite(op, arg, value);
  if (!(value > 0)) fail_arg(op, arg, value, "must be > 0");
}

std::string to_string(const std::vector<int64_t>& values);

// A CUDA view in a build without the CUDA backend.
[[noreturn]] inline void fail_without_cuda(std::string_view op, std::string_view name) {
  fail(op, name,
       " is on device cuda, but this build of posenc has no CUDA backend (CMake POSENC_CUDA=ON with a "
       "CUDA compiler)");
}
// The view must be on `device` (the call's: that of its first tensor, or cpu for ops without a CUDA backend).
void check_device(std::string_view op, std::string_view name, const ViewShape& v, Device device);
// Checks dtype, device, rank, non-null data and (where expected[i] >= 0) each dimension.
// `expected` uses -1 for "any". Names the view and its shape on failure.
void check_view(std::string_view op, std::string_view name, const ViewShape& v, DType dtype,
                std::initializer_list<int64_t> expected, const void* data, Device device = Device::cpu);
inline void check_view(std::string_view op, std::string_view name, const ConstTensorView& v, DType dtype,
                       std::initializer_list<int64_t> expected) {
  check_view(op, name, v, dtype, expected, v.data);
}
inline void check_view(std::string_view op, std::string_view name, const TensorView& v, DType dtype,
                       std::initializer_list<int64_t> expected) {
  check_view(op, name, v, dtype, expected, v.data);
}
// The storage an activation view is checked against: its own dtype when it is bf16 or fp16, else
// f32 (so that any other dtype fails check_view with "expected f32").
inline DType activation_dtype(const ViewShape& v) {
  return v.dtype == DType::bf16 || v.dtype == DType::f16 ? v.dtype : DType::f32;
}
// The last dimension must have unit stride (SIMD rows).
void check_unit_last_stride(std::string_view op, std::string_view name, const ViewShape& v);

// Copies an int64 view of rank 1 with `n` entries into a contiguous vector, range-checked
// (check_position_range).
std::vector<int64_t> gather_positions_1d(std::string_view op, std::string_view name,
                                         const ConstTensorView& positions, int64_t n);
// Where position (s, b, t) of a checked positions view is: data[s * stream + b * batch + t * token]
// (stream and batch strides 0 where the view has no such dimension).
struct PositionLayout {
  const int64_t* data = nullptr;
  int64_t stream_stride = 0, batch_stride = 0, token_stride = 0;
  int64_t at(int64_t s, int64_t b, int64_t t) const {
    return data[s * stream_stride + b * batch_stride + t * token_stride];
  }
};
// Checks a positions view of (B, T) tokens with `streams` streams on `device` (the forms below) without
// reading it.
PositionLayout check_positions(std::string_view op, const ConstTensorView& positions, int64_t streams,
                               int64_t batch, int64_t tokens, Device device);
// Positions for (B, T) tokens with `streams` streams: accepts (T), (B, T) when streams == 1, and
// (S, T), (S, B, T) otherwise. Returns a contiguous (S, B, T) copy (broadcast over B if needed),
// range-checked (check_position_range).
std::vector<int64_t> gather_positions(std::string_view op, const ConstTensorView& positions, int64_t streams,
                                      int64_t batch, int64_t tokens);

// The whole text of a regular file of at most max_bytes (config files: no FIFO, device or
// directory, nothing that would block or never end); errors name the path.
std::string read_text_file(std::string_view op, const std::string& path,
                           int64_t max_bytes = int64_t{16} << 20);

// Positions beyond 2^53 cannot be represented exactly in the double math of the angles.
inline constexpr int64_t kMaxAbsPosition = int64_t{1} << 53;
void check_position_range(std::string_view op, const std::vector<int64_t>& positions, int64_t offset = 0);
}  // namespace posenc::detail
