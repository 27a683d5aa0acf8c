// tests/cuda/test_attention_xl_backward_cuda.cc: the backward of Transformer-XL's terms on CUDA tensors
// (src/cuda/attention_backward_xl.cu) against the CPU backend's on the same 16-bit inputs: the gradients of
// q, k, v, u, v_h and W_R (and of the T5 table and sinks beside them), every element, and the same bits on a
// second run (deterministic). The GPU rounds P, dS and rproj to the storage type for the tensor cores
// (relative 2^-8 each in bf16, 2^-11 in fp16) and forms W_R's gradient from two bf16 parts of each operand:
// each gradient element within 2^-6 of its tensor's largest plus 2^-7 of itself, the bound of the GPU
// backward's other tests (kept for fp16, whose roundings are 8 times finer). The double reference's gradients
// against central finite differences on a tiny case, and what the front end refuses by name, run without a
// GPU; the rest skips without one.
#include <algorithm>
#include <cmath>
#include <functional>
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

// The parameter gradients a case has, beside q, k and v: (part, name, shape (rows, cols; cols 0: 1-D)).
struct ParameterGrad {
  Params::Part part;
  const char* name;
  int64_t rows, cols;
  TensorView AttentionGrads::*grad;
  int64_t numel() const { return cols > 0 ? rows * cols : rows; }
  TensorView view_of(float* data, Device device) const {
    return cols > 0 ? view(data, {rows, cols}, device) : view(data, {rows}, device);
  }
};
std::vector<ParameterGrad> parameter_grads(const AttentionCase& ac, const Case& c, int64_t d_model) {
  std::vector<ParameterGrad> out = {
      {Params::u, "d u", c.H, c.D, &AttentionGrads::transformer_xl_u},
      {Params::v_xl, "d v_xl", c.H, c.D, &AttentionGrads::transformer_xl_v},
      {Params::w_r, "d w_r", c.H * c.D, d_model, &AttentionGrads::transformer_xl_w_r}};
  const int64_t table = static_cast<int64_t>(ac.part(Params::table).size());
  if (table > 0) out.push_back({Params::table, "d table", table / c.H, c.H, &AttentionGrads::relative_table});
  if (c.sinks) out.push_back({Params::sinks, "d sinks", c.H, 0, &AttentionGrads::sinks});
  return out;
}

