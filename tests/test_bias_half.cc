// tests/test_bias_half.cc: bias blocks (T5, clipped relative, ALiBi) into bf16 / fp16 storage. The
// values are computed in fp32 and rounded once, so a 16-bit block is exactly the fp32 block rounded
// to nearest even; the backward of a 16-bit grad_out is, bit for bit, the fp32 backward of its
// widened values (the table's gradient stays fp32). Positions as a run and scattered (the lookup
// and the direct paths), every SIMD target. The fp32 blocks are tested in test_bias.cc.
#include "half_storage.h"
#include "posenc/bias.h"
#include "posenc/error.h"
#include "test_util.h"

namespace posenc::test {
namespace {

void check_blocks(const Storage& s, const std::vector<int64_t>& q, const std::vector<int64_t>& k) {
  const int64_t H = 3, nq = static_cast<int64_t>(q.size()), nk = static_cast<int64_t>(k.size());
  const size_t n = static_cast<size_t>(H * nq * nk);
  const ConstTensorView qv = view(q.data(), {nq}), kv = view(k.data(), {nk});
  for (const RelativeBiasConfig& cfg :
       {RelativeBiasConfig::t5(H, 32, 128, true), RelativeBiasConfig::clipped(H, 5)}) {
    const std::vector<float> table = random_floats(static_cast<size_t>(cfg.num_rows() * H), 21);
    std::vector<float> out32(n);
    std::vector<uint16_t> out16(n);
    relative_bias(cfg, view(table.data(), {cfg.num_rows(), H}), qv, kv, view(out32.data(), {H, nq, nk}));
    relative_bias(cfg, view(table.data(), {cfg.num_rows(), H}), qv, kv, view16(out16, s.dtype, {H, nq, nk}));
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out16[i], s.round(out32[i])) << i;
    std::vector<uint16_t> grad16(n);
    std::vector<float> wide(n);
    for (size_t i = 0; i < n; ++i) grad16[i] = s.round(out32[i] * 0.5f + 0.1f), wide[i] = s.value(grad16[i]);
    std::vector<float> g32(table.size(), 0.0f), g16(table.size(), 0.0f);
    relative_bias_backward(cfg, view(wide.data(), {H, nq, nk}), qv, kv,
                           view(g32.data(), {cfg.num_rows(), H}));
    relative_bias_backward(cfg, view16(grad16, s.dtype, {H, nq, nk}), qv, kv,
                           view(g16.data(), {cfg.num_rows(), H}));
    EXPECT_EQ(g16, g32);
  }
  for (bool symmetric : {false, true}) {
    AlibiConfig cfg;
    cfg.heads = H;
    cfg.symmetric = symmetric;
    std::vector<float> out32(n);
    std::vector<uint16_t> out16(n);
    alibi_bias(cfg, qv, kv, view(out32.data(), {H, nq, nk}));
    alibi_bias(cfg, qv, kv, view16(out16, s.dtype, {H, nq, nk}));
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out16[i], s.round(out32[i])) << i;
  }
}

TEST(BiasHalf, BlocksRoundOnceAndTheBackwardWidens) {
  std::vector<int64_t> run(37), scattered(23);
  for (int64_t i = 0; i < 37; ++i) run[i] = 100 + i;
  for (int64_t i = 0; i < 23; ++i) scattered[i] = (i * 7919) % 3000 - 1500;
  for_each_cpu_target([&](const std::string& target) {
    for (const Storage* s : {&kBf16, &kF16}) {
      SCOPED_TRACE(target + " " + s->name);
      check_blocks(*s, run, run);
      check_blocks(*s, scattered, run);
      check_blocks(*s, {int64_t{1} << 40}, scattered);  // distances beyond the lookup's range
    }
  });
}

TEST(BiasHalf, SixteenBitBlocksNeedAUnitStride) {
  AlibiConfig cfg;
  cfg.heads = 1;
  std::vector<int64_t> q = {0, 1}, k = {0, 1};
  std::vector<uint16_t> out(8);
  TensorView strided = strided_view(reinterpret_cast<float*>(out.data()), {1, 2, 2}, {8, 4, 2});
  strided.dtype = DType::bf16;
  expect_error([&] { alibi_bias(cfg, view(q.data(), {2}), view(k.data(), {2}), strided); }, "unit stride");
}

}  // namespace
}  // namespace posenc::test
