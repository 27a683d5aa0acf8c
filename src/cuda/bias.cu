// src/cuda/bias.cu: the distance biases on the GPU: ALiBi and learned (clipped, T5) blocks (H, Q, K), and
// the learned table's gradient, deterministic.
//   Forward: one block per (h, i) row of K keys; each thread writes 16 bytes (or single elements where the
//   row is not aligned) of bias(k_pos[j] - q_pos[i]).
//   Backward, two passes and no float atomics: (1) a block per (h, 16 queries), a warp per query row: in
//   each step the 32 lanes' (row, value) pairs are grouped by row (__match_any_sync), each group summed in
//   lane order by its lowest lane into that warp's own row sums in shared memory; the block's warps are
//   then added in warp order into one partial per (h, query block, row); (2) a thread per (row, h) adds
//   the partials in query-block order to grad_table. The order of every sum is fixed by the shapes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "posenc/device.h"
#include "src/cuda/bias.h"
#include "src/check.h"
#include "src/cuda/device.h"
#include "src/cuda/rope-inl.cuh"
#include "src/half.h"

namespace posenc::cuda {
namespace {

constexpr int kThreads = 128;

struct SlopesArg {
  double slopes[kMaxDeviceBiasHeads];
  bool symmetric;
};
struct RowsArg {
  BiasKind kind;
  int64_t limit;
  int32_t rows[kMaxDeviceRowTable];
  const float* table;
  int64_t table_strides[2];
};
struct BlockArgs {
  int64_t heads, q, k;
  const int64_t* q_pos;
  int64_t q_stride;
  const int64_t* k_pos;
  int64_t k_stride;
  void* out;
  int64_t out_strides[3];
};

__device__ __forceinline__ uint16_t store_value(float v, uint16_t, bool bf16) {
  return bf16 ? detail::f32_to_bf16(v) : detail::f32_to_f16(v);
}

// The bias of head h at distance d (NaN where the positions are out of range: no wrapped distance).
template <bool kAlibi>
__device__ __forceinline__ float bias_value(const SlopesArg& s, const RowsArg& r, int64_t h, int64_t qp,
                                            int64_t kp) {
  if (!position_in_range(kp, 0) || !position_in_range(qp, 0)) return quiet_nan();
  const int64_t d = kp - qp;
  if constexpr (kAlibi) {
    return alibi_value(s.slopes[h], s.symmetric, d);
  } else {
    const int64_t row = bias_row(r.kind, r.limit, r.rows, d);
    return r.table[row * r.table_strides[0] + h * r.table_strides[1]];
  }
}

template <bool kAlibi, typename T, int kVec>
__global__ void __launch_bounds__(kThreads)
    bias_block_kernel(const __grid_constant__ SlopesArg slopes, const __grid_constant__ RowsArg rows,
                      const BlockArgs a, bool bf16) {
  const int64_t row_count = a.heads * a.q;
  for (int64_t hr = blockIdx.x; hr < row_count; hr += gridDim.x) {
    const int64_t h = hr / a.q, i = hr - h * a.q;
    const int64_t qp = a.q_pos[i * a.q_stride];
    T* out = static_cast<T*>(a.out) + h * a.out_strides[0] + i * a.out_strides[1];
    if constexpr (kVec > 1) {  // unit stride on K, 16-byte aligned rows, K a multiple of kVec
      for (int64_t j0 = int64_t{threadIdx.x} * kVec; j0 < a.k; j0 += int64_t{blockDim.x} * kVec) {
        T v[kVec];
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const float b = bias_value<kAlibi>(slopes, rows, h, qp, a.k_pos[(j0 + e) * a.k_stride]);
          if constexpr (sizeof(T) == 4)
            v[e] = b;
          else
            v[e] = store_value(b, T{}, bf16);
        }
        uint4 raw;
        memcpy(&raw, v, sizeof raw);
        *reinterpret_cast<uint4*>(out + j0) = raw;
      }
    } else {
      for (int64_t j = threadIdx.x; j < a.k; j += blockDim.x) {
        const float b = bias_value<kAlibi>(slopes, rows, h, qp, a.k_pos[j * a.k_stride]);
        if constexpr (sizeof(T) == 4)
          out[j * a.out_strides[2]] = b;
        else
          out[j * a.out_strides[2]] = store_value(b, T{}, bf16);
      }
    }
  }
}

int grid_for(int64_t rows) { return static_cast<int>(std::min<int64_t>(rows, int64_t{1} << 24)); }

template <bool kAlibi, typename T>
void launch_block(const SlopesArg& s, const RowsArg& r, const BlockArgs& a, bool bf16, cudaStream_t stream) {
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
  const bool vec = a.out_strides[2] == 1 && reinterpret_cast<uintptr_t>(a.out) % 16 == 0 &&
                   a.out_strides[0] % kVec == 0 && a.out_strides[1] % kVec == 0 && a.k % kVec == 0;
  const int grid = grid_for(a.heads * a.q);
  if (vec)
    bias_block_kernel<kAlibi, T, kVec><<<grid, kThreads, 0, stream>>>(s, r, a, bf16);
  else
    bias_block_kernel<kAlibi, T, 1><<<grid, kThreads, 0, stream>>>(s, r, a, bf16);
}

// ---------------------------------------------------------------- backward
constexpr int kWarps = 8;
constexpr int kQueriesPerBlock = 16;

struct BackwardArgs {
  int64_t heads, q, k, num_rows;
  const int64_t* q_pos;
  int64_t q_stride;
  const int64_t* k_pos;
  int64_t k_stride;
  const void* grad;
  int64_t grad_strides[3];
  float* partial;  // (H, query blocks, rows)
};

template <typename T>
__device__ __forceinline__ float load_grad(const T* p, bool bf16) {
  if constexpr (sizeof(T) == 4)
    return *p;
  else
    return bf16 ? detail::bf16_to_f32(*p) : detail::f16_to_f32(*p);
}

template <typename T>
__global__ void __launch_bounds__(kWarps * 32)
    bias_backward_partial_kernel(const __grid_constant__ RowsArg rows, const BackwardArgs a, bool bf16) {
  __shared__ float sums[kWarps][kMaxDeviceBiasRows];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t blocks_q = (a.q + kQueriesPerBlock - 1) / kQueriesPerBlock;
  const int64_t h = blockIdx.x / blocks_q, qb = blockIdx.x - h * blocks_q;
  for (int64_t r = lane; r < a.num_rows; r += 32) sums[warp][r] = 0.0f;
  __syncwarp();
  const T* grad = static_cast<const T*>(a.grad) + h * a.grad_strides[0];
  bool out_of_range = false;  // a position past +-2^53 in this warp's pairs: its sums become NaN at the end
  const int64_t q_end = a.q < (qb + 1) * kQueriesPerBlock ? a.q : (qb + 1) * kQueriesPerBlock;
  for (int64_t i = qb * kQueriesPerBlock + warp; i < q_end; i += kWarps) {
    const int64_t qp = a.q_pos[i * a.q_stride];
    const T* g = grad + i * a.grad_strides[1];
    for (int64_t j0 = 0; j0 < a.k; j0 += 32) {  // every lane runs every step: the warp stays converged
      const int64_t j = j0 + lane;
      int row = -1;
      float value = 0.0f;
      if (j < a.k) {
        const int64_t kp = a.k_pos[j * a.k_stride];
        value = load_grad(g + j * a.grad_strides[2], bf16);
        // Positions out of range poison the whole table (a NaN in every row of this head's partial).
        row = position_in_range(kp, 0) && position_in_range(qp, 0)
                  ? static_cast<int>(bias_row(rows.kind, rows.limit, rows.rows, kp - qp))
                  : -2;
      }
      out_of_range |= __any_sync(0xffffffffu, row == -2);
      const unsigned group = __match_any_sync(0xffffffffu, row);
      const bool leader = lane == __ffs(group) - 1;
      if (row >= 0) {  // every lane of the group sums it in lane order; its lowest lane adds the sum
        float total = 0.0f;
        for (unsigned m = group; m; m &= m - 1) total += __shfl_sync(group, value, __ffs(m) - 1);
        if (leader) sums[warp][row] += total;
      }
      __syncwarp();
    }
  }
  if (out_of_range)  // every lane agrees (__any_sync): the whole warp writes its rows, after its last step
    for (int64_t r = lane; r < a.num_rows; r += 32) sums[warp][r] = quiet_nan();
  __syncthreads();
  float* partial = a.partial + (h * blocks_q + qb) * a.num_rows;
  for (int64_t r = threadIdx.x; r < a.num_rows; r += blockDim.x) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += sums[w][r];
    partial[r] = total;
  }
}

