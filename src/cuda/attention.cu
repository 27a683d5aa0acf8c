// src/cuda/attention.cu: the fused attention forward on the GPU, one mainloop for every positional term.
// FlashAttention-2's structure (Dao 2023) on CuTe's SM80 tensor-core atoms (mma.sync m16n8k16, bf16 / fp16
// in, fp32 accumulators; ldmatrix from swizzled shared memory; cp.async tiles), which run on Ampere and
// Hopper:
//   a block of 128 threads owns 64 query rows of one head (a warp: 16 rows); it walks the key tiles of 64,
//   skipping the tiles the mask hides wholly (src/attention_mask.h any_visible, on the tile's position
//   range), S = Q K^T on tensor cores, then per accumulator element, from its (row, col) in the tile (CuTe's
//   identity tensor partitioned like the accumulators), the logit of src/cuda/attention-inl.cuh: scale,
//   softcap, ALiBi or the learned lookup staged in shared memory, and the mask only on tiles it does not
//   leave whole (all_visible); an online softmax in base 2 per row (each row held by the 4 lanes of a quad);
//   P rounded to the storage type for P V on tensor cores, as every GPU flash attention does; out and lse at
//   the end.
// Positions are read from device memory per tile, so explicit, packed and default positions are one path.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>
#include <type_traits>

#include "posenc/device.h"
#include "src/cuda/attention.h"
#include "src/cuda/attention_tiles.cuh"
#include "src/cuda/device.h"
#include "src/query_temperature.h"

namespace posenc::cuda {
namespace {
using namespace cute;

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kMaxLookup = static_cast<int>(kMaxDeviceRowTable);

struct Params {
  int64_t Q, K, H, Hkv;
  int D, Dv;        // q / k and v head dims (multiples of 8), zero-padded to the tiles
  int64_t v_parts;  // blocks per row block and split, each kVDim output columns
  const void* q;
  const void* k;
  const void* v;
  void* out;
  int64_t q_strides[3], k_strides[3], v_strides[3], out_strides[3];
  float* lse;
  int64_t lse_strides[3];
  const int64_t* q_pos;
  const int64_t* k_pos;
  int64_t q_pos_stride, k_pos_stride;
  const int64_t* cu_seqlens_q;
  const int64_t* cu_seqlens_k;
  float scale;
  detail::AttentionMask mask;
  ScoreTerms terms;
  const float* lookup;  // (H, 2 limit + 1)
  const float* sinks;
  int64_t sinks_stride;
  QueryTemperature::Kind temperature;
  double temperature_scale, temperature_floor;
  // Split-K (few rows, long keys: decoding): each block takes 1 / splits of a row block's key tiles and
  // writes its partial rows, (B, H, Q, splits) of v_parts kVDim unnormalized sums and (max, sum) pairs;
  // merge_kernel ends them.
  int64_t splits;
  float* partial_out;
  MaxSum* partial_max_sum;
  // Shaw (kShaw kernels): a_k (2 L + 1, D) and a_v (2 L + 1, Dv) or null, f32 at their strides.
  int32_t shaw_limit;  // L
  int shaw_rows;       // 2 L + 1
  const float* shaw_a_k;
  const float* shaw_a_v;
  int64_t shaw_a_k_strides[2], shaw_a_v_strides[2];
  float slopes[kMaxAttentionHeads];
};

template <class Element, int kQKDim, int kVDim>
struct alignas(128) SharedTiles {
  using T = AttentionTiles<Element, kQKDim, kVDim>;
  Element q[T::kBlockM * kQKDim];
  Element k[T::kBlockN * kQKDim];
  Element v[T::kBlockN * kVDim];
  int64_t q_pos[T::kBlockM];
  int64_t k_pos[T::kBlockN];
  float row_scale[T::kBlockM];
  float lookup[kMaxLookup];
  float lane_values[T::kWarps][32];  // Shaw's bin sums: each lane's value, read in lane order
};
static_assert(sizeof(SharedTiles<cutlass::bfloat16_t, 256, 128>) <= 227 * 1024);

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Shaw et al. 2018 (arXiv 1803.02155) in the fused forward, kShaw kernels. The key term q_i . a^K_r is staged
// per row block as a (64, 2 L + 1) table of products in shared memory (tensor cores: Q times the a^K rows,
// 64 at a time, through the K tile's memory) and added to the dot product of each pair; the value term
// sum_j p_ij a^V_r is kept as per-row sums of the probabilities over r, rescaled with the row's accumulators:
// the clipped distances (r = 0, 2 L) in registers, the others in shared memory (only tiles within L of the
// diagonal have them), multiplied by the a^V rows on tensor cores at the end. a^K, a^V and the sums are
// rounded to the storage type for the tensor cores, as P is.

// A (R, C) shared-memory tile of a fp32 table's rows [row0, row0 + R) and columns [col0, col0 + C), rounded
// to the storage type; rows past `rows` and columns past `cols` zero.
template <class Element, class Tile>
__device__ __forceinline__ void stage_table_rows(const float* table, const int64_t strides[2], int row0,
                                                 int rows, int col0, int cols, Tile&& tile) {
  constexpr int R = decltype(size<0>(tile))::value, C = decltype(size<1>(tile))::value;
  for (int i = threadIdx.x; i < R * C; i += blockDim.x) {
    const int r = i / C, c = i % C;
    const bool inside = row0 + r < rows && col0 + c < cols;
    tile(r, c) = Element(inside ? table[(row0 + r) * strides[0] + (col0 + c) * strides[1]] : 0.0f);
  }
}

// bins[key] += value for the lanes with key >= 0, deterministically: lanes with the same key (repeated key
// positions) are grouped (__match_any_sync) and the lowest lane adds their values in lane order. Called by
// the whole warp.
__device__ __forceinline__ void add_to_bin(float* bins, float (*lane_values)[32], int key, float value) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned group = __match_any_sync(0xffffffffu, key);
  lane_values[warp][lane] = value;
  __syncwarp();
  if (key >= 0 && lane == __ffs(group) - 1) {
    float sum = 0;
    for (unsigned members = group; members != 0; members &= members - 1)  // ascending lanes
      sum += lane_values[warp][__ffs(members) - 1];
    bins[key] += sum;
  }
  __syncwarp();
}

template <class Element, int kQKDim, int kVDim, bool kShaw>
__global__ void __launch_bounds__(AttentionTiles<Element, kQKDim, kVDim>::kThreads)
    attention_forward_kernel(const __grid_constant__ Params p) {
  using T = AttentionTiles<Element, kQKDim, kVDim>;
  constexpr int BM = T::kBlockM, BN = T::kBlockN;
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  auto& sh = *reinterpret_cast<SharedTiles<Element, kQKDim, kVDim>*>(shared_bytes);
  const int tid = threadIdx.x;

  // The problem: a batch row, or a packed sequence.
  int64_t b = blockIdx.z, q0 = 0, nq = p.Q, k0 = 0, nk = p.K;
  if (p.cu_seqlens_q != nullptr) {
    b = 0;
    q0 = p.cu_seqlens_q[blockIdx.z], nq = p.cu_seqlens_q[blockIdx.z + 1] - q0;
    k0 = p.cu_seqlens_k[blockIdx.z], nk = p.cu_seqlens_k[blockIdx.z + 1] - k0;
    // Offsets outside the packed tokens: nothing is read (the packing check writes NaN over out).
    if (q0 < 0 || nq < 0 || q0 + nq > p.Q || k0 < 0 || nk < 0 || k0 + nk > p.K) return;
  }
  // blockIdx.x = (row block * v_parts + part) * splits + split.
  const int64_t split = blockIdx.x % p.splits, part = (blockIdx.x / p.splits) % p.v_parts;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x / (p.splits * p.v_parts)) * BM;
  const int v0 = static_cast<int>(part) * kVDim;  // this block's output columns: [v0, v0 + kVDim) of Dv
  if (row0 >= nq) return;
  const int rows = static_cast<int>(min<int64_t>(BM, nq - row0));
  const int64_t h = blockIdx.y, hk = h / (p.H / p.Hkv);
  const int64_t* q_pos = p.q_pos + b * p.q_pos_stride + q0 + row0;
  const int64_t* k_pos = p.k_pos + b * p.k_pos_stride + k0;

