// tests/cuda/test_rope_cuda.cc: RoPE on CUDA tensors against the same functions run on the host
// (tests/cuda/rope_emulation.h: bit for bit, since both round every operation as written), the CPU
// backend and the double reference, over the RoPE case grid in fp32, bf16 and fp16: forward_qk in place,
// forward and backward out of place into poisoned outputs (every element written; the dims past
// rotary_dim copied bit for bit), strided q / k slices of a fused qkv buffer, misaligned rows (the scalar
// path), positions near 2^31 and past 2^53 (NaN rows), cos_sin, and the errors of the device path.
// Skipped without a GPU.
#include <cstring>

#include "device_buffer.h"
#include "posenc/device.h"
#include "posenc/error.h"
#include "posenc/rope.h"
#include "reference/rope.h"
#include "rope_cases.h"
#include "rope_emulation.h"
#include "src/half.h"
#include "test_util.h"

namespace posenc::test {
namespace {

// Values of `dtype` as stored: fp32 in uint32 bits, 16-bit storage in uint16 bits.
template <typename Bits>
std::vector<Bits> random_stored(DType dtype, size_t n, uint32_t seed) {
  const std::vector<float> x = random_floats(n, seed);
  std::vector<Bits> out(n);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (sizeof(Bits) == 4)
      std::memcpy(&out[i], &x[i], 4);
    else
      out[i] = dtype == DType::bf16 ? detail::f32_to_bf16(x[i]) : detail::f32_to_f16(x[i]);
  }
  return out;
}

template <typename Bits>
TensorView device_view(const DeviceBuffer<Bits>& buf, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView v = view(reinterpret_cast<float*>(buf.get()), shape, Device::cuda);
  v.dtype = dtype;
  return v;
}

// The host emulation over the stored bits (fp32 bits reinterpreted as floats).
template <typename Bits>
std::vector<Bits> emulate(const RopeFrequencies& f, const RopeConfig& cfg, DType dtype,
                          const std::vector<Bits>& x, const std::vector<int64_t>& pos, int64_t B, int64_t T,
                          int64_t H, bool inverse) {
  if constexpr (sizeof(Bits) == 4) {
    std::vector<float> xf(x.size());
    std::memcpy(xf.data(), x.data(), 4 * x.size());
    const std::vector<float> y =
        emulate_cuda_rope(f, cfg.layout, cfg.head_dim, dtype, xf, pos, B, T, H, inverse);
    std::vector<Bits> out(y.size());
    std::memcpy(out.data(), y.data(), 4 * y.size());
    return out;
  } else {
    return emulate_cuda_rope(f, cfg.layout, cfg.head_dim, dtype, x, pos, B, T, H, inverse);
  }
}

template <typename Bits>
void check_case(const RopeCase& rc, DType dtype) {
  const RopeConfig& cfg = rc.config;
  const Rope rope(cfg);
  const std::vector<int64_t> pos = case_positions(rc);
  int64_t max_pos = 0;
  for (int64_t p : pos) max_pos = std::max(max_pos, p);
  const RopeCall call{max_pos + 1};  // the CPU's default length, given (the device path reads no positions)
  const RopeFrequencies f = rope.frequencies(max_pos + 1);
  const int64_t B = rc.batch, T = rc.tokens, H = rc.heads, KV = rc.kv_heads, D = cfg.head_dim;
  const int64_t S = cfg.num_position_streams();
  DeviceBuffer<int64_t> dpos(pos);
  const ConstTensorView pv =
      S > 1 ? view(dpos.get(), {S, B, T}, Device::cuda) : view(dpos.get(), {B, T}, Device::cuda);
  const std::vector<Bits> q = random_stored<Bits>(dtype, B * T * H * D, 1),
                          k = random_stored<Bits>(dtype, B * T * KV * D, 2);
  // forward_qk in place
  DeviceBuffer<Bits> dq(q), dk(k);
  rope.forward_qk(device_view(dq, dtype, {B, T, H, D}), device_view(dk, dtype, {B, T, KV, D}), pv, call);
  const bool fwd = cfg.reversed;  // the rotation forward applies
  EXPECT_EQ(dq.to_host(), emulate(f, cfg, dtype, q, pos, B, T, H, fwd)) << "q, forward_qk";
  EXPECT_EQ(dk.to_host(), emulate(f, cfg, dtype, k, pos, B, T, KV, fwd)) << "k, forward_qk";
  // forward and backward out of place, into poisoned outputs
  for (bool backward : {false, true}) {
    DeviceBuffer<Bits> din(q), dout(q.size());
    dout.poison();
    const TensorView in = device_view(din, dtype, {B, T, H, D}), out = device_view(dout, dtype, {B, T, H, D});
    if (backward)
      rope.backward(in, out, pv, call);
    else
      rope.forward(in, out, pv, call);
    EXPECT_EQ(dout.to_host(), emulate(f, cfg, dtype, q, pos, B, T, H, backward != cfg.reversed))
        << (backward ? "backward" : "forward") << " out of place";
    EXPECT_EQ(din.to_host(), q) << "the input of an out-of-place call is not written";
  }
}

TEST(RopeCuda, MatchesTheHostEmulationBitForBitOnTheCaseGrid) {
  POSENC_SKIP_WITHOUT_GPU();
  for (const RopeCase& rc : rope_cases()) {
    SCOPED_TRACE(rc.name);
    check_case<uint32_t>(rc, DType::f32);
    check_case<uint16_t>(rc, DType::bf16);
    check_case<uint16_t>(rc, DType::f16);
  }
}

// The emulation itself is checked against the reference and the CPU backend (test_cuda_elements.cc);
// here the device's fp32 output is compared with the CPU backend directly on a Llama shape.
TEST(RopeCuda, AgreesWithTheCpuBackend) {
  POSENC_SKIP_WITHOUT_GPU();
  RopeConfig cfg;
  cfg.head_dim = 128;
  cfg.base = 500000;
  const Rope rope(cfg);
  const int64_t B = 2, T = 33, H = 5, D = 128;
  std::vector<int64_t> pos(B * T);
  for (int64_t i = 0; i < B * T; ++i) pos[i] = (int64_t{1} << 31) - 40 + i;  // near 2^31
  const std::vector<float> x = random_floats(B * T * H * D, 5);
  std::vector<float> cpu = x;
  rope.forward(view(cpu.data(), {B, T, H, D}), view(pos.data(), {B, T}));
  DeviceBuffer<float> dx(x);
  DeviceBuffer<int64_t> dpos(pos);
  rope.forward(view(dx.get(), {B, T, H, D}, Device::cuda), view(dpos.get(), {B, T}, Device::cuda));
  EXPECT_TRUE(all_close(dx.to_host(), cpu, {16 * std::ldexp(1.0, -24), 0}));
}

// q and k as slices of one fused (B, T, H + 2 KV, D) qkv buffer, and rows one element off 16-byte alignment.
TEST(RopeCuda, StridedAndMisalignedViews) {
  POSENC_SKIP_WITHOUT_GPU();
  RopeConfig cfg;
  cfg.head_dim = 64;
  const Rope rope(cfg);
  const int64_t B = 2, T = 7, H = 4, KV = 2, D = 64, W = (H + 2 * KV) * D;
  std::vector<int64_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = 3 * t + 1;
  const RopeFrequencies f = rope.frequencies(0);
  const std::vector<uint16_t> qkv = random_stored<uint16_t>(DType::bf16, B * T * W + 1, 9);
  for (int64_t misalign : {0, 1}) {
    SCOPED_TRACE(misalign ? "misaligned" : "aligned");
    DeviceBuffer<uint16_t> d(qkv);
    uint16_t* base = d.get() + misalign;
    TensorView q = strided_view(reinterpret_cast<float*>(base), {B, T, H, D}, {T * W, W, D, 1}, Device::cuda);
    TensorView k =
        strided_view(reinterpret_cast<float*>(base + H * D), {B, T, KV, D}, {T * W, W, D, 1}, Device::cuda);
    q.dtype = k.dtype = DType::bf16;
    DeviceBuffer<int64_t> dpos(pos);
    rope.forward_qk(q, k, view(dpos.get(), {T}, Device::cuda));
    const std::vector<uint16_t> got = d.to_host();
    // The expectation: the contiguous emulation of each slice, placed back; v untouched.
    std::vector<int64_t> pos_bt(B * T);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) pos_bt[b * T + t] = pos[t];
    std::vector<uint16_t> want = qkv;
    for (auto [first, heads] : {std::pair<int64_t, int64_t>{0, H}, {H, KV}}) {
      std::vector<uint16_t> slice;
      for (int64_t r = 0; r < B * T; ++r)
        for (int64_t e = 0; e < heads * D; ++e) slice.push_back(qkv[misalign + r * W + first * D + e]);
      const std::vector<uint16_t> rot =
          emulate_cuda_rope(f, cfg.layout, D, DType::bf16, slice, pos_bt, B, T, heads, false);
      for (int64_t r = 0; r < B * T; ++r)
        for (int64_t e = 0; e < heads * D; ++e)
          want[misalign + r * W + first * D + e] = rot[r * heads * D + e];
    }
    EXPECT_EQ(got, want);
  }
}

