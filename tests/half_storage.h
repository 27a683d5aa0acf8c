// tests/half_storage.h: the 16-bit storage types as the tests use them: rounding a value to the
// storage (src/half.h, itself tested in tests/test_half.cc), its value, its unit roundoff, and a
// view of uint16 bits tagged with the storage's dtype. Shared by test_rope_half.cc and
// test_attention_half.cc.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "posenc/tensor.h"
#include "src/half.h"
#include "test_util.h"

namespace posenc::test {

struct Storage {
  DType dtype;
  double unit_roundoff;  // half an ulp, relative: 2^-8 (bf16), 2^-11 (fp16)
  const char* name;
  uint16_t round(float x) const {
    return dtype == DType::bf16 ? detail::f32_to_bf16(x) : detail::f32_to_f16(x);
  }
  float value(uint16_t h) const {
    return dtype == DType::bf16 ? detail::bf16_to_f32(h) : detail::f16_to_f32(h);
  }
};
inline const Storage kBf16{DType::bf16, std::ldexp(1.0, -8), "bf16"};
inline const Storage kF16{DType::f16, std::ldexp(1.0, -11), "f16"};

// n random values in [-1, 1] rounded to the storage: their bits into `bits`, their exact values returned.
inline std::vector<float> rounded_random(const Storage& s, size_t n, uint32_t seed,
                                         std::vector<uint16_t>& bits) {
  std::vector<float> x = random_floats(n, seed);
  bits.resize(n);
  for (size_t i = 0; i < n; ++i) bits[i] = s.round(x[i]), x[i] = s.value(bits[i]);
  return x;
}

// A contiguous view of x's bits with the given shape and dtype (x: uint16_t values of that storage).
inline TensorView view16(std::vector<uint16_t>& x, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView v = view(reinterpret_cast<float*>(x.data()), shape);  // the shape and contiguous strides
  v.dtype = dtype;
  return v;
}

}  // namespace posenc::test