  // Rows: positions and scales (softmax scale times the query temperature at the position).
  if (tid < BM) {
    const int64_t qp = tid < rows ? q_pos[tid] : 0;
    sh.q_pos[tid] = qp;
    const double f =
        detail::query_temperature_factor(p.temperature, p.temperature_scale, p.temperature_floor, qp);
    sh.row_scale[tid] = p.scale * static_cast<float>(f);
  }
  const bool lookup = p.terms.bias == ScoreBias::lookup;
  if (lookup)
    for (int i = tid; i < 2 * p.terms.limit + 1; i += T::kThreads)
      sh.lookup[i] = p.lookup[h * (2 * p.terms.limit + 1) + i];
  ScoreTerms terms = p.terms;
  terms.slope = p.slopes[terms.bias == ScoreBias::alibi ? h : 0];

  // Q: cp.async, first group.
  typename T::GmemCopy gmem_copy;
  auto gmem_thr = gmem_copy.get_thread_slice(tid);
  const auto tile_q = Shape<Int<BM>, Int<kQKDim>>{};
  const auto tile_k = Shape<Int<BN>, Int<kQKDim>>{};
  const auto tile_v = Shape<Int<BN>, Int<kVDim>>{};
  const Element* q_ptr = static_cast<const Element*>(p.q) + b * p.q_strides[0] +
                         (q0 + row0) * p.q_strides[1] + h * p.q_strides[2];
  Tensor gQ = make_tensor(make_gmem_ptr(q_ptr), tile_q, make_stride(p.q_strides[1], _1{}));
  Tensor sQ = make_tensor(make_smem_ptr(sh.q), typename T::SmemQ{});
  Tensor sK = make_tensor(make_smem_ptr(sh.k), typename T::SmemK{});
  Tensor sV = make_tensor(make_smem_ptr(sh.v), typename T::SmemV{});
  Tensor sVt = make_tensor(make_smem_ptr(sh.v), typename T::SmemVt{});
  Tensor sVtPlain = make_tensor(make_smem_ptr(sh.v), typename T::SmemVtPlain{});
  Tensor cQ = make_identity_tensor(tile_q);
  Tensor cK = make_identity_tensor(tile_k);
  Tensor cV = make_identity_tensor(tile_v);
  load_rows(gmem_copy, gmem_thr.partition_S(gQ), gmem_thr.partition_D(sQ), gmem_thr.partition_S(cQ), rows,
            p.D);
  cp_async_fence();
  __syncthreads();  // row positions and scales, the lookup

