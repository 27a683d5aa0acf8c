// src/cuda/attention_backward-inl.cuh: the attention backward's kernels (FlashAttention-2's recomputation on
// CuTe's SM80 atoms, src/cuda/attention_tiles.cuh AttentionBackwardTiles), shared by its three translation
// units: src/cuda/attention_backward.cu instantiates them without positional terms of their own,
// src/cuda/attention_backward_shaw.cu with Shaw's (kShaw) and src/cuda/attention_backward_xl.cu with
// Transformer-XL's (kXL), so that the three compile in parallel. Included by those files only.
//   keys:    a block per (64 keys, kv head, batch row or sequence) walks the query heads of its group and
//            their row blocks: S = Q K^T, P = exp(logit - lse) (the forward's logits: attention-inl.cuh),
//            dP = dO V^T, dlogit = P (dP - D_i), dS = dlogit d(logit)/d(dot) (the row's scale, times
//            1 - tanh^2 under a softcap); dV += P^T dO, dK += dS^T Q, kept in registers: each key row's
//            gradient is owned by one block.
//   queries: a block per (64 rows, head, batch row or sequence) walks the key tiles: S, P, dP, dS again,
//            dQ += dS K.
// Shaw (kShaw): the pair's dot product is q_i . k_j + q_i . a^K_r and dP_ij = dO_i . (v_j + a^V_r) with
// r = clamp(k_pos - q_pos, -L, L) + L; the rows' products q_i . a^K_r and dO_i . a^V_r for every r are
// read from (B, H, Q, 2 L + 1) fp32 tables made before the passes (shaw_row_products_kernel). The queries
// pass also sums dS and P per row over r (its bins, in shared memory), then dQ += bins_dS a^K on the tensor
// cores and, per block, the partial gradients bins_dS^T Q (of a^K) and bins_P^T dO (of a^V).
// Transformer-XL (kXL): the pair's dot product is q_i . k_j + u_h . k_j + q_i . rproj_h(delta) +
// v_h . rproj_h(delta) (src/cuda/attention_xl.cu), the last two read from a band of 127 deltas per tile
// formed on the tensor cores (as the forward's); the keys pass adds u_h sum_i dS_ij to dK_j and writes its
// block's partial gradient of u, the queries pass adds sum_j dS_ij rproj_h(delta_ij) to dQ_i
// (src/cuda/attention_backward_xl.cu has the rest).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cute/tensor.hpp>
#include <type_traits>
#include <cutlass/numeric_types.h>

#include "posenc/device.h"
#include "src/cuda/attention.h"
#include "src/cuda/attention_tiles.cuh"
#include "src/cuda/device.h"
#include "src/query_temperature.h"

