// src/widened.h: fp32 stand-ins for bf16 / fp16 views, for the ops whose 16-bit support is a front
// end around the fp32 loops (the Shaw and Transformer-XL score terms: O(B H Q K) work on whole
// logit blocks, where a copy costs little next to the op). An input is widened once into a
// contiguous fp32 copy; an output is computed into an fp32 copy (holding the widened old values
// when the op accumulates) and rounded once into the caller's view by store(). fp32 views pass
// through without a copy. Nothing is written to a 16-bit output unless store() runs, so an op that
// throws leaves it untouched.
#pragma once
#include <string_view>
#include <vector>

#include "posenc/tensor.h"

namespace posenc::detail {

class WidenedInput {
 public:
  WidenedInput(std::string_view op, std::string_view name, const ConstTensorView& v);
  const ConstTensorView& view() const { return view_; }

 private:
  std::vector<float> copy_;
  ConstTensorView view_;
};

class WidenedOutput {
 public:
  // accumulate: the op adds into the view (its old values are widened into the copy first).
  WidenedOutput(std::string_view op, std::string_view name, const TensorView& v, bool accumulate);
  const TensorView& view() const { return view_; }
  void store() const;  // rounds the fp32 copy once into the caller's 16-bit view (no-op for fp32)

 private:
  TensorView target_, view_;
  std::vector<float> copy_;
};

}  // namespace posenc::detail
