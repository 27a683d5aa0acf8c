// src/check.cc: argument validation shared by every front end (see check.h).
#include "src/check.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

namespace posenc {
namespace detail {

std::string to_string(const std::vector<int64_t>& values) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < values.size(); ++i) os << (i ? ", " : "") << values[i];
  os << "]";
  return os.str();
}

void check_device(std::string_view op, std::string_view name, const ViewShape& v, Device device) {
  if (v.device == device) return;
  if (device == Device::cpu)
    fail(op, name, " is on device ", device_name(v.device), ", expected cpu (", op,
         " runs on the device of its first tensor, and on cpu tensors only where it has no CUDA backend)");
  fail(op, name, " is on device ", device_name(v.device), ", expected ", device_name(device),
       " (every tensor of a call on the device of its first tensor)");
}

void check_view(std::string_view op, std::string_view name, const ViewShape& v, DType dtype,
                std::initializer_list<int64_t> expected, const void* data, Device device) {
  if (v.rank < 0 || v.rank > kMaxRank)
    fail(op, name, " has an invalid rank (shape and strides differ in length)");
  check_device(op, name, v, device);
  if (v.dtype != dtype) fail(op, name, " has dtype ", dtype_name(v.dtype), ", expected ", dtype_name(dtype));
  if (static_cast<size_t>(v.rank) != expected.size()) {
    std::vector<int64_t> e(expected);
    fail(op, name, " has shape ", v.shape_string(), " (rank ", v.rank, "), expected rank ", e.size(), " ",
         to_string(e), " (-1 = any)");
  }
  int i = 0;
  for (int64_t e : expected) {
    if (v.shape[i] < 0) fail(op, name, " has a negative dimension: ", v.shape_string());
    if (e >= 0 && v.shape[i] != e) {
      std::vector<int64_t> ev(expected);
      fail(op, name, " has shape ", v.shape_string(), ", expected ", to_string(ev), " (-1 = any)");
    }
    ++i;
  }
  if (data == nullptr && v.numel() > 0) fail(op, name, " has a null data pointer");
}

void check_unit_last_stride(std::string_view op, std::string_view name, const ViewShape& v) {
  if (v.rank > 0 && v.shape[v.rank - 1] > 1 && v.strides[v.rank - 1] != 1)
    fail(op, name, " must have a unit stride on its last dimension, got stride ", v.strides[v.rank - 1]);
}

std::vector<int64_t> gather_positions_1d(std::string_view op, std::string_view name,
                                         const ConstTensorView& positions, int64_t n) {
  check_view(op, name, positions, DType::i64, {n});
  std::vector<int64_t> out(n);
  const int64_t* p = positions.ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) out[i] = p[i * positions.strides[0]];
  check_position_range(op, out);
  return out;
}

PositionLayout check_positions(std::string_view op, const ConstTensorView& positions, int64_t streams,
                               int64_t batch, int64_t tokens, Device device) {
  const ViewShape& v = positions;
  if (v.rank < 0 || v.rank > kMaxRank) fail(op, "positions has an invalid rank");
  if (v.dtype != DType::i64) fail(op, "positions has dtype ", dtype_name(v.dtype), ", expected i64");
  check_device(op, "positions", v, device);
  // Normalise to (S, B?, T): figure out which form was given.
  std::ostringstream forms;
  if (streams > 1)
    forms << "(" << streams << ", T=" << tokens << ") or (" << streams << ", B=" << batch << ", T=" << tokens
          << ") for " << streams << " position streams";
  else
    forms << "(T=" << tokens << ") or (B=" << batch << ", T=" << tokens << ")";
  const bool has_stream = streams > 1;
  const int rank_without_batch = has_stream ? 2 : 1;
  if (v.rank != rank_without_batch && v.rank != rank_without_batch + 1)
    fail(op, "positions has shape ", v.shape_string(), ", expected ", forms.str());
  const bool has_batch = v.rank == rank_without_batch + 1;
  int d = 0;
  int64_t s_stride = 0, b_stride = 0;
  if ((has_stream && v.shape[0] != streams) || (has_batch && v.shape[has_stream ? 1 : 0] != batch) ||
      v.shape[v.rank - 1] != tokens)
    fail(op, "positions has shape ", v.shape_string(), ", expected ", forms.str());
  if (has_stream) s_stride = v.strides[d++];
  if (has_batch) b_stride = v.strides[d++];
  const int64_t t_stride = v.strides[d];
  if (v.numel() > 0 && positions.data == nullptr) fail(op, "positions has a null data pointer");
  return {positions.ptr<int64_t>(), s_stride, b_stride, t_stride};
}

std::vector<int64_t> gather_positions(std::string_view op, const ConstTensorView& positions, int64_t streams,
                                      int64_t batch, int64_t tokens) {
  const PositionLayout p = check_positions(op, positions, streams, batch, tokens, Device::cpu);
  std::vector<int64_t> out(streams * batch * tokens);
  for (int64_t s = 0; s < streams; ++s)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < tokens; ++t) out[(s * batch + b) * tokens + t] = p.at(s, b, t);
  check_position_range(op, out);
  return out;
}

void check_position_range(std::string_view op, const std::vector<int64_t>& positions, int64_t offset) {
  for (size_t i = 0; i < positions.size(); ++i) {
    const int64_t p = positions[i];
    if (p > kMaxAbsPosition || p < -kMaxAbsPosition || p + offset > kMaxAbsPosition ||
        p + offset < -kMaxAbsPosition)
      fail(op, "position ", p, " (index ", i, ") is outside [-2^53, 2^53]");
  }
}

std::string read_text_file(std::string_view op, const std::string& path, int64_t max_bytes) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) fail(op, "cannot open config file '", path, "'");
  if (!S_ISREG(st.st_mode)) fail(op, "config file '", path, "' is not a regular file");
  if (st.st_size > max_bytes)
    fail(op, "config file '", path, "' has ", st.st_size, " bytes, more than the limit of ", max_bytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(op, "cannot open config file '", path, "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace detail
}  // namespace posenc
