// src/cuda/kv_cache.cu: the CUDA KV cache's stores (src/cuda/kv_cache.h): 16-byte copies of key and value
// rows into the head-major store, and the positions of appended tokens.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "posenc/device.h"
#include "src/cuda/device.h"
#include "src/cuda/kv_cache.h"

namespace posenc::cuda {
namespace {

__global__ void store_kernel(const uint4* in, int64_t s0, int64_t s1, int64_t s2, int64_t T, int64_t H,
                             int64_t chunks, int64_t total, uint4* store, int64_t capacity, int64_t offset) {
  for (int64_t i = threadIdx.x + static_cast<int64_t>(blockIdx.x) * blockDim.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % chunks, h = (i / chunks) % H, t = (i / (chunks * H)) % T, b = i / (chunks * H * T);
    store[((b * H + h) * capacity + offset + t) * chunks + c] = in[b * s0 + t * s1 + h * s2 + c];
  }
}

__global__ void positions_kernel(const int64_t* given, int64_t batch_stride, int64_t token_stride, int64_t T,
                                 int64_t* positions, int64_t capacity, int64_t size) {
  const int64_t b = blockIdx.x;
  int64_t* row = positions + b * capacity;
  const int64_t first = size > 0 ? row[size - 1] + 1 : 0;
  for (int64_t t = threadIdx.x; t < T; t += blockDim.x)
    row[size + t] = given != nullptr ? given[b * batch_stride + t * token_stride] : first + t;
}

unsigned blocks_for(int64_t total) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((total + 255) / 256, 65535)));
}

}  // namespace

void kv_cache_store(const void* in, const int64_t strides[3], int64_t B, int64_t T, int64_t H, int64_t D,
                    void* store, int64_t capacity, int64_t offset) {
  const int64_t chunks = D / 8, total = B * T * H * chunks;
  if (total == 0) return;
  store_kernel<<<blocks_for(total), 256, 0, static_cast<cudaStream_t>(cuda_stream())>>>(
      static_cast<const uint4*>(in), strides[0] / 8, strides[1] / 8, strides[2] / 8, T, H, chunks, total,
      static_cast<uint4*>(store), capacity, offset);
  check_launch("KVCache", "the store kernel");
}

void kv_cache_positions(const int64_t* given, int64_t given_batch_stride, int64_t given_token_stride,
                        int64_t B, int64_t T, int64_t* positions, int64_t capacity, int64_t size) {
  if (B == 0 || T == 0) return;
  positions_kernel<<<static_cast<unsigned>(B), 256, 0, static_cast<cudaStream_t>(cuda_stream())>>>(
      given, given_batch_stride, given_token_stride, T, positions, capacity, size);
  check_launch("KVCache", "the positions kernel");
}

}  // namespace posenc::cuda
