// src/mrope_positions_plan.h: what the front end (src/mrope_positions.cc) hands the CPU loops
// (src/cpu/mrope_positions.cc) once every input is validated: the runs of each row, their start
// positions and grids, and the temporal index of every frame, all computed on the host.
#pragma once
#include <cstdint>
#include <vector>

namespace posenc::detail {

// One run of equal token type in a row, padding removed (transformers' itertools.groupby).
struct MropeRun {
  int64_t start = 0;   // the row's counter p when the run begins (get_rope_index's current_pos)
  int64_t length = 0;  // tokens of the run: text length, or frames * grid_h * grid_w
  bool vision = false;
  int64_t frames = 0, grid_h = 0, grid_w = 0;  // vision: merged grid (t, h/m, w/m)
  int64_t temporal = 0;  // vision: index into MropePositionsPlan::temporal of the run's frame 0
};

struct MropePositionsPlan {
  int64_t batch = 0, tokens = 0;  // B, S
  std::vector<uint8_t> keep;      // (B, S): 1 where attention_mask is 1 (or no mask)
  std::vector<int64_t> row_runs;  // (B + 1): the runs of row b are runs[row_runs[b], row_runs[b + 1])
  std::vector<MropeRun> runs;
  std::vector<int64_t> temporal;  // floor(k * interval) per frame k of each vision run, concatenated
  std::vector<int64_t> deltas;    // (B): max position + 1 - unmasked tokens
};

}  // namespace posenc::detail
