// src/cuda/attention_backward_shaw.cu: the attention backward with Shaw et al.'s (2018, arXiv 1803.02155)
// relative representations on the GPU, deterministic (no float atomics). The forward (attention.cu) is
//   s_ij = scale_i (q_i . k_j + q_i . a^K_r) (then softcap, bias, mask),  o_i = sum_j p_ij (v_j + a^V_r),
// r = clamp(k_pos_j - q_pos_i, -L, L) + L. Its backward, with dS_ij the gradient of the pair's dot product
// (pair_gradient: P (dP - D_i) times d s / d dot) and dP_ij = dO_i . (v_j + a^V_r):
//   dQ_i += sum_r G_ir a^K_r,   d a^K_r = sum_i G_ir q_i,   d a^V_r = sum_i W_ir dO_i,
//   G_ir = sum over the keys j at r of dS_ij,   W_ir = sum over the keys j at r of P_ij,
// besides the usual dQ, dK, dV (attention_backward-inl.cuh). Passes, after D_i (attention_backward.cu), in
// waves of kv heads (with their query heads) whose rows' products take at most attention_shaw_table_bytes:
//   1. the rows' products q_i . a^K_r and dO_i . a^V_r, (B, heads of the wave, Q, 2 L + 1) fp32, a block per
//      64 rows and head on the tensor cores (a^K, a^V rounded to the storage type, as the forward's);
//   2. the keys pass (dK, dV) with them added to each pair's dot product and dP;
//   3. the queries pass (dQ) likewise, summing G and W per row (its bins, in shared memory; the lanes of a
//      distance grouped and summed in lane order), then dQ += G a^K on the tensor cores and the block's
//      partials G^T Q and W^T dO, (2 L + 1, D) each; in waves of row blocks whose partials take at most
//      attention_table_partial_bytes, each wave's added in block order into the sums;
//   4. after the last wave, the sums added into the caller's gradients of a_k and a_v.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <cutlass/numeric_types.h>

#include "src/cuda/attention.h"
#include "src/cuda/attention_backward-inl.cuh"
#include "src/cuda/device.h"

