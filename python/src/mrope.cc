// python/src/mrope.cc: M-RoPE position ids of Qwen2-VL, Qwen2.5-VL and Qwen3-VL
// (posenc/mrope_positions.h) on numpy int64 arrays, already converted by python/posenc/mrope.py.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "arrays.h"
#include "posenc/mrope_positions.h"

namespace posenc::python {
namespace {

MropePositionsConfig mrope_config(const std::string& family, int64_t spatial_merge_size,
                                  double tokens_per_second, const std::string& time_dtype) {
  MropePositionsConfig c;
  if (family == "qwen2_vl")
    c.family = MropeFamily::qwen2_vl;
  else if (family == "qwen2_5_vl")
    c.family = MropeFamily::qwen2_5_vl;
  else if (family == "qwen3_vl")
    c.family = MropeFamily::qwen3_vl;
  else
    throw Error("mrope_positions: family = '" + family +
                "' is invalid: expected 'qwen2_vl', 'qwen2_5_vl' or 'qwen3_vl'");
  if (time_dtype == "float32")
    c.time_dtype = MropeTimeDtype::f32;
  else if (time_dtype == "float64")
    c.time_dtype = MropeTimeDtype::f64;
  else
    throw Error("mrope_positions: time_dtype = '" + time_dtype +
                "' is invalid: expected 'float32' or 'float64'");
  c.spatial_merge_size = spatial_merge_size;
  c.tokens_per_second = tokens_per_second;
  validate(c);
  return c;
}

}  // namespace

void bind_mrope(nb::module_& m) {
  m.def(
      "mrope_positions",
      [](const InArray& mm_token_type_ids, const OptInArray& attention_mask, const OptInArray& image_grid_thw,
         const OptInArray& video_grid_thw, const OptInArray& second_per_grid_ts, const OutArray& positions,
         const OutArray& deltas, const std::string& family, int64_t spatial_merge_size,
         double tokens_per_second, const std::string& time_dtype) {
        MropePositionsInputs in;
        in.mm_token_type_ids = in_view(mm_token_type_ids, "mm_token_type_ids");
        in.attention_mask = in_view(attention_mask, "attention_mask");
        in.image_grid_thw = in_view(image_grid_thw, "image_grid_thw");
        in.video_grid_thw = in_view(video_grid_thw, "video_grid_thw");
        in.second_per_grid_ts = in_view(second_per_grid_ts, "second_per_grid_ts");
        mrope_positions(mrope_config(family, spatial_merge_size, tokens_per_second, time_dtype), in,
                        out_view(positions, "positions"), out_view(deltas, "deltas"));
      },
      nb::arg("mm_token_type_ids"), nb::arg("attention_mask").none(), nb::arg("image_grid_thw").none(),
      nb::arg("video_grid_thw").none(), nb::arg("second_per_grid_ts").none(), nb::arg("positions"),
      nb::arg("deltas"), nb::arg("family"), nb::arg("spatial_merge_size"), nb::arg("tokens_per_second"),
      nb::arg("time_dtype"));
  m.def(
      "mrope_decode_positions",
      [](const InArray& deltas, int64_t past_length, const OptInArray& attention_mask,
         const OutArray& positions) {
        if (attention_mask)
          mrope_decode_positions(in_view(deltas, "deltas"), in_view(*attention_mask, "attention_mask"),
                                 out_view(positions, "positions"));
        else
          mrope_decode_positions(in_view(deltas, "deltas"), past_length, out_view(positions, "positions"));
      },
      nb::arg("deltas"), nb::arg("past_length"), nb::arg("attention_mask").none(), nb::arg("positions"));
}

}  // namespace posenc::python
