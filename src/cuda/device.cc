// src/cuda/device.cc: the CUDA runtime calls behind posenc/device.h and src/cuda/device.h (host code).
#include "src/cuda/device.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>

#include "posenc/device.h"
#include "src/check.h"

namespace posenc {
namespace cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: not an error of a later call
    return 0;
  }
  return n;
}

void check_device_memory(std::string_view op, std::string_view name, const ViewShape& v, const void* data) {
  if (data == nullptr || v.numel() == 0) return;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, data) != cudaSuccess) {
    const cudaError_t e = cudaGetLastError();
    detail::fail(op, name, " is marked cuda but its pointer could not be checked: ", cudaGetErrorString(e));
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
    detail::fail(op, name, " is marked cuda but points to ",
                 attr.type == cudaMemoryTypeHost ? "page-locked host memory" : "host memory",
                 ", not CUDA device memory");
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess) {
    const cudaError_t e = cudaGetLastError();
    detail::fail(op, "no current CUDA device: ", cudaGetErrorString(e));
  }
  if (attr.type == cudaMemoryTypeDevice && attr.device != current)
    detail::fail(op, name, " is on CUDA device ", attr.device, ", but the current device is ", current,
                 " (cudaSetDevice, or torch.cuda.device, before the call)");
}

namespace {
// POSENC_CUDA_POISON_SCRATCH=1 (the GPU tests): every scratch allocation filled with 0xFF bytes (NaN as
// floats) before use, so that a kernel reading what nothing wrote shows NaN instead of the zeros a fresh
// allocation often holds.
bool poison_scratch() {
  static const bool poison = [] {
    const char* v = std::getenv("POSENC_CUDA_POISON_SCRATCH");
    return v != nullptr && v[0] != '\0' && v[0] != '0';
  }();
  return poison;
}
}  // namespace

DeviceScratch::DeviceScratch(std::string_view op, const char* what, size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const auto stream = static_cast<cudaStream_t>(cuda_stream());
  const cudaError_t e = cudaMallocAsync(&data_, bytes, stream);
  if (e != cudaSuccess) {
    cudaGetLastError();
    detail::fail(op, "could not allocate ", bytes, " bytes of device memory for ", what, ": ",
                 cudaGetErrorString(e));
  }
  if (poison_scratch()) cudaMemsetAsync(data_, 0xFF, bytes, stream);
}

void DeviceScratch::zero() { zero(bytes_); }

void DeviceScratch::zero(size_t bytes) {
  if (data_ != nullptr && bytes > 0)
    cudaMemsetAsync(data_, 0, std::min(bytes, bytes_), static_cast<cudaStream_t>(cuda_stream()));
}

DeviceScratch::~DeviceScratch() {
  if (data_ != nullptr) cudaFreeAsync(data_, static_cast<cudaStream_t>(cuda_stream()));
}

void check_launch(std::string_view op, const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) detail::fail(op, what, " failed: ", cudaGetErrorName(e), ": ", cudaGetErrorString(e));
}

}  // namespace cuda
}  // namespace posenc
