// posenc/tensor.h: non-owning strided views, the currency of every posenc operation.
//
// A view is (pointer, dtype, device, shape, strides in elements). posenc never allocates or
// frees the memory behind a view. Shapes are written in the docs of each op in one vocabulary:
//   B batch, T (or Q/K) sequence length, H heads, D head_dim, N a flat number of positions.
// The CPU backend computes on f32 data and i64 positions; RoPE also takes bf16 and fp16 storage
// (bf16_t, f16_t below). A view's device says where its memory is: Device::cuda views are device
// memory (cudaMalloc'd or managed), used by the ops that have a CUDA backend (posenc/device.h).
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

namespace posenc {

enum class DType : uint8_t { f32, f64, i64, bf16, f16 };
enum class Device : uint8_t { cpu, cuda };

const char* dtype_name(DType dtype);
const char* device_name(Device device);

inline constexpr int kMaxRank = 4;
using Dims = std::array<int64_t, kMaxRank>;

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}

// 16-bit storage: the bits of a bfloat16 (the top half of an fp32) or an IEEE binary16 value.
// Views of these are accepted where an op says so; posenc widens them to fp32 to compute and
// rounds once (to nearest even) when it stores.
struct bf16_t {
  uint16_t bits;
};
struct f16_t {
  uint16_t bits;
};
template <>
constexpr DType dtype_of<bf16_t>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<f16_t>() {
  return DType::f16;
}

namespace detail {
// Row-major strides for a shape.
Dims contiguous_strides(const Dims& shape, int rank);
Dims dims_from(std::initializer_list<int64_t> values, int* rank);
}  // namespace detail

// Shared fields of the two view kinds.
struct ViewShape {
  DType dtype = DType::f32;
  Device device = Device::cpu;
  int rank = 0;
  Dims shape{};
  Dims strides{};  // in elements, not bytes

  int64_t size(int dim) const { return shape[dim]; }
  int64_t numel() const;
  bool is_contiguous() const;
  std::string shape_string() const;  // "[2, 16, 8, 64]"
};

// Read-only view.
struct ConstTensorView : ViewShape {
  const void* data = nullptr;
  template <typename T>
  const T* ptr() const {
    return static_cast<const T*>(data);
  }
};

// Writable view; converts implicitly to a read-only one.
struct TensorView : ViewShape {
  void* data = nullptr;
  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }
  operator ConstTensorView() const {  // NOLINT(google-explicit-constructor)
    ConstTensorView v;
    static_cast<ViewShape&>(v) = *this;
    v.data = data;
    return v;
  }
};

namespace detail {
template <typename View, typename T>
View make_view(T* data, std::initializer_list<int64_t> shape) {
  View v;
  v.dtype = dtype_of<std::remove_const_t<T>>();
  v.shape = dims_from(shape, &v.rank);
  v.strides = contiguous_strides(v.shape, v.rank);
  v.data = data;
  return v;
}
template <typename View, typename T>
View make_strided_view(T* data, std::initializer_list<int64_t> shape,
                       std::initializer_list<int64_t> strides) {
  View v = make_view<View>(data, shape);
  int rank = 0;
  v.strides = dims_from(strides, &rank);
  if (rank != v.rank) v.rank = -1;  // rejected by every op with a clear message
  return v;
}
}  // namespace detail

// Contiguous (row-major) views, of host memory unless a device is given.
template <typename T>
TensorView view(T* data, std::initializer_list<int64_t> shape, Device device = Device::cpu) {
  TensorView v = detail::make_view<TensorView>(data, shape);
  v.device = device;
  return v;
}
template <typename T>
ConstTensorView view(const T* data, std::initializer_list<int64_t> shape, Device device = Device::cpu) {
  ConstTensorView v = detail::make_view<ConstTensorView>(data, shape);
  v.device = device;
  return v;
}
// Strided views (strides in elements), e.g. q and k slices of a fused qkv buffer.
template <typename T>
TensorView strided_view(T* data, std::initializer_list<int64_t> shape, std::initializer_list<int64_t> strides,
                        Device device = Device::cpu) {
  TensorView v = detail::make_strided_view<TensorView>(data, shape, strides);
  v.device = device;
  return v;
}
template <typename T>
ConstTensorView strided_view(const T* data, std::initializer_list<int64_t> shape,
                             std::initializer_list<int64_t> strides, Device device = Device::cpu) {
  ConstTensorView v = detail::make_strided_view<ConstTensorView>(data, shape, strides);
  v.device = device;
  return v;
}

}  // namespace posenc
