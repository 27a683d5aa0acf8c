// tests/cuda/test_attention_rope_cuda.cc: how the CUDA attention's front end applies RoPE around the
// kernels and stores the gradients, for every way a model places RoPE: the whole head rotated (the copies
// of q and k written by the rotation itself; dq and dk rotated back as they are stored into the caller's
// gradients, one pass each), rotary_dim below head_dim (the dims past it copied, and stored unrotated), both
// layouts, and a range of the head (rope_offset, as MLA's: copied, then rotated in place). First the rotation
// into a gradient alone, bit for bit against the host emulation of the device's arithmetic
// (tests/cuda/rope_emulation.h) on both of its paths (16-byte rows and the scalar one) into f32, bf16 and
// fp16 gradients, added or written; then forward and backward against the CPU backend, the gradients added
// into non-zero ones or written into NaN ones (AttentionGrads::accumulate), without RoPE too (dk and dv then
// stored into the views by the kernels themselves), and a call without queries.
// Scratch memory is NaN until written. Skipped without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "device_buffer.h"
#include "half_storage.h"
#include "kernel_choice.h"
#include "posenc/attention.h"
#include "posenc/rope.h"
#include "rope_emulation.h"
#include "src/half.h"
#include "src/cuda/attention.h"
#include "src/rope_plan.h"
#include "test_util.h"

