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
  void zero() const { cuda_ok(cudaMemset(data_, 0, bytes_), "cudaMemset"); }

 private:
  ViewShape view_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// The config with every table it holds (the relative table, sinks, Shaw's a_k and a_v, Transformer-XL's u, v
// and W_R) copied to the device; the copies live in `tables`.
AttentionConfig device_config(const AttentionConfig& config,
                              std::vector<std::unique_ptr<DeviceCopy>>& tables) {
  AttentionConfig c = config;
  std::vector<ConstTensorView*> views = {&c.bias.relative_table, &c.sinks};
  if (c.shaw) views.push_back(&c.shaw->a_k), views.push_back(&c.shaw->a_v);
  if (c.transformer_xl)
    views.push_back(&c.transformer_xl->u), views.push_back(&c.transformer_xl->v),
        views.push_back(&c.transformer_xl->w_r);
  for (ConstTensorView* t : views)
    if (t->data != nullptr) {
      tables.push_back(std::make_unique<DeviceCopy>(*t, t->data));
      *t = tables.back()->in();
    }
  return c;
}

void check_contiguous(std::initializer_list<const ViewShape*> views) {
  if (cuda_device_count() == 0) throw Error("--device cuda: no CUDA device here");
  for (const ViewShape* v : views)
    if (!v->is_contiguous()) throw Error("--device cuda: the inputs must be contiguous");
}

}  // namespace

double attention_forward_on_cuda(const AttentionConfig& config, const AttentionInputs& in, TensorView out,
                                 TensorView lse, int64_t repeat) {
  check_contiguous({&in.q, &in.k, &in.v, &out});
  const DeviceCopy q(in.q, in.q.data), k(in.k, in.k.data), v(in.v, in.v.data), o(out, nullptr),
      l(lse, nullptr);
  std::vector<std::unique_ptr<DeviceCopy>> tables;
  const AttentionConfig c = device_config(config, tables);
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

double attention_backward_on_cuda(const AttentionConfig& config, const AttentionInputs& in,
                                  ConstTensorView out, ConstTensorView lse, ConstTensorView grad_out,
                                  const AttentionGrads& grads, int64_t repeat) {
  check_contiguous({&in.q, &in.k, &in.v, &out, &lse, &grad_out, &grads.q, &grads.k, &grads.v});
  const DeviceCopy q(in.q, in.q.data), k(in.k, in.k.data), v(in.v, in.v.data), o(out, out.data),
      l(lse, lse.data), go(grad_out, grad_out.data), dq(grads.q, nullptr), dk(grads.k, nullptr),
      dv(grads.v, nullptr);
  std::vector<std::unique_ptr<DeviceCopy>> tables;
  const AttentionConfig c = device_config(config, tables);
  const AttentionInputs device_in = qkv(q.in(), k.in(), v.in());
  AttentionGrads g;
  g.q = dq.out(), g.k = dk.out(), g.v = dv.out();
  double best = INFINITY;
  for (int64_t r = 0; r < repeat; ++r) {
    for (const DeviceCopy* d : {&dq, &dk, &dv}) d->zero();  // the gradients are added into: from 0 each run
    cuda_ok(cudaDeviceSynchronize(), "zeroing the gradients");
    const auto t0 = std::chrono::steady_clock::now();
    attention_backward(c, device_in, o.in(), l.in(), go.in(), g);
    cuda_ok(cudaDeviceSynchronize(), "the attention backward's kernels");
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  dq.to_host(grads.q.data), dk.to_host(grads.k.data), dv.to_host(grads.v.data);
  return best;
}

#else

double attention_forward_on_cuda(const AttentionConfig&, const AttentionInputs&, TensorView, TensorView,
                                 int64_t) {
  throw Error("--device cuda: this build of posenc has no CUDA backend (build it where nvcc is found)");
}
double attention_backward_on_cuda(const AttentionConfig&, const AttentionInputs&, ConstTensorView,
                                  ConstTensorView, ConstTensorView, const AttentionGrads&, int64_t) {
  throw Error("--device cuda: this build of posenc has no CUDA backend (build it where nvcc is found)");
}

#endif

}  // namespace posenc::tools
