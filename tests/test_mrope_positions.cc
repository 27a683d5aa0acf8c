// tests/test_mrope_positions.cc: M-RoPE position ids (Qwen2-VL, Qwen2.5-VL, Qwen3-VL get_rope_index)
// vs the naive reference over random mixed text/image/video batches with padding, the header's worked
// example, transformers' float32 rounding of the temporal index, decode positions, bad input.
// (Parity with transformers itself: python/tests/test_mrope_parity.py.)
#include <array>
#include <random>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/mrope_positions.h"
#include "reference/mrope_positions.h"
#include "test_util.h"

namespace posenc::test {
namespace {

using Grid = std::array<int64_t, 3>;
constexpr int64_t kSentinel = -777;

struct Result {
  std::vector<int64_t> positions, deltas;
};

// Calls mrope_positions on contiguous views of `in` (outputs pre-filled with a sentinel).
Result run(const MropePositionsConfig& c, const ref::MropeInput& in) {
  MropePositionsInputs v;
  v.mm_token_type_ids = view(in.types.data(), {in.batch, in.tokens});
  if (!in.mask.empty()) v.attention_mask = view(in.mask.data(), {in.batch, in.tokens});
  std::vector<int64_t> images, videos;
  for (const Grid& g : in.images) images.insert(images.end(), g.begin(), g.end());
  for (const Grid& g : in.videos) videos.insert(videos.end(), g.begin(), g.end());
  if (!in.images.empty()) v.image_grid_thw = view(images.data(), {static_cast<int64_t>(in.images.size()), 3});
  if (!in.videos.empty()) v.video_grid_thw = view(videos.data(), {static_cast<int64_t>(in.videos.size()), 3});
  if (!in.seconds.empty())
    v.second_per_grid_ts = view(in.seconds.data(), {static_cast<int64_t>(in.seconds.size())});
  Result r;
  r.positions.assign(static_cast<size_t>(3 * in.batch * in.tokens), kSentinel);
  r.deltas.assign(static_cast<size_t>(in.batch), kSentinel);
  mrope_positions(c, v, view(r.positions.data(), {3, in.batch, in.tokens}),
                  view(r.deltas.data(), {in.batch}));
  return r;
}

// A random batch: rows of text runs, images and videos (Qwen3-VL: frames separated by timestamp
// text), padded on the left or right, sometimes with masked tokens of any type inside.
ref::MropeInput random_batch(const MropePositionsConfig& c, int64_t batch, std::mt19937& rng, bool padding,
                             bool seconds) {
  const int64_t m = c.spatial_merge_size;
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  ref::MropeInput in;
  in.batch = batch;
  std::vector<std::vector<int64_t>> rows;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int64_t> row;
    auto text = [&](int64_t n) { row.insert(row.end(), static_cast<size_t>(n), 0); };
    const int64_t pieces = uniform(1, 6);
    int64_t last = -1;
    for (int64_t k = 0; k < pieces; ++k) {
      int64_t type = uniform(0, 2);
      if (type != 0 && type == last) text(uniform(1, 3));  // keep runs of the same type apart
      if (type == 0) {
        text(uniform(1, 6));
      } else {
        const Grid g = {type == 1 ? uniform(1, 2) : uniform(1, 4), m * uniform(1, 3), m * uniform(1, 3)};
        const int64_t frame_tokens = (g[1] / m) * (g[2] / m);
        if (type == 2 && c.family == MropeFamily::qwen3_vl) {
          for (int64_t f = 0; f < g[0]; ++f) {
            if (f > 0) text(uniform(1, 2));  // <t1> timestamps between frames
            row.insert(row.end(), static_cast<size_t>(frame_tokens), 2);
          }
        } else {
          row.insert(row.end(), static_cast<size_t>(g[0] * frame_tokens), type);
        }
        (type == 1 ? in.images : in.videos).push_back(g);
        if (type == 2 && seconds)
          in.seconds.push_back(std::uniform_real_distribution<double>(0.05, 3.0)(rng));
      }
      last = type;
    }
    rows.push_back(row);
  }
  // A masked token of any type inside a row is removed before the runs are formed.
  std::vector<std::vector<int64_t>> row_types, row_masks;
  size_t longest = 0;
  for (const auto& r : rows) {
    std::vector<int64_t> types, mask;
    for (int64_t t : r) {
      if (padding && uniform(0, 9) == 0) types.push_back(uniform(0, 2)), mask.push_back(0);
      types.push_back(t), mask.push_back(1);
    }
    longest = std::max(longest, types.size());
    row_types.push_back(types), row_masks.push_back(mask);
  }
  in.tokens = static_cast<int64_t>(longest) + (padding ? uniform(0, 3) : 0);
  for (size_t b = 0; b < rows.size(); ++b) {
    const size_t pad = static_cast<size_t>(in.tokens) - row_types[b].size();
    const bool left = uniform(0, 1) == 1;
    std::vector<int64_t> pad_types(pad), pad_mask(pad, 0);
    for (int64_t& t : pad_types) t = padding ? uniform(0, 2) : 0;  // without a mask: more text
    auto& types = row_types[b];
    auto& mask = row_masks[b];
    types.insert(left ? types.begin() : types.end(), pad_types.begin(), pad_types.end());
    mask.insert(left ? mask.begin() : mask.end(), pad_mask.begin(), pad_mask.end());
    in.types.insert(in.types.end(), types.begin(), types.end());
    in.mask.insert(in.mask.end(), mask.begin(), mask.end());
  }
  if (!padding) in.mask.clear();
  return in;
}

std::vector<MropePositionsConfig> configs() {
  std::vector<MropePositionsConfig> out;
  for (MropeFamily f : {MropeFamily::qwen2_vl, MropeFamily::qwen2_5_vl, MropeFamily::qwen3_vl})
    for (int64_t m : {1, 2, 3}) {
      MropePositionsConfig c;
      c.family = f;
      c.spatial_merge_size = m;
      if (f != MropeFamily::qwen2_5_vl) {
        out.push_back(c);
        continue;
      }
      for (double tps : {2.0, 4.0, 2.5, 1.3})
        for (MropeTimeDtype d : {MropeTimeDtype::f32, MropeTimeDtype::f64}) {
          c.tokens_per_second = tps;
          c.time_dtype = d;
          out.push_back(c);
        }
    }
  return out;
}

TEST(MropePositions, HeaderExample) {
  // text "a b", an image with grid (1, 4, 6), text "c d"; spatial_merge_size 2
  ref::MropeInput in;
  in.batch = 1;
  in.tokens = 10;
  in.types = {0, 0, 1, 1, 1, 1, 1, 1, 0, 0};
  in.images = {{1, 4, 6}};
  for (MropeFamily f : {MropeFamily::qwen2_vl, MropeFamily::qwen2_5_vl, MropeFamily::qwen3_vl}) {
    MropePositionsConfig c;
    c.family = f;
    const Result r = run(c, in);
    EXPECT_EQ(r.positions, (std::vector<int64_t>{0, 1, 2, 2, 2, 2, 2, 2, 5, 6,    // t
                                                 0, 1, 2, 2, 2, 3, 3, 3, 5, 6,    // h
                                                 0, 1, 2, 3, 4, 2, 3, 4, 5, 6}))  // w
        << mrope_family_name(f);
    EXPECT_EQ(r.deltas, (std::vector<int64_t>{-3}));
  }
}

TEST(MropePositions, MatchesReferenceOnRandomMixedBatches) {
  std::mt19937 rng(2024);
  int checked = 0;
  for (const MropePositionsConfig& c : configs())
    for (int64_t batch : {1, 3})
      for (bool padding : {false, true})
        for (bool seconds : {false, true}) {
          if (seconds && c.family != MropeFamily::qwen2_5_vl) continue;
          for (int trial = 0; trial < 12; ++trial) {
            const ref::MropeInput in = random_batch(c, batch, rng, padding, seconds);
            SCOPED_TRACE(::testing::Message()
                         << mrope_family_name(c.family) << " m " << c.spatial_merge_size << " tps "
                         << c.tokens_per_second << " " << mrope_time_dtype_name(c.time_dtype) << " B "
                         << batch << " S " << in.tokens << " padding " << padding << " seconds " << seconds);
            const ref::MropeOutput expected = ref::mrope_positions(c, in);
            const Result r = run(c, in);
            ASSERT_EQ(r.positions, expected.positions);
            ASSERT_EQ(r.deltas, expected.deltas);
            ++checked;
          }
        }
  EXPECT_GT(checked, 1000);
}

// Qwen2.5-VL's temporal index is truncated from float32 products, as transformers computes it with
// the float32 second_per_grid_ts its processors return: 45 * (2 * 0.7) is 63 in float32, 62.99... in
// float64. Without second_per_grid_ts, an integer tokens_per_second multiplies exactly.
TEST(MropePositions, Qwen25TemporalIndexRoundsAsTransformers) {
  ref::MropeInput in;
  in.batch = 1;
  in.videos = {{46, 2, 2}};  // 46 frames of 1 x 1 merged patch
  in.types.assign(46, 2);
  in.tokens = 46;
  in.seconds = {0.7};
  MropePositionsConfig c;
  c.family = MropeFamily::qwen2_5_vl;
  c.tokens_per_second = 2;
  EXPECT_EQ(run(c, in).positions[45], 63);
  c.time_dtype = MropeTimeDtype::f64;
  EXPECT_EQ(run(c, in).positions[45], 62);
  in.seconds.clear();
  EXPECT_EQ(run(c, in).positions[45], 90);
  EXPECT_EQ(run(c, in).deltas[0], 90 + 1 - 46);
  // The images of Qwen2.5-VL keep interval 1 whatever tokens_per_second.
  in.images = in.videos;
  in.videos.clear();
  in.types.assign(46, 1);
  EXPECT_EQ(run(c, in).positions[45], 45);
}

// The temporal index over 64 frames for 300 frame spacings (second_per_grid_ts in float32 or
// float64) or, without second_per_grid_ts, 300 values of tokens_per_second (integer or not): every
// rounding path of Qwen2.5-VL.
TEST(MropePositions, Qwen25TemporalIndexSweep) {
  for (int64_t m : {1, 2})
    for (double tps : {2.0, 1.3, 2.5, 0.7})
      for (MropeTimeDtype d : {MropeTimeDtype::f32, MropeTimeDtype::f64})
        for (bool seconds : {true, false})
          for (int step = 1; step <= 300; ++step) {
            MropePositionsConfig c;
            c.family = MropeFamily::qwen2_5_vl;
            c.spatial_merge_size = m;
            c.tokens_per_second = seconds ? tps : 0.01 * step;
            c.time_dtype = d;
            ref::MropeInput in;
            in.batch = 1;
            in.tokens = 65;
            in.types.assign(65, 2);
            in.types[0] = 0;
            in.videos = {{64, m, m}};
            if (seconds) in.seconds = {0.01 * step};
            SCOPED_TRACE(::testing::Message() << "tps " << c.tokens_per_second << " s " << 0.01 * step << " "
                                              << mrope_time_dtype_name(d) << " seconds " << seconds);
            const Result r = run(c, in);
            const ref::MropeOutput e = ref::mrope_positions(c, in);
            ASSERT_EQ(r.positions, e.positions);
            ASSERT_EQ(r.deltas, e.deltas);
          }
  // Values transformers 5.23 gives (torch 2.15, float32 vs float64 tensors), k = 45 and 25.
  struct Known {
    double tps, s;
    int64_t k, f32, f64;
  };
  for (const Known& kn :
       {Known{4, 2.8, 45, 504, 503}, Known{2, 1.18, 25, 58, 59}, Known{2, 0.7, 45, 63, 62}}) {
    MropePositionsConfig c;
    c.family = MropeFamily::qwen2_5_vl;
    c.spatial_merge_size = 1;
    c.tokens_per_second = kn.tps;
    ref::MropeInput in;
    in.batch = 1;
    in.tokens = kn.k + 1;
    in.types.assign(static_cast<size_t>(kn.k + 1), 2);
    in.videos = {{kn.k + 1, 1, 1}};
    in.seconds = {kn.s};
    EXPECT_EQ(run(c, in).positions[static_cast<size_t>(kn.k)], kn.f32) << kn.s;
    c.time_dtype = MropeTimeDtype::f64;
    EXPECT_EQ(run(c, in).positions[static_cast<size_t>(kn.k)], kn.f64) << kn.s;
  }
}

TEST(MropePositions, LengthOneAndSingleTokenGrids) {
  for (MropeFamily f : {MropeFamily::qwen2_vl, MropeFamily::qwen2_5_vl, MropeFamily::qwen3_vl}) {
    MropePositionsConfig c;
    c.family = f;
    ref::MropeInput in;
    in.batch = 2;
    in.tokens = 1;
    in.types = {0, 1};
    in.images = {{1, 2, 2}};
    const Result r = run(c, in);
    EXPECT_EQ(r.positions, (std::vector<int64_t>(6, 0)));
    EXPECT_EQ(r.deltas, (std::vector<int64_t>{0, 0}));
    in.types = {2, 0};
    in.mask = {1, 1};
    in.images.clear();
    in.videos = {{1, 2, 2}};
    EXPECT_EQ(run(c, in).positions, ref::mrope_positions(c, in).positions);
  }
}

TEST(MropePositions, StridedViews) {
  MropePositionsConfig c;
  c.family = MropeFamily::qwen2_5_vl;
  std::mt19937 rng(5);
  const ref::MropeInput in = random_batch(c, 3, rng, true, true);
  const int64_t B = in.batch, S = in.tokens;
  // types and mask stored transposed (S, B); grids as columns of (3, n); outputs in wider buffers.
  std::vector<int64_t> types_t(static_cast<size_t>(B * S)), mask_t(static_cast<size_t>(B * S));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      types_t[static_cast<size_t>(s * B + b)] = in.types[static_cast<size_t>(b * S + s)];
      mask_t[static_cast<size_t>(s * B + b)] = in.mask[static_cast<size_t>(b * S + s)];
    }
  const int64_t nv = static_cast<int64_t>(in.videos.size()), ni = static_cast<int64_t>(in.images.size());
  std::vector<int64_t> images_t(static_cast<size_t>(3 * ni)), videos_t(static_cast<size_t>(3 * nv));
  for (int64_t i = 0; i < ni; ++i)
    for (int a = 0; a < 3; ++a)
      images_t[static_cast<size_t>(a * ni + i)] = in.images[static_cast<size_t>(i)][a];
  for (int64_t i = 0; i < nv; ++i)
    for (int a = 0; a < 3; ++a)
      videos_t[static_cast<size_t>(a * nv + i)] = in.videos[static_cast<size_t>(i)][a];
  std::vector<double> seconds2(static_cast<size_t>(2 * nv));
  for (int64_t i = 0; i < nv; ++i) seconds2[static_cast<size_t>(2 * i)] = in.seconds[static_cast<size_t>(i)];
  MropePositionsInputs v;
  v.mm_token_type_ids = strided_view(types_t.data(), {B, S}, {1, B});
  v.attention_mask = strided_view(mask_t.data(), {B, S}, {1, B});
  v.image_grid_thw = strided_view(images_t.data(), {ni, 3}, {1, ni});
  v.video_grid_thw = strided_view(videos_t.data(), {nv, 3}, {1, nv});
  v.second_per_grid_ts = strided_view(seconds2.data(), {nv}, {2});
  std::vector<int64_t> pos(static_cast<size_t>(3 * B * (S + 2)), kSentinel), del(static_cast<size_t>(2 * B));
  mrope_positions(c, v, strided_view(pos.data(), {3, B, S}, {B * (S + 2), S + 2, 1}),
                  strided_view(del.data(), {B}, {2}));
  const ref::MropeOutput expected = ref::mrope_positions(c, in);
  for (int r = 0; r < 3; ++r)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t s = 0; s < S; ++s)
        EXPECT_EQ(pos[static_cast<size_t>((r * B + b) * (S + 2) + s)],
                  expected.positions[static_cast<size_t>((r * B + b) * S + s)]);
      EXPECT_EQ(pos[static_cast<size_t>((r * B + b) * (S + 2) + S)], kSentinel);  // gaps untouched
    }
  for (int64_t b = 0; b < B; ++b)
    EXPECT_EQ(del[static_cast<size_t>(2 * b)], expected.deltas[static_cast<size_t>(b)]);
}

