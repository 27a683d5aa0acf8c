// posenc/mrope_positions.h: M-RoPE's position ids (3, B, S) for a token sequence with image and
// video placeholders, exactly as transformers 5.23 computes them for Qwen2-VL, Qwen2.5-VL and
// Qwen3-VL (Qwen2VLModel.get_rope_index and get_vision_position_ids in
// models/qwen2_vl/modeling_qwen2_vl.py; Qwen2_5_VLModel.get_rope_index in qwen2_5_vl/; and
// Qwen3VLModel.get_rope_index in qwen3_vl/), and the decode-step positions of their
// compute_3d_position_ids. The three rows (t, h, w) feed RopeMultimodal::mrope (Qwen2-VL,
// Qwen2.5-VL) or mrope_interleaved (Qwen3-VL) in posenc/rope.h.
//
// Each row of the batch is read without its padding (attention_mask == 0) and cut into runs of
// equal token type (0 text, 1 image, 2 video: HF's mm_token_type_ids). A counter p starts at 0:
//   text run of n tokens:  t = h = w = p, p+1, ..., p+n-1;                       then p += n
//   vision run, grid (T, H, W) of patches, m = spatial_merge_size: one token per merged patch,
//     (T, H/m, W/m) of them in (t, h, w) row-major order, token (k, i, j) at
//       t = p + floor(k * interval), h = p + i, w = p + j;                    then p += max(H, W)/m
//     The temporal extent does not advance p (transformers 5.23). transformers 4.x and Qwen's own code
//     (huggingface/transformers PR 35569's example) start the next text at the run's max + 1 instead:
//     the two differ when floor((T - 1) * interval) + 1 > max(H, W)/m (long videos; Qwen3-VL splits them).
// Padding tokens get 0 on the three rows. delta[b] = max over the row's positions + 1 - (number of
// non-padding tokens): the offset that the following text tokens (decoding) add to their index.
//
// Example, m = 2: text "a b", an image with grid (1, 4, 6) (1 x 2 x 3 = 6 tokens), text "c d":
//   tokens  a b | I I I I I I | c d
//   t       0 1 | 2 2 2 2 2 2 | 5 6        p after the image = 2 + max(4, 6)/2 = 5
//   h       0 1 | 2 2 2 3 3 3 | 5 6
//   w       0 1 | 2 3 4 2 3 4 | 5 6        delta = (6 + 1) - 10 = -3
//
// Grids are consumed in order over the whole batch (row 0's runs first): the k-th image run of the
// batch takes image_grid_thw[k], the k-th video run video_grid_thw[k]. Two adjacent images with no
// text between them form one run, as in transformers (processors put vision_start/end text
// tokens around each). Families differ in the temporal interval and in how videos are split:
//   qwen2_vl:   interval 1 for images and videos.
//   qwen2_5_vl: images 1; video v: tokens_per_second * second_per_grid_ts[v] (1 when absent).
//   qwen3_vl:   interval 1; each video (T, H, W) is T single-frame grids (1, H, W), one run per
//               frame (frames are separated by timestamp text tokens), so video runs count frames.
//
// The floor of k * interval is computed with the dtypes transformers uses (so that the rounding is
// the same bit for bit; torch's default dtype float32 assumed):
//   qwen2_5_vl video, second_per_grid_ts given: interval = f(tokens_per_second) * f(s) rounded to
//       f, then f(k) * interval rounded to f, truncated; f = float32 (time_dtype f32: the float32
//       tensor that processors return) or float64 (time_dtype f64: a float64 tensor).
//       e.g. s = 0.7, tokens_per_second 2, k = 45: float32 gives 63, float64 gives 62.
//   qwen2_5_vl video without second_per_grid_ts: k * tokens_per_second in int64 when
//       tokens_per_second is an integer (a Python int in HF), else in float32.
//   qwen2_5_vl image: k exactly; qwen2_vl, qwen3_vl: float32(k) (HF's time_interval = 1.0).
#pragma once
#include <cstdint>

#include "posenc/tensor.h"

namespace posenc {

enum class MropeFamily : uint8_t { qwen2_vl, qwen2_5_vl, qwen3_vl };
const char* mrope_family_name(MropeFamily family);  // "qwen2_vl", "qwen2_5_vl", "qwen3_vl" (HF model_type)

// The dtype of the second_per_grid_ts tensor handed to Qwen2.5-VL (see above).
enum class MropeTimeDtype : uint8_t { f32, f64 };
const char* mrope_time_dtype_name(MropeTimeDtype dtype);  // "float32", "float64"

struct MropePositionsConfig {
  MropeFamily family = MropeFamily::qwen2_vl;
  int64_t spatial_merge_size = 2;  // vision_config.spatial_merge_size (>= 1; 2 in every release)
  // qwen2_5_vl: vision_config.tokens_per_second (> 0). 4 is the HF class default; the released
  // checkpoints set 2. Ignored by the other families.
  double tokens_per_second = 4.0;
  MropeTimeDtype time_dtype = MropeTimeDtype::f32;  // qwen2_5_vl with second_per_grid_ts
};
// Throws posenc::Error naming the field.
void validate(const MropePositionsConfig& config);

// Inputs, all on the CPU; an empty view (data == nullptr) is an absent optional argument.
struct MropePositionsInputs {
  ConstTensorView mm_token_type_ids;   // (B, S) i64: 0 text, 1 image, 2 video
  ConstTensorView attention_mask;      // (B, S) i64 of 0/1, optional (absent: no padding)
  ConstTensorView image_grid_thw;      // (num_images, 3) i64 (t, h, w) patches, optional
  ConstTensorView video_grid_thw;      // (num_videos, 3) i64, optional
  ConstTensorView second_per_grid_ts;  // (num_videos) f64 >= 0, optional; qwen2_5_vl only
};

// positions (3, B, S) i64 and deltas (B) i64, any strides (transformers returns deltas as (B, 1)).
// Every input is checked before anything is written; a posenc::Error names the argument and the
// value: token types other than 0/1/2, masks other than 0/1, a row with no unmasked token (on
// which transformers fails), grids that are not positive or whose h, w are not multiples of
// spatial_merge_size, t*h*w overflowing, a run whose length is not its grid's token count, more
// runs than grids or grids left unused (transformers ignores those), second_per_grid_ts with a
// family other than qwen2_5_vl or not one per video, positions beyond 2^53.
void mrope_positions(const MropePositionsConfig& config, const MropePositionsInputs& inputs,
                     TensorView positions, TensorView deltas);

// Positions of the tokens that follow a prompt, from its deltas (compute_3d_position_ids in
// qwen2_vl/modeling_qwen2_vl.py, the branch taken once rope_deltas are cached):
//   positions[r, b, s] = past_length + s + deltas[b / (B / B0)]      for r = 0, 1, 2
// positions (3, B, S) i64; deltas (B0) or (B0, 1) i64 with B a multiple of B0 (HF's
// repeat_interleave for beams or samples per prompt).
void mrope_decode_positions(ConstTensorView deltas, int64_t past_length, TensorView positions);
// The same branch with an attention mask (B, L) of 0/1 over the past and new tokens:
//   positions[r, b, l] = (number of ones in mask[b, 0..l]) - 1 + delta,   delta alone where mask is 0
// positions (3, B, L) i64.
void mrope_decode_positions(ConstTensorView deltas, ConstTensorView attention_mask, TensorView positions);

}  // namespace posenc
