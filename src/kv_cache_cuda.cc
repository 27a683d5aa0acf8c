// src/kv_cache_cuda.cc: KVCache on a CUDA device (posenc/kv_cache.h): the same head-major layout as the CPU
// cache, (B, Hkv, capacity, D) keys and values and (B, capacity) positions, in device memory grown by
// doubling. Every check reads shapes and sizes on the host; the data stays on the device (no
// synchronization).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>

#include "posenc/device.h"
#include "posenc/kv_cache.h"
#include "src/check.h"

#if POSENC_WITH_CUDA_ATTENTION
#include <cuda_runtime_api.h>

#include "src/cuda/attention.h"
#include "src/cuda/device.h"
#include "src/cuda/kv_cache.h"
#endif

namespace posenc {
using detail::check_view;
using detail::fail;
namespace {
constexpr const char* kOp = "KVCache";
}

#if POSENC_WITH_CUDA_ATTENTION
namespace {

std::shared_ptr<void> device_alloc(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail(kOp, "could not allocate ", bytes, " bytes of device memory: ", cudaGetErrorString(e));
  }
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

// The rows (B, T) of a head-major store's first `rows` tokens per (b, h) block, copied into a new one.
void copy_blocks(const void* from, void* to, int64_t blocks, int64_t from_pitch, int64_t to_pitch,
                 int64_t bytes) {
  if (bytes == 0 || blocks == 0) return;
  const cudaError_t e = cudaMemcpy2DAsync(
      to, static_cast<size_t>(to_pitch), from, static_cast<size_t>(from_pitch), static_cast<size_t>(bytes),
      static_cast<size_t>(blocks), cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(cuda_stream()));
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail(kOp, "growing the cache failed: ", cudaGetErrorString(e));
  }
}

}  // namespace

void KVCache::reserve_cuda(int64_t tokens) {
  const int64_t row = head_dim_ * 2;  // bytes per token of a 16-bit head
  std::shared_ptr<void> k = device_alloc(static_cast<size_t>(batch_ * kv_heads_ * tokens * row));
  std::shared_ptr<void> v = device_alloc(static_cast<size_t>(batch_ * kv_heads_ * tokens * row));
  std::shared_ptr<void> pos = device_alloc(static_cast<size_t>(batch_ * tokens * 8));
  if (size_ > 0) {
    copy_blocks(device_k_.get(), k.get(), batch_ * kv_heads_, capacity_ * row, tokens * row, size_ * row);
    copy_blocks(device_v_.get(), v.get(), batch_ * kv_heads_, capacity_ * row, tokens * row, size_ * row);
    copy_blocks(device_pos_.get(), pos.get(), batch_, capacity_ * 8, tokens * 8, size_ * 8);
    // The old stores are freed (cudaFree waits for the copies) as they go out of scope here.
  }
  device_k_ = std::move(k), device_v_ = std::move(v), device_pos_ = std::move(pos);
  capacity_ = tokens;
}

void KVCache::append_cuda(ConstTensorView k, ConstTensorView v, ConstTensorView positions) {
  if (k.dtype != dtype_)
    fail(kOp, "k has dtype ", dtype_name(k.dtype), ": the cuda cache stores ", dtype_name(dtype_),
         " and takes k and v in it");
  check_view(kOp, "k", k, dtype_, {batch_, -1, kv_heads_, head_dim_}, k.data, Device::cuda);
  const int64_t T = k.shape[1];
  check_view(kOp, "v", v, dtype_, {batch_, T, kv_heads_, head_dim_}, v.data, Device::cuda);
  for (const auto& [name, view] : {std::pair<const char*, const ConstTensorView*>{"k", &k}, {"v", &v}}) {
    detail::check_unit_last_stride(kOp, name, *view);
    if (reinterpret_cast<uintptr_t>(view->data) % 16 != 0 || view->strides[0] % 8 != 0 ||
        view->strides[1] % 8 != 0 || view->strides[2] % 8 != 0)
      fail(kOp, name, " must have 16-byte aligned rows on cuda (data aligned, strides multiples of 8)");
  }
  detail::PositionLayout given;
  if (positions.data != nullptr) {
    given = detail::check_positions(kOp, positions, 1, batch_, T, Device::cuda);
    cuda::check_device_memory(kOp, "positions", positions, positions.data);
  }
  cuda::check_device_memory(kOp, "k", k, k.data);
  cuda::check_device_memory(kOp, "v", v, v.data);
  // Everything is checked: the cache changes from here.
  if (size_ + T > capacity_) reserve(std::max(size_ + T, 2 * capacity_));
  cuda::kv_cache_store(k.data, k.strides.data(), batch_, T, kv_heads_, head_dim_, device_k_.get(), capacity_,
                       size_);
  cuda::kv_cache_store(v.data, v.strides.data(), batch_, T, kv_heads_, head_dim_, device_v_.get(), capacity_,
                       size_);
  int64_t* pos = static_cast<int64_t*>(device_pos_.get());
  cuda::kv_cache_positions(given.data, given.batch_stride, given.token_stride, batch_, T, pos, capacity_,
                           size_);
  if (rope_ !=
      nullptr) {      // the new keys rotated in place at their positions (widened, rotated, rounded once)
    TensorView keys;  // tokens [size, size + T) of the store, (B, T, Hkv, D) head-major
    keys.data = static_cast<uint16_t*>(device_k_.get()) + size_ * head_dim_;
    keys.dtype = dtype_;
    keys.device = Device::cuda;
    keys.rank = 4;
    keys.shape = {batch_, T, kv_heads_, head_dim_};
    keys.strides = {kv_heads_ * capacity_ * head_dim_, head_dim_, capacity_ * head_dim_, 1};
    rope_->forward(keys, strided_view(pos + size_, {batch_, T}, {capacity_, 1}, Device::cuda));
  }
  size_ += T;
}

