// tests/test_attention_half.cc: the fused attention forward on bf16 / fp16 storage. q, k, v are
// rounded to the storage type; the library widens them a tile at a time and computes in fp32, so
// against the double reference on the same rounded inputs an fp32 out is within the fp32 tolerance
// of the other attention tests (kF32Reduction), and a 16-bit out within that plus one rounding:
//   |out - exact| <= u |exact| + 1e-5 (1 + |exact|),   u = 2^-8 (bf16), 2^-11 (fp16).
// Paths: prefill (K^T packed from 16-bit rows, or bf16 pairs for vdpbf16ps), decode (key rows
// widened per tile, heads of a group sharing the tile; or, one query row per kv head, widened inside
// the q.k and P V products; or bf16 rows read by vdpbf16ps when q holds bf16 values), a long decode
// split across threads and merged, RoPE (keys widened once and rotated), every bias and score
// mechanism, value heads of another size, mixed q / out dtypes; the backward (inputs widened once,
// each gradient rounded once).
#include <cmath>

#include "attention_case.h"
#include "half_storage.h"
#include "posenc/error.h"
#include "src/cpu/bf16_dot.h"

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
  if (out_storage) {
    EXPECT_GT(worst, 0.05) << "no rounding visible: is out really 16-bit?";
  }
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
      {1, 70, 70, 2, 1, 40, true},  // prefill: K^T packed from 16-bit rows
      {2, 3, 67, 4, 2, 24, false},  // decode: key rows widened per tile
      {1, 1, 130, 8, 1, 16, true},  // multi-query decode, group in lockstep
      {1, 1, 150, 4, 4, 20, true},  // one query row per kv head: rows widened inside the products
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
      check({1, 1, 150, 4, 4, 20, true}, Enc::alibi, nullptr, s, nullptr, target);  // fp32 q, 16-bit rows
      check({1, 1, 150, 4, 4, 40, true}, Enc::none, s, s, s, target);
      check({1, 70, 70, 2, 1, 33, true}, Enc::none, s, s, s, target);  // bf16 pairs (odd D) on AVX3+BF16DOT
      check({1, 70, 70, 2, 2, 33, true}, Enc::t5, nullptr, s, nullptr, target);  // fp32 q: K^T widened
    }
  });
}

