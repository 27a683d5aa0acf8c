// tests/cuda/test_attention_xl_cuda.cc: Transformer-XL's terms in the CUDA attention forward against the
// double reference (reference/attention.h, through tests/attention_case.h) and against the CPU backend, on
// the bf16 / fp16 values the tensor cores read. The device rounds rproj_h(delta) = W_R,h R_delta to the
// storage type for its q . rproj product on tensor cores (u . k_j and v . rproj stay fp32), so beyond the
// plain forward's rounding (tests/cuda/test_attention_cuda.cc: P rounded to the storage) each logit of row i
// may move by up to
//   E_i = scale u max_{j visible} sum_d |q_id| |rproj_h(delta_ij)_d| + (the table's own error: logit_moves)
//         + 2^-20 T   (T: the problem's largest sum of |terms| of a logit, for the fp32 sums of u . k, v .
//         rproj)
// with u the storage's unit roundoff; the row's softmax weights then move by at most a factor e^(+-2 E_i):
//   |out - exact| <= u_p max_j |v_j| + u |exact| + 1e-5 (1 + |exact|) + (e^(2 E_i) - 1) max_j |v_j|
//   |lse - exact| <= 1e-5 (1 + |exact|) + E_i.
// Outputs are poisoned (NaN) first: every element must be written; a second call gives the same bits. The
// refusals run without a GPU; everything else skips without one. RoPE with these terms: against the CPU on q
// and k rotated as the device rotates them (tests/cuda/rope_emulation.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "attention_case.h"
#include "device_buffer.h"
#include "half_storage.h"
#include "kernel_choice.h"
#include "posenc/error.h"
#include "posenc/kv_cache.h"
#include "reference/transformer_xl.h"
#include "rope_emulation.h"

