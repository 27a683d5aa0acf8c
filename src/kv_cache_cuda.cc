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
#include "src/cuda/rope.h"
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

// Tokens [0, size) of the key store (B, Hkv, capacity, D), rotated on the device by `first` at positions +
// offset (transposed when first_inverse), then forward by `then` if given, rounded once to the storage.
struct StoredKeys {
  void* data;
  DType dtype;
  int64_t batch, heads, head_dim, capacity, size;
};
void rotate_stored_keys(const Rope& rope, const StoredKeys& keys, const RopeFrequencies& first,
                        bool first_inverse, const RopeFrequencies* then,
                        const detail::PositionLayout& positions, int64_t offset) {
  const RopeConfig& rc = rope.config();
  if (static_cast<int64_t>(first.inv_freq.size()) > cuda::kMaxDevicePairs ||
      (then != nullptr && then->inv_freq.size() != first.inv_freq.size()))
    fail(kOp, "rotary_dim = ", 2 * first.inv_freq.size(), " is larger than the CUDA backend takes (",
         2 * cuda::kMaxDevicePairs, ")");
  cuda::RopeLaunch launch;
  launch.freq = &first;
  launch.inverse = first_inverse != rc.reversed;  // R(-p theta) = R(p theta)^T
  launch.then_freq = then;
  launch.then_inverse = rc.reversed;
  launch.layout = rc.layout;
  launch.dtype = keys.dtype;
  launch.dim = keys.head_dim;
  launch.batch = keys.batch;
  launch.tokens = keys.size;
  launch.positions = positions;
  launch.position_offset = offset;
  const int64_t strides[3] = {keys.heads * keys.capacity * keys.head_dim, keys.head_dim,
                              keys.capacity * keys.head_dim};
  launch.tensors[0] = {keys.data,
                       keys.data,
                       {strides[0], strides[1], strides[2]},
                       {strides[0], strides[1], strides[2]},
                       keys.heads};
  launch.num_tensors = 1;
  cuda::rope_rotate(launch);
}

// The call of a rope for positions (B, T) on the device: where its frequencies depend on the length (the
// CPU cache's max(position) + 1, HuggingFace's dynamic update), the positions' maximum is read back.
RopeCall device_rope_call(const Rope& rope, const int64_t* positions, int64_t batch_stride,
                          int64_t token_stride, int64_t B, int64_t T) {
  RopeCall call;
  const RopeScalingType type = rope.config().scaling.type;
  if (B == 0 || T == 0 ||
      (type != RopeScalingType::dynamic && type != RopeScalingType::longrope &&
       type != RopeScalingType::qwen_dynamic))
    return call;
  int64_t lo = 0, hi = 0;
  cuda::kv_cache_position_range(positions, batch_stride, token_stride, B, T, &lo, &hi);
  // Every length <= 0 has the frequencies of 0; a position past 2^53 (its rows become NaN) no longer counts.
  call.seq_len = std::clamp<int64_t>(hi, -1, detail::kMaxAbsPosition) + 1;
  return call;
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
    rope_->forward(keys, strided_view(pos + size_, {batch_, T}, {capacity_, 1}, Device::cuda),
                   device_rope_call(*rope_, pos + size_, capacity_, 1, batch_, T));
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
  if (config.transformer_xl)
    fail(kOp, "config.transformer_xl is not supported by the KV cache on cuda (transformer_xl on cuda takes ",
         "the default positions; the cache's are stored ones)");
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
  const detail::PositionLayout qlayout = detail::check_positions(kOp, qpos, 1, batch_, T, Device::cuda);
  cuda::check_device_memory(kOp, "q_positions", qpos, qpos.data);
  const RopeCall call =
      device_rope_call(*rope_, qlayout.data, qlayout.batch_stride, qlayout.token_stride, batch_, T);
  cuda::DeviceScratch rotated(kOp, "the rotated q", static_cast<size_t>(batch_ * T * H * head_dim_) * 2);
  cuda::copy_head_rows(q.data, q.strides.data(), batch_, T, H, head_dim_, rotated.data());
  TensorView q_rot = view(static_cast<float*>(rotated.data()), {batch_, T, H, head_dim_}, Device::cuda);
  q_rot.dtype = q.dtype;
  rope_->forward(q_rot, qpos, call);
  in.q = q_rot;
  attention_forward(inner, in, out, lse);
}

