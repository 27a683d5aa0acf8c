// src/cuda/attention.cu: the fused attention forward on the GPU (its kernel template:
// src/cuda/attention_forward.cuh), every positional term's instantiations but Transformer-XL's
// (src/cuda/attention_xl.cu); the bias lookup, default positions, packing check and row copies it needs.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>
#include <type_traits>

#include "posenc/device.h"
#include "src/check.h"
#include "src/cuda/attention.h"
#include "src/cuda/attention_forward.cuh"
#include "src/cuda/attention_tiles.cuh"
#include "src/cuda/device.h"

namespace posenc::cuda {
namespace {
using namespace cute;
using namespace forward;
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

// Packed sequences: offsets that do not describe the tokens make the whole output NaN (after the attention).
void check_packing(const AttentionLaunch& l) {
  if (l.cu_seqlens_q == nullptr) return;
  check_packing_kernel<<<grid_for(l.Q * l.H * l.Dv, 256), 256, 0, static_cast<cudaStream_t>(cuda_stream())>>>(
      l.cu_seqlens_q, l.cu_seqlens_k, l.sequences, l.Q, l.K, l.H, l.Dv, static_cast<uint16_t*>(l.out),
      l.out_strides[1], l.out_strides[2], l.lse, l.lse_strides[1], l.lse_strides[2]);
  check_launch("attention", "the packing check kernel");
}

// Blocks of key tiles per row block: 1 when the row blocks fill the GPU; else enough splits for two blocks
// per multiprocessor (decoding: one query row against a long cache), each split at least 2 tiles, at most 64.
int64_t key_splits(int64_t row_blocks, int64_t key_tiles) {
  const int64_t sms = multiprocessor_count();
  if (sms == 0 || row_blocks >= sms || key_tiles < 4) return 1;
  return std::min<int64_t>({(2 * sms + row_blocks - 1) / row_blocks, key_tiles / 2, 64});
}

}  // namespace

int64_t attention_forward_shared_bytes(int64_t D, int64_t Dv, int64_t shaw_rows, bool shaw_values,
                                       bool transformer_xl) {
  const AttentionTileDims t = attention_tile_dims(D, Dv);
  const int64_t tiles = t.qk == 64    ? sizeof(SharedTiles<cutlass::bfloat16_t, 64, 64>)
                        : t.qk == 128 ? sizeof(SharedTiles<cutlass::bfloat16_t, 128, 128>)
                        : t.qk == 192 ? sizeof(SharedTiles<cutlass::bfloat16_t, 192, 128>)
                                      : sizeof(SharedTiles<cutlass::bfloat16_t, 256, 128>);
  const int64_t xl = !transformer_xl ? 0
                     : t.qk == 64    ? sizeof(XLTiles<cutlass::bfloat16_t, 64>)
                                     : sizeof(XLTiles<cutlass::bfloat16_t, 128>);
  return tiles + xl + (shaw_values ? 2 : 1) * 64 * shaw_rows * static_cast<int64_t>(sizeof(float));
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

int64_t multiprocessor_count() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return sms;
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

namespace {
// Whether attention_forward runs the launch on the sm_90a kernel (after the decoding kernel's turn).
bool forward_on_sm90(const AttentionLaunch& l) {
  const int64_t problems = l.cu_seqlens_q != nullptr ? l.sequences : l.B;
  return l.Q > 0 && l.H > 0 && problems > 0 && !attention_decode_fits(l) &&
         attention_forward_choice != AttentionKernel::tiled &&
         attention_sm90_fits(l, attention_forward_choice == AttentionKernel::automatic);
}
}  // namespace

bool attention_forward_rotates_q(const AttentionLaunch& l) {
  return forward_on_sm90(l) && attention_sm90_tile(l) != 256;
}

void attention_forward(const AttentionLaunch& l) {
  const int64_t problems = l.cu_seqlens_q != nullptr ? l.sequences : l.B;
  if (l.Q == 0 || l.H == 0 || problems == 0) return;
  // The front end leaves q's rotation to the kernel only where attention_forward_rotates_q says so.
  if (l.q_rotation.cos != nullptr && !attention_forward_rotates_q(l))
    detail::fail("attention",
                 "q's rotation was left to a kernel that does not rotate (a bug: please report)");
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

  const std::unique_ptr<DeviceScratch> lookup = set_score_bias(l, &p.terms, p.slopes, &p.lookup);

  if (attention_decode_fits(l)) {  // decoding rows: a group's heads in one block, each key read once
    p.splits = attention_decode_splits(l);
    std::unique_ptr<DeviceScratch> partial;
    if (p.splits > 1) {
      const size_t rows = static_cast<size_t>(l.B * l.H * l.Q * p.splits);
      partial = std::make_unique<DeviceScratch>("attention", "the split-K partial rows",
                                                rows * (static_cast<size_t>(l.Dv) * 4 + 8));
      p.partial_max_sum = partial->as<MaxSum>();
      p.partial_out = reinterpret_cast<float*>(p.partial_max_sum + rows);
    }
    attention_decode(l, p.terms, p.slopes, p.lookup, p.splits, p.partial_out, p.partial_max_sum);
    if (p.splits > 1) {
      const dim3 rows(static_cast<unsigned>(l.Q), static_cast<unsigned>(l.H), static_cast<unsigned>(l.B));
      const cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream());
      l.dtype == DType::bf16
          ? merge_kernel<cutlass::bfloat16_t><<<rows, static_cast<unsigned>(l.Dv), 0, stream>>>(p, l.Dv)
          : merge_kernel<cutlass::half_t><<<rows, static_cast<unsigned>(l.Dv), 0, stream>>>(p, l.Dv);
      check_launch("attention", "the split-K merge kernel");
    }
    return;
  }
  if (forward_on_sm90(l)) {
    p.splits = 1;
    p.q_rotation = l.q_rotation;
    if (l.q_rotation.cos != nullptr) ++attention_sm90_q_rotations;
    launch_sm90(l, p);
    check_packing(l);
    return;
  }
  const int64_t q_blocks = (l.Q + 63) / 64;  // packed: the longest sequence is at most Q tokens
  p.shaw_limit = static_cast<int32_t>(l.shaw_max_distance), p.shaw_rows = 0;
  if (l.shaw_a_k != nullptr) {
    p.shaw_rows = static_cast<int>(2 * l.shaw_max_distance + 1);
    p.shaw_a_k = l.shaw_a_k, p.shaw_a_v = l.shaw_a_v;
    for (int i = 0; i < 2; ++i)
      p.shaw_a_k_strides[i] = l.shaw_a_k_strides[i], p.shaw_a_v_strides[i] = l.shaw_a_v_strides[i];
  }
  if (l.xl_w_r != nullptr) {  // Transformer-XL: its own translation unit, one pass per row block
    p.splits = 1;
    launch_transformer_xl(l, p, tiles, q_blocks, problems);
    check_packing(l);
    return;
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
  check_packing(l);
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
