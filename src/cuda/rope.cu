// src/cuda/rope.cu: RoPE on the GPU: the rotation of q / k rows in place or out of place, forward and
// backward (the transposed rotation), and the cos / sin table. One block per token row (b, t): its
// threads form the row's cos / sin once in shared memory (angles reduced in double, src/angle.h), then
// rotate every head of every tensor with 16-byte accesses where alignment allows. A second rotation of the
// same rows (the KV cache's re-rotation) is applied in fp32 before the one rounding to the storage type.
// Into a gradient (the attention backward's dq and dk): fp32 rows rotated and added into (or written to)
// rows of any storage type, one rounding, so that a gradient is rotated back and stored in one pass.
//   tensors: (B, T, H, D) f32, bf16 or fp16, unit stride on D; pairs P = rotary_dim / 2 <= kMaxDevicePairs.
//   half layout: pair j = (x[j], x[j + P]);   interleaved: pair j = (x[2j], x[2j + 1]).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "posenc/device.h"
#include "src/cuda/device.h"
#include "src/cuda/rope-inl.cuh"
#include "src/cuda/rope.h"
#include "src/half.h"

namespace posenc::cuda {
namespace {

constexpr int kThreads = 128;

// Kernel parameters (by value: no copy to the device before the launch, no synchronization).
struct AnglesArg {
  double inv_freq[kMaxDevicePairs];
  uint8_t stream[kMaxDevicePairs];
  int pairs = 0;
  float scale = 1.0f;
  bool inverse = false;
  bool multi_stream = false;
  int64_t position_offset = 0;
};
struct PositionsArg {
  const int64_t* data;
  int64_t stream_stride, batch_stride, token_stride;
};
struct RowsArg {
  const void* in;
  void* out;
  int64_t in_strides[3], out_strides[3];  // (B, T, H), in elements
  int64_t heads;
};
struct RotateArgs {
  AnglesArg angles;
  AnglesArg then;  // the second rotation of rope_rotate_kernel<..., kTwice = true>
  PositionsArg positions;
  RowsArg rows[2];
  int num_tensors;
  int64_t tokens, row_count;
  int64_t dim;
};

// Storage types: widened to fp32 as loaded, rounded once as stored (src/half.h, the CPU's conversions).
struct F32 {
  using T = float;
  __device__ static float load(T v) { return v; }
  __device__ static T store(float v) { return v; }
};
struct BF16 {
  using T = uint16_t;
  __device__ static float load(T v) { return detail::bf16_to_f32(v); }
  __device__ static T store(float v) { return detail::f32_to_bf16(v); }
};
struct F16 {
  using T = uint16_t;
  __device__ static float load(T v) { return detail::f16_to_f32(v); }
  __device__ static T store(float v) { return detail::f32_to_f16(v); }
};

// kVec elements of T at p (one 16-byte access when kVec * sizeof(T) == 16; p then 16-byte aligned).
template <typename T, int kVec>
struct Chunk {
  T v[kVec];
};
template <typename T, int kVec>
__device__ __forceinline__ Chunk<T, kVec> load_chunk(const T* p) {
  Chunk<T, kVec> c;
  if constexpr (kVec * sizeof(T) == 16) {
    // A plain load (not __ldg): in place, the kernel writes what it reads.
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    static_assert(sizeof(raw) == sizeof(c));
    memcpy(&c, &raw, sizeof c);
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e) c.v[e] = p[e];
  }
  return c;
}
template <typename T, int kVec>
__device__ __forceinline__ void store_chunk(T* p, const Chunk<T, kVec>& c) {
  if constexpr (kVec * sizeof(T) == 16) {
    uint4 raw;
    memcpy(&raw, &c, sizeof c);
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e) p[e] = c.v[e];
  }
}

// The row's cos / sin (scaled, sin negated for the inverse) into shared memory; NaN at positions out of
// range.
__device__ __forceinline__ void row_cos_sin(const AnglesArg& a, const PositionsArg& pos, int64_t b, int64_t t,
                                            float* cs, float* sn) {
  for (int j = threadIdx.x; j < a.pairs; j += blockDim.x) {
    const int s = a.multi_stream ? a.stream[j] : 0;
    const int64_t p = pos.data[s * pos.stream_stride + b * pos.batch_stride + t * pos.token_stride];
    float c = quiet_nan(), sv = quiet_nan();
    if (position_in_range(p, a.position_offset))
      pair_cos_sin(p, a.position_offset, a.inv_freq[j], a.scale, a.inverse, &c, &sv);
    cs[j] = c;
    sn[j] = sv;
  }
}