// AttentionConfig::round_probabilities (bf16 keys and values): every probability is rounded once to
// bf16 before P V, on every SIMD target.
// The bound of the config's comment, against the double reference on the same inputs: each weight
// w~_j = p~_j / sum p~ is within 2u / (1 - u) relative of w_j (u = 2^-8), so
//   |out - exact| <= 2.02 u sum_j w_j |v_j| + u |exact| (a bf16 out) + 1e-5 (1 + |exact|),
// bounded here by max_j |v_j| of the row's kv head; and the rounding must be visible against the
// unrounded call (fp32 out).
void check_rounded_probabilities(const Case& c, Enc e, bool bf16_out, const std::string& target) {
  AttentionCase ac(c, e);
  SCOPED_TRACE(ac.describe() + " " + target + (bf16_out ? " out bf16" : " out f32"));
  std::vector<uint16_t> bits[3];
  const Params::Part parts[3] = {Params::q, Params::k, Params::v};
  for (int i = 0; i < 3; ++i) {
    std::vector<float>& x = ac.part(parts[i]);
    bits[i].resize(x.size());
    for (size_t j = 0; j < x.size(); ++j) bits[i][j] = kBf16.round(x[j]), x[j] = kBf16.value(bits[i][j]);
  }
  const auto expected = ac.reference(ac.flat());
  const int64_t Dv = c.dv();
  AttentionInputs in = ac.inputs();
  in.q = view16(bits[0], DType::bf16, {c.B, c.Q, c.H, c.D});
  in.k = view16(bits[1], DType::bf16, {c.B, c.K, c.Hkv, c.D});
  in.v = view16(bits[2], DType::bf16, {c.B, c.K, c.Hkv, Dv});
  const size_t n = static_cast<size_t>(c.B * c.Q * c.H * Dv);
  std::vector<float> out32(n, 99.0f), plain(n, 99.0f);
  std::vector<uint16_t> out16(n, 0x7777);
  AttentionConfig cfg = ac.config();
  attention_forward(cfg, in, view(plain.data(), {c.B, c.Q, c.H, Dv}), TensorView{});
  cfg.round_probabilities = true;
  attention_forward(
      cfg, in,
      bf16_out ? view16(out16, DType::bf16, {c.B, c.Q, c.H, Dv}) : view(out32.data(), {c.B, c.Q, c.H, Dv}),
      TensorView{});
  const std::vector<float>& v = ac.part(Params::v);
  const double u = kBf16.unit_roundoff;
  std::vector<double> vmax(static_cast<size_t>(c.B * c.Hkv), 0.0);  // max_j |v_j| per (batch, kv head)
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t j = 0; j < c.K; ++j)
      for (int64_t hk = 0; hk < c.Hkv; ++hk)
        for (int64_t d = 0; d < Dv; ++d)
          vmax[b * c.Hkv + hk] =
              std::max(vmax[b * c.Hkv + hk], std::abs(double(v[((b * c.K + j) * c.Hkv + hk) * Dv + d])));
  double rounding_seen = 0;
  for (size_t i = 0; i < n; ++i) {
    const int64_t h = static_cast<int64_t>(i / Dv) % c.H, b = static_cast<int64_t>(i / Dv / c.H / c.Q);
    const double vm = vmax[b * c.Hkv + h / (c.H / c.Hkv)];
    const double exact = expected.out[i], got = bf16_out ? kBf16.value(out16[i]) : out32[i];
    const double bound =
        2.02 * u * vm + (bf16_out ? u * std::abs(exact) : 0.0) + 1e-5 * (1 + std::abs(exact));
    ASSERT_LE(std::abs(got - exact), bound) << "element " << i;
    if (!bf16_out) rounding_seen = std::max(rounding_seen, std::abs(got - plain[i]));
  }
  if (!bf16_out) {
    EXPECT_GT(rounding_seen, 1e-5) << "no rounding of P visible";
  }
}

TEST(AttentionHalf, RoundedProbabilities) {
  Case mla{1, 67, 67, 4, 1, 20, true};
  mla.Dv = 12, mla.rope_offset = 8, mla.rope_layout = RopeLayout::interleaved;
  Case wide{1, 70, 70, 2, 1, 40, false};
  wide.Dv = 100;  // value blocks of 64, 16, 16 and a masked 4
  Case capped{1, 70, 70, 4, 2, 24, true};
  capped.softcap = 2.0, capped.sinks = true;
  // Where the CPU has vdpbf16ps, P V takes it (src/cpu/bf16_dot.h; preferred here whatever the CPU's
  // rates); the FMA path over the same rounded P is checked there too, switched off.
  const bool dots = cpu::bf16_dot_available();
  for (bool use_dots : {true, false}) {
    if (!use_dots && !dots) continue;
    if (dots) cpu::set_bf16_dot_enabled(use_dots);
    cpu::set_bf16_value_dots_preferred(use_dots);
    ASSERT_EQ(cpu::bf16_value_dots_available(), use_dots && dots);
    for (const Case& c : {Case{1, 70, 70, 2, 1, 40, true}, Case{2, 131, 131, 4, 2, 32, true}, wide, mla,
                          capped, Case{2, 3, 67, 4, 2, 24, false}})  // (the last: decode)
      for (Enc e : {Enc::none, Enc::rope_alibi, Enc::t5})
        for (bool bf16_out : {false, true})
          check_rounded_probabilities(c, e, bf16_out, use_dots && dots ? "bf16 dots" : "");
  }
  if (dots) cpu::set_bf16_dot_enabled(true);
  cpu::set_bf16_value_dots_preferred(cpu::cpu_prefers_bf16_value_dots());
  // The rounding itself (ExpShiftSum<true>) on every target: test_simd_helpers.cc; here a prefill and
  // a decode through each target's kernels.
  for_each_cpu_target([&](const std::string& target) {
    check_rounded_probabilities(wide, Enc::rope_alibi, false, target);
    check_rounded_probabilities(Case{2, 3, 67, 4, 2, 24, false}, Enc::t5, true, target);
  });
}

