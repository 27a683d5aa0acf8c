// tools/attention_device.cc: `posenc attention --device cuda` (tools/attention_device.h).
#include "attention_device.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "posenc/device.h"
#include "posenc/error.h"

#if POSENC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace posenc::tools {

#if POSENC_WITH_CUDA
namespace {

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("--device cuda: ") + what + ": " + cudaGetErrorString(e));
}

size_t element_bytes(DType dtype) {
  switch (dtype) {
    case DType::i64:
      return 8;
    case DType::f32:
      return 4;
    default:
      return 2;
  }
}

// A device copy of a contiguous host view (same shape, dtype and strides), freed with the object.
class DeviceCopy {
 public:
  explicit DeviceCopy(const ViewShape& v, const void* host) : view_(v) {
    bytes_ = static_cast<size_t>(v.numel()) * element_bytes(v.dtype);
    cuda_ok(cudaMalloc(&data_, std::max<size_t>(bytes_, 1)), "cudaMalloc");
    if (host != nullptr)
      cuda_ok(cudaMemcpy(data_, host, bytes_, cudaMemcpyHostToDevice), "copy to the device");
    view_.device = Device::cuda;
  }
  ~DeviceCopy() { cudaFree(data_); }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  ConstTensorView in() const {
    ConstTensorView v;
    static_cast<ViewShape&>(v) = view_;
    v.data = data_;
    return v;
  }
  TensorView out() const {
    TensorView v;
    static_cast<ViewShape&>(v) = view_;
    v.data = data_;
    return v;
  }
  void to_host(void* host) const {
    cuda_ok(cudaMemcpy(host, data_, bytes_, cudaMemcpyDeviceToHost), "copy back");
  }

 private:
  ViewShape view_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace

double attention_forward_on_cuda(const AttentionConfig& config, const AttentionInputs& in, TensorView out,
                                 TensorView lse, int64_t repeat) {
  if (cuda_device_count() == 0) throw Error("--device cuda: no CUDA device here");
  for (const ViewShape* v : {&static_cast<const ViewShape&>(in.q), &static_cast<const ViewShape&>(in.k),
                             &static_cast<const ViewShape&>(in.v), &static_cast<const ViewShape&>(out)})
    if (!v->is_contiguous()) throw Error("--device cuda: the inputs must be contiguous");
  const DeviceCopy q(in.q, in.q.data), k(in.k, in.k.data), v(in.v, in.v.data), o(out, nullptr),
      l(lse, nullptr);
  AttentionConfig c = config;
  std::vector<std::unique_ptr<DeviceCopy>> tables;
  for (ConstTensorView* t : {&c.bias.relative_table, &c.sinks})
    if (t->data != nullptr) {
      tables.push_back(std::make_unique<DeviceCopy>(*t, t->data));
      *t = tables.back()->in();
    }
  const AttentionInputs device_in = qkv(q.in(), k.in(), v.in());
  double best = INFINITY;
  for (int64_t r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    attention_forward(c, device_in, o.out(), l.out());
    cuda_ok(cudaDeviceSynchronize(), "the attention kernels");
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  o.to_host(out.data);
  l.to_host(lse.data);
  return best;
}

#else

double attention_forward_on_cuda(const AttentionConfig&, const AttentionInputs&, TensorView, TensorView,
                                 int64_t) {
  throw Error("--device cuda: this build of posenc has no CUDA backend (build it where nvcc is found)");
}

#endif

}  // namespace posenc::tools