namespace posenc::test {
namespace {

// Scratch device memory NaN until written (src/cuda/device.cc), however the tests are started: read once, at
// the first allocation, which comes after this.
const bool kScratchPoisoned = setenv("POSENC_CUDA_POISON_SCRATCH", "1", 0) == 0;

TensorView device_view(void* data, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView v = view(static_cast<float*>(data), shape, Device::cuda);
  v.dtype = dtype;
  return v;
}

// target += R^T grad (added) or target = R^T grad (written), one rounding: the host emulation rotates grad
// back in fp32 (the kernel's functions), then each element is added in fp32 (or taken) and rounded to the
// target's storage once. Written, the target starts as NaN: it must not be read.
TEST(AttentionRopeCuda, BackwardIntoGradientIsTheRotationRoundedOnce) {
  POSENC_SKIP_WITHOUT_GPU();
  struct Layout {
    RopeLayout layout;
    int64_t head_dim, rotary_dim;
  };
  // 16-byte rows (32 pairs; 16 of 32 dims), then the scalar path (half: 18 pairs, not a multiple of 4;
  // interleaved: 34 dims, not a multiple of 4).
  const Layout layouts[] = {{RopeLayout::half, 64, 64},
                            {RopeLayout::interleaved, 64, 32},
                            {RopeLayout::half, 40, 36},
                            {RopeLayout::interleaved, 40, 34}};
  const int64_t B = 2, T = 5, H = 3;
  for (const Layout& l : layouts)
    for (DType dtype : {DType::f32, DType::bf16, DType::f16})
      for (const bool add : {true, false}) {
        SCOPED_TRACE(std::to_string(l.head_dim) + " dims, rotary " + std::to_string(l.rotary_dim) +
                     (l.layout == RopeLayout::half ? " half " : " interleaved ") + dtype_name(dtype) +
                     (add ? " added" : " written"));
        RopeConfig rc;
        rc.head_dim = l.head_dim, rc.rotary_dim = l.rotary_dim, rc.layout = l.layout;
        const Rope rope(rc);
        const int64_t n = B * T * H * l.head_dim;
        const std::vector<float> grad = random_floats(n, 11), start = random_floats(n, 12);
        std::vector<int64_t> pos(B * T);
        for (int64_t i = 0; i < B * T; ++i) pos[i] = 1000 + (i * 37) % 53;
        const std::vector<float> back =
            emulate_cuda_rope(rope.frequencies(), l.layout, l.head_dim, DType::f32, grad, pos, B, T, H, true);
        DeviceBuffer<float> dgrad(grad);
        DeviceBuffer<int64_t> dpos(pos);
        const ConstTensorView g = device_view(dgrad.get(), DType::f32, {B, T, H, l.head_dim});
        const ConstTensorView p = view(dpos.get(), {B, T}, Device::cuda);
        if (dtype == DType::f32) {
          DeviceBuffer<float> target(start);
          if (!add) target.poison();
          detail::rope_backward_into_gradient_cuda(
              rope, g, device_view(target.get(), dtype, {B, T, H, l.head_dim}), p, add);
          const std::vector<float> got = target.to_host();
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(got[i], add ? start[i] + back[i] : back[i]) << "element " << i;
        } else {
          const Storage& s = dtype == DType::bf16 ? kBf16 : kF16;
          std::vector<uint16_t> bits(n);
          for (int64_t i = 0; i < n; ++i) bits[i] = s.round(start[i]);
          DeviceBuffer<uint16_t> target(bits);
          if (!add) target.poison();
          detail::rope_backward_into_gradient_cuda(
              rope, g, device_view(target.get(), dtype, {B, T, H, l.head_dim}), p, add);
          const std::vector<uint16_t> got = target.to_host();
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(got[i], s.round(add ? s.value(bits[i]) + back[i] : back[i])) << "element " << i;
        }
      }
}

// q or k (B, T, heads, D) bits of `dtype` (bf16 or fp16) with the range [offset, offset + rope.head_dim) of
// each head rotated as the device's rotation kernel rotates it (the host emulation, bit for bit); positions
// (B, T).
std::vector<uint16_t> rotated_range(const Rope& rope, int64_t offset, DType dtype,
                                    const std::vector<uint16_t>& x, const std::vector<int64_t>& positions,
                                    int64_t B, int64_t T, int64_t heads, int64_t D) {
  const int64_t dim = rope.config().head_dim;
  std::vector<uint16_t> range(B * T * heads * dim);
  for (int64_t r = 0; r < B * T * heads; ++r)
    std::copy_n(x.begin() + r * D + offset, dim, range.begin() + r * dim);
  range = emulate_cuda_rope(rope.frequencies(), rope.config().layout, dim, dtype, range, positions, B, T,
                            heads, false);
  std::vector<uint16_t> y = x;
  for (int64_t r = 0; r < B * T * heads; ++r)
    std::copy_n(range.begin() + r * dim, dim, y.begin() + r * D + offset);
  return y;
}

struct Placement {
  const char* name;
  RopeLayout layout;
  int64_t rope_dim, rotary_dim, offset;  // RoPE's head_dim, its rotary_dim, AttentionConfig::rope_offset
};

// Forward and backward with RoPE placed as `p` (or none) in heads of 64, bf16, causal, grouped heads: the
// output against the CPU's on the values the tensor cores read (q and k rotated as the device rotates them),
// the gradients (added into non-zero f32 and bf16 ones) against the CPU backend's on the same inputs within
// the bound of test_attention_cuda.cc's backward check (2^-6 of the tensor's largest plus 2^-7 of the
// element).
void check_placement(const Placement& pl) {
  SCOPED_TRACE(pl.name);
  const int64_t B = 2, Q = 70, K = 70, H = 4, Hkv = 2, D = 64;
  RopeConfig rc;  // rope_dim 0: no RoPE
  rc.head_dim = pl.rope_dim > 0 ? pl.rope_dim : D, rc.rotary_dim = pl.rotary_dim, rc.layout = pl.layout;
  const Rope rope(rc);
  AttentionConfig cfg;
  cfg.causal = true;
  cfg.rope = pl.rope_dim > 0 ? &rope : nullptr;
  cfg.rope_offset = pl.offset;
  const int64_t nq = B * Q * H * D, nk = B * K * Hkv * D;
  std::vector<uint16_t> q, k, v;
  const std::vector<float> qf = rounded_random(kBf16, nq, 1, q), kf = rounded_random(kBf16, nk, 2, k),
                           vf = rounded_random(kBf16, nk, 3, v);
  std::vector<int64_t> qp(Q), kp(K);
  for (int64_t i = 0; i < Q; ++i) qp[i] = i;
  for (int64_t j = 0; j < K; ++j) kp[j] = j;
  // The device's rotated copies, on the host: the range [offset, offset + rope_dim) of each head.
  const auto rotated = [&](const std::vector<uint16_t>& x, int64_t T, int64_t heads,
                           const std::vector<int64_t>& p) {
    std::vector<int64_t> bp(B * T);
    for (int64_t b = 0; b < B; ++b) std::copy(p.begin(), p.end(), bp.begin() + b * T);
    const std::vector<uint16_t> bits =
        pl.rope_dim == 0 ? x : rotated_range(rope, pl.offset, DType::bf16, x, bp, B, T, heads, D);
    std::vector<float> y(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) y[i] = kBf16.value(bits[i]);
    return y;
  };
  AttentionConfig plain = cfg;
  plain.rope = nullptr, plain.rope_offset = 0;
  const std::vector<float> q_rot = rotated(q, Q, H, qp), k_rot = rotated(k, K, Hkv, kp);
  std::vector<float> out_rot(nq), lse_rot(B * H * Q);
  attention_forward(plain,
                    qkv(view(q_rot.data(), {B, Q, H, D}), view(k_rot.data(), {B, K, Hkv, D}),
                        view(vf.data(), {B, K, Hkv, D})),
                    view(out_rot.data(), {B, Q, H, D}), view(lse_rot.data(), {B, H, Q}));

  DeviceBuffer<uint16_t> dq(q), dk(k), dv(v), dout(nq);
  DeviceBuffer<float> dlse(B * H * Q);
  dout.poison(), dlse.poison();
  const AttentionInputs din = qkv(device_view(dq.get(), DType::bf16, {B, Q, H, D}),
                                  device_view(dk.get(), DType::bf16, {B, K, Hkv, D}),
                                  device_view(dv.get(), DType::bf16, {B, K, Hkv, D}));
  attention_forward(cfg, din, device_view(dout.get(), DType::bf16, {B, Q, H, D}),
                    view(dlse.get(), {B, H, Q}, Device::cuda));
  const std::vector<uint16_t> out = dout.to_host();
  double vmax = 0;
  for (float x : vf) vmax = std::max(vmax, std::fabs(static_cast<double>(x)));
  for (int64_t i = 0; i < nq; ++i) {
    const double cpu = out_rot[i], got = kBf16.value(out[i]);
    ASSERT_LE(std::fabs(got - cpu),
              kBf16.unit_roundoff * (vmax + std::fabs(cpu)) + 2e-5 * (1 + std::fabs(cpu)))
        << "out element " << i;
  }

  // The backward: the CPU's on the unrotated inputs with RoPE, from its own forward, into gradients that
  // start at `start` (bf16 values, so that both views start alike).
  std::vector<float> out_cpu(nq), lse_cpu(B * H * Q);
  const AttentionInputs in =
      qkv(view(qf.data(), {B, Q, H, D}), view(kf.data(), {B, K, Hkv, D}), view(vf.data(), {B, K, Hkv, D}));
  attention_forward(cfg, in, view(out_cpu.data(), {B, Q, H, D}), view(lse_cpu.data(), {B, H, Q}));
  std::vector<uint16_t> go, sq, sk, sv;
  const std::vector<float> grad_out = rounded_random(kBf16, nq, 4, go);
  const std::vector<float> start_q = rounded_random(kBf16, nq, 5, sq),
                           start_k = rounded_random(kBf16, nk, 6, sk),
                           start_v = rounded_random(kBf16, nk, 7, sv);
  std::vector<float> gq = start_q, gk = start_k, gv = start_v;
  AttentionGrads g;
  g.q = view(gq.data(), {B, Q, H, D}), g.k = view(gk.data(), {B, K, Hkv, D}),
  g.v = view(gv.data(), {B, K, Hkv, D});
  attention_backward(cfg, in, view(out_cpu.data(), {B, Q, H, D}), view(lse_cpu.data(), {B, H, Q}),
                     view(grad_out.data(), {B, Q, H, D}), g);
  DeviceBuffer<uint16_t> dgo(go);
  for (const bool bf16_grads : {false, true})
    for (const bool add : {true, false}) {
      SCOPED_TRACE(std::string(bf16_grads ? "bf16 gradients" : "f32 gradients") +
                   (add ? " added" : " written"));
      DeviceBuffer<float> fq(start_q), fk(start_k), fv(start_v);
      DeviceBuffer<uint16_t> hq(sq), hk(sk), hv(sv);
      if (!add) fq.poison(), fk.poison(), fv.poison(), hq.poison(), hk.poison(), hv.poison();
      AttentionGrads dg;
      dg.accumulate = add;
      const DType gt = bf16_grads ? DType::bf16 : DType::f32;
      dg.q = device_view(bf16_grads ? static_cast<void*>(hq.get()) : fq.get(), gt, {B, Q, H, D});
      dg.k = device_view(bf16_grads ? static_cast<void*>(hk.get()) : fk.get(), gt, {B, K, Hkv, D});
      dg.v = device_view(bf16_grads ? static_cast<void*>(hv.get()) : fv.get(), gt, {B, K, Hkv, D});
      attention_backward(cfg, din, device_view(dout.get(), DType::bf16, {B, Q, H, D}),
                         view(dlse.get(), {B, H, Q}, Device::cuda),
                         device_view(dgo.get(), DType::bf16, {B, Q, H, D}), dg);
      const auto host = [&](const DeviceBuffer<float>& f, const DeviceBuffer<uint16_t>& h) {
        if (!bf16_grads) return f.to_host();
        const std::vector<uint16_t> bits = h.to_host();
        std::vector<float> y(bits.size());
        for (size_t i = 0; i < bits.size(); ++i) y[i] = kBf16.value(bits[i]);
        return y;
      };
      const std::vector<float> got[3] = {host(fq, hq), host(fk, hk), host(fv, hv)};
      const std::vector<float>* want[3] = {&gq, &gk, &gv};
      const std::vector<float>* start[3] = {&start_q, &start_k, &start_v};
      const char* names[3] = {"dq", "dk", "dv"};
      for (int t = 0; t < 3; ++t) {
        // The bound on the attention's gradient (what was added), plus the one rounding of a bf16 sum.
        double largest = 0;
        for (size_t i = 0; i < want[t]->size(); ++i)
          largest = std::max(largest, std::fabs(static_cast<double>((*want[t])[i]) - (*start[t])[i]));
        for (size_t i = 0; i < want[t]->size(); ++i) {
          const double added = static_cast<double>((*want[t])[i]) - (*start[t])[i],
                       w = add ? (*want[t])[i] : added;
          const double bound = std::ldexp(largest, -6) + std::ldexp(std::fabs(added), -7) +
                               (bf16_grads ? kBf16.unit_roundoff * std::fabs(w) : 0.0);
          ASSERT_LE(std::fabs(got[t][i] - w), bound) << names[t] << " element " << i;
        }
      }
    }
}

TEST(AttentionRopeCuda, PlacementsAgainstTheCpu) {
  POSENC_SKIP_WITHOUT_GPU();
  ASSERT_TRUE(kScratchPoisoned);
  check_placement({"the whole head, interleaved", RopeLayout::interleaved, 64, 64, 0});
  check_placement({"rotary_dim 32 of 64, half", RopeLayout::half, 64, 32, 0});
  check_placement({"a range: dims 16 .. 48, half", RopeLayout::half, 32, 32, 16});
  // Without RoPE the keys blocks store dk and dv into the views themselves.
  check_placement({"no RoPE", RopeLayout::half, 0, 0, 0});
}

// The sm_90a forward rotates q itself as it stages each row block (from a table of each query token's cos and
// sin), k as a rotated copy: its output and lse are bit for bit those of the same kernel on q and k rotated
// first (as the device's rotation would), without RoPE. Several row blocks, the last partial; RoPE over the
// whole head in both layouts, over part of it, and over a range of it (MLA's 192 / 128); packed sequences
// (positions restarting in each); explicit positions shared by the batch rows (a table of Q rows); fewer
// queries than keys; fp16; q a strided view (rows of a fused buffer). Each call with RoPE must have rotated q
// in the kernel (attention_sm90_q_rotations), each without it not.
TEST(AttentionRopeCuda, Sm90KernelRotatesQAsTheRotatedCopy) {
  POSENC_SKIP_WITHOUT_GPU();
  if (!cuda::attention_sm90_available()) GTEST_SKIP() << "not a compute capability 9.0 GPU";
  ASSERT_TRUE(kScratchPoisoned);
  const ForwardKernel forced(cuda::AttentionKernel::sm90);
  struct Setup {
    const char* name;
    RopeLayout layout;
    int64_t D, Dv, rope_dim, rotary_dim, offset, Q;
    bool packed = false, shared_positions = false, fp16 = false, strided_q = false;
  };
  const Setup setups[] = {
      {"half, whole head", RopeLayout::half, 128, 128, 128, 128, 0, 300},
      {"interleaved, whole head", RopeLayout::interleaved, 64, 64, 64, 64, 0, 300},
      {"half, rotary_dim 32 of 64", RopeLayout::half, 64, 64, 64, 32, 0, 300},
      {"interleaved, dims 128 .. 192 of MLA's 192", RopeLayout::interleaved, 192, 128, 64, 64, 128, 300},
      {"half, packed sequences", RopeLayout::half, 64, 64, 64, 64, 0, 300, true},
      {"half, explicit positions shared by the batch rows", RopeLayout::half, 64, 64, 64, 64, 0, 300, false,
       true},
      {"half, 200 queries, 300 keys, fp16", RopeLayout::half, 128, 128, 128, 128, 0, 200, false, false, true},
      {"interleaved, q rows of a fused buffer", RopeLayout::interleaved, 64, 64, 64, 64, 0, 300, false, false,
       false, true}};
  for (const Setup& st : setups) {
    SCOPED_TRACE(st.name);
    const Storage& s = st.fp16 ? kF16 : kBf16;
    const int64_t B = st.packed ? 1 : 2, Q = st.Q, K = 300, H = 4, Hkv = 2, D = st.D, Dv = st.Dv;
    const int64_t q_row = st.strided_q ? 3 * H * D : H * D;  // elements between q's tokens
    const std::vector<int64_t> cu = {0, 130, 130, 300};      // an empty sequence between two
    RopeConfig rc;
    rc.head_dim = st.rope_dim, rc.rotary_dim = st.rotary_dim, rc.layout = st.layout;
    const Rope rope(rc);
    AttentionConfig cfg;
    cfg.causal = true;
    cfg.rope = &rope;
    cfg.rope_offset = st.offset;
    std::vector<uint16_t> q, k, v;
    rounded_random(s, B * Q * H * D, 1, q), rounded_random(s, B * K * Hkv * D, 2, k);
    rounded_random(s, B * K * Hkv * Dv, 3, v);
    // The positions: default (queries aligned to the end of the keys, per batch row or packed sequence), or
    // explicit ones shared by the batch rows.
    std::vector<int64_t> q_pos(B * Q), k_pos(B * K), shared(Q);
    for (int64_t i = 0; i < B * Q; ++i) q_pos[i] = K - Q + i % Q;
    for (int64_t j = 0; j < B * K; ++j) k_pos[j] = j % K;
    if (st.packed)
      for (size_t c = 0; c + 1 < cu.size(); ++c)
        for (int64_t t = cu[c]; t < cu[c + 1]; ++t) q_pos[t] = k_pos[t] = t - cu[c];
    for (int64_t i = 0; i < Q; ++i) shared[i] = 1000 + 3 * i;
    if (st.shared_positions)
      for (int64_t i = 0; i < B * Q; ++i) q_pos[i] = k_pos[i] = shared[i % Q];
    const std::vector<uint16_t> q_rot = rotated_range(rope, st.offset, s.dtype, q, q_pos, 1, B * Q, H, D),
                                k_rot = rotated_range(rope, st.offset, s.dtype, k, k_pos, 1, B * K, Hkv, D);
    // q's tokens at q_row elements apart (the other elements 0), as a view of a fused buffer would have them.
    const auto spread = [&](const std::vector<uint16_t>& x) {
      std::vector<uint16_t> y(B * Q * q_row, 0);
      for (int64_t t = 0; t < B * Q; ++t) std::copy_n(x.begin() + t * H * D, H * D, y.begin() + t * q_row);
      return y;
    };
    DeviceBuffer<int64_t> dcu(cu), dshared(shared);
    std::vector<uint16_t> outs[2];
    std::vector<uint32_t> lses[2];
    for (int run = 0; run < 2; ++run) {
      AttentionConfig c = cfg;
      if (run == 1) c.rope = nullptr, c.rope_offset = 0;  // the inputs rotated already
      DeviceBuffer<uint16_t> dq(spread(run == 0 ? q : q_rot)), dk(run == 0 ? k : k_rot), dv(v),
          dout(B * Q * H * Dv);
      DeviceBuffer<float> dlse(B * H * Q);
      dout.poison(), dlse.poison();
      TensorView qv = device_view(dq.get(), s.dtype, {B, Q, H, D});
      qv.strides = {Q * q_row, q_row, D, 1};
      AttentionInputs in = qkv(qv, device_view(dk.get(), s.dtype, {B, K, Hkv, D}),
                               device_view(dv.get(), s.dtype, {B, K, Hkv, Dv}));
      if (st.packed) {
        in.cu_seqlens_q = view(dcu.get(), {static_cast<int64_t>(cu.size())}, Device::cuda);
        in.cu_seqlens_k = in.cu_seqlens_q;
      }
      if (st.shared_positions)  // both runs: they place the causal mask too
        in.q_positions = in.k_positions = view(dshared.get(), {Q}, Device::cuda);
      const int64_t launches = cuda::attention_sm90_launches, rotations = cuda::attention_sm90_q_rotations;
      attention_forward(c, in, device_view(dout.get(), s.dtype, {B, Q, H, Dv}),
                        view(dlse.get(), {B, H, Q}, Device::cuda));
      outs[run] = dout.to_host();
      const std::vector<float> lse = dlse.to_host();
      lses[run].resize(lse.size());
      std::memcpy(lses[run].data(), lse.data(), 4 * lse.size());
      ASSERT_EQ(cuda::attention_sm90_launches - launches, 1) << "run " << run << " not on the sm_90a kernel";
      ASSERT_EQ(cuda::attention_sm90_q_rotations - rotations, run == 0 ? 1 : 0) << "run " << run;
    }
    EXPECT_EQ(outs[0], outs[1]);
    EXPECT_EQ(lses[0], lses[1]);
  }
}

// No queries: the gradients of k and v are 0 (the scratch zeroed for them, no block writes them), written
// into NaN views and added into non-zero ones alike.
TEST(AttentionRopeCuda, NoQueriesGiveZeroKeyAndValueGradients) {
  POSENC_SKIP_WITHOUT_GPU();
  ASSERT_TRUE(kScratchPoisoned);
  const int64_t B = 2, K = 9, H = 4, Hkv = 2, D = 64;
  RopeConfig rc;
  rc.head_dim = D;
  const Rope rope(rc);
  AttentionConfig cfg;
  cfg.rope = &rope;
  DeviceBuffer<uint16_t> q(1), k(std::vector<uint16_t>(B * K * Hkv * D, 0x3f80)),
      v(std::vector<uint16_t>(B * K * Hkv * D, 0x3f80)), out(1), grad_out(1);
  DeviceBuffer<float> lse(1);
  const AttentionInputs in =
      qkv(device_view(q.get(), DType::bf16, {B, 0, H, D}), device_view(k.get(), DType::bf16, {B, K, Hkv, D}),
          device_view(v.get(), DType::bf16, {B, K, Hkv, D}));
  for (const bool add : {true, false}) {
    SCOPED_TRACE(add ? "added" : "written");
    const std::vector<float> start(B * K * Hkv * D, add ? 0.5f : std::nanf(""));
    DeviceBuffer<float> gq(1), gk(start), gv(start);
    AttentionGrads g;
    g.accumulate = add;
    g.q = device_view(gq.get(), DType::f32, {B, 0, H, D});
    g.k = device_view(gk.get(), DType::f32, {B, K, Hkv, D});
    g.v = device_view(gv.get(), DType::f32, {B, K, Hkv, D});
    attention_backward(cfg, in, device_view(out.get(), DType::bf16, {B, 0, H, D}),
                       view(lse.get(), {B, H, 0}, Device::cuda),
                       device_view(grad_out.get(), DType::bf16, {B, 0, H, D}), g);
    for (const DeviceBuffer<float>* x : {&gk, &gv})
      for (float e : x->to_host()) ASSERT_EQ(e, add ? 0.5f : 0.0f);
  }
}

}  // namespace
}  // namespace posenc::test