// One case: the CPU's forward and backward on the rounded inputs (fp32 there), then the GPU's forward and
// its backward twice, gradients of q, k, v into fp32 views or (half_grads) views of the storage type, and
// of the parameters (fp32) into views holding 0.5 (added into: the CPU's gradients plus 0.5 expected);
// the second call writes every gradient into NaN views instead (AttentionGrads::accumulate false): the
// same values.
void check_xl_backward(const Case& c, Enc e, const Storage& s, bool half_grads) {
  AttentionCase ac(c, e);
  SCOPED_TRACE(ac.describe() + " " + s.name + (half_grads ? " 16-bit grads" : " f32 grads"));
  const std::vector<uint16_t> q16 = rounded_bits(ac.part(Params::q), s),
                              k16 = rounded_bits(ac.part(Params::k), s),
                              v16 = rounded_bits(ac.part(Params::v), s);
  const int64_t Dv = c.dv(), d_model = ac.config().transformer_xl->config.d_model;
  const int64_t nq = c.B * c.Q * c.H * c.D, nk = c.B * c.K * c.Hkv * c.D, nv = c.B * c.K * c.Hkv * Dv,
                no = c.B * c.Q * c.H * Dv;
  std::vector<float> grad_out = random_floats(no, 5);
  const std::vector<uint16_t> go16 = rounded_bits(grad_out, s);
  const std::vector<ParameterGrad> params = parameter_grads(ac, c, d_model);

  // The CPU.
  const AttentionConfig cpu_cfg = ac.config();
  const AttentionInputs in = ac.inputs();
  std::vector<float> out(no), lse(c.B * c.H * c.Q), gq(nq), gk(nk), gv(nv);
  std::vector<std::vector<float>> cpu_params;
  for (const ParameterGrad& pg : params) cpu_params.emplace_back(pg.numel(), 0.0f);
  attention_forward(cpu_cfg, in, view(out.data(), {c.B, c.Q, c.H, Dv}), view(lse.data(), {c.B, c.H, c.Q}));
  AttentionGrads g;
  g.q = view(gq.data(), {c.B, c.Q, c.H, c.D}), g.k = view(gk.data(), {c.B, c.K, c.Hkv, c.D});
  g.v = view(gv.data(), {c.B, c.K, c.Hkv, Dv});
  for (size_t i = 0; i < params.size(); ++i)
    g.*params[i].grad = params[i].view_of(cpu_params[i].data(), Device::cpu);
  attention_backward(cpu_cfg, in, view(out.data(), {c.B, c.Q, c.H, Dv}), view(lse.data(), {c.B, c.H, c.Q}),
                     view(grad_out.data(), {c.B, c.Q, c.H, Dv}), g);

  // The GPU: parameters, packing on the device.
  AttentionConfig cfg = cpu_cfg;
  DeviceBuffer<float> u(ac.part(Params::u)), v_xl(ac.part(Params::v_xl)), w_r(ac.part(Params::w_r));
  cfg.transformer_xl->u = view(u.get(), {c.H, c.D}, Device::cuda);
  cfg.transformer_xl->v = view(v_xl.get(), {c.H, c.D}, Device::cuda);
  cfg.transformer_xl->w_r = view(w_r.get(), {c.H * c.D, d_model}, Device::cuda);
  DeviceBuffer<float> table(ac.part(Params::table).empty() ? std::vector<float>{0} : ac.part(Params::table));
  if (!ac.part(Params::table).empty())
    cfg.bias.relative_table =
        view(table.get(), {static_cast<int64_t>(ac.part(Params::table).size()) / c.H, c.H}, Device::cuda);
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
  const size_t parts = 3 + params.size();
  std::vector<std::vector<float>> runs[2];
  for (auto& run : runs) {
    // The first run adds (the parameters' gradients into 0.5), the second writes into NaN views.
    const bool add = &run == &runs[0];
    DeviceBuffer<float> rq(std::vector<float>(nq, 0.0f)), rk(std::vector<float>(nk, 0.0f)),
        rv(std::vector<float>(nv, 0.0f));
    DeviceBuffer<uint16_t> hq(std::vector<uint16_t>(nq, 0)), hk(std::vector<uint16_t>(nk, 0)),
        hv(std::vector<uint16_t>(nv, 0));
    if (!add) rq.poison(), rk.poison(), rv.poison(), hq.poison(), hk.poison(), hv.poison();
    std::vector<std::unique_ptr<DeviceBuffer<float>>> rp;
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
    for (const ParameterGrad& pg : params) {
      rp.push_back(std::make_unique<DeviceBuffer<float>>(std::vector<float>(pg.numel(), 0.5f)));
      if (!add) rp.back()->poison();
      dg.*pg.grad = pg.view_of(rp.back()->get(), Device::cuda);
    }
    attention_backward(cfg, din, device16(dout, s.dtype, {c.B, c.Q, c.H, Dv}),
                       view(dlse.get(), {c.B, c.H, c.Q}, Device::cuda),
                       device16(dgo, s.dtype, {c.B, c.Q, c.H, Dv}), dg);
    const auto widen = [&](const std::vector<uint16_t>& x) {
      std::vector<float> y(x.size());
      for (size_t i = 0; i < x.size(); ++i) y[i] = s.value(x[i]);
      return y;
    };
    run.push_back(half_grads ? widen(hq.to_host()) : rq.to_host());
    run.push_back(half_grads ? widen(hk.to_host()) : rk.to_host());
    run.push_back(half_grads ? widen(hv.to_host()) : rv.to_host());
    for (const auto& buffer : rp) {
      std::vector<float> x = buffer->to_host();
      for (float& y : x) y = (add ? y : 0.5f + y) - 0.5f;  // written: through the same two roundings
      run.push_back(std::move(x));
    }
  }
  std::vector<const std::vector<float>*> cpu = {&gq, &gk, &gv};
  std::vector<std::string> names = {"dq", "dk", "dv"};
  for (size_t i = 0; i < params.size(); ++i) cpu.push_back(&cpu_params[i]), names.push_back(params[i].name);
  for (size_t t = 0; t < parts; ++t) {
    ASSERT_EQ(runs[0][t], runs[1][t]) << names[t] << " differs between a run adding and one writing";
    ASSERT_EQ(runs[0][t].size(), cpu[t]->size()) << names[t];
    double largest = 0;
    for (float x : *cpu[t]) largest = std::max(largest, std::fabs(static_cast<double>(x)));
    ASSERT_GT(largest, 1e-3) << names[t] << ": nothing to compare";
    for (size_t i = 0; i < cpu[t]->size(); ++i) {
      const double want = (*cpu[t])[i];
      ASSERT_LE(std::fabs(runs[0][t][i] - want), std::ldexp(largest, -6) + std::ldexp(std::fabs(want), -7))
          << names[t] << " element " << i << " want " << want << " got " << runs[0][t][i];
    }
  }
}

