// src/mrope_positions.cc: front end of mrope_positions (posenc/mrope_positions.h): validates every
// input, walks the runs as transformers 5.23's get_rope_index does (models/qwen2_vl/
// modeling_qwen2_vl.py, qwen2_5_vl/modeling_qwen2_5_vl.py, qwen3_vl/modeling_qwen3_vl.py) and
// builds the plan; src/cpu/mrope_positions.cc writes the positions. Nothing is written on error.
#include "posenc/mrope_positions.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "src/check.h"
#include "src/cpu/mrope_positions.h"
#include "src/mrope_positions_plan.h"
#include "src/strided.h"

namespace posenc {

const char* mrope_family_name(MropeFamily family) {
  switch (family) {
    case MropeFamily::qwen2_vl:
      return "qwen2_vl";
    case MropeFamily::qwen2_5_vl:
      return "qwen2_5_vl";
    case MropeFamily::qwen3_vl:
      return "qwen3_vl";
  }
  return "unknown";
}

const char* mrope_time_dtype_name(MropeTimeDtype dtype) {
  switch (dtype) {
    case MropeTimeDtype::f32:
      return "float32";
    case MropeTimeDtype::f64:
      return "float64";
  }
  return "unknown";
}

namespace {

constexpr std::string_view kOp = "mrope_positions";
constexpr std::string_view kDecodeOp = "mrope_decode_positions";

bool present(const ConstTensorView& v) { return v.data != nullptr || v.rank != 0; }

// A contiguous copy of an int64 view of the given shape (rank 1 or 2), checked.
std::vector<int64_t> gather_i64(std::string_view op, std::string_view name, const ConstTensorView& v,
                                std::initializer_list<int64_t> shape) {
  detail::check_view(op, name, v, DType::i64, shape);
  const int64_t rows = v.shape[0], cols = v.rank == 2 ? v.shape[1] : 1;
  const int64_t col_stride = v.rank == 2 ? v.strides[1] : 0;
  std::vector<int64_t> out(static_cast<size_t>(rows * cols));
  const int64_t* p = v.ptr<int64_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(r * cols + c)] = p[r * v.strides[0] + c * col_stride];
  return out;
}

std::string grid_string(const int64_t* g) { return detail::to_string(std::vector<int64_t>(g, g + 3)); }

// floor(k * interval) for the frames k of a vision run, with transformers' dtypes (see the header):
// get_vision_position_ids computes (torch.arange(llm_grid_t) * time_interval).long().
struct TimeInterval {
  enum class Rule : uint8_t { integer, f32, f64 } rule = Rule::integer;
  int64_t integer = 1;  // k * integer in int64 (a Python int interval)
  float f32 = 1.0f;     // fl32(fl32(k) * f32): a float32 tensor or a Python float (default dtype)
  double f64 = 1.0;     // k * f64 in double: a float64 tensor

