// python/src/device_views.h: views of CUDA tensors handed over by posenc.torch as (data pointer, shape,
// strides in elements), with the stream the call queues on (torch.cuda.current_stream().cuda_stream).
// The library checks them as any view: shape, dtype, and that the pointer is device memory of the
// current device.
#pragma once
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "posenc/error.h"
#include "posenc/tensor.h"

namespace posenc::python {

inline TensorView cuda_view(uintptr_t data, const std::vector<int64_t>& shape,
                            const std::vector<int64_t>& strides, DType dtype, const char* name) {
  if (shape.size() != strides.size() || shape.size() > static_cast<size_t>(kMaxRank))
    throw Error(std::string(name) + ": shape and strides must have the same length, at most 4");
  TensorView v;
  v.data = reinterpret_cast<void*>(data);
  v.dtype = dtype;
  v.device = Device::cuda;
  v.rank = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) v.shape[i] = shape[i], v.strides[i] = strides[i];
  return v;
}

// (data pointer, shape, strides in elements, dtype name) of a CUDA tensor, as posenc.torch hands it over.
using CudaSpec = std::tuple<uintptr_t, std::vector<int64_t>, std::vector<int64_t>, std::string>;

inline DType cuda_dtype_of_name(const std::string& name) {
  if (name == "f32") return DType::f32;
  if (name == "bf16") return DType::bf16;
  if (name == "f16") return DType::f16;
  if (name == "i64") return DType::i64;
  throw Error("dtype '" + name + "' is not supported on CUDA tensors (f32, bf16, f16, i64)");
}

inline TensorView cuda_view(const CudaSpec& s, const char* name) {
  return cuda_view(std::get<0>(s), std::get<1>(s), std::get<2>(s), cuda_dtype_of_name(std::get<3>(s)), name);
}

}  // namespace posenc::python