namespace posenc::cuda::backward {
using namespace cute;

constexpr float kLog2e = 1.4426950408889634f;

struct BackwardParams {
  int64_t Q, K, H, Hkv;
  int D, Dv;  // q / k and v head dims, zero-padded to the tiles' kHeadDim
  const void* q;
  const void* k;
  const void* v;
  const void* grad_out;
  int64_t q_strides[3], k_strides[3], v_strides[3], grad_out_strides[3];
  const float* lse;
  int64_t lse_strides[3];
  const float* row_terms;  // (B, H, Q) D_i
  const int64_t* q_pos;
  const int64_t* k_pos;
  int64_t q_pos_stride, k_pos_stride;
  const int64_t* cu_seqlens_q;
  const int64_t* cu_seqlens_k;
  float scale;
  detail::AttentionMask mask;
  ScoreTerms terms;
  const float* lookup;
  QueryTemperature::Kind temperature;
  double temperature_scale, temperature_floor;
  float* dq;  // (B, Q, H, D) fp32, contiguous
  float* dk;  // (B, K, Hkv, D), where dk_out has no view
  float* dv;  // (B, K, Hkv, Dv), where dv_out has no view
  KeyGradientOut dk_out, dv_out;
  // The learned table's gradient: (problems, key blocks, H, 2 limit + 1) partial sums over the lookup's
  // distances, one per keys-pass block and head; null: not wanted.
  float* bias_partials;
  int64_t first_key_tile;   // the keys pass's blocks cover key tiles first_key_tile + blockIdx.x (a wave)
  int64_t first_row_block;  // the queries pass's blocks cover row blocks first_row_block + blockIdx.x
  // The keys pass's blocks cover kv heads first_kv_head + blockIdx.y, the queries pass's query heads
  // first_kv_head (H / Hkv) + blockIdx.y (Shaw's waves of heads; 0 otherwise).
  int64_t first_kv_head;
  // Shaw (kShaw kernels): L, 2 L + 1, the tables a_k (2 L + 1, D) and a_v (2 L + 1, Dv) or null (f32 at
  // their strides), the rows' products q_i . a^K_r and dO_i . a^V_r of the wave's shaw_heads heads from
  // first_kv_head (H / Hkv) on, (B, shaw_heads, Q, 2 L + 1) fp32 (shaw_doa null without a_v), and the
  // queries pass's partial gradients of a_k and a_v, (blocks of a wave, 2 L + 1, D) each, or null where not
  // wanted.
  int32_t shaw_limit;
  int shaw_rows;
  int64_t shaw_heads;
  const float* shaw_a_k;
  const float* shaw_a_v;
  int64_t shaw_a_k_strides[2], shaw_a_v_strides[2];
  float* shaw_qa;
  float* shaw_doa;
  float* shaw_partials_k;
  float* shaw_partials_v;
  // Transformer-XL (kXL kernels, default positions): rproj (H, n, D) rows of the storage type and
  // v_h . rproj_h (H, n) f32 over the deltas [xl_lo, xl_lo + n); u and v (H, D) f32 at their strides; the
  // keys pass's partial gradients of u, (problems, key tiles, H, D) or null; the deltas pass's gradient of
  // rproj (H, n, D) and partial gradients of v (chunks of 64 deltas, H, D); the problems it walks; the key
  // tiles of the longest sequence (the partials of u are (problems, xl_key_tiles, H, D)).
  const void* xl_rproj;
  const float* xl_vr;
  int64_t xl_lo, xl_n;
  const float* xl_u;
  const float* xl_v;
  int64_t xl_u_strides[2], xl_v_strides[2];
  float* xl_du_partials;
  float* xl_drproj;
  float* xl_dv_partials;
  int64_t xl_problems, xl_key_tiles;
  float slopes[kMaxAttentionHeads];
};

template <class Element, int kHeadDim>
struct alignas(128) BackwardShared {
  using T = AttentionBackwardTiles<Element, kHeadDim>;
  Element a[T::kBlockM * kHeadDim];    // Q (keys pass) or K (queries pass)
  Element b[T::kBlockM * kHeadDim];    // dO (keys pass) or V (queries pass)
  Element c[T::kBlockM * kHeadDim];    // K (keys pass) or Q (queries pass)
  Element d[T::kBlockM * kHeadDim];    // V (keys pass) or dO (queries pass)
  Element p[T::kBlockM * T::kBlockN];  // P
  Element ds[T::kBlockM * T::kBlockN];
  int64_t q_pos[T::kBlockM];
  int64_t k_pos[T::kBlockN];
  float row_scale[T::kBlockM];
  float row_lse2[T::kBlockM];  // lse log2 e
  float row_term[T::kBlockM];  // D_i
  float lookup[kMaxDeviceRowTable];
  float lane_values[AttentionBackwardTiles<Element, kHeadDim>::kWarps][32];
  // Last: the keys pass's per-warp sums of the learned table's gradient; the queries pass with Shaw's terms
  // keeps its bins here instead, (2, 64, 2 L + 1) floats (shaw_queries_shared_bytes), and the queries and
  // deltas passes with Transformer-XL's their tiles (aligned for 16-byte copies and the 128-byte swizzle).
  alignas(128) float bias_grad[AttentionBackwardTiles<Element, kHeadDim>::kWarps][kMaxDeviceRowTable];
};
// The widest tiles (256 columns) with a learned table's lookup and per-warp sums still fit an SM90's 227 KB.
static_assert(sizeof(BackwardShared<cutlass::bfloat16_t, 256>) <= 227 * 1024);

// Transformer-XL's shared memory (kXL): the band's 128 rproj rows (two (64, kHeadDim) tiles in the rows'
// swizzled layout), the band's q_i . rproj + v . rproj by band column ((128, kXLBandRows) floats), v . rproj
// of the staged rows, u . k_j of the tile's keys, u; the keys pass's sums of dS per key; last, the queries
// pass's dS skewed into band columns (two (64, 64) operand tiles). The keys pass keeps it after the whole
// BackwardShared (its per-warp sums of a learned table's gradient may be in use), up to `g`: 227,840 bytes at
// head dims of 128, within an H100's or H200's 227 KB; the queries pass from BackwardShared's per-warp sums
// on.
template <class Element, int kHeadDim>
struct alignas(128) XLBackwardShared {
  Element r[2][64 * kHeadDim];
  float band[128 * kXLBandRows];
  float vr[128];
  float uk[64];
  float u[kHeadDim];
  float column_sums[64];
  Element g[2][64 * 64];
};
template <class Element, int kHeadDim>
constexpr int64_t xl_keys_shared_bytes() {
  using XL = XLBackwardShared<Element, kHeadDim>;
  return static_cast<int64_t>(sizeof(BackwardShared<Element, kHeadDim>) + offsetof(XL, g));
}
template <class Element, int kHeadDim>
constexpr int64_t xl_queries_shared_bytes() {
  using Shared = BackwardShared<Element, kHeadDim>;
  return static_cast<int64_t>(offsetof(Shared, bias_grad) + sizeof(XLBackwardShared<Element, kHeadDim>));
}
static_assert(xl_keys_shared_bytes<cutlass::bfloat16_t, 128>() <= 227 * 1024);
using BackwardShared64 = BackwardShared<cutlass::bfloat16_t, 64>;
using BackwardShared128 = BackwardShared<cutlass::bfloat16_t, 128>;
static_assert(offsetof(BackwardShared64, bias_grad) % 128 == 0 &&
                  offsetof(BackwardShared128, bias_grad) % 128 == 0 && sizeof(BackwardShared128) % 128 == 0,
              "XL's tiles start 128-byte aligned");

// Transformer-XL's terms of a (64, 64) tile for probabilities_and_score_gradients: u . k_j by key column;
// q_i . rproj + v . rproj by band column, band[column * kXLBandRows + row]; the queries pass's dS by band
// column (XLBackwardShared::g), or null.
struct XLTileTerms {
  const float* uk;
  const float* band;
  void* g;
};

// Rows first .. first + 63 of `n` rows of 16-bit elements (row i at rows + i stride, columns < dim) into a
// (64, kHeadDim) tile in SmemLayout by cp.async (the caller's group); rows outside [0, n) and the columns
// past dim zeroed. No address outside the rows is formed.
template <class Element, int kHeadDim, class SmemLayout>
__device__ __forceinline__ void stage_rows_from(const Element* rows, int64_t stride, int64_t first, int64_t n,
                                                int dim, Element* to) {
  constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
#pragma unroll 1
  for (int i = threadIdx.x; i < 64 * kChunks; i += blockDim.x) {
    const int idx = i / kChunks, col = i % kChunks * 8;
    Element* dst = to + SmemLayout{}(idx, col);  // 8 contiguous elements (the swizzle moves 16-byte chunks)
    const int64_t m = first + idx;
    if (m >= 0 && m < n && col < dim)
      SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>::copy(*reinterpret_cast<const uint128_t*>(rows + m * stride + col),
                                                 *reinterpret_cast<uint128_t*>(dst));
    else
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  }
}

// u . k_j of a (64, kHeadDim) key tile in fp32 (zero columns past D add nothing): four threads per key, each
// a quarter of the columns in order, then two shuffles (a fixed tree).
template <int kHeadDim, class SK>
__device__ __forceinline__ void xl_key_terms(const SK& sK, const float* u, float* uk) {
  const int key = threadIdx.x / 4, part = threadIdx.x % 4;
  float sum = 0;
  for (int d = part * (kHeadDim / 4); d < (part + 1) * (kHeadDim / 4); ++d)
    sum += u[d] * static_cast<float>(sK(key, d));
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  if (part == 0) uk[key] = sum;
}

// The band's rproj rows (table rows first .. first + 127, zero outside the table) into xl->r and their
// v . rproj into xl->vr, by cp.async (the caller's group).
template <class Element, int kHeadDim>
__device__ __forceinline__ void stage_xl_band(const BackwardParams& p, int64_t h, int64_t first,
                                              XLBackwardShared<Element, kHeadDim>* xl) {
  using T = AttentionBackwardTiles<Element, kHeadDim>;
  const Element* rows = static_cast<const Element*>(p.xl_rproj) + h * p.xl_n * p.D;
  for (int half = 0; half < 2; ++half)
    stage_rows_from<Element, kHeadDim, typename T::SmemRows>(rows, p.D, first + 64 * half, p.xl_n, p.D,
                                                             xl->r[half]);
  for (int i = threadIdx.x; i < 128; i += blockDim.x) {
    const int64_t m = first + i;
    xl->vr[i] = m >= 0 && m < p.xl_n ? p.xl_vr[h * p.xl_n + m] : 0.0f;
  }
}

// Shaw's queries pass: the shared tiles up to the per-warp sums, then its bins of dS and of P per row.
template <class Element, int kHeadDim>
constexpr int64_t shaw_queries_shared_bytes(int64_t shaw_rows) {
  using Shared = BackwardShared<Element, kHeadDim>;
  return static_cast<int64_t>(offsetof(Shared, bias_grad)) +
         2 * 64 * shaw_rows * static_cast<int64_t>(sizeof(float));
}

// The problem of block coordinate z: a batch row, or a packed sequence (false when its offsets are invalid).
struct Problem {
  int64_t b, q0, nq, k0, nk;
};
__device__ __forceinline__ bool problem_of(const BackwardParams& p, int64_t z, Problem* pr) {
  *pr = {z, 0, p.Q, 0, p.K};
  if (p.cu_seqlens_q == nullptr) return true;
  pr->b = 0;
  pr->q0 = p.cu_seqlens_q[z], pr->nq = p.cu_seqlens_q[z + 1] - pr->q0;
  pr->k0 = p.cu_seqlens_k[z], pr->nk = p.cu_seqlens_k[z + 1] - pr->k0;
  return pr->q0 >= 0 && pr->nq >= 0 && pr->q0 + pr->nq <= p.Q && pr->k0 >= 0 && pr->nk >= 0 &&
         pr->k0 + pr->nk <= p.K;
}

// Element d of key row `row` of dK or dV: into the fp32 scratch (contiguous rows of `dim`) or, where the
// launch has the caller's view, into it at (b, t, h) with one rounding, added or written (as the gradient
// pass after the kernels would: the same sum in fp32, the same rounding).
__device__ __forceinline__ void store_key_gradient(const KeyGradientOut& out, float* scratch, int64_t row,
                                                   int64_t dim, int64_t b, int64_t t, int64_t h, int d,
                                                   float x) {
  if (out.data == nullptr) {
    scratch[row * dim + d] = x;
    return;
  }
  const int64_t at = b * out.strides[0] + t * out.strides[1] + h * out.strides[2] + d;
  if (out.dtype == DType::f32) {
    float& y = static_cast<float*>(out.data)[at];
    y = out.add ? y + x : x;
  } else if (out.dtype == DType::bf16) {
    cutlass::bfloat16_t& y = static_cast<cutlass::bfloat16_t*>(out.data)[at];
    y = cutlass::bfloat16_t(out.add ? static_cast<float>(y) + x : x);
  } else {
    cutlass::half_t& y = static_cast<cutlass::half_t*>(out.data)[at];
    y = cutlass::half_t(out.add ? static_cast<float>(y) + x : x);
  }
}

// Rows [row0, row0 + rows) of head h into shared memory: positions, scales, lse log2 e, D_i; their position
// range.
template <class Shared>
__device__ __forceinline__ void stage_rows(const BackwardParams& p, const Problem& pr, int64_t h,
                                           int64_t row0, int rows, Shared& sh, KeyRange* range, bool* bad) {
  const int tid = threadIdx.x;
  if (tid < 64) {
    const int64_t i = pr.q0 + row0 + tid;
    const int64_t qp = tid < rows ? p.q_pos[pr.b * p.q_pos_stride + i] : 0;
    sh.q_pos[tid] = qp;
    const double f =
        detail::query_temperature_factor(p.temperature, p.temperature_scale, p.temperature_floor, qp);
    sh.row_scale[tid] = p.scale * static_cast<float>(f);
    const float lse =
        tid < rows ? p.lse[pr.b * p.lse_strides[0] + h * p.lse_strides[1] + i * p.lse_strides[2]] : 0;
    sh.row_lse2[tid] = lse * kLog2e;
    sh.row_term[tid] = tid < rows ? p.row_terms[(pr.b * p.H + h) * p.Q + i] : 0;
  }
  __syncthreads();
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  bool out_of_range = false;
  for (int i = 0; i < rows; ++i) {
    const int64_t qp = sh.q_pos[i];
    lo = qp < lo ? qp : lo, hi = qp > hi ? qp : hi;
    out_of_range |= !position_in_range(qp, 0);
  }
  *range = {lo, hi, out_of_range};
  *bad = out_of_range;
}

// P and dS of one (64 rows, 64 keys) tile into shared memory from S and dP (accumulators, same layout), per
// element from its (row, col): pair_gradient (attention-inl.cuh), P and dS = its grad, both 0 past the rows
// or keys and for a row with nothing visible. kScoreGradients false: P alone (the values-only keys pass; dp
// is not read). kShaw: the rows' products at the pair's distance added to the dot product and to dP, read
// from shaw_qa and shaw_doa (the tables' rows of this block's first row on). kXL: u . k_j and the band's
// entry added to the dot product (as the forward adds them), and with xl->g, dS also stored by band column.
template <bool kScoreGradients = true, bool kShaw = false, bool kXL = false, class Shared, class Acc,
          class Coords>
__device__ __forceinline__ void probabilities_and_score_gradients(
    const BackwardParams& p, const ScoreTerms& terms, Shared& sh, const Acc& s, const Acc& dp,
    const Coords& coords, int rows, int cols, bool bias_gradient, const float* shaw_qa = nullptr,
    const float* shaw_doa = nullptr, const XLTileTerms* xl = nullptr) {
  using Element = std::remove_reference_t<decltype(sh.p[0])>;
  using SmemP = typename AttentionBackwardTiles<Element, 64>::SmemP;
  auto sP = make_tensor(make_smem_ptr(sh.p), SmemP{});
  auto sdS = make_tensor(make_smem_ptr(sh.ds), SmemP{});
  [[maybe_unused]] Element* xl_g = kXL ? static_cast<Element*>(xl->g) : nullptr;
  CUTE_UNROLL
  for (int i = 0; i < size(s); ++i) {
    const int row = get<0>(coords(i)), col = get<1>(coords(i));
    float prob = 0, grad = 0, dlogit = 0;
    int idx = -1;
    const float lse2 = sh.row_lse2[row];
    if (row < rows && col < cols && lse2 != -INFINITY) {
      const int64_t qp = sh.q_pos[row], kp = sh.k_pos[col];
      float dot = s(i), dpi = 0;
      if constexpr (kScoreGradients) dpi = dp(i);
      if constexpr (kShaw) {
        const int r = row * p.shaw_rows + shaw_row(kp - qp, p.shaw_limit);
        dot += shaw_qa[r];
        if (shaw_doa != nullptr) dpi += shaw_doa[r];
      }
      if constexpr (kXL) dot += xl->uk[col] + xl->band[xl_band_column(row, col, 64) * kXLBandRows + row];
      const PairGradient g = pair_gradient(terms, p.mask, sh.row_scale[row], dot, dpi, qp, kp, sh.lookup,
                                           lse2, sh.row_term[row]);
      prob = g.prob, dlogit = g.dlogit, grad = g.grad;
      if (terms.bias == ScoreBias::lookup) {
        const int64_t d = kp - qp;
        idx = static_cast<int>((d < -terms.limit  ? -terms.limit
                                : d > terms.limit ? terms.limit
                                                  : d) +
                               terms.limit);
      }
    }
    sP(row, col) = Element(prob);
    if constexpr (!kScoreGradients) continue;
    sdS(row, col) = Element(grad);
    if constexpr (kXL) {
      if (xl_g != nullptr) {  // band column b of row `row`: tile b / 64, column b % 64
        const int b = xl_band_column(row, col, 64);
        make_tensor(make_smem_ptr(xl_g + (b / 64) * 64 * 64), SmemP{})(row, b % 64) = Element(grad);
      }
    }
    if (bias_gradient) add_bias_gradient(sh, idx, dlogit);  // uniform across the block
  }
}

// The bias gradient d logit of this thread's element, added to its warp's sums over the lookup's distances
// (sh.bias_grad[warp][distance + limit]) deterministically: the lanes holding the same distance are grouped
// (__match_any_sync), their values (through a per-warp slot) summed in lane order by the lowest lane, which
// adds the group's sum; the warp's steps come in program order. idx < 0: nothing to add from this lane.
template <class Shared>
__device__ __forceinline__ void add_bias_gradient(Shared& sh, int idx, float value) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned group = __match_any_sync(0xffffffffu, idx);
  sh.lane_values[warp][lane] = value;
  __syncwarp();
  if (idx >= 0 && lane == __ffs(group) - 1) {
    float sum = 0;
    for (unsigned members = group; members != 0; members &= members - 1)  // ascending lanes
      sum += sh.lane_values[warp][__ffs(members) - 1];
    sh.bias_grad[warp][idx] += sum;
  }
  __syncwarp();
}