__global__ void bias_backward_reduce_kernel(const float* partial, int64_t heads, int64_t blocks_q,
                                            int64_t num_rows, float* grad_table, int64_t row_stride,
                                            int64_t head_stride) {
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= heads * num_rows) return;
  const int64_t h = idx / num_rows, r = idx - h * num_rows;
  float total = 0.0f;
  for (int64_t b = 0; b < blocks_q; ++b) total += partial[(h * blocks_q + b) * num_rows + r];
  grad_table[r * row_stride + h * head_stride] += total;
}

RowsArg rows_arg(const DeviceBias& b) {
  RowsArg r{};
  r.kind = b.kind;
  r.limit = b.limit;
  for (size_t i = 0; i < b.rows.size(); ++i) r.rows[i] = b.rows[i];
  r.table = b.table;
  r.table_strides[0] = b.table_strides[0];
  r.table_strides[1] = b.table_strides[1];
  return r;
}

}  // namespace

void bias_block(const BiasBlockLaunch& l) {
  if (l.heads * l.q * l.k == 0) return;
  static_assert(sizeof(SlopesArg) + sizeof(RowsArg) + sizeof(BlockArgs) < 32000, "kernel parameters");
  SlopesArg s{};
  for (size_t i = 0; i < l.bias.slopes.size(); ++i) s.slopes[i] = l.bias.slopes[i];
  s.symmetric = l.bias.symmetric;
  const RowsArg r = rows_arg(l.bias);
  const BlockArgs a{l.heads,
                    l.q,
                    l.k,
                    l.q_positions.data,
                    l.q_positions.stride,
                    l.k_positions.data,
                    l.k_positions.stride,
                    l.out,
                    {l.out_strides[0], l.out_strides[1], l.out_strides[2]}};
  const auto stream = static_cast<cudaStream_t>(cuda_stream());
  const bool alibi = l.bias.kind == BiasKind::alibi, bf16 = l.dtype == DType::bf16;
  if (l.dtype == DType::f32)
    alibi ? launch_block<true, float>(s, r, a, bf16, stream)
          : launch_block<false, float>(s, r, a, bf16, stream);
  else
    alibi ? launch_block<true, uint16_t>(s, r, a, bf16, stream)
          : launch_block<false, uint16_t>(s, r, a, bf16, stream);
  check_launch("bias", "the CUDA bias kernel's launch");
}

