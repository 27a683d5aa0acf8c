// src/cuda/attention_backward_sm90.cu: the attention backward on Hopper (sm_90a) for the launches it takes
// (attention_backward_sm90_fits): default positions, batch rows or packed sequences, head dims up to 128,
// every scalar positional term (none, ALiBi, T5 and the clipped table with their table's gradient),
// softcap, sinks, windows, chunks, query temperature, GQA. Everything else runs on the tiled passes
// (src/cuda/attention_backward.cu), which also run on Ampere.
// FlashAttention-3's backward (Shah et al. 2024, arXiv 2407.08608), warp-specialized, deterministic:
//   a block of 3 warpgroups owns 128 keys of a kv head. First every thread finds the row tiles of 64 the mask
//   leaves visible to them (a table, steps); then a producer warp (registers given back: setmaxnreg 24)
//   loads K and V once by TMA and, for each query head of the group and each visible row tile, the tile's
//   Q and dO into a ring of kStages buffers;
//   two consumer warpgroups (setmaxnreg 240), 64 keys each: the rows' terms (lse, D_i, scale, the lookup's
//   entries at the tile's distances) into the buffer, S^T = K Q^T and dP^T = V dO^T by wgmma from shared
//   memory, P^T and dS^T per accumulator element (the tiled passes' arithmetic: attention-inl.cuh
//   pair_gradient), dV += P^T dO and dK += dS^T Q by wgmma with P^T and dS^T from registers (dV and dK stay
//   in registers), dS^T to shared memory and dQ = dS K by wgmma, staged in shared memory as fp32;
//   a second producer warp adds each tile's dQ into the fp32 gradient by the TMA's bulk reduction, the blocks
//   of a kv head in a fixed order per row tile: a counter per (head, row tile) says how many of the blocks
//   before this one (in block order) that see the tile have added theirs, and the warp waits for its turn.
//   Every element of dQ is thus the same sum in the same order run to run, as FlashAttention-3's
//   deterministic mode does; with a causal mask the blocks run their key tiles from the last, so that the
//   block that meets a row tile first (the diagonal's) adds first and turns seldom wait.
// The order of the blocks is a function of the tiles' positions that every block computes the same way:
// default positions only (explicit ones run on the tiled passes). The registers are the limit (dV, dK, S and
// dP take 192 of a consumer's 240 at head dims of 128): what the warps need is read from shared memory where
// used, and a few addresses are made opaque to the compiler (unhoisted) so that it does not keep them.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_types.h>

#include "posenc/device.h"
#include "src/cuda/attention.h"
#include "src/cuda/attention_backward-inl.cuh"
#include "src/cuda/attention_backward_sm90_turns.h"
#include "src/cuda/attention_sm90-inl.cuh"
#include "src/cuda/attention_sm90_tiles.cuh"
#include "src/cuda/device.h"

namespace posenc::cuda {
namespace backward {
namespace {
using cutlass::arch::ClusterBarrier;
using cutlass::arch::ClusterTransactionBarrier;
using cutlass::arch::NamedBarrier;

// Named barriers (CUTLASS's NamedBarrier numbers them past the ids it reserves): the consumers' dS tile,
// their zeroing of rows past a packed sequence, a row tile's terms, the staged dQ tile between the
// warpgroups computing it and the warp adding it, and a tile's learned-table sums.
enum : int {
  kDSBarrier = 1,
  kZeroBarrier = 2,
  kTermsBarrier = 3,
  kDQFull = 4,
  kDQEmpty = 5,
  kTableBarrier = 6
};
static_assert(kTableBarrier + static_cast<int>(cutlass::arch::ReservedNamedBarriers::FirstUserBarrier) < 16,
              "16 hardware barriers, the first ones CUTLASS's");
constexpr int kConsumerThreads = 256;  // the two consumer warpgroups

// The lookup's entries a tile of 64 rows and 128 keys at default positions meets: its pairs' distances
// k_pos - q_pos are (key0 - row_pos0) + key - row, 191 consecutive values.
constexpr int kBand = 64 + 128 - 1;

// The row tiles a block sees, found once by all its threads before the warps take their roles (the roles'
// registers are few): steps[m] = -1 where the mask hides every pair of row tile m from the block's keys,
// else the block's turn on it (sm90_turn_of) plus kWholeStep where the mask leaves every pair visible.
constexpr int kMaxRowTiles = 2048;  // rows per problem up to 2048 x 64 (attention_backward_sm90_fits)
constexpr int kWholeStep = 1 << 30;

template <class Element, int kHeadDim>
struct Sm90Backward {
  using T = AttentionBackwardSm90Tiles<Element, kHeadDim>;
  static auto gmem(const void* data, Sm90GmemShape shape, Sm90GmemStride stride) {
    return make_tensor(make_gmem_ptr(static_cast<const Element*>(data)), shape, stride);
  }
  using TmaRows = decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem(nullptr, Sm90GmemShape{}, Sm90GmemStride{}),
                                         take<0, 2>(typename T::SmemRows{}),
                                         Shape<Int<T::kBlockM>, Int<kHeadDim>>{}, _1{}));
  using TmaKeys =
      decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem(nullptr, Sm90GmemShape{}, Sm90GmemStride{}),
                             typename T::SmemKV{}, Shape<Int<T::kBlockN>, Int<kHeadDim>>{}, _1{}));
  static constexpr int kDQStride = kHeadDim + 4;  // floats per row of the staged dQ (16-byte rows, banks)
  // A row tile's terms: its number, head and kind, written by the producer warp with its Q and dO; the rows'
  // terms, written by the consumers.
  struct Rows {
    float lse2[T::kBlockM];   // lse log2 e (-inf: a row with nothing visible or past the rows)
    float term[T::kBlockM];   // D_i
    float scale[T::kBlockM];  // the softmax scale times the row's query temperature
    float band[kBand];        // a lookup's entries at the tile's distances
    float slope;              // the head's ALiBi slope
    int tile;                 // the row tile; -1: the walk is done
    int head;
    int whole;  // the mask leaves every pair of the tile visible
  };
  struct Shared {
    alignas(1024) Element k[T::kBlockN * kHeadDim];  // the 128-byte swizzle repeats every 1024 bytes
    alignas(1024) Element v[T::kBlockN * kHeadDim];
    alignas(1024) Element q[T::kStages * T::kBlockM * kHeadDim];
    alignas(1024) Element dout[T::kStages * T::kBlockM * kHeadDim];
    alignas(1024) Element ds[T::kBlockM * T::kBlockN];
    alignas(16) float dq[T::kBlockM * kDQStride];  // a tile's dQ, each dQ warpgroup's 64 columns
    // With the learned table's gradient (add_table_gradient): a tile's d logit by (row, key), the sums of its
    // diagonals past the lookup's ends, and their 8 parts.
    alignas(16) float logit_grads[T::kBlockM * T::kGradStride];
    float table_diagonals[kBand];
    float table_ends[8][2];
    Rows rows[T::kStages];
    // The block's problem and key tile: read where used, not held in the warps' registers.
    Problem problem;
    int64_t key_tile;
    int steps[kMaxRowTiles];
    int group, row_tiles;
    // Each buffer's dQ job for the adding warp, written by the consumers as they take the buffer: dQ's
    // first row, the rows, the turn's counter and the turn; rows -1: no more tiles.
    struct {
      float* out;
      int* counter;
      int rows, turn;
    } dq_job[T::kStages];
    uint64_t kv_full;
    uint64_t q_full[T::kStages];   // Q has landed (and the tile's number is written)
    uint64_t do_full[T::kStages];  // dO has landed
    uint64_t empty[T::kStages];    // the consumers are done with the buffer
  };
  static constexpr int kSharedBytes = static_cast<int>(sizeof(Shared)) + 1024;
  static_assert(kSharedBytes <= 227 * 1024, "an H100's or H200's shared memory per block");
  static_assert(T::kBlockM == 64 && T::kBlockN == 128 && 128 * T::kConsumers == kConsumerThreads,
                "tiles of 64 rows and 128 keys: the band, the table's diagonals and slots, sm90_turn_index");
};

