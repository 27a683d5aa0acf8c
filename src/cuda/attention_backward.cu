// src/cuda/attention_backward.cu: the attention backward on the GPU, FlashAttention-2's (Dao 2023)
// recomputation on CuTe's SM80 atoms (src/cuda/attention_tiles.cuh AttentionBackwardTiles), deterministic: no
// float atomics, every sum in an order fixed by the shapes.
//   rows:  D_i = sum_d dO_id O_id per query row (the softmax's backward term).
//   keys:  a block per (64 keys, kv head, batch row or sequence) walks the query heads of its group and their
//   row
//          blocks: S = Q K^T, P = exp(logit - lse) (the forward's logits: attention-inl.cuh), dP = dO V^T,
//          dlogit = P (dP - D_i), dS = dlogit d(logit)/d(q.k) (the row's scale, times 1 - tanh^2 under a
//          softcap); dV += P^T dO, dK += dS^T Q, kept in registers: each key row's gradient is owned by one
//          block.
//   queries: a block per (64 rows, head, batch row or sequence) walks the key tiles: S, P, dP, dS again, dQ
//   += dS K.
// P and dS are rounded to the storage type for the tensor cores (as the forward's P), gradients are written
// in fp32 (dq, dk, dv scratch) and added into the caller's views by the front end, after RoPE's inverse
// rotation.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cute/tensor.hpp>
#include <memory>
#include <type_traits>
#include <cutlass/numeric_types.h>

#include "posenc/device.h"
#include "src/cuda/attention.h"
#include "src/cuda/attention_tiles.cuh"
#include "src/cuda/device.h"
#include "src/query_temperature.h"

