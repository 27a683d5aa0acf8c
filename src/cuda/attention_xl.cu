// src/cuda/attention_xl.cu: Transformer-XL's position terms (Dai et al. 2019, arXiv 1901.02860) in the fused
// attention forward: the tables the kernels read, and the kXL instantiations of the kernel template
// (src/cuda/attention_forward.cuh), in a translation unit of their own so that they compile in parallel with
// src/cuda/attention.cu.
//   logit_ij = cap(scale ((q_i + u_h) . k_j + (q_i + v_h) . rproj_h(delta_ij))) + bias
//   delta_ij = q_pos_i - k_pos_j,  rproj_h(delta) = W_R[h D : (h + 1) D, :] R_delta,
//   R_delta = [sin(delta w_e) | cos(delta w_e)] (d_model values),  w_e = base^(-2 e / d_model)
// Positions are the default ones (keys 0 .. K-1, queries aligned to the end, restarting in each packed
// sequence), so every delta a visible pair can have lies in xl_delta_range of the longest sequence's
// lengths, known on the host without reading positions back (packed sequences' offsets are read back
// once). Before the attention, over those n deltas:
//   1. R (n, d_model): each angle delta w_e formed and reduced in double, sin and cos rounded once to fp32
//      (src/angle.h sin_cos_of_angle, as the RoPE kernels), then split in two bf16 parts; W_R likewise;
//   2. rproj (H, n, D) f32 = W_R,h R_delta on the tensor cores from the parts, accumulated in fp32: each
//      element within about (2^-15 + d_model 2^-24) sum_e |W_R R| of the exact one, far below the storage
//      type's rounding that follows (O(H D d_model n) products, as the CPU's table);
//   3. the rows rounded once to the storage type (the tensor cores' operand in the attention) and
//      v_h . rproj_h(delta) in fp32 from the unrounded rows.
// Keeping u and v out of the 16-bit operands (u . k_j per key in fp32 in the kernel, v . rproj per delta
// here) leaves rproj's rounding as the only one beyond the plain forward's, where adding them to q first
// would round q + u and q + v to the storage type as well.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "posenc/device.h"
#include "src/angle.h"
#include "src/check.h"
#include "src/cuda/attention.h"
#include "src/cuda/attention_forward.cuh"
#include "src/cuda/device.h"

namespace posenc::cuda {
namespace forward {
namespace {

constexpr const char* kOp = "attention";

unsigned blocks_for(int64_t total, int threads) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>((total + threads - 1) / threads, int64_t{1} << 20)));
}

using Bf16 = cutlass::bfloat16_t;

// x = hi + lo to about 2^-17 |x|: hi rounded to bf16, lo the rest (exact in fp32) rounded to bf16.
__device__ __forceinline__ void split_bf16(float x, Bf16* hi, Bf16* lo) {
  const Bf16 h(x);
  *hi = h, *lo = Bf16(x - static_cast<float>(h));
}

// R (n, d_model) as two bf16 parts, rows of `stride` (zeroed past d_model beforehand): row m = R_{lo + m},
// [sin | cos] halves. transposed: R^T (d_model, n) instead, rows of `stride` (zeroed past n).
__global__ void xl_sinusoid_kernel(int64_t lo, int64_t n, int64_t d_model, int64_t stride, double base,
                                   bool transposed, Bf16* r_hi, Bf16* r_lo) {
  const int64_t half = d_model / 2;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n * half;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t m = t / half, e = t % half;
    const double w = pow(base, -2.0 * static_cast<double>(e) / static_cast<double>(d_model));
    float s, c;
    detail::sin_cos_of_angle(static_cast<double>(lo + m) * w, &s, &c);
    const int64_t at_sin = transposed ? e * stride + m : m * stride + e,
                  at_cos = transposed ? (half + e) * stride + m : m * stride + half + e;
    split_bf16(s, r_hi + at_sin, r_lo + at_sin);
    split_bf16(c, r_hi + at_cos, r_lo + at_cos);
  }
}

// W_R (rows, d_model) f32 at its strides as two bf16 parts, rows of `stride` (zeroed past d_model
// beforehand).
__global__ void xl_split_kernel(const float* w, int64_t w_s0, int64_t w_s1, int64_t rows, int64_t d_model,
                                int64_t stride, Bf16* w_hi, Bf16* w_lo) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < rows * d_model;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = t / d_model, e = t % d_model;
    split_bf16(w[row * w_s0 + e * w_s1], w_hi + row * stride + e, w_lo + row * stride + e);
  }
}