void KVCache::shift_positions_cuda(int64_t delta) {
  if (size_ == 0) return;
  int64_t* pos = static_cast<int64_t*>(device_pos_.get());
  int64_t lo = 0, hi = 0;
  cuda::kv_cache_position_range(pos, capacity_, 1, batch_, size_, &lo, &hi);
  for (const int64_t p : {lo, hi}) {
    if (p > detail::kMaxAbsPosition || p < -detail::kMaxAbsPosition)
      fail(kOp, "shift_positions: the cache holds position ", p, ", outside [-2^53, 2^53]");
    if (p + delta > detail::kMaxAbsPosition || p + delta < -detail::kMaxAbsPosition)
      fail(kOp, "shift_positions: delta = ", delta, " moves position ", p, " outside [-2^53, 2^53]");
  }
  if (rope_) {
    // R(delta) for every key: angles of position 0 at offset delta, without the attention factor the keys
    // already carry.
    RopeFrequencies freq = rope_->frequencies(0);
    freq.attention_factor = 1.0;
    cuda::DeviceScratch zero(kOp, "the shift's position", sizeof(int64_t));
    zero.zero();
    detail::PositionLayout at_zero;
    at_zero.data = zero.as<int64_t>();  // every stride 0: one position for every token
    rotate_stored_keys(*rope_, {device_k_.get(), dtype_, batch_, kv_heads_, head_dim_, capacity_, size_},
                       freq, false, nullptr, at_zero, delta);
  }
  cuda::kv_cache_shift_positions(pos, batch_, capacity_, size_, delta);
}

void KVCache::erase_front_cuda(int64_t n) {
  if (n == 0) return;
  // The kept tokens into new stores of the same capacity (rows move down in place otherwise, and a copy
  // between overlapping ranges is undefined); the old ones are freed after the copies.
  const int64_t row = head_dim_ * 2, kept = size_ - n;
  std::shared_ptr<void> k = device_alloc(static_cast<size_t>(batch_ * kv_heads_ * capacity_ * row));
  std::shared_ptr<void> v = device_alloc(static_cast<size_t>(batch_ * kv_heads_ * capacity_ * row));
  std::shared_ptr<void> pos = device_alloc(static_cast<size_t>(batch_ * capacity_ * 8));
  const auto from = [n](const std::shared_ptr<void>& store, int64_t bytes_per_token) {
    return static_cast<const char*>(store.get()) + n * bytes_per_token;
  };
  copy_blocks(from(device_k_, row), k.get(), batch_ * kv_heads_, capacity_ * row, capacity_ * row,
              kept * row);
  copy_blocks(from(device_v_, row), v.get(), batch_ * kv_heads_, capacity_ * row, capacity_ * row,
              kept * row);
  copy_blocks(from(device_pos_, 8), pos.get(), batch_, capacity_ * 8, capacity_ * 8, kept * 8);
  device_k_ = std::move(k), device_v_ = std::move(v), device_pos_ = std::move(pos);
  size_ = kept;
}

void KVCache::rerotate_cuda(int64_t from_seq_len, int64_t to_seq_len) {
  if (size_ == 0) return;
  // k <- a_to R_to(p) R_from(p)^T k / a_from, both rotations in fp32 and one rounding (as the CPU cache).
  RopeFrequencies from = rope_->frequencies(from_seq_len);
  const RopeFrequencies to = rope_->frequencies(to_seq_len);
  from.attention_factor = 1.0 / from.attention_factor;
  detail::PositionLayout positions;
  positions.data = static_cast<const int64_t*>(device_pos_.get());
  positions.batch_stride = capacity_, positions.token_stride = 1;
  rotate_stored_keys(*rope_, {device_k_.get(), dtype_, batch_, kv_heads_, head_dim_, capacity_, size_}, from,
                     true, &to, positions, 0);
}

#else

void KVCache::shift_positions_cuda(int64_t) {
  fail(kOp, "a cuda cache needs posenc's CUDA attention in this build");
}
void KVCache::erase_front_cuda(int64_t) {
  fail(kOp, "a cuda cache needs posenc's CUDA attention in this build");
}
void KVCache::rerotate_cuda(int64_t, int64_t) {
  fail(kOp, "a cuda cache needs posenc's CUDA attention in this build");
}
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