// acc += A B^T, both operands read from shared memory by their own copies (ldmatrix, plain or transposed).
template <class Mma, class Acc, class SA, class SB, class SAFrag, class SBFrag, class CopyA, class CopyB>
__device__ __forceinline__ void smem_gemm(const Mma& mma, Acc& acc, const SA& sa, const SB& sb,
                                          const SAFrag& sa_frag, const SBFrag& sb_frag, const CopyA& copy_a,
                                          const CopyB& copy_b) {
  const int tid = threadIdx.x;
  auto thr = mma.get_thread_slice(tid);
  Tensor ra = thr.partition_fragment_A(sa_frag);
  Tensor rb = thr.partition_fragment_B(sb_frag);
  auto ca = copy_a.get_thread_slice(tid);
  auto cb = copy_b.get_thread_slice(tid);
  Tensor sa_part = ca.partition_S(sa);
  Tensor sb_part = cb.partition_S(sb);
  Tensor ra_view = ca.retile_D(ra);
  Tensor rb_view = cb.retile_D(rb);
  tile_gemm(mma, acc, ra, rb, sa_part, ra_view, sb_part, rb_view, copy_a, copy_b);
}

// The band of a (64 rows, 64 keys) tile: xl->band[column * kXLBandRows + row] = q_row . rproj + v . rproj of
// band column `column` (0 .. 127), from the rows staged in xl->r and xl->vr: two (64, 64) products on the
// tensor cores, Q times each staged tile.
template <class Element, int kHeadDim, class Mma, class SQ, class Coords, class CopyA, class CopyB>
__device__ __forceinline__ void xl_band_products(const Mma& mma, const SQ& sQ,
                                                 XLBackwardShared<Element, kHeadDim>* xl, const Coords& cS,
                                                 const CopyA& copy_a, const CopyB& copy_b) {
  using T = AttentionBackwardTiles<Element, kHeadDim>;
  for (int half = 0; half < 2; ++half) {
    Tensor sR = make_tensor(make_smem_ptr(xl->r[half]), typename T::SmemRows{});
    Tensor acc = partition_fragment_C(mma, Shape<Int<T::kBlockM>, Int<T::kBlockN>>{});
    clear(acc);
    smem_gemm(mma, acc, sQ, sR, sQ, sR, copy_a, copy_b);
    CUTE_UNROLL
    for (int i = 0; i < size(acc); ++i) {
      const int row = get<0>(cS(i)), column = 64 * half + get<1>(cS(i));
      xl->band[column * kXLBandRows + row] = acc(i) + xl->vr[column];
    }
  }
}