namespace posenc::test {
namespace {

// POSENC_TEST_FORWARD_KERNEL=tiled keeps every call here on the tiled kernel (scripts/gpu_check.sh, after the
// sm_90a kernel's small case failed); sm90 forces that kernel wherever it fits.
[[maybe_unused]] const bool kKernelFromEnvironment = [] {
  choose_kernel_from("POSENC_TEST_FORWARD_KERNEL", &cuda::attention_forward_choice);
  return true;
}();

// E_i of the header per (b, h, i), as (B, H, Q): over the row's visible keys j, the largest
//   sum_d |q_id| (u |rproj_d| + t A_d) + sum_d |v_hd| t A_d,  A_d = sum_e |W_R[h D + d][e] R_delta[e]|,
// times scale, plus the fp32 sums' share; t = 2^-15 + d_model 2^-24 is the table's own error relative to A
// (W_R R on the tensor cores from two bf16 parts of each operand, fp32 sums: src/cuda/attention_xl.cu).
std::vector<double> logit_moves(const ref::AttentionProblem<double>& p, const std::vector<double>& q,
                                double u, double largest_terms) {
  struct Row {
    std::vector<double> value, magnitude;  // rproj_h(delta) (D), A (D)
  };
  std::map<std::pair<int64_t, int64_t>, Row> rproj;  // (h, delta)
  std::vector<double> r;
  const int64_t d_model = p.transformer_xl_d_model;
  const double table = std::ldexp(1.0, -15) + static_cast<double>(d_model) * std::ldexp(1.0, -24);
  const auto row = [&](int64_t h, int64_t delta) -> const Row& {
    Row& rp = rproj[{h, delta}];
    if (!rp.value.empty()) return rp;
    ref::transformer_xl_sinusoid(delta, d_model, p.transformer_xl_base, r);
    rp.value.assign(p.D, 0.0), rp.magnitude.assign(p.D, 0.0);
    for (int64_t d = 0; d < p.D; ++d)
      for (int64_t e = 0; e < d_model; ++e) {
        const double x = p.transformer_xl_w_r[(h * p.D + d) * d_model + e] * r[e];
        rp.value[d] += x, rp.magnitude[d] += std::fabs(x);
      }
    return rp;
  };
  std::vector<double> moves(p.B * p.H * p.Q, 0.0);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t i = 0; i < p.Q; ++i) {
        const double* qi = &q[((b * p.Q + i) * p.H + h) * p.D];
        const double* vh = &p.transformer_xl_v[h * p.D];
        double largest = 0;
        for (int64_t j = 0; j < p.K; ++j) {
          if (!p.allowed(b, i, j)) continue;
          const Row& rp = row(h, p.q_pos[b * p.Q + i] - p.k_pos[b * p.K + j]);
          double t = 0;
          for (int64_t d = 0; d < p.D; ++d)
            t += std::fabs(qi[d]) * (u * std::fabs(rp.value[d]) + table * rp.magnitude[d]) +
                 std::fabs(vh[d]) * table * rp.magnitude[d];
          largest = std::max(largest, t);
        }
        moves[(b * p.H + h) * p.Q + i] = std::fabs(p.scale) * largest + std::ldexp(largest_terms, -20);
      }
  return moves;
}

// The case's q, k, v rounded to the storage (their bits for the device, their values for the reference).
struct Rounded {
  std::vector<uint16_t> q, k, v;
  double vmax = 0;
};
Rounded round_inputs(AttentionCase& ac, const Storage& s) {
  Rounded d;
  std::vector<uint16_t>* bits[3] = {&d.q, &d.k, &d.v};
  const Params::Part parts[3] = {Params::q, Params::k, Params::v};
  for (int i = 0; i < 3; ++i) {
    std::vector<float>& x = ac.part(parts[i]);
    bits[i]->resize(x.size());
    for (size_t j = 0; j < x.size(); ++j) (*bits[i])[j] = s.round(x[j]), x[j] = s.value((*bits[i])[j]);
  }
  for (float x : ac.part(Params::v)) d.vmax = std::max(d.vmax, std::fabs(static_cast<double>(x)));
  return d;
}

// A host f32 view's copy in device memory (kept alive by `buffers`).
void to_device(ConstTensorView& v, std::vector<std::unique_ptr<DeviceBuffer<float>>>& buffers) {
  if (v.data == nullptr) return;
  std::vector<float> host(v.ptr<float>(), v.ptr<float>() + v.numel());
  buffers.push_back(std::make_unique<DeviceBuffer<float>>(host));
  v.data = buffers.back()->get();
  v.device = Device::cuda;
}

TensorView device16(DeviceBuffer<uint16_t>& b, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView v = view(reinterpret_cast<float*>(b.get()), shape, Device::cuda);
  v.dtype = dtype;
  return v;
}

// The GPU's out and lse for cfg (host tables) on the rounded inputs, called twice: the same bits both times.
struct DeviceResult {
  std::vector<uint16_t> out;
  std::vector<float> lse;
};
DeviceResult run_device(const Case& c, AttentionConfig cfg, const Rounded& d, const Storage& s) {
  std::vector<std::unique_ptr<DeviceBuffer<float>>> tables;
  to_device(cfg.sinks, tables), to_device(cfg.bias.relative_table, tables);
  to_device(cfg.transformer_xl->u, tables), to_device(cfg.transformer_xl->v, tables);
  to_device(cfg.transformer_xl->w_r, tables);
  DeviceBuffer<uint16_t> dq(d.q), dk(d.k), dv(d.v);
  DeviceBuffer<int64_t> cu_q(c.cu_q.empty() ? std::vector<int64_t>{0} : c.cu_q);
  DeviceBuffer<int64_t> cu_k(c.cu_k.empty() ? std::vector<int64_t>{0} : c.cu_k);
  const int64_t Dv = c.dv();
  AttentionInputs in =
      qkv(device16(dq, s.dtype, {c.B, c.Q, c.H, c.D}), device16(dk, s.dtype, {c.B, c.K, c.Hkv, c.D}),
          device16(dv, s.dtype, {c.B, c.K, c.Hkv, Dv}));
  if (!c.cu_q.empty()) {
    in.cu_seqlens_q = view(cu_q.get(), {static_cast<int64_t>(c.cu_q.size())}, Device::cuda);
    in.cu_seqlens_k = view(cu_k.get(), {static_cast<int64_t>(c.cu_k.size())}, Device::cuda);
  }
  DeviceResult runs[2];
  for (DeviceResult& r : runs) {
    DeviceBuffer<uint16_t> dout(static_cast<size_t>(c.B * c.Q * c.H * Dv));
    DeviceBuffer<float> dlse(static_cast<size_t>(c.B * c.H * c.Q));
    dout.poison(), dlse.poison();
    attention_forward(cfg, in, device16(dout, s.dtype, {c.B, c.Q, c.H, Dv}),
                      view(dlse.get(), {c.B, c.H, c.Q}, Device::cuda));
    r.out = dout.to_host(), r.lse = dlse.to_host();
  }
  EXPECT_EQ(runs[0].out, runs[1].out) << "out differs between two calls";
  EXPECT_EQ(std::memcmp(runs[0].lse.data(), runs[1].lse.data(), runs[0].lse.size() * 4), 0)
      << "lse differs between two calls";
  return runs[0];
}

// got (the device's) against exact (B, Q, H, Dv) and lse (B, H, Q) within the header's bounds, slack added
// to the relative terms (the CPU's fp32 result as `exact`: its own 1e-5).
void expect_within(const Case& c, const Storage& s, const DeviceResult& got, const std::vector<double>& out,
                   const std::vector<double>& lse, const std::vector<double>& moves, double vmax,
                   double slack) {
  const int64_t Dv = c.dv();
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t i = 0; i < c.Q; ++i)
      for (int64_t h = 0; h < c.H; ++h) {
        const double move = moves[(b * c.H + h) * c.Q + i];
        for (int64_t e = 0; e < Dv; ++e) {
          const int64_t at = ((b * c.Q + i) * c.H + h) * Dv + e;
          const double exact = out[at], value = s.value(got.out[at]);
          const double bound = s.unit_roundoff * (vmax + std::fabs(exact)) +
                               (1e-5 + slack) * (1 + std::fabs(exact)) + std::expm1(2 * move) * vmax;
          ASSERT_LE(std::fabs(value - exact), bound)
              << "out (b " << b << ", i " << i << ", h " << h << ", " << e << ") exact " << exact;
        }
        const int64_t at = (b * c.H + h) * c.Q + i;
        if (std::isinf(lse[at])) {
          ASSERT_EQ(got.lse[at], lse[at]) << "lse (b " << b << ", h " << h << ", i " << i << ")";
        } else {
          ASSERT_LE(std::fabs(got.lse[at] - lse[at]), (1e-5 + slack) * (1 + std::fabs(lse[at])) + move)
              << "lse (b " << b << ", h " << h << ", i " << i << ") exact " << lse[at];
        }
      }
}

