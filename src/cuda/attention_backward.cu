// src/cuda/attention_backward.cu: the attention backward on the GPU, FlashAttention-2's (Dao 2023)
// recomputation (its kernels: src/cuda/attention_backward-inl.cuh; with Shaw's terms:
// src/cuda/attention_backward_shaw.cu, with Transformer-XL's: src/cuda/attention_backward_xl.cu),
// deterministic: no float atomics, every sum in an order fixed by the shapes.
//   rows:    D_i = sum_d dO_id O_id per query row (the softmax's backward term).
//   keys:    dK, dV (and the learned table's partial sums), a block per (64 keys, kv head, problem).
//   queries: dQ, a block per (64 rows, head, problem).
// P and dS are rounded to the storage type for the tensor cores (as the forward's P), gradients are written
// in fp32 (dq, dk, dv scratch) and added into the caller's views by the front end, after RoPE's inverse
// rotation.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <cutlass/numeric_types.h>

#include "src/cuda/attention.h"
#include "src/cuda/attention_backward-inl.cuh"
#include "src/cuda/device.h"

namespace posenc::cuda {
namespace {
using namespace backward;

// D_i = sum_d dO_id O_id (fp32; each lane a strided share of the dims, then a fixed butterfly), a warp per
// row.
struct RowTermsArgs {
  const void* out;
  const void* grad_out;
  int64_t out_strides[3], grad_out_strides[3];
  int64_t B, Q, H, D;
  float* terms;  // (B, H, Q)
};
template <class Element>
__global__ void row_terms_kernel(const __grid_constant__ RowTermsArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= a.B * a.Q * a.H) return;
  const int64_t h = row % a.H, t = (row / a.H) % a.Q, b = row / (a.H * a.Q);
  const Element* o =
      static_cast<const Element*>(a.out) + b * a.out_strides[0] + t * a.out_strides[1] + h * a.out_strides[2];
  const Element* g = static_cast<const Element*>(a.grad_out) + b * a.grad_out_strides[0] +
                     t * a.grad_out_strides[1] + h * a.grad_out_strides[2];
  float sum = 0;
  for (int64_t d = threadIdx.x % 32; d < a.D; d += 32)
    sum += static_cast<float>(o[d]) * static_cast<float>(g[d]);
  for (int x = 16; x > 0; x /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, x);
  if (threadIdx.x % 32 == 0) a.terms[(b * a.H + h) * a.Q + t] = sum;
}

// grad (B, T, H, D) of `dtype` at `strides` += g (contiguous fp32): each element added in fp32, rounded once;
// kAdd false: grad = g, rounded once, grad not read.
// Four elements (16 bytes of g; D is a multiple of 8) a thread, so that the row's place in the view is worked
// out once per four: in 32-bit arithmetic where the count allows.
template <class Element, class Index, bool kAdd>
__global__ void accumulate_kernel(const float* g, Element* grad, int64_t s0, int64_t s1, int64_t s2, Index T,
                                  Index H, Index quads_per_row, Index quads) {
  for (Index c = threadIdx.x + static_cast<Index>(blockIdx.x) * blockDim.x; c < quads;
       c += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index row = c / quads_per_row, d = (c - row * quads_per_row) * 4;
    const Index bt = row / H, h = row - bt * H, b = bt / T, t = bt - b * T;
    const float4 v = reinterpret_cast<const float4*>(g)[c];
    Element* x = grad + b * s0 + t * s1 + h * s2 + d;
    if constexpr (kAdd) {
      x[0] = Element(static_cast<float>(x[0]) + v.x);
      x[1] = Element(static_cast<float>(x[1]) + v.y);
      x[2] = Element(static_cast<float>(x[2]) + v.z);
      x[3] = Element(static_cast<float>(x[3]) + v.w);
    } else {
      x[0] = Element(v.x), x[1] = Element(v.y), x[2] = Element(v.z), x[3] = Element(v.w);
    }
  }
}

__global__ void zero_gradient_kernel(float* grad, int64_t rows, int64_t cols, int64_t s0, int64_t s1) {
  for (int64_t i = threadIdx.x + static_cast<int64_t>(blockIdx.x) * blockDim.x; i < rows * cols;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    grad[(i / cols) * s0 + (i % cols) * s1] = 0.0f;
}

template <class Element, bool kAdd>
void launch_accumulate(const float* g, void* grad, const int64_t strides[3], int64_t T, int64_t H, int64_t D,
                       int64_t total, cudaStream_t stream) {
  const int64_t quads = total / 4;
  const unsigned blocks = grid_blocks(quads, 256);
  Element* x = static_cast<Element*>(grad);
  if (quads < (int64_t{1} << 30))
    accumulate_kernel<Element, int32_t, kAdd><<<blocks, 256, 0, stream>>>(
        g, x, strides[0], strides[1], strides[2], static_cast<int32_t>(T), static_cast<int32_t>(H),
        static_cast<int32_t>(D / 4), static_cast<int32_t>(quads));
  else
    accumulate_kernel<Element, int64_t, kAdd>
        <<<blocks, 256, 0, stream>>>(g, x, strides[0], strides[1], strides[2], T, H, D / 4, quads);
}

// d sink_h = -sum over rows of p_sink,i D_i with p_sink,i = exp(sink_h - lse_i) (the sink is a softmax entry
// without a value): a block per head, each thread a fixed share of the rows in double, then a fixed tree.
struct SinksArgs {
  const float* lse;
  int64_t lse_strides[3];
  const float* row_terms;  // (B, H, Q)
  const float* sinks;
  int64_t sinks_stride;
  int64_t B, Q, H;
  float* grad;
  int64_t grad_stride;
};
__global__ void sinks_gradient_kernel(const __grid_constant__ SinksArgs a) {
  __shared__ double partial[256];
  const int64_t h = blockIdx.x;
  const double sink = a.sinks[h * a.sinks_stride];
  double sum = 0;
  for (int64_t r = threadIdx.x; r < a.B * a.Q; r += blockDim.x) {
    const int64_t b = r / a.Q, t = r % a.Q;
    const double lse = a.lse[b * a.lse_strides[0] + h * a.lse_strides[1] + t * a.lse_strides[2]];
    sum += exp(sink - lse) * a.row_terms[(b * a.H + h) * a.Q + t];
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = 128; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) a.grad[h * a.grad_stride] += static_cast<float>(-partial[0]);
}

// grad_table[row, h] += the partial sums of head h over the keys-pass blocks in their order, then over the
// distances of each row in distance order. A block per head.
struct TableGradientArgs {
  const float* partials;  // (blocks, H, n)
  int64_t blocks, H, limit;
  BiasKind kind;
  int32_t rows[kMaxDeviceRowTable];
  int64_t num_rows;
  float* grad;
  int64_t grad_strides[2];
};

__global__ void table_gradient_kernel(const __grid_constant__ TableGradientArgs a) {
  __shared__ float by_distance[kMaxDeviceRowTable];
  const int64_t h = blockIdx.x, n = 2 * a.limit + 1;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float sum = 0;
    for (int64_t b = 0; b < a.blocks; ++b) sum += a.partials[(b * a.H + h) * n + i];
    by_distance[i] = sum;
  }
  __syncthreads();
  for (int64_t r = threadIdx.x; r < a.num_rows; r += blockDim.x) {
    float sum = 0;
    for (int64_t i = 0; i < n; ++i)
      if (bias_row(a.kind, a.limit, a.rows, i - a.limit) == r) sum += by_distance[i];
    a.grad[r * a.grad_strides[0] + h * a.grad_strides[1]] += sum;
  }
}

// Cumulative lengths the front end could not read: a sequence outside the tokens or decreasing offsets make
// every gradient this call computes NaN (written after the passes), never a stale or partial sum.
__global__ void poison_on_bad_packing_kernel(const int64_t* cq, const int64_t* ck, int64_t sequences,
                                             int64_t Q, int64_t K, float* grads, int64_t n, float* sinks,
                                             int64_t n_sinks, int64_t sinks_stride, float* table,
                                             int64_t table_rows, int64_t H, int64_t t0, int64_t t1) {
  __shared__ int bad;
  if (threadIdx.x == 0) bad = 0;
  __syncthreads();
  for (int64_t s = threadIdx.x; s <= sequences; s += blockDim.x) {
    const bool ends =
        (s == 0 && (cq[0] != 0 || ck[0] != 0)) || (s == sequences && (cq[s] != Q || ck[s] != K));
    if (ends || (s > 0 && (cq[s] < cq[s - 1] || ck[s] < ck[s - 1]))) bad = 1;
  }
  __syncthreads();
  if (!bad) return;
  const float nan = __int_as_float(0x7fc00000);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = threadIdx.x + static_cast<int64_t>(blockIdx.x) * blockDim.x; i < n; i += step)
    grads[i] = nan;
  if (blockIdx.x != 0) return;
  if (sinks != nullptr)
    for (int64_t h = threadIdx.x; h < n_sinks; h += blockDim.x) sinks[h * sinks_stride] = nan;
  if (table != nullptr)
    for (int64_t i = threadIdx.x; i < table_rows * H; i += blockDim.x)
      table[(i / H) * t0 + (i % H) * t1] = nan;
}

