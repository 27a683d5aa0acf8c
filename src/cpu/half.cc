// src/cpu/half.cc: see half.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/cpu/half.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "src/cpu/half-inl.h"
#include "src/cpu/half.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::cpu {
namespace HWY_NAMESPACE {
void WidenRowEntry(DType dtype, const uint16_t* src, int64_t n, float* dst) { WidenRow(dtype, src, n, dst); }
void NarrowRowEntry(DType dtype, const float* src, int64_t n, uint16_t* dst) {
  NarrowRow(dtype, src, n, dst);
}
}  // namespace HWY_NAMESPACE
}  // namespace posenc::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::cpu {
HWY_EXPORT(WidenRowEntry);
HWY_EXPORT(NarrowRowEntry);

void widen_row(DType dtype, const uint16_t* src, int64_t n, float* dst) {
  HWY_DYNAMIC_DISPATCH(WidenRowEntry)(dtype, src, n, dst);
}
void narrow_row(DType dtype, const float* src, int64_t n, uint16_t* dst) {
  HWY_DYNAMIC_DISPATCH(NarrowRowEntry)(dtype, src, n, dst);
}
}  // namespace posenc::cpu
#endif  // HWY_ONCE
