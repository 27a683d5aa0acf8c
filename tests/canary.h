// tests/canary.h: sentinel canaries around a test's buffers (ggml's habit in test-backend-ops).
//
// A Guarded buffer holds the elements of one f32 view (any shape up to rank 4, any strides >= 0)
// inside one allocation, with kGuard sentinel elements before the first element, kGuard after the
// last, and the sentinel in every gap the strides leave (between heads, tokens, rows):
//
//   [ guard x 16 | row 0 | gap | row 1 | gap | ... | last row | guard x 16 ]
//
// The sentinel is a signalling NaN with a recognisable payload (0x7FA5A5A5), compared bit for bit:
// intact() fails naming the first clobbered offset if an op wrote anywhere outside its view, e.g.
// a full-width vector store at a row's tail or an off-by-one row count. A read outside the view
// pulls the NaN into the op's result, which the caller sees as a non-finite output (finite()).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "posenc/tensor.h"

namespace posenc::test {

class Guarded {
 public:
  static constexpr int64_t kGuard = 16;  // elements: 64 bytes, one AVX-512 vector, on each side
  static constexpr uint32_t kSentinelBits = 0x7FA5A5A5u;

  // shape and strides (in elements) of the view; strides empty: contiguous.
  Guarded(std::initializer_list<int64_t> shape, std::initializer_list<int64_t> strides = {})
      : shape_(shape), strides_(strides) {
    if (strides_.empty()) {
      strides_.assign(shape_.size(), 1);
      for (size_t i = shape_.size(); i-- > 1;) strides_[i - 1] = strides_[i] * shape_[i];
    }
    int64_t last = 0;
    bool empty = false;
    for (size_t i = 0; i < shape_.size(); ++i) {
      last += (shape_[i] - 1) * strides_[i];
      empty = empty || shape_[i] == 0;
    }
    span_ = empty ? 0 : last + 1;
    const float sentinel = sentinel_value();
    buffer_.assign(static_cast<size_t>(span_ + 2 * kGuard), sentinel);
    inside_.assign(static_cast<size_t>(span_), false);
    for_each([&](int64_t, int64_t offset) { inside_[offset] = true; });
  }

  static float sentinel_value() {
    float f;
    std::memcpy(&f, &kSentinelBits, sizeof f);
    return f;
  }

  float* data() { return buffer_.data() + kGuard; }
  const float* data() const { return buffer_.data() + kGuard; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape_) n *= s;
    return n;
  }

  TensorView view() {
    TensorView v = posenc::view(data(), {1});
    v.rank = static_cast<int>(shape_.size());
    for (int i = 0; i < v.rank; ++i) v.shape[i] = shape_[i], v.strides[i] = strides_[i];
    return v;
  }
  ConstTensorView view() const { return const_cast<Guarded*>(this)->view(); }

  // Writes `values` (row-major over the shape) into the view's elements.
  void fill(const std::vector<float>& values) {
    for_each([&](int64_t n, int64_t offset) { data()[offset] = values[n]; });
  }
  // The view's elements, row-major.
  std::vector<float> values() const {
    std::vector<float> out(static_cast<size_t>(numel()));
    for_each([&](int64_t n, int64_t offset) { out[n] = data()[offset]; });
    return out;
  }

  // Every element outside the view still holds the sentinel, bit for bit.
  ::testing::AssertionResult intact() const {
    for (int64_t i = 0; i < static_cast<int64_t>(buffer_.size()); ++i) {
      const int64_t offset = i - kGuard;
      if (offset >= 0 && offset < span_ && inside_[offset]) continue;
      uint32_t bits;
      std::memcpy(&bits, &buffer_[i], sizeof bits);
      if (bits != kSentinelBits)
        return ::testing::AssertionFailure()
               << "canary clobbered at offset " << offset << " (view spans [0, " << span_ << ")): "
               << (offset < 0        ? "before the first element"
                   : offset >= span_ ? "past the last element"
                                     : "in a gap")
               << ", holds " << buffer_[i];
    }
    return ::testing::AssertionSuccess();
  }

  // Every element of the view is finite (no sentinel read from outside leaked in).
  ::testing::AssertionResult finite() const {
    const std::vector<float> v = values();
    for (size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i])) return ::testing::AssertionFailure() << "element " << i << " is " << v[i];
    return ::testing::AssertionSuccess();
  }

 private:
  // fn(n, offset) for every element: n its row-major index, offset its place in the view.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    const int64_t n = numel();
    for (int64_t i = 0; i < n; ++i) {
      int64_t rest = i, offset = 0;
      for (size_t d = shape_.size(); d-- > 0;) {
        offset += (rest % shape_[d]) * strides_[d];
        rest /= shape_[d];
      }
      fn(i, offset);
    }
  }

  std::vector<int64_t> shape_, strides_;
  int64_t span_ = 0;
  std::vector<float> buffer_;
  std::vector<bool> inside_;
};

}  // namespace posenc::test