void check(const Case& c, Enc e, const Storage& s) {
  AttentionCase ac(c, e);
  SCOPED_TRACE(ac.describe() + " " + s.name);
  const Rounded d = round_inputs(ac, s);
  const std::vector<double> f = ac.flat();
  const ref::AttentionResult<double> r = ac.reference(f);
  const std::vector<double> moves =
      logit_moves(ac.reference_problem(f), ac.slice(f, Params::q), s.unit_roundoff, r.largest_logit_terms);
  const DeviceResult got = run_device(c, ac.config(), d, s);
  expect_within(c, s, got, r.out, r.lse, moves, d.vmax, 0.0);
}

// Two small cases, partial tiles and a tile band past the table both ways (what scripts/gpu_check.sh runs
// under compute-sanitizer's memcheck).
TEST(AttentionXLCuda, SmallShapesAgainstTheReference) {
  POSENC_SKIP_WITHOUT_GPU();
  check({1, 70, 70, 2, 1, 64, true}, Enc::transformer_xl_t5, kBf16);
  check({1, 3, 130, 2, 2, 128, false}, Enc::transformer_xl, kF16);
}

// Shapes, masks and storages: the tiled kernel's, and with the sm_90a kernel forced (the same shapes less the
// values wider than the heads, and more row blocks and key tiles than its two buffers).
std::vector<Case> xl_shapes(bool sm90) {
  Case capped{1, 70, 70, 4, 2, 64, true};
  capped.softcap = 2.0, capped.sinks = true, capped.chunk = 16;
  Case window{2, 130, 130, 2, 2, 128, true, 50};
  Case packed{1, 120, 150, 4, 4, 64, true};
  packed.cu_q = {0, 50, 50, 120}, packed.cu_k = {0, 60, 70, 150};
  Case wide_values{1, 70, 70, 2, 2, 128, true};
  wide_values.Dv = 192;  // two 128-column parts of the output per row block
  std::vector<Case> shapes = {
      {2, 70, 70, 4, 2, 64, true},    // a prefill, two partial tiles, grouped heads
      {1, 3, 200, 8, 1, 128, false},  // decode rows against a long cache (queries at its end), multi-query
      {1, 1, 1, 1, 1, 64, false},     // length 1
      {1, 130, 70, 2, 2, 40, false},  // more queries than keys, a head dim below the tile's
      {1, 100, 40, 2, 1, 24, true},   // causal with more queries than keys: the first rows see nothing
      {3, 65, 129, 3, 3, 72, true},   // odd lengths past whole tiles, head dim 72 in the (128, 128) tiles
      // A window on (64, 64) tiles: the last row block skips key tile 0, forms tile 1's whole band and
      // reuses half of it for tile 2; then a window both ways (the table's upper cut at window - 1).
      {1, 130, 130, 2, 2, 64, true, 50},
      {1, 130, 130, 2, 2, 64, false, 20},
      capped,
      window,
      packed};
  if (!sm90) {
    shapes.push_back(wide_values);
    return shapes;
  }
  Case long_packed{1, 420, 690, 4, 2, 64, true};  // partial last tiles whose next rows are another sequence's
  long_packed.cu_q = {0, 150, 150, 420}, long_packed.cu_k = {0, 200, 390, 690};
  shapes.push_back({1, 300, 650, 4, 4, 128, true});       // 3 row blocks, 11 key tiles through 2 buffers
  shapes.push_back({1, 129, 700, 2, 1, 128, false});      // a row past the first block, multi-query
  shapes.push_back({2, 300, 700, 2, 2, 128, true, 150});  // each row block's run starts past key tile 0
  shapes.push_back(long_packed);
  return shapes;
}