  // The rows' position range (rows past nq excluded), and whether any row is out of the exact range.
  int64_t qmin = INT64_MAX, qmax = INT64_MIN;
  bool rows_bad = false;
  for (int i = 0; i < rows; ++i) {
    const int64_t qp = sh.q_pos[i];
    qmin = min(qmin, qp), qmax = max(qmax, qp);
    rows_bad |= !position_in_range(qp, 0);
  }

  typename T::Mma mma;
  auto thr = mma.get_thread_slice(tid);
  Tensor tSrQ = thr.partition_fragment_A(sQ);
  Tensor tSrK = thr.partition_fragment_B(sK);
  Tensor tOrVt = thr.partition_fragment_B(sVtPlain);
  Tensor acc_o = partition_fragment_C(mma, Shape<Int<BM>, Int<kVDim>>{});
  clear(acc_o);
  const auto tiled_copy_q = make_tiled_copy_A(typename T::SmemCopyA{}, mma);
  const auto tiled_copy_k = make_tiled_copy_B(typename T::SmemCopyA{}, mma);
  const auto tiled_copy_v = make_tiled_copy_B(typename T::SmemCopyVt{}, mma);
  auto copy_q = tiled_copy_q.get_thread_slice(tid);
  auto copy_k = tiled_copy_k.get_thread_slice(tid);
  auto copy_v = tiled_copy_v.get_thread_slice(tid);
  Tensor tSsQ = copy_q.partition_S(sQ);
  Tensor tSsK = copy_k.partition_S(sK);
  Tensor tOsVt = copy_v.partition_S(sVt);
  Tensor tSrQ_view = copy_q.retile_D(tSrQ);
  Tensor tSrK_view = copy_k.retile_D(tSrK);
  Tensor tOrVt_view = copy_v.retile_D(tOrVt);