// Pair j of a row: rotated by (cs, sn), then, kTwice, by (cs2, sn2), in fp32.
template <bool kTwice>
__device__ __forceinline__ void rotate_pair_of_row(float a, float b, const float* cs, const float* sn,
                                                   const float* cs2, const float* sn2, int j, float* a_out,
                                                   float* b_out) {
  rotate_pair(a, b, cs[j], sn[j], a_out, b_out);
  if constexpr (kTwice) rotate_pair(*a_out, *b_out, cs2[j], sn2[j], a_out, b_out);
}

// kVec rotated elements stored in out's rows, kAccumulate: added to what out holds.
template <class SOut, int kVec, bool kAccumulate>
__device__ __forceinline__ void store_rotated(typename SOut::T* y, const float* rotated) {
  using TO = typename SOut::T;
  Chunk<TO, kVec> c;
  if constexpr (kAccumulate) c = load_chunk<TO, kVec>(y);
#pragma unroll
  for (int e = 0; e < kVec; ++e)
    c.v[e] = SOut::store(kAccumulate ? SOut::load(c.v[e]) + rotated[e] : rotated[e]);
  store_chunk<TO, kVec>(y, c);
}

template <class SIn, class SOut, RopeLayout kLayout, int kVec, bool kTwice, bool kAccumulate>
__device__ __forceinline__ void rotate_rows(const RowsArg& r, int64_t b, int64_t t, int pairs, int64_t dim,
                                            const float* cs, const float* sn, const float* cs2,
                                            const float* sn2) {
  using TI = typename SIn::T;
  using TO = typename SOut::T;
  const TI* in = static_cast<const TI*>(r.in) + b * r.in_strides[0] + t * r.in_strides[1];
  TO* out = static_cast<TO*>(r.out) + b * r.out_strides[0] + t * r.out_strides[1];
  const int rotary = 2 * pairs;
  // Work units of a head: kVec pairs (half: kVec elements from each half) or kVec / 2 pairs (interleaved).
  const int per_head = kLayout == RopeLayout::half ? pairs / kVec : rotary / kVec;
  const int64_t units = r.heads * per_head;
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
    const int64_t h = u / per_head;
    const int k = static_cast<int>(u - h * per_head);
    const TI* x = in + h * r.in_strides[2];
    TO* y = out + h * r.out_strides[2];
    if constexpr (kLayout == RopeLayout::half) {
      const int j0 = k * kVec;
      const Chunk<TI, kVec> xa = load_chunk<TI, kVec>(x + j0), xb = load_chunk<TI, kVec>(x + pairs + j0);
      float ya[kVec], yb[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        rotate_pair_of_row<kTwice>(SIn::load(xa.v[e]), SIn::load(xb.v[e]), cs, sn, cs2, sn2, j0 + e, &ya[e],
                                   &yb[e]);
      store_rotated<SOut, kVec, kAccumulate>(y + j0, ya);
      store_rotated<SOut, kVec, kAccumulate>(y + pairs + j0, yb);
    } else {
      const int e0 = k * kVec;
      const Chunk<TI, kVec> xv = load_chunk<TI, kVec>(x + e0);
      float yv[kVec];
#pragma unroll
      for (int e = 0; e < kVec; e += 2)
        rotate_pair_of_row<kTwice>(SIn::load(xv.v[e]), SIn::load(xv.v[e + 1]), cs, sn, cs2, sn2, (e0 + e) / 2,
                                   &yv[e], &yv[e + 1]);
      store_rotated<SOut, kVec, kAccumulate>(y + e0, yv);
    }
  }
  // Dimensions past rotary_dim pass unchanged: copied bit for bit out of place, or added (kAccumulate), or
  // rounded to out's storage.
  if (r.out != r.in && dim > rotary) {
    const int64_t pass = dim - rotary;
    for (int64_t u = threadIdx.x; u < r.heads * pass; u += blockDim.x) {
      const int64_t h = u / pass, e = rotary + (u - h * pass);
      TO& y = out[h * r.out_strides[2] + e];
      const TI x = in[h * r.in_strides[2] + e];
      if constexpr (kAccumulate)
        y = SOut::store(SOut::load(y) + SIn::load(x));
      else if constexpr (std::is_same_v<SIn, SOut>)
        y = x;
      else
        y = SOut::store(SIn::load(x));
    }
  }
}

