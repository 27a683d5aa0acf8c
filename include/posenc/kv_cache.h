// posenc/kv_cache.h: a key/value cache for incremental decoding and chunked prefill.
//
//   KVCache cache(batch, kv_heads, head_dim, &rope);     // rope: optional, applied once per key
//   for each step:  cache.append(k_new, v_new);          // (B, T, Hkv, D); positions continue
//                   cache.attend(config, q_new, out);    // q (B, T, H, D) against all cached keys
//
// Keys are stored rotated (as inference engines do), so a step costs one pass over the cache and
// no re-rotation; queries are rotated at attend(). Any encoding of AttentionConfig applies, with
// positions deciding masks and biases exactly as in attention_forward: decoding token by token
// gives the outputs of one causal forward over the whole sequence (tested for every encoding).
// Dynamic-NTK RoPE (rope_scaling "dynamic") rotates each key with the frequencies of its own
// step, as HuggingFace's cache does, so past its limit it differs from a full forward.
//
// Storage: fp32, or bf16 / fp16 as engines keep their caches (half the bytes a decode step reads).
// append() takes k and v in fp32 (rounded once into the store) or in the cache's own dtype (copied
// bit for bit; with a rope, widened, rotated in fp32 and rounded once). attend() reads the 16-bit
// keys and values where they are (the attention widens one tile at a time, accumulating in fp32);
// q and out may be fp32 or 16-bit, lse is fp32; a 16-bit q is rotated in fp32 and rounded once to
// its dtype, as Rope::forward returns it (so attend(q) is the attention of rope(q)). shift_positions() rounds
// each key once per call, rerotate() once for both of its rotations. A 16-bit cache agrees with an fp32 one
// to the storage type's rounding of k and v (tests/test_kv_cache.cc states the bound).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "posenc/attention.h"
#include "posenc/rope.h"
#include "posenc/tensor.h"

namespace posenc {
namespace detail {
struct RopePlan;
}

class KVCache {
 public:
  // rope: applied to keys at append() and queries at attend(); must outlive the cache.
  // dtype: the storage of keys and values, f32, bf16 or f16.
  // device: where the cache lives. Device::cuda (posenc/device.h): bf16 or f16 storage in device memory of
  // the current device; append() takes k, v of that dtype and int64 positions on the device (the default
  // continues each row on the device), attend() runs the CUDA attention (src/attention_cuda.cc) on
  // device q and out; shift_positions, erase_front and rerotate as on the CPU (keys rotated, and rounded,
  // as the CPU cache rotates them). Every call queues on posenc::cuda_stream() without reading device data
  // back, but two, which wait for the stream to read positions: shift_positions (their range, to refuse a
  // shift past 2^53 before anything changes), and, with a rope whose frequencies depend on the length
  // (dynamic, longrope, qwen_dynamic), append and attend (the largest position, as the CPU cache does).
  KVCache(int64_t batch, int64_t kv_heads, int64_t head_dim, const Rope* rope = nullptr,
          DType dtype = DType::f32, Device device = Device::cpu);

  // k, v (B, T, Hkv, D) f32 or the cache's dtype (both the same). positions (T) or (B, T) int64;
  // default: each batch row continues after its last position (0, 1, 2, ... from empty).
  void append(ConstTensorView k, ConstTensorView v, ConstTensorView positions = {});

  // out (B, T, H, D) = attention of q (B, T, H, D) over every cached token (q and out: f32, bf16
  // or f16, each its own). q_positions default
  // to the positions of the last T appended tokens (append, then attend the same tokens).
  // config.rope must be null or the cache's rope (keys are already rotated).
  void attend(const AttentionConfig& config, ConstTensorView q, TensorView out,
              ConstTensorView q_positions = {}, TensorView lse = {}) const;

  // Context shift (llama.cpp's llama_kv_cache_seq_add): every cached position += delta, and every
  // cached key re-rotated in place by R(delta), since R(p + delta) = R(delta) R(p): no keys are
  // recomputed from the model. Exact when the rope's frequencies do not depend on the length;
  // dynamic and longrope are refused (their keys may carry different tables: use rerotate).
  void shift_positions(int64_t delta);
  // Drops the oldest n tokens of every batch row (the positions of the rest are kept; follow with
  // shift_positions(-n) to re-number them from 0, as a context shift does).
  void erase_front(int64_t n);
  // Re-rotates every cached key from the frequency table of length `from_seq_len` to that of
  // `to_seq_len` (both Rope::frequencies of the cache's rope): k <- a_to R_to(p) R_from(p)^T k / a_from.
  // LongRoPE's switch from short to long factors once a sequence crosses the original context,
  // without recomputing the keys. Later appends rotate with their own length's table as before.
  void rerotate(int64_t from_seq_len, int64_t to_seq_len);

  int64_t size() const { return size_; }  // tokens per batch row
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  void reserve(int64_t tokens);
  void clear() { size_ = 0; }
  // (B, size, Hkv, D) views (head-major strides, the cache's dtype) of the stored (rotated) keys
  // and the values; (B, size) positions.
  ConstTensorView keys() const;
  ConstTensorView values() const;
  ConstTensorView positions() const;

 private:
  // Rotates every cached key by `first` (transposed when first_inverse), then by `second` if given.
  void rotate_keys(const detail::RopePlan* first, bool first_inverse, const detail::RopePlan* second);

  int64_t batch_, kv_heads_, head_dim_;
  const Rope* rope_;
  DType dtype_;
  int64_t size_ = 0, capacity_ = 0;
  std::vector<float> k_, v_;         // (B, Hkv, capacity, D): each head's tokens contiguous (f32)
  std::vector<uint16_t> k16_, v16_;  // the same for bf16 / fp16 storage
  std::vector<int64_t> pos_;         // (B, capacity)
  // Device::cuda: the same layouts in device memory (src/kv_cache_cuda.cc).
  Device device_ = Device::cpu;
  std::shared_ptr<void> device_k_, device_v_, device_pos_;
  void reserve_cuda(int64_t tokens);
  void append_cuda(ConstTensorView k, ConstTensorView v, ConstTensorView positions);
  void attend_cuda(const AttentionConfig& config, ConstTensorView q, TensorView out,
                   ConstTensorView q_positions, TensorView lse) const;
  void shift_positions_cuda(int64_t delta);
  void erase_front_cuda(int64_t n);
  void rerotate_cuda(int64_t from_seq_len, int64_t to_seq_len);
};

}  // namespace posenc