void bias_block_backward(const BiasBackwardLaunch& l) {
  if (l.heads * l.q * l.k == 0) return;
  const auto stream = static_cast<cudaStream_t>(cuda_stream());
  const int64_t blocks_q = (l.q + kQueriesPerBlock - 1) / kQueriesPerBlock;
  const int64_t blocks = l.heads * blocks_q;
  if (blocks > (int64_t{1} << 31) - 1)
    detail::fail("relative_bias_backward", "H x ceil(Q / 16) = ", blocks, " blocks: more than CUDA launches");
  float* partial = nullptr;
  const size_t bytes = sizeof(float) * static_cast<size_t>(l.heads * blocks_q * l.num_rows);
  if (const cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&partial), bytes, stream);
      e != cudaSuccess) {
    cudaGetLastError();
    detail::fail("relative_bias_backward", "cannot allocate ", bytes,
                 " bytes of partial sums on the device: ", cudaGetErrorString(e));
  }
  const RowsArg r = rows_arg(l.bias);
  const BackwardArgs a{l.heads,
                       l.q,
                       l.k,
                       l.num_rows,
                       l.q_positions.data,
                       l.q_positions.stride,
                       l.k_positions.data,
                       l.k_positions.stride,
                       l.grad,
                       {l.grad_strides[0], l.grad_strides[1], l.grad_strides[2]},
                       partial};
  const bool bf16 = l.dtype == DType::bf16;
  if (l.dtype == DType::f32)
    bias_backward_partial_kernel<float>
        <<<static_cast<unsigned>(blocks), kWarps * 32, 0, stream>>>(r, a, bf16);
  else
    bias_backward_partial_kernel<uint16_t>
        <<<static_cast<unsigned>(blocks), kWarps * 32, 0, stream>>>(r, a, bf16);
  const int64_t cells = l.heads * l.num_rows;
  bias_backward_reduce_kernel<<<static_cast<unsigned>((cells + 255) / 256), 256, 0, stream>>>(
      partial, l.heads, blocks_q, l.num_rows, l.grad_table, l.grad_table_strides[0], l.grad_table_strides[1]);
  cudaFreeAsync(partial, stream);
  check_launch("relative_bias_backward", "the CUDA gradient kernels' launch");
}

}  // namespace posenc::cuda