TEST(MropeDecodePositions, MatchesReference) {
  const std::vector<int64_t> deltas = {-3, 5};
  for (int64_t batch : {2, 6})
    for (int64_t past : {0, 1, 17})
      for (int64_t tokens : {1, 4}) {
        std::vector<int64_t> out(static_cast<size_t>(3 * batch * tokens), kSentinel);
        mrope_decode_positions(view(deltas.data(), {2, 1}), past, view(out.data(), {3, batch, tokens}));
        EXPECT_EQ(out, ref::mrope_decode_positions(deltas, batch, past, tokens));
        mrope_decode_positions(view(deltas.data(), {2}), past, view(out.data(), {3, batch, tokens}));
        EXPECT_EQ(out, ref::mrope_decode_positions(deltas, batch, past, tokens));
      }
  // With a mask over past and new tokens (left padding in row 0).
  const std::vector<int64_t> mask = {0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1};
  std::vector<int64_t> out(3 * 2 * 6, kSentinel);
  mrope_decode_positions(view(deltas.data(), {2}), view(mask.data(), {2, 6}), view(out.data(), {3, 2, 6}));
  EXPECT_EQ(out, ref::mrope_decode_positions_masked(deltas, 2, mask, 6));
  EXPECT_EQ(out[0], -3);  // masked: delta alone, as transformers
  EXPECT_EQ(out[2], -3);  // first real token: 0 + delta
  EXPECT_EQ(out[11], 4 + 5);
}

