// src/cuda/attention_sm90_xl.h: Transformer-XL's band of deltas in the Hopper attention forward
// (src/cuda/attention_sm90.cu, its kXL kernels), for the kernel and for the host tests
// (tests/cuda/test_attention_elements.cc walks the steps below over runs of tiles and checks every pair's
// band entry). Default positions, key tiles of 64 (kSm90XLKeys), two consumer warpgroups of 64 rows each.
//
// A warpgroup's (64, 64) tile of pairs has 127 deltas, band columns m = r - c + 63 (xl_band_column), deltas
// first_g + m with first_g = qp0 + 64 g - kp0 - 63 for warpgroup g. The next key tile's deltas are these
// moved down by 64, so each step forms one chunk of 64 band columns, the products of the warpgroup's rows
// with 64 rproj rows, and keeps the chunk before: the band is two halves of 64 columns, the newest chunk in
// half `new_half` (columns m < 64) and the one before in the other (columns m >= 64): column m lives at
// m ^ (new_half * 64), and the halves swap at each chunk formed. Warpgroup 1's new chunk at a tile is
// warpgroup 0's of the tile before (its rows are 64 positions later), so the producer loads one chunk of
// rproj rows per tile, with K, into a ring of slots of its own: warpgroup 0 forms its chunk from the step's
// slot, warpgroup 1 from the step before's. A run of tiles (the first visible tile, or one after skipped
// tiles) starts with two steps without keys, carrying the chunks at first + 128 (warpgroup 1's older one,
// formed at the next step from the slot before) and first + 64 (warpgroup 0's older one, and warpgroup 1's
// newer one at the tile).
#pragma once
#include <cstdint>

#include "src/cuda/attention-inl.cuh"
#include "src/host_device.h"

namespace posenc::cuda {

inline constexpr int kSm90XLKeys = 64;

// The tile slot of a step: a key tile (>= 0), the end of the keys, or one of the two steps before a run.
enum Sm90XLStep : int { kSm90KeysDone = -1, kSm90XLChunkAhead1 = -2, kSm90XLChunkAhead2 = -3 };

// The first of the 64 deltas whose rproj rows a step carries: for a tile whose warpgroup-0 band starts at
// `first`, first itself; the steps before a run, first + 64 and first + 128.
POSENC_HD inline int sm90_xl_chunk_first(int first, int step) {
  return step == kSm90XLChunkAhead2   ? first + 2 * kSm90XLKeys
         : step == kSm90XLChunkAhead1 ? first + kSm90XLKeys
                                      : first;
}

// Whether the warpgroups form a chunk at a step (every step but the first before a run, whose rows only
// warpgroup 1 reads, a step later).
POSENC_HD inline bool sm90_xl_forms(int step) { return step != kSm90XLChunkAhead2; }

// The shared-memory float of band column m's entry at row r (0 .. 63, the warpgroup's), with the newest chunk
// in half new_half; and the same for column j (0 .. 63) of the chunk being formed (new_half's).
POSENC_HD inline int sm90_xl_band_at(int m, int r, int new_half) {
  return (m ^ (new_half * kSm90XLKeys)) * kXLBandRows + r;
}
POSENC_HD inline int sm90_xl_chunk_at(int j, int r, int new_half) {
  return (j + new_half * kSm90XLKeys) * kXLBandRows + r;
}

}  // namespace posenc::cuda
