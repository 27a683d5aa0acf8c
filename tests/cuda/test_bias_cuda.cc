// tests/cuda/test_bias_cuda.cc: ALiBi, T5 and clipped bias blocks on CUDA tensors against the CPU backend
// (bit for bit: the same double math for ALiBi, the same table entries, one rounding to 16-bit storage),
// into poisoned outputs, contiguous and with padded rows; the table gradient against the CPU's (fp32 sums
// against its double ones) and bit for bit against itself on a second run (deterministic). Query and key
// positions offset and shuffled (not only 0..n-1). Skipped without a GPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "device_buffer.h"
#include "posenc/bias.h"
#include "posenc/error.h"
#include "src/half.h"
#include "test_util.h"

namespace posenc::test {
namespace {

std::vector<int64_t> shuffled_positions(int64_t n, int64_t first, uint32_t seed) {
  std::vector<int64_t> p(n);
  for (int64_t i = 0; i < n; ++i) p[i] = first + i;
  std::shuffle(p.begin(), p.end(), std::mt19937(seed));
  return p;
}

// out (H, Q, K) of `dtype` by `fill` on the CPU and on the device (padded rows when pad > 0); equal bits.
template <typename Fill>
void expect_same_block(DType dtype, int64_t H, int64_t Q, int64_t K, int64_t pad, Fill fill) {
  const size_t elem = dtype == DType::f32 ? 4 : 2;
  const int64_t row = K + pad;
  const std::vector<int64_t> qp = shuffled_positions(Q, 3, 1), kp = shuffled_positions(K, 0, 2);
  std::vector<uint8_t> cpu(H * Q * row * elem, 0xff);
  TensorView cv = strided_view(reinterpret_cast<float*>(cpu.data()), {H, Q, K}, {Q * row, row, 1});
  cv.dtype = dtype;
  fill(view(qp.data(), {Q}), view(kp.data(), {K}), cv);
  DeviceBuffer<uint8_t> dout(cpu.size());
  dout.poison();
  DeviceBuffer<int64_t> dq(qp), dk(kp);
  TensorView gv =
      strided_view(reinterpret_cast<float*>(dout.get()), {H, Q, K}, {Q * row, row, 1}, Device::cuda);
  gv.dtype = dtype;
  fill(view(dq.get(), {Q}, Device::cuda), view(dk.get(), {K}, Device::cuda), gv);
  EXPECT_EQ(dout.to_host(), cpu);
}

TEST(BiasCuda, BlocksEqualTheCpuBackend) {
  POSENC_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (int64_t pad : {0, 3}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (pad ? " padded" : ""));
      for (bool symmetric : {false, true}) {
        AlibiConfig a{.heads = 12, .symmetric = symmetric};
        expect_same_block(dtype, 12, 37, 200, pad,
                          [&](auto q, auto k, auto out) { alibi_bias(a, q, k, out); });
      }
      for (const RelativeBiasConfig& c :
           {RelativeBiasConfig::t5(4), RelativeBiasConfig::t5(4, 32, 128, false),
            RelativeBiasConfig::clipped(4, 16)}) {
        const std::vector<float> table_host = random_floats(c.num_rows() * 4, 7);
        DeviceBuffer<float> table(table_host);
        expect_same_block(dtype, 4, 37, 300, pad, [&](auto q, auto k, auto out) {
          const bool gpu = out.device == Device::cuda;
          relative_bias(c, view(gpu ? table.get() : table_host.data(), {c.num_rows(), 4}, out.device), q, k,
                        out);
        });
      }
    }
}

TEST(BiasCuda, TableGradientMatchesTheCpuAndIsDeterministic) {
  POSENC_SKIP_WITHOUT_GPU();
  const int64_t H = 3, Q = 77, K = 129;
  for (const RelativeBiasConfig& base : {RelativeBiasConfig::t5(H), RelativeBiasConfig::clipped(H, 40)})
    for (DType dtype : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(dtype_name(dtype));
      const RelativeBiasConfig& c = base;
      const std::vector<int64_t> qp = shuffled_positions(Q, 5, 3), kp = shuffled_positions(K, 0, 4);
      std::vector<float> g = random_floats(H * Q * K, 9);
      std::vector<uint16_t> g16(g.size());
      if (dtype != DType::f32)
        for (size_t i = 0; i < g.size(); ++i)
          g16[i] = detail::f32_to_bf16(g[i]), g[i] = detail::bf16_to_f32(g16[i]);
      const std::vector<float> start = random_floats(c.num_rows() * H, 10);
      std::vector<float> cpu = start;
      TensorView gv = dtype == DType::f32 ? view(g.data(), {H, Q, K})
                                          : view(reinterpret_cast<float*>(g16.data()), {H, Q, K});
      gv.dtype = dtype;
      relative_bias_backward(c, gv, view(qp.data(), {Q}), view(kp.data(), {K}),
                             view(cpu.data(), {c.num_rows(), H}));
      DeviceBuffer<float> dg32(g);
      DeviceBuffer<uint16_t> dg16(g16);
      DeviceBuffer<int64_t> dq(qp), dk(kp);
      std::vector<std::vector<float>> runs;
      for (int run = 0; run < 2; ++run) {
        DeviceBuffer<float> table(start);
        TensorView dv = dtype == DType::f32
                            ? view(dg32.get(), {H, Q, K}, Device::cuda)
                            : view(reinterpret_cast<float*>(dg16.get()), {H, Q, K}, Device::cuda);
        dv.dtype = dtype;
        relative_bias_backward(c, dv, view(dq.get(), {Q}, Device::cuda), view(dk.get(), {K}, Device::cuda),
                               view(table.get(), {c.num_rows(), H}, Device::cuda));
        runs.push_back(table.to_host());
      }
      EXPECT_EQ(runs[0], runs[1]) << "not deterministic";
      EXPECT_TRUE(all_close(runs[0], cpu, kF32Reduction));
    }
}

// A position past 2^53 (refused on the CPU, not readable by the host here): NaN in the pairs it takes part
// in, and a NaN table gradient, never a wrapped distance.
TEST(BiasCuda, PositionsOutOfRangeGiveNan) {
  POSENC_SKIP_WITHOUT_GPU();
  const RelativeBiasConfig c = RelativeBiasConfig::t5(2);
  const std::vector<int64_t> qp = {0, (int64_t{1} << 53) + 2, 2}, kp = {0, 1, 2, 3};
  DeviceBuffer<int64_t> dq(qp), dk(kp);
  DeviceBuffer<float> table(random_floats(c.num_rows() * 2, 1)), out(2 * 3 * 4);
  relative_bias(c, view(table.get(), {c.num_rows(), 2}, Device::cuda), view(dq.get(), {3}, Device::cuda),
                view(dk.get(), {4}, Device::cuda), view(out.get(), {2, 3, 4}, Device::cuda));
  const std::vector<float> b = out.to_host();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(std::isnan(b[(h * 3 + i) * 4 + j]), i == 1) << h << i << j;
  DeviceBuffer<float> grad(random_floats(2 * 3 * 4, 2)),
      grad_table(std::vector<float>(c.num_rows() * 2, 0.0f));
  relative_bias_backward(c, view(grad.get(), {2, 3, 4}, Device::cuda), view(dq.get(), {3}, Device::cuda),
                         view(dk.get(), {4}, Device::cuda),
                         view(grad_table.get(), {c.num_rows(), 2}, Device::cuda));
  for (float g : grad_table.to_host()) EXPECT_TRUE(std::isnan(g));
}

TEST(BiasCuda, DeviceErrorsNameTheArgument) {
  POSENC_SKIP_WITHOUT_GPU();
  const std::vector<int64_t> qp = {0, 1}, kp = {0, 1};
  DeviceBuffer<int64_t> dq(qp), dk(kp);
  DeviceBuffer<float> out(2 * 2 * 2);
  std::vector<float> host_table(32 * 2);
  expect_error(
      [&] {
        relative_bias(RelativeBiasConfig::t5(2), view(host_table.data(), {32, 2}),
                      view(dq.get(), {2}, Device::cuda), view(dk.get(), {2}, Device::cuda),
                      view(out.get(), {2, 2, 2}, Device::cuda));
      },
      "table is on device cpu, expected cuda");
  expect_error(
      [&] {
        alibi_bias({.heads = 2}, view(qp.data(), {2}), view(dk.get(), {2}, Device::cuda),
                   view(out.get(), {2, 2, 2}, Device::cuda));
      },
      "q_positions is on device cpu, expected cuda");
}

}  // namespace
}  // namespace posenc::test
