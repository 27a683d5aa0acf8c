// tests/cuda/rope_emulation.h: the CUDA rotation kernel's arithmetic run on the host, element by element,
// from the same __host__ __device__ functions (src/cuda/rope-inl.cuh, src/angle.h, src/half.h): per row
// (b, t) the cos / sin of every pair, then every pair of every head rotated and rounded once.
#pragma once
#include <cstdint>
#include <vector>

#include "posenc/rope.h"
#include "src/cuda/rope-inl.cuh"
#include "src/half.h"

namespace posenc::test {

// x: (B, T, H, D) contiguous values of `dtype` (16-bit storage as bits in uint16_t, fp32 as floats);
// positions: (S, B, T) contiguous. Returns the rotated copy, rounded to the storage as the kernel does.
template <typename Stored>
std::vector<Stored> emulate_cuda_rope(const RopeFrequencies& f, RopeLayout layout, int64_t head_dim,
                                      DType dtype, const std::vector<Stored>& x,
                                      const std::vector<int64_t>& positions, int64_t B, int64_t T, int64_t H,
                                      bool inverse) {
  auto load = [&](Stored v) -> float {
    if constexpr (sizeof(Stored) == 2)
      return dtype == DType::bf16 ? detail::bf16_to_f32(v) : detail::f16_to_f32(v);
    else
      return v;
  };
  auto store = [&](float v) -> Stored {
    if constexpr (sizeof(Stored) == 2)
      return dtype == DType::bf16 ? detail::f32_to_bf16(v) : detail::f32_to_f16(v);
    else
      return v;
  };
  const int64_t pairs = static_cast<int64_t>(f.inv_freq.size());
  std::vector<Stored> out = x;
  std::vector<float> cs(pairs), sn(pairs);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t j = 0; j < pairs; ++j) {
        const int64_t p = positions[(f.stream[j] * B + b) * T + t];
        cuda::pair_cos_sin(p, 0, f.inv_freq[j], static_cast<float>(f.attention_factor), inverse, &cs[j],
                           &sn[j]);
      }
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = ((b * T + t) * H + h) * head_dim;
        for (int64_t j = 0; j < pairs; ++j) {
          const int64_t ia = base + (layout == RopeLayout::half ? j : 2 * j);
          const int64_t ib = base + (layout == RopeLayout::half ? j + pairs : 2 * j + 1);
          float a, c;
          cuda::rotate_pair(load(x[ia]), load(x[ib]), cs[j], sn[j], &a, &c);
          out[ia] = store(a);
          out[ib] = store(c);
        }
      }
    }
  return out;
}

}  // namespace posenc::test
