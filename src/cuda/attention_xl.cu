// src/cuda/attention_xl.cu: Transformer-XL's position terms (Dai et al. 2019, arXiv 1901.02860) in the fused
// attention forward: the tables the kernels read, and the kXL instantiations of the kernel template
// (src/cuda/attention_forward.cuh), in a translation unit of their own so that they compile in parallel with
// src/cuda/attention.cu.
//   logit_ij = cap(scale ((q_i + u_h) . k_j + (q_i + v_h) . rproj_h(delta_ij))) + bias,  delta = q_pos -
//   k_pos rproj_h(delta) = W_R[h D : (h + 1) D, :] R_delta,  R_delta = [sin(delta w_e) | cos(delta w_e)]
//   (d_model), w_e = base^(-2 e / d_model)
// Positions are the default ones (keys 0 .. K-1, queries aligned to the end, restarting in each packed
// sequence), so every delta a visible pair can have lies in xl_delta_range, known on the host without
// reading positions back. Before the attention, over those n deltas:
//   1. R (n, d_model) f32: each angle delta w_e formed and reduced in double, sin and cos rounded once
//      (src/angle.h sin_cos_of_angle, as the RoPE kernels);
//   2. rproj (H, n, D) f32 = W_R,h R_delta, fp32 FMAs in a fixed order (a tiled SIMT product: its error,
//      about d_model 2^-24 of sum_e |W R|, is far below the storage type's rounding that follows);
//   3. the rows rounded once to the storage type (the tensor cores' operand) and v_h . rproj_h(delta) in
//      fp32 from the unrounded rows.
// Keeping u and v out of the 16-bit operands (u . k_j per key in fp32 in the kernel, v . rproj per delta
// here) leaves rproj's rounding as the only one beyond the plain forward's, where adding them to q first
// would round q + u and q + v to the storage type as well.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>

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

// r (n, d_model): row m = R_{lo + m}, [sin | cos] halves.
__global__ void xl_sinusoid_kernel(int64_t lo, int64_t n, int64_t d_model, double base, float* r) {
  const int64_t half = d_model / 2;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n * half;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t m = t / half, e = t % half;
    const double w = pow(base, -2.0 * static_cast<double>(e) / static_cast<double>(d_model));
    float s, c;
    detail::sin_cos_of_angle(static_cast<double>(lo + m) * w, &s, &c);
    r[m * d_model + e] = s, r[m * d_model + half + e] = c;
  }
}

// out (H, n, D) f32, out[h][m][d] = sum_e w[h D + d][e] r[m][e]: C (n, H D) = r (n, d_model) w^T in 128 x 128
// tiles (blockIdx.x = row tile * col_tiles + col tile), 256 threads of 8 x 8 each, e in steps of 8 staged in
// shared memory, each sum in the order of e.
constexpr int kProjectTile = 128, kProjectStep = 8;
__global__ void __launch_bounds__(256)
    xl_project_kernel(const float* r, int64_t n, int64_t d_model, const float* w, int64_t w_s0, int64_t w_s1,
                      int64_t w_rows, int dim, int64_t col_tiles, float* out) {
  __shared__ __align__(16) float sr[kProjectStep][kProjectTile];
  __shared__ __align__(16) float sw[kProjectStep][kProjectTile];
  const int64_t m0 = blockIdx.x / col_tiles * kProjectTile, c0 = blockIdx.x % col_tiles * kProjectTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[8][8] = {};
  for (int64_t e0 = 0; e0 < d_model; e0 += kProjectStep) {
    for (int i = threadIdx.x; i < kProjectTile * kProjectStep; i += blockDim.x) {
      const int row = i / kProjectStep, k = i % kProjectStep;
      const int64_t e = e0 + k;
      sr[k][row] = m0 + row < n && e < d_model ? r[(m0 + row) * d_model + e] : 0.0f;
      sw[k][row] = c0 + row < w_rows && e < d_model ? w[(c0 + row) * w_s0 + e * w_s1] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kProjectStep; ++k) {
      const float4 a0 = *reinterpret_cast<const float4*>(&sr[k][ty * 4]),
                   a1 = *reinterpret_cast<const float4*>(&sr[k][64 + ty * 4]),
                   b0 = *reinterpret_cast<const float4*>(&sw[k][tx * 4]),
                   b1 = *reinterpret_cast<const float4*>(&sw[k][64 + tx * 4]);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int64_t m = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t c = c0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
      if (m < n && c < w_rows) out[(c / dim * n + m) * dim + c % dim] = acc[i][j];
    }
  }
}