TEST(RopeCuda, PositionsPastTwoToThe53GiveNanRows) {
  POSENC_SKIP_WITHOUT_GPU();
  RopeConfig cfg;
  cfg.head_dim = 8;
  const Rope rope(cfg);
  const std::vector<int64_t> pos = {5, (int64_t{1} << 53) + 1, 7};
  const std::vector<float> x = random_floats(3 * 8, 3);
  DeviceBuffer<float> dx(x);
  DeviceBuffer<int64_t> dpos(pos);
  rope.forward(view(dx.get(), {1, 3, 1, 8}, Device::cuda), view(dpos.get(), {3}, Device::cuda));
  const std::vector<float> got = dx.to_host();
  for (int e = 0; e < 8; ++e) {
    EXPECT_FALSE(std::isnan(got[e]));
    EXPECT_TRUE(std::isnan(got[8 + e])) << e;
    EXPECT_FALSE(std::isnan(got[16 + e]));
  }
}

TEST(RopeCuda, CosSinTable) {
  POSENC_SKIP_WITHOUT_GPU();
  for (const RopeCase& rc : rope_cases()) {
    SCOPED_TRACE(rc.name);
    const RopeConfig& cfg = rc.config;
    const Rope rope(cfg);
    const int64_t S = cfg.num_position_streams(), N = 37, P = cfg.effective_rotary_dim() / 2;
    std::vector<int64_t> pos(S * N);
    for (int64_t i = 0; i < S * N; ++i) pos[i] = (i * 7919) % 100003 + (i % 3 == 0 ? (int64_t{1} << 31) : 0);
    const RopeCall call{int64_t{1} << 32};
    const RopeFrequencies f = rope.frequencies(*call.seq_len);
    DeviceBuffer<int64_t> dpos(pos);
    DeviceBuffer<float> dcos(N * P), dsin(N * P);
    dcos.poison();
    dsin.poison();
    const ConstTensorView pv =
        S > 1 ? view(dpos.get(), {S, N}, Device::cuda) : view(dpos.get(), {N}, Device::cuda);
    rope.cos_sin(pv, view(dcos.get(), {N, P}, Device::cuda), view(dsin.get(), {N, P}, Device::cuda), call);
    std::vector<float> want_c(N * P), want_s(N * P);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < P; ++j)
        cuda::pair_cos_sin(pos[f.stream[j] * N + n], 0, f.inv_freq[j], static_cast<float>(f.attention_factor),
                           cfg.reversed, &want_c[n * P + j], &want_s[n * P + j]);
    EXPECT_EQ(dcos.to_host(), want_c);
    EXPECT_EQ(dsin.to_host(), want_s);
  }
}