// d rproj (H, n, D) f32 as two bf16 parts of its (H D, n) transpose, rows of `stride` (zeroed past n
// beforehand): row h D + d holds d rproj[h][m][d] for m < n.
__global__ void xl_split_transposed_kernel(const float* d_rproj, int64_t H, int64_t n, int64_t dim,
                                           int64_t stride, Bf16* hi, Bf16* lo) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < H * n * dim;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t d = t % dim, m = (t / dim) % n, h = t / (dim * n);
    const int64_t at = (h * dim + d) * stride + m;
    split_bf16(d_rproj[t], hi + at, lo + at);
  }
}

// C (rows_a, rows_b) = A B^T from two bf16 parts of each operand (rows of `stride`, the contraction,
// zero-padded to whole steps of 64): the forward's table, out (H, n, D) f32 with out[h][m][d] =
// sum_e W_R[h D + d][e] R[m][e] (A = R, B = W_R, dim = D), or (dim = 0) out (rows_a, rows_b) row-major, the
// backward's d W_R = d rproj^T R (A = d rproj^T, B = R^T).
// On the tensor cores (the attention's (64, 64) tiles and mma.sync atoms), a block per (64, 64) tile of C
// (blockIdx.x = row tile * col_tiles + col tile), the contraction in steps of 64. Both operands in two bf16
// parts, A B^T = Ah Bh^T + Ah Bl^T + Al Bh^T (the Al Bl^T left out is below 2^-17 of each product): each
// product within about 2^-15 of its value, accumulated in fp32, where the storage type's rounding of the rows
// that follows in the forward is 2^-9 (bf16) or 2^-12 (fp16).
__global__ void __launch_bounds__(AttentionTiles<Bf16, 64, 64>::kThreads)
    xl_project_kernel(const Bf16* r_hi, const Bf16* r_lo, const Bf16* w_hi, const Bf16* w_lo, int64_t n,
                      int w_rows, int64_t stride, int dim, unsigned col_tiles, float* out) {
  // Here A = r (n rows) and B = w (w_rows rows).
  using T = AttentionTiles<Bf16, 64, 64>;
  __shared__ alignas(128) Bf16 parts[4][64 * 64];  // Rh, Rl, Wh, Wl
  const int tid = threadIdx.x;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x / col_tiles) * 64;  // 32-bit divisions
  const int c0 = static_cast<int>(blockIdx.x % col_tiles) * 64;
  const int rows_r = static_cast<int>(min<int64_t>(64, n - m0)), rows_w = min(64, w_rows - c0);
  const auto tile = Shape<_64, _64>{};
  Tensor sRh = make_tensor(make_smem_ptr(parts[0]), typename T::SmemQ{});
  Tensor sRl = make_tensor(make_smem_ptr(parts[1]), typename T::SmemQ{});
  Tensor sWh = make_tensor(make_smem_ptr(parts[2]), typename T::SmemK{});
  Tensor sWl = make_tensor(make_smem_ptr(parts[3]), typename T::SmemK{});
  Tensor cT = make_identity_tensor(tile);
  typename T::GmemCopy gmem_copy;
  auto gmem_thr = gmem_copy.get_thread_slice(tid);
  typename T::Mma mma;
  auto thr = mma.get_thread_slice(tid);
  Tensor rA = thr.partition_fragment_A(sRh);
  Tensor rB = thr.partition_fragment_B(sWh);
  Tensor acc = partition_fragment_C(mma, tile);
  clear(acc);
  const auto tiled_copy_a = make_tiled_copy_A(typename T::SmemCopyA{}, mma);
  const auto tiled_copy_b = make_tiled_copy_B(typename T::SmemCopyA{}, mma);
  auto copy_a = tiled_copy_a.get_thread_slice(tid);
  auto copy_b = tiled_copy_b.get_thread_slice(tid);
  Tensor sRh_a = copy_a.partition_S(sRh), sRl_a = copy_a.partition_S(sRl);
  Tensor sWh_b = copy_b.partition_S(sWh), sWl_b = copy_b.partition_S(sWl);
  Tensor rA_view = copy_a.retile_D(rA);
  Tensor rB_view = copy_b.retile_D(rB);
  for (int64_t e0 = 0; e0 < stride; e0 += 64) {
    Tensor gRh = make_tensor(make_gmem_ptr(r_hi + m0 * stride + e0), tile, make_stride(stride, _1{}));
    Tensor gRl = make_tensor(make_gmem_ptr(r_lo + m0 * stride + e0), tile, make_stride(stride, _1{}));
    Tensor gWh = make_tensor(make_gmem_ptr(w_hi + c0 * stride + e0), tile, make_stride(stride, _1{}));
    Tensor gWl = make_tensor(make_gmem_ptr(w_lo + c0 * stride + e0), tile, make_stride(stride, _1{}));
    load_rows(gmem_copy, gmem_thr.partition_S(gRh), gmem_thr.partition_D(sRh), gmem_thr.partition_S(cT),
              rows_r, 64);
    load_rows(gmem_copy, gmem_thr.partition_S(gRl), gmem_thr.partition_D(sRl), gmem_thr.partition_S(cT),
              rows_r, 64);
    load_rows(gmem_copy, gmem_thr.partition_S(gWh), gmem_thr.partition_D(sWh), gmem_thr.partition_S(cT),
              rows_w, 64);
    load_rows(gmem_copy, gmem_thr.partition_S(gWl), gmem_thr.partition_D(sWl), gmem_thr.partition_S(cT),
              rows_w, 64);
    cp_async_fence();
    cp_async_wait<0>();
    __syncthreads();
    tile_gemm(mma, acc, rA, rB, sRh_a, rA_view, sWh_b, rB_view, tiled_copy_a, tiled_copy_b);
    tile_gemm(mma, acc, rA, rB, sRh_a, rA_view, sWl_b, rB_view, tiled_copy_a, tiled_copy_b);
    tile_gemm(mma, acc, rA, rB, sRl_a, rA_view, sWh_b, rB_view, tiled_copy_a, tiled_copy_b);
    __syncthreads();  // every warp is done with these parts
  }
  Tensor cC = make_identity_tensor(tile);
  Tensor coords =
      make_tensor(thr.partition_C(cC).data(), accumulator_rows_cols(thr.partition_C(cC).layout()));
  Tensor a = make_tensor(acc.data(), accumulator_rows_cols(acc.layout()));
  CUTE_UNROLL
  for (int r = 0; r < size<0>(a); ++r) CUTE_UNROLL
  for (int c = 0; c < size<1>(a); ++c) {
    const int64_t m = m0 + get<0>(coords(r, c));
    const int col = c0 + get<1>(coords(r, c));
    if (m >= n || col >= w_rows) continue;
    if (dim == 0) {
      out[m * w_rows + col] = a(r, c);
    } else {
      const int h = col / dim;
      out[(h * n + m) * dim + (col - h * dim)] = a(r, c);
    }
  }
}

