// tests/test_kv_cache.cc: decoding through posenc::KVCache (token by token and in chunks) gives
// the outputs of one causal forward over the whole sequence, for every encoding; bad use errors.
#include "attention_case.h"
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

}  // namespace
}  // namespace posenc::test