  // Each thread's accumulator elements as (row, col) of the tile, in the (row, col) view of the fragments.
  Tensor cS = make_identity_tensor(Shape<Int<BM>, Int<BN>>{});
  Tensor tScS = make_tensor(thr.partition_C(cS).data(), accumulator_rows_cols(thr.partition_C(cS).layout()));
  Tensor cO = make_identity_tensor(Shape<Int<BM>, Int<kVDim>>{});
  Tensor tOcO = make_tensor(thr.partition_C(cO).data(), accumulator_rows_cols(thr.partition_C(cO).layout()));
  Tensor o = make_tensor(acc_o.data(), accumulator_rows_cols(acc_o.layout()));
  constexpr int kRows = decltype(size<0>(o))::value;  // rows of the tile this thread holds
  float row_max[kRows], row_sum[kRows], scale_of[kRows];
  int64_t qpos_of[kRows];
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const int row = get<0>(tOcO(r, 0));
    row_max[r] = -INFINITY, row_sum[r] = 0;
    scale_of[r] = sh.row_scale[row];
    qpos_of[r] = sh.q_pos[row];
  }

  // Shaw: the rows' q . a^K products (BM, rows) and value sums (BM, rows) after the tiles in shared memory;
  // the clipped distances' value sums in registers.
  float* shaw_qa = reinterpret_cast<float*>(shared_bytes + sizeof(SharedTiles<Element, kQKDim, kVDim>));
  float* shaw_bins = shaw_qa + BM * p.shaw_rows;
  const bool shaw_values = kShaw && p.shaw_a_v != nullptr;
  float below[kRows] = {}, above[kRows] = {};  // sum of p over d <= -L, d >= L
  bool bins_live = false;                      // a tile within L of the diagonal has added to the bins
  if constexpr (kShaw) {
    if (shaw_values)  // ordered before any use by the staging's barriers (at least one chunk)
      for (int i = tid; i < BM * p.shaw_rows; i += T::kThreads) shaw_bins[i] = 0;
    cp_async_wait<0>();
    __syncthreads();  // Q has landed
    for (int c0 = 0; c0 < p.shaw_rows; c0 += BN) {
      stage_table_rows<Element>(p.shaw_a_k, p.shaw_a_k_strides, c0, p.shaw_rows, 0, p.D, sK);
      __syncthreads();
      Tensor acc = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});
      clear(acc);
      tile_gemm(mma, acc, tSrQ, tSrK, tSsQ, tSrQ_view, tSsK, tSrK_view, tiled_copy_q, tiled_copy_k);
      Tensor a = make_tensor(acc.data(), accumulator_rows_cols(acc.layout()));
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) CUTE_UNROLL
      for (int c = 0; c < size<1>(a); ++c) {
        const int row = get<0>(tScS(r, c)), col = c0 + get<1>(tScS(r, c));
        if (col < p.shaw_rows) shaw_qa[row * p.shaw_rows + col] = a(r, c);
      }
      __syncthreads();  // every warp has read this chunk of a^K
    }
  }

  const int64_t n_tiles = (nk + BN - 1) / BN, per_split = (n_tiles + p.splits - 1) / p.splits;
  const int64_t t_end = min(n_tiles, (split + 1) * per_split);
  for (int64_t t = split * per_split; t < t_end; ++t) {
    const int64_t col0 = t * BN;
    const int cols = static_cast<int>(min<int64_t>(BN, nk - col0));
    const KeyRange keys = key_range(k_pos + col0, cols);
    // Skipped (the same for every thread) only when every position is exact, so that no distance in the
    // test wraps, and the mask hides every pair.
    if (!keys.bad && !rows_bad && !p.mask.any_visible(qmin, qmax, keys.lo, keys.hi)) continue;
    const bool whole =
        !keys.bad && !rows_bad && cols == BN && p.mask.all_visible(qmin, qmax, keys.lo, keys.hi);
    // Shaw: whether a pair of the tile may lie within L of the diagonal (|d| < L: its own value bin).
    const bool band = shaw_values && (keys.bad || rows_bad ||
                                      (keys.hi - qmin > -p.shaw_limit && keys.lo - qmax < p.shaw_limit));
    __syncthreads();  // every warp is done with the previous tile's K, V and key positions
    if (tid < BN) sh.k_pos[tid] = tid < cols ? k_pos[col0 + tid] : 0;
    const int64_t kv_row = b * p.k_strides[0] + (k0 + col0) * p.k_strides[1];
    const Element* k_ptr = static_cast<const Element*>(p.k) + kv_row + hk * p.k_strides[2];
    const Element* v_ptr = static_cast<const Element*>(p.v) + b * p.v_strides[0] +
                           (k0 + col0) * p.v_strides[1] + hk * p.v_strides[2] + v0;
    Tensor gK = make_tensor(make_gmem_ptr(k_ptr), tile_k, make_stride(p.k_strides[1], _1{}));
    Tensor gV = make_tensor(make_gmem_ptr(v_ptr), tile_v, make_stride(p.v_strides[1], _1{}));
    load_rows(gmem_copy, gmem_thr.partition_S(gK), gmem_thr.partition_D(sK), gmem_thr.partition_S(cK), cols,
              p.D);
    cp_async_fence();
    load_rows(gmem_copy, gmem_thr.partition_S(gV), gmem_thr.partition_D(sV), gmem_thr.partition_S(cV), cols,
              p.Dv - v0);
    cp_async_fence();
    cp_async_wait<1>();  // Q (first tile) and K have landed
    __syncthreads();

    Tensor acc_s = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});
    clear(acc_s);
    tile_gemm(mma, acc_s, tSrQ, tSrK, tSsQ, tSrQ_view, tSsK, tSrK_view, tiled_copy_q, tiled_copy_k);

    // Logits (times log2 e) and the online softmax, row by row.
    Tensor s = make_tensor(acc_s.data(), accumulator_rows_cols(acc_s.layout()));
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float mx = row_max[r];
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) {
        float dot = s(r, c), x;
        if constexpr (kShaw)
          dot += shaw_qa[get<0>(tScS(r, c)) * p.shaw_rows +
                         shaw_row(sh.k_pos[get<1>(tScS(r, c))] - qpos_of[r], p.shaw_limit)];
        if (whole) {
          x = capped_logit(scale_of[r] * dot, terms.softcap);
          if (terms.bias != ScoreBias::none)
            x += position_bias(terms, sh.k_pos[get<1>(tScS(r, c))] - qpos_of[r], sh.lookup);
        } else {
          const int col = get<1>(tScS(r, c));
          x = col < cols
                  ? attention_logit(terms, p.mask, scale_of[r], dot, qpos_of[r], sh.k_pos[col], sh.lookup)
                  : -INFINITY;
        }
        s(r, c) = x * kLog2e;
        mx = fmaxf(mx, s(r, c));
      }
      mx = quad_max(mx);
      // Nothing visible yet: keep the exponents' base at 0 (every term is 0 and stays 0).
      const float base = mx == -INFINITY ? 0.0f : mx;
      const float correction = exp2f(row_max[r] - base);
      row_max[r] = mx;
      if (shaw_values) {  // the value sums follow the row's accumulators (quad-uniform: the quad's row)
        const int row = get<0>(tScS(r, 0));
        if (bins_live && correction != 1.0f)
          for (int i = tid % 4; i < p.shaw_rows; i += 4) shaw_bins[row * p.shaw_rows + i] *= correction;
        __syncwarp();
        below[r] *= correction, above[r] *= correction;
      }
      float sum = 0;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) {
        s(r, c) = exp2f(s(r, c) - base);
        sum += s(r, c);
        if (shaw_values) {
          const int col = get<1>(tScS(r, c));
          const int64_t d = sh.k_pos[col] - qpos_of[r];
          int key = -1;
          if (col < cols) {
            if (d <= -p.shaw_limit)
              below[r] += s(r, c);
            else if (d >= p.shaw_limit)
              above[r] += s(r, c);
            else
              key = get<0>(tScS(r, c)) * p.shaw_rows + static_cast<int>(d + p.shaw_limit);
          }
          if (band) add_to_bin(shaw_bins, sh.lane_values, key, s(r, c));  // uniform: the tile's
        }
      }
      row_sum[r] = row_sum[r] * correction + sum;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o); ++c) o(r, c) *= correction;
    }

    cp_async_wait<0>();  // V has landed
    __syncthreads();
    Tensor probs = make_tensor_like<Element>(acc_s);
    CUTE_UNROLL
    for (int i = 0; i < size(acc_s); ++i) probs(i) = Element(acc_s(i));
    Tensor tOrP = make_tensor(probs.data(), accumulator_as_operand_a(probs.layout()));
    tile_gemm_registers_a(mma, acc_o, tOrP, tOrVt, tOsVt, tOrVt_view, tiled_copy_v);
    bins_live |= band;
  }
  cp_async_wait<0>();  // no copy left in flight (every tile may have been skipped)

  if (shaw_values) {  // acc_o += (sums over r of p) times the a^V rows, 64 distances at a time
    // The sums are relative to the row's maximum, up to its sum l (the keys' count): fp16 would overflow past
    // 65504. Row and sums are scaled by 2^-e (e = the exponent of l; exact) around the products.
    float unscale[kRows];
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {  // the clipped distances' sums, added in a fixed order
      const int row = get<0>(tScS(r, 0));
      const float low = quad_sum(below[r]), high = quad_sum(above[r]), l = quad_sum(row_sum[r]);
      const int e = l > 1.0f && l <= 3.0e38f ? ilogbf(l) : 0;
      unscale[r] = ldexpf(1.0f, e);
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o); ++c) o(r, c) = ldexpf(o(r, c), -e);
      if (tid % 4 == 0) {
        shaw_bins[row * p.shaw_rows] += low;
        shaw_bins[row * p.shaw_rows + 2 * p.shaw_limit] += high;
        sh.row_scale[row] = ldexpf(1.0f, -e);  // the row's factor for the staged sums (free after the tiles)
      }
    }
    Tensor sW = make_tensor(make_smem_ptr(sh.k), typename T::SmemW{});
    Tensor tWrW = thr.partition_fragment_A(sW);
    Tensor tWsW = copy_q.partition_S(sW);
    Tensor tWrW_view = copy_q.retile_D(tWrW);
    for (int c0 = 0; c0 < p.shaw_rows; c0 += BN) {
      __syncthreads();  // the sums are complete; every warp is done with the previous chunk
      for (int i = tid; i < BM * BN; i += T::kThreads) {
        const int row = i / BN, col = c0 + i % BN;
        const float sum = col < p.shaw_rows ? shaw_bins[row * p.shaw_rows + col] * sh.row_scale[row] : 0.0f;
        sW(row, i % BN) = Element(sum);
      }
      stage_table_rows<Element>(p.shaw_a_v, p.shaw_a_v_strides, c0, p.shaw_rows, v0, p.Dv, sV);
      __syncthreads();
      tile_gemm(mma, acc_o, tWrW, tOrVt, tWsW, tWrW_view, tOsVt, tOrVt_view, tiled_copy_q, tiled_copy_v);
    }
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) CUTE_UNROLL
    for (int c = 0; c < size<1>(o); ++c) o(r, c) *= unscale[r];
  }

  if (p.splits > 1) {  // partial rows, ended by merge_kernel
    const int lane = tid % 32;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int row = get<0>(tOcO(r, 0));
      float l = quad_sum(row_sum[r]);
      if (!position_in_range(qpos_of[r], 0)) l = quiet_nan();
      if (row >= rows) continue;
      const int64_t partial = ((b * p.H + h) * p.Q + q0 + row0 + row) * p.splits + split;
      float* o_row = p.partial_out + partial * p.v_parts * kVDim + v0;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o); c += 2)
        *reinterpret_cast<float2*>(o_row + get<1>(tOcO(r, c))) = make_float2(o(r, c), o(r, c + 1));
      if (lane % 4 == 0 && part == 0) p.partial_max_sum[partial] = MaxSum{row_max[r], l};
    }
    return;
  }

  // The end of each row: out = acc / l (with a sink in the denominator), lse; rows out of range are NaN.
  const bool has_sink = p.sinks != nullptr;
  const float sink = has_sink ? p.sinks[h * p.sinks_stride] : 0.0f;
  const int lane = tid % 32;
  Element* out = static_cast<Element*>(p.out) + b * p.out_strides[0] + (q0 + row0) * p.out_strides[1] +
                 h * p.out_strides[2] + v0;
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const int row = get<0>(tOcO(r, 0));
    RowEnd end = finish_row(row_max[r], quad_sum(row_sum[r]), has_sink, sink);
    if (!position_in_range(qpos_of[r], 0)) end = {quiet_nan(), quiet_nan()};
    if (row >= rows) continue;
    Element* out_row = out + row * p.out_strides[1];
    CUTE_UNROLL
    for (int c = 0; c < size<1>(o); c += 2) {  // adjacent columns: one 32-bit store
      const int col = get<1>(tOcO(r, c));
      if (v0 + col >= p.Dv) continue;  // a padded column (Dv is even: col + 1 is inside with col)
      const uint32_t lo = Element(o(r, c) * end.out_factor).raw(),
                     hi = Element(o(r, c + 1) * end.out_factor).raw();
      *reinterpret_cast<uint32_t*>(out_row + col) = lo | hi << 16;
    }
    if (p.lse != nullptr && lane % 4 == 0 && part == 0)
      p.lse[b * p.lse_strides[0] + h * p.lse_strides[1] + (q0 + row0 + row) * p.lse_strides[2]] = end.lse;
  }
}