namespace posenc::cuda {
namespace {
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
  float* dk;  // (B, K, Hkv, D)
  float* dv;  // (B, K, Hkv, Dv)
  // The learned table's gradient: (problems, key blocks, H, 2 limit + 1) partial sums over the lookup's
  // distances, one per keys-pass block and head; null: not wanted.
  float* bias_partials;
  int64_t first_key_tile;  // the keys pass's blocks cover key tiles first_key_tile + blockIdx.x (a wave)
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
  float bias_grad[AttentionBackwardTiles<Element, kHeadDim>::kWarps][kMaxDeviceRowTable];  // per warp
  float lane_values[AttentionBackwardTiles<Element, kHeadDim>::kWarps][32];
};
// The widest tiles (256 columns) with a learned table's lookup and per-warp sums still fit an SM90's 227 KB.
static_assert(sizeof(BackwardShared<cutlass::bfloat16_t, 256>) <= 227 * 1024);

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
// element from its (row, col): the forward's logit, P = 2^(logit log2 e - lse log2 e) (0 where masked, past
// the rows or keys, or for a row with nothing visible), dS = P (dP - D_i) times d(logit)/d(q.k).
// kScoreGradients false: P alone (the values-only keys pass; dp is not read).
template <bool kScoreGradients = true, class Shared, class Acc, class Coords>
__device__ __forceinline__ void probabilities_and_score_gradients(const BackwardParams& p,
                                                                  const ScoreTerms& terms, Shared& sh,
                                                                  const Acc& s, const Acc& dp,
                                                                  const Coords& coords, int rows, int cols,
                                                                  bool bias_gradient) {
  using Element = std::remove_reference_t<decltype(sh.p[0])>;
  auto sP = make_tensor(make_smem_ptr(sh.p), typename AttentionBackwardTiles<Element, 64>::SmemP{});
  auto sdS = make_tensor(make_smem_ptr(sh.ds), typename AttentionBackwardTiles<Element, 64>::SmemP{});
  CUTE_UNROLL
  for (int i = 0; i < size(s); ++i) {
    const int row = get<0>(coords(i)), col = get<1>(coords(i));
    float prob = 0, grad = 0, dlogit = 0;
    int idx = -1;
    const float lse2 = sh.row_lse2[row];
    if (row < rows && col < cols && lse2 != -INFINITY) {
      const float scale = sh.row_scale[row];
      const float logit =
          attention_logit(terms, p.mask, scale, s(i), sh.q_pos[row], sh.k_pos[col], sh.lookup);
      prob = exp2f(logit * kLog2e - lse2);  // 0 where masked (-inf), NaN for positions out of range
      if constexpr (!kScoreGradients) {
        sP(row, col) = Element(prob);
        continue;
      }
      float slope = scale;  // d(logit) / d(q.k)
      if (terms.softcap > 0) {
        const float t = tanhf(scale * s(i) / terms.softcap);
        slope *= 1.0f - t * t;
      }
      dlogit = prob * (dp(i) - sh.row_term[row]);
      grad = dlogit * slope;
      if (terms.bias == ScoreBias::lookup) {
        const int64_t d = sh.k_pos[col] - sh.q_pos[row];
        idx = static_cast<int>((d < -terms.limit  ? -terms.limit
                                : d > terms.limit ? terms.limit
                                                  : d) +
                               terms.limit);
      }
    }
    sP(row, col) = Element(prob);
    if constexpr (!kScoreGradients) continue;
    sdS(row, col) = Element(grad);
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

// Which gradients a keys pass makes: both, or (tiles wider than 128 columns, whose dK and dV accumulators
// together would spill) dV in one pass and dK, with the table's, in another, each recomputing S.
enum KeysPass { kKeysAndValues, kValuesOnly, kKeysOnly };

// The keys pass: dK, dV of 64 keys of kv head hk, over the query heads of its group and all their rows.
template <class Element, int kHeadDim, KeysPass kPass>
__global__ void __launch_bounds__(AttentionBackwardTiles<Element, kHeadDim>::kThreads)
    keys_kernel(const __grid_constant__ BackwardParams p) {
  constexpr bool kValues = kPass != kKeysOnly, kKeys = kPass != kValuesOnly;
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
  const int64_t hk = blockIdx.y, group = p.H / p.Hkv;
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
      cp_async_fence();
      cp_async_wait<0>();
      __syncthreads();

      Tensor s = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});
      Tensor dp = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});
      clear(s), clear(dp);
      smem_gemm(mma, s, sQ, sK, sQ, sK, copy_n_a, copy_n_b);                          // S = Q K^T
      if constexpr (kKeys) smem_gemm(mma, dp, sdO, sV, sdO, sV, copy_n_a, copy_n_b);  // dP = dO V^T
      probabilities_and_score_gradients<kKeys>(p, terms, sh, s, dp, cS, rows, cols, table_gradient);
      __syncthreads();
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
  }
  cp_async_wait<0>();
  // dK, dV rows of this block's keys (fp32, contiguous (B, K, Hkv, D) and (B, K, Hkv, Dv)); the padded
  // columns are not stored.
  Tensor cO = thr.partition_C(make_identity_tensor(Shape<Int<BN>, Int<kHeadDim>>{}));
  const int64_t key0 = (pr.b * p.K + pr.k0 + col0) * p.Hkv + hk;
  CUTE_UNROLL
  for (int i = 0; i < size(acc_dk); ++i) {
    const int key = get<0>(cO(i)), d = get<1>(cO(i));
    if (key >= cols) continue;
    const int64_t row = key0 + key * p.Hkv;
    if (kKeys && d < p.D) p.dk[row * p.D + d] = acc_dk(i);
    if (kValues && d < p.Dv) p.dv[row * p.Dv + d] = acc_dv(i);
  }
}

