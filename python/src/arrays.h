// python/src/arrays.h: numpy arrays (through nanobind's ndarray) as posenc views, without copies.
// The Python layer (python/posenc/_checks.py, called by every public function) has already converted
// dtypes, and the module functions allocated the outputs; here
// an array becomes a view with its own strides, and a wrong dtype or rank is a posenc::Error
// naming the argument (raised in Python as posenc.Error, a ValueError).
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <initializer_list>
#include <optional>
#include <string>

#include "posenc/bias.h"
#include "posenc/error.h"
#include "posenc/tensor.h"

namespace posenc::python {

namespace nb = nanobind;
using InArray = nb::ndarray<nb::ro, nb::device::cpu>;  // read-only input, any dtype
using OutArray = nb::ndarray<nb::device::cpu>;         // writable output
using OptInArray = std::optional<InArray>;
using OptOutArray = std::optional<OutArray>;

// storage16: the dtype of a uint16 array that holds bf16 or fp16 bits (the Python layer passes
// x.view(np.uint16) and the storage's name); f32 = a uint16 array is an error.
template <typename Array>
void fill_shape(const Array& a, const char* name, ViewShape& v, DType storage16 = DType::f32) {
  if (a.ndim() > static_cast<size_t>(kMaxRank))
    throw Error(std::string(name) + ": rank " + std::to_string(a.ndim()) + " is not supported (at most " +
                std::to_string(kMaxRank) + ")");
  const nb::dlpack::dtype t = a.dtype();
  if (t == nb::dtype<float>())
    v.dtype = DType::f32;
  else if (t == nb::dtype<double>())
    v.dtype = DType::f64;
  else if (t == nb::dtype<int64_t>())
    v.dtype = DType::i64;
  else if (t == nb::dtype<uint16_t>() && storage16 != DType::f32)
    v.dtype = storage16;
  else
    throw Error(std::string(name) + ": dtype (code " + std::to_string(t.code) + ", " +
                std::to_string(t.bits) + " bits) is not float32, float64 or int64");
  v.rank = static_cast<int>(a.ndim());
  for (int i = 0; i < v.rank; ++i) {
    v.shape[static_cast<size_t>(i)] = static_cast<int64_t>(a.shape(static_cast<size_t>(i)));
    v.strides[static_cast<size_t>(i)] = a.stride(static_cast<size_t>(i));  // nanobind strides are in elements
  }
}

inline ConstTensorView in_view(const InArray& a, const char* name, DType storage16 = DType::f32) {
  ConstTensorView v;
  fill_shape(a, name, v, storage16);
  v.data = a.data();
  return v;
}
inline ConstTensorView in_view(const OptInArray& a, const char* name) {
  return a ? in_view(*a, name) : ConstTensorView{};
}

inline TensorView out_view(const OutArray& a, const char* name, DType storage16 = DType::f32) {
  TensorView v;
  fill_shape(a, name, v, storage16);
  v.data = a.data();
  return v;
}
inline TensorView out_view(const OptOutArray& a, const char* name) {
  return a ? out_view(*a, name) : TensorView{};
}

// "f32", "bf16" or "f16": the storage of an activation array (python/posenc/_checks.py storage()).
inline DType storage_dtype(const std::string& storage) {
  if (storage == "bf16") return DType::bf16;
  if (storage == "f16") return DType::f16;
  if (storage == "f32") return DType::f32;
  throw Error("storage = '" + storage + "' is invalid: expected f32, bf16 or f16");
}

// Configurations shared by several parts (validated; errors name the field).
RelativeBiasConfig relative_config(int64_t heads, const std::string& bucketing, int64_t num_buckets,
                                   int64_t max_distance, bool bidirectional);
AlibiConfig alibi_config(int64_t heads, const std::string& slopes, double alibi_bias_max, bool symmetric);

// Registration of each part of the module.
void bind_absolute(nb::module_& m);
void bind_rope(nb::module_& m);
void bind_bias(nb::module_& m);
void bind_attention(nb::module_& m);
void bind_model(nb::module_& m);
void bind_kv_cache(nb::module_& m);
void bind_mrope(nb::module_& m);
void bind_cuda_ops(nb::module_& m);

// An enum from its name (`name` maps each option to the string the Python API uses).
template <typename Enum>
Enum parse_enum(const std::string& what, const std::string& value, std::initializer_list<Enum> options,
                const char* (*name)(Enum)) {
  std::string expected;
  for (Enum e : options) {
    if (value == name(e)) return e;
    expected += (expected.empty() ? "'" : ", '") + std::string(name(e)) + "'";
  }
  throw Error(what + " = '" + value + "' is invalid: expected one of " + expected);
}

}  // namespace posenc::python