namespace posenc::cuda {
namespace backward {
namespace {

// Pass 1: the rows' products of 64 rows of the wave's head blockIdx.y (batch row z; packed sequences: the
// tokens of B = 1), q . a^K_r (and dO . a^V_r with a_v) for every r, 64 distances at a time: Q (64, D) times
// the a^K rows.
template <class Element, int kHeadDim>
__global__ void __launch_bounds__(AttentionBackwardTiles<Element, kHeadDim>::kThreads)
    shaw_row_products_kernel(const __grid_constant__ BackwardParams p) {
  using T = AttentionBackwardTiles<Element, kHeadDim>;
  constexpr int BM = T::kBlockM, BN = T::kBlockN;
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  auto& sh = *reinterpret_cast<BackwardShared<Element, kHeadDim>*>(shared_bytes);
  const int tid = threadIdx.x;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * BM, b = blockIdx.z;
  const int64_t h = p.first_kv_head * (p.H / p.Hkv) + blockIdx.y;
  const int rows = static_cast<int>(min<int64_t>(BM, p.Q - row0));
  const bool values = p.shaw_doa != nullptr;

  typename T::GmemCopy gmem_copy;
  auto gthr = gmem_copy.get_thread_slice(tid);
  const auto tile = Shape<Int<BM>, Int<kHeadDim>>{};
  Tensor cRows = make_identity_tensor(tile);
  Tensor sQ = make_tensor(make_smem_ptr(sh.a), typename T::SmemRows{});
  Tensor sdO = make_tensor(make_smem_ptr(sh.b), typename T::SmemRows{});
  Tensor sAK = make_tensor(make_smem_ptr(sh.c), typename T::SmemRows{});
  Tensor sAV = make_tensor(make_smem_ptr(sh.d), typename T::SmemRows{});
  const Element* q_ptr =
      static_cast<const Element*>(p.q) + b * p.q_strides[0] + row0 * p.q_strides[1] + h * p.q_strides[2];
  const Element* do_ptr = static_cast<const Element*>(p.grad_out) + b * p.grad_out_strides[0] +
                          row0 * p.grad_out_strides[1] + h * p.grad_out_strides[2];
  load_rows(gmem_copy,
            gthr.partition_S(make_tensor(make_gmem_ptr(q_ptr), tile, make_stride(p.q_strides[1], _1{}))),
            gthr.partition_D(sQ), gthr.partition_S(cRows), rows, p.D);
  if (values)
    load_rows(
        gmem_copy,
        gthr.partition_S(make_tensor(make_gmem_ptr(do_ptr), tile, make_stride(p.grad_out_strides[1], _1{}))),
        gthr.partition_D(sdO), gthr.partition_S(cRows), rows, p.Dv);
  cp_async_fence();

  typename T::Mma mma;
  auto thr = mma.get_thread_slice(tid);
  Tensor cS = thr.partition_C(make_identity_tensor(Shape<Int<BM>, Int<BN>>{}));
  const auto copy_n_a = make_tiled_copy_A(typename T::SmemCopyN{}, mma);
  const auto copy_n_b = make_tiled_copy_B(typename T::SmemCopyN{}, mma);
  const int64_t out0 = ((b * p.shaw_heads + blockIdx.y) * p.Q + row0) * p.shaw_rows;
  for (int c0 = 0; c0 < p.shaw_rows; c0 += BN) {
    __syncthreads();  // every warp is done with the previous chunk of the tables
    stage_table<Element>(p.shaw_a_k, p.shaw_a_k_strides, c0, p.shaw_rows, p.D, sAK);
    if (values) stage_table<Element>(p.shaw_a_v, p.shaw_a_v_strides, c0, p.shaw_rows, p.Dv, sAV);
    cp_async_wait<0>();
    __syncthreads();
    for (int table = 0; table < (values ? 2 : 1); ++table) {
      Tensor acc = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});
      clear(acc);
      if (table == 0)
        smem_gemm(mma, acc, sQ, sAK, sQ, sAK, copy_n_a, copy_n_b);  // Q a^K^T
      else
        smem_gemm(mma, acc, sdO, sAV, sdO, sAV, copy_n_a, copy_n_b);  // dO a^V^T
      float* out = (table == 0 ? p.shaw_qa : p.shaw_doa) + out0;
      CUTE_UNROLL
      for (int i = 0; i < size(acc); ++i) {
        const int row = get<0>(cS(i)), r = c0 + get<1>(cS(i));
        if (row < rows && r < p.shaw_rows) out[row * p.shaw_rows + r] = acc(i);
      }
    }
  }
}

// The queries pass's waves: `width` row blocks at a time, each block's partials (2 L + 1, D) of a_k and of
// a_v (null: not wanted) summed into sums_k and sums_v after the wave.
struct RowWaves {
  int64_t width = 0, n = 0;  // n = (2 L + 1) D
  float* partials_k = nullptr;
  float* partials_v = nullptr;
  float* sums_k = nullptr;
  float* sums_v = nullptr;
};

// One wave of heads: the kv heads [p.first_kv_head, + kv_heads) and their query heads.
template <class Element, int kHeadDim>
void launch_shaw(BackwardParams p, int64_t batch, int64_t problems, int64_t kv_heads,
                 const KeyWaves& key_waves, const RowWaves& waves) {
  const cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream());
  const int64_t row_blocks = (p.Q + 63) / 64, heads = kv_heads * (p.H / p.Hkv);
  p.shaw_heads = heads;
  if (row_blocks > 0)
    launch_pass<Element, kHeadDim>(
        shaw_row_products_kernel<Element, kHeadDim>, p,
        dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(heads), static_cast<unsigned>(batch)),
        "shaw's row products");
  launch_keys_pass<Element, kHeadDim, true>(p, problems, key_waves, kv_heads);
  // Its shared memory depends on L: the attribute is the most any call may ask (the front end checked this
  // call's against the device), so that calls with different distances never race on it.
  auto queries = queries_kernel<Element, kHeadDim, true>;
  cudaFuncSetAttribute(queries, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(max_shared_bytes_per_block()));
  check_launch("attention_backward", "cudaFuncSetAttribute");
  const int bytes = static_cast<int>(shaw_queries_shared_bytes<Element, kHeadDim>(p.shaw_rows));
  for (int64_t first = 0; first < row_blocks; first += waves.width) {
    const int64_t width = std::min(waves.width, row_blocks - first), blocks = width * heads * problems;
    p.first_row_block = first;
    p.shaw_partials_k = waves.partials_k, p.shaw_partials_v = waves.partials_v;
    for (float* partials : {waves.partials_k, waves.partials_v})  // blocks past a sequence's rows write none
      if (partials != nullptr)
        cudaMemsetAsync(partials, 0, static_cast<size_t>(blocks * waves.n) * 4, stream);
    queries<<<dim3(static_cast<unsigned>(width), static_cast<unsigned>(heads),
                   static_cast<unsigned>(problems)),
              AttentionBackwardTiles<Element, kHeadDim>::kThreads, bytes, stream>>>(p);
    check_launch("attention_backward", "the queries pass (dQ, shaw)");
    for (const auto& [partials, sums] :
         {std::pair{waves.partials_k, waves.sums_k}, std::pair{waves.partials_v, waves.sums_v}}) {
      if (partials == nullptr) continue;
      sum_block_partials_kernel<<<grid_blocks(waves.n, 256), 256, 0, stream>>>(partials, blocks, waves.n,
                                                                               sums);
      check_launch("attention_backward", "shaw's sum kernel");
    }
  }
}

}  // namespace