// Per row (h, m) of rproj (H n rows of dim), one warp: the row rounded to the storage type (NaN past its
// range), and vr[h n + m] = v_h . rproj_h[m] in fp32 (the lanes' sums in a fixed tree).
template <class Element>
__global__ void xl_finish_kernel(const float* rproj, int64_t rows, int64_t n, int dim, const float* v,
                                 int64_t v_s0, int64_t v_s1, Element* rproj16, float* vr) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32; row < rows;
       row += warps) {
    const int64_t h = row / n;
    float sum = 0;
    for (int d = lane; d < dim; d += 32) {
      const float x = rproj[row * dim + d];
      // Past fp16's range a row would round to +-inf, and a pair's logit to -inf (a probability of 0, finite
      // and wrong): NaN instead, so that the rows it meets come out NaN, as for the positions refused.
      const Element rounded(x);
      rproj16[row * dim + d] = isinf(static_cast<float>(rounded)) ? Element(NAN) : rounded;
      sum = fmaf(v[h * v_s0 + d * v_s1], x, sum);
    }
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) vr[row] = sum;
  }
}

// The most queries and keys of one sequence: Q and K for batch rows; for packed sequences the longest ones,
// read back from cu_seqlens once (the tables' size is the host's to know), since a visible pair never spans
// two sequences. Offsets that are not a valid packing (whose whole output the kernel makes NaN) give Q and K.
std::pair<int64_t, int64_t> longest_sequences(const AttentionLaunch& l) {
  if (l.cu_seqlens_q == nullptr) return {l.Q, l.K};
  const size_t count = static_cast<size_t>(l.sequences) + 1;
  std::vector<int64_t> cu_q(count), cu_k(count);
  const cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream());
  cudaError_t e = cudaMemcpyAsync(cu_q.data(), l.cu_seqlens_q, count * 8, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(cu_k.data(), l.cu_seqlens_k, count * 8, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) {
    cudaGetLastError();
    detail::fail(
        kOp, "reading cu_seqlens_q / cu_seqlens_k back for transformer_xl failed: ", cudaGetErrorString(e));
  }
  int64_t nq = 0, nk = 0;
  for (size_t i = 0; i + 1 < count; ++i) {
    const int64_t lq = cu_q[i + 1] - cu_q[i], lk = cu_k[i + 1] - cu_k[i];
    if (lq < 0 || lk < 0 || lq > l.Q || lk > l.K) return {l.Q, l.K};
    nq = std::max(nq, lq), nk = std::max(nk, lk);
  }
  return {nq, nk};
}