// How the blocks of a kv head take turns adding dQ: the counters, zeroed, one per (query head, row tile of a
// problem) at lock_stride per head; a causal mask's key tiles walked from the last (reverse). With a query
// temperature, each query token's softmax scale (row_scales, made before the kernel; null without one).
struct Turns {
  int* counters;
  int64_t lock_stride, row_tiles;
  bool reverse;
  const float* row_scales;
};

// The next (head of the group, row tile) after (g, m) that the block sees; false past the last. Start from
// (0, -1).
__device__ __forceinline__ bool next_step(const int* steps, int group, int row_tiles, int* g, int* m) {
  if (row_tiles == 0) return false;  // a packed sequence without queries
  for (;;) {
    if (++*m == row_tiles) *m = 0, ++*g;
    if (*g >= group) return false;
    if (steps[*m] >= 0) return true;
  }
}

// ptr + 0 where the compiler cannot see the 0: what is computed from it is computed where it is used.
template <class E>
__device__ __forceinline__ E* unhoisted(E* ptr) {
  int zero = 0;
  asm volatile("" : "+r"(zero));
  return ptr + zero;
}

// The first producer warp: K and V, then every visible row tile's Q, dO and terms into the ring, then the
// end marker.
template <class Element, int kHeadDim>
__device__ __forceinline__ void load_tiles(const BackwardParams& p,
                                           typename Sm90Backward<Element, kHeadDim>::Shared& sh,
                                           const typename Sm90Backward<Element, kHeadDim>::TmaRows& tma_q,
                                           const typename Sm90Backward<Element, kHeadDim>::TmaRows& tma_do,
                                           const typename Sm90Backward<Element, kHeadDim>::TmaKeys& tma_k,
                                           const typename Sm90Backward<Element, kHeadDim>::TmaKeys& tma_v) {
  using T = AttentionBackwardSm90Tiles<Element, kHeadDim>;
  constexpr int BM = T::kBlockM, BN = T::kBlockN;
#define pr (*unhoisted(&sh.problem))  // as in add_dq
  const int64_t hk = blockIdx.y, n = sh.key_tile;
  const int lane = threadIdx.x % 32;
  Tensor sK = make_tensor(make_smem_ptr(sh.k), typename T::SmemKV{});
  Tensor sV = make_tensor(make_smem_ptr(sh.v), typename T::SmemKV{});
  Tensor sQ = make_tensor(make_smem_ptr(sh.q), typename T::SmemRows{});
  Tensor sdO = make_tensor(make_smem_ptr(sh.dout), typename T::SmemRows{});
  if (lane == 0) {
    const int b = static_cast<int>(pr.b), k0 = static_cast<int>(pr.k0), h_kv = static_cast<int>(hk);
    const int batch = p.cu_seqlens_q != nullptr ? 1 : static_cast<int>(gridDim.z);
    Tensor mK = tma_k.get_tma_tensor(make_shape(static_cast<int>(p.K), p.D, static_cast<int>(p.Hkv), batch));
    Tensor mV = tma_v.get_tma_tensor(make_shape(static_cast<int>(p.K), p.Dv, static_cast<int>(p.Hkv), batch));
    Tensor gK = local_tile(domain_offset(make_coord(k0, 0), mK(_, _, h_kv, b)),
                           Shape<Int<BN>, Int<kHeadDim>>{}, make_coord(static_cast<int>(n), 0));
    Tensor gV = local_tile(domain_offset(make_coord(k0, 0), mV(_, _, h_kv, b)),
                           Shape<Int<BN>, Int<kHeadDim>>{}, make_coord(static_cast<int>(n), 0));
    prefetch_tma_descriptor(tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(tma_do.get_tma_descriptor());
    prefetch_tma_descriptor(tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(tma_v.get_tma_descriptor());
    auto [tKg, tKs] =
        tma_partition(tma_k, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
    auto [tVg, tVs] =
        tma_partition(tma_v, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));
    ClusterTransactionBarrier::arrive_and_expect_tx(&sh.kv_full, 2 * T::kKeyBytes);
    copy(tma_k.with(sh.kv_full), tKg, tKs);
    copy(tma_v.with(sh.kv_full), tVg, tVs);
  }

  int stage = 0;
  uint32_t phase = 0;
  int g = 0, m = -1;
  while (next_step(sh.steps, sh.group, sh.row_tiles, &g, &m)) {
    ClusterBarrier::wait(&sh.empty[stage], phase ^ 1);  // the consumers are done with this buffer
    if (lane == 0) {  // the tensors made here: not held in the few registers through the loop
      const int h = static_cast<int>(hk) * sh.group + g, q0 = static_cast<int>(pr.q0),
                b = static_cast<int>(pr.b);
      const int batch = p.cu_seqlens_q != nullptr ? 1 : static_cast<int>(gridDim.z);
      Tensor mQ = tma_q.get_tma_tensor(make_shape(static_cast<int>(p.Q), p.D, static_cast<int>(p.H), batch));
      Tensor mdO =
          tma_do.get_tma_tensor(make_shape(static_cast<int>(p.Q), p.Dv, static_cast<int>(p.H), batch));
      sh.rows[stage].tile = static_cast<int>(m);
      sh.rows[stage].head = h;
      sh.rows[stage].whole = (sh.steps[m] & kWholeStep) != 0;
      Tensor gQ = local_tile(domain_offset(make_coord(q0, 0), mQ(_, _, h, b)),
                             Shape<Int<BM>, Int<kHeadDim>>{}, make_coord(static_cast<int>(m), 0));
      Tensor gdO = local_tile(domain_offset(make_coord(q0, 0), mdO(_, _, h, b)),
                              Shape<Int<BM>, Int<kHeadDim>>{}, make_coord(static_cast<int>(m), 0));
      auto [tQg, tQs] = tma_partition(tma_q, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sQ(_, _, stage)),
                                      group_modes<0, 2>(gQ));
      auto [tdOg, tdOs] = tma_partition(tma_do, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sdO(_, _, stage)),
                                        group_modes<0, 2>(gdO));
      ClusterTransactionBarrier::arrive_and_expect_tx(&sh.q_full[stage], T::kRowBytes);
      copy(tma_q.with(sh.q_full[stage]), tQg, tQs);
      ClusterTransactionBarrier::arrive_and_expect_tx(&sh.do_full[stage], T::kRowBytes);
      copy(tma_do.with(sh.do_full[stage]), tdOg, tdOs);
    }
    if (++stage == T::kStages) stage = 0, phase ^= 1;
  }
  ClusterBarrier::wait(&sh.empty[stage], phase ^ 1);
  if (lane == 0) {
    sh.rows[stage].tile = -1;
    ClusterTransactionBarrier::arrive(&sh.q_full[stage]);
  }
}
#undef pr