TEST(AttentionXLCuda, ShapesMasksAndStoragesAgainstTheReference) {
  POSENC_SKIP_WITHOUT_GPU();
  for (const Storage* s : {&kBf16, &kF16})
    for (const Case& c : xl_shapes(false))
      for (Enc e : {Enc::transformer_xl, Enc::transformer_xl_t5}) check(c, e, *s);
}

// The sm_90a kernel with Transformer-XL's terms (src/cuda/attention_sm90_xl.cu: key tiles of 64, each
// consumer warpgroup's band formed a chunk per tile), forced onto the shapes it takes; values wider than the
// q / k heads stay on the tiled kernel.
TEST(AttentionXLCuda, Sm90KernelAgainstTheReference) {
  POSENC_SKIP_WITHOUT_GPU();
  if (!cuda::attention_sm90_available()) GTEST_SKIP() << "not a compute capability 9.0 GPU";
  ForwardKernel forced(cuda::AttentionKernel::sm90);
  const std::vector<Case> shapes = xl_shapes(true);
  int64_t launches = cuda::attention_sm90_launches;
  for (const Storage* s : {&kBf16, &kF16})
    for (const Case& c : shapes)
      for (Enc e : {Enc::transformer_xl, Enc::transformer_xl_t5}) check(c, e, *s);
  // run_device calls attention_forward twice per check.
  EXPECT_EQ(cuda::attention_sm90_launches - launches, static_cast<int64_t>(2 * 2 * 2 * shapes.size()));
  Case wide_values{1, 70, 70, 2, 2, 128, true};
  wide_values.Dv = 192;
  launches = cuda::attention_sm90_launches;
  check(wide_values, Enc::transformer_xl, kBf16);
  EXPECT_EQ(cuda::attention_sm90_launches, launches) << "values wider than the heads: the tiled kernel";
}