// Per row (h, m) of rproj (H n rows of dim), one warp: the row rounded to the storage type, and
// vr[h n + m] = v_h . rproj_h[m] in fp32 (the lanes' sums in a fixed tree).
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
      rproj16[row * dim + d] = Element(x);
      sum = fmaf(v[h * v_s0 + d * v_s1], x, sum);
    }
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) vr[row] = sum;
  }
}

template <class Element>
void run(const AttentionLaunch& l, Params& p, const AttentionTileDims& tiles, int64_t q_blocks,
         int64_t problems) {
  const cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream());
  const DeltaRange range = xl_delta_range(l.Q, l.K, l.mask.causal, l.mask.window);
  const int64_t n = range.n, dim = l.D, w_rows = l.H * l.D;
  DeviceScratch sinusoids(kOp, "the Transformer-XL sinusoids", static_cast<size_t>(n * l.xl_d_model) * 4);
  DeviceScratch rproj(kOp, "the Transformer-XL projections", static_cast<size_t>(l.H * n * dim) * 4);
  DeviceScratch rproj16(kOp, "the Transformer-XL projections", static_cast<size_t>(l.H * n * dim) * 2);
  DeviceScratch vr(kOp, "the Transformer-XL v . rproj", static_cast<size_t>(l.H * n) * 4);
  if (n > 0) {
    xl_sinusoid_kernel<<<blocks_for(n * (l.xl_d_model / 2), 256), 256, 0, stream>>>(
        range.lo, n, l.xl_d_model, l.xl_base, sinusoids.as<float>());
    check_launch(kOp, "the Transformer-XL sinusoid kernel");
    const int64_t row_tiles = (n + kProjectTile - 1) / kProjectTile,
                  col_tiles = (w_rows + kProjectTile - 1) / kProjectTile;
    if (row_tiles * col_tiles > (int64_t{1} << 31) - 1)
      detail::fail(kOp, "transformer_xl's projections of ", n, " distances by ", w_rows,
                   " rows of w_r take more than 2^31 - 1 blocks");
    xl_project_kernel<<<static_cast<unsigned>(row_tiles * col_tiles), 256, 0, stream>>>(
        sinusoids.as<float>(), n, l.xl_d_model, l.xl_w_r, l.xl_w_r_strides[0], l.xl_w_r_strides[1], w_rows,
        static_cast<int>(dim), col_tiles, rproj.as<float>());
    check_launch(kOp, "the Transformer-XL projection kernel");
    xl_finish_kernel<Element><<<blocks_for(l.H * n * 32, 256), 256, 0, stream>>>(
        rproj.as<float>(), l.H * n, n, static_cast<int>(dim), l.xl_v, l.xl_v_strides[0], l.xl_v_strides[1],
        rproj16.as<Element>(), vr.as<float>());
    check_launch(kOp, "the Transformer-XL rounding kernel");
  }
  p.xl_rproj = rproj16.data(), p.xl_vr = vr.as<float>(), p.xl_lo = range.lo, p.xl_n = n;
  p.xl_u = l.xl_u, p.xl_u_strides[0] = l.xl_u_strides[0], p.xl_u_strides[1] = l.xl_u_strides[1];
  if (tiles.qk == 64)
    launch<Element, 64, 64, false, true>(p, q_blocks, l.H, problems, l.B);
  else
    launch<Element, 128, 128, false, true>(p, q_blocks, l.H, problems, l.B);
}

}  // namespace

void launch_transformer_xl(const AttentionLaunch& l, Params& p, const AttentionTileDims& tiles,
                           int64_t q_blocks, int64_t problems) {
  if (l.dtype == DType::bf16)
    run<cutlass::bfloat16_t>(l, p, tiles, q_blocks, problems);
  else
    run<cutlass::half_t>(l, p, tiles, q_blocks, problems);
}

}  // namespace forward
}  // namespace posenc::cuda
