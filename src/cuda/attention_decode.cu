// src/cuda/attention_decode.cu: the attention forward for decoding rows (a few query rows per head against a
// long cache: flash-decoding, Dao et al. 2023) on the CUDA cores, the query heads of a key/value group packed
// into one block, so that each key and value row is read once per block rather than once per query head
// (grouped-query attention reads its cache `group` times less). A block per (split of the keys, kv head,
// batch row) takes its R = Q x group rows (row r: query r / group of head hk group + r % group) and walks its
// keys in tiles of 128:
//   1. each thread a key: q . k for every row in fp32 (q staged in shared memory as fp32, k read as 16-byte
//      vectors), then the logit with every score term (attention_logit: scale with the row's temperature,
//      softcap, ALiBi or the learned lookup of the row's head, the mask; NaN for positions out of range);
//   2. per row (a warp per row), the online softmax's new max and sum (exp2 of logit log2 e minus the max,
//      Milakov & Gimelshein 2018), the tile's probabilities left in shared memory;
//   3. each thread 8 value columns of some rows: acc = acc corr + sum_j p_j v_j, v read as 16-byte vectors.
// Tiles whose keys the mask hides from every row are skipped before their keys are read (a sliding window's
// decode reads the window only). The splits' partial rows are those of the tiled kernel
// (src/cuda/attention.cu merges them in split order: the same bits run to run); one split ends its rows
// itself (finish_row).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <cutlass/numeric_types.h>

#include "posenc/device.h"
#include "src/cuda/attention.h"
#include "src/cuda/device.h"
#include "src/query_temperature.h"

namespace posenc::cuda {
namespace {

constexpr int kThreads = 128, kWarps = kThreads / 32, kTileKeys = 128;
// Rows per block, and per thread of the values pass (at least kThreads / 32 row groups: Dv <= 256).
constexpr int kMaxRows = static_cast<int>(kMaxDecodeRows), kRowsPerThread = kMaxRows / (kThreads / 32);
constexpr float kLog2e = 1.4426950408889634f;

// The kernel's view of the launch (trivially copyable: a kernel parameter).
struct DecodeParams {
  int64_t B, Q, K, H, Hkv;
  int D, Dv;
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
  float scale;
  detail::AttentionMask mask;
  QueryTemperature::Kind temperature;
  double temperature_scale, temperature_floor;
  const float* sinks;
  int64_t sinks_stride;
  ScoreTerms terms;
  const float* lookup;
  float* partial_out;  // (B, H, Q, splits, Dv) and (B, H, Q, splits) with more than one split
  MaxSum* partial_max_sum;
  float slopes[kMaxAttentionHeads];
};

template <class Element>
__device__ __forceinline__ void widen8(const uint4& raw, float* x) {
  const Element* e = reinterpret_cast<const Element*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] = static_cast<float>(e[i]);
}

template <int kMaxD>
struct alignas(16) DecodeShared {
  float q[kMaxRows][kMaxD];
  float p[kMaxRows][kTileKeys];  // a tile's logits (log2 units), then its probabilities
  int64_t k_pos[kTileKeys];
  int64_t q_pos[kMaxRows];
  float scale[kMaxRows], max[kMaxRows], sum[kMaxRows], corr[kMaxRows];
};

template <class Element, int kMaxD>
__global__ void __launch_bounds__(kThreads) decode_kernel(const __grid_constant__ DecodeParams p) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  auto& sh = *reinterpret_cast<DecodeShared<kMaxD>*>(shared_bytes);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int64_t split = blockIdx.x, hk = blockIdx.y, b = blockIdx.z, group = p.H / p.Hkv;
  const int R = static_cast<int>(p.Q * group), D = p.D, Dv = p.Dv;
  const auto head_of = [&](int r) { return hk * group + r % group; };
  const auto query_of = [&](int r) { return static_cast<int64_t>(r / group); };

  // The rows: q as fp32, positions, scales (times the row's temperature), and the running max and sum.
  for (int i = tid; i < R * D; i += kThreads) {
    const int r = i / D, c = i % D;
    const Element* q = static_cast<const Element*>(p.q) + b * p.q_strides[0] + query_of(r) * p.q_strides[1] +
                       head_of(r) * p.q_strides[2];
    sh.q[r][c] = static_cast<float>(q[c]);
  }
  if (tid < R) {
    const int64_t qp = p.q_pos[b * p.q_pos_stride + query_of(tid)];
    sh.q_pos[tid] = qp;
    sh.scale[tid] = p.scale * static_cast<float>(detail::query_temperature_factor(
                                  p.temperature, p.temperature_scale, p.temperature_floor, qp));
    sh.max[tid] = -INFINITY, sh.sum[tid] = 0;
  }
  // This thread's output columns: chunk c (8 columns) of rows rg, rg + row_groups, ...
  const int chunks = Dv / 8, row_groups = kThreads / chunks;
  const int chunk = tid % chunks, row_group = tid / chunks;
  const bool writes = row_group < row_groups;
  float acc[kRowsPerThread][8] = {};

