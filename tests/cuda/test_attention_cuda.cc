// tests/cuda/test_attention_cuda.cc: attention_forward on CUDA tensors against the double reference
// (reference/attention.h, through tests/attention_case.h) on the values the tensor cores read: the bf16 /
// fp16 inputs, and with RoPE, q and k rotated as the device rotates them and rounded to the storage (tensor
// cores take 16-bit operands: the rotated copies are rounded once, unlike the CPU's fp32 rotation); against
// the CPU backend on those rotated values where positions are explicit. The GPU rounds each probability to
// the storage type for its P V on tensor cores (as every GPU flash attention does; the CPU's
// round_probabilities), so each output element is within
//   |out - exact| <= u_p max_j |v_j| + u |exact| + 1e-5 (1 + |exact|)
// (u_p = u = 2^-8 bf16, 2^-11 fp16: a convex combination of the values with weights each within u_p relative,
// then one rounding), and lse within the fp32 reductions' 1e-5 (1 + |lse|). Outputs are poisoned (NaN) first:
// every element must be written. The refusals run without a GPU; everything else skips without one.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#include "attention_case.h"
#include "device_buffer.h"
#include "half_storage.h"
#include "kernel_choice.h"
#include "posenc/error.h"
#include "src/cuda/attention.h"
#include "rope_emulation.h"

