// src/cuda/attention_backward_xl.cu: the attention backward with Transformer-XL's terms (Dai et al. 2019,
// arXiv 1901.02860) on the GPU, deterministic (no float atomics). The forward (src/cuda/attention_xl.cu) is
//   dot_ij = q_i . k_j + u_h . k_j + q_i . rproj_h(delta_ij) + v_h . rproj_h(delta_ij),
//   logit_ij = cap(scale_i dot_ij) (then bias, mask),  rproj_h(delta) = W_R,h R_delta,
// with default positions. With dS_ij the gradient of the pair's dot product (pair_gradient), its backward is
//   dQ_i += sum_j dS_ij (k_j + rproj_h(delta_ij)),   dK_j += sum_i dS_ij (q_i + u_h),
//   d u_h = sum_j (sum_i dS_ij) k_j,   d rproj_h(delta) = sum over the pairs at delta of dS_ij (q_i + v_h),
//   d v_h = sum_delta (sum over the pairs at delta of dS_ij) rproj_h(delta),   d W_R,h = sum_delta d rproj_h
//   R^T.
// Passes, after D_i (attention_backward.cu):
//   1. the tables rproj and v . rproj, as the forward makes them;
//   2. the keys pass (dK, dV; attention_backward-inl.cuh kXL): each (rows, keys) tile's band of 127 deltas
//      formed on the tensor cores (Q times the band's rproj rows), and per head the sums of dS per key, which
//      give dK's u_h term and the block's partial gradient of u_h;
//   3. the queries pass (dQ; kXL) likewise, with dQ += (dS skewed into the band's columns) times the band's
//      rows on the tensor cores;
//   4. the deltas pass (here): a block owns 64 deltas of a head and walks a group of problems' row tiles and
//      the two key tiles whose pairs lie at its deltas, recomputing their dS, so that d rproj of its deltas,
//      (dS by delta)^T Q plus v_h times the sums of dS per delta, is each block's own within its group: one
//      group, or where the deltas and heads alone do not fill the GPU (short sequences, many of them)
//      several, their partials added in group order; its partial gradient of v_h, the sums of dS per delta
//      times the rows of rproj;
//   5. d W_R from d rproj on the tensor cores (attention_xl.cu), and the partials of u and v added in block
//      order; all three added into the caller's views.
// dS is rounded to the storage type for the tensor cores (as everywhere in the backward), rproj is its
// storage rounding (the forward's q . rproj operand; d v_h takes those rows too).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <cutlass/numeric_types.h>

#include "src/cuda/attention.h"
#include "src/cuda/attention_backward-inl.cuh"
#include "src/cuda/device.h"