// Which gradients a keys pass makes: both, or (tiles wider than 128 columns, whose dK and dV accumulators
// together would spill) dV in one pass and dK, with the table's, in another, each recomputing S.
enum KeysPass { kKeysAndValues, kValuesOnly, kKeysOnly };

// The keys pass: dK, dV of 64 keys of kv head hk, over the query heads of its group and all their rows.
// kXL: with Transformer-XL's terms; per head, dK_j += u_h sum_i dS_ij and the block's partial gradient of
// u_h, sum_j (sum_i dS_ij) k_j.
template <class Element, int kHeadDim, KeysPass kPass, bool kShaw, bool kXL = false>
__global__ void __launch_bounds__(AttentionBackwardTiles<Element, kHeadDim>::kThreads)
    keys_kernel(const __grid_constant__ BackwardParams p) {
  constexpr bool kValues = kPass != kKeysOnly, kKeys = kPass != kValuesOnly;
  static_assert(!kXL || (kPass == kKeysAndValues && !kShaw), "XL: tiles up to 128 columns, not with Shaw");
  using T = AttentionBackwardTiles<Element, kHeadDim>;
  constexpr int BM = T::kBlockM, BN = T::kBlockN;
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  auto& sh = *reinterpret_cast<BackwardShared<Element, kHeadDim>*>(shared_bytes);
  const int tid = threadIdx.x;
  Problem pr;
  if (!problem_of(p, blockIdx.z, &pr)) return;
  const int64_t col0 = (p.first_key_tile + blockIdx.x) * BN;
  if (col0 >= pr.nk) return;
  const int cols = static_cast<int>(min<int64_t>(BN, pr.nk - col0));
  const int64_t hk = p.first_kv_head + blockIdx.y, group = p.H / p.Hkv;
  const int64_t* k_pos = p.k_pos + pr.b * p.k_pos_stride + pr.k0 + col0;
  if (tid < BN) sh.k_pos[tid] = tid < cols ? k_pos[tid] : 0;
  const KeyRange keys = key_range(k_pos, cols);

  typename T::GmemCopy gmem_copy;
  auto gthr = gmem_copy.get_thread_slice(tid);
  const auto tile = Shape<Int<BM>, Int<kHeadDim>>{};
  Tensor cRows = make_identity_tensor(tile);
  Tensor sQ = make_tensor(make_smem_ptr(sh.a), typename T::SmemRows{});
  Tensor sdO = make_tensor(make_smem_ptr(sh.b), typename T::SmemRows{});
  Tensor sK = make_tensor(make_smem_ptr(sh.c), typename T::SmemRows{});
  Tensor sV = make_tensor(make_smem_ptr(sh.d), typename T::SmemRows{});
  Tensor sQt = make_tensor(make_smem_ptr(sh.a), typename T::SmemRowsT{});
  Tensor sdOt = make_tensor(make_smem_ptr(sh.b), typename T::SmemRowsT{});
  Tensor sPt = make_tensor(make_smem_ptr(sh.p), typename T::SmemPT{});
  Tensor sdSt = make_tensor(make_smem_ptr(sh.ds), typename T::SmemPT{});
  const Element* k_ptr = static_cast<const Element*>(p.k) + pr.b * p.k_strides[0] +
                         (pr.k0 + col0) * p.k_strides[1] + hk * p.k_strides[2];
  const Element* v_ptr = static_cast<const Element*>(p.v) + pr.b * p.v_strides[0] +
                         (pr.k0 + col0) * p.v_strides[1] + hk * p.v_strides[2];
  load_rows(gmem_copy,
            gthr.partition_S(make_tensor(make_gmem_ptr(k_ptr), tile, make_stride(p.k_strides[1], _1{}))),
            gthr.partition_D(sK), gthr.partition_S(cRows), cols, p.D);
  load_rows(gmem_copy,
            gthr.partition_S(make_tensor(make_gmem_ptr(v_ptr), tile, make_stride(p.v_strides[1], _1{}))),
            gthr.partition_D(sV), gthr.partition_S(cRows), cols, p.Dv);
  cp_async_fence();

  typename T::Mma mma;
  auto thr = mma.get_thread_slice(tid);
  Tensor acc_dk = partition_fragment_C(mma, Shape<Int<BN>, Int<kHeadDim>>{});
  Tensor acc_dv = partition_fragment_C(mma, Shape<Int<BN>, Int<kHeadDim>>{});
  clear(acc_dk), clear(acc_dv);
  Tensor cS = thr.partition_C(make_identity_tensor(Shape<Int<BM>, Int<BN>>{}));
  const auto copy_n_a = make_tiled_copy_A(typename T::SmemCopyN{}, mma);
  const auto copy_n_b = make_tiled_copy_B(typename T::SmemCopyN{}, mma);
  const auto copy_t_a = make_tiled_copy_A(typename T::SmemCopyT{}, mma);
  const auto copy_t_b = make_tiled_copy_B(typename T::SmemCopyT{}, mma);
  Tensor sPtPlain = make_tensor(make_smem_ptr(sh.p), typename T::SmemPTPlain{});
  Tensor sRowsTPlain = make_tensor(make_smem_ptr(sh.b), typename T::SmemRowsTPlain{});
  Tensor cO = thr.partition_C(make_identity_tensor(Shape<Int<BN>, Int<kHeadDim>>{}));
  [[maybe_unused]] XLBackwardShared<Element, kHeadDim>* xl = nullptr;
  [[maybe_unused]] Tensor sdS = make_tensor(make_smem_ptr(sh.ds), typename T::SmemP{});
  if constexpr (kXL)
    xl = reinterpret_cast<XLBackwardShared<Element, kHeadDim>*>(shared_bytes +
                                                                sizeof(BackwardShared<Element, kHeadDim>));

  for (int64_t g = 0; g < group; ++g) {
    const int64_t h = hk * group + g;
    ScoreTerms terms = p.terms;
    terms.slope = p.slopes[terms.bias == ScoreBias::alibi ? h : 0];
    __syncthreads();  // the previous head's lookup and rows are no longer read
    const int lookup_size = 2 * terms.limit + 1;
    if (terms.bias == ScoreBias::lookup)
      for (int i = tid; i < lookup_size; i += T::kThreads) sh.lookup[i] = p.lookup[h * lookup_size + i];
    const bool table_gradient = kKeys && p.bias_partials != nullptr;
    if (table_gradient)
      for (int i = tid; i < T::kWarps * lookup_size; i += T::kThreads)
        sh.bias_grad[i / lookup_size][i % lookup_size] = 0;
    if constexpr (kXL) {  // u_h, u_h . k_j (K landed), and the head's sums of dS per key zeroed
      for (int i = tid; i < kHeadDim; i += T::kThreads)
        xl->u[i] = i < p.D ? p.xl_u[h * p.xl_u_strides[0] + i * p.xl_u_strides[1]] : 0.0f;
      if (tid < BN) xl->column_sums[tid] = 0;
      cp_async_wait<0>();
      __syncthreads();
      xl_key_terms<kHeadDim>(sK, xl->u, xl->uk);
    }
    for (int64_t row0 = 0; row0 < pr.nq; row0 += BM) {
      const int rows = static_cast<int>(min<int64_t>(BM, pr.nq - row0));
      __syncthreads();  // every warp is done with the previous rows' tiles
      KeyRange qr;
      bool rows_bad;
      stage_rows(p, pr, h, row0, rows, sh, &qr, &rows_bad);
      if (!keys.bad && !rows_bad && !p.mask.any_visible(qr.lo, qr.hi, keys.lo, keys.hi)) continue;
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
      if constexpr (kXL)  // the band's rproj rows: its first delta's table row on
        stage_xl_band(p, h, xl_band_first_delta(sh.q_pos[0], sh.k_pos[0], BN) - p.xl_lo, xl);
      cp_async_fence();
      cp_async_wait<0>();
      __syncthreads();
      if constexpr (kXL) {
        xl_band_products(mma, sQ, xl, cS, copy_n_a, copy_n_b);
        __syncthreads();  // the band is complete
      }

      Tensor s = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});
      Tensor dp = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});
      clear(s), clear(dp);
      smem_gemm(mma, s, sQ, sK, sQ, sK, copy_n_a, copy_n_b);                          // S = Q K^T
      if constexpr (kKeys) smem_gemm(mma, dp, sdO, sV, sdO, sV, copy_n_a, copy_n_b);  // dP = dO V^T
      const int64_t shaw_row0 =  // kShaw: the rows' products (the wave's heads)
          ((pr.b * p.shaw_heads + h - p.first_kv_head * group) * p.Q + pr.q0 + row0) * p.shaw_rows;
      [[maybe_unused]] const XLTileTerms xl_terms{kXL ? xl->uk : nullptr, kXL ? xl->band : nullptr, nullptr};
      probabilities_and_score_gradients<kKeys, kShaw, kXL>(
          p, terms, sh, s, dp, cS, rows, cols, table_gradient, kShaw ? p.shaw_qa + shaw_row0 : nullptr,
          kShaw && p.shaw_doa != nullptr ? p.shaw_doa + shaw_row0 : nullptr, &xl_terms);
      __syncthreads();
      if constexpr (kXL) {  // the head's sums of dS per key, rows in order (read before the next barrier)
        if (tid < BN) {
          float sum = xl->column_sums[tid];
          for (int r = 0; r < BM; ++r) sum += static_cast<float>(sdS(r, tid));
          xl->column_sums[tid] = sum;
        }
      }
      if constexpr (kValues)
        smem_gemm(mma, acc_dv, sPt, sdOt, sPtPlain, sRowsTPlain, copy_t_a, copy_t_b);  // dV += P^T dO
      if constexpr (kKeys)
        smem_gemm(mma, acc_dk, sdSt, sQt, sPtPlain, sRowsTPlain, copy_t_a, copy_t_b);  // dK += dS^T Q
    }
    if (table_gradient) {  // this block's sums for head h: the warps added in warp order
      __syncthreads();
      const int64_t block = static_cast<int64_t>(blockIdx.z) * gridDim.x + blockIdx.x;
      float* out = p.bias_partials + (block * p.H + h) * lookup_size;
      for (int i = tid; i < lookup_size; i += T::kThreads) {
        float sum = 0;
        for (int w = 0; w < T::kWarps; ++w) sum += sh.bias_grad[w][i];
        out[i] = sum;
      }
    }
    if constexpr (kXL) {
      __syncthreads();  // the head's sums of dS per key are complete
      CUTE_UNROLL
      for (int i = 0; i < size(acc_dk); ++i)
        acc_dk(i) += xl->u[get<1>(cO(i))] * xl->column_sums[get<0>(cO(i))];
      if (p.xl_du_partials != nullptr) {
        const int64_t tile = p.first_key_tile + blockIdx.x;  // < xl_key_tiles: col0 < nk here
        float* out = p.xl_du_partials + ((blockIdx.z * p.xl_key_tiles + tile) * p.H + h) * p.D;
        for (int d = tid; d < p.D; d += T::kThreads) {
          float sum = 0;
          for (int j = 0; j < cols; ++j) sum += xl->column_sums[j] * static_cast<float>(sK(j, d));
          out[d] = sum;
        }
      }
    }
  }
  cp_async_wait<0>();
  // dK, dV rows of this block's keys (fp32, contiguous (B, K, Hkv, D) and (B, K, Hkv, Dv)); the padded
  // columns are not stored.
  const int64_t key0 = (pr.b * p.K + pr.k0 + col0) * p.Hkv + hk, t0 = pr.k0 + col0;
  CUTE_UNROLL
  for (int i = 0; i < size(acc_dk); ++i) {
    const int key = get<0>(cO(i)), d = get<1>(cO(i));
    if (key >= cols) continue;
    const int64_t row = key0 + key * p.Hkv;
    if (kKeys && d < p.D) store_key_gradient(p.dk_out, p.dk, row, p.D, pr.b, t0 + key, hk, d, acc_dk(i));
    if (kValues && d < p.Dv) store_key_gradient(p.dv_out, p.dv, row, p.Dv, pr.b, t0 + key, hk, d, acc_dv(i));
  }
}

