// src/cuda/attention_forward.cuh: the fused attention forward's kernel template and its launch, shared by
// the translation units that instantiate it (src/cuda/attention.cu: every term but Transformer-XL's;
// src/cuda/attention_xl.cu: Transformer-XL's, compiled in parallel with it).
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
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>
#include <type_traits>

#include "src/cuda/attention.h"
#include "src/cuda/attention_tiles.cuh"
#include "src/cuda/device.h"
#include "src/query_temperature.h"

namespace posenc::cuda::forward {
using namespace cute;

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr int kMaxLookup = static_cast<int>(kMaxDeviceRowTable);

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
  // Transformer-XL (kXL kernels, default positions): rproj (H, n, D) rows of the storage type and
  // v_h . rproj_h (H, n) f32 over the deltas [xl_lo, xl_lo + n), n = xl_n; u (H, D) f32 at its strides.
  const void* xl_rproj;
  const float* xl_vr;
  int64_t xl_lo, xl_n;
  const float* xl_u;
  int64_t xl_u_strides[2];
  // The sm_90a kernel's (src/cuda/attention_sm90_xl.cu): u_h . k_j (B, H, K) f32, B = 1 for packed sequences.
  const float* xl_uk;
  QueryRotation q_rotation;  // the sm_90a kernel's: RoPE's rotation of the staged q rows (cos null: none)
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

// Transformer-XL's shared memory (kXL kernels), after the tiles: kBlockN rproj rows (a (kBlockN, kQKDim)
// tile in the K tile's swizzled layout); the band's products with the block's rows plus v . rproj, stored by
// band column, (2 kBlockN, kXLBandRows) floats (its first half also holds the rows of its second half's
// deltas while those are formed); v . rproj of the staged rows; u . k_j of the tile's keys; u. The band's row
// stride is 4 mod 32 banks: the accumulators' stores (a quad's lanes 2 band columns apart, 8 rows) and the
// skewed reads (band column r - c + 63 at row r) each meet 32 banks (kXLBandRows). With the K and V tiles:
// 109 KiB at head dims of 128, two blocks per multiprocessor.
template <class Element, int kQKDim>
struct alignas(128) XLTiles {
  Element r[64 * kQKDim];
  float band[2 * 64 * kXLBandRows];
  float vr[2 * 64];
  float uk[64];
  float u[kQKDim];
};
static_assert(sizeof(SharedTiles<cutlass::bfloat16_t, 128, 128>) +
                  sizeof(XLTiles<cutlass::bfloat16_t, 128>) <=
              113 * 1024);

template <class Element, int kQKDim, bool kXL>
constexpr int xl_shared_bytes() {
  if constexpr (kXL) return static_cast<int>(sizeof(XLTiles<Element, kQKDim>));
  return 0;
}

// Transformer-XL: rproj rows first .. first + 63 of the table (zero outside it: those deltas belong to masked
// pairs, or to rows and keys past the sequence) into `to`, a (64, kQKDim) tile in SmemLayout, by cp.async
// (the caller's group), and their v . rproj into vr.
template <class Element, int kQKDim, class SmemLayout>
__device__ __forceinline__ void stage_xl_rows(const Params& p, int64_t h, int64_t first, Element* to,
                                              float* vr) {
  constexpr int kChunks = kQKDim / 8;  // 16-byte chunks per row
  const Element* rows = static_cast<const Element*>(p.xl_rproj) + h * p.xl_n * p.D;
#pragma unroll 1  // (unrolled, its shared-memory offsets would be kept in registers across the key tiles)
  for (int i = threadIdx.x; i < 64 * kChunks; i += blockDim.x) {
    const int idx = i / kChunks, col = i % kChunks * 8;
    Element* dst = to + SmemLayout{}(idx, col);  // 8 contiguous elements (the swizzle moves 16-byte chunks)
    const int64_t m = first + idx;
    if (m >= 0 && m < p.xl_n && col < p.D)
      SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>::copy(*reinterpret_cast<const uint128_t*>(rows + m * p.D + col),
                                                 *reinterpret_cast<uint128_t*>(dst));
    else
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  }
  for (int i = threadIdx.x; i < 64; i += blockDim.x) {
    const int64_t m = first + i;
    vr[i] = m >= 0 && m < p.xl_n ? p.xl_vr[h * p.xl_n + m] : 0.0f;
  }
}

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

// Transformer-XL (Dai et al. 2019, arXiv 1901.02860) in the fused forward, kXL kernels, for default
// positions:
//   logit_ij = cap(scale (q_i . k_j + u_h . k_j + q_i . rproj_h(delta_ij) + v_h . rproj_h(delta_ij))) + ...
// the CPU's (q_i + u_h) . k_j + (q_i + v_h) . rproj_h(delta_ij) with u and v kept in fp32 beside the
// tensor cores' products rather than added to q and rounded to the storage type: u_h . k_j per key (fp32,
// from the tile's k) and v_h . rproj_h per delta (fp32, with the table) are exact up to fp32 sums, so the
// only rounding beyond the plain forward's is rproj's to the storage type for the tensor cores. A tile's
// deltas form a band of 2 kBlockN - 1 values (src/cuda/attention-inl.cuh xl_band_first_delta), q . rproj of
// which is kept with v . rproj in shared memory by band column and read skewed, column r - c + kBlockN - 1
// for the pair (r, c). The next key tile's band is this one's moved by kBlockN: its last kBlockN columns are
// this tile's first, copied over, so each tile forms only its first kBlockN columns, one (kBlockM, kQKDim) x
// (kQKDim, kBlockN) product on the tensor cores like Q K^T, from kBlockN rproj rows staged with K (the first
// tile of a row block, or one after skipped tiles, forms its last columns too).
// The end of a block's rows (both forwards: the tiled kernel below and src/cuda/attention_sm90.cu): out = acc
// / l (with a sink in the denominator) into columns [v0, v0 + the tile) of the rows from first_row, lse where
// wanted (write_lse); rows whose position is out of range are NaN. o and tOcO: the output accumulators and
// their (row, col) as (rows, cols) views, kRows rows per thread.
template <class Element, int kRows, class Acc, class Coords>
__device__ __forceinline__ void finish_rows(const Params& p, const Acc& o, const Coords& tOcO,
                                            const float* row_max, const float* row_sum,
                                            const int64_t* qpos_of, int rows, int64_t b, int64_t h,
                                            int64_t first_row, int v0, bool write_lse) {
  const bool has_sink = p.sinks != nullptr;
  const float sink = has_sink ? p.sinks[h * p.sinks_stride] : 0.0f;
  const int lane = threadIdx.x % 32;
  Element* out = static_cast<Element*>(p.out) + b * p.out_strides[0] + first_row * p.out_strides[1] +
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
    if (write_lse && p.lse != nullptr && lane % 4 == 0)
      p.lse[b * p.lse_strides[0] + h * p.lse_strides[1] + (first_row + row) * p.lse_strides[2]] = end.lse;
  }
}