namespace posenc::cuda {
namespace backward {
namespace {

constexpr const char* kOp = "attention_backward";

// The deltas pass's shared memory, after BackwardShared's tiles (from its per-warp sums on; K, V, Q and dO in
// its tiles a, b, c, d, dS by delta in ds): the block's 64 rproj rows (a (64, kHeadDim) tile in the rows'
// layout) and their v . rproj, the band's q_i . rproj + v . rproj by delta column, u . k_j of the tile's
// keys, u and v, and the sums of dS per delta.
template <class Element, int kHeadDim>
struct alignas(128) XLDeltasShared {
  Element r[64 * kHeadDim];
  float band[64 * kXLBandRows];
  float vr[64];
  float uk[64];
  float u[kHeadDim];
  float v[kHeadDim];
  float sums[64];
};
template <class Element, int kHeadDim>
constexpr int64_t xl_deltas_shared_bytes() {
  using Shared = BackwardShared<Element, kHeadDim>;
  return static_cast<int64_t>(offsetof(Shared, bias_grad) + sizeof(XLDeltasShared<Element, kHeadDim>));
}

// Pass 4: d rproj_h of the 64 deltas [lo + 64 blockIdx.x, ...) of head blockIdx.y and the block's partial
// gradient of v_h, over the pairs at those deltas of group blockIdx.z of the problems (gridDim.z groups of
// consecutive problems): into group blockIdx.z's (H, n, D) of xl_drproj and its (chunks, H, D) partials of v.
template <class Element, int kHeadDim>
__global__ void __launch_bounds__(AttentionBackwardTiles<Element, kHeadDim>::kThreads)
    xl_deltas_kernel(const __grid_constant__ BackwardParams p) {
  using T = AttentionBackwardTiles<Element, kHeadDim>;
  constexpr int BM = T::kBlockM, BN = T::kBlockN;
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  using Shared = BackwardShared<Element, kHeadDim>;
  auto& sh = *reinterpret_cast<Shared*>(shared_bytes);
  auto* xd = reinterpret_cast<XLDeltasShared<Element, kHeadDim>*>(shared_bytes + offsetof(Shared, bias_grad));
  const int tid = threadIdx.x;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * 64, d0 = p.xl_lo + m0;  // table row, delta
  const int64_t h = blockIdx.y, hk = h / (p.H / p.Hkv);
  ScoreTerms terms = p.terms;
  terms.slope = p.slopes[terms.bias == ScoreBias::alibi ? h : 0];
  if (terms.bias == ScoreBias::lookup)
    for (int i = tid; i < 2 * terms.limit + 1; i += T::kThreads)
      sh.lookup[i] = p.lookup[h * (2 * terms.limit + 1) + i];
  for (int i = tid; i < kHeadDim; i += T::kThreads) {
    xd->u[i] = i < p.D ? p.xl_u[h * p.xl_u_strides[0] + i * p.xl_u_strides[1]] : 0.0f;
    xd->v[i] = i < p.D ? p.xl_v[h * p.xl_v_strides[0] + i * p.xl_v_strides[1]] : 0.0f;
  }
  if (tid < 64) {
    xd->sums[tid] = 0;
    xd->vr[tid] = m0 + tid < p.xl_n ? p.xl_vr[h * p.xl_n + m0 + tid] : 0.0f;
  }
  const Element* table = static_cast<const Element*>(p.xl_rproj) + h * p.xl_n * p.D;
  stage_rows_from<Element, kHeadDim, typename T::SmemRows>(table, p.D, m0, p.xl_n, p.D, xd->r);
  cp_async_fence();

  typename T::GmemCopy gmem_copy;
  auto gthr = gmem_copy.get_thread_slice(tid);
  const auto tile = Shape<Int<BM>, Int<kHeadDim>>{};
  Tensor cRows = make_identity_tensor(tile);
  Tensor sK = make_tensor(make_smem_ptr(sh.a), typename T::SmemRows{});
  Tensor sV = make_tensor(make_smem_ptr(sh.b), typename T::SmemRows{});
  Tensor sQ = make_tensor(make_smem_ptr(sh.c), typename T::SmemRows{});
  Tensor sdO = make_tensor(make_smem_ptr(sh.d), typename T::SmemRows{});
  Tensor sR = make_tensor(make_smem_ptr(xd->r), typename T::SmemRows{});
  Tensor sG = make_tensor(make_smem_ptr(sh.ds), typename T::SmemP{});
  Tensor sGt = make_tensor(make_smem_ptr(sh.ds), typename T::SmemPT{});
  Tensor sQt = make_tensor(make_smem_ptr(sh.c), typename T::SmemRowsT{});
  Tensor sPtPlain = make_tensor(make_smem_ptr(sh.p), typename T::SmemPTPlain{});
  Tensor sRowsTPlain = make_tensor(make_smem_ptr(sh.b), typename T::SmemRowsTPlain{});

  typename T::Mma mma;
  auto thr = mma.get_thread_slice(tid);
  Tensor acc_dr = partition_fragment_C(mma, Shape<Int<BN>, Int<kHeadDim>>{});
  clear(acc_dr);
  Tensor cS = thr.partition_C(make_identity_tensor(Shape<Int<BM>, Int<BN>>{}));
  const auto copy_n_a = make_tiled_copy_A(typename T::SmemCopyN{}, mma);
  const auto copy_n_b = make_tiled_copy_B(typename T::SmemCopyN{}, mma);
  const auto copy_t_a = make_tiled_copy_A(typename T::SmemCopyT{}, mma);
  const auto copy_t_b = make_tiled_copy_B(typename T::SmemCopyT{}, mma);

  const int64_t per_group = (p.xl_problems + gridDim.z - 1) / gridDim.z, z0 = blockIdx.z * per_group;
  for (int64_t z = z0; z < min<int64_t>(z0 + per_group, p.xl_problems); ++z) {
    Problem pr;
    if (!problem_of(p, z, &pr)) continue;  // the poison kernels make every gradient NaN
    const int64_t* k_pos = p.k_pos + pr.b * p.k_pos_stride + pr.k0;
    for (int64_t row0 = 0; row0 < pr.nq; row0 += BM) {
      const int rows = static_cast<int>(min<int64_t>(BM, pr.nq - row0));
      __syncthreads();  // every warp is done with the previous rows' tiles and dS
      KeyRange qr;
      bool rows_bad;
      stage_rows(p, pr, h, row0, rows, sh, &qr, &rows_bad);
      // The keys at this block's deltas: two tiles from first_key (default positions: a key's position is
      // its index in the sequence); each skipped when none of its keys exists or the mask hides them all.
      const int64_t first_key = xl_chunk_first_key(sh.q_pos[0], d0);
      unsigned visible = 0;  // bit t: tile t (a mask, not an array: no local memory)
      for (int t = 0; t < 2; ++t) {
        const int64_t lo = max<int64_t>(first_key + 64 * t, 0),
                      hi = min<int64_t>(first_key + 64 * t + 64, pr.nk);
        if (lo < hi && (rows_bad || p.mask.any_visible(qr.lo, qr.hi, lo, hi - 1))) visible |= 1u << t;
      }
      if (visible == 0) continue;  // the same for every thread
      const Element* q_ptr = static_cast<const Element*>(p.q) + pr.b * p.q_strides[0] +
                             (pr.q0 + row0) * p.q_strides[1] + h * p.q_strides[2];
      const Element* do_ptr = static_cast<const Element*>(p.grad_out) + pr.b * p.grad_out_strides[0] +
                              (pr.q0 + row0) * p.grad_out_strides[1] + h * p.grad_out_strides[2];
      load_rows(gmem_copy,
                gthr.partition_S(make_tensor(make_gmem_ptr(q_ptr), tile, make_stride(p.q_strides[1], _1{}))),
                gthr.partition_D(sQ), gthr.partition_S(cRows), rows, p.D);
      load_rows(gmem_copy,
                gthr.partition_S(
                    make_tensor(make_gmem_ptr(do_ptr), tile, make_stride(p.grad_out_strides[1], _1{}))),
                gthr.partition_D(sdO), gthr.partition_S(cRows), rows, p.Dv);
      cp_async_fence();
      for (int i = tid; i < BM * BN; i += T::kThreads) sG(i / BN, i % BN) = Element(0);
      cp_async_wait<0>();
      __syncthreads();
      {  // q_i . rproj + v . rproj of the block's deltas, by delta column
        Tensor acc = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});
        clear(acc);
        smem_gemm(mma, acc, sQ, sR, sQ, sR, copy_n_a, copy_n_b);
        CUTE_UNROLL
        for (int i = 0; i < size(acc); ++i) {
          const int row = get<0>(cS(i)), column = get<1>(cS(i));
          xd->band[column * kXLBandRows + row] = acc(i) + xd->vr[column];
        }
      }
      for (int t = 0; t < 2; ++t) {
        if ((visible >> t & 1u) == 0) continue;  // uniform
        const int64_t key0 = first_key + 64 * t;
        __syncthreads();  // the band is complete; every warp is done with the previous key tile
        if (tid < BN) {
          const int64_t j = key0 + tid;
          sh.k_pos[tid] = j >= 0 && j < pr.nk ? k_pos[j] : 0;
        }
        const int64_t kv0 = pr.b * p.k_strides[0] + pr.k0 * p.k_strides[1] + hk * p.k_strides[2];
        const int64_t vv0 = pr.b * p.v_strides[0] + pr.k0 * p.v_strides[1] + hk * p.v_strides[2];
        stage_rows_from<Element, kHeadDim, typename T::SmemRows>(static_cast<const Element*>(p.k) + kv0,
                                                                 p.k_strides[1], key0, pr.nk, p.D, sh.a);
        stage_rows_from<Element, kHeadDim, typename T::SmemRows>(static_cast<const Element*>(p.v) + vv0,
                                                                 p.v_strides[1], key0, pr.nk, p.Dv, sh.b);
        cp_async_fence();
        cp_async_wait<0>();
        __syncthreads();
        xl_key_terms<kHeadDim>(sK, xd->u, xd->uk);
        Tensor s = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});
        Tensor dp = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});
        clear(s), clear(dp);
        smem_gemm(mma, s, sQ, sK, sQ, sK, copy_n_a, copy_n_b);     // S = Q K^T
        smem_gemm(mma, dp, sdO, sV, sdO, sV, copy_n_a, copy_n_b);  // dP = dO V^T
        __syncthreads();                                           // u . k is complete
        // dS of the pairs at this block's deltas, into dS by delta column (each (row, delta) has one key).
        CUTE_UNROLL
        for (int i = 0; i < size(s); ++i) {
          const int row = get<0>(cS(i)), col = get<1>(cS(i));
          const int64_t j = key0 + col;
          const float lse2 = sh.row_lse2[row];
          if (row >= rows || j < 0 || j >= pr.nk || lse2 == -INFINITY) continue;
          const int64_t qp = sh.q_pos[row], kp = sh.k_pos[col], column = qp - kp - d0;
          if (column < 0 || column >= 64) continue;  // another block's delta
          const float dot = s(i) + (xd->uk[col] + xd->band[column * kXLBandRows + row]);
          const PairGradient g = pair_gradient(terms, p.mask, sh.row_scale[row], dot, dp(i), qp, kp,
                                               sh.lookup, lse2, sh.row_term[row]);
          sG(row, static_cast<int>(column)) = Element(g.grad);
        }
      }
      __syncthreads();  // dS by delta is complete
      if (tid < 64) {   // its sums per delta, rows in order
        float sum = xd->sums[tid];
        for (int r = 0; r < BM; ++r) sum += static_cast<float>(sG(r, tid));
        xd->sums[tid] = sum;
      }
      smem_gemm(mma, acc_dr, sGt, sQt, sPtPlain, sRowsTPlain, copy_t_a, copy_t_b);  // d rproj += dS^T Q
    }
  }
  cp_async_wait<0>();  // the rproj rows (when no row tile was visible)
  __syncthreads();     // the sums are complete
  Tensor cO = thr.partition_C(make_identity_tensor(Shape<Int<BN>, Int<kHeadDim>>{}));
  float* d_rproj = p.xl_drproj + blockIdx.z * p.H * p.xl_n * p.D;
  CUTE_UNROLL
  for (int i = 0; i < size(acc_dr); ++i) {
    const int delta = get<0>(cO(i)), d = get<1>(cO(i));
    if (m0 + delta < p.xl_n && d < p.D)
      d_rproj[(h * p.xl_n + m0 + delta) * p.D + d] = acc_dr(i) + xd->v[d] * xd->sums[delta];
  }
  if (p.xl_dv_partials == nullptr) return;
  float* out = p.xl_dv_partials + ((blockIdx.z * gridDim.x + blockIdx.x) * p.H + h) * p.D;
  for (int d = tid; d < p.D; d += T::kThreads) {
    float sum = 0;
    for (int delta = 0; delta < 64; ++delta) sum += xd->sums[delta] * static_cast<float>(sR(delta, d));
    out[d] = sum;
  }
}

