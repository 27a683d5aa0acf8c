// src/cpu/half.h: rows of bf16 / fp16 storage to fp32 and back (one rounding to nearest even), with
// runtime dispatch: the entry points of src/cpu/half-inl.h for code outside a Highway target
// (the KV cache's stores, the tests that check every target against src/half.h).
#pragma once
#include <cstdint>

#include "posenc/tensor.h"

namespace posenc::cpu {

void widen_row(DType dtype, const uint16_t* src, int64_t n, float* dst);
void narrow_row(DType dtype, const float* src, int64_t n, uint16_t* dst);

}  // namespace posenc::cpu
