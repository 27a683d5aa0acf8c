// tests/test_kv_cache_half.cc: posenc::KVCache with bf16 / fp16 storage. The oracle has two parts:
// 1. what is stored: the bits of an fp32 cache's (rotated) keys and values rounded once to the
//    storage type (exactly; with 16-bit inputs, the fp32 rotation of the widened input, rounded);
// 2. what is read: attend() on the 16-bit cache equals, to fp32 reduction order (kF32Reduction),
//    the attention of the same query over those stored numbers widened to fp32 (an fp32 cache
//    without rope holding them, q rotated by the same rope), for every encoding; a 16-bit out is
//    that within one rounding: |out16 - out32| <= u |out32|, u = 2^-8 (bf16), 2^-11 (fp16); a 16-bit
//    q is attended as Rope::forward returns it (rotated in fp32, rounded once to its dtype).
// Context shifts and re-rotations round once per call: within 3 u of a cache filled at the new
// positions (two roundings of each side, and fp32 rotation). Every SIMD target (narrow_row).
#include <cmath>

#include "attention_case.h"
#include "half_storage.h"
#include "kv_cache_cases.h"
#include "posenc/error.h"
#include "posenc/kv_cache.h"

namespace posenc::test {
namespace {

// Tokens [t0, t0 + n) of a (B, T, heads, D) tensor, as a strided view.
template <typename T>
ConstTensorView time_slice(const std::vector<T>& x, DType dtype, int64_t B, int64_t T_, int64_t heads,
                           int64_t D, int64_t t0, int64_t n) {
  ConstTensorView v = strided_view(reinterpret_cast<const float*>(x.data() + t0 * heads * D),
                                   {B, n, heads, D}, {T_ * heads * D, heads * D, D, 1});
  v.dtype = dtype;
  return v;
}

// The (B, size, Hkv, D) contents of a cache view as floats (widened for 16-bit storage).
std::vector<float> contents(const ConstTensorView& x, const Storage* s) {
  std::vector<float> out;
  for (int64_t b = 0; b < x.shape[0]; ++b)
    for (int64_t t = 0; t < x.shape[1]; ++t)
      for (int64_t h = 0; h < x.shape[2]; ++h)
        for (int64_t d = 0; d < x.shape[3]; ++d) {
          const int64_t i = b * x.strides[0] + t * x.strides[1] + h * x.strides[2] + d;
          out.push_back(s ? s->value(x.ptr<uint16_t>()[i]) : x.ptr<float>()[i]);
        }
  return out;
}
std::vector<uint16_t> bits(const ConstTensorView& x) {
  std::vector<uint16_t> out;
  for (int64_t b = 0; b < x.shape[0]; ++b)
    for (int64_t t = 0; t < x.shape[1]; ++t)
      for (int64_t h = 0; h < x.shape[2]; ++h)
        for (int64_t d = 0; d < x.shape[3]; ++d)
          out.push_back(x.ptr<uint16_t>()[b * x.strides[0] + t * x.strides[1] + h * x.strides[2] + d]);
  return out;
}

// Decodes the case in chunks through a 16-bit cache (k, v given in fp32, or rounded to the storage
// when half_inputs) and checks both parts of the oracle after every chunk.
void check_decode(Enc e, const Storage& s, bool half_inputs, const std::vector<int64_t>& chunks,
                  const std::string& target) {
  int64_t T = 0;
  for (int64_t n : chunks) T += n;
  const int64_t B = 2, H = 4, Hkv = 2, D = 40;
  AttentionCase ac({B, T, T, H, Hkv, D, true}, e);
  SCOPED_TRACE(ac.describe() + " " + s.name + (half_inputs ? " 16-bit inputs " : " fp32 inputs ") + target);
  const AttentionConfig cfg = ac.config();
  std::vector<uint16_t> k16, v16;
  if (half_inputs)  // the inputs as the storage holds them; the fp32 cache sees their exact values
    for (Params::Part p : {Params::k, Params::v}) {
      std::vector<float>& x = ac.part(p);
      std::vector<uint16_t>& h = p == Params::k ? k16 : v16;
      for (float& xi : x) h.push_back(s.round(xi)), xi = s.value(h.back());
    }
  KVCache cache16(B, Hkv, D, cfg.rope, s.dtype), cache32(B, Hkv, D, cfg.rope);
  int64_t t0 = 0;
  for (int64_t n : chunks) {
    const ConstTensorView k32 = time_slice(ac.part(Params::k), DType::f32, B, T, Hkv, D, t0, n),
                          v32 = time_slice(ac.part(Params::v), DType::f32, B, T, Hkv, D, t0, n);
    if (half_inputs)
      cache16.append(time_slice(k16, s.dtype, B, T, Hkv, D, t0, n),
                     time_slice(v16, s.dtype, B, T, Hkv, D, t0, n));
    else
      cache16.append(k32, v32);
    cache32.append(k32, v32);
    // 1. stored = the fp32 cache's contents rounded once.
    for (bool keys : {true, false}) {
      const std::vector<float> wide = contents(keys ? cache32.keys() : cache32.values(), nullptr);
      const std::vector<uint16_t> got = bits(keys ? cache16.keys() : cache16.values());
      ASSERT_EQ(got.size(), wide.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], s.round(wide[i])) << (keys ? "key " : "value ") << i << " chunk at " << t0;
    }
    // 2. read: the same attention over the stored numbers in an fp32 cache without rope.
    const ConstTensorView q = time_slice(ac.part(Params::q), DType::f32, B, T, H, D, t0, n);
    std::vector<float> out(B * n * H * D), expected(out.size());
    cache16.attend(cfg, q, view(out.data(), {B, n, H, D}));
    const std::vector<float> k_stored = contents(cache16.keys(), &s),
                             v_stored = contents(cache16.values(), &s);
    const ConstTensorView pos = cache16.positions();
    std::vector<int64_t> positions;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < cache16.size(); ++t)
        positions.push_back(pos.ptr<int64_t>()[b * pos.strides[0] + t]);
    const int64_t size = cache16.size();
    KVCache plain(B, Hkv, D);
    plain.append(view(k_stored.data(), {B, size, Hkv, D}), view(v_stored.data(), {B, size, Hkv, D}),
                 view(positions.data(), {B, size}));
    std::vector<float> q_used(q.shape[0] * n * H * D);
    std::vector<int64_t> q_pos;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < n; ++t) q_pos.push_back(positions[b * size + size - n + t]);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < H * D; ++i)
          q_used[(b * n + t) * H * D + i] = ac.part(Params::q)[(b * T + t0 + t) * H * D + i];
    AttentionConfig plain_cfg = cfg;
    if (cfg.rope) {
      cfg.rope->forward(view(q_used.data(), {B, n, H, D}), view(q_used.data(), {B, n, H, D}),
                        view(q_pos.data(), {B, n}));
      plain_cfg.rope = nullptr;
    }
    plain.attend(plain_cfg, view(q_used.data(), {B, n, H, D}), view(expected.data(), {B, n, H, D}),
                 view(q_pos.data(), {B, n}));
    ASSERT_TRUE(all_close(out, expected, kF32Reduction)) << "chunk at " << t0;
    // A 16-bit q: attended as Rope::forward returns it (rotated in fp32, rounded once to its dtype),
    // so the result is the attention of rope(q16) over the stored numbers; a 16-bit out is within
    // one rounding of the fp32 out for the same q.
    std::vector<uint16_t> q16, q16_rotated, out16(out.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < H * D; ++i)
          q16.push_back(s.round(ac.part(Params::q)[(b * T + t0 + t) * H * D + i]));
    q16_rotated = q16;
    if (cfg.rope)
      cfg.rope->forward(view16(q16, s.dtype, {B, n, H, D}), view16(q16_rotated, s.dtype, {B, n, H, D}),
                        view(q_pos.data(), {B, n}));
    std::vector<float> q_attended;
    for (uint16_t x : q16_rotated) q_attended.push_back(s.value(x));
    cache16.attend(cfg, view16(q16, s.dtype, {B, n, H, D}), view(out.data(), {B, n, H, D}));
    plain.attend(plain_cfg, view(q_attended.data(), {B, n, H, D}), view(expected.data(), {B, n, H, D}),
                 view(q_pos.data(), {B, n}));
    ASSERT_TRUE(all_close(out, expected, kF32Reduction)) << "16-bit q, chunk at " << t0;
    cache16.attend(cfg, view16(q16, s.dtype, {B, n, H, D}), view16(out16, s.dtype, {B, n, H, D}));
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_LE(std::abs(s.value(out16[i]) - out[i]), s.unit_roundoff * std::abs(out[i]) + 1e-7) << i;
    t0 += n;
  }
}

