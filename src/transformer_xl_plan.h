// src/transformer_xl_plan.h: device-independent pieces of Transformer-XL's plan, shared by the op
// and the attention plan.
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace posenc::detail {

// Maps delta = q_pos - k_pos to its index among the distinct deltas of a block: a dense range when
// the positions are ordinary sequences, else the sorted distinct values.
struct DeltaIndex {
  std::vector<int64_t> deltas;
  int64_t lo = 0;
  bool dense = true;
  DeltaIndex(std::span<const int64_t> q, std::span<const int64_t> k);
  int64_t operator()(int64_t delta) const {
    if (dense) return delta - lo;
    return std::lower_bound(deltas.begin(), deltas.end(), delta) - deltas.begin();
  }
  int64_t size() const { return static_cast<int64_t>(deltas.size()); }
};

}  // namespace posenc::detail
