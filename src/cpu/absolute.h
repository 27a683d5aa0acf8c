// src/cpu/absolute.h: CPU loops of the absolute encodings (sinusoidal rows, learned table rows and
// their scatter-add gradient, binary codes). Views arrive validated; positions arrive checked.
#pragma once
#include <cstdint>
#include <vector>

#include "posenc/absolute.h"
#include "src/strided.h"

namespace posenc::cpu {

// rows (B, T) of `dim` elements: the sinusoid of positions[b * T + t] + position_offset, written
// (or added, when accumulate) in the config's layout. w: (dim / 2) frequencies.
void sinusoid_rows(const SinusoidalConfig& config, const std::vector<double>& w,
                   const std::vector<int64_t>& positions, Strided<float, 2> rows, bool accumulate);

// out (B, T, E) = (or +=, when accumulate) table (L, E) [positions (B, T)].
void learned_rows(Strided<const float, 2> table, const std::vector<int64_t>& positions, Strided<float, 3> out,
                  bool accumulate);
// grad_table (L, E) += scatter of grad_out (B, T, E) by positions (B, T), summed in row order.
void learned_rows_backward(Strided<const float, 3> grad_out, const std::vector<int64_t>& positions,
                           Strided<float, 2> grad_table);

// out (N, bits): bit (bits - 1 - b) of positions[n], as 1 or `zero` (-1 signed, 0 unsigned).
void binary_rows(int64_t bits, float zero, const std::vector<int64_t>& positions, Strided<float, 2> out);

}  // namespace posenc::cpu