void KVCache::attend_cuda(const AttentionConfig& config, ConstTensorView q, TensorView out,
                          ConstTensorView q_positions, TensorView lse) const {
  if (config.rope != nullptr && config.rope != rope_)
    fail(kOp, "config.rope differs from the cache's rope (keys are stored rotated by the cache's rope)");
  if (config.rotate_values) fail(kOp, "config.rotate_values = true is not supported by the KV cache");
  if (config.rope_offset != 0)
    fail(kOp, "config.rope_offset = ", config.rope_offset,
         " is invalid here: the cache's rope rotates whole heads");
  if (size_ == 0) fail(kOp, "attend on an empty cache; append keys and values first");
  check_view(kOp, "q", q, detail::activation_dtype(q), {batch_, -1, -1, head_dim_}, q.data, Device::cuda);
  const int64_t T = q.shape[1], H = q.shape[2];
  ConstTensorView qpos = q_positions;
  if (qpos.data == nullptr) {
    if (T > size_) fail(kOp, "q has ", T, " tokens but the cache holds ", size_, ": give q_positions");
    qpos = strided_view(static_cast<const int64_t*>(device_pos_.get()) + size_ - T, {batch_, T},
                        {capacity_, 1}, Device::cuda);
  }
  AttentionConfig inner = config;
  inner.rope = nullptr;
  AttentionInputs in = qkv(q, keys(), values());
  in.q_positions = qpos;
  in.k_positions = positions();
  if (rope_ == nullptr) {
    attention_forward(inner, in, out, lse);
    return;
  }
  // q rotated like the keys: a contiguous copy, rotated in place (rounded once to q's dtype, as Rope::forward
  // returns it), then the attention of the rotated copy over the stored keys.
  if (q.dtype != DType::bf16 && q.dtype != DType::f16)
    fail(kOp, "q has dtype ", dtype_name(q.dtype), ": attend on cuda takes bf16 or f16 q");
  if (reinterpret_cast<uintptr_t>(q.data) % 16 != 0 || q.strides[0] % 8 != 0 || q.strides[1] % 8 != 0 ||
      q.strides[2] % 8 != 0)
    fail(kOp, "q must have 16-byte aligned rows on cuda (data aligned, strides multiples of 8)");
  cuda::check_device_memory(kOp, "q", q, q.data);
  cuda::DeviceScratch rotated(kOp, "the rotated q", static_cast<size_t>(batch_ * T * H * head_dim_) * 2);
  cuda::copy_head_rows(q.data, q.strides.data(), batch_, T, H, head_dim_, rotated.data());
  TensorView q_rot = view(static_cast<float*>(rotated.data()), {batch_, T, H, head_dim_}, Device::cuda);
  q_rot.dtype = q.dtype;
  rope_->forward(q_rot, qpos);
  in.q = q_rot;
  attention_forward(inner, in, out, lse);
}

#else

void KVCache::reserve_cuda(int64_t) { fail(kOp, "a cuda cache needs posenc's CUDA attention in this build"); }
void KVCache::append_cuda(ConstTensorView, ConstTensorView, ConstTensorView) {
  fail(kOp, "a cuda cache needs posenc's CUDA attention in this build");
}
void KVCache::attend_cuda(const AttentionConfig&, ConstTensorView, TensorView, ConstTensorView,
                          TensorView) const {
  fail(kOp, "a cuda cache needs posenc's CUDA attention in this build");
}

#endif

}  // namespace posenc
