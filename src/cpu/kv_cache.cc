// src/cpu/kv_cache.cc: see kv_cache.h.
#include "src/cpu/kv_cache.h"

#include "src/cpu/half.h"
#include "src/cpu/parallel.h"

namespace posenc::cpu {
namespace {
// fn(slot, b, t, h) for every row of a (B, T, H, D) block stored at tokens [offset, offset + T).
template <typename S, typename Fn>
void for_each_slot(int64_t B, int64_t T, int64_t H, int64_t D, S* store, int64_t capacity, int64_t offset,
                   Fn&& fn) {
  parallel_chunks(B * T, H * D, [&](int64_t begin, int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt) {
      const int64_t b = bt / T, t = bt % T;
      for (int64_t h = 0; h < H; ++h) fn(store + ((b * H + h) * capacity + offset + t) * D, b, t, h);
    }
  });
}
}  // namespace

// Named copies of the extents, not a structured binding: clang 14 cannot capture those in a lambda.
void kv_cache_store(Strided<const float, 4> rows, float* store, int64_t capacity, int64_t offset) {
  const int64_t B = rows.extent[0], T = rows.extent[1], H = rows.extent[2], D = rows.extent[3];
  for_each_slot(B, T, H, D, store, capacity, offset, [&](float* slot, int64_t b, int64_t t, int64_t h) {
    for (int64_t d = 0; d < D; ++d) slot[d] = rows(b, t, h, d);
  });
}

void kv_cache_store(Strided<const float, 4> rows, DType dtype, uint16_t* store, int64_t capacity,
                    int64_t offset) {
  const int64_t B = rows.extent[0], T = rows.extent[1], H = rows.extent[2], D = rows.extent[3];
  const bool unit = rows.stride[3] == 1;
  for_each_slot(B, T, H, D, store, capacity, offset, [&](uint16_t* slot, int64_t b, int64_t t, int64_t h) {
    if (unit) {
      narrow_row(dtype, &rows(b, t, h, 0), D, slot);
      return;
    }
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(D));
    for (int64_t d = 0; d < D; ++d) row[d] = rows(b, t, h, d);
    narrow_row(dtype, row.data(), D, slot);
  });
}

void kv_cache_store(Strided<const uint16_t, 4> rows, uint16_t* store, int64_t capacity, int64_t offset) {
  const int64_t B = rows.extent[0], T = rows.extent[1], H = rows.extent[2], D = rows.extent[3];
  for_each_slot(B, T, H, D, store, capacity, offset, [&](uint16_t* slot, int64_t b, int64_t t, int64_t h) {
    for (int64_t d = 0; d < D; ++d) slot[d] = rows(b, t, h, d);
  });
}

}  // namespace posenc::cpu
