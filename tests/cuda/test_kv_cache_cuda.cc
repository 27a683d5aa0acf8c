// tests/cuda/test_kv_cache_cuda.cc: KVCache on a CUDA device against the CPU cache of the same dtype on the
// same 16-bit inputs: a prefill chunk then token-by-token decoding, with RoPE and a bias, growth past the
// first capacity, grouped heads; outputs within the GPU attention's bound (u max|v| + u |out| + 1e-5 (1 +
// |out|), P rounded to the storage type for P V) and the stored keys (rotated on the device) against the CPU
// cache's within one rounding. The refusals run without a GPU.
#include <algorithm>
#include <cmath>
#include <string>

#include "device_buffer.h"
#include "half_storage.h"
#include "posenc/error.h"
#include "posenc/kv_cache.h"

namespace posenc::test {
namespace {

TensorView device16(DeviceBuffer<uint16_t>& b, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView v = view(reinterpret_cast<float*>(b.get()), shape, Device::cuda);
  v.dtype = dtype;
  return v;
}

TEST(KVCacheCuda, DecodingMatchesTheCpuCache) {
  POSENC_SKIP_WITHOUT_GPU();
  const int64_t B = 2, H = 8, Hkv = 2, D = 64, prefill = 37, steps = 40;
  RopeConfig rc;
  rc.head_dim = D;
  rc.base = 500;
  const Rope rope(rc);
  AttentionConfig cfg;
  cfg.causal = true;
  cfg.rope = &rope;
  cfg.bias.kind = AttentionBias::Kind::alibi;
  cfg.bias.alibi.heads = H;
  KVCache cpu(B, Hkv, D, &rope, DType::bf16);
  KVCache gpu(B, Hkv, D, &rope, DType::bf16, Device::cuda);
  uint32_t seed = 1;
  for (int64_t step = 0; step <= steps; ++step) {
    const int64_t T = step == 0 ? prefill : 1;
    std::vector<uint16_t> k, v, q;
    rounded_random(kBf16, B * T * Hkv * D, seed++, k), rounded_random(kBf16, B * T * Hkv * D, seed++, v);
    rounded_random(kBf16, B * T * H * D, seed++, q);
    cpu.append(view16(k, DType::bf16, {B, T, Hkv, D}), view16(v, DType::bf16, {B, T, Hkv, D}));
    DeviceBuffer<uint16_t> dk(k), dv(v), dq(q), dout(B * T * H * D);
    gpu.append(device16(dk, DType::bf16, {B, T, Hkv, D}), device16(dv, DType::bf16, {B, T, Hkv, D}));
    std::vector<float> out_cpu(B * T * H * D);
    cpu.attend(cfg, view16(q, DType::bf16, {B, T, H, D}), view(out_cpu.data(), {B, T, H, D}));
    dout.poison();
    gpu.attend(cfg, device16(dq, DType::bf16, {B, T, H, D}), device16(dout, DType::bf16, {B, T, H, D}));
    const std::vector<uint16_t> out = dout.to_host();
    for (size_t i = 0; i < out.size(); ++i) {
      const double want = out_cpu[i], got = kBf16.value(out[i]);
      // |v| <= 1 (random_floats); both caches rotate q and k alike (rounded once to bf16); the CPU's fp32
      // output is within 1e-5 of the exact one on those values.
      const double bound = kBf16.unit_roundoff * (1 + std::fabs(want)) + 2e-5 * (1 + std::fabs(want));
      ASSERT_LE(std::fabs(got - want), bound) << "step " << step << " element " << i;
    }
  }
  EXPECT_EQ(gpu.size(), cpu.size());
  // The stored keys: rotated on the device as the CPU cache rotates them, each rounded once.
  const ConstTensorView keys = gpu.keys();
  EXPECT_EQ(keys.device, Device::cuda);
  std::vector<uint16_t> stored(static_cast<size_t>(B * Hkv * keys.strides[2]), 0);
  ASSERT_EQ(cudaMemcpy(stored.data(), keys.data, stored.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  const ConstTensorView cpu_keys = cpu.keys();
  const uint16_t* ck = static_cast<const uint16_t*>(cpu_keys.data);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < gpu.size(); ++t)
      for (int64_t h = 0; h < Hkv; ++h)
        for (int64_t d = 0; d < D; ++d) {
          const float g =
              kBf16.value(stored[b * keys.strides[0] + t * keys.strides[1] + h * keys.strides[2] + d]);
          const float c = kBf16.value(
              ck[b * cpu_keys.strides[0] + t * cpu_keys.strides[1] + h * cpu_keys.strides[2] + d]);
          ASSERT_LE(std::fabs(g - c), 2 * kBf16.unit_roundoff * std::fabs(c) + 1e-6)
              << "key " << b << " " << t;
        }
}

TEST(KVCacheCuda, RefusalsNameWhatIsMissing) {
  const auto refused = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "accepted; expected an error with: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused([] { KVCache c(1, 2, 64, nullptr, DType::f32, Device::cuda); }, "f32");
  refused([] { KVCache c(1, 2, 12, nullptr, DType::bf16, Device::cuda); }, "head_dim");
  KVCache c(1, 2, 64, nullptr, DType::bf16, Device::cuda);
  refused([&] { c.shift_positions(3); }, "shift_positions");
  refused([&] { c.erase_front(1); }, "erase_front");
  std::vector<float> k(4 * 2 * 64);
  refused([&] { c.append(view(k.data(), {1, 4, 2, 64}), view(k.data(), {1, 4, 2, 64})); }, "dtype");
}

}  // namespace
}  // namespace posenc::test
