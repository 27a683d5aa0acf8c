// reference/mrope_positions.h: naive M-RoPE position ids (Qwen2-VL, Qwen2.5-VL, Qwen3-VL), written
// from the description of transformers 5.23's get_rope_index / get_vision_position_ids
// (models/qwen2_vl/modeling_qwen2_vl.py and its qwen2_5_vl, qwen3_vl twins), one token at a time,
// with the grids materialised (Qwen3-VL's videos split into frames up front). Valid input only.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "posenc/mrope_positions.h"

namespace posenc::ref {

struct MropeInput {
  int64_t batch = 0, tokens = 0;
  std::vector<int64_t> types;  // (B, S): 0 text, 1 image, 2 video
  std::vector<int64_t> mask;   // (B, S) of 0/1, or empty for none
  std::vector<std::array<int64_t, 3>> images, videos;
  std::vector<double> seconds;  // qwen2_5_vl second_per_grid_ts, or empty
};

struct MropeOutput {
  std::vector<int64_t> positions;  // (3, B, S)
  std::vector<int64_t> deltas;     // (B)
};

// (torch.arange(t) * time_interval).long()[k] for the dtypes transformers ends up with.
inline int64_t mrope_temporal_index(const MropePositionsConfig& c, bool video,
                                    const std::vector<double>& seconds, size_t video_index, int64_t k) {
  if (c.family != MropeFamily::qwen2_5_vl) {  // time_interval = 1.0: a float32 product
    const float v = static_cast<float>(k) * 1.0f;
    return static_cast<int64_t>(v);
  }
  if (!video) return k;  // time_interval = 1, an int
  if (seconds.empty()) {
    if (std::floor(c.tokens_per_second) == c.tokens_per_second)
      return k * static_cast<int64_t>(c.tokens_per_second);  // int * int
    const float v = static_cast<float>(k) * static_cast<float>(c.tokens_per_second);
    return static_cast<int64_t>(v);
  }
  if (c.time_dtype == MropeTimeDtype::f32) {
    const float interval = static_cast<float>(c.tokens_per_second) * static_cast<float>(seconds[video_index]);
    const float v = static_cast<float>(k) * interval;
    return static_cast<int64_t>(v);
  }
  const double interval = c.tokens_per_second * seconds[video_index];
  return static_cast<int64_t>(static_cast<double>(k) * interval);
}

inline MropeOutput mrope_positions(const MropePositionsConfig& c, const MropeInput& in) {
  const int64_t B = in.batch, S = in.tokens, m = c.spatial_merge_size;
  // Qwen3-VL: each video (t, h, w) becomes t grids (1, h, w); remember which video each came from.
  std::vector<std::array<int64_t, 3>> videos;
  std::vector<size_t> video_of;
  for (size_t v = 0; v < in.videos.size(); ++v) {
    if (c.family == MropeFamily::qwen3_vl) {
      for (int64_t f = 0; f < in.videos[v][0]; ++f) {
        videos.push_back({1, in.videos[v][1], in.videos[v][2]});
        video_of.push_back(v);
      }
    } else {
      videos.push_back(in.videos[v]);
      video_of.push_back(v);
    }
  }
  size_t next_image = 0, next_video = 0;
  MropeOutput out;
  out.positions.assign(static_cast<size_t>(3 * B * S), 0);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int64_t> kept;  // unmasked token indices
    for (int64_t s = 0; s < S; ++s)
      if (in.mask.empty() || in.mask[static_cast<size_t>(b * S + s)] == 1) kept.push_back(s);
    std::vector<std::array<int64_t, 3>> pos;  // positions of the kept tokens, in order
    int64_t current = 0;
    size_t i = 0;
    while (i < kept.size()) {
      const int64_t type = in.types[static_cast<size_t>(b * S + kept[i])];
      size_t j = i;
      while (j < kept.size() && in.types[static_cast<size_t>(b * S + kept[j])] == type) ++j;
      const int64_t length = static_cast<int64_t>(j - i);
      if (type == 0) {
        for (int64_t n = 0; n < length; ++n) pos.push_back({current + n, current + n, current + n});
        current += length;
      } else {
        const bool video = type == 2;
        const std::array<int64_t, 3> g = video ? videos.at(next_video) : in.images.at(next_image);
        const size_t video_index = video ? video_of[next_video] : 0;
        (video ? next_video : next_image)++;
        for (int64_t k = 0; k < g[0]; ++k)
          for (int64_t y = 0; y < g[1] / m; ++y)
            for (int64_t x = 0; x < g[2] / m; ++x)
              pos.push_back({current + mrope_temporal_index(c, video, in.seconds, video_index, k),
                             current + y, current + x});
        current += std::max(g[1], g[2]) / m;
      }
      i = j;
    }
    if (pos.size() != kept.size())
      throw std::logic_error("ref::mrope_positions: grid and run lengths differ");
    int64_t largest = pos.at(0)[0];
    for (size_t n = 0; n < kept.size(); ++n)
      for (int r = 0; r < 3; ++r) {
        out.positions[static_cast<size_t>((r * B + b) * S + kept[n])] = pos[n][static_cast<size_t>(r)];
        largest = std::max(largest, pos[n][static_cast<size_t>(r)]);
      }
    out.deltas.push_back(largest + 1 - static_cast<int64_t>(kept.size()));
  }
  if (next_image != in.images.size() || next_video != videos.size())
    throw std::logic_error("ref::mrope_positions: unused grids");
  return out;
}

// compute_3d_position_ids once rope_deltas are cached: arange(past, past + S) + delta, 3 rows.
inline std::vector<int64_t> mrope_decode_positions(const std::vector<int64_t>& deltas, int64_t batch,
                                                   int64_t past_length, int64_t tokens) {
  std::vector<int64_t> out(static_cast<size_t>(3 * batch * tokens));
  const int64_t per_delta = batch / static_cast<int64_t>(deltas.size());
  for (int r = 0; r < 3; ++r)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s < tokens; ++s)
        out[static_cast<size_t>((r * batch + b) * tokens + s)] =
            past_length + s + deltas[static_cast<size_t>(b / per_delta)];
  return out;
}

// The same with an attention mask (B, L): (cumsum(mask) - 1).masked_fill(mask == 0, 0) + delta.
inline std::vector<int64_t> mrope_decode_positions_masked(const std::vector<int64_t>& deltas, int64_t batch,
                                                          const std::vector<int64_t>& mask, int64_t length) {
  std::vector<int64_t> out(static_cast<size_t>(3 * batch * length));
  const int64_t per_delta = batch / static_cast<int64_t>(deltas.size());
  for (int64_t b = 0; b < batch; ++b) {
    int64_t cumsum = 0;
    for (int64_t l = 0; l < length; ++l) {
      cumsum += mask[static_cast<size_t>(b * length + l)];
      const int64_t p = mask[static_cast<size_t>(b * length + l)] == 0 ? 0 : cumsum - 1;
      for (int r = 0; r < 3; ++r)
        out[static_cast<size_t>((r * batch + b) * length + l)] =
            p + deltas[static_cast<size_t>(b / per_delta)];
    }
  }
  return out;
}

}  // namespace posenc::ref
