// tests/test_attention_half.cc: the fused attention forward on bf16 / fp16 storage. q, k, v are
// rounded to the storage type; the library widens them a tile at a time and computes in fp32, so
// against the double reference on the same rounded inputs an fp32 out is within the fp32 tolerance
// of the other attention tests (kF32Reduction), and a 16-bit out within that plus one rounding:
//   |out - exact| <= u |exact| + 1e-5 (1 + |exact|),   u = 2^-8 (bf16), 2^-11 (fp16).
// Paths: prefill (K^T packed from 16-bit rows), decode (key rows widened per tile, heads of a group
// sharing the tile), a long decode split across threads and merged, RoPE (keys widened once and
// rotated), every bias and score mechanism, value heads of another size, mixed q / out dtypes.
#include <cmath>

#include "attention_case.h"
#include "posenc/error.h"
#include "half_storage.h"

namespace posenc::test {
namespace {

// One case with q / k,v / out each in fp32 or a 16-bit storage (nullptr: fp32).
void check(const Case& c, Enc e, const Storage* q_storage, const Storage* kv_storage,
           const Storage* out_storage, const std::string& target = "") {
  AttentionCase ac(c, e);
  SCOPED_TRACE(ac.describe() + " " + target + " q " + (q_storage ? q_storage->name : "f32") + " kv " +
               (kv_storage ? kv_storage->name : "f32") + " out " + (out_storage ? out_storage->name : "f32"));
  std::vector<uint16_t> bits[3];
  const Params::Part parts[3] = {Params::q, Params::k, Params::v};
  for (int i = 0; i < 3; ++i) {
    const Storage* s = i == 0 ? q_storage : kv_storage;
    if (!s) continue;
    std::vector<float>& x = ac.part(parts[i]);
    bits[i].resize(x.size());
    for (size_t j = 0; j < x.size(); ++j) bits[i][j] = s->round(x[j]), x[j] = s->value(bits[i][j]);
  }
  const auto expected = ac.reference(ac.flat());  // the rounded inputs, exactly
  AttentionInputs in = ac.inputs();
  const int64_t Dv = c.dv();
  if (q_storage) in.q = view16(bits[0], q_storage->dtype, {c.B, c.Q, c.H, c.D});
  if (kv_storage) {
    in.k = view16(bits[1], kv_storage->dtype, {c.B, c.K, c.Hkv, c.D});
    in.v = view16(bits[2], kv_storage->dtype, {c.B, c.K, c.Hkv, Dv});
  }
  const size_t n = static_cast<size_t>(c.B * c.Q * c.H * Dv);
  std::vector<float> lse(c.B * c.H * c.Q, 99.0f), out32(n, 99.0f);
  std::vector<uint16_t> out16(n, 0x7777);
  const TensorView out = out_storage ? view16(out16, out_storage->dtype, {c.B, c.Q, c.H, Dv})
                                     : view(out32.data(), {c.B, c.Q, c.H, Dv});
  attention_forward(ac.config(), in, out, view(lse.data(), {c.B, c.H, c.Q}));
  EXPECT_TRUE(all_close(lse, expected.lse, kF32Reduction));
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double exact = expected.out[i];
    const double got = out_storage ? out_storage->value(out16[i]) : out32[i];
    const double bound =
        (out_storage ? out_storage->unit_roundoff * std::abs(exact) : 0.0) + 1e-5 * (1 + std::abs(exact));
    worst = std::max(worst, std::abs(got - exact) / bound);
    ASSERT_LE(std::abs(got - exact), bound) << "element " << i;
  }
  if (out_storage) EXPECT_GT(worst, 0.05) << "no rounding visible: is out really 16-bit?";
}

const std::vector<Enc>& encodings() {
  static const std::vector<Enc> encs = {Enc::none, Enc::rope, Enc::rope_alibi,
                                        Enc::t5,   Enc::shaw, Enc::transformer_xl};
  return encs;
}

TEST(AttentionHalf, EveryPathAndEncoding) {
  Case capped{1, 70, 70, 4, 2, 24, true};
  capped.softcap = 2.0, capped.sinks = true, capped.chunk = 16;
  Case mla{1, 67, 67, 4, 1, 20, true};
  mla.Dv = 12, mla.rope_offset = 8, mla.rope_layout = RopeLayout::interleaved;
  const std::vector<Case> shapes = {
      {1, 70, 70, 2, 1, 40, true},                                    // prefill: K^T packed from 16-bit rows
      {2, 3, 67, 4, 2, 24, false},                                    // decode: key rows widened per tile
      {1, 1, 130, 8, 1, 16, true},                                    // multi-query decode, group in lockstep
      {1, 76, 76, 2, 2, 8, true, 0, {0, 5, 75, 76}, {0, 5, 75, 76}},  // packed sequences
      capped,
      mla};
  for (const Case& c : shapes)
    for (Enc e : encodings()) {
      if (e == Enc::shaw && c.Dv > 0) continue;  // Shaw's values need Dv == D
      if (e == Enc::transformer_xl && c.Q * c.K * c.D > 40000) continue;
      for (const Storage* s : {&kBf16, &kF16}) check(c, e, s, s, s);
    }
}

TEST(AttentionHalf, LongDecodeSplitAndMerged) {
  for (const Storage* s : {&kBf16, &kF16}) {
    check({1, 1, 5000, 32, 1, 32, true}, Enc::rope_alibi, s, s, s);  // flash-decoding splits, 16-bit merge
    check({1, 2, 4200, 8, 2, 16, true}, Enc::none, nullptr, s, nullptr);
  }
}

TEST(AttentionHalf, MixedStorage) {
  // fp32 queries against a 16-bit cache (the common mix), 16-bit out of fp32 inputs, and the reverse.
  check({1, 1, 300, 8, 2, 32, true}, Enc::rope, nullptr, &kBf16, nullptr);
  check({1, 70, 70, 2, 1, 24, true}, Enc::t5, nullptr, nullptr, &kBf16);
  check({1, 70, 70, 2, 1, 24, true}, Enc::alibi, &kF16, nullptr, nullptr);
  check({2, 5, 40, 2, 2, 16, false}, Enc::none, &kBf16, &kF16, nullptr);
}

TEST(AttentionHalf, EverySimdTarget) {
  for_each_cpu_target([](const std::string& target) {
    for (const Storage* s : {&kBf16, &kF16}) {
      check({1, 70, 70, 2, 1, 40, true}, Enc::rope_alibi, s, s, s, target);
      check({1, 1, 130, 8, 1, 24, true}, Enc::t5, s, s, s, target);
    }
  });
}

TEST(AttentionHalf, BadStorageIsRejectedAndNothingIsWritten) {
  const int64_t D = 8, H = 2, K = 3;
  std::vector<uint16_t> q(H * D, 0x3c00), k(K * D, 0x3c00), v(K * D, 0x3c00);
  std::vector<float> out(H * D, 7.0f), lse(H, 7.0f), gq(q.size(), 5.0f), gk(k.size(), 5.0f),
      gv(v.size(), 5.0f);
  AttentionInputs in = qkv(view16(q, DType::bf16, {1, 1, H, D}), view16(k, DType::bf16, {1, K, 1, D}),
                           view16(v, DType::f16, {1, K, 1, D}));
  try {
    attention_forward({}, in, view(out.data(), {1, 1, H, D}), TensorView{});
    ADD_FAILURE() << "k and v of different dtypes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("v has dtype f16, expected bf16"), std::string::npos) << e.what();
  }
  EXPECT_EQ(out, std::vector<float>(out.size(), 7.0f));
  in.v = view16(v, DType::bf16, {1, K, 1, D});
  AttentionGrads g;
  g.q = view(gq.data(), {1, 1, H, D});
  g.k = view(gk.data(), {1, K, 1, D});
  g.v = view(gv.data(), {1, K, 1, D});
  try {
    attention_backward({}, in, view(out.data(), {1, 1, H, D}), view(lse.data(), {1, H, 1}),
                       view(out.data(), {1, 1, H, D}), g);
    ADD_FAILURE() << "16-bit backward";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q has dtype bf16: the backward takes fp32 inputs"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(gq, std::vector<float>(gq.size(), 5.0f));
  std::vector<double> out64(H * D, 7.0);  // a dtype attention does not store
  EXPECT_THROW(attention_forward({}, in, view(out64.data(), {1, 1, H, D}), TensorView{}), Error);
}

}  // namespace
}  // namespace posenc::test
