// tests/kv_cache_cases.h: the rope configurations and positions the KV cache tests share
// (test_kv_cache.cc in fp32, test_kv_cache_half.cc in bf16 / fp16).
#pragma once
#include <cstdint>
#include <vector>

#include "posenc/rope.h"

namespace posenc::test {

inline std::vector<int64_t> arange(int64_t from, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

// yarn: an attention factor != 1, so a context shift must not apply it twice.
inline RopeConfig yarn_config(int64_t D) {
  RopeConfig c;
  c.head_dim = D;
  c.scaling.type = RopeScalingType::yarn;
  c.scaling.factor = 4;
  c.scaling.original_max_position_embeddings = 64;
  return c;
}

// LongRoPE with distinct short and long factors, switching past `original` tokens (up to 256).
inline RopeConfig longrope_config(int64_t D, int64_t original) {
  RopeConfig c;
  c.head_dim = D;
  c.max_position_embeddings = 256;
  c.scaling.type = RopeScalingType::longrope;
  c.scaling.original_max_position_embeddings = original;
  for (int64_t j = 0; j < D / 2; ++j) {
    c.scaling.short_factor.push_back(1.0 + 0.1 * static_cast<double>(j));
    c.scaling.long_factor.push_back(2.0 + 0.7 * static_cast<double>(j));
  }
  return c;
}

}  // namespace posenc::test