// Two small cases, partial tiles, a T5 bias beside the terms and both storages (what scripts/gpu_check.sh
// runs under compute-sanitizer's memcheck and racecheck).
TEST(AttentionXLBackwardCuda, SmallShapesAgainstTheCpu) {
  POSENC_SKIP_WITHOUT_GPU();
  check_xl_backward({1, 70, 70, 2, 1, 64, true}, Enc::transformer_xl_t5, kBf16, false);
  check_xl_backward({1, 3, 130, 2, 2, 128, false}, Enc::transformer_xl, kF16, false);
}

// Every gradient against the CPU: GQA / MQA, causal and not, batch 1 and 2, one query, decode rows, windows,
// chunks, rows before the first key (nothing visible: zero gradients), softcap with sinks, packed sequences
// (a sequence without queries among them), head dims padded to the tiles (40 -> 64, 96 -> 128), a T5 bias
// with its table's gradient beside the terms, 16-bit gradients.
TEST(AttentionXLBackwardCuda, EveryGradientAgainstTheCpu) {
  POSENC_SKIP_WITHOUT_GPU();
  Case packed{1, 120, 150, 4, 4, 64, true};
  packed.cu_q = {0, 50, 50, 120}, packed.cu_k = {0, 60, 70, 150};
  Case capped{1, 140, 140, 4, 2, 128, false};
  capped.softcap = 3.0, capped.sinks = true;
  Case chunked{1, 100, 100, 2, 1, 64, true};
  chunked.chunk = 16;
  const std::vector<Case> shapes = {{2, 70, 70, 4, 2, 64, true},         // grouped heads, causal, two tiles
                                    {1, 3, 200, 8, 1, 128, false},       // decode rows, multi-query
                                    {1, 1, 5, 1, 1, 64, false},          // one query row
                                    {1, 130, 130, 2, 2, 64, true, 20},   // a window
                                    {1, 130, 130, 2, 1, 64, false, 30},  // a window both ways
                                    {1, 200, 50, 2, 2, 64, true},        // rows before the first key
                                    {1, 77, 93, 3, 1, 40, false},        // odd lengths and head dim
                                    {2, 65, 65, 2, 2, 96, true},        capped, chunked, packed};
  for (const Storage* s : {&kBf16, &kF16})
    for (const Case& c : shapes)
      for (Enc e : {Enc::transformer_xl, Enc::transformer_xl_t5}) check_xl_backward(c, e, *s, false);
  check_xl_backward({1, 130, 130, 4, 2, 128, true}, Enc::transformer_xl, kBf16, true);
  check_xl_backward({1, 130, 130, 4, 2, 64, false}, Enc::transformer_xl_t5, kF16, true);
}

// The keys pass in waves of key tiles (a T5 table's gradient beside the terms, its partials' budget one byte:
// one tile per wave): the partial gradients of u indexed by the whole key tile, every wave's.
TEST(AttentionXLBackwardCuda, KeysPassInWaves) {
  POSENC_SKIP_WITHOUT_GPU();
  struct Budget {  // restored however the checks end
    const int64_t saved = cuda::attention_table_partial_bytes;
    ~Budget() { cuda::attention_table_partial_bytes = saved; }
  } budget;
  cuda::attention_table_partial_bytes = 1;
  check_xl_backward({2, 200, 200, 4, 2, 64, false}, Enc::transformer_xl_t5, kBf16, false);
}