template <class Element, int kHeadDim>
void launch_backward(const BackwardParams& p, int64_t problems, const KeyWaves& waves) {
  launch_keys_pass<Element, kHeadDim, false>(p, problems, waves);
  launch_pass<Element, kHeadDim>(queries_kernel<Element, kHeadDim, false>, p,
                                 dim3(static_cast<unsigned>((p.Q + 63) / 64), static_cast<unsigned>(p.H),
                                      static_cast<unsigned>(problems)),
                                 "the queries pass (dQ)");
}

}  // namespace

void attention_backward(const AttentionBackwardLaunch& bl) {
  const AttentionLaunch& l = bl.forward;
  const int64_t problems = l.cu_seqlens_q != nullptr ? l.sequences : l.B;
  const cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream());
  const bool bf16 = l.dtype == DType::bf16;
  // The row terms D_i.
  DeviceScratch terms("attention_backward", "the row terms", static_cast<size_t>(l.B * l.H * l.Q) * 4);
  RowTermsArgs ra{};
  ra.out = bl.out, ra.grad_out = bl.grad_out;
  for (int i = 0; i < 3; ++i)
    ra.out_strides[i] = bl.out_strides[i], ra.grad_out_strides[i] = bl.grad_out_strides[i];
  ra.B = l.B, ra.Q = l.Q, ra.H = l.H, ra.D = l.Dv, ra.terms = terms.as<float>();  // out's head dim
  const int64_t rows = l.B * l.Q * l.H;
  if (rows > 0) {
    const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);
    bf16 ? row_terms_kernel<cutlass::bfloat16_t><<<blocks, 256, 0, stream>>>(ra)
         : row_terms_kernel<cutlass::half_t><<<blocks, 256, 0, stream>>>(ra);
    check_launch("attention_backward", "the row terms kernel");
  }

  auto params = std::make_unique<BackwardParams>();
  BackwardParams& p = *params;
  p.Q = l.Q, p.K = l.K, p.H = l.H, p.Hkv = l.Hkv;
  p.D = static_cast<int>(l.D), p.Dv = static_cast<int>(l.Dv);
  p.q = l.q, p.k = l.k, p.v = l.v, p.grad_out = bl.grad_out;
  for (int i = 0; i < 3; ++i) {
    p.q_strides[i] = l.q_strides[i], p.k_strides[i] = l.k_strides[i], p.v_strides[i] = l.v_strides[i];
    p.grad_out_strides[i] = bl.grad_out_strides[i], p.lse_strides[i] = bl.lse_strides[i];
  }
  p.lse = bl.lse, p.row_terms = terms.as<float>();
  p.q_pos = l.q_pos, p.k_pos = l.k_pos, p.q_pos_stride = l.q_pos_stride, p.k_pos_stride = l.k_pos_stride;
  p.cu_seqlens_q = l.cu_seqlens_q, p.cu_seqlens_k = l.cu_seqlens_k;
  p.scale = l.scale;
  p.mask = l.mask;
  p.terms.softcap = l.softcap;
  p.temperature = l.temperature.kind;
  p.temperature_scale = l.temperature.scale, p.temperature_floor = l.temperature.floor_scale;
  p.dq = bl.dq, p.dk = bl.dk, p.dv = bl.dv;
  p.dk_out = bl.dk_out, p.dv_out = bl.dv_out;
  const std::unique_ptr<DeviceScratch> lookup = set_score_bias(l, &p.terms, p.slopes, &p.lookup);
  if (bl.grad_sinks != nullptr && l.H > 0) {
    SinksArgs sa{};
    sa.lse = bl.lse;
    for (int i = 0; i < 3; ++i) sa.lse_strides[i] = bl.lse_strides[i];
    sa.row_terms = terms.as<float>(), sa.sinks = l.sinks, sa.sinks_stride = l.sinks_stride;
    sa.B = l.B, sa.Q = l.Q, sa.H = l.H, sa.grad = bl.grad_sinks, sa.grad_stride = bl.grad_sinks_stride;
    sinks_gradient_kernel<<<static_cast<unsigned>(l.H), 256, 0, stream>>>(sa);
    check_launch("attention_backward", "the sinks gradient kernel");
  }
  const bool sm90 = problems > 0 && l.H > 0 && attention_backward_choice != AttentionKernel::tiled &&
                    attention_backward_sm90_fits(bl, attention_backward_choice == AttentionKernel::automatic);
  // The learned table's gradient: sums by lookup entry; on the tiled passes from partial sums per keys-pass
  // block, in waves of at most attention_table_partial_bytes.
  const int64_t key_tiles = (l.K + 63) / 64;
  KeyWaves waves;
  waves.width = std::max<int64_t>(key_tiles, 1);
  std::unique_ptr<DeviceScratch> partials, sums;
  if (bl.grad_table != nullptr && problems > 0 && l.H > 0) {
    waves.n = 2 * l.bias.limit + 1;
    sums = std::make_unique<DeviceScratch>("attention_backward", "the table gradient's sums",
                                           static_cast<size_t>(l.H * waves.n) * 4);
    sums->zero();
    waves.sums = sums->as<float>();
  }
  if (sums != nullptr && !sm90) {
    const int64_t per_tile = problems * l.H * waves.n * 4;
    waves.width = std::clamp<int64_t>(attention_table_partial_bytes / per_tile, 1, waves.width);
    partials = std::make_unique<DeviceScratch>("attention_backward", "the table gradient's partial sums",
                                               static_cast<size_t>(waves.width * per_tile));
    waves.partials = partials->as<float>();
    p.bias_partials = waves.partials;
  }
  if (problems > 0 && l.H > 0 && l.shaw_a_k != nullptr) {
    attention_backward_shaw(bl, p, problems, waves);
  } else if (problems > 0 && l.H > 0 && l.xl_u != nullptr) {
    attention_backward_xl(bl, p, problems, waves);
  } else if (sm90) {
    attention_backward_sm90(bl, p, problems, waves.sums);
  } else if (problems > 0 && l.H > 0) {
    const int64_t tile_dim = attention_backward_tile_dim(l.D, l.Dv);
    if (tile_dim == 64)
      bf16 ? launch_backward<cutlass::bfloat16_t, 64>(p, problems, waves)
           : launch_backward<cutlass::half_t, 64>(p, problems, waves);
    else if (tile_dim == 128)
      bf16 ? launch_backward<cutlass::bfloat16_t, 128>(p, problems, waves)
           : launch_backward<cutlass::half_t, 128>(p, problems, waves);
    else if (tile_dim == 192)
      bf16 ? launch_backward<cutlass::bfloat16_t, 192>(p, problems, waves)
           : launch_backward<cutlass::half_t, 192>(p, problems, waves);
    else
      bf16 ? launch_backward<cutlass::bfloat16_t, 256>(p, problems, waves)
           : launch_backward<cutlass::half_t, 256>(p, problems, waves);
  }
  if (sums != nullptr) {
    auto args = std::make_unique<TableGradientArgs>();
    args->partials = waves.sums;  // the waves' sums: one "block"
    args->blocks = 1, args->H = l.H, args->limit = l.bias.limit, args->kind = l.bias.kind;
    std::copy(l.bias.rows.begin(), l.bias.rows.end(), args->rows);
    args->num_rows = bl.table_rows;
    args->grad = bl.grad_table;
    args->grad_strides[0] = bl.grad_table_strides[0], args->grad_strides[1] = bl.grad_table_strides[1];
    table_gradient_kernel<<<static_cast<unsigned>(l.H), 256, 0, stream>>>(*args);
    check_launch("attention_backward", "the table gradient kernel");
  }
  if (l.cu_seqlens_q != nullptr) {
    const int64_t n =
        l.B * ((l.Q * l.H + l.K * l.Hkv) * l.D + l.K * l.Hkv * l.Dv);  // dq, dk, dv: one scratch
    poison_on_bad_packing_kernel<<<grid_blocks(n, 256), 256, 0, stream>>>(
        l.cu_seqlens_q, l.cu_seqlens_k, l.sequences, l.Q, l.K, bl.dq, n, bl.grad_sinks, l.H,
        bl.grad_sinks_stride, bl.grad_table, bl.table_rows, l.H, bl.grad_table_strides[0],
        bl.grad_table_strides[1]);
    check_launch("attention_backward", "the packing check kernel");
  }
}

void accumulate_gradient(const float* g, void* grad, DType dtype, const int64_t strides[3], int64_t B,
                         int64_t T, int64_t H, int64_t D, bool add) {
  const int64_t total = B * T * H * D;
  if (total == 0) return;
  const auto stream = static_cast<cudaStream_t>(cuda_stream());
  const auto launch = [&](auto element) {
    using Element = decltype(element);
    add ? launch_accumulate<Element, true>(g, grad, strides, T, H, D, total, stream)
        : launch_accumulate<Element, false>(g, grad, strides, T, H, D, total, stream);
  };
  if (dtype == DType::f32)
    launch(float{});
  else if (dtype == DType::bf16)
    launch(cutlass::bfloat16_t{});
  else
    launch(cutlass::half_t{});
  check_launch("attention_backward", "the gradient accumulation kernel");
}

void zero_gradient(float* grad, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if (rows * cols == 0) return;
  zero_gradient_kernel<<<grid_blocks(rows * cols, 256), 256, 0, static_cast<cudaStream_t>(cuda_stream())>>>(
      grad, rows, cols, row_stride, col_stride);
  check_launch("attention_backward", "the gradient zeroing kernel");
}

}  // namespace posenc::cuda