void attention_backward_shaw(const AttentionBackwardLaunch& bl, const BackwardParams& base, int64_t problems,
                             const KeyWaves& key_waves) {
  const AttentionLaunch& l = bl.forward;
  const cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream());
  auto params = std::make_unique<BackwardParams>(base);
  BackwardParams& p = *params;
  const int64_t R = 2 * l.shaw_max_distance + 1;
  p.shaw_limit = static_cast<int32_t>(l.shaw_max_distance), p.shaw_rows = static_cast<int>(R);
  p.shaw_a_k = l.shaw_a_k, p.shaw_a_v = l.shaw_a_v;
  for (int i = 0; i < 2; ++i)
    p.shaw_a_k_strides[i] = l.shaw_a_k_strides[i], p.shaw_a_v_strides[i] = l.shaw_a_v_strides[i];
  const bool values = l.shaw_a_v != nullptr;
  // The rows' products, in waves of kv heads (with their query heads) within attention_shaw_table_bytes.
  const int64_t group = l.H / l.Hkv, per_kv_head = l.B * group * l.Q * R * 4 * (values ? 2 : 1);
  const int64_t kv_per_wave =
      per_kv_head > 0 ? std::clamp<int64_t>(attention_shaw_table_bytes / per_kv_head, 1, l.Hkv) : l.Hkv;
  const size_t products = static_cast<size_t>(l.B * kv_per_wave * group * l.Q * R);
  DeviceScratch row_products("attention_backward", "shaw's row products",
                             products * (values ? 2 : 1) * sizeof(float));
  p.shaw_qa = row_products.as<float>();
  p.shaw_doa = values ? p.shaw_qa + products : nullptr;

  // The partial gradients of a_k and a_v: waves of row blocks within attention_table_partial_bytes.
  RowWaves waves;
  const int64_t row_blocks = (l.Q + 63) / 64;
  const bool want_k = bl.grad_shaw_a_k != nullptr, want_v = values && bl.grad_shaw_a_v != nullptr;
  const int64_t tables = (want_k ? 1 : 0) + (want_v ? 1 : 0);
  waves.n = R * l.D;
  waves.width = std::max<int64_t>(row_blocks, 1);
  const int64_t per_row_block = problems * l.H * waves.n * 4 * tables;
  if (tables > 0)
    waves.width = std::clamp<int64_t>(attention_table_partial_bytes / per_row_block, 1, waves.width);
  DeviceScratch partials("attention_backward", "shaw's partial gradients",
                         static_cast<size_t>(tables > 0 ? waves.width * per_row_block : 0));
  DeviceScratch sums("attention_backward", "shaw's gradient sums",
                     static_cast<size_t>(tables * waves.n) * sizeof(float));
  if (tables > 0) sums.zero();
  float* next_partials = partials.as<float>();
  float* next_sums = sums.as<float>();
  if (want_k) {
    waves.partials_k = next_partials, waves.sums_k = next_sums;
    next_partials += waves.width * per_row_block / 4 / tables, next_sums += waves.n;
  }
  if (want_v) waves.partials_v = next_partials, waves.sums_v = next_sums;

  const bool bf16 = l.dtype == DType::bf16, narrow = attention_backward_tile_dim(l.D, l.Dv) == 64;
  for (int64_t first = 0; first < l.Hkv; first += kv_per_wave) {  // waves of heads, in order
    const int64_t kv_heads = std::min(kv_per_wave, l.Hkv - first);
    p.first_kv_head = first;
    if (narrow)
      bf16 ? launch_shaw<cutlass::bfloat16_t, 64>(p, l.B, problems, kv_heads, key_waves, waves)
           : launch_shaw<cutlass::half_t, 64>(p, l.B, problems, kv_heads, key_waves, waves);
    else
      bf16 ? launch_shaw<cutlass::bfloat16_t, 128>(p, l.B, problems, kv_heads, key_waves, waves)
           : launch_shaw<cutlass::half_t, 128>(p, l.B, problems, kv_heads, key_waves, waves);
  }

  const struct {
    float* sums;
    float* grad;
    const int64_t* strides;
  } adds[] = {{waves.sums_k, bl.grad_shaw_a_k, bl.grad_shaw_a_k_strides},
              {waves.sums_v, bl.grad_shaw_a_v, bl.grad_shaw_a_v_strides}};
  for (const auto& a : adds) {
    if (a.sums == nullptr) continue;
    add_table_gradient_kernel<<<grid_blocks(R * l.D, 256), 256, 0, stream>>>(
        a.sums, R, l.D, a.grad, a.strides[0], a.strides[1], l.cu_seqlens_q, l.cu_seqlens_k, l.sequences, l.Q,
        l.K);
    check_launch("attention_backward", "shaw's gradient kernel");
  }
}

}  // namespace backward

int64_t attention_backward_shaw_shared_bytes(int64_t D, int64_t Dv, int64_t shaw_rows) {
  return attention_backward_tile_dim(D, Dv) == 64
             ? backward::shaw_queries_shared_bytes<cutlass::bfloat16_t, 64>(shaw_rows)
             : backward::shaw_queries_shared_bytes<cutlass::bfloat16_t, 128>(shaw_rows);
}

}  // namespace posenc::cuda
