// src/tensor.cc: view helpers (names, strides, shapes). Validation lives in src/check.cc.
#include "posenc/tensor.h"

#include <sstream>

namespace posenc {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::i64:
      return "i64";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
  }
  return "?";
}
const char* device_name(Device device) { return device == Device::cpu ? "cpu" : "cuda"; }

namespace detail {
Dims contiguous_strides(const Dims& shape, int rank) {
  Dims strides{};
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}
Dims dims_from(std::initializer_list<int64_t> values, int* rank) {
  Dims d{};
  if (values.size() > static_cast<size_t>(kMaxRank)) {
    *rank = -1;  // rejected later with a clear message
    return d;
  }
  int i = 0;
  for (int64_t v : values) d[i++] = v;
  *rank = i;
  return d;
}
}  // namespace detail

int64_t ViewShape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}
bool ViewShape::is_contiguous() const { return strides == detail::contiguous_strides(shape, rank); }
std::string ViewShape::shape_string() const {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < rank; ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

}  // namespace posenc
