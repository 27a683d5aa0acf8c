// src/cuda/absolute.cu: the absolute encodings on the GPU: sinusoid rows (table or added to embeddings),
// learned table rows (looked up or added) and the learned table's gradient, deterministic.
//   Sinusoid: one block per token row; the angle (p + offset) w_i in double (w from the host, by value),
//   sin and cos rounded once (src/angle.h).
//   Gradient: the positions are sorted stably with their token indices (cub::DeviceRadixSort), so each
//   table row's tokens form one run in token order; a block per table row sums its run in that order.
#include <cuda_runtime.h>

#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "posenc/device.h"
#include "src/angle.h"
#include "src/check.h"
#include "src/cuda/absolute.h"
#include "src/cuda/device.h"
#include "src/cuda/rope-inl.cuh"
#include "src/half.h"

namespace posenc::cuda {
namespace {

constexpr int kThreads = 128;

struct Rows {
  void* data;
  int64_t batch, tokens, dim;
  int64_t strides[3];
  bool bf16;
};
struct Positions {
  const int64_t* data;
  int64_t batch_stride, token_stride;
};

template <typename T>
__device__ __forceinline__ float load(const T* p, bool bf16) {
  if constexpr (sizeof(T) == 4)
    return *p;
  else
    return bf16 ? detail::bf16_to_f32(*p) : detail::f16_to_f32(*p);
}
template <typename T>
__device__ __forceinline__ void store(T* p, float v, bool bf16) {
  if constexpr (sizeof(T) == 4)
    *p = v;
  else
    *p = bf16 ? detail::f32_to_bf16(v) : detail::f32_to_f16(v);
}
template <typename T>
__device__ __forceinline__ void put(T* p, float v, bool accumulate, bool bf16) {
  store(p, accumulate ? load(p, bf16) + v : v, bf16);
}

struct SinusoidArgs {
  double w[kMaxDeviceSinusoidPairs];
  int64_t half, offset;
  bool interleaved, zero_last;
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sinusoid_kernel(const SinusoidArgs s, const Positions pos, const Rows r, bool accumulate) {
  const int64_t rows = r.batch * r.tokens;
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const int64_t b = n / r.tokens, t = n - b * r.tokens;
    const int64_t p = pos.data[b * pos.batch_stride + t * pos.token_stride];
    T* x = static_cast<T*>(r.data) + b * r.strides[0] + t * r.strides[1];
    const bool ok = position_in_range(p, s.offset);
    for (int64_t i = threadIdx.x; i < s.half; i += blockDim.x) {
      float sn = quiet_nan(), cs = quiet_nan();
      if (ok) {
        detail::sin_cos_of_angle(static_cast<double>(p + s.offset) * s.w[i], &sn, &cs);
      }
      const int64_t is = s.interleaved ? 2 * i : i, ic = s.interleaved ? 2 * i + 1 : s.half + i;
      put(x + is * r.strides[2], sn, accumulate, r.bf16);
      put(x + ic * r.strides[2], cs, accumulate, r.bf16);
    }
    if (s.zero_last && threadIdx.x == 0)
      store(x + (r.dim - 1) * r.strides[2], ok ? 0.0f : quiet_nan(), r.bf16);
  }
}

struct TableArg {
  const float* data;
  int64_t strides[2];
  int64_t rows;
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    learned_kernel(const TableArg table, const Positions pos, const Rows r, bool accumulate) {
  const int64_t rows = r.batch * r.tokens;
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const int64_t b = n / r.tokens, t = n - b * r.tokens;
    const int64_t p = pos.data[b * pos.batch_stride + t * pos.token_stride];
    T* x = static_cast<T*>(r.data) + b * r.strides[0] + t * r.strides[1];
    const bool ok = p >= 0 && p < table.rows;
    for (int64_t e = threadIdx.x; e < r.dim; e += blockDim.x)
      put(x + e * r.strides[2], ok ? table.data[p * table.strides[0] + e * table.strides[1]] : quiet_nan(),
          accumulate, r.bf16);
  }
}

__global__ void gather_positions_kernel(const Positions pos, int64_t batch, int64_t tokens, int64_t* keys,
                                        int64_t* tokens_out) {
  const int64_t n = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (n >= batch * tokens) return;
  const int64_t b = n / tokens, t = n - b * tokens;
  keys[n] = pos.data[b * pos.batch_stride + t * pos.token_stride];
  tokens_out[n] = n;
}

// The first index of sorted[0, n) whose key is >= key.
__device__ __forceinline__ int64_t lower_bound(const int64_t* sorted, int64_t n, int64_t key) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    learned_backward_kernel(const int64_t* sorted_keys, const int64_t* sorted_tokens, int64_t n, const Rows g,
                            float* grad_table, int64_t row_stride, int64_t col_stride, int64_t table_rows) {
  const int64_t row = blockIdx.x;
  // Sorted keys: any position outside [0, L) shows at one of the two ends.
  const bool poisoned = n > 0 && (sorted_keys[0] < 0 || sorted_keys[n - 1] >= table_rows);
  const int64_t lo = lower_bound(sorted_keys, n, row), hi = lower_bound(sorted_keys, n, row + 1);
  for (int64_t e = threadIdx.x; e < g.dim; e += blockDim.x) {
    float total = 0.0f;
    for (int64_t i = lo; i < hi; ++i) {  // in token order (the sort is stable)
      const int64_t tok = sorted_tokens[i], b = tok / g.tokens, t = tok - b * g.tokens;
      total += load(static_cast<const T*>(g.data) + b * g.strides[0] + t * g.strides[1] + e * g.strides[2],
                    g.bf16);
    }
    float* out = grad_table + row * row_stride + e * col_stride;
    *out = poisoned ? quiet_nan() : *out + total;
  }
}

int grid_for(int64_t rows) { return static_cast<int>(rows < (int64_t{1} << 24) ? rows : int64_t{1} << 24); }

Rows rows_of(const DeviceRows3& r) {
  return {r.data,
          r.extent[0],
          r.extent[1],
          r.extent[2],
          {r.strides[0], r.strides[1], r.strides[2]},
          r.dtype == DType::bf16};
}

}  // namespace

void sinusoid_rows(const SinusoidalConfig& c, const std::vector<double>& w, const DevicePositions2& p,
                   const DeviceRows3& rows, bool accumulate) {
  const int64_t n = rows.extent[0] * rows.extent[1];
  if (n == 0) return;
  SinusoidArgs s;
  s.half = c.dim / 2;
  for (int64_t i = 0; i < s.half; ++i) s.w[i] = w[i];
  s.offset = c.position_offset;
  s.interleaved = c.layout == SinusoidalLayout::interleaved;
  s.zero_last = c.dim % 2 == 1 && !accumulate;
  const Positions pos{p.data, p.batch_stride, p.token_stride};
  const auto stream = static_cast<cudaStream_t>(cuda_stream());
  if (rows.dtype == DType::f32)
    sinusoid_kernel<float><<<grid_for(n), kThreads, 0, stream>>>(s, pos, rows_of(rows), accumulate);
  else
    sinusoid_kernel<uint16_t><<<grid_for(n), kThreads, 0, stream>>>(s, pos, rows_of(rows), accumulate);
  check_launch("sinusoidal", "the CUDA sinusoid kernel's launch");
}

void learned_rows(const float* table, const int64_t table_strides[2], int64_t table_rows,
                  const DevicePositions2& p, const DeviceRows3& rows, bool accumulate) {
  const int64_t n = rows.extent[0] * rows.extent[1];
  if (n == 0) return;
  const TableArg t{table, {table_strides[0], table_strides[1]}, table_rows};
  const Positions pos{p.data, p.batch_stride, p.token_stride};
  const auto stream = static_cast<cudaStream_t>(cuda_stream());
  if (rows.dtype == DType::f32)
    learned_kernel<float><<<grid_for(n), kThreads, 0, stream>>>(t, pos, rows_of(rows), accumulate);
  else
    learned_kernel<uint16_t><<<grid_for(n), kThreads, 0, stream>>>(t, pos, rows_of(rows), accumulate);
  check_launch("learned", "the CUDA table kernel's launch");
}

void learned_rows_backward(const DeviceRows3& grad, const DevicePositions2& p, float* grad_table,
                           const int64_t grad_table_strides[2], int64_t table_rows) {
  const int64_t n = grad.extent[0] * grad.extent[1];
  if (n == 0 || table_rows == 0 || grad.extent[2] == 0) return;
  if (table_rows > (int64_t{1} << 31) - 1)
    detail::fail("learned", "grad_table has ", table_rows, " rows, too many for one launch");
  const auto stream = static_cast<cudaStream_t>(cuda_stream());
  // keys, tokens, sorted keys, sorted tokens, then CUB's scratch: one stream-ordered allocation.
  size_t sort_bytes = 0;
  if (const cudaError_t e = cub::DeviceRadixSort::SortPairs(
          nullptr, sort_bytes, static_cast<const int64_t*>(nullptr), static_cast<int64_t*>(nullptr),
          static_cast<const int64_t*>(nullptr), static_cast<int64_t*>(nullptr), n, 0, 64, stream);
      e != cudaSuccess) {
    cudaGetLastError();
    detail::fail("learned", "sizing the sort of ", n, " positions failed: ", cudaGetErrorString(e));
  }
  const size_t arrays = 4 * sizeof(int64_t) * static_cast<size_t>(n);
  char* buffer = nullptr;
  if (const cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&buffer), arrays + sort_bytes, stream);
      e != cudaSuccess) {
    cudaGetLastError();
    detail::fail("learned", "cannot allocate ", arrays + sort_bytes,
                 " bytes on the device to sort positions: ", cudaGetErrorString(e));
  }
  int64_t* keys = reinterpret_cast<int64_t*>(buffer);
  int64_t* tokens = keys + n;
  int64_t* sorted_keys = tokens + n;
  int64_t* sorted_tokens = sorted_keys + n;
  gather_positions_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
      Positions{p.data, p.batch_stride, p.token_stride}, grad.extent[0], grad.extent[1], keys, tokens);
  // int64 keys sort as unsigned bit patterns after CUB flips the sign bit: negative positions first.
  if (const cudaError_t e = cub::DeviceRadixSort::SortPairs(buffer + arrays, sort_bytes, keys, sorted_keys,
                                                            tokens, sorted_tokens, n, 0, 64, stream);
      e != cudaSuccess) {
    cudaGetLastError();
    cudaFreeAsync(buffer, stream);
    detail::fail("learned", "sorting ", n, " positions on the device failed: ", cudaGetErrorString(e));
  }
  const Rows g = rows_of(grad);
  if (grad.dtype == DType::f32)
    learned_backward_kernel<float><<<static_cast<unsigned>(table_rows), kThreads, 0, stream>>>(
        sorted_keys, sorted_tokens, n, g, grad_table, grad_table_strides[0], grad_table_strides[1],
        table_rows);
  else
    learned_backward_kernel<uint16_t><<<static_cast<unsigned>(table_rows), kThreads, 0, stream>>>(
        sorted_keys, sorted_tokens, n, g, grad_table, grad_table_strides[0], grad_table_strides[1],
        table_rows);
  cudaFreeAsync(buffer, stream);
  check_launch("learned", "the CUDA gradient kernels' launch");
}

}  // namespace posenc::cuda