// A row tile's terms (lse, D_i, scale, the lookup's band at its distances, the head's slope) into r, by the
// consumers' 256 threads (ctid), before a barrier.
__device__ __forceinline__ void write_terms(const BackwardParams& p, const Turns& turns, const Problem& pr,
                                            int64_t h, int64_t m, int64_t n, int ctid, float* lse2,
                                            float* term, float* scale, float* band, float* slope) {
  constexpr int BM = 64;
  const int64_t row0 = m * BM, row_pos0 = pr.nk - pr.nq;  // default positions
  if (ctid < BM) {
    const int64_t t = pr.q0 + row0 + ctid;
    const bool in = row0 + ctid < pr.nq;
    scale[ctid] = turns.row_scales == nullptr ? p.scale : turns.row_scales[in ? t : 0];
    // Past the rows: -inf, which makes P and dS 0.
    lse2[ctid] = in ? p.lse[pr.b * p.lse_strides[0] + h * p.lse_strides[1] + t * p.lse_strides[2]] * kLog2e
                    : -INFINITY;
    term[ctid] = in ? p.row_terms[(pr.b * p.H + h) * p.Q + t] : 0.0f;
  } else if (ctid == BM) {
    *slope = p.slopes[p.terms.bias == ScoreBias::alibi ? h : 0];
  }
  if (p.terms.bias == ScoreBias::lookup && ctid < kBand) {
    const int32_t limit = p.terms.limit;
    const int64_t d = n * 128 - (row_pos0 + row0) - (BM - 1) + ctid;  // the band's first distance on
    band[ctid] = p.lookup[h * (2 * limit + 1) + (d < -limit ? -limit : d > limit ? limit : d) + limit];
  }
}

// *sum += value without waiting for the sum (a reduction the memory system performs: fp32, rounded to
// nearest, subnormals flushed). The adds into one sum come from threads of the block ordered by its barriers,
// so they are performed in that order (the PTX memory model orders causally ordered writes to a location):
// the same sum run to run, and no thread waits for global memory.
__device__ __forceinline__ void add_in_order(float* sum, float value) {
  asm volatile("red.relaxed.gpu.global.add.f32 [%0], %1;" ::"l"(sum), "f"(value) : "memory");
}

// The learned table's gradient of the tile in buffer `stage`, by the consumers' 256 threads (ctid) once its
// d logit is in sh.logit_grads: the sum of each of the tile's 191 diagonals (key - row + 63: thread ctid's,
// rows in order, four chains), added into the block's partial sums of its head at the diagonal's distance;
// the diagonals at or past the lookup's ends summed in order (8 threads of 24, then their 8 parts) and
// added once each. Every partial sum is thus the same sum in the same order run to run, whatever the other
// blocks do (the tiled passes' table gradient sums in another order: the two agree to rounding).
// (A shuffle tree for the ends instead of shared memory made the consumers spill.)
template <int kStride, class Shared>
__device__ __forceinline__ void add_table_gradient(const BackwardParams& p, Shared& sh, int stage, int ctid) {
  constexpr int BM = 64, BN = 128;
  // The tile's problem and head, read from shared memory where used (kept through the score elements' loop
  // or the barrier below, they would take registers there): the partial sums of the head, the distance of
  // the first diagonal.
  const int32_t limit = p.terms.limit;
  const auto first = [&](int diagonal) {  // the distance of a diagonal's pairs
    const Problem& pr = *unhoisted(&sh.problem);
    return sm90_table_distance(pr.nq, pr.nk, sh.rows[stage].tile, sh.key_tile, diagonal);
  };
  const auto partial = [&] {
    const Problem& pr = *unhoisted(&sh.problem);
    return p.bias_partials +
           (sm90_table_slot(p.cu_seqlens_q != nullptr, pr.k0, blockIdx.z, blockIdx.x, gridDim.x) * p.H +
            unhoisted(&sh.rows[stage])->head) *
               (2 * limit + 1);
  };
  if (ctid < kBand) {
    float chain[4] = {0, 0, 0, 0};
#pragma unroll 1  // four loads at a time: the products' accumulators hold most registers
    for (int row0 = 0; row0 < BM; row0 += 4) {
      CUTE_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int row = row0 + i, key = row + ctid - (BM - 1);
        if (key >= 0 && key < BN) chain[i] += sh.logit_grads[row * kStride + key];
      }
    }
    const float sum = (chain[0] + chain[1]) + (chain[2] + chain[3]);
    const int64_t d = first(ctid);
    if (sm90_table_end(d, limit) == TableEnd::none)
      add_in_order(partial() + d + limit, sum);  // this tile's only add at d
    else
      sh.table_diagonals[ctid] = sum;
  }
  NamedBarrier::sync(kConsumerThreads, kTableBarrier);
  if (ctid < 8) {  // the diagonals past the ends, 24 each, then the 8 parts in order
    float low = 0, high = 0;
    for (int e = ctid * 24; e < min(kBand, ctid * 24 + 24); ++e) {
      const TableEnd end = sm90_table_end(first(e), limit);
      if (end == TableEnd::low) low += sh.table_diagonals[e];
      if (end == TableEnd::high) high += sh.table_diagonals[e];
    }
    sh.table_ends[ctid][0] = low, sh.table_ends[ctid][1] = high;
    __syncwarp(0xffu);
    if (ctid == 0) {
      for (int w = 1; w < 8; ++w) low += sh.table_ends[w][0], high += sh.table_ends[w][1];
      float* sums = partial();
      add_in_order(sums, low);  // limit 0: both ends are entry 0, the low one added first
      add_in_order(sums + 2 * limit, high);
    }
  }
}