TEST(KVCacheHalf, DecodingReadsWhatWasStoredForEveryEncoding) {
  for (const Storage* s : {&kBf16, &kF16})
    for (Enc e : {Enc::none, Enc::rope, Enc::rope_alibi, Enc::t5_causal, Enc::shaw, Enc::transformer_xl})
      check_decode(e, *s, false, {5, 1, 1, 64, 3}, "");
}

TEST(KVCacheHalf, SixteenBitInputsOnEverySimdTarget) {
  for_each_cpu_target([](const std::string& target) {
    for (const Storage* s : {&kBf16, &kF16}) check_decode(Enc::rope_alibi, *s, true, {7, 1, 66}, target);
  });
}

// |a - b| <= 3 u max|b| per element: each side rounded once (or twice, through a shift), rotation in fp32.
void expect_within_three_roundings(const KVCache& a, const KVCache& b, const Storage& s) {
  const std::vector<float> x = contents(a.keys(), &s), y = contents(b.keys(), &s);
  ASSERT_EQ(x.size(), y.size());
  double largest = 0;
  for (float v : y) largest = std::max(largest, std::abs(static_cast<double>(v)));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_LE(std::abs(x[i] - y[i]), 3 * s.unit_roundoff * largest) << i;
  EXPECT_EQ(bits(a.values()), bits(b.values()));
}