TEST(AttentionHalf, RoundedProbabilitiesNeedBf16KeysAndValues) {
  const int64_t D = 8, H = 2, K = 3;
  std::vector<uint16_t> q(H * D, 0x3c00), k(K * D, 0x3c00), v(K * D, 0x3c00);
  std::vector<float> out(H * D, 7.0f);
  AttentionConfig cfg;
  cfg.round_probabilities = true;
  const AttentionInputs in = qkv(view16(q, DType::f16, {1, 1, H, D}), view16(k, DType::f16, {1, K, 1, D}),
                                 view16(v, DType::f16, {1, K, 1, D}));
  expect_error(
      [&] {
        attention_forward(cfg, in, view(out.data(), {1, 1, H, D}), TensorView{});
      },
      "round_probabilities = true needs bf16 keys and values (k and v are f16)");
  EXPECT_EQ(out, std::vector<float>(out.size(), 7.0f));
}

// The backward on 16-bit storage widens its inputs once and rounds each gradient once: with q, k,
// v, out and grad_out in a 16-bit storage, fp32 gradients equal bit for bit those of the fp32
// backward on the same (widened) numbers, and 16-bit gradients are exactly those rounded once
// (accumulated into zeros: round(0 + g)). The fp32 backward itself is checked against the double
// reference and finite differences (test_attention_reference_backward.cc).
void check_backward(const Case& c, Enc e, const Storage& s) {
  AttentionCase ac(c, e);
  SCOPED_TRACE(ac.describe() + " " + s.name);
  const int64_t Dv = c.dv();
  std::vector<uint16_t> bits[3];
  const Params::Part parts[3] = {Params::q, Params::k, Params::v};
  for (int i = 0; i < 3; ++i) {
    std::vector<float>& x = ac.part(parts[i]);
    for (float& xi : x) bits[i].push_back(s.round(xi)), xi = s.value(bits[i].back());
  }
  const AttentionConfig cfg = ac.config();
  AttentionInputs in16 = ac.inputs();
  in16.q = view16(bits[0], s.dtype, {c.B, c.Q, c.H, c.D});
  in16.k = view16(bits[1], s.dtype, {c.B, c.K, c.Hkv, c.D});
  in16.v = view16(bits[2], s.dtype, {c.B, c.K, c.Hkv, Dv});
  const size_t n_out = static_cast<size_t>(c.B * c.Q * c.H * Dv);
  std::vector<uint16_t> out16(n_out), w16;
  std::vector<float> lse(c.B * c.H * c.Q), out_wide(n_out), w_wide;
  attention_forward(cfg, in16, view16(out16, s.dtype, {c.B, c.Q, c.H, Dv}),
                    view(lse.data(), {c.B, c.H, c.Q}));
  for (size_t i = 0; i < n_out; ++i) out_wide[i] = s.value(out16[i]);
  for (float w : random_floats(n_out, 92)) w16.push_back(s.round(w)), w_wide.push_back(s.value(w16.back()));
  // Parameter gradients stay fp32 in both runs.
  auto param_grads = [&](std::vector<float>& flat) {
    AttentionGrads g;
    auto at = [&](Params::Part p) { return flat.data() + ac.offset(p); };
    if (cfg.bias.kind == AttentionBias::Kind::relative)
      g.relative_table = view(at(Params::table), {cfg.bias.relative.num_rows(), c.H});
    if (cfg.shaw) g.shaw_a_k = view(at(Params::a_k), {cfg.shaw->config.num_rows(), c.D});
    if (cfg.sinks.data) g.sinks = view(at(Params::sinks), {c.H});
    return g;
  };
  std::vector<float> expected(ac.flat().size(), 0.0f), actual(expected.size(), 0.0f);
  AttentionGrads g32 = param_grads(expected);
  g32.q = view(expected.data() + ac.offset(Params::q), {c.B, c.Q, c.H, c.D});
  g32.k = view(expected.data() + ac.offset(Params::k), {c.B, c.K, c.Hkv, c.D});
  g32.v = view(expected.data() + ac.offset(Params::v), {c.B, c.K, c.Hkv, Dv});
  attention_backward(cfg, ac.inputs(), view(out_wide.data(), {c.B, c.Q, c.H, Dv}),
                     view(lse.data(), {c.B, c.H, c.Q}), view(w_wide.data(), {c.B, c.Q, c.H, Dv}), g32);
  std::vector<uint16_t> gq16(bits[0].size(), 0), gk16(bits[1].size(), 0), gv16(bits[2].size(), 0);
  AttentionGrads g16 = param_grads(actual);
  g16.q = view16(gq16, s.dtype, {c.B, c.Q, c.H, c.D});
  g16.k = view16(gk16, s.dtype, {c.B, c.K, c.Hkv, c.D});
  g16.v = view16(gv16, s.dtype, {c.B, c.K, c.Hkv, Dv});
  attention_backward(cfg, in16, view16(out16, s.dtype, {c.B, c.Q, c.H, Dv}),
                     view(lse.data(), {c.B, c.H, c.Q}), view16(w16, s.dtype, {c.B, c.Q, c.H, Dv}), g16);
  const std::vector<uint16_t>* got[3] = {&gq16, &gk16, &gv16};
  for (int i = 0; i < 3; ++i)
    for (size_t j = 0; j < got[i]->size(); ++j)
      ASSERT_EQ((*got[i])[j], s.round(expected[ac.offset(parts[i]) + j])) << "part " << i << " element " << j;
  for (Params::Part p : {Params::table, Params::a_k, Params::sinks})
    for (size_t j = 0; j < ac.part(p).size(); ++j)
      ASSERT_EQ(actual[ac.offset(p) + j], expected[ac.offset(p) + j]) << "part " << p << " element " << j;
  // fp32 gradients of 16-bit inputs: the fp32 backward's, bit for bit, added to what was there.
  std::vector<float> gq32(bits[0].size(), 0.5f);
  AttentionGrads mixed = param_grads(actual);
  mixed.q = view(gq32.data(), {c.B, c.Q, c.H, c.D});
  mixed.k = view16(gk16, s.dtype, {c.B, c.K, c.Hkv, c.D});
  mixed.v = view16(gv16, s.dtype, {c.B, c.K, c.Hkv, Dv});
  attention_backward(cfg, in16, view(out_wide.data(), {c.B, c.Q, c.H, Dv}), view(lse.data(), {c.B, c.H, c.Q}),
                     view16(w16, s.dtype, {c.B, c.Q, c.H, Dv}), mixed);
  for (size_t j = 0; j < gq32.size(); ++j) ASSERT_EQ(gq32[j], 0.5f + expected[ac.offset(Params::q) + j]) << j;
}