// Shaw's bins: bins_ds[key] += ds and (bins_p non-null) bins_p[key] += prob for the lanes with key >= 0,
// deterministically: lanes with the same key are grouped (__match_any_sync) and the lowest lane adds their
// values in lane order. Called by the whole warp; each key belongs to one warp's rows.
__device__ __forceinline__ void add_to_bins(float (*lane_values)[32], float* bins_ds, float* bins_p, int key,
                                            float ds, float prob) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned group = __match_any_sync(0xffffffffu, key);
  const bool leader = key >= 0 && lane == __ffs(group) - 1;
  for (int table = 0; table < (bins_p != nullptr ? 2 : 1); ++table) {
    lane_values[warp][lane] = table == 0 ? ds : prob;
    __syncwarp();
    if (leader) {
      float sum = 0;
      for (unsigned members = group; members != 0; members &= members - 1)  // ascending lanes
        sum += lane_values[warp][__ffs(members) - 1];
      (table == 0 ? bins_ds : bins_p)[key] += sum;
    }
    __syncwarp();
  }
}

// A (64, kHeadDim) operand tile of fp32 table rows [row0, row0 + 64) and columns < cols, rounded to the
// storage type; rows past `rows` and the other columns zero.
template <class Element, class Tile>
__device__ __forceinline__ void stage_table(const float* table, const int64_t strides[2], int row0, int rows,
                                            int cols, Tile&& tile) {
  constexpr int R = decltype(size<0>(tile))::value, C = decltype(size<1>(tile))::value;
  for (int i = threadIdx.x; i < R * C; i += blockDim.x) {
    const int r = i / C, c = i % C;
    const bool inside = row0 + r < rows && c < cols;
    tile(r, c) = Element(inside ? table[(row0 + r) * strides[0] + c * strides[1]] : 0.0f);
  }
}

// A (64 rows, 64 distances) operand tile of Shaw's bins (64, 2 L + 1), distances [c0, c0 + 64), rounded to
// the storage type; distances past 2 L + 1 zero.
template <class Element, class Tile>
__device__ __forceinline__ void stage_bins(const float* bins, int shaw_rows, int c0, Tile&& tile) {
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) {
    const int row = i / 64, c = i % 64;
    tile(row, c) = Element(c0 + c < shaw_rows ? bins[row * shaw_rows + c0 + c] : 0.0f);
  }
}