TEST(KVCacheHalf, ShiftEraseAndRerotate) {
  const int64_t T = 70, Hkv = 2, D = 16;
  const std::vector<float> k = random_floats(T * Hkv * D, 41), v = random_floats(T * Hkv * D, 42);
  for (const Storage* s : {&kBf16, &kF16}) {
    SCOPED_TRACE(s->name);
    const Rope rope(yarn_config(D));
    KVCache shifted(1, Hkv, D, &rope, s->dtype), fresh(1, Hkv, D, &rope, s->dtype);
    const std::vector<int64_t> old_pos = arange(0, T), new_pos = arange(1000, T);
    shifted.append(view(k.data(), {1, T, Hkv, D}), view(v.data(), {1, T, Hkv, D}), view(old_pos.data(), {T}));
    shifted.shift_positions(1000);
    fresh.append(view(k.data(), {1, T, Hkv, D}), view(v.data(), {1, T, Hkv, D}), view(new_pos.data(), {T}));
    expect_within_three_roundings(shifted, fresh, *s);
    // erase_front: the tail, bit for bit.
    const std::vector<uint16_t> keys = bits(fresh.keys()), values = bits(fresh.values());
    fresh.erase_front(10);
    EXPECT_EQ(bits(fresh.keys()), std::vector<uint16_t>(keys.begin() + 10 * Hkv * D, keys.end()));
    EXPECT_EQ(bits(fresh.values()), std::vector<uint16_t>(values.begin() + 10 * Hkv * D, values.end()));
    EXPECT_EQ(fresh.size(), T - 10);
  }
  // LongRoPE's switch from short to long factors: the keys as if rotated with the long table,
  // with one rounding for the two rotations.
  for (const Storage* s : {&kBf16, &kF16}) {
    SCOPED_TRACE(s->name);
    const int64_t n = 30, original = 32;
    const Rope rope(longrope_config(D, original));
    KVCache cache(1, Hkv, D, &rope, s->dtype);
    cache.append(view(k.data(), {1, n, Hkv, D}), view(v.data(), {1, n, Hkv, D}));
    cache.rerotate(n, original + 1);
    std::vector<float> expected(n * Hkv * D);
    const std::vector<int64_t> pos = arange(0, n);
    RopeCall long_call;
    long_call.seq_len = original + 1;
    rope.forward(view(k.data(), {1, n, Hkv, D}), view(expected.data(), {1, n, Hkv, D}), view(pos.data(), {n}),
                 long_call);
    const std::vector<float> got = contents(cache.keys(), s);
    double largest = 0;
    for (float x : expected) largest = std::max(largest, std::abs(static_cast<double>(x)));
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_LE(std::abs(got[i] - expected[i]), 3 * s->unit_roundoff * largest) << i;
  }
}

TEST(KVCacheHalf, BadInputIsRefusedByName) {
  std::vector<uint16_t> k(8 * 2, 0), v(8 * 2, 0);
  std::vector<float> k32(16), out(16);
  expect_error([] { KVCache(1, 1, 8, nullptr, DType::i64); },
               "KVCache: dtype = i64 is invalid: the cache stores f32, bf16 or f16");
  KVCache cache(1, 1, 8, nullptr, DType::f16);
  expect_error(
      [&] {
        cache.append(view16(k, DType::bf16, {1, 2, 1, 8}), view16(v, DType::bf16, {1, 2, 1, 8}));
      },
      "k has dtype bf16: the cache stores f16, give f32 or f16");
  expect_error(
      [&] {
        cache.append(view(k32.data(), {1, 2, 1, 8}), view16(v, DType::f16, {1, 2, 1, 8}));
      },
      "v has dtype f16");
  EXPECT_EQ(cache.size(), 0);
  cache.append(view16(k, DType::f16, {1, 2, 1, 8}), view16(v, DType::f16, {1, 2, 1, 8}));
  EXPECT_EQ(cache.keys().dtype, DType::f16);
  cache.attend(AttentionConfig{}, view(k32.data(), {1, 2, 1, 8}), view(out.data(), {1, 2, 1, 8}));
}

}  // namespace
}  // namespace posenc::test
