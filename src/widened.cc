// src/widened.cc: see widened.h.
#include "src/widened.h"

#include <array>

#include "src/check.h"
#include "src/half.h"

namespace posenc::detail {
namespace {
bool is16(DType d) { return d == DType::bf16 || d == DType::f16; }

// fn(source offset, contiguous index) over every element of a validated view of rank <= 4.
template <typename Fn>
void for_each_element(const ViewShape& v, Fn&& fn) {
  std::array<int64_t, 4> n{1, 1, 1, 1}, s{0, 0, 0, 0};
  for (int i = 0; i < v.rank; ++i) n[4 - v.rank + i] = v.shape[i], s[4 - v.rank + i] = v.strides[i];
  int64_t c = 0;
  for (int64_t a = 0; a < n[0]; ++a)
    for (int64_t b = 0; b < n[1]; ++b)
      for (int64_t e = 0; e < n[2]; ++e)
        for (int64_t f = 0; f < n[3]; ++f) fn(a * s[0] + b * s[1] + e * s[2] + f * s[3], c++);
}

// Validates the 16-bit view itself (rank <= 4, extents, strides, data) before anything is read.
void check16(std::string_view op, std::string_view name, const ViewShape& v, const void* data) {
  if (v.rank < 0 || v.rank > 4) fail(op, name, " has rank ", v.rank, ": at most 4 here");
  switch (v.rank) {
    case 0:
      check_view(op, name, v, v.dtype, {}, data);
      break;
    case 1:
      check_view(op, name, v, v.dtype, {-1}, data);
      break;
    case 2:
      check_view(op, name, v, v.dtype, {-1, -1}, data);
      break;
    case 3:
      check_view(op, name, v, v.dtype, {-1, -1, -1}, data);
      break;
    default:
      check_view(op, name, v, v.dtype, {-1, -1, -1, -1}, data);
      break;
  }
}

float widen(DType d, uint16_t h) { return d == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h); }
uint16_t narrow(DType d, float x) { return d == DType::bf16 ? f32_to_bf16(x) : f32_to_f16(x); }

template <typename View>
View contiguous_like(const View& v, float* data) {
  View out = v;
  out.dtype = DType::f32;
  out.data = data;
  int64_t step = 1;
  for (int i = v.rank - 1; i >= 0; --i) out.strides[i] = step, step *= v.shape[i];
  return out;
}
}  // namespace

WidenedInput::WidenedInput(std::string_view op, std::string_view name, const ConstTensorView& v) : view_(v) {
  if (!is16(v.dtype)) return;
  check16(op, name, v, v.data);
  copy_.resize(static_cast<size_t>(v.numel()));
  const uint16_t* src = v.ptr<uint16_t>();
  for_each_element(v, [&](int64_t at, int64_t i) { copy_[i] = widen(v.dtype, src[at]); });
  view_ = contiguous_like(v, copy_.data());
}

WidenedOutput::WidenedOutput(std::string_view op, std::string_view name, const TensorView& v, bool accumulate)
    : target_(v), view_(v) {
  if (!is16(v.dtype)) return;
  check16(op, name, v, v.data);
  copy_.assign(static_cast<size_t>(v.numel()), 0.0f);
  if (accumulate) {
    const uint16_t* src = v.ptr<uint16_t>();
    for_each_element(v, [&](int64_t at, int64_t i) { copy_[i] = widen(v.dtype, src[at]); });
  }
  view_ = contiguous_like(v, copy_.data());
}

void WidenedOutput::store() const {
  if (!is16(target_.dtype)) return;
  uint16_t* dst = target_.ptr<uint16_t>();
  for_each_element(target_, [&](int64_t at, int64_t i) { dst[at] = narrow(target_.dtype, copy_[i]); });
}

}  // namespace posenc::detail