// A small case of it for the GPU check (first, under a short timeout, and its sanitizers): two row blocks,
// seven key tiles through the two buffers, with T5's bias; and fp16 heads of 128 without a mask.
TEST(AttentionXLCuda, Sm90KernelSmallCase) {
  POSENC_SKIP_WITHOUT_GPU();
  if (!cuda::attention_sm90_available()) GTEST_SKIP() << "not a compute capability 9.0 GPU";
  ForwardKernel forced(cuda::AttentionKernel::sm90);
  const int64_t launches = cuda::attention_sm90_launches;
  check({1, 130, 400, 2, 1, 64, true}, Enc::transformer_xl_t5, kBf16);
  check({1, 70, 200, 2, 2, 128, false}, Enc::transformer_xl, kF16);
  EXPECT_EQ(cuda::attention_sm90_launches - launches, 4);  // two calls per check (run_device)
}

// The GPU against the CPU backend's fp32 forward (and the double reference) on the same rounded inputs, with
// Transformer-XL's terms of width d_model and base 10000; with `rope`, q and k rotated on the device (the CPU
// and the reference then take them rotated as the device rotates them, tests/cuda/rope_emulation.h, without
// RoPE).
void check_against_cpu(const Case& c, const Storage& s, int64_t d_model, const Rope* rope) {
  SCOPED_TRACE(std::string(s.name) + " Q " + std::to_string(c.Q) + " K " + std::to_string(c.K) + " D " +
               std::to_string(c.D) + (rope ? " rope" : ""));
  std::vector<uint16_t> q16, k16, v16;
  std::vector<float> q = rounded_random(s, c.B * c.Q * c.H * c.D, 11, q16),
                     k = rounded_random(s, c.B * c.K * c.Hkv * c.D, 12, k16);
  const std::vector<float> v = rounded_random(s, c.B * c.K * c.Hkv * c.D, 13, v16);
  std::vector<int64_t> q_pos, k_pos;  // the defaults
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t i = 0; i < c.Q; ++i) q_pos.push_back(c.K - c.Q + i);
    for (int64_t j = 0; j < c.K; ++j) k_pos.push_back(j);
  }
  if (rope != nullptr) {
    const auto rotated = [&](const std::vector<uint16_t>& x, const std::vector<int64_t>& pos, int64_t T,
                             int64_t heads) {
      const std::vector<uint16_t> y = emulate_cuda_rope(rope->frequencies(), rope->config().layout, c.D,
                                                        s.dtype, x, pos, c.B, T, heads, false);
      std::vector<float> values(y.size());
      for (size_t i = 0; i < y.size(); ++i) values[i] = s.value(y[i]);
      return values;
    };
    q = rotated(q16, q_pos, c.Q, c.H), k = rotated(k16, k_pos, c.K, c.Hkv);
  }
  const std::vector<float> u = random_floats(c.H * c.D, 14, -0.5f, 0.5f),
                           vb = random_floats(c.H * c.D, 15, -0.5f, 0.5f),
                           w_r = random_floats(c.H * c.D * d_model, 16, -0.1f, 0.1f);
  AttentionConfig cfg;
  cfg.causal = c.causal;
  AttentionTransformerXL x;
  x.config = {d_model, c.H, c.D, 10000.0};
  x.u = view(u.data(), {c.H, c.D}), x.v = view(vb.data(), {c.H, c.D});
  x.w_r = view(w_r.data(), {c.H * c.D, d_model});
  cfg.transformer_xl = x;
  std::vector<float> out_cpu(c.B * c.Q * c.H * c.D), lse_cpu(c.B * c.H * c.Q);
  attention_forward(cfg,
                    qkv(view(q.data(), {c.B, c.Q, c.H, c.D}), view(k.data(), {c.B, c.K, c.Hkv, c.D}),
                        view(v.data(), {c.B, c.K, c.Hkv, c.D})),
                    view(out_cpu.data(), {c.B, c.Q, c.H, c.D}), view(lse_cpu.data(), {c.B, c.H, c.Q}));
  // The double reference of the same terms, and the moves of its logits.
  ref::AttentionProblem<double> p;
  p.B = c.B, p.Q = c.Q, p.K = c.K, p.H = c.H, p.Hkv = c.Hkv, p.D = c.D, p.causal = c.causal;
  p.scale = 1.0 / std::sqrt(static_cast<double>(c.D));
  p.q_pos = q_pos, p.k_pos = k_pos;
  p.transformer_xl_d_model = d_model, p.transformer_xl_base = 10000.0;
  p.transformer_xl_u.assign(u.begin(), u.end()), p.transformer_xl_v.assign(vb.begin(), vb.end());
  p.transformer_xl_w_r.assign(w_r.begin(), w_r.end());
  const std::vector<double> qd(q.begin(), q.end());
  const ref::AttentionResult<double> r = ref::attention<double>(
      p, qd, std::vector<double>(k.begin(), k.end()), std::vector<double>(v.begin(), v.end()));
  const std::vector<double> moves = logit_moves(p, qd, s.unit_roundoff, r.largest_logit_terms);
  double vmax = 0;
  for (float e : v) vmax = std::max(vmax, std::fabs(static_cast<double>(e)));
  cfg.rope = rope;
  const DeviceResult got = run_device(c, cfg, Rounded{q16, k16, v16, vmax}, s);
  // The CPU's fp32 result is within 1e-5 of the exact one on these values: 1e-5 more slack.
  expect_within(c, s, got, std::vector<double>(out_cpu.begin(), out_cpu.end()),
                std::vector<double>(lse_cpu.begin(), lse_cpu.end()), moves, vmax, 1e-5);
  expect_within(c, s, got, r.out, r.lse, moves, vmax, 0.0);
}

