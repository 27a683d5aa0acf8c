// src/cuda/kv_cache.h: the CUDA KV cache's stores (src/cuda/kv_cache.cu), called by src/kv_cache_cuda.cc with
// checked views. No CUDA types: the kernels queue on posenc::cuda_stream().
//   store (B, H, capacity, D) of 16-bit elements, positions (B, capacity) int64, in device memory.
#pragma once
#include <cstdint>

namespace posenc::cuda {

// Rows (B, T, H) of D 16-bit elements at `strides` (16-byte aligned rows) into tokens [offset, offset + T) of
// the store.
void kv_cache_store(const void* in, const int64_t strides[3], int64_t B, int64_t T, int64_t H, int64_t D,
                    void* store, int64_t capacity, int64_t offset);

// Positions of tokens [size, size + T) of each row: `given` (B, T) at `given_batch_stride` (0: one row
// shared), or, when null, each row continuing after its last position (0, 1, ... in an empty cache).
void kv_cache_positions(const int64_t* given, int64_t given_batch_stride, int64_t given_token_stride,
                        int64_t B, int64_t T, int64_t* positions, int64_t capacity, int64_t size);

// Every position of tokens [0, size) += delta (a context shift; the range was checked on the host).
void kv_cache_shift_positions(int64_t* positions, int64_t B, int64_t capacity, int64_t size, int64_t delta);

// The least and the greatest of positions (B, T) at the given strides (B, T >= 1), read back: the calls of
// the cache that wait for the stream (a context shift refuses a shift past 2^53 before anything changes; a
// rope whose frequencies depend on the length takes max(position) + 1, as the CPU cache does).
void kv_cache_position_range(const int64_t* positions, int64_t batch_stride, int64_t token_stride, int64_t B,
                             int64_t T, int64_t* lo, int64_t* hi);

}  // namespace posenc::cuda