template <class Element, int kQKDim, int kVDim, bool kShaw, bool kXL = false>
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
  XLTiles<Element, kQKDim>* xl = nullptr;
  [[maybe_unused]] int64_t xl_last_tile = -2;  // the last key tile whose band was formed
  if constexpr (kXL) {
    static_assert(!kShaw && T::kThreads == 2 * BN && BM == 64 && BN == 64, "XL: two threads per key");
    static_assert(BN * kQKDim * sizeof(Element) <= BN * kXLBandRows * sizeof(float), "rows in half the band");
    xl = reinterpret_cast<XLTiles<Element, kQKDim>*>(shared_bytes +
                                                     sizeof(SharedTiles<Element, kQKDim, kVDim>));
    for (int i = tid; i < kQKDim; i += T::kThreads)
      xl->u[i] = i < p.D ? p.xl_u[h * p.xl_u_strides[0] + i * p.xl_u_strides[1]] : 0.0f;
  }

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
    // XL: the band's last 64 columns are the previous tile's first 64 (its keys sit 64 positions before
    // these), copied over; after skipped tiles (or on the first) they are formed here too, from their rows
    // staged in the band's first half. The rows join K's cp.async group.
    [[maybe_unused]] bool xl_next = false;
    if constexpr (kXL) {
      const int64_t first = xl_band_first_delta(sh.q_pos[0], k_pos[col0], BN) - p.xl_lo;  // its table row
      xl_next = t == xl_last_tile + 1;
      xl_last_tile = t;
      if (xl_next)
        for (int i = tid; i < BM * BN; i += T::kThreads)
          xl->band[(BN + i / BM) * kXLBandRows + i % BM] = xl->band[i / BM * kXLBandRows + i % BM];
      else
        stage_xl_rows<Element, kQKDim, typename T::SmemK>(p, h, first + BN,
                                                          reinterpret_cast<Element*>(xl->band), xl->vr + BN);
      stage_xl_rows<Element, kQKDim, typename T::SmemK>(p, h, first, xl->r, xl->vr);
    }
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
    if constexpr (kXL) {
#pragma unroll 1
      for (int pass = xl_next ? 1 : 0; pass < 2; ++pass) {  // 0: the band's last 64 columns, 1: its first
        if (pass == 1 && !xl_next) __syncthreads();         // every warp has read the last columns' rows
        // q . rproj + v . rproj of band columns [c0, c0 + 64) from their staged rows, into xl->band.
        const int c0 = pass == 0 ? BN : 0;
        Tensor sR = make_tensor(make_smem_ptr(pass == 0 ? reinterpret_cast<Element*>(xl->band) : xl->r),
                                typename T::SmemK{});
        Tensor tSsR = copy_k.partition_S(sR);
        Tensor acc = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});
        clear(acc);
        tile_gemm(mma, acc, tSrQ, tSrK, tSsQ, tSrQ_view, tSsR, tSrK_view, tiled_copy_q, tiled_copy_k);
        Tensor a = make_tensor(acc.data(), accumulator_rows_cols(acc.layout()));
        // From the thread's first element: the others' offsets are compile-time constants.
        const int first_row = get<0>(tScS(0, 0)), first_col = get<1>(tScS(0, 0));
        float* band = xl->band + (c0 + first_col) * kXLBandRows + first_row;
        const float* vr = xl->vr + c0 + first_col;
        CUTE_UNROLL
        for (int r = 0; r < kRows; ++r) CUTE_UNROLL
        for (int c = 0; c < size<1>(a); ++c) {
          const int row = get<0>(tScS(r, c)) - first_row, col = get<1>(tScS(r, c)) - first_col;
          band[col * kXLBandRows + row] = a(r, c) + vr[col];
        }
      }
      // u . k_j of the tile's keys in fp32: two threads per key, each half of the columns, then a shuffle.
      const int key = tid / 2, half = tid % 2;
      float uk = 0;
      for (int d = half * (kQKDim / 2); d < (half + 1) * (kQKDim / 2); ++d)
        uk += xl->u[d] * static_cast<float>(sK(key, d));
      uk += __shfl_xor_sync(0xffffffffu, uk, 1);
      if (half == 0) xl->uk[key] = uk;
      __syncthreads();  // the band and u . k are complete
    }

    Tensor acc_s = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});
    clear(acc_s);
    tile_gemm(mma, acc_s, tSrQ, tSrK, tSsQ, tSrQ_view, tSsK, tSrK_view, tiled_copy_q, tiled_copy_k);

    // Logits (times log2 e) and the online softmax, row by row.
    Tensor s = make_tensor(acc_s.data(), accumulator_rows_cols(acc_s.layout()));
    // XL: the thread's first element's entries of u . k and of the band (its pairs' band columns and key
    // columns are offsets from them).
    const float* xl_uk = nullptr;
    const float* xl_band = nullptr;
    if constexpr (kXL) {
      const int row = get<0>(tScS(0, 0)), col = get<1>(tScS(0, 0));
      xl_uk = xl->uk + col;
      xl_band = xl->band + xl_band_column(row, col, BN) * kXLBandRows + row;
    }
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float mx = row_max[r];
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) {
        float dot = s(r, c), x;
        if constexpr (kShaw)
          dot += shaw_qa[get<0>(tScS(r, c)) * p.shaw_rows +
                         shaw_row(sh.k_pos[get<1>(tScS(r, c))] - qpos_of[r], p.shaw_limit)];
        if constexpr (kXL) {  // offsets from the thread's first element: compile-time constants
          const int row = get<0>(tScS(r, c)) - get<0>(tScS(0, 0)),
                    col = get<1>(tScS(r, c)) - get<1>(tScS(0, 0));
          dot +=
              xl_uk[col] + xl_band[xl_band_column(row, col, BN) * kXLBandRows + row - (BN - 1) * kXLBandRows];
        }
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

  finish_rows<Element, kRows>(p, o, tOcO, row_max, row_sum, qpos_of, rows, b, h, q0 + row0, v0, part == 0);
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

// Shared memory: the tiles, and with Shaw the rows' q . a^K products and value sums after them, with
// Transformer-XL its band (XLTiles).
template <class Element, int kQKDim, int kVDim, bool kShaw = false, bool kXL = false>
void launch(const Params& params, int64_t q_blocks, int64_t heads, int64_t problems, int64_t batch) {
  using T = AttentionTiles<Element, kQKDim, kVDim>;
  const int shaw_tables = !kShaw ? 0 : params.shaw_a_v != nullptr ? 2 : 1;
  const int bytes = static_cast<int>(sizeof(SharedTiles<Element, kQKDim, kVDim>)) +
                    shaw_tables * T::kBlockM * params.shaw_rows * static_cast<int>(sizeof(float)) +
                    xl_shared_bytes<Element, kQKDim, kXL>();
  auto kernel = attention_forward_kernel<Element, kQKDim, kVDim, kShaw, kXL>;
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
  if constexpr (!kXL) {  // Transformer-XL's rows run in one pass (splits = 1)
    if (params.splits > 1) {
      const dim3 rows(static_cast<unsigned>(params.Q), static_cast<unsigned>(heads),
                      static_cast<unsigned>(batch));
      merge_kernel<Element>
          <<<rows, static_cast<unsigned>(params.Dv), 0, stream>>>(params, params.v_parts * kVDim);
      check_launch("attention", "the split-K merge kernel");
    }
  }
}

// The Hopper kernel (src/cuda/attention_sm90.cu): whether it takes the launch on this device (head dims up
// to 128, and in bf16 up to 256; no Shaw or Transformer-XL terms, strides the TMA can describe; with
// fill_required, enough row blocks of 128 to fill the GPU, else the tiled kernel's split-K serves it
// better), and its launch with p's fields set (one pass: splits 1).
bool attention_sm90_fits(const AttentionLaunch& l, bool fill_required);
void launch_sm90(const AttentionLaunch& l, const Params& p);
// What the plain and the Transformer-XL kernels both need of a launch, besides their shared memory: the
// shapes, strides and grid the TMA and the kernel can take, a Hopper device running the sm_90a code, and
// with fill_required enough row blocks.
bool attention_sm90_launch_fits(const AttentionLaunch& l, bool fill_required);
// The launch's head tile (AttentionSm90Tiles): 64, 128, 192 or 256 columns, or 0 where none takes it.
int64_t attention_sm90_tile(const AttentionLaunch& l);
// Transformer-XL's terms on the Hopper kernel (src/cuda/attention_sm90_xl.cu): whether it takes the launch
// (head dims up to 128, its tables of n > 0 deltas), and its launch with p's XL fields set (xl_uk: u . k_j
// as attention_sm90_xl_uk gives it, over the (B, H, K) rows of l, B = 1 for packed sequences).
bool attention_sm90_xl_fits(const AttentionLaunch& l, int64_t n, bool fill_required);
void attention_sm90_xl_uk(const AttentionLaunch& l, float* uk);
void launch_sm90_xl(const AttentionLaunch& l, const Params& p);

// Transformer-XL's forward (src/cuda/attention_xl.cu): its tables over the deltas the tiles may read, then
// its kernels for these tiles ((64, 64) or (128, 128)) with p's other fields set, on one pass (splits 1).
void launch_transformer_xl(const AttentionLaunch& l, Params& p, const AttentionTileDims& tiles,
                           int64_t q_blocks, int64_t problems);

}  // namespace posenc::cuda::forward