template <class Element, int kHeadDim>
void launch_xl(const BackwardParams& p, int64_t problems, const KeyWaves& key_waves, bool deltas,
               int64_t groups) {
  launch_keys_pass<Element, kHeadDim, false, true>(p, problems, key_waves);
  launch_pass<Element, kHeadDim>(queries_kernel<Element, kHeadDim, false, true>, p,
                                 dim3(static_cast<unsigned>((p.Q + 63) / 64), static_cast<unsigned>(p.H),
                                      static_cast<unsigned>(problems)),
                                 "the queries pass (dQ, transformer_xl)",
                                 static_cast<int>(xl_queries_shared_bytes<Element, kHeadDim>()));
  if (!deltas || p.xl_n == 0) return;
  launch_pass<Element, kHeadDim>(xl_deltas_kernel<Element, kHeadDim>, p,
                                 dim3(static_cast<unsigned>((p.xl_n + 63) / 64), static_cast<unsigned>(p.H),
                                      static_cast<unsigned>(groups)),
                                 "the deltas pass (transformer_xl)",
                                 static_cast<int>(xl_deltas_shared_bytes<Element, kHeadDim>()));
}

// Groups of problems for the deltas pass: enough blocks for two per multiprocessor where the deltas and
// heads alone do not give them, within attention_table_partial_bytes of partials of d rproj (one group
// at least).
int64_t problem_groups(int64_t problems, int64_t chunks, int64_t H, int64_t n, int64_t D) {
  const int64_t sms = multiprocessor_count();
  if (sms == 0) return 1;
  const int64_t blocks = std::max<int64_t>(chunks * H, 1), per_group = std::max<int64_t>(H * n * D * 4, 1);
  const int64_t wanted = (2 * sms + blocks - 1) / blocks;
  return std::clamp<int64_t>(std::min(wanted, attention_table_partial_bytes / per_group), 1,
                             std::max<int64_t>(std::min<int64_t>(problems, 65535), 1));
}

}  // namespace

