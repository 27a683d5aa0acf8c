// src/cpu/kv_cache.h: the KV cache's copies, CPU loops. The store is head-major, (B, Hkv, capacity,
// D): each head's tokens are contiguous, which a decode step streams. fp32 stores hold floats;
// bf16 / fp16 stores hold their 16-bit patterns (uint16_t).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "posenc/tensor.h"
#include "src/strided.h"

namespace posenc::cpu {

// store (B, Hkv, capacity, D) tokens [offset, offset + T) = rows (B, T, Hkv, D), any strides:
// fp32 into fp32; fp32 rounded once (to nearest even) into a `dtype` store; 16-bit copied bit for bit.
void kv_cache_store(Strided<const float, 4> rows, float* store, int64_t capacity, int64_t offset);
void kv_cache_store(Strided<const float, 4> rows, DType dtype, uint16_t* store, int64_t capacity,
                    int64_t offset);
void kv_cache_store(Strided<const uint16_t, 4> rows, uint16_t* store, int64_t capacity, int64_t offset);

// The first `size` tokens of every (b, h) of a store with capacity `from_capacity`, copied into a
// new store with capacity `to_capacity` (>= size).
template <typename T>
std::vector<T> kv_cache_regrow(const std::vector<T>& store, int64_t batch, int64_t heads, int64_t dim,
                               int64_t size, int64_t from_capacity, int64_t to_capacity) {
  std::vector<T> grown(static_cast<size_t>(batch * heads * to_capacity * dim));
  for (int64_t bh = 0; bh < batch * heads; ++bh)
    std::copy_n(store.begin() + bh * from_capacity * dim, size * dim, grown.begin() + bh * to_capacity * dim);
  return grown;
}

// Drops the first n of `size` tokens of every (b, h) of the store: tokens [n, size) move to [0, size - n).
template <typename T>
void kv_cache_erase_front(std::vector<T>& store, int64_t batch_heads, int64_t dim, int64_t capacity,
                          int64_t size, int64_t n) {
  for (int64_t bh = 0; bh < batch_heads; ++bh) {
    T* head = store.data() + bh * capacity * dim;
    std::copy(head + n * dim, head + size * dim, head);
  }
}

}  // namespace posenc::cpu
