// tests/cuda/test_attention_shaw_backward_cuda.cc: the backward of Shaw et al.'s relative representations on
// CUDA tensors (src/cuda/attention_backward_shaw.cu) against the CPU backend's on the same 16-bit inputs:
// the gradients of q, k, v, a_k and a_v, every element, and the same bits on a second run (deterministic).
// The GPU rounds P, dS, Shaw's tables and its per-distance sums to the storage type for the tensor cores
// (relative 2^-8 each in bf16, 2^-11 in fp16) and RoPE's copies too: each gradient element within 2^-6 of
// its tensor's largest plus 2^-7 of itself, the bound of the GPU backward's other tests (kept for fp16, whose
// roundings are 8 times finer). The double reference's Shaw gradients against central finite differences
// on a tiny case, and what the front end refuses by name, run without a GPU; the rest skips without one.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "attention_case.h"
#include "attention_gradients.h"
#include "device_buffer.h"
#include "half_storage.h"
#include "posenc/error.h"
#include "src/cuda/attention.h"

namespace posenc::test {
namespace {

TensorView device16(DeviceBuffer<uint16_t>& b, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView v = view(reinterpret_cast<float*>(b.get()), shape, Device::cuda);
  v.dtype = dtype;
  return v;
}

std::vector<uint16_t> rounded_bits(std::vector<float>& x, const Storage& s) {
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) bits[i] = s.round(x[i]), x[i] = s.value(bits[i]);
  return bits;
}

// One case: the CPU's forward and backward on the rounded inputs (fp32 there), then the GPU's forward and
// its backward twice, gradients of q, k, v into fp32 views or (half_grads) views of the storage type, and
// of a_k and a_v (fp32) into views holding 0.5 (added into: the CPU's gradients plus 0.5 expected);
// the second call writes every gradient into NaN views instead (AttentionGrads::accumulate false): the
// same values.
void check_shaw_backward(const Case& c, Enc e, const Storage& s, bool half_grads) {
  AttentionCase ac(c, e);
  SCOPED_TRACE(ac.describe() + " " + s.name + (half_grads ? " 16-bit grads" : " f32 grads"));
  const std::vector<uint16_t> q16 = rounded_bits(ac.part(Params::q), s),
                              k16 = rounded_bits(ac.part(Params::k), s),
                              v16 = rounded_bits(ac.part(Params::v), s);
  for (const Params::Part table : {Params::a_k, Params::a_v})  // as the GPU rounds them for its tensor cores
    rounded_bits(ac.part(table), s);
  const int64_t Dv = c.dv(), rows = 2 * c.shaw_max_distance + 1;
  const bool values = !ac.part(Params::a_v).empty();
  const int64_t nq = c.B * c.Q * c.H * c.D, nk = c.B * c.K * c.Hkv * c.D, nv = c.B * c.K * c.Hkv * Dv,
                no = c.B * c.Q * c.H * Dv, nt = rows * c.D;
  std::vector<float> grad_out = random_floats(no, 5);
  const std::vector<uint16_t> go16 = rounded_bits(grad_out, s);

  // The CPU.
  const AttentionConfig cpu_cfg = ac.config();
  const AttentionInputs in = ac.inputs();
  std::vector<float> out(no), lse(c.B * c.H * c.Q), gq(nq), gk(nk), gv(nv), ga_k(nt), ga_v(values ? nt : 0);
  attention_forward(cpu_cfg, in, view(out.data(), {c.B, c.Q, c.H, Dv}), view(lse.data(), {c.B, c.H, c.Q}));
  AttentionGrads g;
  g.q = view(gq.data(), {c.B, c.Q, c.H, c.D}), g.k = view(gk.data(), {c.B, c.K, c.Hkv, c.D});
  g.v = view(gv.data(), {c.B, c.K, c.Hkv, Dv});
  g.shaw_a_k = view(ga_k.data(), {rows, c.D});
  if (values) g.shaw_a_v = view(ga_v.data(), {rows, c.D});
  attention_backward(cpu_cfg, in, view(out.data(), {c.B, c.Q, c.H, Dv}), view(lse.data(), {c.B, c.H, c.Q}),
                     view(grad_out.data(), {c.B, c.Q, c.H, Dv}), g);

  // The GPU: tables, positions and packing on the device.
  AttentionConfig cfg = cpu_cfg;
  DeviceBuffer<float> a_k(ac.part(Params::a_k)), a_v(values ? ac.part(Params::a_v) : std::vector<float>{0});
  cfg.shaw->a_k = view(a_k.get(), {rows, c.D}, Device::cuda);
  if (values) cfg.shaw->a_v = view(a_v.get(), {rows, c.D}, Device::cuda);
  DeviceBuffer<float> sinks(c.sinks ? ac.part(Params::sinks) : std::vector<float>{0});
  if (c.sinks) cfg.sinks = view(sinks.get(), {c.H}, Device::cuda);
  DeviceBuffer<uint16_t> dq(q16), dk(k16), dv(v16), dout(no), dgo(go16);
  DeviceBuffer<float> dlse(lse.size());
  DeviceBuffer<int64_t> cu_q(c.cu_q.empty() ? std::vector<int64_t>{0} : c.cu_q),
      cu_k(c.cu_k.empty() ? std::vector<int64_t>{0} : c.cu_k);
  AttentionInputs din =
      qkv(device16(dq, s.dtype, {c.B, c.Q, c.H, c.D}), device16(dk, s.dtype, {c.B, c.K, c.Hkv, c.D}),
          device16(dv, s.dtype, {c.B, c.K, c.Hkv, Dv}));
  if (!c.cu_q.empty()) {
    din.cu_seqlens_q = view(cu_q.get(), {static_cast<int64_t>(c.cu_q.size())}, Device::cuda);
    din.cu_seqlens_k = view(cu_k.get(), {static_cast<int64_t>(c.cu_k.size())}, Device::cuda);
  }
  attention_forward(cfg, din, device16(dout, s.dtype, {c.B, c.Q, c.H, Dv}),
                    view(dlse.get(), {c.B, c.H, c.Q}, Device::cuda));
  std::vector<float> runs[2][5];
  for (auto& run : runs) {
    // The first run adds (the tables' gradients into 0.5), the second writes into NaN views.
    const bool add = &run == &runs[0];
    DeviceBuffer<float> rq(std::vector<float>(nq, 0.0f)), rk(std::vector<float>(nk, 0.0f)),
        rv(std::vector<float>(nv, 0.0f)), rak(std::vector<float>(nt, 0.5f)),
        rav(std::vector<float>(values ? nt : 1, 0.5f));
    DeviceBuffer<uint16_t> hq(std::vector<uint16_t>(nq, 0)), hk(std::vector<uint16_t>(nk, 0)),
        hv(std::vector<uint16_t>(nv, 0));
    if (!add)
      rq.poison(), rk.poison(), rv.poison(), rak.poison(), rav.poison(), hq.poison(), hk.poison(),
          hv.poison();
    AttentionGrads dg;
    dg.accumulate = add;
    if (half_grads) {
      dg.q = device16(hq, s.dtype, {c.B, c.Q, c.H, c.D}),
      dg.k = device16(hk, s.dtype, {c.B, c.K, c.Hkv, c.D});
      dg.v = device16(hv, s.dtype, {c.B, c.K, c.Hkv, Dv});
    } else {
      dg.q = view(rq.get(), {c.B, c.Q, c.H, c.D}, Device::cuda);
      dg.k = view(rk.get(), {c.B, c.K, c.Hkv, c.D}, Device::cuda);
      dg.v = view(rv.get(), {c.B, c.K, c.Hkv, Dv}, Device::cuda);
    }
    dg.shaw_a_k = view(rak.get(), {rows, c.D}, Device::cuda);
    if (values) dg.shaw_a_v = view(rav.get(), {rows, c.D}, Device::cuda);
    attention_backward(cfg, din, device16(dout, s.dtype, {c.B, c.Q, c.H, Dv}),
                       view(dlse.get(), {c.B, c.H, c.Q}, Device::cuda),
                       device16(dgo, s.dtype, {c.B, c.Q, c.H, Dv}), dg);
    const auto widen = [&](const std::vector<uint16_t>& x) {
      std::vector<float> y(x.size());
      for (size_t i = 0; i < x.size(); ++i) y[i] = s.value(x[i]);
      return y;
    };
    // Added: 0.5 + g rounded, then 0.5 taken off; written: g, through the same two roundings.
    const auto less_half = [&](std::vector<float> x) {
      for (float& y : x) y = (add ? y : 0.5f + y) - 0.5f;
      return x;
    };
    run[0] = half_grads ? widen(hq.to_host()) : rq.to_host();
    run[1] = half_grads ? widen(hk.to_host()) : rk.to_host();
    run[2] = half_grads ? widen(hv.to_host()) : rv.to_host();
    run[3] = less_half(rak.to_host());
    if (values) run[4] = less_half(rav.to_host());
  }
  const std::vector<float>* cpu[5] = {&gq, &gk, &gv, &ga_k, &ga_v};
  const char* names[5] = {"dq", "dk", "dv", "d a_k", "d a_v"};
  for (int t = 0; t < 5; ++t) {
    ASSERT_EQ(runs[0][t], runs[1][t]) << names[t] << " differs between a run adding and one writing";
    ASSERT_EQ(runs[0][t].size(), cpu[t]->size()) << names[t];
    double largest = 0;
    for (float x : *cpu[t]) largest = std::max(largest, std::fabs(static_cast<double>(x)));
    if (!cpu[t]->empty()) {
      ASSERT_GT(largest, 1e-3) << names[t] << ": nothing to compare";
    }
    for (size_t i = 0; i < cpu[t]->size(); ++i) {
      const double want = (*cpu[t])[i];
      ASSERT_LE(std::fabs(runs[0][t][i] - want), std::ldexp(largest, -6) + std::ldexp(std::fabs(want), -7))
          << names[t] << " element " << i << " want " << want << " got " << runs[0][t][i];
    }
  }
}

// Every gradient against the CPU: GQA / MQA, causal and not, batch 1 and 2, one query, decode rows, windows,
// rows before the first key (nothing visible: zero gradients), softcap with sinks, query temperature, packed
// sequences, head dims padded to the tiles (40 -> 64, 96 -> 128) and values wider than q / k without a_v,
// RoPE, max distance 128 (five chunks of 64 distances, the last of one; the most shared memory), with and
// without clipped distances, a_v absent.
TEST(AttentionShawBackwardCuda, EveryGradientAgainstTheCpu) {
  POSENC_SKIP_WITHOUT_GPU();
  Case packed{1, 120, 150, 4, 4, 64, true};
  packed.cu_q = {0, 50, 50, 120}, packed.cu_k = {0, 60, 70, 150};
  Case capped{1, 140, 140, 4, 2, 128, false};
  capped.softcap = 3.0, capped.sinks = true;
  Case temperature{1, 90, 90, 2, 1, 128, true};
  temperature.temperature = 1;
  Case far{1, 300, 300, 2, 1, 128, false};
  far.shaw_max_distance = 128;
  // No distance clipped. Elsewhere the two clipped rows of d a_v gather 30-100x the others' mass, and an
  // error in the interior rows would hide within a tolerance scaled by the largest element; here zeroing
  // any of the first four chunks of 64 rows exceeds it (checked on a float64 model of the kernel's
  // roundings).
  Case unclipped{1, 100, 100, 2, 1, 128, false};
  unclipped.shaw_max_distance = 128;
  Case wide_values{1, 70, 70, 2, 1, 64, true};
  wide_values.Dv = 128;
  const std::vector<Case> shapes = {
      {2, 70, 70, 4, 2, 64, true},        // grouped heads, causal, two tiles
      {1, 3, 200, 8, 1, 128, false},      // decode rows, multi-query
      {1, 1, 5, 1, 1, 64, false},         // one query row
      {1, 130, 130, 2, 2, 64, true, 20},  // a window
      {1, 200, 50, 2, 2, 64, true},       // rows before the first key
      {1, 77, 93, 3, 1, 40, false},       // odd lengths and head dim
      {2, 65, 65, 2, 2, 96, true},       capped, temperature, far, unclipped, packed};
  for (const Storage* s : {&kBf16, &kF16})
    for (const Case& c : shapes)
      for (Enc e : {Enc::shaw, Enc::shaw_keys}) check_shaw_backward(c, e, *s, false);
  check_shaw_backward(wide_values, Enc::shaw_keys, kBf16, false);
  check_shaw_backward({2, 70, 70, 4, 2, 64, true}, Enc::rope_shaw, kBf16, false);
  check_shaw_backward({1, 130, 130, 4, 2, 128, true}, Enc::shaw, kBf16, true);
  check_shaw_backward({1, 130, 130, 4, 2, 64, false}, Enc::shaw, kF16, true);
}

// The queries pass in waves of row blocks, each wave's partial gradients of a_k and a_v added in order: a
// budget of one and of three row blocks' partials (of 4, at 13 distances, 2 batch rows and 4 heads).
TEST(AttentionShawBackwardCuda, PartialGradientsInWaves) {
  POSENC_SKIP_WITHOUT_GPU();
  struct Budget {  // restored however the checks end
    const int64_t saved = cuda::attention_table_partial_bytes;
    ~Budget() { cuda::attention_table_partial_bytes = saved; }
  } budget;
  const int64_t per_row_block = 2 * 4 * 13 * 64 * 4 * 2;
  for (const int64_t blocks : {1, 3}) {
    cuda::attention_table_partial_bytes = blocks * per_row_block;
    check_shaw_backward({2, 200, 200, 4, 2, 64, false}, Enc::shaw, kBf16, false);
  }
}

// The passes in waves of kv heads (with their query heads: two per kv head here) whose rows' products take
// at most the budget: one kv head per wave, then three and one; the last with the row blocks' partials in
// waves of one block too.
TEST(AttentionShawBackwardCuda, WavesOfHeads) {
  POSENC_SKIP_WITHOUT_GPU();
  struct Budgets {  // restored however the checks end
    const int64_t tables = cuda::attention_shaw_table_bytes, partials = cuda::attention_table_partial_bytes;
    ~Budgets() { cuda::attention_shaw_table_bytes = tables, cuda::attention_table_partial_bytes = partials; }
  } budgets;
  const Case c{2, 130, 130, 8, 4, 64, true};
  const int64_t per_kv_head = c.B * (c.H / c.Hkv) * c.Q * (2 * c.shaw_max_distance + 1) * 4 * 2;
  cuda::attention_shaw_table_bytes = 1;
  check_shaw_backward(c, Enc::shaw, kBf16, false);
  cuda::attention_shaw_table_bytes = 3 * per_kv_head;
  check_shaw_backward(c, Enc::shaw_keys, kF16, false);
  cuda::attention_table_partial_bytes = 1;
  check_shaw_backward(c, Enc::shaw, kBf16, false);
}

// The double reference's gradients of Shaw's tables (and of q, k, v through them) against central finite
// differences: the oracle of the CPU backend the GPU is compared with.
TEST(AttentionShawBackwardCuda, ReferenceGradientsMatchFiniteDifferences) {
  Case c{1, 5, 7, 2, 1, 8, true};
  c.shaw_max_distance = 2;
  for (Enc e : {Enc::shaw, Enc::shaw_keys}) check_reference_against_finite_differences(c, e);
}

// What the backward refuses by name, before anything is queued (no device needed: shapes and dtypes only;
// the pointers are never dereferenced).
TEST(AttentionShawBackwardCuda, RefusalsNameTheArgument) {
  alignas(16) static uint16_t fake[16];
  const auto dev = [&](DType dtype, std::initializer_list<int64_t> shape) {
    TensorView v = view(reinterpret_cast<float*>(fake), shape, Device::cuda);
    v.dtype = dtype;
    return v;
  };
  const auto table = [&](std::initializer_list<int64_t> shape) {
    return view(reinterpret_cast<float*>(fake), shape, Device::cuda);
  };
  const TensorView q = dev(DType::bf16, {1, 4, 2, 64});
  const auto refused = [&](const AttentionConfig& cfg, const TensorView& v, const AttentionGrads& g,
                           const std::string& expected) {
    try {
      attention_backward(cfg, qkv(q, q, v), v, table({1, 2, 4}), v, g);
      ADD_FAILURE() << "accepted; expected an error naming " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  AttentionGrads g;
  g.q = q, g.k = q, g.v = q;
  AttentionConfig cfg;
  g.shaw_a_k = table({9, 64});
  refused(cfg, q, g, "grads.shaw_a_k is given but attention has no such encoding");
  AttentionShaw shaw;
  shaw.config.max_distance = 4, shaw.config.head_dim = 64;
  shaw.a_k = table({9, 64});
  cfg.shaw = shaw;
  g.shaw_a_v = table({9, 64});
  refused(cfg, q, g, "grads.shaw_a_v is given but attention has no such encoding");
  g.shaw_a_v = {};
  g.shaw_a_k = table({8, 64});
  refused(cfg, q, g, "grads.shaw_a_k");
  g.shaw_a_k = table({9, 64});
  AttentionConfig bad_config =
      cfg;  // the config's field is named, not the shape it would give grads.shaw_a_k
  bad_config.shaw->config.max_distance = -1;
  refused(bad_config, q, g, "max_distance");
  const TensorView wide = dev(DType::bf16, {1, 4, 2, 256});
  g.v = wide;
  refused(cfg, wide, g, "shaw's backward on cuda takes value heads up to 128");
}

}  // namespace
}  // namespace posenc::test