// The second producer warp: each row tile's dQ, staged in shared memory by the dQ warpgroups with its job
// (dq_job: out, rows, counter, turn), added into the fp32 gradient in the blocks' turn (Turns: the
// dq_turn blocks before this one that see the row tile add theirs first; sm90_turn_of), then the tile's
// counter advanced; until a job of no rows.
template <class Element, int kHeadDim>
__device__ __forceinline__ void add_dq(const BackwardParams& p,
                                       typename Sm90Backward<Element, kHeadDim>::Shared& sh) {
  using T = AttentionBackwardSm90Tiles<Element, kHeadDim>;
  constexpr int kThreads = 128 * T::kDQGroups + 32, kStride = Sm90Backward<Element, kHeadDim>::kDQStride;
  const int lane = threadIdx.x % 32;
  NamedBarrier::arrive(kThreads, kDQEmpty);  // the staged tile is free
  for (int stage = 0;; stage = (stage + 1) % T::kStages) {
    NamedBarrier::sync(kThreads, kDQFull);  // a tile's dQ is staged, or the end
    asm volatile("" ::: "memory");          // the job read after the barrier
    const int rows = sh.dq_job[stage].rows;
    if (rows < 0) break;
    int* counter = sh.dq_job[stage].counter;
    if (lane == 0) {
      const int turn = sh.dq_job[stage].turn;
      int seen;
      do {
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
      } while (seen < turn);  // (past it only where invalid packed offsets overlap: NaN follows)
    }
    __syncwarp();
    // The earlier blocks' adds, seen by the acquire, ordered before this block's (the async proxy's).
    asm volatile("fence.proxy.async.global;" ::: "memory");
    // Each staged row added into dQ's row by the TMA's bulk reduction (fp32 adds, each element once), the
    // lanes two rows each; complete (wait_group 0) before the counter moves.
    float* out = sh.dq_job[stage].out;
#pragma unroll 1
    for (int row = lane; row < rows; row += 32) {
      const uint32_t from = static_cast<uint32_t>(__cvta_generic_to_shared(sh.dq + row * kStride));
      asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(
                       out + row * p.H * p.D),
                   "r"(from), "r"(static_cast<uint32_t>(p.D * 4))
                   : "memory");
    }
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    __threadfence();  // the adds before the counter, for the next block's acquire
    __syncwarp();
    if (lane == 0) asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(counter) : "memory");
    NamedBarrier::arrive(kThreads, kDQEmpty);
  }
}