// The tables over the deltas of the longest sequences (see the file's comment), each of the storage type.
template <class Element>
void make_tables(const AttentionLaunch& l, int64_t n, int64_t lo, DeviceScratch& rproj16, DeviceScratch& vr) {
  const cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream());
  const int64_t dim = l.D, w_rows = l.H * l.D;
  const int64_t stride = (l.xl_d_model + 63) / 64 * 64;  // d_model in whole 64-column steps
  // The intermediates, freed (stream-ordered) before the attention.
  DeviceScratch sinusoids(kOp, "the Transformer-XL sinusoids", static_cast<size_t>(n * stride) * 4);
  DeviceScratch w_parts(kOp, "the Transformer-XL w_r in two bf16 parts",
                        static_cast<size_t>(w_rows * stride) * 4);
  DeviceScratch rproj(kOp, "the Transformer-XL projections", static_cast<size_t>(l.H * n * dim) * 4);
  sinusoids.zero(), w_parts.zero();  // the columns past d_model
  Bf16* r_hi = sinusoids.as<Bf16>();
  Bf16* w_hi = w_parts.as<Bf16>();
  xl_sinusoid_kernel<<<blocks_for(n * (l.xl_d_model / 2), 256), 256, 0, stream>>>(
      lo, n, l.xl_d_model, stride, l.xl_base, false, r_hi, r_hi + n * stride);
  check_launch(kOp, "the Transformer-XL sinusoid kernel");
  xl_split_kernel<<<blocks_for(w_rows * l.xl_d_model, 256), 256, 0, stream>>>(
      l.xl_w_r, l.xl_w_r_strides[0], l.xl_w_r_strides[1], w_rows, l.xl_d_model, stride, w_hi,
      w_hi + w_rows * stride);
  check_launch(kOp, "the Transformer-XL w_r split kernel");
  const int64_t row_tiles = (n + 63) / 64, col_tiles = (w_rows + 63) / 64;
  if (row_tiles * col_tiles > (int64_t{1} << 31) - 1)
    detail::fail(kOp, "transformer_xl's projections of ", n, " distances by ", w_rows,
                 " rows of w_r take more than 2^31 - 1 blocks");
  xl_project_kernel<<<static_cast<unsigned>(row_tiles * col_tiles), AttentionTiles<Bf16, 64, 64>::kThreads, 0,
                      stream>>>(r_hi, r_hi + n * stride, w_hi, w_hi + w_rows * stride, n,
                                static_cast<int>(w_rows), stride, static_cast<int>(dim),
                                static_cast<unsigned>(col_tiles), rproj.as<float>());
  check_launch(kOp, "the Transformer-XL projection kernel");
  xl_finish_kernel<Element><<<blocks_for(l.H * n * 32, 256), 256, 0, stream>>>(
      rproj.as<float>(), l.H * n, n, static_cast<int>(dim), l.xl_v, l.xl_v_strides[0], l.xl_v_strides[1],
      rproj16.as<Element>(), vr.as<float>());
  check_launch(kOp, "the Transformer-XL rounding kernel");
}

}  // namespace

void launch_transformer_xl(const AttentionLaunch& l, Params& p, const AttentionTileDims& tiles,
                           int64_t q_blocks, int64_t problems) {
  const XLTables t = transformer_xl_tables(l);
  p.xl_rproj = t.rproj->data(), p.xl_vr = t.vr->as<float>(), p.xl_lo = t.lo, p.xl_n = t.n;
  p.xl_u = l.xl_u, p.xl_u_strides[0] = l.xl_u_strides[0], p.xl_u_strides[1] = l.xl_u_strides[1];
  if (attention_forward_choice != AttentionKernel::tiled &&
      attention_sm90_xl_fits(l, t.n, attention_forward_choice == AttentionKernel::automatic)) {
    // The Hopper kernel (src/cuda/attention_sm90_xl.cu), with u . k_j tabulated first.
    DeviceScratch uk(kOp, "the Transformer-XL u . k", static_cast<size_t>(l.B * l.H * l.K) * 4);
    attention_sm90_xl_uk(l, uk.as<float>());
    p.xl_uk = uk.as<float>();
    launch_sm90_xl(l, p);
    return;
  }
  const bool bf16 = l.dtype == DType::bf16;
  if (tiles.qk == 64)
    bf16 ? launch<cutlass::bfloat16_t, 64, 64, false, true>(p, q_blocks, l.H, problems, l.B)
         : launch<cutlass::half_t, 64, 64, false, true>(p, q_blocks, l.H, problems, l.B);
  else
    bf16 ? launch<cutlass::bfloat16_t, 128, 128, false, true>(p, q_blocks, l.H, problems, l.B)
         : launch<cutlass::half_t, 128, 128, false, true>(p, q_blocks, l.H, problems, l.B);
}

}  // namespace forward

