// src/cpu/kv_cache.h: the KV cache's copies, CPU loops. The store is head-major, (B, Hkv, capacity,
// D): each head's tokens are contiguous, which a decode step streams.
#pragma once
#include <cstdint>
#include <vector>

#include "src/strided.h"

namespace posenc::cpu {

// store (B, Hkv, capacity, D) tokens [offset, offset + T) = rows (B, T, Hkv, D), any strides.
void kv_cache_store(Strided<const float, 4> rows, float* store, int64_t capacity, int64_t offset);

// The first `size` tokens of every (b, h) of a store with capacity `from_capacity`, copied into a
// new store with capacity `to_capacity` (>= size).
std::vector<float> kv_cache_regrow(const std::vector<float>& store, int64_t batch, int64_t heads, int64_t dim,
                                   int64_t size, int64_t from_capacity, int64_t to_capacity);

// Drops the first n of `size` tokens of every (b, h) of the store: tokens [n, size) move to [0, size - n).
void kv_cache_erase_front(std::vector<float>& store, int64_t batch_heads, int64_t dim, int64_t capacity,
                          int64_t size, int64_t n);

}  // namespace posenc::cpu
