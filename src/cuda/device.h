// src/cuda/device.h: host-side checks and launch helpers of the CUDA backend (src/cuda/device.cc), with no
// CUDA types, for the front ends.
#pragma once
#include <cstddef>
#include <string_view>

#include "posenc/tensor.h"

namespace posenc::cuda {

// The view's memory must be device (or managed) memory of the current CUDA device: a host pointer in a
// view marked Device::cuda would fault in the kernel. Empty views pass.
void check_device_memory(std::string_view op, std::string_view name, const ViewShape& v, const void* data);

// Device memory for the length of a call, stream-ordered on posenc::cuda_stream() (cudaMallocAsync, and
// cudaFreeAsync when it goes out of scope, after the kernels queued before that): no synchronization. Its
// bytes are undefined until written (NaN throughout with POSENC_CUDA_POISON_SCRATCH=1, for the tests).
class DeviceScratch {
 public:
  DeviceScratch(std::string_view op, const char* what, size_t bytes);
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  void* data() const { return data_; }
  void zero();              // every byte 0, queued on the stream
  void zero(size_t bytes);  // the first `bytes` bytes 0
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Throws posenc::Error "<op>: <what> failed: <CUDA's message>" if the last launch on this thread failed.
void check_launch(std::string_view op, const char* what);

}  // namespace posenc::cuda
