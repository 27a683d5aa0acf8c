// src/cuda/attention_sm90_kernel.cuh: the fused attention forward's kernel on Hopper (sm_90a), included by
// the units that instantiate it: src/cuda/attention_sm90.cu (every scalar term) and
// src/cuda/attention_sm90_xl.cu (Transformer-XL's terms too, kXL), which compile in parallel.
// FlashAttention-3's structure (Shah et al. 2024, arXiv 2407.08608), warp-specialized:
//   a block of 3 warpgroups owns 128 query rows of one head; a producer warp (the first warpgroup, its
//   registers given up with setmaxnreg) decides which key tiles the mask leaves visible
//   (src/attention_mask.h any_visible on the tile's position range, as the tiled kernel) and loads each
//   visible tile's K and V (128 keys; 64 at heads of 256 and with Transformer-XL's terms) with the
//   tensor-memory accelerator (TMA) into a ring of kStages buffers, with the tile's key positions; each
//   buffer's K and V arrivals on mbarriers of their own (so that S = Q K^T need not wait for V), and their
//   releases by the consumers on two more ("empty": K and the positions after the tile's softmax, V after
//   its P V, a tile later, so that each next load starts as early as it may);
//   after the last tile, a buffer with tile -1 tells the consumers to stop;
//   two consumer warpgroups, 64 rows each: S = Q K^T by wgmma from shared memory, the logit of
//   src/cuda/attention-inl.cuh per accumulator element from its (row, col) (the same functions and order as
//   the tiled kernel), the online softmax in base 2, P rounded to the storage type in registers and
//   O += P V by wgmma with P from registers; out and lse from registers at the end.
// Transformer-XL (kXL): each step also brings 64 rproj rows by the TMA into a ring of 3 slots of its own,
// with v . rproj of their deltas, and u . k of the tile's keys; each consumer warpgroup forms a chunk of its
// band of deltas per tile with S (src/cuda/attention_sm90_xl.h says which), one more (64, D) x (D, 64)
// product, and adds u . k_j + (q . rproj + v . rproj)(delta) to each pair's dot product as the tiled kernel
// does. Q, K and V rows and head columns past the tensors are zero-filled by the TMA (a partial tile's keys
// are masked, a zero column adds nothing), so nothing past them is read; a packed sequence's partial last key
// tile holds the next sequence's keys, masked, and its V rows are zeroed before P V.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_conversion.h>
#include <cutlass/numeric_types.h>
#include <type_traits>

#include "src/cuda/attention.h"
#include "src/cuda/attention_forward.cuh"
#include "src/cuda/attention_sm90-inl.cuh"
#include "src/cuda/attention_sm90_tiles.cuh"
#include "src/cuda/attention_sm90_xl.h"
#include "src/cuda/device.h"
#include "src/cuda/rope-inl.cuh"

namespace posenc::cuda {
namespace forward {
namespace {
using namespace cute;
using cutlass::arch::ClusterBarrier;
using cutlass::arch::ClusterTransactionBarrier;

template <class Element, int kHeadDim, int kHeadDimV, bool kXL = false>
struct Sm90 {
  using T =
      AttentionSm90Tiles<Element, kHeadDim, kHeadDimV, kXL ? kSm90XLKeys : (kHeadDim == 256 ? 64 : 128)>;
  using ElementType = Element;
  static constexpr int kQKDim = kHeadDim, kVDim = kHeadDimV;
  static constexpr bool kTransformerXL = kXL;
  static_assert(!kXL || (kHeadDim <= 128 && kHeadDimV == kHeadDim), "XL: the tiled kernel's head dims");
  static auto gmem(const void* data, Sm90GmemShape shape, Sm90GmemStride stride) {
    return make_tensor(make_gmem_ptr(static_cast<const Element*>(data)), shape, stride);
  }
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem(nullptr, Sm90GmemShape{}, Sm90GmemStride{}),
                                      typename T::SmemQ{}, Shape<Int<T::kBlockM>, Int<kHeadDim>>{}, _1{}));
  // K's, and the rproj rows' (XL: a (64, kHeadDim) box of the (n, D, H, 1) table, K's layout).
  using TmaK =
      decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem(nullptr, Sm90GmemShape{}, Sm90GmemStride{}),
                             take<0, 2>(typename T::SmemK{}), Shape<Int<T::kBlockN>, Int<kHeadDim>>{}, _1{}));
  using TmaV = decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem(nullptr, Sm90GmemShape{}, Sm90GmemStride{}),
                                      take<0, 2>(typename T::SmemV{}),
                                      Shape<Int<T::kBlockN>, Int<kHeadDimV>>{}, _1{}));
  // Transformer-XL's buffers: each step's rproj rows and v . rproj of their deltas in a ring of their own,
  // of kRowSlots (steps mod kRowSlots), released by both warpgroups (warpgroup 1 reads a step's rows at the
  // next step: empty_r), so that a slot's release comes two steps before the producer needs it again and
  // never holds back K; the tile's u . k_j (with its positions); each consumer warpgroup's band, two halves
  // of 64 columns by band column (kXLBandRows).
  static constexpr int kRowSlots = 3;
  using SmemR =
      decltype(tile_to_shape(typename T::Atom{}, Shape<Int<T::kBlockN>, Int<kHeadDim>, Int<kRowSlots>>{}));
  struct XLShared {
    alignas(1024) Element r[kRowSlots * T::kBlockN * kHeadDim];
    float band[T::kConsumers][2 * kSm90XLKeys * kXLBandRows];
    float uk[T::kStages][T::kBlockN];
    float vr[kRowSlots][kSm90XLKeys];
    uint64_t empty_r[kRowSlots];
  };
  struct NoXL {};
  struct Shared {
    alignas(1024) Element q[T::kBlockM * kHeadDim];  // the 128-byte swizzle repeats every 1024 bytes
    alignas(1024) Element k[T::kStages * T::kBlockN * kHeadDim];
    alignas(1024) Element v[T::kStages * T::kBlockN * kHeadDimV];
    int64_t k_pos[T::kStages][T::kBlockN];
    int tile[T::kStages];   // the key tile in each buffer, or a step without keys (Sm90XLStep)
    int whole[T::kStages];  // a TileKind: whether the mask leaves the tile whole, and its bias
    float lookup[kMaxLookup];
    ScoreTerms terms;       // the head's (its ALiBi slope)
    int64_t rows_range[3];  // the producer's: the rows' least and greatest positions, whether any is inexact
    uint64_t q_full;
    uint64_t full_k[T::kStages];   // K has landed (and the tile's positions are written)
    uint64_t full_v[T::kStages];   // V has landed
    uint64_t empty_k[T::kStages];  // the consumers are done with K and the tile's positions
    uint64_t empty_v[T::kStages];  // and with V
    std::conditional_t<kXL, XLShared, NoXL> xl;
  };
  // The dynamic shared memory: the struct and room to align it to 1024 bytes.
  static constexpr int kSharedBytes = static_cast<int>(sizeof(Shared)) + 1024;
  static_assert(kSharedBytes <= 227 * 1024, "an H100's or H200's shared memory per block");
};

