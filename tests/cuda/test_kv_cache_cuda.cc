// tests/cuda/test_kv_cache_cuda.cc: KVCache on a CUDA device against the CPU cache of the same dtype on the
// same 16-bit inputs: a prefill chunk then token-by-token decoding, with RoPE and a bias, growth past the
// first capacity, grouped heads; outputs within the GPU attention's bound (u max|v| + u |out| + 1e-5 (1 +
// |out|), P rounded to the storage type for P V) and the stored keys (rotated on the device) against the CPU
// cache's within one rounding; a context shift (shift_positions, erase_front) and LongRoPE's re-rotation
// against the CPU cache doing the same. The refusals run without a GPU.
#include <algorithm>
#include <cmath>
#include <string>

#include "device_buffer.h"
#include "half_storage.h"
#include "posenc/error.h"
#include "posenc/kv_cache.h"
#include "tests/kv_cache_cases.h"

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

// The stored keys, values (B, size, Hkv, D) and positions (B, size) of a CUDA cache, read back.
struct CacheContents {
  std::vector<uint16_t> keys, values;
  std::vector<int64_t> positions;
};
template <typename T>
std::vector<T> logical(const ConstTensorView& v, bool on_device) {
  int64_t extent = 1;  // elements up to the last one the view reaches
  for (int d = 0; d < v.rank; ++d) {
    if (v.shape[d] == 0) return {};
    extent += (v.shape[d] - 1) * v.strides[d];
  }
  std::vector<T> copy(on_device ? static_cast<size_t>(extent) : 0);
  if (on_device)
    cuda_ok(cudaMemcpy(copy.data(), v.data, copy.size() * sizeof(T), cudaMemcpyDeviceToHost), "copy out");
  const T* base = on_device ? copy.data() : static_cast<const T*>(v.data);
  std::vector<T> out;
  const int64_t n2 = v.rank > 2 ? v.shape[2] : 1, n3 = v.rank > 3 ? v.shape[3] : 1;
  const int64_t s2 = v.rank > 2 ? v.strides[2] : 0, s3 = v.rank > 3 ? v.strides[3] : 0;
  for (int64_t i = 0; i < v.shape[0]; ++i)
    for (int64_t j = 0; j < v.shape[1]; ++j)
      for (int64_t h = 0; h < n2; ++h)
        for (int64_t d = 0; d < n3; ++d)
          out.push_back(base[i * v.strides[0] + j * v.strides[1] + h * s2 + d * s3]);
  return out;
}
CacheContents contents(const KVCache& c) {
  const bool dev = c.device() == Device::cuda;
  return {logical<uint16_t>(c.keys(), dev), logical<uint16_t>(c.values(), dev),
          logical<int64_t>(c.positions(), dev)};
}

// Keys within `roundings` roundings of the CPU cache's, values and positions exact. Each rotation rounds the
// pair it rotates once (cos / sin may differ from the CPU's in the last bit, so a key may differ by an ulp
// after any rotation), and the next rotation mixes that difference into the pair's other element: the bound
// is relative to the pair's norm, which rotations keep, not to the element.
void expect_same_contents(const KVCache& gpu, const KVCache& cpu, int64_t D, RopeLayout layout, int roundings,
                          const char* after) {
  ASSERT_EQ(gpu.size(), cpu.size()) << after;
  const CacheContents g = contents(gpu), c = contents(cpu);
  EXPECT_EQ(g.positions, c.positions) << after;
  EXPECT_EQ(g.values, c.values) << after;
  ASSERT_EQ(g.keys.size(), c.keys.size()) << after;
  for (size_t i = 0; i < g.keys.size(); ++i) {
    const int64_t d = static_cast<int64_t>(i) % D;
    const int64_t partner = layout == RopeLayout::interleaved ? d ^ 1 : d < D / 2 ? d + D / 2 : d - D / 2;
    const double want = kBf16.value(c.keys[i]), got = kBf16.value(g.keys[i]);
    const double pair = std::hypot(want, kBf16.value(c.keys[i - d + partner]));
    ASSERT_LE(std::fabs(got - want), 2 * roundings * kBf16.unit_roundoff * pair + 1e-6)
        << after << ": key element " << i;
  }
}

