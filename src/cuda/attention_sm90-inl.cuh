// src/cuda/attention_sm90-inl.cuh: what the Hopper attention kernels share (src/cuda/attention_sm90.cu, the
// forward, and src/cuda/attention_backward_sm90.cu): the TMA's view of q, k, v and dO rows, the test that a
// launch's rows can be described to it, and a warpgroup's wgmma over the k16 steps of its operands.
// Included by those files only.
#pragma once
#include <cstdint>
#include <cute/tensor.hpp>

namespace posenc::cuda {

// Rows in global memory as (rows, head dim, heads, batch rows) for the TMA.
using Sm90GmemShape = cute::Shape<int32_t, int32_t, int32_t, int32_t>;
using Sm90GmemStride = cute::Stride<int64_t, cute::_1, int64_t, int64_t>;

// The TMA's strides of rows (B, T, H) at the launch's element strides. A dimension of extent 1 takes a stride
// of 16 bytes (any multiple of 16 describes it; the caller's may be anything).
inline Sm90GmemStride sm90_gmem_stride(const int64_t strides[3], int64_t T, int64_t H, int64_t B) {
  return Sm90GmemStride{T > 1 ? strides[1] : 8, cute::_1{}, H > 1 ? strides[2] : 8, B > 1 ? strides[0] : 8};
}

// Whether the TMA can describe rows (B, T, H) of 16-bit elements at this address and these strides: 16-byte
// aligned, each stride of an extent past 1 a positive multiple of 16 bytes below 2^39 bytes.
inline bool sm90_tma_rows(const void* data, const int64_t strides[3], int64_t T, int64_t H, int64_t B) {
  if (reinterpret_cast<uintptr_t>(data) % 16 != 0) return false;
  const int64_t extents[3] = {B, T, H};
  for (int i = 0; i < 3; ++i)
    if (extents[i] > 1 && (strides[i] <= 0 || strides[i] % 8 != 0 || strides[i] >= (int64_t{1} << 38)))
      return false;
  return true;
}

// A warpgroup's wgmma over the k16 steps of its operands, issued and committed as one group (the caller
// waits for it): acc = A B (zero_init) or acc += A B.
template <class Mma, class A, class B, class Acc>
__device__ __forceinline__ void sm90_gemm(Mma& mma, const A& a, const B& b, Acc& acc, bool zero_init) {
  using namespace cute;
  warpgroup_fence_operand(acc);
  warpgroup_arrive();
  mma.accumulate_ = zero_init ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
  CUTE_UNROLL
  for (int k = 0; k < size<2>(a); ++k) {
    gemm(mma, a(_, _, k), b(_, _, k), acc);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
}

}  // namespace posenc::cuda