template <class SIn, class SOut, RopeLayout kLayout, int kVec, bool kTwice, bool kAccumulate>
__global__ void __launch_bounds__(kThreads) rope_rotate_kernel(const __grid_constant__ RotateArgs args) {
  __shared__ float cs[kMaxDevicePairs], sn[kMaxDevicePairs];
  __shared__ float cs2[kTwice ? kMaxDevicePairs : 1], sn2[kTwice ? kMaxDevicePairs : 1];
  for (int64_t row = blockIdx.x; row < args.row_count; row += gridDim.x) {
    const int64_t b = row / args.tokens, t = row - b * args.tokens;
    row_cos_sin(args.angles, args.positions, b, t, cs, sn);
    if constexpr (kTwice) row_cos_sin(args.then, args.positions, b, t, cs2, sn2);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (i < args.num_tensors)
        rotate_rows<SIn, SOut, kLayout, kVec, kTwice, kAccumulate>(args.rows[i], b, t, args.angles.pairs,
                                                                   args.dim, cs, sn, cs2, sn2);
    __syncthreads();  // the next row rewrites cs / sn
  }
}

__global__ void __launch_bounds__(kThreads)
    rope_cos_sin_kernel(const __grid_constant__ AnglesArg angles, const PositionsArg positions, int64_t n,
                        float* cos_out, int64_t cos_stride, float* sin_out, int64_t sin_stride) {
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    for (int j = threadIdx.x; j < angles.pairs; j += blockDim.x) {
      const int s = angles.multi_stream ? angles.stream[j] : 0;
      const int64_t p = positions.data[s * positions.stream_stride + row * positions.token_stride];
      float c = quiet_nan(), sv = quiet_nan();
      if (position_in_range(p, angles.position_offset))
        pair_cos_sin(p, angles.position_offset, angles.inv_freq[j], angles.scale, angles.inverse, &c, &sv);
      cos_out[row * cos_stride + j] = c;
      sin_out[row * sin_stride + j] = sv;
    }
  }
}

AnglesArg angles_arg(const RopeFrequencies& freq, bool multi_stream, bool inverse, int64_t offset) {
  AnglesArg a;
  a.pairs = static_cast<int>(freq.inv_freq.size());
  for (int j = 0; j < a.pairs; ++j) {
    a.inv_freq[j] = freq.inv_freq[j];
    a.stream[j] = multi_stream ? freq.stream[j] : 0;
  }
  a.scale = static_cast<float>(freq.attention_factor);
  a.inverse = inverse;
  a.multi_stream = multi_stream;
  a.position_offset = offset;
  return a;
}

int grid_for(int64_t rows) { return static_cast<int>(std::min<int64_t>(rows, int64_t{1} << 24)); }

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether every row start and the half-layout split fall on 16-byte boundaries (kVec elements).
bool vector_ok(const RotateArgs& args, RopeLayout layout, int vec) {
  const int pairs = args.angles.pairs;
  if (pairs == 0 || (layout == RopeLayout::half ? pairs % vec : (2 * pairs) % vec) != 0) return false;
  for (int i = 0; i < args.num_tensors; ++i) {
    const RowsArg& r = args.rows[i];
    if (!aligned16(r.in) || !aligned16(r.out)) return false;
    for (int d = 0; d < 3; ++d)
      if (r.in_strides[d] % vec || r.out_strides[d] % vec) return false;
  }
  return true;
}

template <class S, RopeLayout kLayout, bool kTwice>
void launch_rotate(const RotateArgs& args, cudaStream_t stream) {
  constexpr int kVec = static_cast<int>(16 / sizeof(typename S::T));
  constexpr int kScalar = kLayout == RopeLayout::half ? 1 : 2;
  const int grid = grid_for(args.row_count);
  if (vector_ok(args, kLayout, kVec))
    rope_rotate_kernel<S, S, kLayout, kVec, kTwice, false><<<grid, kThreads, 0, stream>>>(args);
  else
    rope_rotate_kernel<S, S, kLayout, kScalar, kTwice, false><<<grid, kThreads, 0, stream>>>(args);
}