template <class Element, int kHeadDim>
__global__ void __launch_bounds__(AttentionBackwardSm90Tiles<Element, kHeadDim>::kThreads, 1)
    attention_backward_sm90_kernel(
        const __grid_constant__ BackwardParams p, const __grid_constant__ Turns turns,
        const __grid_constant__ typename Sm90Backward<Element, kHeadDim>::TmaRows tma_q,
        const __grid_constant__ typename Sm90Backward<Element, kHeadDim>::TmaRows tma_do,
        const __grid_constant__ typename Sm90Backward<Element, kHeadDim>::TmaKeys tma_k,
        const __grid_constant__ typename Sm90Backward<Element, kHeadDim>::TmaKeys tma_v) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = AttentionBackwardSm90Tiles<Element, kHeadDim>;
  using K = Sm90Backward<Element, kHeadDim>;
  using Shared = typename K::Shared;
  constexpr int BM = T::kBlockM, BN = T::kBlockN;
  extern __shared__ unsigned char shared_bytes[];
  // Aligned to 1024 bytes by an offset from the array itself, so that every access stays a shared one.
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(shared_bytes));
  Shared& block = *reinterpret_cast<Shared*>(shared_bytes + (1024u - base % 1024u) % 1024u);
  const int tid = threadIdx.x;
  Problem pr;
  if (!problem_of(p, blockIdx.z, &pr)) return;  // invalid offsets: the packing check writes NaN
  const int64_t key_tiles = (pr.nk + BN - 1) / BN, x = blockIdx.x;
  if (x >= key_tiles) return;  // a shorter sequence than the grid's longest
  const int64_t n = sm90_key_tile_of(turns.reverse, x, key_tiles);
  // The row tiles the block sees and its turn on each, by every thread (steps, kMaxRowTiles).
  const int64_t row_tiles = (pr.nq + BM - 1) / BM;
  for (int64_t m = tid; m < row_tiles; m += T::kThreads) {
    const TileView view = sm90_tile_view(Mask32(p.mask), pr.nq, pr.nk, m, n);
    block.steps[m] = view.any ? sm90_turn_of(Mask32(p.mask), turns.reverse, pr.nq, pr.nk, m, x, key_tiles) +
                                    (view.all ? kWholeStep : 0)
                              : -1;
  }
  if (tid == 0) {
    block.problem = pr, block.key_tile = n;
    block.group = static_cast<int>(p.H / p.Hkv), block.row_tiles = static_cast<int>(row_tiles);
    ClusterTransactionBarrier::init(&block.kv_full, 1);
    for (int s = 0; s < T::kStages; ++s) {
      ClusterTransactionBarrier::init(&block.q_full[s], 1);
      ClusterTransactionBarrier::init(&block.do_full[s], 1);
      ClusterBarrier::init(&block.empty[s], 128 * T::kConsumers);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  if (tid < 128) {  // the producer warpgroup: one warp loads, one adds dQ, the others leave
    cutlass::arch::warpgroup_reg_dealloc<24>();
    if (tid < 32)
      load_tiles<Element, kHeadDim>(p, block, tma_q, tma_do, tma_k, tma_v);
    else if (tid < 64)
      add_dq<Element, kHeadDim>(p, block);
    return;
  }
  cutlass::arch::warpgroup_reg_alloc<240>();
  // The consumers' view of the block's shared memory and their index, opaque to the compiler: nothing they
  // compute from them is hoisted above the branch, where the producer's few registers would have to hold it.
  Shared& sh = *unhoisted(&block);
  int ctid = tid - 128;
  asm volatile("" : "+r"(ctid));
  const int group = ctid / 128;
  const bool packed = p.cu_seqlens_q != nullptr;
  Tensor sK = make_tensor(make_smem_ptr(sh.k), typename T::SmemKV{});
  Tensor sV = make_tensor(make_smem_ptr(sh.v), typename T::SmemKV{});
  [[maybe_unused]] Tensor sKt = make_tensor(make_smem_ptr(sh.k), typename T::SmemKt{});
  Tensor sQ = make_tensor(make_smem_ptr(sh.q), typename T::SmemRows{});
  Tensor sdO = make_tensor(make_smem_ptr(sh.dout), typename T::SmemRows{});
  [[maybe_unused]] Tensor sQt = make_tensor(make_smem_ptr(sh.q), typename T::SmemRowsT{});
  [[maybe_unused]] Tensor sdOt = make_tensor(make_smem_ptr(sh.dout), typename T::SmemRowsT{});
  Tensor sdS = make_tensor(make_smem_ptr(sh.ds), typename T::SmemDS{});
  typename T::MmaSdP mma_sdp;
  typename T::MmaKV mma_kv;
  typename T::MmaDQ mma_dq;
  auto thr_sdp = mma_sdp.get_thread_slice(ctid);
  auto thr_kv = mma_kv.get_thread_slice(ctid);
  auto thr_dq = mma_dq.get_thread_slice(ctid % (128 * T::kDQGroups));
  // The products' shared-memory descriptors, made where each is issued from addresses the compiler cannot
  // hoist (unhoisted): kept through the loop they would take registers the score elements need.
  const auto smem = [](Element* data, auto layout) {
    return make_tensor(make_smem_ptr(unhoisted(data)), layout);
  };
  Tensor acc_dv = partition_fragment_C(mma_kv, Shape<Int<BN>, Int<kHeadDim>>{});
  Tensor acc_dk = partition_fragment_C(mma_kv, Shape<Int<BN>, Int<kHeadDim>>{});
  clear(acc_dv), clear(acc_dk);
  // Each thread's elements of S^T as (key, row) of the tile, and of dQ as (row, column).
  Tensor cS = thr_sdp.partition_C(make_identity_tensor(Shape<Int<BN>, Int<BM>>{}));
  Tensor tScS = make_tensor(cS.data(), gmma_accumulator_rows_cols(cS.layout()));
  Tensor cDQ = thr_dq.partition_C(make_identity_tensor(Shape<Int<BM>, Int<kHeadDim>>{}));
  Tensor acc_s = partition_fragment_C(mma_sdp, Shape<Int<BN>, Int<BM>>{});
  Tensor acc_dp = partition_fragment_C(mma_sdp, Shape<Int<BN>, Int<BM>>{});
  Tensor s = make_tensor(acc_s.data(), gmma_accumulator_rows_cols(acc_s.layout()));
  Tensor dp = make_tensor(acc_dp.data(), gmma_accumulator_rows_cols(acc_dp.layout()));
  Tensor probs = make_tensor_like<Element>(acc_s);  // P^T, rounded to the storage type
  Tensor grads = make_tensor_like<Element>(acc_s);  // dS^T
  Tensor tVrP = make_tensor(probs.data(), gmma_accumulator_as_operand_a(probs.layout()));
  Tensor tKrdS = make_tensor(grads.data(), gmma_accumulator_as_operand_a(grads.layout()));
  Tensor p_rc = make_tensor(probs.data(), gmma_accumulator_rows_cols(probs.layout()));
  Tensor ds_rc = make_tensor(grads.data(), gmma_accumulator_rows_cols(grads.layout()));

  ClusterTransactionBarrier::wait(&sh.kv_full, 0);
  if (const int cols = static_cast<int>(min<int64_t>(BN, sh.problem.nk - sh.key_tile * BN));
      packed && cols < BN) {
    // A packed sequence's last key tile: its rows past the sequence are the next one's keys (the TMA
    // zero-fills only past the tokens). Their probabilities and score gradients are 0, but 0 times an
    // infinite element is NaN: zeroed before any product reads them.
    NamedBarrier::sync(128 * T::kConsumers, kZeroBarrier);
    for (int i = ctid; i < (BN - cols) * kHeadDim; i += 128 * T::kConsumers)
      sK(cols + i / kHeadDim, i % kHeadDim) = Element(0.0f),
                                  sV(cols + i / kHeadDim, i % kHeadDim) = Element(0.0f);
    cutlass::arch::fence_view_async_shared();
    NamedBarrier::sync(128 * T::kConsumers, kZeroBarrier);
  }

  int stage = 0;
  uint32_t phase = 0;
  for (;;) {
    ClusterTransactionBarrier::wait(&sh.q_full[stage], phase);
    auto& r = sh.rows[stage];
    const int m = r.tile;
    if (m < 0) break;
    const int head = r.head;
    const Problem& pr = *unhoisted(&sh.problem);
    const int64_t n = sh.key_tile, key0 = n * BN;
    const int rows = static_cast<int>(min<int64_t>(BM, pr.nq - static_cast<int64_t>(m) * BM));
    if (ctid == 0) {  // the tile's dQ job (the adding warp is past this buffer's last one: kDQEmpty)
      sh.dq_job[stage].out = p.dq + ((pr.b * p.Q + pr.q0 + int64_t{m} * BM) * p.H + head) * p.D;
      sh.dq_job[stage].rows = rows;
      sh.dq_job[stage].counter =
          turns.counters + head * turns.lock_stride +
          sm90_turn_index(p.cu_seqlens_q != nullptr, pr.q0, blockIdx.z, m, turns.row_tiles);
      sh.dq_job[stage].turn = sh.steps[m] & (kWholeStep - 1);
    }
    const bool whole = r.whole != 0;
    // 0, opaque to the compiler: the elements' shared-memory offsets below are computed from it in each
    // step, not hoisted out of the loop into registers (one per element: more than the registers there are).
    int opaque = 0;
    asm volatile("" : "+r"(opaque));
    if (packed && rows < BM) {  // the rows past the sequence: the next one's, zeroed as the keys above
      ClusterTransactionBarrier::wait(&sh.do_full[stage], phase);
      NamedBarrier::sync(128 * T::kConsumers, kZeroBarrier);
      for (int i = ctid; i < (BM - rows) * kHeadDim; i += 128 * T::kConsumers) {
        sQ(rows + i / kHeadDim, i % kHeadDim, stage) = Element(0.0f);
        sdO(rows + i / kHeadDim, i % kHeadDim, stage) = Element(0.0f);
      }
      cutlass::arch::fence_view_async_shared();
      NamedBarrier::sync(128 * T::kConsumers, kZeroBarrier);
    }
    sm90_gemm(mma_sdp, thr_sdp.partition_fragment_A(smem(sh.k, typename T::SmemKV{})),
              thr_sdp.partition_fragment_B(smem(sh.q, typename T::SmemRows{}))(_, _, _, stage), acc_s,
              true);  // S^T = K Q^T
    // The rows' terms while the products run (the buffer's readers two tiles back are past the last tile's
    // terms barrier).
    write_terms(p, turns, pr, head, m, n, ctid, r.lse2, r.term, r.scale, r.band, &r.slope);
    ClusterTransactionBarrier::wait(&sh.do_full[stage], phase);
    sm90_gemm(mma_sdp, thr_sdp.partition_fragment_A(smem(sh.v, typename T::SmemKV{})),
              thr_sdp.partition_fragment_B(smem(sh.dout, typename T::SmemRows{}))(_, _, _, stage), acc_dp,
              true);                                         // dP^T = V dO^T
    NamedBarrier::sync(128 * T::kConsumers, kTermsBarrier);  // the terms are written
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_s);
    warpgroup_fence_operand(acc_dp);

    // P and dS per element (attention-inl.cuh pair_gradient's arithmetic, the bias from the band of the
    // tile's distances); 0 where masked, past the keys, and for a row with nothing visible or past the rows
    // (lse -inf). Each thread's elements: 2 keys (its accumulator rows) by 16 rows of the tile (its columns).
    const int cols = static_cast<int>(min<int64_t>(BN, pr.nk - key0));
    const int32_t q_first = static_cast<int32_t>(pr.nk - pr.nq + static_cast<int64_t>(m) * BM);  // default
    const int32_t key_first = static_cast<int32_t>(key0);
    CUTE_UNROLL
    for (int c = 0; c < size<1>(s); ++c) {
      const int row = get<1>(tScS(0, c)) + opaque;
      const float lse2 = r.lse2[row], term = r.term[row], scale = r.scale[row];
      CUTE_UNROLL
      for (int k = 0; k < size<0>(s); ++k) {
        const int key = get<0>(tScS(k, 0)) + opaque;
        const int32_t qp = q_first + row, kp = key_first + key;  // positions below 2^31
        float prob = 0, grad = 0, dlogit = 0;
        if ((whole || (key < cols && !Mask32(p.mask).masked(qp, kp))) && lse2 != -INFINITY) {
          const float dot = s(k, c);
          float bias = 0;  // position_bias, the lookup's entry read from the band
          if (p.terms.bias == ScoreBias::lookup) {
            bias = r.band[key - row + BM - 1];
          } else if (p.terms.bias == ScoreBias::alibi) {
            const int64_t d = int64_t{kp} - qp;
            const float a = static_cast<float>(d < 0 && p.terms.symmetric ? -d : d);
            bias = p.terms.symmetric ? -r.slope * a : r.slope * a;
          }
          const float logit = capped_logit(scale * dot, p.terms.softcap) + bias;
          prob = exp2f(logit * kLog2e - lse2);
          float slope = scale;
          if (p.terms.softcap > 0) {
            const float th = tanhf(scale * dot / p.terms.softcap);
            slope *= 1.0f - th * th;
          }
          dlogit = prob * (dp(k, c) - term);
          grad = dlogit * slope;
        }
        // Rounded to the storage type at once, so that S's and dP's registers are free as the loop goes.
        p_rc(k, c) = Element(prob), ds_rc(k, c) = Element(grad);
        if (p.bias_partials != nullptr) sh.logit_grads[row * T::kGradStride + key] = dlogit;
      }
    }
    warpgroup_fence_operand(tVrP);
    warpgroup_fence_operand(tKrdS);

    // dS^T into shared memory as dS (rows, keys), once both warpgroups' previous dQ products have read it.
    NamedBarrier::sync(128 * T::kConsumers, kDSBarrier);
    CUTE_UNROLL
    for (int i = 0; i < size(grads); ++i) sdS(get<1>(cS(i)) + opaque, get<0>(cS(i))) = grads(i);
    cutlass::arch::fence_view_async_shared();
    sm90_gemm(mma_kv, tVrP,
              thr_kv.partition_fragment_B(smem(sh.dout, typename T::SmemRowsT{}))(_, _, _, stage), acc_dv,
              false);  // dV += P^T dO
    sm90_gemm(mma_kv, tKrdS, thr_kv.partition_fragment_B(smem(sh.q, typename T::SmemRowsT{}))(_, _, _, stage),
              acc_dk,
              false);                                     // dK += dS^T Q
    NamedBarrier::sync(128 * T::kConsumers, kDSBarrier);  // dS is whole
    if (p.bias_partials != nullptr)  // while the products run (the tile's d logit is written: the barriers)
      add_table_gradient<T::kGradStride>(p, sh, stage, ctid);
    // dV and dK complete before dQ's accumulators are live (registers: P^T and dS^T are no longer read).
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_dv);
    warpgroup_fence_operand(acc_dk);
    warpgroup_fence_operand(tVrP);
    warpgroup_fence_operand(tKrdS);
    ClusterBarrier::arrive(&sh.empty[stage]);  // done with Q, dO and the rows' terms
    if (group < T::kDQGroups) {
      Tensor acc_dq = partition_fragment_C(mma_dq, Shape<Int<BM>, Int<kHeadDim>>{});
      sm90_gemm(mma_dq, thr_dq.partition_fragment_A(smem(sh.ds, typename T::SmemDS{})),
                thr_dq.partition_fragment_B(smem(sh.k, typename T::SmemKt{})), acc_dq, true);  // dQ = dS K
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc_dq);
      NamedBarrier::sync(128 * T::kDQGroups + 32, kDQEmpty);  // the adding warp is done with the last tile
      CUTE_UNROLL
      for (int i = 0; i < size(acc_dq); i += 2) {  // adjacent columns: one 8-byte store
        const int row = get<0>(cDQ(i)), col = get<1>(cDQ(i));
        *reinterpret_cast<float2*>(&sh.dq[row * Sm90Backward<Element, kHeadDim>::kDQStride + col]) =
            make_float2(acc_dq(i), acc_dq(i + 1));
      }
      cutlass::arch::fence_view_async_shared();  // the stores seen by the bulk reduction (the async proxy)
      NamedBarrier::arrive(128 * T::kDQGroups + 32, kDQFull);
    }
    if (++stage == T::kStages) stage = 0, phase ^= 1;
  }

  if (group < T::kDQGroups) {  // the adding warp's end
    NamedBarrier::sync(128 * T::kDQGroups + 32, kDQEmpty);
    if (ctid == 0) sh.dq_job[stage].rows = -1;
    NamedBarrier::arrive(128 * T::kDQGroups + 32, kDQFull);
  }

  // dK, dV rows of this block's keys (fp32, contiguous (B, K, Hkv, D) and (B, K, Hkv, Dv)); the padded
  // columns are not stored.
  Tensor cKV = thr_kv.partition_C(make_identity_tensor(Shape<Int<BN>, Int<kHeadDim>>{}));
  const int64_t t0 = sh.problem.k0 + sh.key_tile * BN, b = sh.problem.b;
  const int64_t first = (b * p.K + t0) * p.Hkv + blockIdx.y;
  const int64_t keys = min<int64_t>(BN, sh.problem.nk - sh.key_tile * BN);
  CUTE_UNROLL
  for (int i = 0; i < size(acc_dk); ++i) {
    const int key = get<0>(cKV(i)), d = get<1>(cKV(i));
    if (key >= keys) continue;
    const int64_t row = first + key * p.Hkv;
    if (d < p.D) store_key_gradient(p.dk_out, p.dk, row, p.D, b, t0 + key, blockIdx.y, d, acc_dk(i));
    if (d < p.Dv) store_key_gradient(p.dv_out, p.dv, row, p.Dv, b, t0 + key, blockIdx.y, d, acc_dv(i));
  }