// The queries pass: dQ of 64 rows of head h over every key tile the mask shows. kShaw: the rows' bins of dS
// and P over Shaw's distances, then dQ += bins_dS a^K and the block's partial gradients of a_k and a_v.
// kXL: with Transformer-XL's terms, and dQ_i += sum_j dS_ij rproj_h(delta_ij), dS skewed into the band's
// columns times the band's rproj rows on the tensor cores.
template <class Element, int kHeadDim, bool kShaw, bool kXL = false>
__global__ void __launch_bounds__(AttentionBackwardTiles<Element, kHeadDim>::kThreads)
    queries_kernel(const __grid_constant__ BackwardParams p) {
  static_assert(!kXL || !kShaw, "shaw and transformer_xl are alternatives");
  using T = AttentionBackwardTiles<Element, kHeadDim>;
  constexpr int BM = T::kBlockM, BN = T::kBlockN;
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  auto& sh = *reinterpret_cast<BackwardShared<Element, kHeadDim>*>(shared_bytes);
  const int tid = threadIdx.x;
  Problem pr;
  if (!problem_of(p, blockIdx.z, &pr)) return;
  const int64_t row0 = (p.first_row_block + static_cast<int64_t>(blockIdx.x)) * BM;
  if (row0 >= pr.nq) return;
  const int rows = static_cast<int>(min<int64_t>(BM, pr.nq - row0));
  const int64_t h = p.first_kv_head * (p.H / p.Hkv) + blockIdx.y, hk = h / (p.H / p.Hkv);
  ScoreTerms terms = p.terms;
  terms.slope = p.slopes[terms.bias == ScoreBias::alibi ? h : 0];
  if (terms.bias == ScoreBias::lookup)
    for (int i = tid; i < 2 * terms.limit + 1; i += T::kThreads)
      sh.lookup[i] = p.lookup[h * (2 * terms.limit + 1) + i];
  // Shaw: the bins of dS and of P, (64, 2 L + 1) each, after the tiles (zeroed before stage_rows' barrier);
  // the rows' products from shaw_row0 on.
  [[maybe_unused]] float* bins_ds = &sh.bias_grad[0][0];
  [[maybe_unused]] float* bins_p = bins_ds + BM * p.shaw_rows;
  [[maybe_unused]] const bool values = kShaw && p.shaw_partials_v != nullptr;  // bins of P (a_v's gradient)
  const int64_t shaw_row0 =
      ((pr.b * p.shaw_heads + blockIdx.y) * p.Q + pr.q0 + row0) * p.shaw_rows;  // the wave's heads
  if constexpr (kShaw)
    for (int i = tid; i < 2 * BM * p.shaw_rows; i += T::kThreads) bins_ds[i] = 0;
  // XL: after the tiles (from the per-warp sums on); u, and the skewed dS zeroed once (each tile writes the
  // same entries, the 64 band columns of each row its keys meet).
  [[maybe_unused]] XLBackwardShared<Element, kHeadDim>* xl = nullptr;
  if constexpr (kXL) {
    using Shared = BackwardShared<Element, kHeadDim>;
    xl = reinterpret_cast<XLBackwardShared<Element, kHeadDim>*>(shared_bytes + offsetof(Shared, bias_grad));
    for (int i = tid; i < kHeadDim; i += T::kThreads)
      xl->u[i] = i < p.D ? p.xl_u[h * p.xl_u_strides[0] + i * p.xl_u_strides[1]] : 0.0f;
    for (int i = tid; i < 2 * 64 * 64; i += T::kThreads) xl->g[i / (64 * 64)][i % (64 * 64)] = Element(0);
  }
  KeyRange qr;
  bool rows_bad;
  stage_rows(p, pr, h, row0, rows, sh, &qr, &rows_bad);

  typename T::GmemCopy gmem_copy;
  auto gthr = gmem_copy.get_thread_slice(tid);
  const auto tile = Shape<Int<BM>, Int<kHeadDim>>{};
  Tensor cRows = make_identity_tensor(tile);
  Tensor sK = make_tensor(make_smem_ptr(sh.a), typename T::SmemRows{});
  Tensor sV = make_tensor(make_smem_ptr(sh.b), typename T::SmemRows{});
  Tensor sQ = make_tensor(make_smem_ptr(sh.c), typename T::SmemRows{});
  Tensor sdO = make_tensor(make_smem_ptr(sh.d), typename T::SmemRows{});
  Tensor sKt = make_tensor(make_smem_ptr(sh.a), typename T::SmemRowsT{});
  Tensor sdS = make_tensor(make_smem_ptr(sh.ds), typename T::SmemP{});
  [[maybe_unused]] Tensor sP = make_tensor(make_smem_ptr(sh.p), typename T::SmemP{});
  const Element* q_ptr = static_cast<const Element*>(p.q) + pr.b * p.q_strides[0] +
                         (pr.q0 + row0) * p.q_strides[1] + h * p.q_strides[2];
  const Element* do_ptr = static_cast<const Element*>(p.grad_out) + pr.b * p.grad_out_strides[0] +
                          (pr.q0 + row0) * p.grad_out_strides[1] + h * p.grad_out_strides[2];
  load_rows(gmem_copy,
            gthr.partition_S(make_tensor(make_gmem_ptr(q_ptr), tile, make_stride(p.q_strides[1], _1{}))),
            gthr.partition_D(sQ), gthr.partition_S(cRows), rows, p.D);
  load_rows(
      gmem_copy,
      gthr.partition_S(make_tensor(make_gmem_ptr(do_ptr), tile, make_stride(p.grad_out_strides[1], _1{}))),
      gthr.partition_D(sdO), gthr.partition_S(cRows), rows, p.Dv);
  cp_async_fence();

  typename T::Mma mma;
  auto thr = mma.get_thread_slice(tid);
  Tensor acc_dq = partition_fragment_C(mma, Shape<Int<BM>, Int<kHeadDim>>{});
  clear(acc_dq);
  Tensor cS = thr.partition_C(make_identity_tensor(Shape<Int<BM>, Int<BN>>{}));
  const auto copy_n_a = make_tiled_copy_A(typename T::SmemCopyN{}, mma);
  const auto copy_n_b = make_tiled_copy_B(typename T::SmemCopyN{}, mma);
  const auto copy_t_b = make_tiled_copy_B(typename T::SmemCopyT{}, mma);
  Tensor sKtPlain = make_tensor(make_smem_ptr(sh.a), typename T::SmemRowsTPlain{});
  const int64_t* k_pos = p.k_pos + pr.b * p.k_pos_stride + pr.k0;
  for (int64_t col0 = 0; col0 < pr.nk; col0 += BN) {
    const int cols = static_cast<int>(min<int64_t>(BN, pr.nk - col0));
    const KeyRange keys = key_range(k_pos + col0, cols);
    if (!keys.bad && !rows_bad && !p.mask.any_visible(qr.lo, qr.hi, keys.lo, keys.hi)) continue;
    __syncthreads();  // every warp is done with the previous tile
    if (tid < BN) sh.k_pos[tid] = tid < cols ? k_pos[col0 + tid] : 0;
    const Element* k_ptr = static_cast<const Element*>(p.k) + pr.b * p.k_strides[0] +
                           (pr.k0 + col0) * p.k_strides[1] + hk * p.k_strides[2];
    const Element* v_ptr = static_cast<const Element*>(p.v) + pr.b * p.v_strides[0] +
                           (pr.k0 + col0) * p.v_strides[1] + hk * p.v_strides[2];
    load_rows(gmem_copy,
              gthr.partition_S(make_tensor(make_gmem_ptr(k_ptr), tile, make_stride(p.k_strides[1], _1{}))),
              gthr.partition_D(sK), gthr.partition_S(cRows), cols, p.D);
    load_rows(gmem_copy,
              gthr.partition_S(make_tensor(make_gmem_ptr(v_ptr), tile, make_stride(p.v_strides[1], _1{}))),
              gthr.partition_D(sV), gthr.partition_S(cRows), cols, p.Dv);
    if constexpr (kXL)  // the band's rproj rows: its first delta's table row on
      stage_xl_band(p, h, xl_band_first_delta(sh.q_pos[0], k_pos[col0], BN) - p.xl_lo, xl);
    cp_async_fence();
    cp_async_wait<0>();
    __syncthreads();
    if constexpr (kXL) {
      xl_key_terms<kHeadDim>(sK, xl->u, xl->uk);
      xl_band_products(mma, sQ, xl, cS, copy_n_a, copy_n_b);
      __syncthreads();  // the band and u . k are complete
    }
    Tensor s = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});
    Tensor dp = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});
    clear(s), clear(dp);
    smem_gemm(mma, s, sQ, sK, sQ, sK, copy_n_a, copy_n_b);     // S = Q K^T
    smem_gemm(mma, dp, sdO, sV, sdO, sV, copy_n_a, copy_n_b);  // dP = dO V^T
    [[maybe_unused]] const XLTileTerms xl_terms{kXL ? xl->uk : nullptr, kXL ? xl->band : nullptr,
                                                kXL ? &xl->g[0][0] : nullptr};
    probabilities_and_score_gradients<true, kShaw, kXL>(
        p, terms, sh, s, dp, cS, rows, cols, false, kShaw ? p.shaw_qa + shaw_row0 : nullptr,
        kShaw && p.shaw_doa != nullptr ? p.shaw_doa + shaw_row0 : nullptr, &xl_terms);
    __syncthreads();
    smem_gemm(mma, acc_dq, sdS, sKt, sdS, sKtPlain, copy_n_a, copy_t_b);  // dQ += dS K
    if constexpr (kXL)  // dQ += dS by band column times the band's rproj rows
      for (int half = 0; half < 2; ++half) {
        Tensor sG = make_tensor(make_smem_ptr(xl->g[half]), typename T::SmemP{});
        Tensor sRt = make_tensor(make_smem_ptr(xl->r[half]), typename T::SmemRowsT{});
        Tensor sRtPlain = make_tensor(make_smem_ptr(xl->r[half]), typename T::SmemRowsTPlain{});
        smem_gemm(mma, acc_dq, sG, sRt, sG, sRtPlain, copy_n_a, copy_t_b);
      }
    if constexpr (kShaw) {  // the bins: warp w sums rows 8 w .. 8 w + 7, a quad per row, in column order
      const int row = tid / 32 * 8 + tid % 32 / 4;
      // A tile whose pairs all lie L or more before (r = 0) or after (r = 2 L) the diagonal: row sums, each
      // lane's columns in order, then the quad's in a fixed order (the same for every thread: the block's).
      const int clipped =
          keys.bad || rows_bad ? -1 : shaw_clipped_tile_row(keys.lo, keys.hi, qr.lo, qr.hi, p.shaw_limit);
      if (clipped >= 0) {
        float ds = 0, prob = 0;
        CUTE_UNROLL
        for (int j = 0; j < BN / 4; ++j) {
          const int c = 4 * j + tid % 4;
          if (row < rows && c < cols)
            ds += static_cast<float>(sdS(row, c)), prob += static_cast<float>(sP(row, c));
        }
        ds += __shfl_xor_sync(0xffffffffu, ds, 1), prob += __shfl_xor_sync(0xffffffffu, prob, 1);
        ds += __shfl_xor_sync(0xffffffffu, ds, 2), prob += __shfl_xor_sync(0xffffffffu, prob, 2);
        if (tid % 4 == 0 && row < rows) {
          const int key = row * p.shaw_rows + clipped;
          bins_ds[key] += ds;
          if (values) bins_p[key] += prob;
        }
      } else {
        const int64_t qp = sh.q_pos[row];
        CUTE_UNROLL
        for (int j = 0; j < BN / 4; ++j) {
          const int c = 4 * j + tid % 4;
          const int key =
              row < rows && c < cols ? row * p.shaw_rows + shaw_row(sh.k_pos[c] - qp, p.shaw_limit) : -1;
          add_to_bins(sh.lane_values, bins_ds, values ? bins_p : nullptr, key,
                      static_cast<float>(sdS(row, c)), static_cast<float>(sP(row, c)));
        }
      }
    }
  }
  cp_async_wait<0>();
  if constexpr (kShaw) {  // dQ += bins_dS a^K, 64 distances at a time (a^K rows rounded as K is)
    for (int c0 = 0; c0 < p.shaw_rows; c0 += BN) {
      __syncthreads();  // the bins are complete; every warp is done with the previous operands
      stage_bins<Element>(bins_ds, p.shaw_rows, c0, sdS);
      stage_table<Element>(p.shaw_a_k, p.shaw_a_k_strides, c0, p.shaw_rows, p.D, sK);
      __syncthreads();
      smem_gemm(mma, acc_dq, sdS, sKt, sdS, sKtPlain, copy_n_a, copy_t_b);
    }
  }
  Tensor cO = thr.partition_C(make_identity_tensor(Shape<Int<BM>, Int<kHeadDim>>{}));
  const int64_t base = ((pr.b * p.Q + pr.q0 + row0) * p.H + h) * p.D;
  CUTE_UNROLL
  for (int i = 0; i < size(acc_dq); ++i) {
    const int row = get<0>(cO(i)), d = get<1>(cO(i));
    if (row < rows && d < p.D) p.dq[base + row * p.H * p.D + d] = acc_dq(i);
  }
  if constexpr (kShaw) {
    // The block's partial gradients (2 L + 1, D): of a_k, bins_dS^T Q; of a_v, bins_P^T dO (D = Dv with a_v).
    if (p.shaw_partials_k == nullptr && !values) return;  // uniform: the launch's
    const int64_t block =
        (static_cast<int64_t>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const int64_t at = block * p.shaw_rows * p.D;
    Tensor sPt = make_tensor(make_smem_ptr(sh.p), typename T::SmemPT{});
    Tensor sdSt = make_tensor(make_smem_ptr(sh.ds), typename T::SmemPT{});
    Tensor sQt = make_tensor(make_smem_ptr(sh.c), typename T::SmemRowsT{});
    Tensor sdOt = make_tensor(make_smem_ptr(sh.d), typename T::SmemRowsT{});
    Tensor sPtPlain = make_tensor(make_smem_ptr(sh.p), typename T::SmemPTPlain{});
    Tensor sRowsTPlain = make_tensor(make_smem_ptr(sh.b), typename T::SmemRowsTPlain{});
    const auto copy_t_a = make_tiled_copy_A(typename T::SmemCopyT{}, mma);
    for (int c0 = 0; c0 < p.shaw_rows; c0 += BN) {
      __syncthreads();  // every warp is done with the previous chunk (and with dQ's operands)
      stage_bins<Element>(bins_ds, p.shaw_rows, c0, sdS);
      if (values) stage_bins<Element>(bins_p, p.shaw_rows, c0, sP);
      __syncthreads();
      for (int table = 0; table < 2; ++table) {
        float* partials = table == 0 ? p.shaw_partials_k : p.shaw_partials_v;
        if (partials == nullptr) continue;
        Tensor acc = partition_fragment_C(mma, Shape<Int<BN>, Int<kHeadDim>>{});
        clear(acc);
        if (table == 0)
          smem_gemm(mma, acc, sdSt, sQt, sPtPlain, sRowsTPlain, copy_t_a, copy_t_b);
        else
          smem_gemm(mma, acc, sPt, sdOt, sPtPlain, sRowsTPlain, copy_t_a, copy_t_b);
        CUTE_UNROLL
        for (int i = 0; i < size(acc); ++i) {
          const int r = c0 + get<0>(cO(i)), d = get<1>(cO(i));
          if (r < p.shaw_rows && d < p.D) partials[at + r * p.D + d] = acc(i);
        }
      }
    }
  }
}