void attention_backward_xl(const AttentionBackwardLaunch& bl, const BackwardParams& base, int64_t problems,
                           const KeyWaves& key_waves) {
  const AttentionLaunch& l = bl.forward;
  const cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream());
  auto params = std::make_unique<BackwardParams>(base);
  BackwardParams& p = *params;
  const XLTables tables = transformer_xl_tables(l);
  p.xl_rproj = tables.rproj->data(), p.xl_vr = tables.vr->as<float>(), p.xl_lo = tables.lo, p.xl_n = tables.n;
  p.xl_u = l.xl_u, p.xl_v = l.xl_v, p.xl_problems = problems;
  // u's partials: per problem and key tile of the longest sequence (not of the packed total, whose tiles
  // times the sequences would grow with their square).
  p.xl_key_tiles = (tables.longest_k + 63) / 64;
  for (int i = 0; i < 2; ++i) p.xl_u_strides[i] = l.xl_u_strides[i], p.xl_v_strides[i] = l.xl_v_strides[i];
  const int64_t H = l.H, D = l.D, n = tables.n, key_tiles = p.xl_key_tiles, chunks = (n + 63) / 64;
  const bool want_u = bl.grad_xl_u != nullptr, want_v = bl.grad_xl_v != nullptr,
             want_w_r = bl.grad_xl_w_r != nullptr;
  // Partial sums of u's gradient per keys-pass block (blocks past a sequence's keys write none: zeroed), of
  // v's per deltas-pass block, the gradient of rproj, and the sums.
  DeviceScratch du_partials(kOp, "the Transformer-XL u gradient's partial sums",
                            static_cast<size_t>(want_u ? problems * key_tiles * H * D : 0) * 4);
  const bool deltas = want_v || want_w_r;
  const int64_t groups = deltas ? problem_groups(problems, chunks, H, n, D) : 1;
  DeviceScratch dv_partials(kOp, "the Transformer-XL v gradient's partial sums",
                            static_cast<size_t>(want_v ? groups * chunks * H * D : 0) * 4);
  DeviceScratch d_rproj(kOp, "the Transformer-XL rproj gradient",
                        static_cast<size_t>(deltas ? H * n * D : 0) * 4);
  DeviceScratch d_rproj_partials(kOp, "the Transformer-XL rproj gradient's partial sums",
                                 static_cast<size_t>(groups > 1 ? groups * H * n * D : 0) * 4);
  DeviceScratch sums(kOp, "the Transformer-XL u and v gradients' sums", static_cast<size_t>(2 * H * D) * 4);
  sums.zero();
  if (want_u) du_partials.zero(), p.xl_du_partials = du_partials.as<float>();
  if (want_v) p.xl_dv_partials = dv_partials.as<float>();
  p.xl_drproj = groups > 1 ? d_rproj_partials.as<float>() : d_rproj.as<float>();

  const bool bf16 = l.dtype == DType::bf16;
  if (attention_backward_tile_dim(l.D, l.Dv) == 64)
    bf16 ? launch_xl<cutlass::bfloat16_t, 64>(p, problems, key_waves, deltas, groups)
         : launch_xl<cutlass::half_t, 64>(p, problems, key_waves, deltas, groups);
  else
    bf16 ? launch_xl<cutlass::bfloat16_t, 128>(p, problems, key_waves, deltas, groups)
         : launch_xl<cutlass::half_t, 128>(p, problems, key_waves, deltas, groups);
  if (groups > 1 && n > 0) {  // the groups' d rproj added in group order
    d_rproj.zero();
    sum_block_partials_kernel<<<grid_blocks(H * n * D, 256), 256, 0, stream>>>(
        d_rproj_partials.as<float>(), groups, H * n * D, d_rproj.as<float>());
    check_launch(kOp, "the Transformer-XL rproj gradient's sum kernel");
  }

  float* du = sums.as<float>();
  float* dv = du + H * D;
  if (want_u) {
    sum_block_partials_kernel<<<grid_blocks(H * D, 256), 256, 0, stream>>>(du_partials.as<float>(),
                                                                           problems * key_tiles, H * D, du);
    check_launch(kOp, "the Transformer-XL u gradient's sum kernel");
  }
  if (want_v && n > 0) {
    sum_block_partials_kernel<<<grid_blocks(H * D, 256), 256, 0, stream>>>(dv_partials.as<float>(),
                                                                           groups * chunks, H * D, dv);
    check_launch(kOp, "the Transformer-XL v gradient's sum kernel");
  }
  DeviceScratch dw(kOp, "the Transformer-XL w_r gradient",
                   static_cast<size_t>(want_w_r ? H * D * l.xl_d_model : 0) * 4);
  if (want_w_r) transformer_xl_weight_gradient(l, d_rproj.as<float>(), tables.lo, n, dw.as<float>());
  const struct {
    const float* sums;
    float* grad;
    const int64_t* strides;
    int64_t rows, cols;
  } adds[] = {{du, bl.grad_xl_u, bl.grad_xl_u_strides, H, D},
              {dv, bl.grad_xl_v, bl.grad_xl_v_strides, H, D},
              {dw.as<float>(), bl.grad_xl_w_r, bl.grad_xl_w_r_strides, H * D, l.xl_d_model}};
  for (const auto& a : adds) {
    if (a.grad == nullptr) continue;
    add_table_gradient_kernel<<<grid_blocks(a.rows * a.cols, 256), 256, 0, stream>>>(
        a.sums, a.rows, a.cols, a.grad, a.strides[0], a.strides[1], l.cu_seqlens_q, l.cu_seqlens_k,
        l.sequences, l.Q, l.K);
    check_launch(kOp, "the Transformer-XL gradient kernel");
  }
}

}  // namespace backward

int64_t attention_backward_xl_shared_bytes(int64_t D, int64_t Dv) {
  using backward::xl_deltas_shared_bytes, backward::xl_keys_shared_bytes, backward::xl_queries_shared_bytes;
  using E = cutlass::bfloat16_t;
  if (attention_backward_tile_dim(D, Dv) == 64)
    return std::max(
        {xl_keys_shared_bytes<E, 64>(), xl_queries_shared_bytes<E, 64>(), xl_deltas_shared_bytes<E, 64>()});
  return std::max(
      {xl_keys_shared_bytes<E, 128>(), xl_queries_shared_bytes<E, 128>(), xl_deltas_shared_bytes<E, 128>()});
}

}  // namespace posenc::cuda