// A block's problem: a batch row (b), or a packed sequence (b = 0) at offsets q0 and k0 of the tokens; its
// nq rows and nk keys. Extents below 2^31 (attention_sm90_fits).
struct Problem {
  int b, q0, nq, k0, nk;
};

// The producer warp's part: the rows' position range, then every key tile the mask leaves visible into the
// ring of buffers (XL: each run of consecutive tiles after its two steps without keys), then the end marker.
template <class K>
__device__ __forceinline__ void produce(const Params& p, typename K::Shared& sh,
                                        const typename K::TmaQ& tma_q, const typename K::TmaK& tma_k,
                                        const typename K::TmaV& tma_v, const typename K::TmaK& tma_r,
                                        const Problem& pr, int h, int row_block, int rows) {
  using T = typename K::T;
  constexpr bool kXL = K::kTransformerXL;
  constexpr int BM = T::kBlockM, BN = T::kBlockN, kHeadDim = K::kQKDim, kHeadDimV = K::kVDim;
  const int lane = threadIdx.x % 32;
  const int hk = h / static_cast<int>(p.H / p.Hkv);
  const int64_t row0 = static_cast<int64_t>(row_block) * BM;
  const int b = pr.b, batch = p.cu_seqlens_q != nullptr ? 1 : static_cast<int>(gridDim.z);
  Tensor sQ = make_tensor(make_smem_ptr(sh.q), typename T::SmemQ{});
  Tensor sK = make_tensor(make_smem_ptr(sh.k), typename T::SmemK{});
  Tensor sV = make_tensor(make_smem_ptr(sh.v), typename T::SmemV{});
  Tensor mQ = tma_q.get_tma_tensor(make_shape(static_cast<int>(p.Q), p.D, static_cast<int>(p.H), batch));
  Tensor mK = tma_k.get_tma_tensor(make_shape(static_cast<int>(p.K), p.D, static_cast<int>(p.Hkv), batch));
  Tensor mV = tma_v.get_tma_tensor(make_shape(static_cast<int>(p.K), p.Dv, static_cast<int>(p.Hkv), batch));
  // The problem's rows and keys (a packed sequence's from its offsets), in tiles; (BN, D, tiles) for K and V.
  Tensor gQ = local_tile(domain_offset(make_coord(pr.q0, 0), mQ(_, _, h, b)), Shape<Int<BM>, Int<kHeadDim>>{},
                         make_coord(row_block, 0));
  Tensor gK = local_tile(domain_offset(make_coord(pr.k0, 0), mK(_, _, hk, b)),
                         Shape<Int<BN>, Int<kHeadDim>>{}, make_coord(_, 0));
  Tensor gV = local_tile(domain_offset(make_coord(pr.k0, 0), mV(_, _, hk, b)),
                         Shape<Int<BN>, Int<kHeadDimV>>{}, make_coord(_, 0));
  auto [tQg, tQs] =
      tma_partition(tma_q, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
  // (global tiles, shared buffers) of K and V: tuples, not structured bindings (C++17 lambdas cannot
  // capture those).
  auto tK = tma_partition(tma_k, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
  auto tV = tma_partition(tma_v, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));
  if (lane == 0) {
    prefetch_tma_descriptor(tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(tma_v.get_tma_descriptor());
    if constexpr (kXL) prefetch_tma_descriptor(tma_r.get_tma_descriptor());
    ClusterTransactionBarrier::arrive_and_expect_tx(&sh.q_full, T::kQBytes);
    copy(tma_q.with(sh.q_full), tQg, tQs);
  }

  // The rows' position range (rows past Q excluded) and whether any is out of the exact range.
  const int64_t* q_pos = p.q_pos + b * p.q_pos_stride + pr.q0 + row0;
  int64_t qmin = INT64_MAX, qmax = INT64_MIN;
  bool rows_bad = false;
  for (int i = lane; i < rows; i += 32) {
    const int64_t qp = q_pos[i];
    qmin = min(qmin, qp), qmax = max(qmax, qp);
    rows_bad |= !position_in_range(qp, 0);
  }
  CUTE_UNROLL
  for (int o = 16; o > 0; o /= 2) {
    qmin = min(qmin, static_cast<int64_t>(__shfl_xor_sync(0xffffffffu, static_cast<long long>(qmin), o)));
    qmax = max(qmax, static_cast<int64_t>(__shfl_xor_sync(0xffffffffu, static_cast<long long>(qmax), o)));
  }
  rows_bad = __any_sync(0xffffffffu, rows_bad) != 0;
  // Kept in shared memory and read back per tile (volatile: not held in registers across the loop): the
  // producer's registers are few (setmaxnreg), and these are read once per tile.
  volatile int64_t* rows_range = sh.rows_range;
  if (lane == 0) rows_range[0] = qmin, rows_range[1] = qmax, rows_range[2] = rows_bad;
  __syncwarp();

  const int64_t* k_pos = p.k_pos + b * p.k_pos_stride + pr.k0;
  int stage = 0;
  uint32_t phase = 0;
  [[maybe_unused]] int r_slot = 0;  // XL: the rows' ring (K::kRowSlots)
  [[maybe_unused]] uint32_t r_phase = 0;
  // One step into the next buffer: a key tile (step >= 0: its first key col0, its cols keys) or, XL, a step
  // without keys; XL: the 64 rproj rows from table row `chunk` (32-bit: attention_sm90_xl_fits).
  const auto load = [&](int step, int whole, int col0, int cols, int chunk) {
    const bool keys = step >= 0;
    ClusterBarrier::wait(&sh.empty_k[stage], phase ^ 1);  // the consumers are done with K and positions
    if constexpr (kXL) {
      ClusterBarrier::wait(&sh.xl.empty_r[r_slot], r_phase ^ 1);  // both warpgroups with the slot's rows
      // A step without keys: the consumers arrive on empty_v as soon as they see full_k, so its wait for the
      // buffer's previous phase comes first (after full_k, that phase's successor could complete before the
      // wait, whose parity would then name a phase that never completes).
      if (!keys) ClusterBarrier::wait(&sh.empty_v[stage], phase ^ 1);
      const float* uk = p.xl_uk + (static_cast<int64_t>(b) * p.H + h) * p.K + pr.k0 + col0;
      if (keys)
        for (int j = lane; j < BN; j += 32) sh.xl.uk[stage][j] = j < cols ? uk[j] : 0.0f;
      for (int j = lane; j < kSm90XLKeys; j += 32) {
        const int m = chunk + j;  // zero outside the table: those deltas belong to masked pairs
        sh.xl.vr[r_slot][j] = m >= 0 && m < static_cast<int>(p.xl_n) ? p.xl_vr[h * p.xl_n + m] : 0.0f;
      }
    }
    if (keys)
      for (int j = lane; j < BN; j += 32) sh.k_pos[stage][j] = j < cols ? k_pos[col0 + j] : 0;  // from L1
    // Each lane's arrival releases its own stores; lane 0's also expects the TMA's bytes.
    if (lane == 0) {
      sh.tile[stage] = step, sh.whole[stage] = whole;
      ClusterTransactionBarrier::arrive_and_expect_tx(&sh.full_k[stage],
                                                      (keys ? T::kKBytes : 0) + (kXL ? T::kKBytes : 0));
      if (keys) copy(tma_k.with(sh.full_k[stage]), get<0>(tK)(_, step), get<1>(tK)(_, stage));
      if constexpr (kXL) {
        Tensor sR = make_tensor(make_smem_ptr(sh.xl.r), typename K::SmemR{});
        Tensor mR = tma_r.get_tma_tensor(make_shape(static_cast<int>(p.xl_n), p.D, static_cast<int>(p.H), 1));
        // Rows before 0 or past n are zero-filled by the TMA (its coordinates are signed).
        Tensor gR = local_tile(domain_offset(make_coord(chunk, 0), mR(_, _, h, 0)),
                               Shape<Int<BN>, Int<kHeadDim>>{}, make_coord(0, 0));
        auto [tRg, tRs] =
            tma_partition(tma_r, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sR), group_modes<0, 2>(gR));
        copy(tma_r.with(sh.full_k[stage]), tRg, tRs(_, r_slot));
      }
    } else {
      ClusterBarrier::arrive(&sh.full_k[stage]);
    }
    if (keys) ClusterBarrier::wait(&sh.empty_v[stage], phase ^ 1);  // and with V (a tile later than K)
    if (lane == 0) {
      if (keys) {
        ClusterTransactionBarrier::arrive_and_expect_tx(&sh.full_v[stage], T::kVBytes);
        copy(tma_v.with(sh.full_v[stage]), get<0>(tV)(_, step), get<1>(tV)(_, stage));
      } else {
        ClusterBarrier::arrive(&sh.full_v[stage]);  // the phase completes without bytes
      }
    }
    if (++stage == T::kStages) stage = 0, phase ^= 1;
    if constexpr (kXL)
      if (++r_slot == K::kRowSlots) r_slot = 0, r_phase ^= 1;
  };

  const int n_tiles = (pr.nk + BN - 1) / BN;
  [[maybe_unused]] int last_tile = -2;  // XL: a run continues at last_tile + 1
  for (int t = 0; t < n_tiles; ++t) {
    const int col0 = t * BN;
    const int cols = min(BN, pr.nk - col0);
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    bool bad = false;
    for (int j = lane; j < cols; j += 32) {
      const int64_t kp = k_pos[col0 + j];
      lo = min(lo, kp), hi = max(hi, kp), bad |= !position_in_range(kp, 0);
    }
    CUTE_UNROLL
    for (int o = 16; o > 0; o /= 2) {
      lo = min(lo, static_cast<int64_t>(__shfl_xor_sync(0xffffffffu, static_cast<long long>(lo), o)));
      hi = max(hi, static_cast<int64_t>(__shfl_xor_sync(0xffffffffu, static_cast<long long>(hi), o)));
    }
    bad = __any_sync(0xffffffffu, bad) != 0;
    // Skipped only when every position is exact (no distance in the test wraps) and the mask hides every
    // pair.
    const int64_t rows_lo = rows_range[0], rows_hi = rows_range[1];
    const bool exact = !bad && rows_range[2] == 0;
    if (exact && !p.mask.any_visible(rows_lo, rows_hi, lo, hi)) continue;
    const int whole = exact && cols == BN && p.mask.all_visible(rows_lo, rows_hi, lo, hi)
                          ? whole_tile_kind(p.terms, lo - rows_hi, hi - rows_lo)
                          : kPartialTile;
    int chunk = 0;
    if constexpr (kXL) {  // default positions: row r of the block at q_pos[0] + r; its table row
      chunk = static_cast<int>(xl_band_first_delta(q_pos[0], k_pos[col0], BN) - p.xl_lo);
      if (t != last_tile + 1) {
        load(kSm90XLChunkAhead2, kPartialTile, 0, 0, sm90_xl_chunk_first(chunk, kSm90XLChunkAhead2));
        load(kSm90XLChunkAhead1, kPartialTile, 0, 0, sm90_xl_chunk_first(chunk, kSm90XLChunkAhead1));
      }
      last_tile = t;
    }
    load(t, whole, col0, cols, chunk);
  }
  ClusterBarrier::wait(&sh.empty_k[stage], phase ^ 1);
  if (lane == 0) sh.tile[stage] = kSm90KeysDone;
  ClusterBarrier::arrive(&sh.full_k[stage]);  // the consumers stop at the marker: full_v is not waited on
}

// RoPE's rotation of a warpgroup's 64 rows of the staged Q tile, in place: pair j of a row by its token's cos
// and sin (rows from table_row0), rotated_pair's arithmetic and one rounding to the storage type, as
// rope_rotate's rotated copy of q (src/cuda/rope.cu) would have them. Rows past `rows` (another sequence's,
// or zeros) are left: no output row reads them.
template <class TensorQ>
__device__ __forceinline__ void rotate_query_rows(TensorQ& sQ, const QueryRotation rot, int64_t table_row0,
                                                  int rows, int group, int thread) {
  using Element = typename TensorQ::value_type;
  const int pairs = rot.pairs;
  // Every thread a share of the (row, pair) units; the table read through the read-only cache, so that the
  // loads of the next units need not wait for this one's stores.
#pragma unroll 4
  for (int u = thread; u < 64 * pairs; u += 128) {
    const int row = 64 * group + u / pairs, j = u - (u / pairs) * pairs;
    if (row >= rows) break;  // rows grow with u
    const int64_t at = (table_row0 + row) * pairs + j;
    const int ia = rot.offset + (rot.interleaved ? 2 * j : j);
    const int ib = rot.offset + (rot.interleaved ? 2 * j + 1 : j + pairs);
    const RotatedPair r = rotated_pair(static_cast<float>(sQ(row, ia)), static_cast<float>(sQ(row, ib)),
                                       __ldg(rot.cos + at), __ldg(rot.sin + at));
    sQ(row, ia) = Element(r.a);
    sQ(row, ib) = Element(r.b);
  }
}

template <class K>
__global__ void __launch_bounds__(K::T::kThreads, 1)
    attention_sm90_kernel(const __grid_constant__ Params p, const __grid_constant__ typename K::TmaQ tma_q,
                          const __grid_constant__ typename K::TmaK tma_k,
                          const __grid_constant__ typename K::TmaV tma_v,
                          const __grid_constant__ typename K::TmaK tma_r) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = typename K::T;
  using Shared = typename K::Shared;
  using Element = typename K::ElementType;
  constexpr bool kXL = K::kTransformerXL;
  constexpr int BM = T::kBlockM, BN = T::kBlockN, kHeadDimV = K::kVDim;
  extern __shared__ unsigned char shared_bytes[];
  // Aligned to 1024 bytes by an offset from the array itself (not through an integer address), so that the
  // compiler still knows every access is to shared memory.
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(shared_bytes));
  Shared& sh = *reinterpret_cast<Shared*>(shared_bytes + (1024u - base % 1024u) % 1024u);
  const int tid = threadIdx.x;
  const int h = static_cast<int>(blockIdx.y);
  Problem pr{static_cast<int>(blockIdx.z), 0, static_cast<int>(p.Q), 0, static_cast<int>(p.K)};
  if (p.cu_seqlens_q != nullptr) {
    const int64_t q0 = p.cu_seqlens_q[blockIdx.z], nq = p.cu_seqlens_q[blockIdx.z + 1] - q0;
    const int64_t k0 = p.cu_seqlens_k[blockIdx.z], nk = p.cu_seqlens_k[blockIdx.z + 1] - k0;
    // Offsets outside the packed tokens: nothing is read (the packing check writes NaN over out).
    if (q0 < 0 || nq < 0 || q0 + nq > p.Q || k0 < 0 || nk < 0 || k0 + nk > p.K) return;
    pr = Problem{0, static_cast<int>(q0), static_cast<int>(nq), static_cast<int>(k0), static_cast<int>(nk)};
  }
  const int row_blocks = (pr.nq + BM - 1) / BM;
  if (static_cast<int>(blockIdx.x) >= row_blocks) return;  // a shorter sequence than the grid's longest
  const int row_block = row_blocks - 1 - static_cast<int>(blockIdx.x);  // the rows with the most keys first
  const int64_t row0 = static_cast<int64_t>(row_block) * BM;
  const int rows = min(BM, pr.nq - static_cast<int>(row0));
  const int b = pr.b;

  if (p.terms.bias == ScoreBias::lookup)
    for (int i = tid; i < 2 * p.terms.limit + 1; i += T::kThreads)
      sh.lookup[i] = p.lookup[h * (2 * p.terms.limit + 1) + i];
  if (tid == 0) {
    sh.terms = p.terms;
    sh.terms.slope = p.slopes[p.terms.bias == ScoreBias::alibi ? h : 0];
    ClusterTransactionBarrier::init(&sh.q_full, 1);
    for (int s = 0; s < T::kStages; ++s) {
      ClusterTransactionBarrier::init(&sh.full_k[s], 32);         // the producer warp's lanes
      ClusterTransactionBarrier::init(&sh.full_v[s], 1);          // its lane 0
      ClusterBarrier::init(&sh.empty_k[s], 128 * T::kConsumers);  // every consumer thread
      ClusterBarrier::init(&sh.empty_v[s], 128 * T::kConsumers);
    }
    if constexpr (kXL) {
      for (int s = 0; s < K::kRowSlots; ++s) ClusterBarrier::init(&sh.xl.empty_r[s], 128 * T::kConsumers);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();  // the barriers, the terms and the lookup

  if (tid < 128) {  // the producer warpgroup: one warp loads, the others leave
    cutlass::arch::warpgroup_reg_dealloc<40>();
    if (tid < 32) produce<K>(p, sh, tma_q, tma_k, tma_v, tma_r, pr, h, row_block, rows);
    return;
  }
  cutlass::arch::warpgroup_reg_alloc<232>();
  const int ctid = tid - 128;
  Tensor sQ = make_tensor(make_smem_ptr(sh.q), typename T::SmemQ{});
  // RoPE on q here, not in a pass over q before the kernel; first, while the accumulators' registers are
  // free. Not with heads of 256, whose consumers it would give a stack frame (attention_forward_rotates_q).
  if (K::kQKDim != 256 && p.q_rotation.cos != nullptr) {
    ClusterTransactionBarrier::wait(&sh.q_full, 0);
    rotate_query_rows(sQ, p.q_rotation, b * p.q_rotation.table_rows_per_batch + pr.q0 + row0, rows,
                      ctid / 128, ctid % 128);
    cutlass::arch::fence_view_async_shared();  // the rotated rows seen by wgmma (the async proxy)
    cutlass::arch::NamedBarrier::sync(128, 3 + ctid / 128);  // each warpgroup's 64 rows, before its first S
  }
  Tensor sK = make_tensor(make_smem_ptr(sh.k), typename T::SmemK{});
  Tensor sV = make_tensor(make_smem_ptr(sh.v), typename T::SmemV{});
  Tensor sVt = make_tensor(make_smem_ptr(sh.v), typename T::SmemVt{});
  typename T::MmaS mma_s;
  typename T::MmaO mma_o;
  auto thr_s = mma_s.get_thread_slice(ctid);
  auto thr_o = mma_o.get_thread_slice(ctid);
  Tensor tSrQ = thr_s.partition_fragment_A(sQ);  // shared-memory descriptors
  Tensor tSrK = thr_s.partition_fragment_B(sK);
  Tensor tOrV = thr_o.partition_fragment_B(sVt);
  Tensor acc_o = partition_fragment_C(mma_o, Shape<Int<BM>, Int<kHeadDimV>>{});
  clear(acc_o);
  // Each thread's accumulator elements as (row, col) of the tile: 2 rows, the same in S and O.
  Tensor cS = thr_s.partition_C(make_identity_tensor(Shape<Int<BM>, Int<BN>>{}));
  Tensor tScS = make_tensor(cS.data(), gmma_accumulator_rows_cols(cS.layout()));
  Tensor cO = thr_o.partition_C(make_identity_tensor(Shape<Int<BM>, Int<kHeadDimV>>{}));
  Tensor tOcO = make_tensor(cO.data(), gmma_accumulator_rows_cols(cO.layout()));
  Tensor o = make_tensor(acc_o.data(), gmma_accumulator_rows_cols(acc_o.layout()));
  constexpr int kRows = decltype(size<0>(o))::value;
  const int64_t* q_pos = p.q_pos + b * p.q_pos_stride + pr.q0 + row0;
  float row_max[kRows], row_sum[kRows], scale_of[kRows];
  int64_t qpos_of[kRows];
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const int row = get<0>(tOcO(r, 0));
    qpos_of[r] = row < rows ? q_pos[row] : 0;
    const double f =
        detail::query_temperature_factor(p.temperature, p.temperature_scale, p.temperature_floor, qpos_of[r]);
    scale_of[r] = p.scale * static_cast<float>(f);
    row_max[r] = -INFINITY, row_sum[r] = 0;
  }
  const ScoreTerms& terms = sh.terms;  // read where used: the consumers' registers are few

  // The consumer warpgroups take turns issuing their products (FlashAttention-3's ping-pong), and each issues
  // S = Q K^T of a tile with P V of the tile before (its intra-warpgroup overlap): while one computes its
  // softmax on the CUDA cores, the other's products run on the tensor cores. Named barriers 1 and 2 are the
  // turns (each a warpgroup's own 128 threads plus the other's 128 arrivals; the first warpgroup's first turn
  // is its own arrival; the one left over is taken before the epilogue), 0 the packed sequences' zeroing
  // below, 3 and 4 (XL) each warpgroup's band.
  const int group = ctid / 128;
  const auto my_turn = [&] { cutlass::arch::NamedBarrier::sync(128 * T::kConsumers, 1 + group); };
  const auto next_turn = [&] { cutlass::arch::NamedBarrier::arrive(128 * T::kConsumers, 2 - group); };
  [[maybe_unused]] const auto band_sync = [&] { cutlass::arch::NamedBarrier::sync(128, 3 + group); };
  if (group == 0) cutlass::arch::NamedBarrier::arrive(128 * T::kConsumers, 1);

  ClusterTransactionBarrier::wait(&sh.q_full, 0);
  Tensor acc_s = partition_fragment_C(mma_s, Shape<Int<BM>, Int<BN>>{});
  Tensor s = make_tensor(acc_s.data(), gmma_accumulator_rows_cols(acc_s.layout()));
  Tensor probs = make_tensor_like<Element>(acc_s);  // the pending tile's P, rounded to the storage type
  Tensor tOrP = make_tensor(probs.data(), gmma_accumulator_as_operand_a(probs.layout()));
  using Convert = cutlass::NumericArrayConverter<Element, float, decltype(size(acc_s))::value>;
  int stage = 0, pending = -1;  // pending: the buffer whose P V is still to be issued
  uint32_t phase = 0, pending_phase = 0;

  // XL: the rproj rows' descriptors, the band's products (as S's), the thread's first band row (of its
  // warpgroup's 64) and column offsets from the thread's first element; the half of the newest chunk, the
  // rows' slot of this step and of the step before (src/cuda/attention_sm90_xl.h).
  Element* const rows_smem = [&] {
    if constexpr (kXL) return sh.xl.r;
    return sh.k;  // (never read)
  }();
  [[maybe_unused]] Tensor tSrR =
      thr_s.partition_fragment_B(make_tensor(make_smem_ptr(rows_smem), typename K::SmemR{}));
  [[maybe_unused]] Tensor acc_r = partition_fragment_C(mma_s, Shape<Int<BM>, Int<BN>>{});
  [[maybe_unused]] float* const band = [&]() -> float* {
    if constexpr (kXL) return sh.xl.band[group];
    return nullptr;
  }();
  [[maybe_unused]] const int band_row = get<0>(tScS(0, 0)) - 64 * group, band_col = get<1>(tScS(0, 0));
  [[maybe_unused]] int new_half = 1, r_slot = 0, previous_r = -1;
  // XL: this warpgroup's chunk of the band at this step (warpgroup 0 from this step's rows, 1 from the step
  // before's), from its products in acc_r: q . rproj + v . rproj into the newest half, then the rows' slot
  // released.
  [[maybe_unused]] const auto store_chunk = [&](int rows_slot) {
    if constexpr (kXL) {
      new_half ^= 1;
      Tensor a = make_tensor(acc_r.data(), gmma_accumulator_rows_cols(acc_r.layout()));
      const float* vr = sh.xl.vr[rows_slot] + band_col;
      float* at = band + sm90_xl_chunk_at(band_col, band_row, new_half);
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) CUTE_UNROLL
      for (int c = 0; c < size<1>(a); ++c) {  // offsets from the first element: compile-time constants
        const int dr = get<0>(tScS(r, c)) - get<0>(tScS(0, 0)), dc = get<1>(tScS(r, c)) - band_col;
        at[dc * kXLBandRows + dr] = a(r, c) + vr[dc];
      }
      ClusterBarrier::arrive(&sh.xl.empty_r[rows_slot]);  // this thread is done with those rows
    }
  };
  // The pending tile's P V, alone (XL: before the steps that start a run, whose buffers may be its V's).
  const auto finish_pending = [&] {
    my_turn();
    ClusterTransactionBarrier::wait(&sh.full_v[pending], pending_phase);
    sm90_gemm(mma_o, tOrP, tOrV(_, _, _, pending), acc_o, false);
    next_turn();
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_o);
    warpgroup_fence_operand(tOrP);
    ClusterBarrier::arrive(&sh.empty_v[pending]);
    pending = -1;
  };

  for (;;) {
    ClusterTransactionBarrier::wait(&sh.full_k[stage], phase);
    const int t = sh.tile[stage];
    if (t == kSm90KeysDone) break;
    if constexpr (kXL) {
      if (t < 0) {  // a step before a run: no keys, its rows' chunk
        if (pending >= 0) finish_pending();
        ClusterBarrier::arrive(&sh.empty_k[stage]);
        ClusterBarrier::arrive(&sh.empty_v[stage]);
        const int rows_slot = group == 0 ? r_slot : previous_r;
        if (sm90_xl_forms(t)) {
          sm90_gemm(mma_s, tSrQ, tSrR(_, _, _, rows_slot), acc_r, true);
          band_sync();  // every thread of the warpgroup is done reading the band
          warpgroup_wait<0>();
          warpgroup_fence_operand(acc_r);
          store_chunk(rows_slot);
        } else if (group == 0 || previous_r >= 0) {
          ClusterBarrier::arrive(&sh.xl.empty_r[rows_slot]);  // rows this warpgroup does not read
        }
        previous_r = r_slot;
        if (++r_slot == K::kRowSlots) r_slot = 0;
        if (++stage == T::kStages) stage = 0, phase ^= 1;
        continue;
      }
    }
    const int kind = sh.whole[stage];
    const bool whole = kind != kPartialTile, pair_bias = kind == kWholeTile;
    const bool tile_constant = kind == kWholeTileFirstEntry || kind == kWholeTileLastEntry;
    // A learned bias the same for every pair of the tile: its clamped distance's entry, added per score.
    const float tile_bias = kind == kWholeTileFirstEntry  ? sh.lookup[0]
                            : kind == kWholeTileLastEntry ? sh.lookup[2 * terms.limit]
                                                          : 0.0f;
    const int cols = min(BN, pr.nk - t * BN);
    const int64_t* k_pos = sh.k_pos[stage];
    if (p.cu_seqlens_q != nullptr && cols < BN) {
      // A packed sequence's last key tile: its V rows past the sequence are the next one's (the TMA
      // zero-fills only past the tokens). Their probabilities are 0, but 0 times an infinite value is NaN:
      // both consumer warpgroups, before either reads this V, zero those rows (the writes ordered before the
      // tensor cores' reads by the async-proxy fence and the second barrier).
      ClusterTransactionBarrier::wait(&sh.full_v[stage], phase);
      cutlass::arch::NamedBarrier::sync(128 * T::kConsumers, 0);
      for (int i = ctid; i < (BN - cols) * kHeadDimV; i += 128 * T::kConsumers)
        sV(cols + i / kHeadDimV, i % kHeadDimV, stage) = Element(0.0f);
      cutlass::arch::fence_view_async_shared();
      cutlass::arch::NamedBarrier::sync(128 * T::kConsumers, 0);
    }
    // O's rescaling and P's rounding stay before the products' issue (ptxas serializes wgmma whose input
    // registers are written after the first of a group is issued).
    warpgroup_fence_operand(acc_o);
    warpgroup_fence_operand(tOrP);
    // (XL: the turn's barrier also waits for every thread of this warpgroup, done reading the band.)
    my_turn();
    sm90_gemm(mma_s, tSrQ, tSrK(_, _, _, stage), acc_s, true);
    if constexpr (kXL) sm90_gemm(mma_s, tSrQ, tSrR(_, _, _, group == 0 ? r_slot : previous_r), acc_r, true);
    if (pending >= 0) {
      ClusterTransactionBarrier::wait(&sh.full_v[pending], pending_phase);
      sm90_gemm(mma_o, tOrP, tOrV(_, _, _, pending), acc_o, false);
    } else {  // an empty group, so that wait<1> below leaves S complete on the first tile too
      warpgroup_arrive();
      warpgroup_commit_batch();
    }
    next_turn();
    warpgroup_wait<1>();  // S (and XL's chunk) is done; P V may still run
    warpgroup_fence_operand(acc_s);
    [[maybe_unused]] const float* uk = nullptr;
    if constexpr (kXL) {
      warpgroup_fence_operand(acc_r);
      store_chunk(group == 0 ? r_slot : previous_r);
      band_sync();  // the chunk is whole
      uk = sh.xl.uk[stage] + band_col;
    }

    // Logits (times log2 e) and the online softmax, row by row (src/cuda/attention_forward.cuh's order);
    // O's rescaling waits for the pending P V.
    float correction[kRows];
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float mx = row_max[r];
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) {
        const int col = get<1>(tScS(r, c));
        float dot = s(r, c), x;
        if constexpr (kXL) {  // the tiled kernel's u . k_j + (q . rproj + v . rproj)(delta)
          const int dr = get<0>(tScS(r, c)) - get<0>(tScS(0, 0)), dc = col - band_col;
          dot += uk[dc] + band[sm90_xl_band_at(xl_band_column(band_row + dr, band_col + dc, BN),
                                               band_row + dr, new_half)];
        }
        if (whole) {
          x = capped_logit(scale_of[r] * dot, terms.softcap);
          if (pair_bias)
            x += position_bias(terms, k_pos[col] - qpos_of[r], sh.lookup);
          else if (tile_constant)
            x += tile_bias;
        } else {
          x = col < cols ? attention_logit(terms, p.mask, scale_of[r], dot, qpos_of[r], k_pos[col], sh.lookup)
                         : -INFINITY;
        }
        s(r, c) = x * kLog2e;
        mx = fmaxf(mx, s(r, c));
      }
      mx = quad_max(mx);
      const float base = mx == -INFINITY ? 0.0f : mx;  // nothing visible yet: every term is 0 and stays 0
      correction[r] = exp2f(row_max[r] - base);
      row_max[r] = mx;
      float sum = 0;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) {
        s(r, c) = exp2f(s(r, c) - base);
        sum += s(r, c);
      }
      row_sum[r] = row_sum[r] * correction[r] + sum;
    }
    ClusterBarrier::arrive(&sh.empty_k[stage]);  // this thread is done with K and the tile's positions
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_o);
    warpgroup_fence_operand(tOrP);  // the pending P's registers have been read
    if (pending >= 0) ClusterBarrier::arrive(&sh.empty_v[pending]);  // and with the pending tile's V
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) CUTE_UNROLL
    for (int c = 0; c < size<1>(o); ++c) o(r, c) *= correction[r];
    *reinterpret_cast<typename Convert::result_type*>(probs.data()) =
        Convert{}(*reinterpret_cast<const typename Convert::source_type*>(acc_s.data()));
    warpgroup_fence_operand(tOrP);
    pending = stage, pending_phase = phase;
    if constexpr (kXL) {
      previous_r = r_slot;
      if (++r_slot == K::kRowSlots) r_slot = 0;
    }
    if (++stage == T::kStages) stage = 0, phase ^= 1;
  }
  if (pending >= 0) finish_pending();  // the last tile's P V

  if (group == 0) my_turn();  // the turns' left-over arrival, so that every barrier ends complete

  finish_rows<Element, kRows>(p, o, tOcO, row_max, row_sum, qpos_of, rows, b, h, pr.q0 + row0, 0, true);