TEST(RopeCuda, ErrorsOfTheDevicePathWriteNothing) {
  POSENC_SKIP_WITHOUT_GPU();
  RopeConfig cfg;
  cfg.head_dim = 8;
  const Rope rope(cfg);
  const std::vector<float> x = random_floats(2 * 8, 4);
  const std::vector<int64_t> pos = {0, 1};
  DeviceBuffer<float> dx(x);
  DeviceBuffer<int64_t> dpos(pos);
  const TensorView xv = view(dx.get(), {1, 2, 1, 8}, Device::cuda);
  std::vector<int64_t> host_pos = pos;
  expect_error([&] { rope.forward(xv, view(host_pos.data(), {2})); },
               "positions is on device cpu, expected cuda");
  std::vector<float> host_x = x;
  expect_error(
      [&] {
        rope.forward(view(host_x.data(), {1, 2, 1, 8}, Device::cuda), view(dpos.get(), {2}, Device::cuda));
      },
      "not CUDA device memory");
  std::vector<float> host_out(x.size());
  expect_error(
      [&] {
        rope.forward(xv, view(host_out.data(), {1, 2, 1, 8}), view(dpos.get(), {2}, Device::cuda));
      },
      "out is on device cpu, expected cuda");
  RopeConfig dyn = cfg;
  dyn.max_position_embeddings = 4;
  dyn.scaling.type = RopeScalingType::dynamic;
  dyn.scaling.factor = 2;
  expect_error([&] { Rope(dyn).forward(xv, view(dpos.get(), {2}, Device::cuda)); },
               "needs the sequence length");
  RopeConfig wide;
  wide.head_dim = 1024;
  DeviceBuffer<float> dw(1024);
  expect_error(
      [&] {
        Rope(wide).forward(view(dw.get(), {1, 1, 1, 1024}, Device::cuda),
                           view(dpos.get(), {1}, Device::cuda));
      },
      "larger than the CUDA backend takes");
  EXPECT_EQ(dx.to_host(), x);
}

}  // namespace
}  // namespace posenc::test