namespace posenc::test {
namespace {

struct DeviceCase {
  std::vector<uint16_t> q, k, v;
  std::vector<float> exact_out, exact_lse;
  double vmax = 0;
};

// The case's q, k, v rounded to the storage, and the reference on exactly the values the tensor cores read:
// with RoPE, q and k rotated as the device rotates them (tests/cuda/rope_emulation.h: the kernel's
// arithmetic, bit for bit) and rounded to the storage again, then the temperature; the rest as the case's
// reference.
DeviceCase rounded_case(AttentionCase& ac, const Storage& s) {
  DeviceCase d;
  std::vector<uint16_t>* bits[3] = {&d.q, &d.k, &d.v};
  const Params::Part parts[3] = {Params::q, Params::k, Params::v};
  for (int i = 0; i < 3; ++i) {
    std::vector<float>& x = ac.part(parts[i]);
    bits[i]->resize(x.size());
    for (size_t j = 0; j < x.size(); ++j) (*bits[i])[j] = s.round(x[j]), x[j] = s.value((*bits[i])[j]);
  }
  for (float x : ac.part(Params::v)) d.vmax = std::max(d.vmax, std::fabs(static_cast<double>(x)));
  // Shaw's tables: rounded to the storage type for the tensor cores (the device keeps them in fp32); the
  // value term is a convex combination of a_v rows, its sums rounded as P is: max |a_v| joins the bound.
  double a_v_max = 0;
  for (const Params::Part table : {Params::a_k, Params::a_v})
    for (float& x : ac.part(table)) {
      x = s.value(s.round(x));
      if (table == Params::a_v) a_v_max = std::max(a_v_max, std::fabs(static_cast<double>(x)));
    }
  d.vmax += a_v_max;
  const std::vector<double> f = ac.flat();
  ref::AttentionResult<double> r;
  if (!ac.uses_rope()) {
    r = ac.reference(f);
  } else {
    const Case& c = ac.shape();
    const AttentionConfig cfg = ac.config();
    const RopeFrequencies freq = cfg.rope->frequencies();
    const auto rotated = [&](const std::vector<uint16_t>& x, const std::vector<int64_t>& pos, int64_t T,
                             int64_t heads) {
      const std::vector<uint16_t> y =
          emulate_cuda_rope(freq, cfg.rope->config().layout, c.D, s.dtype, x, pos, c.B, T, heads, false);
      std::vector<double> values(y.size());
      for (size_t i = 0; i < y.size(); ++i) values[i] = s.value(y[i]);
      return values;
    };
    std::vector<double> q = rotated(d.q, ac.q_pos(), c.Q, c.H), k = rotated(d.k, ac.k_pos(), c.K, c.Hkv);
    if (c.temperature != 0)
      for (size_t t = 0; t < ac.q_pos().size(); ++t)
        for (int64_t e = 0; e < c.H * c.D; ++e)
          q[t * c.H * c.D + e] *= ac.temperature().factor(ac.q_pos()[t]);
    r = ref::attention<double>(ac.reference_problem(f), q, k, ac.slice(f, Params::v));
  }
  d.exact_out.assign(r.out.begin(), r.out.end());
  d.exact_lse.assign(r.lse.begin(), r.lse.end());
  return d;
}

// The config with its host tables copied to the device (kept alive by `buffers`).
AttentionConfig device_config(const AttentionCase& ac,
                              std::vector<std::unique_ptr<DeviceBuffer<float>>>& buffers) {
  AttentionConfig cfg = ac.config();
  const auto to_device = [&](ConstTensorView& v) {
    if (v.data == nullptr) return;
    std::vector<float> host(v.ptr<float>(), v.ptr<float>() + v.numel());
    buffers.push_back(std::make_unique<DeviceBuffer<float>>(host));
    v.data = buffers.back()->get();
    v.device = Device::cuda;
  };
  to_device(cfg.sinks);
  to_device(cfg.bias.relative_table);
  if (cfg.shaw) to_device(cfg.shaw->a_k), to_device(cfg.shaw->a_v);
  return cfg;
}

TensorView device16(DeviceBuffer<uint16_t>& b, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView v = view(reinterpret_cast<float*>(b.get()), shape, Device::cuda);
  v.dtype = dtype;
  return v;
}

void check(const Case& c, Enc e, const Storage& s) {
  AttentionCase ac(c, e);
  SCOPED_TRACE(ac.describe() + " " + s.name);
  const DeviceCase d = rounded_case(ac, s);
  std::vector<std::unique_ptr<DeviceBuffer<float>>> tables;
  const AttentionConfig cfg = device_config(ac, tables);
  DeviceBuffer<uint16_t> dq(d.q), dk(d.k), dv(d.v), dout(d.exact_out.size());
  DeviceBuffer<float> dlse(d.exact_lse.size());
  DeviceBuffer<int64_t> cu_q(c.cu_q.empty() ? std::vector<int64_t>{0} : c.cu_q);
  DeviceBuffer<int64_t> cu_k(c.cu_k.empty() ? std::vector<int64_t>{0} : c.cu_k);
  dout.poison(), dlse.poison();
  const int64_t Dv = c.dv();
  AttentionInputs in =
      qkv(device16(dq, s.dtype, {c.B, c.Q, c.H, c.D}), device16(dk, s.dtype, {c.B, c.K, c.Hkv, c.D}),
          device16(dv, s.dtype, {c.B, c.K, c.Hkv, Dv}));
  if (!c.cu_q.empty()) {
    in.cu_seqlens_q = view(cu_q.get(), {static_cast<int64_t>(c.cu_q.size())}, Device::cuda);
    in.cu_seqlens_k = view(cu_k.get(), {static_cast<int64_t>(c.cu_k.size())}, Device::cuda);
  }
  attention_forward(cfg, in, device16(dout, s.dtype, {c.B, c.Q, c.H, Dv}),
                    view(dlse.get(), {c.B, c.H, c.Q}, Device::cuda));
  const std::vector<uint16_t> out = dout.to_host();
  const std::vector<float> lse = dlse.to_host();
  for (size_t i = 0; i < out.size(); ++i) {
    const double exact = d.exact_out[i], got = s.value(out[i]);
    const double bound = s.unit_roundoff * (d.vmax + std::fabs(exact)) + 1e-5 * (1 + std::fabs(exact));
    ASSERT_LE(std::fabs(got - exact), bound) << "out element " << i << " exact " << exact;
  }
  for (size_t i = 0; i < lse.size(); ++i) {
    const double exact = d.exact_lse[i];
    if (std::isinf(exact)) {
      ASSERT_EQ(lse[i], exact) << "lse " << i;
    } else {
      ASSERT_LE(std::fabs(lse[i] - exact), 1e-5 * (1 + std::fabs(exact))) << "lse " << i;
    }
  }
}

const std::vector<Enc>& gpu_encodings() {
  static const std::vector<Enc> e = {Enc::none,   Enc::rope,      Enc::alibi,   Enc::alibi_symmetric,
                                     Enc::t5,     Enc::t5_causal, Enc::clipped, Enc::rope_alibi,
                                     Enc::rope_t5};
  return e;
}

// POSENC_TEST_FORWARD_KERNEL=sm90 (or tiled) runs every test here with that forward kernel wherever it fits
// (scripts/gpu_check.sh runs the file once more on the sm_90a kernel; automatic: the library's choice);
// POSENC_TEST_BACKWARD_KERNEL the same for the backward.
[[maybe_unused]] const bool kKernelsFromEnvironment = [] {
  choose_kernel_from("POSENC_TEST_FORWARD_KERNEL", &cuda::attention_forward_choice);
  choose_kernel_from("POSENC_TEST_BACKWARD_KERNEL", &cuda::attention_backward_choice);
  return true;
}();

TEST(AttentionCuda, EveryEncodingAndMaskAgainstTheReference) {
  POSENC_SKIP_WITHOUT_GPU();
  Case capped{1, 70, 70, 4, 2, 64, true};
  capped.softcap = 2.0, capped.sinks = true, capped.chunk = 16;
  Case window{2, 130, 130, 2, 2, 128, true, 50};
  Case packed{1, 120, 150, 4, 4, 64, true};
  packed.cu_q = {0, 50, 50, 120}, packed.cu_k = {0, 60, 70, 150};
  const std::vector<Case> shapes = {
      {2, 70, 70, 4, 2, 64, true},    // a prefill, two partial tiles, grouped heads
      {1, 3, 200, 8, 1, 128, false},  // decode rows against a long cache, multi-query
      {1, 1, 1, 1, 1, 64, false},     // length 1
      capped,
      window,
      packed};
  for (const Storage* s : {&kBf16, &kF16})
    for (const Case& c : shapes)
      for (Enc e : gpu_encodings()) check(c, e, *s);
}

// The sm_90a kernel (src/cuda/attention_sm90.cu: wgmma, TMA, warp-specialized), forced onto the shapes it
// takes even where their row blocks would not fill the GPU: several row blocks of 128 and more key tiles than
// its ring of 2 buffers (its mbarriers' phases wrap), partial row blocks and key tiles, tiles a causal mask,
// a window or a chunk skips or leaves whole, head dims below its 64 and 128 tiles (zero columns from the
// TMA), multi-query and grouped heads, packed sequences (one empty), every scalar encoding, softcap with
// sinks, query temperature.
TEST(AttentionCuda, Sm90KernelAgainstTheReference) {
  POSENC_SKIP_WITHOUT_GPU();
  if (!cuda::attention_sm90_available()) GTEST_SKIP() << "not a compute capability 9.0 GPU";
  ForwardKernel forced(cuda::AttentionKernel::sm90);
  Case capped{1, 200, 200, 4, 2, 64, true};
  capped.softcap = 2.0, capped.sinks = true, capped.chunk = 48;
  Case temperature{1, 260, 260, 2, 1, 96, true};
  temperature.temperature = 1;
  Case packed{1, 420, 690, 4, 2, 64, true};  // partial last tiles whose next rows are another sequence's
  packed.cu_q = {0, 150, 150, 420}, packed.cu_k = {0, 200, 390, 690};
  const std::vector<Case> shapes = {
      {2, 70, 70, 4, 2, 64, true},       // one partial row block and key tile, grouped heads
      {1, 300, 650, 4, 4, 128, true},    // 3 row blocks, 6 key tiles
      {1, 129, 1000, 2, 1, 128, false},  // a row past the first block, bidirectional, multi-query
      {2, 24, 500, 8, 2, 32, false},     // a head dim of 32 on the 64 tile
      {2, 300, 700, 2, 2, 128, true, 150}, capped, temperature};
  const int64_t launches = cuda::attention_sm90_launches;
  for (const Storage* s : {&kBf16, &kF16})
    for (const Case& c : shapes)
      for (Enc e : gpu_encodings()) check(c, e, *s);
  EXPECT_EQ(cuda::attention_sm90_launches - launches,
            static_cast<int64_t>(2 * shapes.size() * gpu_encodings().size()));
}

// A small case of the sm_90a kernel for the GPU check's sanitizers: two row blocks, four key tiles through
// its two buffers, a learned lookup; and heads of 256 (key tiles of 64).
TEST(AttentionCuda, Sm90KernelSmallCase) {
  POSENC_SKIP_WITHOUT_GPU();
  if (!cuda::attention_sm90_available()) GTEST_SKIP() << "not a compute capability 9.0 GPU";
  ForwardKernel forced(cuda::AttentionKernel::sm90);
  const int64_t launches = cuda::attention_sm90_launches;
  check({1, 130, 400, 2, 1, 64, true}, Enc::t5, kBf16);
  check({1, 130, 200, 2, 1, 256, true}, Enc::alibi, kBf16);
  EXPECT_EQ(cuda::attention_sm90_launches - launches, 2);
}

// The sm_90a kernel's wider heads, bf16: MLA's q / k of 192 with values of 128 (DeepSeek-V2/V3), heads of 256
// on key tiles of 64 (Gemma 2's softcap and window: more key tiles than its buffers), heads below them
// zero-padded (160 / 96 on the 192 tile, 200 / 136 on the 256 one), packed sequences; fp16 heads past 128,
// and values wider than q / k heads of 128 (128 / 200), run on the tiled kernel.
TEST(AttentionCuda, Sm90KernelWideHeads) {
  POSENC_SKIP_WITHOUT_GPU();
  if (!cuda::attention_sm90_available()) GTEST_SKIP() << "not a compute capability 9.0 GPU";
  ForwardKernel forced(cuda::AttentionKernel::sm90);
  Case mla{1, 300, 650, 4, 4, 192, true};
  mla.Dv = 128;
  Case gemma{2, 200, 330, 4, 2, 256, true, 100};
  gemma.softcap = 5, gemma.sinks = true;
  Case padded{1, 129, 300, 2, 1, 160, false};
  padded.Dv = 96;
  Case padded_256{1, 70, 200, 2, 2, 200, true};
  padded_256.Dv = 136;
  Case wide_values{1, 70, 200, 2, 2, 128, true};
  wide_values.Dv = 200;
  Case packed{1, 420, 690, 4, 2, 256, true};
  packed.cu_q = {0, 150, 150, 420}, packed.cu_k = {0, 200, 390, 690};
  const std::vector<Case> shapes = {mla, gemma, padded, padded_256, packed};
  const int64_t launches = cuda::attention_sm90_launches;
  for (const Case& c : shapes)
    for (Enc e : gpu_encodings()) check(c, e, kBf16);
  EXPECT_EQ(cuda::attention_sm90_launches - launches,
            static_cast<int64_t>(shapes.size() * gpu_encodings().size()));
  check(gemma, Enc::alibi, kF16);
  check(mla, Enc::t5, kF16);
  check(wide_values, Enc::t5, kBf16);
  EXPECT_EQ(cuda::attention_sm90_launches - launches,
            static_cast<int64_t>(shapes.size() * gpu_encodings().size()));
}

// Few row blocks against many key tiles: the keys split across blocks and merged (split-K decoding), with
// every bias, windows and sinks. Up to 16 rows per kv head (Q x H / Hkv) run on the decoding kernel (the
// group's heads in one block; src/cuda/attention_decode.cu): one query row with 4 heads a group and with
// none, two rows with a window (its tiles outside skipped), 16 rows (8 heads a group, 2 queries), query
// temperature, fp16 (the KV cache's tests give it explicit positions); packed sequences of unequal lengths
// and 18 rows a group on the tiled kernel's splits.
TEST(AttentionCuda, SplitKeysForDecoding) {
  POSENC_SKIP_WITHOUT_GPU();
  Case sinks{1, 1, 3000, 8, 2, 128, true};
  sinks.sinks = true, sinks.softcap = 5;
  Case window{2, 2, 1500, 4, 4, 64, true, 700};
  Case packed{1, 5, 2000, 4, 1, 64, true};
  packed.cu_q = {0, 1, 5}, packed.cu_k = {0, 1700, 2000};
  Case temperature{1, 2, 900, 8, 1, 64, true};
  temperature.temperature = 1;
  for (const Case& c : {Case{1, 1, 3000, 8, 2, 128, true}, Case{2, 1, 1500, 4, 4, 64, false}, sinks, window,
                        packed, Case{1, 2, 1000, 16, 2, 64, false}, Case{1, 2, 1000, 18, 2, 64, false}})
    for (Enc e : gpu_encodings()) check(c, e, kBf16);
  for (Enc e : gpu_encodings()) check(temperature, e, kF16);
}

TEST(AttentionCuda, QueryTemperatureAndBidirectionalWindows) {
  POSENC_SKIP_WITHOUT_GPU();
  for (int temperature : {1, 2, 3}) {
    Case c{1, 90, 90, 2, 1, 64, true};
    c.temperature = temperature;
    check(c, Enc::none, kBf16);
    check(c, Enc::rope, kF16);
  }
  check({1, 100, 100, 2, 2, 64, false, 20}, Enc::alibi_symmetric, kBf16);
}

// Explicit, shuffled positions far from 0 (2^31 + i) with RoPE and ALiBi: the GPU against the CPU backend on
// the values the GPU's tensor cores read (q and k rotated as the device rotates them; the CPU then without
// RoPE).
TEST(AttentionCuda, ExplicitPositionsAgainstTheCpu) {
  POSENC_SKIP_WITHOUT_GPU();
  const int64_t B = 2, Q = 45, K = 77, H = 4, Hkv = 2, D = 64;
  std::vector<uint16_t> q, k, v;
  rounded_random(kBf16, B * Q * H * D, 1, q), rounded_random(kBf16, B * K * Hkv * D, 2, k);
  const std::vector<float> vf = rounded_random(kBf16, B * K * Hkv * D, 3, v);
  std::vector<int64_t> qp(B * Q), kp(B * K);
  for (int64_t i = 0; i < B * Q; ++i) qp[i] = (int64_t{1} << 31) + (i * 37) % 101;
  for (int64_t j = 0; j < B * K; ++j) kp[j] = (int64_t{1} << 31) + (j * 53) % 97;
  RopeConfig rc;
  rc.head_dim = D;
  const Rope rope(rc);
  AttentionConfig cfg;
  cfg.causal = true;
  cfg.bias.kind = AttentionBias::Kind::alibi;
  cfg.bias.alibi.heads = H;
  // The CPU on the rotated values, without RoPE.
  const auto widen = [](const std::vector<uint16_t>& x) {
    std::vector<float> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = kBf16.value(x[i]);
    return y;
  };
  const RopeFrequencies freq = rope.frequencies();
  const std::vector<float> q_rot =
      widen(emulate_cuda_rope(freq, rc.layout, D, DType::bf16, q, qp, B, Q, H, false));
  const std::vector<float> k_rot =
      widen(emulate_cuda_rope(freq, rc.layout, D, DType::bf16, k, kp, B, K, Hkv, false));
  std::vector<float> out_cpu(B * Q * H * D), lse_cpu(B * H * Q);
  AttentionInputs in = qkv(view(q_rot.data(), {B, Q, H, D}), view(k_rot.data(), {B, K, Hkv, D}),
                           view(vf.data(), {B, K, Hkv, D}));
  in.q_positions = view(qp.data(), {B, Q}), in.k_positions = view(kp.data(), {B, K});
  attention_forward(cfg, in, view(out_cpu.data(), {B, Q, H, D}), view(lse_cpu.data(), {B, H, Q}));

  cfg.rope = &rope;
  DeviceBuffer<uint16_t> dq(q), dk(k), dv(v), dout(out_cpu.size());
  DeviceBuffer<int64_t> dqp(qp), dkp(kp);
  DeviceBuffer<float> dlse(lse_cpu.size());
  dout.poison();
  AttentionInputs din =
      qkv(device16(dq, DType::bf16, {B, Q, H, D}), device16(dk, DType::bf16, {B, K, Hkv, D}),
          device16(dv, DType::bf16, {B, K, Hkv, D}));
  din.q_positions = view(dqp.get(), {B, Q}, Device::cuda),
  din.k_positions = view(dkp.get(), {B, K}, Device::cuda);
  attention_forward(cfg, din, device16(dout, DType::bf16, {B, Q, H, D}),
                    view(dlse.get(), {B, H, Q}, Device::cuda));
  const std::vector<uint16_t> out = dout.to_host();
  const std::vector<float> lse = dlse.to_host();
  double vmax = 0;
  for (float x : vf) vmax = std::max(vmax, std::fabs(static_cast<double>(x)));
  for (size_t i = 0; i < out.size(); ++i) {
    const double cpu = out_cpu[i], got = kBf16.value(out[i]);
    // The CPU's fp32 out is within 1e-5 of the exact one on these values: the GPU's bound plus that.
    ASSERT_LE(std::fabs(got - cpu),
              kBf16.unit_roundoff * (vmax + std::fabs(cpu)) + 2e-5 * (1 + std::fabs(cpu)))
        << "element " << i;
  }
  for (size_t i = 0; i < lse.size(); ++i)
    ASSERT_LE(std::fabs(lse[i] - lse_cpu[i]), 2e-5 * (1 + std::fabs(lse_cpu[i])));
}

// The backward against the CPU backend's on the same 16-bit inputs (fp32 there): gradients of q, k and v
// added into fp32 and bf16 views. The GPU rounds P and dS to the storage type for its tensor cores (relative
// 2^-8 each, bf16) and RoPE's copies too: each gradient element within 2^-6 of its tensor's largest plus 2^-7
// of itself. Twice the same call, added into zeros and written into NaN views (AttentionGrads::accumulate
// false): the same values (deterministic; writing never reads the views).
void check_backward(const Case& c, Enc e, bool bf16_grads) {
  AttentionCase ac(c, e);
  SCOPED_TRACE(ac.describe() + (bf16_grads ? " bf16 grads" : " f32 grads"));
  const DeviceCase d = rounded_case(ac, kBf16);
  const AttentionConfig cpu_cfg = ac.config();
  std::vector<std::unique_ptr<DeviceBuffer<float>>> tables;
  const AttentionConfig cfg = device_config(ac, tables);
  const int64_t Dv = c.dv();
  const int64_t nq = c.B * c.Q * c.H * c.D, nk = c.B * c.K * c.Hkv * c.D, nv = c.B * c.K * c.Hkv * Dv,
                no = c.B * c.Q * c.H * Dv;
  // The CPU: forward and backward on the rounded values (fp32 views of them).
  std::vector<float> out(no), lse(c.B * c.H * c.Q), gq(nq), gk(nk), gv(nv);
  std::vector<float> grad_out = random_floats(no, 5);
  for (float& x : grad_out) x = kBf16.value(kBf16.round(x));  // the bf16 values the GPU reads
  AttentionInputs in = ac.inputs();
  attention_forward(cpu_cfg, in, view(out.data(), {c.B, c.Q, c.H, Dv}), view(lse.data(), {c.B, c.H, c.Q}));
  AttentionGrads g;
  g.q = view(gq.data(), {c.B, c.Q, c.H, c.D}), g.k = view(gk.data(), {c.B, c.K, c.Hkv, c.D});
  g.v = view(gv.data(), {c.B, c.K, c.Hkv, Dv});
  // The parameters' gradients where the case has them: the learned table and sinks.
  const int64_t table_rows =
      cpu_cfg.bias.kind == AttentionBias::Kind::relative ? cpu_cfg.bias.relative.num_rows() : 0;
  std::vector<float> gtable(table_rows * c.H), gsinks(c.sinks ? c.H : 0);
  if (table_rows > 0) g.relative_table = view(gtable.data(), {table_rows, c.H});
  if (c.sinks) g.sinks = view(gsinks.data(), {c.H});
  attention_backward(cpu_cfg, in, view(out.data(), {c.B, c.Q, c.H, Dv}), view(lse.data(), {c.B, c.H, c.Q}),
                     view(grad_out.data(), {c.B, c.Q, c.H, Dv}), g);
  // The GPU: its own forward, then the backward twice.
  DeviceBuffer<uint16_t> dq(d.q), dk(d.k), dv(d.v), dout(no);
  std::vector<uint16_t> go16(no);
  for (int64_t i = 0; i < no; ++i) go16[i] = kBf16.round(grad_out[i]);
  DeviceBuffer<uint16_t> dgo(go16);
  DeviceBuffer<float> dlse(lse.size());
  DeviceBuffer<int64_t> cu_q(c.cu_q.empty() ? std::vector<int64_t>{0} : c.cu_q);
  DeviceBuffer<int64_t> cu_k(c.cu_k.empty() ? std::vector<int64_t>{0} : c.cu_k);
  AttentionInputs din =
      qkv(device16(dq, DType::bf16, {c.B, c.Q, c.H, c.D}), device16(dk, DType::bf16, {c.B, c.K, c.Hkv, c.D}),
          device16(dv, DType::bf16, {c.B, c.K, c.Hkv, Dv}));
  if (!c.cu_q.empty()) {  // packed sequences, as the CPU's inputs
    din.cu_seqlens_q = view(cu_q.get(), {static_cast<int64_t>(c.cu_q.size())}, Device::cuda);
    din.cu_seqlens_k = view(cu_k.get(), {static_cast<int64_t>(c.cu_k.size())}, Device::cuda);
  }
  attention_forward(cfg, din, device16(dout, DType::bf16, {c.B, c.Q, c.H, Dv}),
                    view(dlse.get(), {c.B, c.H, c.Q}, Device::cuda));
  std::vector<float> runs[2][5];
  for (auto& run : runs) {
    // The first run adds into zeros, the second writes into NaN (AttentionGrads::accumulate false).
    const bool add = &run == &runs[0];
    DeviceBuffer<float> rq(std::vector<float>(nq, 0.0f)), rk(std::vector<float>(nk, 0.0f)),
        rv(std::vector<float>(nv, 0.0f));
    DeviceBuffer<uint16_t> hq(std::vector<uint16_t>(nq, 0)), hk(std::vector<uint16_t>(nk, 0)),
        hv(std::vector<uint16_t>(nv, 0));
    if (!add) rq.poison(), rk.poison(), rv.poison(), hq.poison(), hk.poison(), hv.poison();
    AttentionGrads dg;
    dg.accumulate = add;
    if (bf16_grads) {
      dg.q = device16(hq, DType::bf16, {c.B, c.Q, c.H, c.D}),
      dg.k = device16(hk, DType::bf16, {c.B, c.K, c.Hkv, c.D});
      dg.v = device16(hv, DType::bf16, {c.B, c.K, c.Hkv, Dv});
    } else {
      dg.q = view(rq.get(), {c.B, c.Q, c.H, c.D}, Device::cuda),
      dg.k = view(rk.get(), {c.B, c.K, c.Hkv, c.D}, Device::cuda);
      dg.v = view(rv.get(), {c.B, c.K, c.Hkv, Dv}, Device::cuda);
    }
    DeviceBuffer<float> rt(std::vector<float>(gtable.size(), 0.0f)),
        rs(std::vector<float>(gsinks.size(), 0.0f));
    if (!add) rt.poison(), rs.poison();
    if (table_rows > 0) dg.relative_table = view(rt.get(), {table_rows, c.H}, Device::cuda);
    if (c.sinks) dg.sinks = view(rs.get(), {c.H}, Device::cuda);
    attention_backward(cfg, din, device16(dout, DType::bf16, {c.B, c.Q, c.H, Dv}),
                       view(dlse.get(), {c.B, c.H, c.Q}, Device::cuda),
                       device16(dgo, DType::bf16, {c.B, c.Q, c.H, Dv}), dg);
    const auto widen = [](const std::vector<uint16_t>& x) {
      std::vector<float> y(x.size());
      for (size_t i = 0; i < x.size(); ++i) y[i] = kBf16.value(x[i]);
      return y;
    };
    run[0] = bf16_grads ? widen(hq.to_host()) : rq.to_host();
    run[1] = bf16_grads ? widen(hk.to_host()) : rk.to_host();
    run[2] = bf16_grads ? widen(hv.to_host()) : rv.to_host();
    run[3] = rt.to_host(), run[4] = rs.to_host();
    if (table_rows == 0) run[3].clear();
    if (!c.sinks) run[4].clear();
  }
  const std::vector<float>* cpu[5] = {&gq, &gk, &gv, &gtable, &gsinks};
  const char* names[5] = {"dq", "dk", "dv", "d relative_table", "d sinks"};
  for (int t = 0; t < 5; ++t) {
    ASSERT_EQ(runs[0][t], runs[1][t]) << names[t] << " differs between a run adding and one writing";
    double largest = 0;
    for (float x : *cpu[t]) largest = std::max(largest, std::fabs(static_cast<double>(x)));
    for (size_t i = 0; i < cpu[t]->size(); ++i) {
      const double want = (*cpu[t])[i];
      ASSERT_LE(std::fabs(runs[0][t][i] - want), std::ldexp(largest, -6) + std::ldexp(std::fabs(want), -7))
          << names[t] << " element " << i;
    }
  }
}

TEST(AttentionCuda, BackwardAgainstTheCpu) {
  POSENC_SKIP_WITHOUT_GPU();
  Case capped{1, 70, 70, 4, 2, 64, true, 30};
  capped.softcap = 3.0, capped.sinks = true;
  Case packed{1, 120, 150, 4, 4, 64, true};
  packed.cu_q = {0, 50, 50, 120}, packed.cu_k = {0, 60, 70, 150};
  Case temperature{1, 90, 90, 2, 1, 128, true};
  temperature.temperature = 1;
  for (const Case& c :
       {Case{2, 70, 70, 4, 2, 64, true}, Case{1, 3, 200, 8, 1, 128, false}, capped, packed, temperature})
    for (Enc e : {Enc::none, Enc::rope, Enc::alibi, Enc::t5, Enc::clipped, Enc::rope_alibi})
      check_backward(c, e, false);
  check_backward({1, 70, 70, 4, 2, 128, true}, Enc::rope_t5, true);
  // The table gradient's keys pass in waves of a few key tiles (of 11), the waves' sums added in order: a
  // budget of 3 tiles' partial sums at 81 distances (2 batch rows, 4 heads).
  struct Budget {  // restored however the checks end
    const int64_t saved = cuda::attention_table_partial_bytes;
    ~Budget() { cuda::attention_table_partial_bytes = saved; }
  } budget;
  cuda::attention_table_partial_bytes = 3 * 2 * 4 * 81 * 4;
  check_backward({2, 70, 700, 4, 2, 64, true}, Enc::t5, false);
  cuda::attention_table_partial_bytes = 2 * 2 * 4 * 11 * 4;  // the clipped table's 11 distances
  check_backward({2, 70, 700, 4, 2, 64, false}, Enc::clipped, false);
}

// The sm_90a backward (src/cuda/attention_backward_sm90.cu), forced onto the shapes it takes: several row
// tiles of 64 and key tiles of 128 (the blocks of a kv head adding dQ in turn: causal from the last key
// tile, bidirectional from the first), partial tiles, windows and chunks that skip row tiles, grouped and
// multi-query heads, head dims below its 64 and 128 tiles, packed sequences (one empty; partial last tiles
// whose next rows are another sequence's), softcap with sinks, query temperature, every scalar encoding
// and RoPE; the learned tables with their gradient (T5's 16 buckets to distance 40, the clipped table's 11
// distances: tiles whose diagonals lie within, across and past both ends of the lookup). Twice each: the same
// bits (the fixed order of dQ's adds and of the table's sums). Every call must have run on it.
TEST(AttentionCuda, Sm90BackwardAgainstTheCpu) {
  POSENC_SKIP_WITHOUT_GPU();
  if (!cuda::attention_sm90_available()) GTEST_SKIP() << "not a compute capability 9.0 GPU";
  BackwardKernel forced(cuda::AttentionKernel::sm90);
  Case capped{1, 200, 200, 4, 2, 64, true};
  capped.softcap = 2.0, capped.sinks = true, capped.chunk = 48;
  Case temperature{1, 260, 260, 2, 1, 96, true};
  temperature.temperature = 1;
  Case packed{1, 420, 690, 4, 2, 64, true};
  packed.cu_q = {0, 150, 150, 420}, packed.cu_k = {0, 200, 390, 690};
  const std::vector<Case> shapes = {
      {2, 70, 70, 4, 2, 64, true},       // one partial row and key tile, grouped heads
      {1, 300, 650, 4, 4, 128, true},    // 5 row tiles, 6 key tiles
      {1, 129, 1000, 2, 1, 128, false},  // bidirectional, multi-query: 8 blocks add each row tile's dQ
      {2, 24, 500, 8, 2, 32, false},     // a head dim of 32 on the 64 tile
      {2, 300, 700, 2, 2, 128, true, 150}, capped, temperature, packed};
  const Enc encodings[] = {Enc::none, Enc::rope, Enc::alibi, Enc::t5, Enc::clipped, Enc::rope_alibi};
  const int64_t launches = cuda::attention_sm90_backward_launches;
  for (const Case& c : shapes)
    for (Enc e : encodings) check_backward(c, e, false);
  EXPECT_EQ(cuda::attention_sm90_backward_launches - launches,
            static_cast<int64_t>(2 * shapes.size() * std::size(encodings)));
}

// A small case of the sm_90a backward for the GPU check's sanitizers: two blocks of keys adding the dQ of
// three row tiles in turn, ALiBi; and the clipped table's gradient.
TEST(AttentionCuda, Sm90BackwardSmallCase) {
  POSENC_SKIP_WITHOUT_GPU();
  if (!cuda::attention_sm90_available()) GTEST_SKIP() << "not a compute capability 9.0 GPU";
  BackwardKernel forced(cuda::AttentionKernel::sm90);
  const int64_t launches = cuda::attention_sm90_backward_launches;
  check_backward({1, 130, 200, 2, 1, 64, true}, Enc::alibi, false);
  check_backward({1, 130, 200, 2, 1, 64, false}, Enc::clipped, false);
  EXPECT_EQ(cuda::attention_sm90_backward_launches - launches, 4);
}

// Shaw's key and value terms on every mask the forward has (max distance 6: tiles far from the diagonal hold
// clipped distances only, tiles near it the per-distance sums; 128: five chunks of 64 distances, the last of
// one, and the most shared memory); decoding rows run without split-K; row blocks that meet no key (causal
// rows before the first key) end with zeros.
TEST(AttentionCuda, ShawAgainstTheReference) {
  POSENC_SKIP_WITHOUT_GPU();
  Case packed{1, 120, 150, 4, 4, 64, true};
  packed.cu_q = {0, 50, 50, 120}, packed.cu_k = {0, 60, 70, 150};
  Case capped{1, 140, 140, 4, 2, 128, false};
  capped.softcap = 3.0, capped.sinks = true;
  Case chunked{1, 150, 150, 2, 2, 64, true};
  chunked.chunk = 40;
  Case far{1, 300, 300, 2, 1, 128, false};
  far.shaw_max_distance = 128;
  const std::vector<Case> shapes = {{2, 150, 150, 4, 2, 64, true},  // grouped heads, causal, three tiles
                                    {1, 3, 300, 8, 1, 128, false},  // decode rows, multi-query
                                    {1, 1, 1, 1, 1, 64, false},     // length 1
                                    {1, 130, 130, 2, 2, 64, true, 20},
                                    {1, 200, 50, 2, 2, 64, true},  // rows before the first key
                                    capped,
                                    chunked,
                                    far,
                                    packed};
  for (const Storage* s : {&kBf16, &kF16})
    for (const Case& c : shapes)
      for (Enc e : {Enc::shaw, Enc::shaw_keys, Enc::rope_shaw}) check(c, e, *s);
}

// Head dims of today's models beside 64 and 128, zero-padded to the tiles: 32, Phi-3's 96, Gemma's 256 (its
// output in two 128-column parts) and MLA's q / k of 192 with values of 128 (DeepSeek-V2/V3), forward and
// backward. RoPE where q / k are rotated whole (the rotation of a part of the head is tested on the CPU).
TEST(AttentionCuda, HeadDimsOfTodaysModels) {
  POSENC_SKIP_WITHOUT_GPU();
  Case mla{1, 70, 70, 4, 4, 192, true};
  mla.Dv = 128;
  Case wide_values{1, 40, 90, 2, 1, 64, false};
  wide_values.Dv = 136;  // values wider than q / k: a 128-column tile pair, v in two parts
  Case gemma{1, 70, 70, 4, 2, 256, true};
  gemma.softcap = 5;
  for (const Case& c : {Case{2, 70, 70, 4, 2, 32, true}, Case{1, 70, 200, 4, 1, 96, true}, gemma}) {
    for (Enc e : {Enc::none, Enc::rope, Enc::alibi, Enc::t5}) check(c, e, kBf16);
    check(c, Enc::rope_alibi, kF16);
    check_backward(c, Enc::rope_t5, false);
  }
  for (const Case& c : {mla, wide_values}) {
    for (Enc e : {Enc::none, Enc::alibi, Enc::t5}) check(c, e, kBf16);
    check(c, Enc::clipped, kF16);
    check_backward(c, Enc::t5, false);
    check_backward(c, Enc::alibi, true);
  }
  // Split-K decoding with two parts of v, and with MLA's heads.
  check({1, 1, 3000, 8, 1, 256, true}, Enc::alibi, kBf16);
  Case mla_decode{1, 2, 2500, 4, 4, 192, true};
  mla_decode.Dv = 128;
  check(mla_decode, Enc::t5, kBf16);
}

// Strided q, k, v: slices of one fused qkv buffer with a padded row.
TEST(AttentionCuda, SlicesOfAFusedQkvBuffer) {
  POSENC_SKIP_WITHOUT_GPU();
  const int64_t B = 1, T = 33, H = 2, D = 64, row = (3 * H + 1) * D;  // q | k | v heads, one head of padding
  std::vector<uint16_t> qkv_bits;
  const std::vector<float> x = rounded_random(kBf16, B * T * row, 9, qkv_bits);
  std::vector<float> q(B * T * H * D), k(q.size()), v(q.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < H * D; ++e)
      q[t * H * D + e] = x[t * row + e], k[t * H * D + e] = x[t * row + H * D + e],
                    v[t * H * D + e] = x[t * row + 2 * H * D + e];
  AttentionConfig cfg;
  cfg.causal = true;
  std::vector<float> out_cpu(q.size());
  attention_forward(
      cfg, qkv(view(q.data(), {B, T, H, D}), view(k.data(), {B, T, H, D}), view(v.data(), {B, T, H, D})),
      view(out_cpu.data(), {B, T, H, D}), {});
  DeviceBuffer<uint16_t> dx(qkv_bits), dout(q.size());
  dout.poison();
  const auto slice = [&](int64_t first_head) {
    TensorView s = strided_view(reinterpret_cast<float*>(dx.get() + first_head * D), {B, T, H, D},
                                {T * row, row, D, 1}, Device::cuda);
    s.dtype = DType::bf16;
    return s;
  };
  attention_forward(cfg, qkv(slice(0), slice(H), slice(2 * H)), device16(dout, DType::bf16, {B, T, H, D}),
                    {});
  const std::vector<uint16_t> out = dout.to_host();
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_LE(std::fabs(kBf16.value(out[i]) - out_cpu[i]),
              kBf16.unit_roundoff * (1 + std::fabs(out_cpu[i])) + 2e-5)
        << "element " << i;
}

// What the CUDA attention refuses, by name, before anything is queued (no device needed: the checks read
// shapes and dtypes only; the pointers are never dereferenced).
TEST(AttentionCuda, RefusalsNameTheArgument) {
  alignas(16) static uint16_t fake[16];
  const auto dev = [&](DType dtype, std::initializer_list<int64_t> shape) {
    TensorView v = view(reinterpret_cast<float*>(fake), shape, Device::cuda);
    v.dtype = dtype;
    return v;
  };
  AttentionConfig cfg;
  const auto refused = [&](const AttentionInputs& in, TensorView out, const std::string& needle) {
    try {
      attention_forward(cfg, in, out, {});
      ADD_FAILURE() << "accepted; expected an error with: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const auto q = dev(DType::bf16, {1, 4, 2, 64}), k = dev(DType::bf16, {1, 4, 2, 64});
  refused(qkv(dev(DType::f32, {1, 4, 2, 64}), k, k), q, "bf16 or f16");
  for (const int64_t bad : {4, 100, 264})
    refused(qkv(dev(DType::bf16, {1, 4, 2, bad}), dev(DType::bf16, {1, 4, 2, bad}), k),
            dev(DType::bf16, {1, 4, 2, 64}), "head dim must be a multiple of 8 from 8 to 256");
  refused(qkv(q, k, dev(DType::bf16, {1, 4, 2, 300})), dev(DType::bf16, {1, 4, 2, 300}), "v has shape");
  refused(qkv(q, k, dev(DType::f16, {1, 4, 2, 64})), q, "v");
  refused(qkv(q, k, k), dev(DType::bf16, {1, 4, 2, 32}), "out");
  {  // Shaw: distances and heads past what its tables in shared memory take (its backward:
     // test_attention_shaw_backward_cuda.cc)
    std::vector<float> table(2 * 200 + 1);
    AttentionShaw shaw;
    shaw.config.max_distance = 200, shaw.config.head_dim = 64;
    shaw.a_k = view(table.data(), {401, 64}, Device::cuda);
    cfg.shaw = shaw;
    refused(qkv(q, k, k), q, "shaw.config.max_distance = 200");
    shaw.config.max_distance = 4, shaw.config.head_dim = 256;
    cfg.shaw = shaw;
    const auto wide = dev(DType::bf16, {1, 4, 2, 256});
    refused(qkv(wide, wide, wide), wide, "shaw on cuda takes heads up to 128");
    cfg.shaw.reset();
  }
  TensorView odd = q;
  odd.strides = {4 * 2 * 64, 2 * 64 + 4, 64, 1};
  refused(qkv(odd, k, k), q, "multiple of 8");
  {  // a table gradient without the table: refused by name
    AttentionGrads g;
    g.q = q, g.k = k, g.v = k;
    std::vector<float> table(4);
    g.relative_table = view(table.data(), {2, 2}, Device::cuda);
    try {
      attention_backward(cfg, qkv(q, k, k), q, view(reinterpret_cast<float*>(fake), {1, 2, 4}, Device::cuda),
                         q, g);
      ADD_FAILURE() << "a table gradient on cuda was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("grads.relative_table"), std::string::npos) << e.what();
    }
  }
  cfg.transformer_xl = AttentionTransformerXL{};
  refused(qkv(q, k, k), q, "transformer_xl");
  cfg.transformer_xl.reset();
  cfg.softcap = -1;
  refused(qkv(q, k, k), q, "softcap");
  cfg.softcap = 0;
  // A CPU k with a CUDA q.
  std::vector<uint16_t> host(4 * 2 * 64);
  refused(qkv(q, view16(host, DType::bf16, {1, 4, 2, 64}), k), q, "k");
}

}  // namespace
}  // namespace posenc::test