// The queries pass: dQ of 64 rows of head h over every key tile the mask shows.
template <class Element, int kHeadDim>
__global__ void __launch_bounds__(AttentionBackwardTiles<Element, kHeadDim>::kThreads)
    queries_kernel(const __grid_constant__ BackwardParams p) {
  using T = AttentionBackwardTiles<Element, kHeadDim>;
  constexpr int BM = T::kBlockM, BN = T::kBlockN;
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  auto& sh = *reinterpret_cast<BackwardShared<Element, kHeadDim>*>(shared_bytes);
  const int tid = threadIdx.x;
  Problem pr;
  if (!problem_of(p, blockIdx.z, &pr)) return;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * BM;
  if (row0 >= pr.nq) return;
  const int rows = static_cast<int>(min<int64_t>(BM, pr.nq - row0));
  const int64_t h = blockIdx.y, hk = h / (p.H / p.Hkv);
  ScoreTerms terms = p.terms;
  terms.slope = p.slopes[terms.bias == ScoreBias::alibi ? h : 0];
  if (terms.bias == ScoreBias::lookup)
    for (int i = tid; i < 2 * terms.limit + 1; i += T::kThreads)
      sh.lookup[i] = p.lookup[h * (2 * terms.limit + 1) + i];
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
    cp_async_fence();
    cp_async_wait<0>();
    __syncthreads();
    Tensor s = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});
    Tensor dp = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});
    clear(s), clear(dp);
    smem_gemm(mma, s, sQ, sK, sQ, sK, copy_n_a, copy_n_b);     // S = Q K^T
    smem_gemm(mma, dp, sdO, sV, sdO, sV, copy_n_a, copy_n_b);  // dP = dO V^T
    probabilities_and_score_gradients(p, terms, sh, s, dp, cS, rows, cols, false);
    __syncthreads();
    smem_gemm(mma, acc_dq, sdS, sKt, sdS, sKtPlain, copy_n_a, copy_t_b);  // dQ += dS K
  }
  cp_async_wait<0>();
  Tensor cO = thr.partition_C(make_identity_tensor(Shape<Int<BM>, Int<kHeadDim>>{}));
  const int64_t base = ((pr.b * p.Q + pr.q0 + row0) * p.H + h) * p.D;
  CUTE_UNROLL
  for (int i = 0; i < size(acc_dq); ++i) {
    const int row = get<0>(cO(i)), d = get<1>(cO(i));
    if (row < rows && d < p.D) p.dq[base + row * p.H * p.D + d] = acc_dq(i);
  }
}

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

// grad (B, T, H, D) of `dtype` at `strides` += g (contiguous fp32): each element added in fp32, rounded once.
__global__ void accumulate_kernel(const float* g, void* grad, DType dtype, int64_t s0, int64_t s1, int64_t s2,
                                  int64_t T, int64_t H, int64_t D, int64_t total) {
  for (int64_t i = threadIdx.x + static_cast<int64_t>(blockIdx.x) * blockDim.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t d = i % D, h = (i / D) % H, t = (i / (D * H)) % T, b = i / (D * H * T);
    const int64_t at = b * s0 + t * s1 + h * s2 + d;
    if (dtype == DType::f32) {
      static_cast<float*>(grad)[at] += g[i];
    } else if (dtype == DType::bf16) {
      cutlass::bfloat16_t& x = static_cast<cutlass::bfloat16_t*>(grad)[at];
      x = cutlass::bfloat16_t(static_cast<float>(x) + g[i]);
    } else {
      cutlass::half_t& x = static_cast<cutlass::half_t*>(grad)[at];
      x = cutlass::half_t(static_cast<float>(x) + g[i]);
    }
  }
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
// sums (H, n) += the partials (blocks, H, n) of one wave of the keys pass, in block order: a block per head.
__global__ void sum_partials_kernel(const float* partials, int64_t blocks, int64_t H, int64_t n,
                                    float* sums) {
  const int64_t h = blockIdx.x;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float sum = sums[h * n + i];
    for (int64_t b = 0; b < blocks; ++b) sum += partials[(b * H + h) * n + i];
    sums[h * n + i] = sum;
  }
}

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

