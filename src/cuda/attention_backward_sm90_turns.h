// src/cuda/attention_backward_sm90_turns.h: which row tiles a block of the sm_90a attention backward
// (src/cuda/attention_backward_sm90.cu) sees and its turn on each, for the kernel and for the host tests
// (tests/cuda/test_attention_elements.cc check them against every pair). With default positions row i of a
// problem of nq rows and nk keys is at position nk - nq + i and key j at j; row tiles have 64 rows, key
// tiles 128 keys, and block x of a problem takes key tile x (the last first under a causal mask: reverse).
#pragma once
#include <cstdint>

#include "src/attention_mask.h"
#include "src/host_device.h"

namespace posenc::cuda {

// The mask's tests (src/attention_mask.h's, term for term) with a 32-bit division for the chunks: default
// positions lie in (-2^31, 2^31 - 1) (attention_backward_sm90_fits), where a chunk of 2^31 or more groups
// positions as 2^31 - 1 does; a 64-bit division is a subroutine call, whose saved registers the kernel's
// consumers cannot afford.
struct Mask32 {
  bool causal;
  int64_t window;
  int32_t chunk;
  POSENC_HD explicit Mask32(const detail::AttentionMask& m)
      : causal(m.causal),
        window(m.window),
        chunk(static_cast<int32_t>(m.chunk < INT32_MAX ? m.chunk : INT32_MAX)) {}
  POSENC_HD int32_t chunk_of(int64_t position) const {
    const int32_t p = static_cast<int32_t>(position);
    return p >= 0 ? p / chunk : -1 - (-(p + 1)) / chunk;
  }
  POSENC_HD bool masked(int64_t q, int64_t k) const {
    return (causal && k > q) || (window > 0 && (q - k >= window || k - q >= window)) ||
           (chunk > 0 && chunk_of(q) != chunk_of(k));
  }
  POSENC_HD bool any_visible(int64_t qmin, int64_t qmax, int64_t kmin, int64_t kmax) const {
    if (causal && kmin > qmax) return false;
    if (window > 0 && (qmin - kmax >= window || kmin - qmax >= window)) return false;
    if (chunk > 0 && (chunk_of(kmin) > chunk_of(qmax) || chunk_of(kmax) < chunk_of(qmin))) return false;
    return true;
  }
  POSENC_HD bool all_visible(int64_t qmin, int64_t qmax, int64_t kmin, int64_t kmax) const {
    return !(causal && kmax > qmin) && !(window > 0 && (qmax - kmin >= window || kmax - qmin >= window)) &&
           !(chunk > 0 && (chunk_of(qmin) != chunk_of(qmax) || chunk_of(kmin) != chunk_of(kmax) ||
                           chunk_of(kmin) != chunk_of(qmin)));
  }
};

// Whether the mask leaves some pair of row tile m and key tile n visible, and whether it leaves every pair
// visible on whole tiles.
struct TileView {
  bool any, all;
};
POSENC_HD inline TileView sm90_tile_view(const Mask32& mask, int64_t nq, int64_t nk, int64_t m, int64_t n) {
  const int64_t row0 = m * 64, key0 = n * 128;
  const int64_t rows = nq - row0 < 64 ? nq - row0 : 64, cols = nk - key0 < 128 ? nk - key0 : 128;
  const int64_t q_lo = nk - nq + row0, q_hi = q_lo + rows - 1, k_hi = key0 + cols - 1;
  return {mask.any_visible(q_lo, q_hi, key0, k_hi),
          rows == 64 && cols == 128 && mask.all_visible(q_lo, q_hi, key0, k_hi)};
}

// The key tile of block x among a problem's key_tiles.
POSENC_HD inline int64_t sm90_key_tile_of(bool reverse, int64_t x, int64_t key_tiles) {
  return reverse ? key_tiles - 1 - x : x;
}

// How many blocks before block x (in block order) see row tile m, where block x sees it. With default
// positions the key tiles a row tile sees are consecutive (each of the mask's tests bounds them on one
// side), and so are the blocks, x among them: the first is found by bisection.
POSENC_HD inline int sm90_turn_of(const Mask32& mask, bool reverse, int64_t nq, int64_t nk, int64_t m,
                                  int64_t x, int64_t key_tiles) {
  int64_t lo = 0, hi = x;
#ifdef __CUDA_ARCH__
#pragma unroll 1
#endif
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (sm90_tile_view(mask, nq, nk, m, sm90_key_tile_of(reverse, mid, key_tiles)).any)
      hi = mid;
    else
      lo = mid + 1;
  }
  return static_cast<int>(x - lo);
}

// The counter of row tile m of problem z among the turns' counters of a head: batch rows, z row_tiles
// apart; packed sequences (the problem's rows from q0), at floor(q0 / 64) + z + m, distinct for every
// sequence's tiles (a sequence of n rows from q0 has ceil(n / 64) tiles, and floor(q0 / 64) + ceil(n / 64)
// <= floor((q0 + n) / 64) + 1): row_tiles + problems + 1 counters a head.
POSENC_HD inline int64_t sm90_turn_index(bool packed, int64_t q0, int64_t z, int64_t m, int64_t row_tiles) {
  return packed ? q0 / 64 + z + m : z * row_tiles + m;
}

// The slot of block x of problem z among the learned table's partial sums (per head): batch rows, z
// key_tiles apart; packed sequences (the problem's keys from k0), at floor(k0 / 128) + z + x, distinct as
// sm90_turn_index's: key_tiles + problems slots.
POSENC_HD inline int64_t sm90_table_slot(bool packed, int64_t k0, int64_t z, int64_t x, int64_t key_tiles) {
  return packed ? k0 / 128 + z + x : z * key_tiles + x;
}

}  // namespace posenc::cuda