// sums (H, n) += the partials (blocks, H, n) of one wave of the keys pass, in block order: a block per head.
static __global__ void sum_partials_kernel(const float* partials, int64_t blocks, int64_t H, int64_t n,
                                           float* sums) {
  const int64_t h = blockIdx.x;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float sum = sums[h * n + i];
    for (int64_t b = 0; b < blocks; ++b) sum += partials[(b * H + h) * n + i];
    sums[h * n + i] = sum;
  }
}

// A pass's kernel with the shared tiles (or `bytes`, Shaw's queries pass) in dynamic shared memory.
template <class Element, int kHeadDim, class Kernel>
void launch_pass(Kernel kernel, const BackwardParams& params, dim3 grid, const char* what,
                 int bytes = sizeof(BackwardShared<Element, kHeadDim>)) {
  using T = AttentionBackwardTiles<Element, kHeadDim>;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;  // no rows (Q = 0) or keys: nothing to launch
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  check_launch("attention_backward", "cudaFuncSetAttribute");
  kernel<<<grid, T::kThreads, bytes, static_cast<cudaStream_t>(cuda_stream())>>>(params);
  check_launch("attention_backward", what);
}

// The keys pass in waves of `width` key tiles (all of them without a learned table's gradient): each wave's
// partial sums of the table (one per block and head, zeroed first: blocks past a sequence's keys write
// nothing) are added, in wave order, into per-head sums, so the partials take width / key tiles of the memory
// one wave would (8 x 32k keys, 32 heads and T5's 2049 distances: a GB in one wave).
struct KeyWaves {
  int64_t width = 0;
  float* partials = nullptr;  // (problems * width, H, n), or null
  float* sums = nullptr;      // (H, n)
  int64_t n = 0;
};