template <class Element, int kHeadDim, class Kernel>
void launch_pass(Kernel kernel, const BackwardParams& params, dim3 grid, const char* what) {
  using T = AttentionBackwardTiles<Element, kHeadDim>;
  constexpr int bytes = sizeof(BackwardShared<Element, kHeadDim>);
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

template <class Element, int kHeadDim>
void launch_backward(BackwardParams p, int64_t problems, const KeyWaves& waves) {
  const unsigned z = static_cast<unsigned>(problems);
  const cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream());
  const int64_t key_tiles = (p.K + 63) / 64;
  for (int64_t first = 0; first < key_tiles; first += waves.width) {
    const int64_t width = std::min(waves.width, key_tiles - first);
    p.first_key_tile = first;
    const dim3 keys_grid(static_cast<unsigned>(width), static_cast<unsigned>(p.Hkv), z);
    if (waves.partials != nullptr)
      cudaMemsetAsync(waves.partials, 0, static_cast<size_t>(problems * width * p.H * waves.n) * 4, stream);
    if constexpr (kHeadDim <= 128) {
      launch_pass<Element, kHeadDim>(keys_kernel<Element, kHeadDim, kKeysAndValues>, p, keys_grid,
                                     "the keys pass (dK, dV)");
    } else {
      launch_pass<Element, kHeadDim>(keys_kernel<Element, kHeadDim, kValuesOnly>, p, keys_grid,
                                     "the keys pass (dV)");
      launch_pass<Element, kHeadDim>(keys_kernel<Element, kHeadDim, kKeysOnly>, p, keys_grid,
                                     "the keys pass (dK)");
    }
    if (waves.partials != nullptr) {
      sum_partials_kernel<<<static_cast<unsigned>(p.H), 256, 0, stream>>>(waves.partials, problems * width,
                                                                          p.H, waves.n, waves.sums);
      check_launch("attention_backward", "the table gradient's sum kernel");
    }
  }
  launch_pass<Element, kHeadDim>(queries_kernel<Element, kHeadDim>, p,
                                 dim3(static_cast<unsigned>((p.Q + 63) / 64), static_cast<unsigned>(p.H), z),
                                 "the queries pass (dQ)");
}

unsigned blocks_for(int64_t total, int threads) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>((total + threads - 1) / threads, 65535)));
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
  // The learned table's gradient: partial sums per keys-pass block, in waves of at most
  // attention_table_partial_bytes.
  const int64_t key_tiles = (l.K + 63) / 64;
  KeyWaves waves;
  waves.width = std::max<int64_t>(key_tiles, 1);
  std::unique_ptr<DeviceScratch> partials, sums;
  if (bl.grad_table != nullptr && problems > 0 && l.H > 0) {
    waves.n = 2 * l.bias.limit + 1;
    const int64_t per_tile = problems * l.H * waves.n * 4;
    waves.width = std::clamp<int64_t>(attention_table_partial_bytes / per_tile, 1, waves.width);
    partials = std::make_unique<DeviceScratch>("attention_backward", "the table gradient's partial sums",
                                               static_cast<size_t>(waves.width * per_tile));
    sums = std::make_unique<DeviceScratch>("attention_backward", "the table gradient's sums",
                                           static_cast<size_t>(l.H * waves.n) * 4);
    sums->zero();
    waves.partials = partials->as<float>(), waves.sums = sums->as<float>();
    p.bias_partials = waves.partials;
  }
  if (problems > 0 && l.H > 0) {
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
    poison_on_bad_packing_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(
        l.cu_seqlens_q, l.cu_seqlens_k, l.sequences, l.Q, l.K, bl.dq, n, bl.grad_sinks, l.H,
        bl.grad_sinks_stride, bl.grad_table, bl.table_rows, l.H, bl.grad_table_strides[0],
        bl.grad_table_strides[1]);
    check_launch("attention_backward", "the packing check kernel");
  }
}

void accumulate_gradient(const float* g, void* grad, DType dtype, const int64_t strides[3], int64_t B,
                         int64_t T, int64_t H, int64_t D) {
  const int64_t total = B * T * H * D;
  if (total == 0) return;
  accumulate_kernel<<<blocks_for(total, 256), 256, 0, static_cast<cudaStream_t>(cuda_stream())>>>(
      g, grad, dtype, strides[0], strides[1], strides[2], T, H, D, total);
  check_launch("attention_backward", "the gradient accumulation kernel");
}

}  // namespace posenc::cuda