  // The index as a double (exact for the integer rule below 2^53), for the range check.
  double value(int64_t k) const {
    switch (rule) {
      case Rule::integer:
        return static_cast<double>(k) * static_cast<double>(integer);
      case Rule::f32:
        return static_cast<double>(static_cast<float>(k) * f32);
      case Rule::f64:
        return static_cast<double>(k) * f64;
    }
    return 0;
  }
};

// The interval of one vision run (qwen2_5_vl/modeling_qwen2_5_vl.py get_rope_index:
// time_interval = tokens_per_second * next(second_per_grid_ts) for videos, 1 for images; the other
// families pass get_vision_position_ids' default time_interval = 1.0, a Python float).
TimeInterval time_interval(const MropePositionsConfig& c, bool video, const std::vector<double>& seconds,
                           size_t video_index) {
  TimeInterval ti;
  if (c.family != MropeFamily::qwen2_5_vl) {
    ti.rule = TimeInterval::Rule::f32;  // arange(t) * 1.0 -> float32
    return ti;
  }
  if (!video) return ti;  // time_interval = 1 (a Python int): exact
  if (seconds.empty()) {  // iter([1] * ...): tokens_per_second * 1, a Python int or float
    const double tps = c.tokens_per_second;
    if (tps == std::floor(tps) && tps < 9.0e15) {
      ti.integer = static_cast<int64_t>(tps);
    } else {
      ti.rule = TimeInterval::Rule::f32;
      ti.f32 = static_cast<float>(tps);
    }
    return ti;
  }
  const double s = seconds[video_index];
  if (c.time_dtype == MropeTimeDtype::f32) {  // Python scalar * 0-d float32 tensor, in float32
    ti.rule = TimeInterval::Rule::f32;
    ti.f32 = static_cast<float>(c.tokens_per_second) * static_cast<float>(s);
  } else {
    ti.rule = TimeInterval::Rule::f64;
    ti.f64 = c.tokens_per_second * s;
  }
  return ti;
}

// The grids of one modality in the order get_rope_index consumes them. qwen3_vl splits each video
// (t, h, w) into t grids (1, h, w) (torch.repeat_interleave(video_grid_thw, video_grid_thw[:, 0])),
// walked here frame by frame without materialising them.
struct GridQueue {
  std::string_view name;
  std::vector<int64_t> grids;  // (n, 3)
  bool per_frame = false;
  int64_t next = 0, frame = 0;

  int64_t count() const { return static_cast<int64_t>(grids.size() / 3); }
  bool exhausted() const { return next >= count(); }
  const int64_t* current() const { return &grids[static_cast<size_t>(next * 3)]; }
  // "video_grid_thw[1] = [4, 8, 8] (frame 2 of 4, split per frame by qwen3_vl)"
  std::string label() const {
    std::string s = std::string(name) + "[" + std::to_string(next) + "] = " + grid_string(current());
    if (per_frame)
      s += " (frame " + std::to_string(frame) + " of " + std::to_string(current()[0]) +
           ", split per frame by qwen3_vl)";
    return s;
  }
  void advance() {
    if (per_frame && ++frame < current()[0]) return;
    frame = 0;
    ++next;
  }
};

GridQueue grid_queue(std::string_view name, const ConstTensorView& v, int64_t merge, bool per_frame) {
  GridQueue q;
  q.name = name;
  q.per_frame = per_frame;
  if (!present(v)) return q;
  q.grids = gather_i64(kOp, name, v, {-1, 3});
  for (int64_t i = 0; i < q.count(); ++i) {
    const int64_t* g = &q.grids[static_cast<size_t>(i * 3)];
    const std::string arg = std::string(name) + "[" + std::to_string(i) + "]";
    const char* axis[3] = {"t", "h", "w"};
    for (int a = 0; a < 3; ++a)
      if (g[a] <= 0) detail::fail_arg(kOp, arg, grid_string(g), std::string(axis[a]) + " must be > 0");
    for (int a = 1; a < 3; ++a)
      if (g[a] % merge != 0)
        detail::fail_arg(kOp, arg, grid_string(g),
                         std::string(axis[a]) + " = " + std::to_string(g[a]) +
                             " is not a multiple of spatial_merge_size = " + std::to_string(merge));
    int64_t thw = 0;
    if (__builtin_mul_overflow(g[0], g[1], &thw) || __builtin_mul_overflow(thw, g[2], &thw))
      detail::fail_arg(kOp, arg, grid_string(g), "t * h * w overflows int64");
  }
  return q;
}

}  // namespace

void validate(const MropePositionsConfig& c) {
  if (c.family != MropeFamily::qwen2_vl && c.family != MropeFamily::qwen2_5_vl &&
      c.family != MropeFamily::qwen3_vl)
    detail::fail_arg(kOp, "family", static_cast<int>(c.family), "expected qwen2_vl, qwen2_5_vl or qwen3_vl");
  if (c.spatial_merge_size < 1)
    detail::fail_arg(kOp, "spatial_merge_size", c.spatial_merge_size, "must be >= 1");
  if (c.family == MropeFamily::qwen2_5_vl)
    detail::check_positive(kOp, "tokens_per_second", c.tokens_per_second);
  if (c.time_dtype != MropeTimeDtype::f32 && c.time_dtype != MropeTimeDtype::f64)
    detail::fail_arg(kOp, "time_dtype", static_cast<int>(c.time_dtype), "expected f32 or f64");
}