#else
  __trap();  // compiled for a device without sm_90a's wgmma: attention_backward_sm90_fits never selects it
#endif
}

// With a query temperature: each query token's softmax scale, as the tiled passes' stage_rows computes it
// (default positions: row i of a problem at nk - nq + i; batch rows share them), a block per problem.
__global__ void row_scales_kernel(const __grid_constant__ BackwardParams p, float* out) {
  Problem pr;
  if (!problem_of(p, blockIdx.x, &pr)) return;
  for (int64_t i = threadIdx.x; i < pr.nq; i += blockDim.x) {
    const double f = detail::query_temperature_factor(p.temperature, p.temperature_scale, p.temperature_floor,
                                                      pr.nk - pr.nq + i);
    out[pr.q0 + i] = p.scale * static_cast<float>(f);
  }
}

template <class Element, int kHeadDim>
void launch_tiles(const AttentionBackwardLaunch& bl, const BackwardParams& p, const Turns& turns,
                  int64_t problems) {
  using K = Sm90Backward<Element, kHeadDim>;
  using T = typename K::T;
  const AttentionLaunch& l = bl.forward;
  const int B = static_cast<int>(l.B);
  const auto shape = [&](int64_t rows, int64_t dim, int64_t heads) {
    return Sm90GmemShape{static_cast<int>(rows), static_cast<int>(dim), static_cast<int>(heads), B};
  };
  const auto q = K::gmem(l.q, shape(l.Q, l.D, l.H), sm90_gmem_stride(l.q_strides, l.Q, l.H, l.B));
  const auto dout =
      K::gmem(bl.grad_out, shape(l.Q, l.Dv, l.H), sm90_gmem_stride(bl.grad_out_strides, l.Q, l.H, l.B));
  const auto k = K::gmem(l.k, shape(l.K, l.D, l.Hkv), sm90_gmem_stride(l.k_strides, l.K, l.Hkv, l.B));
  const auto v = K::gmem(l.v, shape(l.K, l.Dv, l.Hkv), sm90_gmem_stride(l.v_strides, l.K, l.Hkv, l.B));
  const auto rows_box = Shape<Int<T::kBlockM>, Int<kHeadDim>>{};
  const auto keys_box = Shape<Int<T::kBlockN>, Int<kHeadDim>>{};
  const typename K::TmaRows tma_q =
      make_tma_copy(SM90_TMA_LOAD{}, q, take<0, 2>(typename T::SmemRows{}), rows_box, _1{});
  const typename K::TmaRows tma_do =
      make_tma_copy(SM90_TMA_LOAD{}, dout, take<0, 2>(typename T::SmemRows{}), rows_box, _1{});
  const typename K::TmaKeys tma_k = make_tma_copy(SM90_TMA_LOAD{}, k, typename T::SmemKV{}, keys_box, _1{});
  const typename K::TmaKeys tma_v = make_tma_copy(SM90_TMA_LOAD{}, v, typename T::SmemKV{}, keys_box, _1{});
  auto kernel = attention_backward_sm90_kernel<Element, kHeadDim>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, K::kSharedBytes);
  check_launch("attention_backward", "cudaFuncSetAttribute");
  const dim3 grid(static_cast<unsigned>((l.K + T::kBlockN - 1) / T::kBlockN), static_cast<unsigned>(l.Hkv),
                  static_cast<unsigned>(problems));
  kernel<<<grid, T::kThreads, K::kSharedBytes, static_cast<cudaStream_t>(cuda_stream())>>>(
      p, turns, tma_q, tma_do, tma_k, tma_v);
  check_launch("attention_backward", "the sm_90a backward kernel");
}