#else
  __trap();  // compiled for a device without sm_90a's wgmma: attention_sm90_fits never selects it
#endif
}

// The kernel's launch: TMA descriptors of q, k and v (and XL's rproj table, (n, D, H) rows of the storage
// type at p.xl_rproj), a block per 128 rows of a head and problem.
template <class K>
void launch_sm90_kernel(const AttentionLaunch& l, const Params& p) {
  using T = typename K::T;
  constexpr int kHeadDim = K::kQKDim, kHeadDimV = K::kVDim;
  const int B = static_cast<int>(l.B);
  const auto q =
      K::gmem(l.q, Sm90GmemShape{static_cast<int>(l.Q), static_cast<int>(l.D), static_cast<int>(l.H), B},
              sm90_gmem_stride(l.q_strides, l.Q, l.H, l.B));
  const auto k =
      K::gmem(l.k, Sm90GmemShape{static_cast<int>(l.K), static_cast<int>(l.D), static_cast<int>(l.Hkv), B},
              sm90_gmem_stride(l.k_strides, l.K, l.Hkv, l.B));
  const auto v =
      K::gmem(l.v, Sm90GmemShape{static_cast<int>(l.K), static_cast<int>(l.Dv), static_cast<int>(l.Hkv), B},
              sm90_gmem_stride(l.v_strides, l.K, l.Hkv, l.B));
  const typename K::TmaQ tma_q =
      make_tma_copy(SM90_TMA_LOAD{}, q, typename T::SmemQ{}, Shape<Int<T::kBlockM>, Int<kHeadDim>>{}, _1{});
  const typename K::TmaK tma_k = make_tma_copy(SM90_TMA_LOAD{}, k, take<0, 2>(typename T::SmemK{}),
                                               Shape<Int<T::kBlockN>, Int<kHeadDim>>{}, _1{});
  const typename K::TmaV tma_v = make_tma_copy(SM90_TMA_LOAD{}, v, take<0, 2>(typename T::SmemV{}),
                                               Shape<Int<T::kBlockN>, Int<kHeadDimV>>{}, _1{});
  typename K::TmaK tma_r = tma_k;  // XL's table below; any valid descriptor otherwise (never read)
  if constexpr (K::kTransformerXL) {
    const int64_t row_stride[3] = {0, l.D, p.xl_n * l.D};  // (H, n, D): heads of n rows
    const auto r = K::gmem(
        p.xl_rproj, Sm90GmemShape{static_cast<int>(p.xl_n), static_cast<int>(l.D), static_cast<int>(l.H), 1},
        sm90_gmem_stride(row_stride, p.xl_n, l.H, 1));
    tma_r = make_tma_copy(SM90_TMA_LOAD{}, r, take<0, 2>(typename T::SmemK{}),
                          Shape<Int<T::kBlockN>, Int<kHeadDim>>{}, _1{});
  }
  auto kernel = attention_sm90_kernel<K>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, K::kSharedBytes);
  check_launch("attention", "cudaFuncSetAttribute");
  const dim3 grid(static_cast<unsigned>((l.Q + T::kBlockM - 1) / T::kBlockM), static_cast<unsigned>(l.H),
                  static_cast<unsigned>(l.cu_seqlens_q != nullptr ? l.sequences : l.B));
  kernel<<<grid, T::kThreads, K::kSharedBytes, static_cast<cudaStream_t>(cuda_stream())>>>(p, tma_q, tma_k,
                                                                                           tma_v, tma_r);
  check_launch("attention", "the sm_90a attention kernel");
}

}  // namespace
}  // namespace forward
}  // namespace posenc::cuda
