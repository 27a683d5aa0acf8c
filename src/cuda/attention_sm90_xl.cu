// src/cuda/attention_sm90_xl.cu: Transformer-XL's terms (Dai et al. 2019, arXiv 1901.02860) on the Hopper
// attention forward (src/cuda/attention_sm90_kernel.cuh, kXL), in a translation unit of its own so that it
// compiles in parallel with src/cuda/attention_sm90.cu. The tables are the tiled kernel's
// (src/cuda/attention_xl.cu: rproj rows of the storage type and v . rproj in fp32 over the deltas a visible
// pair can have); this unit adds u_h . k_j per key, which the tiled kernel forms per tile in shared memory,
// as a (B, H, K) fp32 table with the same sums (the two halves of the head tile's columns, each in column
// order, then added), so that both kernels add the same value to each pair.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "posenc/device.h"
#include "src/cuda/attention.h"
#include "src/cuda/attention_forward.cuh"
#include "src/cuda/attention_sm90_kernel.cuh"
#include "src/cuda/device.h"

namespace posenc::cuda {
namespace forward {
namespace {

// uk[(b H + h) K + j] = u_h . k_j for every batch row (or the packed tokens), head and key: a thread per
// entry, the head tile's columns in two halves (columns past D add nothing).
template <class Element>
__global__ void xl_uk_kernel(const Element* k, int64_t k_s0, int64_t k_s1, int64_t k_s2, const float* u,
                             int64_t u_s0, int64_t u_s1, int64_t B, int64_t K, int64_t H, int64_t group,
                             int D, int half, float* uk) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < B * H * K;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = t % K, h = (t / K) % H, b = t / (K * H);
    const Element* row = k + b * k_s0 + j * k_s1 + (h / group) * k_s2;
    const float* u_h = u + h * u_s0;
    float lo = 0, hi = 0;
    for (int d = 0; d < min(half, D); ++d) lo += u_h[d * u_s1] * static_cast<float>(row[d]);
    for (int d = half; d < D; ++d) hi += u_h[d * u_s1] * static_cast<float>(row[d]);
    uk[t] = lo + hi;
  }
}

int64_t sm90_xl_shared_bytes(int64_t tile) {
  return tile == 64 ? Sm90<cutlass::bfloat16_t, 64, 64, true>::kSharedBytes
                    : Sm90<cutlass::bfloat16_t, 128, 128, true>::kSharedBytes;
}

}  // namespace

bool attention_sm90_xl_fits(const AttentionLaunch& l, int64_t n, bool fill_required) {
  const int64_t tile = attention_sm90_tile(l);
  if ((tile != 64 && tile != 128) || l.xl_w_r == nullptr || l.shaw_a_k != nullptr) return false;
  // The rproj table as the TMA's (n, D, H) rows: int32 extents, a head's stride below 2^39 bytes; the
  // kernel's table rows (deltas past lo, within Q + K of it) in 32 bits.
  if (n < 1 || n >= (int64_t{1} << 30) || l.Q + l.K >= (int64_t{1} << 30) || n * l.D >= (int64_t{1} << 38))
    return false;
  return sm90_xl_shared_bytes(tile) <= max_shared_bytes_per_block() &&
         attention_sm90_launch_fits(l, fill_required);
}

void attention_sm90_xl_uk(const AttentionLaunch& l, float* uk) {
  const int64_t total = l.B * l.H * l.K;
  if (total == 0) return;
  const int half = static_cast<int>(attention_sm90_tile(l) / 2);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, int64_t{1} << 20));
  const cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream());
  const auto run = [&](auto element) {
    using Element = decltype(element);
    xl_uk_kernel<Element><<<blocks, 256, 0, stream>>>(
        static_cast<const Element*>(l.k), l.k_strides[0], l.k_strides[1], l.k_strides[2], l.xl_u,
        l.xl_u_strides[0], l.xl_u_strides[1], l.B, l.K, l.H, l.H / l.Hkv, static_cast<int>(l.D), half, uk);
  };
  l.dtype == DType::bf16 ? run(cutlass::bfloat16_t{}) : run(cutlass::half_t{});
  check_launch("attention", "the Transformer-XL u . k kernel");
}

void launch_sm90_xl(const AttentionLaunch& l, const Params& p) {
  using Bf16 = cutlass::bfloat16_t;
  using F16 = cutlass::half_t;
  ++attention_sm90_launches;
  const bool small = attention_sm90_tile(l) == 64;
  if (l.dtype == DType::bf16)
    small ? launch_sm90_kernel<Sm90<Bf16, 64, 64, true>>(l, p)
          : launch_sm90_kernel<Sm90<Bf16, 128, 128, true>>(l, p);
  else
    small ? launch_sm90_kernel<Sm90<F16, 64, 64, true>>(l, p)
          : launch_sm90_kernel<Sm90<F16, 128, 128, true>>(l, p);
}

}  // namespace forward
}  // namespace posenc::cuda
