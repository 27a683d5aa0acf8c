// src/cpu/kv_cache.cc: see kv_cache.h.
#include "src/cpu/kv_cache.h"

#include <algorithm>

#include "src/cpu/parallel.h"

namespace posenc::cpu {

void kv_cache_store(Strided<const float, 4> rows, float* store, int64_t capacity, int64_t offset) {
  // Named copies, not a structured binding: clang 14 cannot capture those in a lambda.
  const int64_t B = rows.extent[0], T = rows.extent[1], H = rows.extent[2], D = rows.extent[3];
  parallel_chunks(B * T, H * D, [&](int64_t begin, int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt) {
      const int64_t b = bt / T, t = bt % T;
      for (int64_t h = 0; h < H; ++h) {
        float* slot = store + ((b * H + h) * capacity + offset + t) * D;
        for (int64_t d = 0; d < D; ++d) slot[d] = rows(b, t, h, d);
      }
    }
  });
}

std::vector<float> kv_cache_regrow(const std::vector<float>& store, int64_t batch, int64_t heads, int64_t dim,
                                   int64_t size, int64_t from_capacity, int64_t to_capacity) {
  std::vector<float> grown(static_cast<size_t>(batch * heads * to_capacity * dim));
  for (int64_t bh = 0; bh < batch * heads; ++bh)
    std::copy_n(store.begin() + bh * from_capacity * dim, size * dim, grown.begin() + bh * to_capacity * dim);
  return grown;
}

void kv_cache_erase_front(std::vector<float>& store, int64_t batch_heads, int64_t dim, int64_t capacity,
                          int64_t size, int64_t n) {
  for (int64_t bh = 0; bh < batch_heads; ++bh) {
    float* head = store.data() + bh * capacity * dim;
    std::copy(head + n * dim, head + size * dim, head);
  }
}

}  // namespace posenc::cpu