void mrope_positions(const MropePositionsConfig& config, const MropePositionsInputs& in, TensorView positions,
                     TensorView deltas) {
  validate(config);
  const int64_t m = config.spatial_merge_size;

  // 1. Shapes and values of every input.
  detail::check_view(kOp, "mm_token_type_ids", in.mm_token_type_ids, DType::i64, {-1, -1});
  const int64_t B = in.mm_token_type_ids.shape[0], S = in.mm_token_type_ids.shape[1];
  const std::vector<int64_t> types = gather_i64(kOp, "mm_token_type_ids", in.mm_token_type_ids, {B, S});
  for (int64_t i = 0; i < B * S; ++i)
    if (types[static_cast<size_t>(i)] < 0 || types[static_cast<size_t>(i)] > 2)
      detail::fail(kOp, "mm_token_type_ids[", i / S, ", ", i % S, "] = ", types[static_cast<size_t>(i)],
                   " is invalid: must be 0 (text), 1 (image) or 2 (video)");
  detail::MropePositionsPlan plan;
  plan.batch = B;
  plan.tokens = S;
  plan.keep.assign(static_cast<size_t>(B * S), 1);
  if (present(in.attention_mask)) {
    const std::vector<int64_t> mask = gather_i64(kOp, "attention_mask", in.attention_mask, {B, S});
    for (int64_t i = 0; i < B * S; ++i) {
      const int64_t v = mask[static_cast<size_t>(i)];
      if (v != 0 && v != 1)
        detail::fail(kOp, "attention_mask[", i / S, ", ", i % S, "] = ", v, " is invalid: must be 0 or 1");
      plan.keep[static_cast<size_t>(i)] = static_cast<uint8_t>(v);
    }
  }
  GridQueue images = grid_queue("image_grid_thw", in.image_grid_thw, m, false);
  GridQueue videos =
      grid_queue("video_grid_thw", in.video_grid_thw, m, config.family == MropeFamily::qwen3_vl);
  std::vector<double> seconds;
  if (present(in.second_per_grid_ts)) {
    if (config.family != MropeFamily::qwen2_5_vl)
      detail::fail(kOp, "second_per_grid_ts is given, but family ", mrope_family_name(config.family),
                   " does not use it (only qwen2_5_vl does)");
    detail::check_view(kOp, "second_per_grid_ts", in.second_per_grid_ts, DType::f64, {-1});
    if (in.second_per_grid_ts.shape[0] != videos.count())
      detail::fail(kOp, "second_per_grid_ts has ", in.second_per_grid_ts.shape[0],
                   " values, expected one per video (video_grid_thw has ", videos.count(), " rows)");
    const double* p = in.second_per_grid_ts.ptr<double>();
    for (int64_t v = 0; v < videos.count(); ++v) {
      const double s = p[v * in.second_per_grid_ts.strides[0]];
      if (!std::isfinite(s) || s < 0)
        detail::fail_arg(kOp, "second_per_grid_ts[" + std::to_string(v) + "]", s, "must be finite and >= 0");
      seconds.push_back(s);
    }
  }
  detail::check_view(kOp, "positions", positions, DType::i64, {3, B, S});
  detail::check_view(kOp, "deltas", deltas, DType::i64, {B});

  // 2. The runs of each row, without its padding (get_rope_index's groupby over the masked types).
  plan.row_runs.push_back(0);
  for (int64_t b = 0; b < B; ++b) {
    const std::string row = "row " + std::to_string(b);
    int64_t p = 0, n = 0, row_max = std::numeric_limits<int64_t>::min();
    int64_t s = 0;
    while (true) {
      while (s < S && !plan.keep[static_cast<size_t>(b * S + s)]) ++s;
      if (s == S) break;
      // [first, s): one run of type `type`, `length` unmasked tokens.
      const int64_t type = types[static_cast<size_t>(b * S + s)], first = s;
      int64_t length = 0, last = s;
      for (; s < S; ++s) {
        if (!plan.keep[static_cast<size_t>(b * S + s)]) continue;
        if (types[static_cast<size_t>(b * S + s)] != type) break;
        ++length;
        last = s;
      }
      detail::MropeRun run;
      run.start = p;
      run.length = length;
      if (type == 0) {
        row_max = std::max(row_max, p + length - 1);
        p += length;
      } else {
        GridQueue& q = type == 1 ? images : videos;
        const std::string where = std::string(type == 1 ? "image" : "video") + " run of " + row +
                                  " (mm_token_type_ids[" + std::to_string(b) + ", " + std::to_string(first) +
                                  ".." + std::to_string(last) + "], " + std::to_string(length) + " tokens)";
        if (q.exhausted())
          detail::fail(kOp, where, " has no grid: ", q.name, " has only ", q.count(), " rows",
                       q.per_frame ? " (frames counted per video)" : "");
        const int64_t* g = q.current();
        run.vision = true;
        run.frames = q.per_frame ? 1 : g[0];
        run.grid_h = g[1] / m;
        run.grid_w = g[2] / m;
        const int64_t tokens = run.frames * run.grid_h * run.grid_w;  // t * h * w checked above
        if (tokens != length)
          detail::fail(kOp, q.label(), " gives ", run.frames, " * (", g[1], "/", m, ") * (", g[2], "/", m,
                       ") = ", tokens, " tokens (spatial_merge_size ", m, "), but its ", where, " has ",
                       length);
        const TimeInterval ti = time_interval(config, type == 2, seconds, static_cast<size_t>(q.next));
        run.temporal = static_cast<int64_t>(plan.temporal.size());
        // The temporal index grows with k (interval >= 0): the last frame bounds the range.
        const double last_t = ti.value(run.frames - 1);
        if (!(last_t <= static_cast<double>(detail::kMaxAbsPosition - p)))
          detail::fail(kOp, q.label(), ": its last frame's temporal position ", p, " + ", last_t,
                       " is beyond 2^53 (tokens_per_second ", config.tokens_per_second, ")");
        for (int64_t k = 0; k < run.frames; ++k)
          plan.temporal.push_back(static_cast<int64_t>(ti.value(k)));  // .long(): truncation
        row_max = std::max({row_max, p + plan.temporal.back(), p + run.grid_h - 1, p + run.grid_w - 1});
        p += std::max(g[1], g[2]) / m;  // current_pos += max(grid_thw[1], grid_thw[2]) // spatial_merge_size
        q.advance();
      }
      n += length;
      plan.runs.push_back(run);
    }
    if (n == 0) {
      if (S == 0) detail::fail(kOp, "mm_token_type_ids has shape [", B, ", 0]: every row needs a token");
      detail::fail(kOp, "attention_mask ", row,
                   " has no 1: transformers' get_rope_index cannot handle a row "
                   "without tokens (torch.cat of no positions)");
    }
    plan.deltas.push_back(row_max + 1 - n);  // llm_positions.max() + 1 - len(current_input_ids)
    plan.row_runs.push_back(static_cast<int64_t>(plan.runs.size()));
  }
  for (GridQueue* q : {&images, &videos})
    if (!q->exhausted())
      detail::fail(kOp, q->label(), " and the grids after it are unused: the token types have fewer ",
                   q == &images ? "image" : "video", " runs than ", q->name, " has ",
                   q->per_frame ? "frames" : "rows", " (transformers ignores the extra grids)");

  // 3. The loops.
  Strided<int64_t, 3> pos{positions.ptr<int64_t>(),
                          {3, B, S},
                          {positions.strides[0], positions.strides[1], positions.strides[2]}};
  Strided<int64_t, 1> del{deltas.ptr<int64_t>(), {B}, {deltas.strides[0]}};
  cpu::mrope_positions(plan, pos, del);
}

