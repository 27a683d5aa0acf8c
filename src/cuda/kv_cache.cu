// src/cuda/kv_cache.cu: the CUDA KV cache's stores (src/cuda/kv_cache.h): 16-byte copies of key and value
// rows into the head-major store, the positions of appended tokens, a context shift's new positions and
// their range.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "posenc/device.h"
#include "posenc/error.h"
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

__global__ void shift_kernel(int64_t* positions, int64_t capacity, int64_t size, int64_t delta) {
  int64_t* row = positions + blockIdx.x * capacity;
  for (int64_t t = threadIdx.x; t < size; t += blockDim.x) row[t] += delta;
}

// One block: per-thread extremes, then a tree over the threads (integers: any order gives the same result).
constexpr int kRangeThreads = 256;
__global__ void __launch_bounds__(kRangeThreads)
    range_kernel(const int64_t* positions, int64_t batch_stride, int64_t token_stride, int64_t B, int64_t T,
                 int64_t* lo_hi) {
  __shared__ int64_t lo[kRangeThreads], hi[kRangeThreads];
  int64_t l = INT64_MAX, h = INT64_MIN;
  for (int64_t i = threadIdx.x; i < B * T; i += blockDim.x) {
    const int64_t p = positions[(i / T) * batch_stride + (i % T) * token_stride];
    l = p < l ? p : l, h = p > h ? p : h;
  }
  lo[threadIdx.x] = l, hi[threadIdx.x] = h;
  __syncthreads();
  for (int n = kRangeThreads / 2; n > 0; n /= 2) {
    if (threadIdx.x < n) {
      lo[threadIdx.x] = min(lo[threadIdx.x], lo[threadIdx.x + n]);
      hi[threadIdx.x] = max(hi[threadIdx.x], hi[threadIdx.x + n]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) lo_hi[0] = lo[0], lo_hi[1] = hi[0];
}

unsigned blocks_for(int64_t total) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((total + 255) / 256, 65535)));
}

}  // namespace

void kv_cache_shift_positions(int64_t* positions, int64_t B, int64_t capacity, int64_t size, int64_t delta) {
  if (B == 0 || size == 0) return;
  shift_kernel<<<static_cast<unsigned>(B), 256, 0, static_cast<cudaStream_t>(cuda_stream())>>>(
      positions, capacity, size, delta);
  check_launch("KVCache", "the position shift kernel");
}

void kv_cache_position_range(const int64_t* positions, int64_t batch_stride, int64_t token_stride, int64_t B,
                             int64_t T, int64_t* lo, int64_t* hi) {
  const DeviceScratch lo_hi("KVCache", "the position range", 2 * sizeof(int64_t));
  const cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream());
  range_kernel<<<1, kRangeThreads, 0, stream>>>(positions, batch_stride, token_stride, B, T,
                                                lo_hi.as<int64_t>());
  check_launch("KVCache", "the position range kernel");
  int64_t host[2] = {};
  cudaError_t e = cudaMemcpyAsync(host, lo_hi.data(), sizeof host, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error(std::string("KVCache: reading the positions' range back failed: ") + cudaGetErrorString(e));
  }
  *lo = host[0], *hi = host[1];
}

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