  const int64_t tiles = (p.K + kTileKeys - 1) / kTileKeys, per_split = (tiles + gridDim.x - 1) / gridDim.x;
  const int64_t key_end = min(p.K, (split + 1) * per_split * kTileKeys);
  const Element* k_base = static_cast<const Element*>(p.k) + b * p.k_strides[0] + hk * p.k_strides[2];
  const Element* v_base = static_cast<const Element*>(p.v) + b * p.v_strides[0] + hk * p.v_strides[2];
  __syncthreads();
  for (int64_t key0 = split * per_split * kTileKeys; key0 < key_end; key0 += kTileKeys) {
    // 1. Positions first: a tile no row sees is skipped before its keys are read.
    const int64_t j = key0 + tid;
    const bool key = j < key_end;
    const int64_t kp = key ? p.k_pos[b * p.k_pos_stride + j] : 0;
    bool seen = false;
    for (int r = 0; r < R && key && !seen; ++r)
      seen =
          !p.mask.masked(sh.q_pos[r], kp) || !position_in_range(sh.q_pos[r], 0) || !position_in_range(kp, 0);
    if (!__syncthreads_or(seen)) continue;  // also: every thread is done with the previous tile
    float dot[kMaxRows] = {};
    if (key) {
      const Element* k_row = k_base + j * p.k_strides[1];
      for (int c = 0; c < D; c += 8) {
        float kx[8];
        widen8<Element>(*reinterpret_cast<const uint4*>(k_row + c), kx);
#pragma unroll
        for (int r = 0; r < kMaxRows; ++r) {
          if (r >= R) break;
#pragma unroll
          for (int e = 0; e < 8; ++e) dot[r] = fmaf(sh.q[r][c + e], kx[e], dot[r]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kMaxRows; ++r) {
      if (r >= R) break;
      const int64_t h = head_of(r);
      ScoreTerms terms = p.terms;
      terms.slope = p.slopes[terms.bias == ScoreBias::alibi ? h : 0];
      const float* lookup = terms.bias == ScoreBias::lookup ? p.lookup + h * (2 * terms.limit + 1) : nullptr;
      const float logit =
          key ? attention_logit(terms, p.mask, sh.scale[r], dot[r], sh.q_pos[r], kp, lookup) : -INFINITY;
      sh.p[r][tid] = logit * kLog2e;
    }
    __syncthreads();
    // 2. Per row, a warp: the new max, the tile's probabilities and the row's sum.
    for (int r = warp; r < R; r += kWarps) {
      float x[kTileKeys / 32], top = -INFINITY;
#pragma unroll
      for (int c = 0; c < kTileKeys / 32; ++c) x[c] = sh.p[r][lane + 32 * c], top = fmaxf(top, x[c]);
      for (int o = 16; o > 0; o /= 2) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, o));
      const float old = sh.max[r], next = fmaxf(old, top);
      float sum = 0;
#pragma unroll
      for (int c = 0; c < kTileKeys / 32; ++c) {
        const float prob = next == -INFINITY ? 0.0f : exp2f(x[c] - next);
        sh.p[r][lane + 32 * c] = prob;
        sum += prob;
      }
      for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      const float corr = next == -INFINITY ? 1.0f : exp2f(old - next);
      __syncwarp();
      if (lane == 0) sh.corr[r] = corr, sh.max[r] = next, sh.sum[r] = sh.sum[r] * corr + sum;
    }
    __syncthreads();
    // 3. acc = acc corr + P V for this thread's rows and columns.
    if (writes) {
#pragma unroll
      for (int k = 0; k < kRowsPerThread; ++k) {
        const int r = row_group + k * row_groups;
        if (r >= R) break;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[k][e] *= sh.corr[r];
      }
      const int keys = static_cast<int>(key_end - key0 < kTileKeys ? key_end - key0 : kTileKeys);
      for (int t = 0; t < keys; ++t) {
        float vx[8];
        widen8<Element>(*reinterpret_cast<const uint4*>(v_base + (key0 + t) * p.v_strides[1] + chunk * 8),
                        vx);
#pragma unroll
        for (int k = 0; k < kRowsPerThread; ++k) {
          const int r = row_group + k * row_groups;
          if (r >= R) break;
          const float prob = sh.p[r][t];
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[k][e] = fmaf(prob, vx[e], acc[k][e]);
        }
      }
    }
  }
  __syncthreads();
  if (!writes) return;
// The rows' ends: partial rows for the merge, or out and lse.
#pragma unroll
  for (int k = 0; k < kRowsPerThread; ++k) {
    const int r = row_group + k * row_groups;
    if (r >= R) break;
    const int64_t h = head_of(r), i = query_of(r);
    float m = sh.max[r], sum = sh.sum[r];
    if (!position_in_range(sh.q_pos[r], 0)) sum = quiet_nan();
    if (gridDim.x > 1) {
      const int64_t partial = ((b * p.H + h) * p.Q + i) * gridDim.x + split;
      float* o = p.partial_out + partial * Dv + chunk * 8;
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] = acc[k][e];
      if (chunk == 0) p.partial_max_sum[partial] = MaxSum{m, sum};
      continue;
    }
    const bool has_sink = p.sinks != nullptr;
    RowEnd end = finish_row(m, sum, has_sink, has_sink ? p.sinks[h * p.sinks_stride] : 0.0f);
    Element* out = static_cast<Element*>(p.out) + b * p.out_strides[0] + i * p.out_strides[1] +
                   h * p.out_strides[2] + chunk * 8;
#pragma unroll
    for (int e = 0; e < 8; ++e) out[e] = Element(acc[k][e] * end.out_factor);
    if (p.lse != nullptr && chunk == 0)
      p.lse[b * p.lse_strides[0] + h * p.lse_strides[1] + i * p.lse_strides[2]] = end.lse;
  }
}