// The end of split-K rows: a block per (row, head, batch row), a thread per dim of Dv (partial rows at a
// stride of row_stride); splits merged in their order (merge_partial_rows: the same bits run to run), then
// out and lse as the one-pass kernel ends them.
template <class Element>
__global__ void merge_kernel(const __grid_constant__ Params p, int64_t row_stride) {
  const int64_t q = blockIdx.x, h = blockIdx.y, b = blockIdx.z, d = threadIdx.x;
  const int64_t part0 = ((b * p.H + h) * p.Q + q) * p.splits;
  const PartialRows rows{p.partial_max_sum + part0, p.partial_out + part0 * row_stride + d, row_stride,
                         p.splits};
  float m = -INFINITY, l = 0, o = 0;
  merge_partial_rows(rows, &m, &l, &o);
  const bool has_sink = p.sinks != nullptr;
  const RowEnd end = finish_row(m, l, has_sink, has_sink ? p.sinks[h * p.sinks_stride] : 0.0f);
  Element* out =
      static_cast<Element*>(p.out) + b * p.out_strides[0] + q * p.out_strides[1] + h * p.out_strides[2];
  out[d] = Element(o * end.out_factor);
  if (p.lse != nullptr && d == 0)
    p.lse[b * p.lse_strides[0] + h * p.lse_strides[1] + q * p.lse_strides[2]] = end.lse;
}