// The head tile of a launch: q / k and v zero-padded to 64 or 128 columns (0: wider heads).
int64_t head_tile(const AttentionLaunch& l) {
  if (l.D > 128 || l.Dv > 128) return 0;
  return l.D <= 64 && l.Dv <= 64 ? 64 : 128;
}

// The learned table's partial sums: slots per head (sm90_table_slot), batch rows or packed sequences.
int64_t table_slots(const AttentionLaunch& l, int64_t problems) {
  const int64_t key_tiles = (l.K + 127) / 128;
  return l.cu_seqlens_q != nullptr ? key_tiles + problems : problems * key_tiles;
}

int64_t block_shared_bytes(int64_t tile) {
  return tile == 64 ? Sm90Backward<cutlass::bfloat16_t, 64>::kSharedBytes
                    : Sm90Backward<cutlass::bfloat16_t, 128>::kSharedBytes;
}

}  // namespace

bool attention_backward_sm90_fits(const AttentionBackwardLaunch& bl, bool fill_required) {
  const AttentionLaunch& l = bl.forward;
  const int64_t tile = head_tile(l);
  if (tile == 0 || !l.default_positions) return false;
  if (l.shaw_a_k != nullptr || l.xl_u != nullptr || l.xl_w_r != nullptr) return false;
  if (l.Q < 1 || l.K < 1 || l.B < 1 || l.H < 1 || l.Hkv < 1 || l.H % l.Hkv != 0) return false;
  if (l.Q > INT32_MAX || l.K > INT32_MAX || l.H > 65535 || l.Hkv > 65535 || l.B > 65535) return false;
  if ((l.Q + 63) / 64 > kMaxRowTiles) return false;  // the block's table of row tiles (steps)
  if (l.D % 4 != 0) return false;                    // dQ's rows added by 16-byte bulk reductions
  // What the TMA can describe.
  if (!sm90_tma_rows(l.q, l.q_strides, l.Q, l.H, l.B) || !sm90_tma_rows(l.k, l.k_strides, l.K, l.Hkv, l.B) ||
      !sm90_tma_rows(l.v, l.v_strides, l.K, l.Hkv, l.B) ||
      !sm90_tma_rows(bl.grad_out, bl.grad_out_strides, l.Q, l.H, l.B))
    return false;
  const int64_t problems = l.cu_seqlens_q != nullptr ? l.sequences : l.B;
  if (problems < 1 || problems > 65535) return false;
  // The learned table's gradient: partial sums per block of keys and head, all at once (the tiled passes
  // take the launches that need more, in waves).
  if (bl.grad_table != nullptr &&
      table_slots(l, problems) * l.H * (2 * l.bias.limit + 1) * 4 > attention_table_partial_bytes)
    return false;
  const int64_t key_tiles = (l.K + 127) / 128;
  if (fill_required && key_tiles * l.Hkv * (l.cu_seqlens_q != nullptr ? 1 : l.B) < multiprocessor_count())
    return false;
  return block_shared_bytes(tile) <= max_shared_bytes_per_block() && attention_sm90_available();
}