TEST(KVCacheCuda, ContextShiftAndRerotationAsTheCpuCache) {
  POSENC_SKIP_WITHOUT_GPU();
  const int64_t B = 2, Hkv = 2, D = 64, T = 37;
  for (const RopeLayout layout : {RopeLayout::half, RopeLayout::interleaved}) {
    RopeConfig rc = yarn_config(D);  // an attention factor != 1: a shift must not apply it again
    rc.layout = layout;
    const Rope rope(rc);
    KVCache cpu(B, Hkv, D, &rope, DType::bf16);
    KVCache gpu(B, Hkv, D, &rope, DType::bf16, Device::cuda);
    uint32_t seed = 7;
    const auto append = [&](int64_t n) {
      std::vector<uint16_t> k, v;
      rounded_random(kBf16, B * n * Hkv * D, seed++, k), rounded_random(kBf16, B * n * Hkv * D, seed++, v);
      cpu.append(view16(k, DType::bf16, {B, n, Hkv, D}), view16(v, DType::bf16, {B, n, Hkv, D}));
      DeviceBuffer<uint16_t> dk(k), dv(v);
      gpu.append(device16(dk, DType::bf16, {B, n, Hkv, D}), device16(dv, DType::bf16, {B, n, Hkv, D}));
    };
    append(T);
    for (KVCache* c : {&cpu, &gpu}) c->shift_positions(1000);
    expect_same_contents(gpu, cpu, D, layout, 2, "shift_positions(1000)");
    for (KVCache* c : {&cpu, &gpu}) c->erase_front(10), c->shift_positions(-1010);
    expect_same_contents(gpu, cpu, D, layout, 3, "erase_front(10), shift_positions(-1010)");
    append(5);  // positions continue after the shifted ones
    expect_same_contents(gpu, cpu, D, layout, 3, "append after the shift");
    // A shift past 2^53 is refused before anything changes.
    const CacheContents before = contents(gpu);
    EXPECT_THROW(gpu.shift_positions(int64_t{1} << 53), Error);
    const CacheContents after = contents(gpu);
    EXPECT_EQ(after.keys, before.keys);
    EXPECT_EQ(after.positions, before.positions);
    for (KVCache* c : {&cpu, &gpu}) c->erase_front(c->size());
    EXPECT_EQ(gpu.size(), 0);
  }
  // LongRoPE: keys appended at positions 0 .. 19 (the short factors: the largest position, read back, is
  // below the original 32), re-rotated to the long ones, then a step past 32 (the long factors) attended.
  const int64_t original = 32, n = 20, H = 4;
  const Rope longrope(longrope_config(D, original));
  KVCache cpu(B, Hkv, D, &longrope, DType::bf16);
  KVCache gpu(B, Hkv, D, &longrope, DType::bf16, Device::cuda);
  std::vector<uint16_t> k, v, q;
  rounded_random(kBf16, B * n * Hkv * D, 3, k), rounded_random(kBf16, B * n * Hkv * D, 4, v);
  rounded_random(kBf16, B * H * D, 5, q);
  cpu.append(view16(k, DType::bf16, {B, n, Hkv, D}), view16(v, DType::bf16, {B, n, Hkv, D}));
  DeviceBuffer<uint16_t> dk(k), dv(v), dq(q), dout(B * H * D);
  gpu.append(device16(dk, DType::bf16, {B, n, Hkv, D}), device16(dv, DType::bf16, {B, n, Hkv, D}));
  expect_same_contents(gpu, cpu, D, RopeLayout::half, 1, "append with the short factors");
  for (KVCache* c : {&cpu, &gpu}) c->rerotate(n, original + 1);
  expect_same_contents(gpu, cpu, D, RopeLayout::half, 2, "rerotate(20, 33)");
  const std::vector<int64_t> step = {40};
  DeviceBuffer<int64_t> dstep(step);
  std::vector<float> out_cpu(B * H * D);
  cpu.attend({}, view16(q, DType::bf16, {B, 1, H, D}), view(out_cpu.data(), {B, 1, H, D}),
             view(step.data(), {1}));
  gpu.attend({}, device16(dq, DType::bf16, {B, 1, H, D}), device16(dout, DType::bf16, {B, 1, H, D}),
             view(dstep.get(), {1}, Device::cuda));
  const std::vector<uint16_t> out = dout.to_host();
  for (size_t i = 0; i < out.size(); ++i) {
    const double want = out_cpu[i], got = kBf16.value(out[i]);
    ASSERT_LE(std::fabs(got - want),
              kBf16.unit_roundoff * (1 + std::fabs(want)) + 2e-5 * (1 + std::fabs(want)))
        << "element " << i;
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
  refused([&] { c.shift_positions(int64_t{1} << 60); }, "delta");
  refused([&] { c.erase_front(1); }, "n = 1");
  refused([&] { c.rerotate(1, 2); }, "rerotate needs a cache with a rope");
  std::vector<float> k(4 * 2 * 64);
  refused([&] { c.append(view(k.data(), {1, 4, 2, 64}), view(k.data(), {1, 4, 2, 64})); }, "dtype");
}

}  // namespace
}  // namespace posenc::test