// One valid batch to break, field by field.
struct BadCase {
  MropePositionsConfig config;
  std::vector<int64_t> types = {0, 1, 1, 1, 1, 0, 2, 2, 0};  // text, image (1,4,4), text, video (2,2,2), text
  std::vector<int64_t> mask = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  std::vector<int64_t> images = {1, 4, 4}, videos = {2, 2, 2};
  std::vector<double> seconds;
  int64_t batch = 1, tokens = 9;
  bool use_mask = true;
  std::vector<int64_t> positions = std::vector<int64_t>(27, kSentinel), deltas = {kSentinel};

  void call() {
    MropePositionsInputs v;
    v.mm_token_type_ids = view(types.data(), {batch, tokens});
    if (use_mask) v.attention_mask = view(mask.data(), {batch, tokens});
    if (!images.empty()) v.image_grid_thw = view(images.data(), {static_cast<int64_t>(images.size() / 3), 3});
    if (!videos.empty()) v.video_grid_thw = view(videos.data(), {static_cast<int64_t>(videos.size() / 3), 3});
    if (!seconds.empty()) v.second_per_grid_ts = view(seconds.data(), {static_cast<int64_t>(seconds.size())});
    mrope_positions(config, v, view(positions.data(), {3, batch, tokens}), view(deltas.data(), {batch}));
  }
};