TEST(AttentionHalf, BackwardWidensOnceAndRoundsEachGradientOnce) {
  Case capped{1, 70, 70, 4, 2, 24, true};
  capped.softcap = 2.0, capped.sinks = true;
  Case mla{1, 67, 67, 4, 1, 20, true};
  mla.Dv = 12, mla.rope_offset = 8, mla.rope_layout = RopeLayout::interleaved;
  for (const Storage* s : {&kBf16, &kF16})
    for (const Case& c : {Case{2, 70, 70, 4, 2, 40, true}, Case{1, 3, 67, 2, 1, 24, false}, capped, mla})
      for (Enc e : {Enc::none, Enc::rope, Enc::rope_alibi, Enc::t5, Enc::shaw})
        if (!(e == Enc::shaw && c.Dv > 0)) check_backward(c, e, *s);
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
  std::vector<double> gk64(k.size(), 5.0);  // a gradient storage the backward does not write
  g.k = view(gk64.data(), {1, K, 1, D});
  try {
    attention_backward({}, in, view(out.data(), {1, 1, H, D}), view(lse.data(), {1, H, 1}),
                       view(out.data(), {1, 1, H, D}), g);
    ADD_FAILURE() << "an f64 gradient";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("grads.k has dtype f64, expected f32"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(gq, std::vector<float>(gq.size(), 5.0f));
  std::vector<double> out64(H * D, 7.0);  // a dtype attention does not store
  EXPECT_THROW(attention_forward({}, in, view(out64.data(), {1, 1, H, D}), TensorView{}), Error);
}

}  // namespace
}  // namespace posenc::test
