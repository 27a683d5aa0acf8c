// src/strided.h: the one strided view type inside the library (front ends, plans and backends).
// A typed pointer with N extents and strides in elements, its dimensions in the order of the
// shape comment beside it, in the public vocabulary (B batch, T/Q/K tokens, H heads, D head_dim):
//   Strided<const float, 3> q;  // rows (B, Q, H) of D contiguous elements
// A view whose last dimension has unit stride is usually taken as rows: the first N dimensions.
#pragma once
#include <array>
#include <cstdint>
#include <type_traits>

#include "posenc/tensor.h"

namespace posenc {

template <typename T, int N>
struct Strided {
  T* data = nullptr;
  std::array<int64_t, N> extent{};
  std::array<int64_t, N> stride{};

  // The element (or row start) at index (i0, ..., iN-1).
  template <typename... I>
  T* at(I... index) const {
    static_assert(sizeof...(I) == N, "one index per dimension");
    int64_t offset = 0, k = 0;
    ((offset += static_cast<int64_t>(index) * stride[k++]), ...);
    return data + offset;
  }
  template <typename... I>
  T& operator()(I... index) const {
    return *at(index...);
  }
  bool empty() const { return data == nullptr; }
  // The same rows from their element `first` on (a sub-range of each row, e.g. RoPE's dims).
  Strided columns_from(int64_t first) const { return {data + first, extent, stride}; }
  // A writable view reads as a read-only one.
  operator Strided<const T, N>() const  // NOLINT(google-explicit-constructor)
      requires(!std::is_const_v<T>) {
    return {data, extent, stride};
  }
};

// The first N dimensions of a validated view (N <= rank; the rest must be unit-stride rows), as
// elements of type T.
template <typename T, int N, typename View>
Strided<T, N> strided_as(const View& v) {
  Strided<T, N> s;
  s.data = static_cast<T*>(v.data);
  for (int i = 0; i < N; ++i) s.extent[i] = v.shape[i], s.stride[i] = v.strides[i];
  return s;
}
template <int N>
Strided<const float, N> strided(const ConstTensorView& v) {
  return strided_as<const float, N>(v);
}
template <int N>
Strided<float, N> strided(const TensorView& v) {
  return strided_as<float, N>(v);
}
// The same for a view of 16-bit storage (bf16 / fp16 bits; the view's dtype says which).
template <int N>
Strided<const uint16_t, N> strided16(const ConstTensorView& v) {
  return strided_as<const uint16_t, N>(v);
}
template <int N>
Strided<uint16_t, N> strided16(const TensorView& v) {
  return strided_as<uint16_t, N>(v);
}
// A contiguous row-major buffer of the given extents.
template <typename T, int N>
Strided<T, N> contiguous(T* data, std::array<int64_t, N> extent) {
  Strided<T, N> s;
  s.data = data;
  s.extent = extent;
  int64_t step = 1;
  for (int i = N - 1; i >= 0; --i) s.stride[i] = step, step *= extent[i];
  return s;
}

}  // namespace posenc