// The lookup of a learned bias per head: lookup[h][d + limit] = table[row(d), h] for d in [-limit, limit].
struct LookupArgs {
  BiasKind kind;
  int64_t limit;
  int32_t rows[kMaxDeviceRowTable];
  const float* table;
  int64_t table_strides[2];
  float* lookup;
};
__global__ void build_lookup_kernel(const __grid_constant__ LookupArgs a) {
  const int64_t h = blockIdx.x, n = 2 * a.limit + 1;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t row = bias_row(a.kind, a.limit, a.rows, i - a.limit);
    a.lookup[h * n + i] = a.table[row * a.table_strides[0] + h * a.table_strides[1]];
  }
}

// Cumulative lengths the front end could not read: a sequence outside the tokens, or decreasing offsets,
// make the whole output (and lse) NaN, written after the attention so that no row keeps a stale value.
__global__ void check_packing_kernel(const int64_t* cq, const int64_t* ck, int64_t sequences, int64_t Q,
                                     int64_t K, int64_t H, int64_t D, uint16_t* out, int64_t out_t,
                                     int64_t out_h, float* lse, int64_t lse_h, int64_t lse_t) {
  __shared__ int bad;
  if (threadIdx.x == 0) bad = 0;
  __syncthreads();
  for (int64_t s = threadIdx.x; s <= sequences; s += blockDim.x) {
    const bool ends = s == 0 ? cq[0] != 0 || ck[0] != 0 : false;
    const bool last = s == sequences ? cq[s] != Q || ck[s] != K : false;
    const bool order = s > 0 && (cq[s] < cq[s - 1] || ck[s] < ck[s - 1]);
    if (ends || last || order) bad = 1;
  }
  __syncthreads();
  if (!bad) return;
  const uint16_t nan16 = 0x7fff;  // a quiet NaN in bf16 and in fp16 alike (all exponent bits, mantissa set)
  for (int64_t i = threadIdx.x + static_cast<int64_t>(blockIdx.x) * blockDim.x; i < Q * H * D;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / (H * D), h = (i / D) % H, d = i % D;
    out[t * out_t + h * out_h + d] = nan16;
    if (lse != nullptr && d == 0) lse[h * lse_h + t * lse_t] = quiet_nan();
  }
}

__global__ void default_positions_kernel(DefaultPositionsLaunch l) {
  const int64_t z = blockIdx.x;  // a batch row, or a sequence
  int64_t q0 = z * l.Q, nq = l.Q, k0 = z * l.K, nk = l.K;
  if (l.cu_seqlens_q != nullptr) {
    q0 = l.cu_seqlens_q[z], nq = l.cu_seqlens_q[z + 1] - q0;
    k0 = l.cu_seqlens_k[z], nk = l.cu_seqlens_k[z + 1] - k0;
    if (q0 < 0 || nq < 0 || q0 + nq > l.Q || k0 < 0 || nk < 0 || k0 + nk > l.K) return;  // NaN out later
  }
  if (l.q_pos != nullptr)
    for (int64_t i = threadIdx.x; i < nq; i += blockDim.x) l.q_pos[q0 + i] = nk - nq + i;
  if (l.k_pos != nullptr)
    for (int64_t j = threadIdx.x; j < nk; j += blockDim.x) l.k_pos[k0 + j] = j;
}

__global__ void copy_rows_kernel(const uint4* in, int64_t s0, int64_t s1, int64_t s2, int64_t T, int64_t H,
                                 int64_t chunks, int64_t total, uint4* out) {
  for (int64_t i = threadIdx.x + static_cast<int64_t>(blockIdx.x) * blockDim.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % chunks, row = i / chunks, h = row % H, t = (row / H) % T, b = row / (H * T);
    out[i] = in[b * s0 + t * s1 + h * s2 + c];
  }
}

unsigned grid_for(int64_t total, int threads) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>((total + threads - 1) / threads, 65535)));
}

