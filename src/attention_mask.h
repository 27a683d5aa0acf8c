// src/attention_mask.h: which (query, key) pairs attention masks, per pair and per tile, as __host__
// __device__ functions: the one definition the CPU kernels (through AttentionPlan) and the CUDA kernels use.
//   masked(q, k): causal (k > q), outside a sliding window (|q - k| >= window), or in another chunk
//   (floor(q / chunk) != floor(k / chunk), Llama 4's chunked attention).
// A tile is given by the ranges of its query and key positions, [qmin, qmax] and [kmin, kmax]:
//   any_visible false: every pair of the tile is masked (the tile is skipped);
//   all_visible true: no pair is masked (no per-pair test). Both are exact for causal and windows over
//   ranges; for chunks all_visible asks for one chunk, which every pair then shares.
#pragma once
#include <cstdint>

#include "src/host_device.h"

namespace posenc::detail {

struct AttentionMask {
  bool causal = false;
  int64_t window = 0;  // 0: none
  int64_t chunk = 0;   // 0: none

  // floor(position / chunk), without overflow at the int64 ends.
  POSENC_HD int64_t chunk_of(int64_t position) const {
    return position >= 0 ? position / chunk : -1 - (-(position + 1)) / chunk;
  }
  POSENC_HD bool masked(int64_t q, int64_t k) const {
    return (causal && k > q) || (window > 0 && (q - k >= window || k - q >= window)) ||
           (chunk > 0 && chunk_of(q) != chunk_of(k));
  }
  POSENC_HD bool any_visible(int64_t qmin, int64_t qmax, int64_t kmin, int64_t kmax) const {
    if (causal && kmin > qmax) return false;
    if (window > 0 && (qmin - kmax >= window || kmin - qmax >= window)) return false;
    // Chunks are ordered like positions: the queries' chunks must meet the keys'.
    if (chunk > 0 && (chunk_of(kmin) > chunk_of(qmax) || chunk_of(kmax) < chunk_of(qmin))) return false;
    return true;
  }
  POSENC_HD bool all_visible(int64_t qmin, int64_t qmax, int64_t kmin, int64_t kmax) const {
    return !(causal && kmax > qmin) && !(window > 0 && (qmax - kmin >= window || kmax - qmin >= window)) &&
           !(chunk > 0 && (chunk_of(qmin) != chunk_of(qmax) || chunk_of(kmin) != chunk_of(kmax) ||
                           chunk_of(kmin) != chunk_of(qmin)));
  }
};

}  // namespace posenc::detail