// The keys pass, in waves (kShaw: with Shaw's terms; kXL: with Transformer-XL's, and its shared memory).
template <class Element, int kHeadDim, bool kShaw, bool kXL = false>
void launch_keys_pass(BackwardParams p, int64_t problems, const KeyWaves& waves, int64_t kv_heads = -1) {
  const unsigned z = static_cast<unsigned>(problems);
  const cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream());
  const int64_t key_tiles = (p.K + 63) / 64;
  for (int64_t first = 0; first < key_tiles; first += waves.width) {
    const int64_t width = std::min(waves.width, key_tiles - first);
    p.first_key_tile = first;
    const dim3 keys_grid(static_cast<unsigned>(width), static_cast<unsigned>(kv_heads < 0 ? p.Hkv : kv_heads),
                         z);
    if (waves.partials != nullptr)
      cudaMemsetAsync(waves.partials, 0, static_cast<size_t>(problems * width * p.H * waves.n) * 4, stream);
    if constexpr (kHeadDim <= 128) {
      launch_pass<Element, kHeadDim>(keys_kernel<Element, kHeadDim, kKeysAndValues, kShaw, kXL>, p, keys_grid,
                                     "the keys pass (dK, dV)",
                                     kXL ? static_cast<int>(xl_keys_shared_bytes<Element, kHeadDim>())
                                         : static_cast<int>(sizeof(BackwardShared<Element, kHeadDim>)));
    } else {
      static_assert(!kShaw && !kXL, "Shaw's and Transformer-XL's backward: tiles up to 128 columns");
      launch_pass<Element, kHeadDim>(keys_kernel<Element, kHeadDim, kValuesOnly, false>, p, keys_grid,
                                     "the keys pass (dV)");
      launch_pass<Element, kHeadDim>(keys_kernel<Element, kHeadDim, kKeysOnly, false>, p, keys_grid,
                                     "the keys pass (dK)");
    }
    if (waves.partials != nullptr) {
      sum_partials_kernel<<<static_cast<unsigned>(p.H), 256, 0, stream>>>(waves.partials, problems * width,
                                                                          p.H, waves.n, waves.sums);
      check_launch("attention_backward", "the table gradient's sum kernel");
    }
  }
}

// sums (n) += the partials (blocks, n) of one wave of a pass, in block order: a thread per element.
static __global__ void sum_block_partials_kernel(const float* partials, int64_t blocks, int64_t n,
                                                 float* sums) {
  for (int64_t i = threadIdx.x + static_cast<int64_t>(blockIdx.x) * blockDim.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = sums[i];
    for (int64_t b = 0; b < blocks; ++b) sum += partials[b * n + i];
    sums[i] = sum;
  }
}

// grad (rows, D) at strides (s0, s1) += sums (rows, D) contiguous; NaN everywhere instead when packed
// sequences' offsets are invalid (cq non-null: the check of attention_backward.cu's poison kernel).
static __global__ void add_table_gradient_kernel(const float* sums, int64_t rows, int64_t D, float* grad,
                                                 int64_t s0, int64_t s1, const int64_t* cq, const int64_t* ck,
                                                 int64_t sequences, int64_t Q, int64_t K) {
  __shared__ int bad;
  if (threadIdx.x == 0) bad = 0;
  __syncthreads();
  for (int64_t s = threadIdx.x; cq != nullptr && s <= sequences; s += blockDim.x) {
    const bool ends =
        (s == 0 && (cq[0] != 0 || ck[0] != 0)) || (s == sequences && (cq[s] != Q || ck[s] != K));
    if (ends || (s > 0 && (cq[s] < cq[s - 1] || ck[s] < ck[s - 1]))) bad = 1;
  }
  __syncthreads();
  const float nan = __int_as_float(0x7fc00000);
  for (int64_t i = threadIdx.x + static_cast<int64_t>(blockIdx.x) * blockDim.x; i < rows * D;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float& g = grad[(i / D) * s0 + (i % D) * s1];
    g = bad ? nan : g + sums[i];
  }
}

// Blocks for a grid-stride loop over `total` elements.
inline unsigned grid_blocks(int64_t total, int threads) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>((total + threads - 1) / threads, 65535)));
}

// The Hopper backward (src/cuda/attention_backward_sm90.cu): whether it takes the launch (default positions,
// heads up to 128, no Shaw or Transformer-XL, a learned table's partial sums within
// attention_table_partial_bytes; fill_required: only where its blocks of 128 keys fill the GPU), and its
// launch, which writes dq, dk and dv (dq added into: zeroed by the caller) and adds the learned table's
// gradient by lookup entry into table_sums (H, 2 limit + 1) where non-null.
bool attention_backward_sm90_fits(const AttentionBackwardLaunch& launch, bool fill_required);
void attention_backward_sm90(const AttentionBackwardLaunch& launch, BackwardParams p, int64_t problems,
                             float* table_sums);

// The passes with Shaw's terms (src/cuda/attention_backward_shaw.cu): the rows' products, the keys pass, the
// queries pass in waves of row blocks, and the gradients of a_k and a_v added into the launch's views. p is
// the launch's parameters without Shaw's.
void attention_backward_shaw(const AttentionBackwardLaunch& launch, const BackwardParams& p, int64_t problems,
                             const KeyWaves& waves);
// The passes with Transformer-XL's terms (src/cuda/attention_backward_xl.cu): its tables, the keys and
// queries passes, the deltas pass, and the gradients of u, v and w_r added into the caller's views.
void attention_backward_xl(const AttentionBackwardLaunch& launch, const BackwardParams& p, int64_t problems,
                           const KeyWaves& waves);

}  // namespace posenc::cuda::backward