namespace {

// deltas (B0) or (B0, 1), repeated to B rows (rope_deltas.repeat_interleave(B // B0, dim=0)).
std::vector<int64_t> row_deltas(const ConstTensorView& deltas, int64_t B) {
  if (deltas.rank == 2)
    detail::check_view(kDecodeOp, "deltas", deltas, DType::i64, {-1, 1});
  else
    detail::check_view(kDecodeOp, "deltas", deltas, DType::i64, {-1});
  const int64_t B0 = deltas.shape[0];
  if (B0 == 0 ? B != 0 : B % B0 != 0)
    detail::fail(kDecodeOp, "deltas has shape ", deltas.shape_string(), ": the batch of positions, ", B,
                 ", must be a multiple of its ", B0, " rows");
  std::vector<int64_t> out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t d = deltas.ptr<int64_t>()[(b / (B / B0)) * deltas.strides[0]];
    if (d > detail::kMaxAbsPosition || d < -detail::kMaxAbsPosition)
      detail::fail_arg(kDecodeOp, "deltas[" + std::to_string(b / (B / B0)) + "]", d, "must be within +-2^53");
    out[static_cast<size_t>(b)] = d;
  }
  return out;
}

Strided<int64_t, 3> positions_3d(const TensorView& v) {
  return {v.ptr<int64_t>(), {v.shape[0], v.shape[1], v.shape[2]}, {v.strides[0], v.strides[1], v.strides[2]}};
}

}  // namespace