// No query rows: nothing to launch for the rows' passes; every gradient gets zero added (the views keep 0.5).
TEST(AttentionXLBackwardCuda, NoQueryRows) {
  POSENC_SKIP_WITHOUT_GPU();
  const int64_t H = 2, D = 64, K = 70, d_model = 16;
  std::vector<uint16_t> bits;
  rounded_random(kBf16, K * H * D, 3, bits);
  DeviceBuffer<uint16_t> kv(bits), none(std::vector<uint16_t>(8, 0));
  DeviceBuffer<float> terms(std::vector<float>(2 * H * D + H * D * d_model, 0.25f)),
      grads(std::vector<float>(2 * H * D + H * D * d_model, 0.5f)), lse(std::vector<float>(1, 0.0f)),
      dkv(std::vector<float>(2 * K * H * D, 0.5f));
  AttentionConfig cfg;
  AttentionTransformerXL x;
  x.config = {d_model, H, D, 10000.0};
  x.u = view(terms.get(), {H, D}, Device::cuda), x.v = view(terms.get() + H * D, {H, D}, Device::cuda);
  x.w_r = view(terms.get() + 2 * H * D, {H * D, d_model}, Device::cuda);
  cfg.transformer_xl = x;
  const TensorView q = device16(none, DType::bf16, {1, 0, H, D}), k = device16(kv, DType::bf16, {1, K, H, D});
  AttentionGrads g;
  g.q = view(grads.get(), {1, 0, H, D}, Device::cuda);
  g.k = view(dkv.get(), {1, K, H, D}, Device::cuda),
  g.v = view(dkv.get() + K * H * D, {1, K, H, D}, Device::cuda);
  g.transformer_xl_u = view(grads.get(), {H, D}, Device::cuda);
  g.transformer_xl_v = view(grads.get() + H * D, {H, D}, Device::cuda);
  g.transformer_xl_w_r = view(grads.get() + 2 * H * D, {H * D, d_model}, Device::cuda);
  attention_backward(cfg, qkv(q, k, k), q, view(lse.get(), {1, H, 0}, Device::cuda), q, g);
  for (float y : grads.to_host()) ASSERT_EQ(y, 0.5f);
  for (float y : dkv.to_host()) ASSERT_EQ(y, 0.5f);
}

// The double reference's gradients of Transformer-XL's parameters (and of q, k, v through them) against
// central finite differences: the oracle of the CPU backend the GPU is compared with.
TEST(AttentionXLBackwardCuda, ReferenceGradientsMatchFiniteDifferences) {
  for (Enc e : {Enc::transformer_xl, Enc::transformer_xl_t5})
    check_reference_against_finite_differences({1, 5, 7, 2, 1, 8, true}, e);
}

// What the backward refuses by name, before anything is queued (no device needed: shapes and dtypes only;
// the pointers are never dereferenced).
TEST(AttentionXLBackwardCuda, RefusalsNameTheArgument) {
  alignas(16) static float fake[64];
  const auto dev = [&](DType dtype, std::initializer_list<int64_t> shape) {
    TensorView v = view(fake, shape, Device::cuda);
    v.dtype = dtype;
    return v;
  };
  const TensorView q = dev(DType::bf16, {1, 4, 2, 64}), lse = dev(DType::f32, {1, 2, 4});
  const auto refused = [&](const AttentionConfig& cfg, const TensorView& v, const AttentionGrads& g,
                           const std::string& expected) {
    try {
      attention_backward(cfg, qkv(q, q, v), v, lse, v, g);
      ADD_FAILURE() << "accepted; expected an error naming " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  AttentionGrads g;
  g.q = q, g.k = q, g.v = q;
  AttentionConfig plain;
  g.transformer_xl_u = dev(DType::f32, {2, 64});
  refused(plain, q, g, "grads.transformer_xl_u is given but attention has no such encoding");
  AttentionConfig cfg;
  AttentionTransformerXL x;
  x.config = {16, 2, 64, 10000.0};
  x.u = dev(DType::f32, {2, 64}), x.v = dev(DType::f32, {2, 64}), x.w_r = dev(DType::f32, {128, 16});
  cfg.transformer_xl = x;
  g.transformer_xl_u = dev(DType::f32, {2, 32});
  refused(cfg, q, g, "grads.transformer_xl_u");
  g.transformer_xl_u = {};
  g.transformer_xl_w_r = dev(DType::f32, {128, 12});
  refused(cfg, q, g, "grads.transformer_xl_w_r");
  g.transformer_xl_w_r = dev(DType::f16, {128, 16});
  refused(cfg, q, g, "grads.transformer_xl_w_r");
  g.transformer_xl_w_r = {};
  AttentionConfig bad =
      cfg;  // the config's field is named, not the shape it would give grads.transformer_xl_w_r
  bad.transformer_xl->config.d_model = 15;
  g.transformer_xl_w_r = dev(DType::f32, {128, 15});
  refused(bad, q, g, "d_model");
  g.transformer_xl_w_r = {};
  const TensorView wide = dev(DType::bf16, {1, 4, 2, 256});
  g.v = wide;
  refused(cfg, wide, g, "transformer_xl's backward on cuda takes value heads up to 128");
}

}  // namespace
}  // namespace posenc::test
