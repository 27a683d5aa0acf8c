// tests/test_kv_cache.cc: decoding through posenc::KVCache (token by token and in chunks) gives
// the outputs of one causal forward over the whole sequence, for every encoding; bad use errors.
#include "attention_case.h"
#include "kv_cache_cases.h"
#include "posenc/error.h"
#include "posenc/kv_cache.h"

namespace posenc::test {
namespace {

// Tokens [t0, t0 + n) of a (B, T, heads, D) tensor, as a strided view.
ConstTensorView time_slice(const std::vector<float>& x, int64_t B, int64_t T, int64_t heads, int64_t D,
                           int64_t t0, int64_t n) {
  return strided_view(x.data() + t0 * heads * D, {B, n, heads, D}, {T * heads * D, heads * D, D, 1});
}

// Appends and attends in chunks of the given sizes; every chunk's output equals the full forward's.
void check_decode(Enc e, const std::vector<int64_t>& chunks) {
  int64_t T = 0;
  for (int64_t n : chunks) T += n;
  const int64_t B = 2, H = 4, Hkv = 2, D = 40;
  const AttentionCase ac({B, T, T, H, Hkv, D, true}, e);
  SCOPED_TRACE(ac.describe());
  const AttentionConfig cfg = ac.config();
  std::vector<float> full(B * T * H * D);
  attention_forward(cfg, ac.inputs(), view(full.data(), {B, T, H, D}), TensorView{});

  KVCache cache(B, Hkv, D, cfg.rope);
  int64_t t0 = 0;
  for (int64_t n : chunks) {
    cache.append(time_slice(ac.part(Params::k), B, T, Hkv, D, t0, n),
                 time_slice(ac.part(Params::v), B, T, Hkv, D, t0, n));
    std::vector<float> out(B * n * H * D);
    cache.attend(cfg, time_slice(ac.part(Params::q), B, T, H, D, t0, n), view(out.data(), {B, n, H, D}));
    std::vector<float> expected;
    for (int64_t b = 0; b < B; ++b)
      expected.insert(expected.end(), full.begin() + (b * T + t0) * H * D,
                      full.begin() + (b * T + t0 + n) * H * D);
    EXPECT_TRUE(all_close(out, expected, kF32Reduction)) << "chunk at " << t0;
    t0 += n;
  }
  EXPECT_EQ(cache.size(), T);
}

TEST(KVCache, DecodingTokenByTokenEqualsTheFullForward) {
  std::vector<int64_t> ones(70, 1);  // past one key tile
  for (Enc e : all_encs()) check_decode(e, ones);
}

TEST(KVCache, ChunkedPrefillEqualsTheFullForward) {
  for (Enc e : {Enc::rope_alibi, Enc::t5_causal, Enc::shaw, Enc::transformer_xl})
    check_decode(e, {5, 1, 64, 3, 1});
}

TEST(KVCache, ExplicitPositionsAndViews) {
  const Rope rope([] {
    RopeConfig rc;
    rc.head_dim = 8;
    return rc;
  }());
  KVCache cache(1, 1, 8, &rope);
  const std::vector<float> k = random_floats(3 * 8, 1), v = random_floats(3 * 8, 2);
  std::vector<int64_t> pos = {10, 11, 12};
  cache.append(view(k.data(), {1, 3, 1, 8}), view(v.data(), {1, 3, 1, 8}), view(pos.data(), {3}));
  cache.append(view(k.data(), {1, 1, 1, 8}), view(v.data(), {1, 1, 1, 8}));  // continues at 13
  const ConstTensorView p = cache.positions();
  EXPECT_EQ(p.shape_string(), "[1, 4]");
  EXPECT_EQ(p.ptr<int64_t>()[3], 13);
  // Values are stored as given; keys rotated at their positions.
  EXPECT_EQ(cache.values().ptr<float>()[8 * 3], v[0]);
  std::vector<float> rotated(8);
  rope.forward(view(k.data(), {1, 1, 1, 8}), view(rotated.data(), {1, 1, 1, 8}), view(pos.data(), {1}));
  EXPECT_TRUE(all_close(std::vector<float>(cache.keys().ptr<float>(), cache.keys().ptr<float>() + 8), rotated,
                        kF32Elementwise));
}

TEST(KVCache, BadUseIsRejectedAndLeavesTheCacheUnchanged) {
  KVCache cache(1, 2, 8);
  const std::vector<float> k(2 * 2 * 8), q(4 * 8);
  std::vector<float> out(4 * 8);
  expect_error(
      [&] {
        cache.attend({}, view(q.data(), {1, 1, 4, 8}), view(out.data(), {1, 1, 4, 8}));
      },
      "empty cache");
  expect_error(
      [&] {
        cache.append(view(k.data(), {1, 2, 2, 8}), view(k.data(), {1, 1, 2, 8}));
      },
      "v has shape [1, 1, 2, 8]");
  expect_error(
      [&] {
        cache.append(view(k.data(), {1, 2, 1, 16}), view(k.data(), {1, 2, 1, 16}));
      },
      "k has shape");
  EXPECT_EQ(cache.size(), 0);
  cache.append(view(k.data(), {1, 2, 2, 8}), view(k.data(), {1, 2, 2, 8}));
  expect_error(
      [&] {
        cache.attend({}, view(q.data(), {1, 3, 1, 8}), view(out.data(), {1, 3, 1, 8}));
      },
      "give q_positions");
  const Rope rope([] {
    RopeConfig rc;
    rc.head_dim = 8;
    return rc;
  }());
  AttentionConfig cfg;
  cfg.rope = &rope;
  expect_error(
      [&] {
        cache.attend(cfg, view(q.data(), {1, 1, 4, 8}), view(out.data(), {1, 1, 4, 8}));
      },
      "config.rope differs");
  expect_error([] { KVCache bad(1, 0, 8); }, "kv_heads = 0");
}

// Keys and positions of a cache, copied out (the views are head-major).
struct Snapshot {
  std::vector<float> keys;
  std::vector<int64_t> positions;
};
Snapshot snapshot(const KVCache& c) {
  const ConstTensorView k = c.keys(), p = c.positions();
  Snapshot s;
  for (int64_t b = 0; b < k.shape[0]; ++b)
    for (int64_t t = 0; t < k.shape[1]; ++t) {
      s.positions.push_back(p.ptr<int64_t>()[b * p.strides[0] + t * p.strides[1]]);
      for (int64_t h = 0; h < k.shape[2]; ++h)
        for (int64_t d = 0; d < k.shape[3]; ++d)
          s.keys.push_back(k.ptr<float>()[b * k.strides[0] + t * k.strides[1] + h * k.strides[2] + d]);
    }
  return s;
}

// A context shift equals a cache filled from scratch at the shifted positions.
TEST(KVCache, ShiftPositionsEqualsACacheFilledAtTheNewPositions) {
  const int64_t T = 70, Hkv = 2, D = 16;
  const std::vector<float> k = random_floats(T * Hkv * D, 31), v = random_floats(T * Hkv * D, 32);
  for (RopeLayout layout : {RopeLayout::half, RopeLayout::interleaved})
    for (bool reversed : {false, true}) {  // NanoChat's -p theta: shifted by -delta theta
      RopeConfig rc = yarn_config(D);
      rc.layout = layout;
      rc.reversed = reversed;
      const Rope rope(rc);
      KVCache shifted(1, Hkv, D, &rope), fresh(1, Hkv, D, &rope);
      const std::vector<int64_t> old_pos = arange(0, T), new_pos = arange(1000, T);
      shifted.append(view(k.data(), {1, T, Hkv, D}), view(v.data(), {1, T, Hkv, D}),
                     view(old_pos.data(), {T}));
      shifted.shift_positions(1000);
      fresh.append(view(k.data(), {1, T, Hkv, D}), view(v.data(), {1, T, Hkv, D}), view(new_pos.data(), {T}));
      const Snapshot a = snapshot(shifted), b = snapshot(fresh);
      EXPECT_EQ(a.positions, b.positions);
      EXPECT_TRUE(all_close(a.keys, b.keys, kF32Reduction));
    }
}

// llama.cpp's context shift: drop the oldest n tokens, re-number the rest from 0.
TEST(KVCache, EraseFrontThenShiftIsAContextShift) {
  const int64_t B = 2, T = 40, n = 15, Hkv = 1, H = 2, D = 8;
  RopeConfig rc;
  rc.head_dim = D;
  const Rope rope(rc);
  const std::vector<float> k = random_floats(B * T * Hkv * D, 41), v = random_floats(B * T * Hkv * D, 42);
  KVCache cache(B, Hkv, D, &rope), fresh(B, Hkv, D, &rope);
  cache.append(view(k.data(), {B, T, Hkv, D}), view(v.data(), {B, T, Hkv, D}));
  cache.erase_front(n);
  cache.shift_positions(-n);
  fresh.append(time_slice(k, B, T, Hkv, D, n, T - n), time_slice(v, B, T, Hkv, D, n, T - n));
  EXPECT_EQ(cache.size(), T - n);
  const Snapshot a = snapshot(cache), b = snapshot(fresh);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_TRUE(all_close(a.keys, b.keys, kF32Reduction));
  // And the next decode step sees the same thing.
  const std::vector<float> q = random_floats(B * H * D, 43);
  std::vector<int64_t> qp(B, T - n);
  std::vector<float> out_a(B * H * D), out_b(B * H * D);
  AttentionConfig cfg;
  cfg.causal = true;
  cfg.rope = &rope;
  cache.attend(cfg, view(q.data(), {B, 1, H, D}), view(out_a.data(), {B, 1, H, D}), view(qp.data(), {B, 1}));
  fresh.attend(cfg, view(q.data(), {B, 1, H, D}), view(out_b.data(), {B, 1, H, D}), view(qp.data(), {B, 1}));
  EXPECT_TRUE(all_close(out_a, out_b, kF32Reduction));
}

// LongRoPE: keys appended below the original context carry the short factors; once the sequence
// crosses it, rerotate gives the keys the long factors (HF's per-call switch), as if rotated so.
TEST(KVCache, RerotateSwitchesLongRopeFactorsWithoutRecomputingKeys) {
  const int64_t T = 30, Hkv = 2, D = 16, original = 32;
  const Rope rope(longrope_config(D, original));
  const std::vector<float> k = random_floats(T * Hkv * D, 51), v = random_floats(T * Hkv * D, 52);
  KVCache cache(1, Hkv, D, &rope);
  cache.append(view(k.data(), {1, T, Hkv, D}), view(v.data(), {1, T, Hkv, D}));  // short factors
  const Snapshot before = snapshot(cache);
  cache.rerotate(T, original + 1);
  // Expected: the keys rotated with the long table (seq_len past the original context).
  std::vector<float> expected(k.size());
  const std::vector<int64_t> pos = arange(0, T);
  RopeCall long_call;
  long_call.seq_len = original + 1;
  rope.forward(view(k.data(), {1, T, Hkv, D}), view(expected.data(), {1, T, Hkv, D}), view(pos.data(), {T}),
               long_call);
  EXPECT_TRUE(all_close(snapshot(cache).keys, expected, kF32Reduction));
  EXPECT_FALSE(all_close(before.keys, expected, kF32Reduction));  // the tables do differ
  cache.rerotate(original + 1, T);                                // and back
  EXPECT_TRUE(all_close(snapshot(cache).keys, before.keys, kF32Reduction));
}

TEST(KVCache, BadShiftsAndRerotationsLeaveTheCacheUnchanged) {
  const int64_t T = 5, D = 8;
  const std::vector<float> k = random_floats(T * D, 61), v = random_floats(T * D, 62);
  RopeConfig dyn;
  dyn.head_dim = D;
  dyn.max_position_embeddings = 16;
  dyn.scaling.type = RopeScalingType::dynamic;
  dyn.scaling.factor = 2;
  const Rope rope(dyn);
  KVCache cache(1, 1, D, &rope), plain(1, 1, D);
  cache.append(view(k.data(), {1, T, 1, D}), view(v.data(), {1, T, 1, D}));
  plain.append(view(k.data(), {1, T, 1, D}), view(v.data(), {1, T, 1, D}));
  const Snapshot before = snapshot(cache);
  expect_error([&] { cache.shift_positions(3); }, "use rerotate");
  expect_error([&] { cache.shift_positions(int64_t{1} << 60); }, "delta");
  expect_error([&] { cache.erase_front(6); }, "n = 6");
  expect_error([&] { cache.erase_front(-1); }, "n = -1");
  expect_error([&] { cache.rerotate(-1, 4); }, "from_seq_len = -1");
  expect_error([&] { plain.rerotate(1, 4); }, "needs a cache with a rope");
  EXPECT_EQ(snapshot(cache).keys, before.keys);
  EXPECT_EQ(snapshot(cache).positions, before.positions);
  plain.shift_positions(7);  // no rope: positions only
  EXPECT_EQ(snapshot(plain).positions, arange(7, T));
}

}  // namespace
}  // namespace posenc::test