void mrope_decode_positions(ConstTensorView deltas, int64_t past_length, TensorView positions) {
  detail::check_view(kDecodeOp, "positions", positions, DType::i64, {3, -1, -1});
  const int64_t B = positions.shape[1], S = positions.shape[2];
  const std::vector<int64_t> d = row_deltas(deltas, B);
  if (past_length < 0 || past_length > detail::kMaxAbsPosition)
    detail::fail_arg(kDecodeOp, "past_length", past_length, "must be in [0, 2^53]");
  for (int64_t b = 0; b < B && S > 0; ++b) {
    const int64_t last = past_length + (S - 1) + d[static_cast<size_t>(b)];
    if (S - 1 > detail::kMaxAbsPosition || last > detail::kMaxAbsPosition || last < -detail::kMaxAbsPosition)
      detail::fail(kDecodeOp, "past_length ", past_length, " + ", S - 1, " + deltas row ", b, " = ", last,
                   " is outside [-2^53, 2^53]");
  }
  cpu::mrope_decode_positions(d, past_length, positions_3d(positions));
}

void mrope_decode_positions(ConstTensorView deltas, ConstTensorView attention_mask, TensorView positions) {
  detail::check_view(kDecodeOp, "positions", positions, DType::i64, {3, -1, -1});
  const int64_t B = positions.shape[1], L = positions.shape[2];
  const std::vector<int64_t> d = row_deltas(deltas, B);
  const std::vector<int64_t> mask = gather_i64(kDecodeOp, "attention_mask", attention_mask, {B, L});
  for (int64_t i = 0; i < B * L; ++i)
    if (mask[static_cast<size_t>(i)] != 0 && mask[static_cast<size_t>(i)] != 1)
      detail::fail(kDecodeOp, "attention_mask[", i / L, ", ", i % L, "] = ", mask[static_cast<size_t>(i)],
                   " is invalid: must be 0 or 1");
  for (int64_t b = 0; b < B && L > 0; ++b)
    if (L - 1 + d[static_cast<size_t>(b)] > detail::kMaxAbsPosition)
      detail::fail(kDecodeOp, "attention_mask has ", L, " columns: with deltas row ", b, " = ",
                   d[static_cast<size_t>(b)], " the positions pass 2^53");
  cpu::mrope_decode_positions(d, mask, positions_3d(positions));
}

}  // namespace posenc