template <class Element, int kMaxD>
void launch(const DecodeParams& p, int64_t splits) {
  const int bytes = static_cast<int>(sizeof(DecodeShared<kMaxD>));
  cudaFuncSetAttribute(decode_kernel<Element, kMaxD>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  check_launch("attention", "cudaFuncSetAttribute");
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(p.Hkv), static_cast<unsigned>(p.B));
  decode_kernel<Element, kMaxD><<<grid, kThreads, bytes, static_cast<cudaStream_t>(cuda_stream())>>>(p);
  check_launch("attention", "the decoding kernel");
}

}  // namespace

bool attention_decode_fits(const AttentionLaunch& l) {
  return l.shaw_a_k == nullptr && l.xl_w_r == nullptr && l.cu_seqlens_q == nullptr &&
         l.Q * (l.H / l.Hkv) <= kMaxDecodeRows && std::max(l.D, l.Dv) <= 256;
}

int64_t attention_decode_splits(const AttentionLaunch& l) {
  const int64_t sms = multiprocessor_count();
  if (sms == 0) return 1;
  const int64_t blocks = std::max<int64_t>(l.Hkv * l.B, 1), tiles = (l.K + kTileKeys - 1) / kTileKeys;
  return std::clamp<int64_t>(std::min<int64_t>((2 * sms + blocks - 1) / blocks, tiles / 2), 1, 64);
}

void attention_decode(const AttentionLaunch& l, const ScoreTerms& terms, const float* slopes,
                      const float* lookup, int64_t splits, float* partial_out, MaxSum* partial_max_sum) {
  auto params = std::make_unique<DecodeParams>();
  DecodeParams& p = *params;
  p.B = l.B, p.Q = l.Q, p.K = l.K, p.H = l.H, p.Hkv = l.Hkv;
  p.D = static_cast<int>(l.D), p.Dv = static_cast<int>(l.Dv);
  p.q = l.q, p.k = l.k, p.v = l.v, p.out = l.out, p.lse = l.lse;
  for (int i = 0; i < 3; ++i) {
    p.q_strides[i] = l.q_strides[i], p.k_strides[i] = l.k_strides[i], p.v_strides[i] = l.v_strides[i];
    p.out_strides[i] = l.out_strides[i], p.lse_strides[i] = l.lse_strides[i];
  }
  p.q_pos = l.q_pos, p.k_pos = l.k_pos, p.q_pos_stride = l.q_pos_stride, p.k_pos_stride = l.k_pos_stride;
  p.scale = l.scale;
  p.mask = l.mask;
  p.temperature = l.temperature.kind;
  p.temperature_scale = l.temperature.scale, p.temperature_floor = l.temperature.floor_scale;
  p.sinks = l.sinks, p.sinks_stride = l.sinks_stride;
  p.terms = terms;
  p.lookup = lookup;
  p.partial_out = partial_out, p.partial_max_sum = partial_max_sum;
  std::copy(slopes, slopes + kMaxAttentionHeads, p.slopes);
  const bool bf16 = l.dtype == DType::bf16, wide = std::max(l.D, l.Dv) > 128;
  if (wide)
    bf16 ? launch<cutlass::bfloat16_t, 256>(p, splits) : launch<cutlass::half_t, 256>(p, splits);
  else
    bf16 ? launch<cutlass::bfloat16_t, 128>(p, splits) : launch<cutlass::half_t, 128>(p, splits);
}

}  // namespace posenc::cuda