void attention_backward_sm90(const AttentionBackwardLaunch& bl, BackwardParams p, int64_t problems,
                             float* table_sums) {
  const AttentionLaunch& l = bl.forward;
  const int64_t tile = head_tile(l);
  ++attention_sm90_backward_launches;
  const cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream());
  // The learned table's gradient: each block's sums per head of its group, zeroed (blocks past a shorter
  // sequence's keys add nothing), then added into table_sums in slot order.
  const int64_t slots = table_slots(l, problems), entries = 2 * int64_t{p.terms.limit} + 1;
  DeviceScratch partials("attention_backward", "the table gradient's partial sums",
                         table_sums != nullptr ? static_cast<size_t>(slots * l.H * entries) * 4 : 0);
  p.bias_partials = table_sums != nullptr ? partials.as<float>() : nullptr;
  if (table_sums != nullptr) partials.zero();
  // The turns' counters, zeroed: per query head, one per row tile of each problem.
  const int64_t row_tiles = (l.Q + 63) / 64;
  const int64_t stride = l.cu_seqlens_q != nullptr ? row_tiles + problems + 1 : problems * row_tiles;
  DeviceScratch counters("attention_backward", "the dQ turns' counters",
                         static_cast<size_t>(l.H * stride) * 4);
  counters.zero();
  const bool temperature = p.temperature != QueryTemperature::Kind::none;
  DeviceScratch scales("attention_backward", "the rows' scales",
                       temperature ? static_cast<size_t>(l.Q) * 4 : 0);
  if (temperature) {
    row_scales_kernel<<<static_cast<unsigned>(l.cu_seqlens_q != nullptr ? problems : 1), 256, 0, stream>>>(
        p, scales.as<float>());
    check_launch("attention_backward", "the row scales kernel");
  }
  // A causal mask: the key tiles from the last, so that a row tile's first visitor is its diagonal's.
  const Turns turns{counters.as<int>(), stride, row_tiles, l.mask.causal,
                    temperature ? scales.as<float>() : nullptr};
  const bool bf16 = l.dtype == DType::bf16;
#ifdef POSENC_SM90_BACKWARD_ONE
  (void)bf16, (void)tile;
  launch_tiles<cutlass::bfloat16_t, POSENC_SM90_BACKWARD_ONE>(bl, p, turns, problems);
#else
  if (tile == 64)
    bf16 ? launch_tiles<cutlass::bfloat16_t, 64>(bl, p, turns, problems)
         : launch_tiles<cutlass::half_t, 64>(bl, p, turns, problems);
  else
    bf16 ? launch_tiles<cutlass::bfloat16_t, 128>(bl, p, turns, problems)
         : launch_tiles<cutlass::half_t, 128>(bl, p, turns, problems);
#endif
  if (table_sums != nullptr) {
    sum_partials_kernel<<<static_cast<unsigned>(l.H), 256, 0, stream>>>(partials.as<float>(), slots, l.H,
                                                                        entries, table_sums);
    check_launch("attention_backward", "the table gradient's sum kernel");
  }
}

}  // namespace backward
}  // namespace posenc::cuda
