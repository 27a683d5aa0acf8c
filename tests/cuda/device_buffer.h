// tests/cuda/device_buffer.h: device memory for the GPU tests: a vector's copy on the device, copied back,
// and the skip every GPU test starts with (GPU tests skip, never pass, without a device).
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "posenc/device.h"

#define POSENC_SKIP_WITHOUT_GPU()                                                  \
  do {                                                                             \
    if (::posenc::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device here"; \
  } while (0)

namespace posenc::test {

inline void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// n elements of T in device memory; from_host copies a vector in, to_host copies back (synchronizing).
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&data_), std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc");
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { from_host(host); }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return data_; }
  void from_host(const std::vector<T>& host) {
    cuda_ok(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "copy in");
  }
  // Every byte 0xff: NaN in fp32, bf16 and fp16, so an element the kernel never wrote shows.
  void poison() { cuda_ok(cudaMemset(data_, 0xff, n_ * sizeof(T)), "cudaMemset"); }
  std::vector<T> to_host() const {
    cuda_ok(cudaDeviceSynchronize(), "kernel");
    std::vector<T> host(n_);
    cuda_ok(cudaMemcpy(host.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "copy out");
    return host;
  }

 private:
  size_t n_;
  T* data_ = nullptr;
};

}  // namespace posenc::test