// A wider model (d_model 200: several column and row tiles of W_R R, and its steps of e), and RoPE on the
// device with Transformer-XL's terms (the CPU on q and k rotated as the device rotates them).
TEST(AttentionXLCuda, WideModelAndRopeAgainstTheCpu) {
  POSENC_SKIP_WITHOUT_GPU();
  check_against_cpu({2, 150, 150, 4, 2, 128, true}, kBf16, 200, nullptr);
  check_against_cpu({1, 3, 300, 4, 4, 64, false}, kF16, 200, nullptr);
  check_against_cpu({1, 64, 64, 2, 2, 64, false}, kBf16, 200, nullptr);
  RopeConfig rc;
  rc.head_dim = 64;
  rc.base = 10000;
  const Rope rope(rc);
  check_against_cpu({1, 100, 100, 4, 2, 64, true}, kBf16, 32, &rope);
  check_against_cpu({1, 5, 90, 2, 1, 64, false}, kF16, 32, &rope);
}

// What Transformer-XL on CUDA refuses, by name, before anything is queued (no device needed: the checks read
// shapes and dtypes only; the pointers are never dereferenced).
TEST(AttentionXLCuda, RefusalsNameTheArgument) {
  alignas(16) static float fake[64];
  const auto dev = [&](DType dtype, std::initializer_list<int64_t> shape) {
    TensorView v = view(fake, shape, Device::cuda);
    v.dtype = dtype;
    return v;
  };
  const auto q = dev(DType::bf16, {1, 4, 2, 64}), k = dev(DType::bf16, {1, 4, 2, 64});
  const auto xl_terms = [&](int64_t D) {
    AttentionTransformerXL x;
    x.config = {16, 2, D, 10000.0};
    x.u = dev(DType::f32, {2, D}), x.v = dev(DType::f32, {2, D}), x.w_r = dev(DType::f32, {2 * D, 16});
    return x;
  };
  const auto refused = [&](const std::function<void()>& call, const std::string& needle) {
    try {
      call();
      ADD_FAILURE() << "accepted; expected an error with: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  AttentionConfig cfg;
  cfg.transformer_xl = xl_terms(64);
  // Explicit positions: the distances are tabulated from the shapes.
  std::vector<int64_t> host_positions(4);
  TensorView positions = view(reinterpret_cast<float*>(fake), {4}, Device::cuda);
  positions.dtype = DType::i64;
  AttentionInputs in = qkv(q, k, k);
  in.q_positions = positions;
  refused([&] { attention_forward(cfg, in, q, {}); }, "q_positions is given: transformer_xl on cuda");
  in = qkv(q, k, k);
  in.k_positions = positions;
  refused([&] { attention_forward(cfg, in, q, {}); }, "k_positions is given: transformer_xl on cuda");
  // Heads past the (128, 128) tiles.
  {
    AttentionConfig wide;
    wide.transformer_xl = xl_terms(256);
    const auto w = dev(DType::bf16, {1, 4, 2, 256});
    refused([&] { attention_forward(wide, qkv(w, w, w), w, {}); },
            "transformer_xl on cuda takes heads up to 128");
  }
  // Terms of the wrong shape, or on the host.
  {
    AttentionConfig bad = cfg;
    bad.transformer_xl->u = dev(DType::f32, {2, 32});
    refused([&] { attention_forward(bad, qkv(q, k, k), q, {}); }, "transformer_xl.u");
    std::vector<float> host(2 * 64 * 16);
    bad = cfg;
    bad.transformer_xl->w_r = view(host.data(), {128, 16});
    refused([&] { attention_forward(bad, qkv(q, k, k), q, {}); }, "transformer_xl.w_r");
  }
  // Query temperature, as on the CPU; Shaw together with it.
  {
    AttentionConfig t = cfg;
    t.query_temperature.kind = QueryTemperature::Kind::llama4;
    t.query_temperature.scale = 0.1, t.query_temperature.floor_scale = 8;
    refused([&] { attention_forward(t, qkv(q, k, k), q, {}); }, "query_temperature and transformer_xl");
    AttentionConfig both = cfg;
    AttentionShaw shaw;
    shaw.config.max_distance = 4, shaw.config.head_dim = 64;
    shaw.a_k = dev(DType::f32, {9, 64});
    both.shaw = shaw;
    refused([&] { attention_forward(both, qkv(q, k, k), q, {}); },
            "shaw and transformer_xl are alternatives");
  }
}

// The KV cache on CUDA: its positions are stored ones, refused by name for Transformer-XL.
TEST(AttentionXLCuda, KVCacheRefusesTransformerXL) {
  POSENC_SKIP_WITHOUT_GPU();
  const int64_t H = 2, D = 64;
  KVCache cache(1, H, D, nullptr, DType::bf16, Device::cuda);
  std::vector<uint16_t> bits;
  rounded_random(kBf16, 4 * H * D, 21, bits);
  DeviceBuffer<uint16_t> kv(bits), dq(bits), dout(bits.size());
  cache.append(device16(kv, DType::bf16, {1, 4, H, D}), device16(kv, DType::bf16, {1, 4, H, D}));
  std::vector<float> u(H * D), w_r(H * D * 16);
  AttentionConfig cfg;
  AttentionTransformerXL x;
  x.config = {16, H, D, 10000.0};
  x.u = view(u.data(), {H, D}), x.v = view(u.data(), {H, D}), x.w_r = view(w_r.data(), {H * D, 16});
  cfg.transformer_xl = x;
  try {
    cache.attend(cfg, device16(dq, DType::bf16, {1, 4, H, D}), device16(dout, DType::bf16, {1, 4, H, D}));
    ADD_FAILURE() << "the KV cache accepted transformer_xl on cuda";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.transformer_xl"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace posenc::test