XLTables transformer_xl_tables(const AttentionLaunch& l) {
  const auto [nq, nk] = forward::longest_sequences(l);
  const DeltaRange range = xl_delta_range(nq, nk, l.mask.causal, l.mask.window);
  XLTables t;
  t.lo = range.lo, t.n = range.n, t.longest_q = nq, t.longest_k = nk;
  t.rproj = std::make_unique<DeviceScratch>(forward::kOp, "the Transformer-XL projections",
                                            static_cast<size_t>(l.H * t.n * l.D) * 2);
  t.vr = std::make_unique<DeviceScratch>(forward::kOp, "the Transformer-XL v . rproj",
                                         static_cast<size_t>(l.H * t.n) * 4);
  if (t.n > 0)
    l.dtype == DType::bf16 ? forward::make_tables<cutlass::bfloat16_t>(l, t.n, t.lo, *t.rproj, *t.vr)
                           : forward::make_tables<cutlass::half_t>(l, t.n, t.lo, *t.rproj, *t.vr);
  return t;
}

void transformer_xl_weight_gradient(const AttentionLaunch& l, const float* d_rproj, int64_t lo, int64_t n,
                                    float* out) {
  using forward::blocks_for;
  constexpr const char* kBackward = "attention_backward";
  const cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream());
  const int64_t w_rows = l.H * l.D, d_model = l.xl_d_model;
  if (n == 0) {
    cudaMemsetAsync(out, 0, static_cast<size_t>(w_rows * d_model) * 4, stream);
    check_launch(kBackward, "zeroing the w_r gradient");
    return;
  }
  const int64_t stride = (n + 63) / 64 * 64;  // the deltas in whole 64-column steps
  DeviceScratch d_parts(kBackward, "the Transformer-XL d rproj in two bf16 parts",
                        static_cast<size_t>(w_rows * stride) * 4);
  DeviceScratch r_parts(kBackward, "the Transformer-XL sinusoids in two bf16 parts",
                        static_cast<size_t>(d_model * stride) * 4);
  d_parts.zero(), r_parts.zero();  // the columns past n
  using forward::Bf16;
  Bf16* d_hi = d_parts.as<Bf16>();
  Bf16* r_hi = r_parts.as<Bf16>();
  forward::xl_split_transposed_kernel<<<blocks_for(w_rows * n, 256), 256, 0, stream>>>(
      d_rproj, l.H, n, l.D, stride, d_hi, d_hi + w_rows * stride);
  check_launch(kBackward, "the Transformer-XL d rproj split kernel");
  forward::xl_sinusoid_kernel<<<blocks_for(n * (d_model / 2), 256), 256, 0, stream>>>(
      lo, n, d_model, stride, l.xl_base, true, r_hi, r_hi + d_model * stride);
  check_launch(kBackward, "the Transformer-XL sinusoid kernel");
  const int64_t row_tiles = (w_rows + 63) / 64, col_tiles = (d_model + 63) / 64;
  if (row_tiles * col_tiles > (int64_t{1} << 31) - 1)
    detail::fail(kBackward, "transformer_xl's w_r gradient of ", w_rows, " rows by ", d_model,
                 " columns takes more than 2^31 - 1 blocks");
  forward::xl_project_kernel<<<static_cast<unsigned>(row_tiles * col_tiles),
                               AttentionTiles<Bf16, 64, 64>::kThreads, 0, stream>>>(
      d_hi, d_hi + w_rows * stride, r_hi, r_hi + d_model * stride, w_rows, static_cast<int>(d_model), stride,
      0, static_cast<unsigned>(col_tiles), out);
  check_launch(kBackward, "the Transformer-XL w_r gradient kernel");
}

}  // namespace posenc::cuda
