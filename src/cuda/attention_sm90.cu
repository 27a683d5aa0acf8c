// src/cuda/attention_sm90.cu: the fused attention forward on Hopper (sm_90a), for the launches it takes
// (attention_sm90_fits): batch rows or packed sequences, head dims up to 128 (and in bf16 MLA's 192 / 128
// and 256), every scalar positional term (none, ALiBi, the learned lookups of T5 and the clipped bias),
// softcap, sinks, windows, chunks, query temperature, GQA, explicit positions. The kernel, FlashAttention-3's
// structure, is src/cuda/attention_sm90_kernel.cuh; Transformer-XL's terms are instantiated in
// src/cuda/attention_sm90_xl.cu. Shaw's terms, larger heads and launches too small to fill the GPU run on the
// tiled kernel (src/cuda/attention_forward.cuh), which also runs on Ampere.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_conversion.h>
#include <cutlass/numeric_types.h>

#include "posenc/device.h"
#include "src/cuda/attention.h"
#include "src/cuda/attention_forward.cuh"
#include "src/cuda/attention_sm90_kernel.cuh"
#include "src/cuda/device.h"

namespace posenc::cuda {
namespace forward {
namespace {

// 1 in the sm_90a code of this unit, 0 in code for any other target (where the kernel is only a trap): read
// from the module the device loads, so that a build for plain sm_90 never selects the kernel.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ int sm90a_code = 1;
#else
__device__ int sm90a_code = 0;
#endif

// Whether the current device is a Hopper (compute capability 9.0) running this unit's sm_90a code, found
// once per device.
bool sm90_device() {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices];  // 0: not asked yet, 1: no, 2: yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) {
    cudaGetLastError();
    return false;
  }
  if (const int k = known[device].load(std::memory_order_relaxed); k != 0) return k == 2;
  int major = 0, minor = 0, code = 0;
  const bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
                  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
                  major == 9 && minor == 0 &&
                  cudaMemcpyFromSymbol(&code, sm90a_code, sizeof(int)) == cudaSuccess && code == 1;
  if (!ok) cudaGetLastError();  // a failed query leaves no error behind for the next launch
  known[device].store(ok ? 2 : 1, std::memory_order_relaxed);
  return ok;
}

}  // namespace

// The head tile of a launch (AttentionSm90Tiles), its q / k heads' columns: 64 and 128 (v the same), 192 (v
// up to 128) or 256 (v up to 256); 0: none. Heads past 128 in bf16 only (fp16 ones run on the tiled kernel);
// values wider than q / k heads of 128 or less too (the 256 tile would pad q and k to 256 columns).
int64_t attention_sm90_tile(const AttentionLaunch& l) {
  if (l.D <= 64 && l.Dv <= 64) return 64;
  if (l.D <= 128 && l.Dv <= 128) return 128;
  if (l.dtype != DType::bf16 || l.D <= 128) return 0;
  if (l.D <= 192 && l.Dv <= 128) return 192;
  return l.D <= 256 && l.Dv <= 256 ? 256 : 0;
}

// Its shared memory per block.
static int64_t sm90_shared_bytes(int64_t tile) {
  switch (tile) {
    case 64:
      return Sm90<cutlass::bfloat16_t, 64, 64>::kSharedBytes;
    case 128:
      return Sm90<cutlass::bfloat16_t, 128, 128>::kSharedBytes;
    case 192:
      return Sm90<cutlass::bfloat16_t, 192, 128>::kSharedBytes;
    default:
      return Sm90<cutlass::bfloat16_t, 256, 256>::kSharedBytes;
  }
}

bool attention_sm90_launch_fits(const AttentionLaunch& l, bool fill_required) {
  if (l.Q < 1 || l.K < 1 || l.B < 1 || l.H < 1 || l.Hkv < 1 || l.H % l.Hkv != 0) return false;
  // The grid, and what the TMA can describe (int32 extents; sm90_tma_rows).
  const int64_t row_blocks = (l.Q + 127) / 128;
  if (l.Q > INT32_MAX || l.K > INT32_MAX || l.H > 65535 || l.B > 65535) return false;
  if (!sm90_tma_rows(l.q, l.q_strides, l.Q, l.H, l.B) || !sm90_tma_rows(l.k, l.k_strides, l.K, l.Hkv, l.B) ||
      !sm90_tma_rows(l.v, l.v_strides, l.K, l.Hkv, l.B))
    return false;
  // Packed: the longest sequence's row blocks are at most the tokens' (the grid's); the others exit at once.
  const int64_t problems = l.cu_seqlens_q != nullptr ? l.sequences : l.B;
  if (problems < 1 || problems > 65535) return false;
  if (fill_required && row_blocks * l.H * (l.cu_seqlens_q != nullptr ? 1 : l.B) < multiprocessor_count())
    return false;  // the tiled kernel's split-K serves it better
  return sm90_device();
}

bool attention_sm90_fits(const AttentionLaunch& l, bool fill_required) {
  const int64_t tile = attention_sm90_tile(l);
  if (tile == 0 || l.shaw_a_k != nullptr || l.xl_w_r != nullptr) return false;
  return sm90_shared_bytes(tile) <= max_shared_bytes_per_block() &&
         attention_sm90_launch_fits(l, fill_required);
}

void launch_sm90(const AttentionLaunch& l, const Params& p) {
  using Bf16 = cutlass::bfloat16_t;
  using F16 = cutlass::half_t;
  const int64_t tile = attention_sm90_tile(l);
  ++attention_sm90_launches;
  if (tile == 192)
    launch_sm90_kernel<Sm90<Bf16, 192, 128>>(l, p);
  else if (tile == 256)
    launch_sm90_kernel<Sm90<Bf16, 256, 256>>(l, p);
  else if (l.dtype == DType::bf16)
    tile == 64 ? launch_sm90_kernel<Sm90<Bf16, 64, 64>>(l, p)
               : launch_sm90_kernel<Sm90<Bf16, 128, 128>>(l, p);
  else
    tile == 64 ? launch_sm90_kernel<Sm90<F16, 64, 64>>(l, p) : launch_sm90_kernel<Sm90<F16, 128, 128>>(l, p);
}

}  // namespace forward

bool attention_sm90_available() { return forward::sm90_device(); }

}  // namespace posenc::cuda