void expect_bad(BadCase c, const std::string& needle) {
  expect_error([&] { c.call(); }, needle);
  EXPECT_EQ(c.positions, std::vector<int64_t>(c.positions.size(), kSentinel)) << needle;  // nothing written
  EXPECT_EQ(c.deltas, std::vector<int64_t>(c.deltas.size(), kSentinel)) << needle;
}

TEST(MropePositions, BadInputNamesTheArgumentAndWritesNothing) {
  BadCase ok;
  ok.call();                           // the base case is valid
  EXPECT_EQ(ok.deltas[0], 5 + 1 - 9);  // max position 5 (the last text token)
  {
    BadCase c;
    c.config.spatial_merge_size = 0;
    expect_bad(c, "spatial_merge_size = 0");
  }
  {
    BadCase c;
    c.config.family = MropeFamily::qwen2_5_vl;
    c.config.tokens_per_second = 0;
    expect_bad(c, "tokens_per_second = 0");
    c.config.tokens_per_second = std::nan("");
    expect_bad(c, "tokens_per_second = nan");
  }
  {
    BadCase c;
    c.config.family = static_cast<MropeFamily>(7);
    expect_bad(c, "family = 7");
  }
  {
    BadCase c;
    c.types[3] = 3;
    expect_bad(c, "mm_token_type_ids[0, 3] = 3 is invalid");
    c.types[3] = -1;
    expect_bad(c, "mm_token_type_ids[0, 3] = -1");
  }
  {
    BadCase c;
    c.mask[2] = 2;
    expect_bad(c, "attention_mask[0, 2] = 2 is invalid: must be 0 or 1");
  }
  {
    BadCase c;
    c.mask.assign(9, 0);
    expect_bad(c, "attention_mask row 0 has no 1");
  }
  {
    BadCase c;
    c.tokens = 0;
    expect_bad(c, "every row needs a token");
  }
  {
    BadCase c;
    c.images = {1, 4, 3};
    expect_bad(c,
               "image_grid_thw[0] = [1, 4, 3] is invalid: w = 3 is not a multiple of spatial_merge_size = 2");
    c.images = {0, 4, 4};
    expect_bad(c, "image_grid_thw[0] = [0, 4, 4] is invalid: t must be > 0");
    c.images = {1, -2, 4};
    expect_bad(c, "h must be > 0");
    c.images = {int64_t{1} << 40, int64_t{1} << 22, 4};
    expect_bad(c, "t * h * w overflows int64");
  }
  {
    BadCase c;
    c.images = {1, 4, 6};  // 6 tokens for a run of 4
    expect_bad(c, "image_grid_thw[0] = [1, 4, 6] gives 1 * (4/2) * (6/2) = 6 tokens");
  }
  {
    BadCase c;
    c.mask[4] = 0;  // the image run loses a token: 3 tokens for a grid of 4
    expect_bad(c, "has 3");
  }
  {
    BadCase c;
    c.images.clear();
    expect_bad(c, "image run of row 0 (mm_token_type_ids[0, 1..4], 4 tokens) has no grid");
  }
  {
    BadCase c;
    c.videos = {2, 2, 2, 1, 2, 2};
    expect_bad(c, "video_grid_thw[1] = [1, 2, 2] and the grids after it are unused");
  }
  {
    BadCase c;
    c.config.family = MropeFamily::qwen3_vl;  // the 2-frame video needs 2 runs
    expect_bad(c,
               "video_grid_thw[0] = [2, 2, 2] (frame 0 of 2, split per frame by qwen3_vl) gives 1 * (2/2) * "
               "(2/2) = 1");
    c.types = {0, 1, 1, 1, 1, 0, 2, 0, 0};
    expect_bad(c, "video_grid_thw[0] = [2, 2, 2] (frame 1 of 2, split per frame by qwen3_vl) and the grids");
    c.types = {0, 1, 1, 1, 1, 0, 2, 0, 2};
    c.call();  // valid: one frame per run
  }
  {
    BadCase c;
    c.seconds = {1.0};
    expect_bad(c, "second_per_grid_ts is given, but family qwen2_vl does not use it");
    c.config.family = MropeFamily::qwen2_5_vl;
    c.seconds = {1.0, 2.0};
    expect_bad(c, "second_per_grid_ts has 2 values, expected one per video (video_grid_thw has 1 rows)");
    c.seconds = {-0.5};
    expect_bad(c, "second_per_grid_ts[0] = -0.5 is invalid");
    c.seconds = {INFINITY};
    expect_bad(c, "second_per_grid_ts[0] = inf");
    c.seconds = {1e300};
    expect_bad(c, "is beyond 2^53");
    c.config.time_dtype = MropeTimeDtype::f64;
    expect_bad(c, "is beyond 2^53");
  }
  {
    BadCase c;
    c.positions.resize(26);
    MropePositionsInputs v;
    v.mm_token_type_ids = view(c.types.data(), {1, 9});
    std::vector<int64_t> pos(27, kSentinel);
    std::vector<int64_t> del(1);
    expect_error(
        [&] {
          mrope_positions(c.config, v, view(pos.data(), {3, 1, 8}), view(del.data(), {1}));
        },
        "positions has shape [3, 1, 8], expected [3, 1, 9]");
    std::vector<float> wrong(9);
    v.mm_token_type_ids = view(wrong.data(), {1, 9});
    expect_error(
        [&] {
          mrope_positions(c.config, v, view(pos.data(), {3, 1, 9}), view(del.data(), {1}));
        },
        "mm_token_type_ids has dtype f32, expected i64");
    v.mm_token_type_ids = view(c.types.data(), {9});
    expect_error(
        [&] {
          mrope_positions(c.config, v, view(pos.data(), {3, 1, 9}), view(del.data(), {1}));
        },
        "mm_token_type_ids has shape [9] (rank 1), expected rank 2");
    v.mm_token_type_ids = view(c.types.data(), {1, 9});
    expect_error(
        [&] {
          mrope_positions(c.config, v, view(pos.data(), {3, 1, 9}), view(del.data(), {2}));
        },
        "deltas has shape [2], expected [1]");
    v.image_grid_thw = view(c.images.data(), {1, 2});
    expect_error(
        [&] {
          mrope_positions(c.config, v, view(pos.data(), {3, 1, 9}), view(del.data(), {1}));
        },
        "image_grid_thw has shape [1, 2], expected [-1, 3]");
    EXPECT_EQ(pos, std::vector<int64_t>(27, kSentinel));
  }
}

