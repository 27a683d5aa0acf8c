// src/cpu/mrope_positions.cc: M-RoPE position ids from a validated plan (see the header).
#include "src/cpu/mrope_positions.h"

namespace posenc::cpu {

// positions (3, B, S), deltas (B). Vision token (k, i, j) of a run starting at p gets
// (p + temporal[k], p + i, p + j) (get_vision_position_ids' meshgrid, "ij" order, flattened).
void mrope_positions(const detail::MropePositionsPlan& plan, Strided<int64_t, 3> positions,
                     Strided<int64_t, 1> deltas) {
  const int64_t S = plan.tokens;
  std::vector<int64_t> kept;  // the row's unmasked token indices, in order
  kept.reserve(static_cast<size_t>(S));
  for (int64_t b = 0; b < plan.batch; ++b) {
    kept.clear();
    for (int64_t s = 0; s < S; ++s) {
      if (plan.keep[static_cast<size_t>(b * S + s)])
        kept.push_back(s);
      else
        positions(0, b, s) = positions(1, b, s) = positions(2, b, s) = 0;  // HF: torch.zeros, unfilled
    }
    size_t c = 0;  // next unmasked token
    auto put = [&](int64_t t, int64_t h, int64_t w) {
      const int64_t s = kept[c++];
      positions(0, b, s) = t;
      positions(1, b, s) = h;
      positions(2, b, s) = w;
    };
    for (int64_t r = plan.row_runs[static_cast<size_t>(b)]; r < plan.row_runs[static_cast<size_t>(b) + 1];
         ++r) {
      const detail::MropeRun& run = plan.runs[static_cast<size_t>(r)];
      const int64_t p = run.start;
      if (!run.vision) {
        for (int64_t i = 0; i < run.length; ++i) put(p + i, p + i, p + i);
        continue;
      }
      for (int64_t k = 0; k < run.frames; ++k) {
        const int64_t t = p + plan.temporal[static_cast<size_t>(run.temporal + k)];
        for (int64_t i = 0; i < run.grid_h; ++i)
          for (int64_t j = 0; j < run.grid_w; ++j) put(t, p + i, p + j);
      }
    }
    deltas(b) = plan.deltas[static_cast<size_t>(b)];
  }
}

void mrope_decode_positions(const std::vector<int64_t>& row_deltas, int64_t past_length,
                            Strided<int64_t, 3> positions) {
  for (int64_t b = 0; b < positions.extent[1]; ++b)
    for (int64_t s = 0; s < positions.extent[2]; ++s) {
      const int64_t p = past_length + s + row_deltas[static_cast<size_t>(b)];
      positions(0, b, s) = positions(1, b, s) = positions(2, b, s) = p;
    }
}

void mrope_decode_positions(const std::vector<int64_t>& row_deltas, const std::vector<int64_t>& mask,
                            Strided<int64_t, 3> positions) {
  const int64_t L = positions.extent[2];
  for (int64_t b = 0; b < positions.extent[1]; ++b) {
    int64_t ones = 0;
    for (int64_t l = 0; l < L; ++l) {
      const bool on = mask[static_cast<size_t>(b * L + l)] != 0;
      ones += on;
      // attention_mask.long().cumsum(-1) - 1, masked_fill(attention_mask == 0, 0), + delta
      const int64_t p = (on ? ones - 1 : 0) + row_deltas[static_cast<size_t>(b)];
      positions(0, b, l) = positions(1, b, l) = positions(2, b, l) = p;
    }
  }
}

}  // namespace posenc::cpu
