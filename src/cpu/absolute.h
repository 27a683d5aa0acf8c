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

// The same into bf16 / fp16 rows (B, T) of `dim` elements: each chunk of rows computed in fp32
// (a cache-resident scratch), then rounded once; with accumulate, row + sinusoid in fp32, rounded once.
void sinusoid_rows16(const SinusoidalConfig& config, const std::vector<double>& w,
                     const std::vector<int64_t>& positions, Strided<uint16_t, 2> rows, DType dtype,
                     bool accumulate);

// out (B, T, E) = (or +=, when accumulate) table (L, E) [positions (B, T)].
void learned_rows(Strided<const float, 2> table, const std::vector<int64_t>& positions, Strided<float, 3> out,
                  bool accumulate);
// The same into bf16 / fp16 out (unit stride on E): table rows (fp32) rounded once, or added to
// the widened row in fp32 and rounded once.
void learned_rows16(Strided<const float, 2> table, const std::vector<int64_t>& positions,
                    Strided<uint16_t, 3> out, DType dtype, bool accumulate);
// grad_table (L, E) += scatter of grad_out (B, T, E) by positions (B, T), summed in row order.
void learned_rows_backward(Strided<const float, 3> grad_out, const std::vector<int64_t>& positions,
                           Strided<float, 2> grad_table);
// The same for bf16 / fp16 grad_out (unit stride on E), widened element by element.
void learned_rows_backward16(Strided<const uint16_t, 3> grad_out, DType dtype,
                             const std::vector<int64_t>& positions, Strided<float, 2> grad_table);

// out (N, bits): bit (bits - 1 - b) of positions[n], as 1 or `zero` (-1 signed, 0 unsigned).
void binary_rows(int64_t bits, float zero, const std::vector<int64_t>& positions, Strided<float, 2> out);

}  // namespace posenc::cpu