TEST(MropeDecodePositions, BadInput) {
  const std::vector<int64_t> deltas = {1, 2, 3};
  std::vector<int64_t> out(3 * 4 * 2, kSentinel);
  expect_error(
      [&] {
        mrope_decode_positions(view(deltas.data(), {3}), 0, view(out.data(), {3, 4, 2}));
      },
      "must be a multiple of its 3 rows");
  expect_error(
      [&] {
        mrope_decode_positions(view(deltas.data(), {1, 3}), 0, view(out.data(), {3, 4, 2}));
      },
      "deltas has shape [1, 3], expected [-1, 1]");
  expect_error(
      [&] {
        mrope_decode_positions(view(deltas.data(), {2}), -1, view(out.data(), {3, 4, 2}));
      },
      "past_length = -1");
  expect_error(
      [&] {
        mrope_decode_positions(view(deltas.data(), {2}), int64_t{1} << 53, view(out.data(), {3, 4, 2}));
      },
      "outside [-2^53, 2^53]");
  expect_error(
      [&] {
        mrope_decode_positions(view(deltas.data(), {2}), 0, view(out.data(), {2, 4, 3}));
      },
      "positions has shape [2, 4, 3]");
  const std::vector<int64_t> mask = {1, 1, 1, 3, 1, 1, 1, 1};
  expect_error(
      [&] {
        mrope_decode_positions(view(deltas.data(), {2}), view(mask.data(), {4, 2}),
                               view(out.data(), {3, 4, 2}));
      },
      "attention_mask[1, 1] = 3 is invalid");
  expect_error(
      [&] {
        mrope_decode_positions(view(deltas.data(), {2}), view(mask.data(), {2, 4}),
                               view(out.data(), {3, 4, 2}));
      },
      "attention_mask has shape [2, 4], expected [4, 2]");
  EXPECT_EQ(out, std::vector<int64_t>(out.size(), kSentinel));
}

}  // namespace
}  // namespace posenc::test