// fp32 rows rotated and added into (kAdd) or written to rows of SOut's storage type: 4 elements (16 bytes of
// fp32) a unit where the rows allow.
template <class SOut, RopeLayout kLayout, bool kAdd>
void launch_into_gradient(const RotateArgs& args, cudaStream_t stream) {
  constexpr int kScalar = kLayout == RopeLayout::half ? 1 : 2;
  const int grid = grid_for(args.row_count);
  if (vector_ok(args, kLayout, 4))
    rope_rotate_kernel<F32, SOut, kLayout, 4, false, kAdd><<<grid, kThreads, 0, stream>>>(args);
  else
    rope_rotate_kernel<F32, SOut, kLayout, kScalar, false, kAdd><<<grid, kThreads, 0, stream>>>(args);
}

template <class SOut>
void launch_into_gradient(const RotateArgs& args, RopeLayout layout, bool add, cudaStream_t stream) {
  if (layout == RopeLayout::half)
    add ? launch_into_gradient<SOut, RopeLayout::half, true>(args, stream)
        : launch_into_gradient<SOut, RopeLayout::half, false>(args, stream);
  else
    add ? launch_into_gradient<SOut, RopeLayout::interleaved, true>(args, stream)
        : launch_into_gradient<SOut, RopeLayout::interleaved, false>(args, stream);
}

template <class S>
void launch_rotate(const RotateArgs& args, RopeLayout layout, bool twice, cudaStream_t stream) {
  if (layout == RopeLayout::half)
    twice ? launch_rotate<S, RopeLayout::half, true>(args, stream)
          : launch_rotate<S, RopeLayout::half, false>(args, stream);
  else
    twice ? launch_rotate<S, RopeLayout::interleaved, true>(args, stream)
          : launch_rotate<S, RopeLayout::interleaved, false>(args, stream);
}

}  // namespace

void rope_rotate(const RopeLaunch& l) {
  RotateArgs args{};
  args.angles = angles_arg(*l.freq, l.multi_stream, l.inverse, l.position_offset);
  const bool twice = l.then_freq != nullptr;
  if (twice) args.then = angles_arg(*l.then_freq, l.multi_stream, l.then_inverse, l.position_offset);
  args.positions = {l.positions.data, l.positions.stream_stride, l.positions.batch_stride,
                    l.positions.token_stride};
  for (int i = 0; i < l.num_tensors; ++i) {
    const DeviceRows& d = l.tensors[i];
    args.rows[i] = {d.in,
                    d.out,
                    {d.in_strides[0], d.in_strides[1], d.in_strides[2]},
                    {d.out_strides[0], d.out_strides[1], d.out_strides[2]},
                    d.heads};
  }
  args.num_tensors = l.num_tensors;
  args.tokens = l.tokens;
  args.row_count = l.batch * l.tokens;
  args.dim = l.dim;
  if (args.row_count == 0) return;
  const auto stream = static_cast<cudaStream_t>(cuda_stream());
  if (l.output != RopeOutput::rotated) {
    const bool add = l.output == RopeOutput::gradient_added;
    l.out_dtype == DType::bf16  ? launch_into_gradient<BF16>(args, l.layout, add, stream)
    : l.out_dtype == DType::f16 ? launch_into_gradient<F16>(args, l.layout, add, stream)
                                : launch_into_gradient<F32>(args, l.layout, add, stream);
    check_launch("rope", "the CUDA rotation kernel's launch");
    return;
  }
  switch (l.dtype) {
    case DType::bf16:
      launch_rotate<BF16>(args, l.layout, twice, stream);
      break;
    case DType::f16:
      launch_rotate<F16>(args, l.layout, twice, stream);
      break;
    default:
      launch_rotate<F32>(args, l.layout, twice, stream);
      break;
  }
  check_launch("rope", "the CUDA rotation kernel's launch");
}

void rope_cos_sin(const CosSinLaunch& l) {
  if (l.n == 0 || l.freq->inv_freq.empty()) return;
  const AnglesArg angles = angles_arg(*l.freq, l.multi_stream, l.inverse, 0);
  const PositionsArg positions{l.positions.data, l.positions.stream_stride, 0, l.positions.token_stride};
  rope_cos_sin_kernel<<<grid_for(l.n), kThreads, 0, static_cast<cudaStream_t>(cuda_stream())>>>(
      angles, positions, l.n, l.cos, l.cos_row_stride, l.sin, l.sin_row_stride);
  check_launch("rope", "the CUDA cos / sin kernel's launch");
}

}  // namespace posenc::cuda