// Shared memory: the tiles, and with Shaw the rows' q . a^K products and value sums after them.
template <class Element, int kQKDim, int kVDim, bool kShaw = false>
void launch(const Params& params, int64_t q_blocks, int64_t heads, int64_t problems, int64_t batch) {
  using T = AttentionTiles<Element, kQKDim, kVDim>;
  const int shaw_tables = !kShaw ? 0 : params.shaw_a_v != nullptr ? 2 : 1;
  const int bytes = static_cast<int>(sizeof(SharedTiles<Element, kQKDim, kVDim>)) +
                    shaw_tables * T::kBlockM * params.shaw_rows * static_cast<int>(sizeof(float));
  auto kernel = attention_forward_kernel<Element, kQKDim, kVDim, kShaw>;
  // Shaw's kernels take what its distances need: the attribute is the most any call may ask (the front end
  // checked this call's against the device), so that calls with different distances never race on it.
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       kShaw ? static_cast<int>(max_shared_bytes_per_block()) : bytes);
  check_launch("attention", "cudaFuncSetAttribute");
  const cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream());
  const dim3 grid(static_cast<unsigned>(q_blocks * params.v_parts * params.splits),
                  static_cast<unsigned>(heads), static_cast<unsigned>(problems));
  kernel<<<grid, T::kThreads, bytes, stream>>>(params);
  check_launch("attention", "the attention kernel");
  if (params.splits > 1) {
    const dim3 rows(static_cast<unsigned>(params.Q), static_cast<unsigned>(heads),
                    static_cast<unsigned>(batch));
    merge_kernel<Element>
        <<<rows, static_cast<unsigned>(params.Dv), 0, stream>>>(params, params.v_parts * kVDim);
    check_launch("attention", "the split-K merge kernel");
  }
}

// The compiled tile pairs (attention_tile_dims).
template <class Element>
void launch_for_tiles(const AttentionTileDims& t, const Params& p, int64_t q_blocks, int64_t heads,
                      int64_t problems, int64_t batch) {
  if (p.shaw_rows > 0 && t.qk == 64)  // Shaw: heads up to 128 (kMaxShawHeadDim)
    launch<Element, 64, 64, true>(p, q_blocks, heads, problems, batch);
  else if (p.shaw_rows > 0)
    launch<Element, 128, 128, true>(p, q_blocks, heads, problems, batch);
  else if (t.qk == 64)
    launch<Element, 64, 64>(p, q_blocks, heads, problems, batch);
  else if (t.qk == 128)
    launch<Element, 128, 128>(p, q_blocks, heads, problems, batch);
  else if (t.qk == 192)
    launch<Element, 192, 128>(p, q_blocks, heads, problems, batch);
  else
    launch<Element, 256, 128>(p, q_blocks, heads, problems, batch);
}

// Blocks of key tiles per row block: 1 when the row blocks fill the GPU; else enough splits for two blocks
// per multiprocessor (decoding: one query row against a long cache), each split at least 2 tiles, at most 64.
int64_t key_splits(int64_t row_blocks, int64_t key_tiles) {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return 1;
  }
  if (row_blocks >= sms || key_tiles < 4) return 1;
  return std::min<int64_t>({(2 * sms + row_blocks - 1) / row_blocks, key_tiles / 2, 64});
}

}  // namespace

int64_t attention_forward_shared_bytes(int64_t D, int64_t Dv, int64_t shaw_rows, bool shaw_values) {
  const AttentionTileDims t = attention_tile_dims(D, Dv);
  const int64_t tiles = t.qk == 64    ? sizeof(SharedTiles<cutlass::bfloat16_t, 64, 64>)
                        : t.qk == 128 ? sizeof(SharedTiles<cutlass::bfloat16_t, 128, 128>)
                        : t.qk == 192 ? sizeof(SharedTiles<cutlass::bfloat16_t, 192, 128>)
                                      : sizeof(SharedTiles<cutlass::bfloat16_t, 256, 128>);
  return tiles + (shaw_values ? 2 : 1) * 64 * shaw_rows * static_cast<int64_t>(sizeof(float));
}

int64_t max_shared_bytes_per_block() {
  int device = 0, bytes = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return bytes;
}

std::unique_ptr<DeviceScratch> set_score_bias(const AttentionLaunch& l, ScoreTerms* terms, float* slopes,
                                              const float** lookup_out) {
  std::fill(slopes, slopes + kMaxAttentionHeads, 0.0f);
  if (!l.has_bias) return nullptr;
  if (l.bias.kind == BiasKind::alibi) {
    terms->bias = ScoreBias::alibi;
    terms->symmetric = l.bias.symmetric;
    for (int64_t h = 0; h < l.H; ++h) slopes[h] = static_cast<float>(l.bias.slopes[h]);
    return nullptr;
  }
  terms->bias = ScoreBias::lookup;
  terms->limit = static_cast<int32_t>(l.bias.limit);
  const int64_t n = 2 * l.bias.limit + 1;
  auto lookup =
      std::make_unique<DeviceScratch>("attention", "the bias lookup", static_cast<size_t>(l.H * n) * 4);
  auto args = std::make_unique<LookupArgs>();
  args->kind = l.bias.kind, args->limit = l.bias.limit;
  std::copy(l.bias.rows.begin(), l.bias.rows.end(), args->rows);
  args->table = l.bias.table;
  args->table_strides[0] = l.bias.table_strides[0], args->table_strides[1] = l.bias.table_strides[1];
  args->lookup = lookup->as<float>();
  build_lookup_kernel<<<static_cast<unsigned>(l.H), 256, 0, static_cast<cudaStream_t>(cuda_stream())>>>(
      *args);
  check_launch("attention", "the bias lookup kernel");
  *lookup_out = lookup->as<float>();
  return lookup;
}

