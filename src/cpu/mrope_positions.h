// src/cpu/mrope_positions.h: the loops that write M-RoPE position ids from a validated plan
// (src/mrope_positions_plan.h). Single-threaded: a few int64 stores per token.
#pragma once
#include <cstdint>
#include <vector>

#include "src/mrope_positions_plan.h"
#include "src/strided.h"

namespace posenc::cpu {

// positions (3, B, S): row by row, the runs' positions into the unmasked tokens in order, 0 into
// the masked ones; deltas (B) = plan.deltas.
void mrope_positions(const detail::MropePositionsPlan& plan, Strided<int64_t, 3> positions,
                     Strided<int64_t, 1> deltas);

// positions (3, B, S) = past_length + s + row_deltas[b] (row_deltas: (B), already repeated).
void mrope_decode_positions(const std::vector<int64_t>& row_deltas, int64_t past_length,
                            Strided<int64_t, 3> positions);
// positions (3, B, L) = cumsum(mask[b])[l] - 1 (0 where mask is 0) + row_deltas[b]; mask (B, L) of 0/1.
void mrope_decode_positions(const std::vector<int64_t>& row_deltas, const std::vector<int64_t>& mask,
                            Strided<int64_t, 3> positions);

}  // namespace posenc::cpu