void attention_forward(const AttentionLaunch& l) {
  const int64_t problems = l.cu_seqlens_q != nullptr ? l.sequences : l.B;
  if (l.Q == 0 || l.H == 0 || problems == 0) return;
  auto params = std::make_unique<Params>();
  Params& p = *params;
  p.Q = l.Q, p.K = l.K, p.H = l.H, p.Hkv = l.Hkv;
  p.D = static_cast<int>(l.D), p.Dv = static_cast<int>(l.Dv);
  const AttentionTileDims tiles = attention_tile_dims(l.D, l.Dv);
  p.v_parts = tiles.v_parts;
  p.q = l.q, p.k = l.k, p.v = l.v, p.out = l.out, p.lse = l.lse;
  for (int i = 0; i < 3; ++i) {
    p.q_strides[i] = l.q_strides[i], p.k_strides[i] = l.k_strides[i], p.v_strides[i] = l.v_strides[i];
    p.out_strides[i] = l.out_strides[i], p.lse_strides[i] = l.lse_strides[i];
  }
  p.q_pos = l.q_pos, p.k_pos = l.k_pos, p.q_pos_stride = l.q_pos_stride, p.k_pos_stride = l.k_pos_stride;
  p.cu_seqlens_q = l.cu_seqlens_q, p.cu_seqlens_k = l.cu_seqlens_k;
  p.scale = l.scale;
  p.mask = l.mask;
  p.terms.softcap = l.softcap;
  p.sinks = l.sinks, p.sinks_stride = l.sinks_stride;
  p.temperature = l.temperature.kind;
  p.temperature_scale = l.temperature.scale, p.temperature_floor = l.temperature.floor_scale;

  const cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream());
  const std::unique_ptr<DeviceScratch> lookup = set_score_bias(l, &p.terms, p.slopes, &p.lookup);

  const int64_t q_blocks = (l.Q + 63) / 64;  // packed: the longest sequence is at most Q tokens
  p.shaw_limit = static_cast<int32_t>(l.shaw_max_distance), p.shaw_rows = 0;
  if (l.shaw_a_k != nullptr) {
    p.shaw_rows = static_cast<int>(2 * l.shaw_max_distance + 1);
    p.shaw_a_k = l.shaw_a_k, p.shaw_a_v = l.shaw_a_v;
    for (int i = 0; i < 2; ++i)
      p.shaw_a_k_strides[i] = l.shaw_a_k_strides[i], p.shaw_a_v_strides[i] = l.shaw_a_v_strides[i];
  }
  // Split-K's partial rows carry no value sums of Shaw's: its rows run in one pass.
  p.splits = p.shaw_rows > 0 ? 1 : key_splits(q_blocks * tiles.v_parts * l.H * problems, (l.K + 63) / 64);
  std::unique_ptr<DeviceScratch> partial;
  if (p.splits > 1) {
    const size_t rows = static_cast<size_t>(l.B * l.H * l.Q * p.splits);
    partial = std::make_unique<DeviceScratch>("attention", "the split-K partial rows",
                                              rows * (static_cast<size_t>(tiles.v_parts * tiles.v) * 4 + 8));
    p.partial_max_sum = partial->as<MaxSum>();
    p.partial_out = reinterpret_cast<float*>(p.partial_max_sum + rows);
  }
  if (l.dtype == DType::bf16)
    launch_for_tiles<cutlass::bfloat16_t>(tiles, p, q_blocks, l.H, problems, l.B);
  else
    launch_for_tiles<cutlass::half_t>(tiles, p, q_blocks, l.H, problems, l.B);
  if (l.cu_seqlens_q != nullptr) {
    check_packing_kernel<<<grid_for(l.Q * l.H * l.Dv, 256), 256, 0, stream>>>(
        l.cu_seqlens_q, l.cu_seqlens_k, l.sequences, l.Q, l.K, l.H, l.Dv, static_cast<uint16_t*>(l.out),
        l.out_strides[1], l.out_strides[2], l.lse, l.lse_strides[1], l.lse_strides[2]);
    check_launch("attention", "the packing check kernel");
  }
}

void attention_default_positions(const DefaultPositionsLaunch& l) {
  const int64_t problems = l.cu_seqlens_q != nullptr ? l.sequences : l.B;
  if (problems == 0) return;
  default_positions_kernel<<<static_cast<unsigned>(problems), 256, 0,
                             static_cast<cudaStream_t>(cuda_stream())>>>(l);
  check_launch("attention", "the default positions kernel");
}

void copy_head_rows(const void* in, const int64_t strides[3], int64_t B, int64_t T, int64_t H, int64_t dim,
                    void* out) {
  const int64_t chunks = dim / 8, total = B * T * H * chunks;  // 16-byte chunks of 8 elements
  if (total == 0) return;
  copy_rows_kernel<<<grid_for(total, 256), 256, 0, static_cast<cudaStream_t>(cuda_stream())>>>(
      static_cast<const uint4*>(in), strides[0] / 8, strides[1] / 8, strides[2] / 8, T, H, chunks, total,
      static_cast<uint4*>(out));
  check_launch("attention", "the row copy kernel");
}

}  // namespace posenc::cuda
