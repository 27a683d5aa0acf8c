// tests/cuda/test_absolute_cuda.cc: sinusoidal and learned encodings on CUDA tensors against the CPU backend:
// sinusoid tables and adds in both layouts, both frequency rules, odd split dims and offsets (within a few
// fp32 ulps: both reduce the angle in double; fp32 sin / cos differ by the CPU's Highway polynomial), learned
// lookups and adds (bit for bit), the table gradient (fp32 sums against the CPU's, bit for bit against a
// second run), NaN rows for positions outside the table. Skipped without a GPU.
#include <algorithm>
#include <random>

#include "device_buffer.h"
#include "posenc/absolute.h"
#include "src/half.h"
#include "test_util.h"

namespace posenc::test {
namespace {

std::vector<float> widen(DType dtype, const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i)
    out[i] = dtype == DType::bf16 ? detail::bf16_to_f32(bits[i]) : detail::f16_to_f32(bits[i]);
  return out;
}

TEST(AbsoluteCuda, SinusoidTablesAndAddsMatchTheCpu) {
  POSENC_SKIP_WITHOUT_GPU();
  std::vector<SinusoidalConfig> configs;
  for (auto layout : {SinusoidalLayout::interleaved, SinusoidalLayout::split})
    for (auto freq : {SinusoidalFrequencies::model_dim, SinusoidalFrequencies::half_dim_minus_one})
      configs.push_back({.dim = 64, .layout = layout, .frequencies = freq});
  configs.push_back(
      {.dim = 9, .layout = SinusoidalLayout::split, .position_offset = 2});  // fairseq's odd dims
  const int64_t B = 2, T = 19;
  std::vector<int64_t> pos(B * T);
  for (int64_t i = 0; i < B * T; ++i) pos[i] = (i * 7717) % 4099 + (i % 5 == 0 ? (int64_t{1} << 31) : 0);
  DeviceBuffer<int64_t> dpos(pos);
  for (const SinusoidalConfig& c : configs) {
    SCOPED_TRACE("dim " + std::to_string(c.dim));
    std::vector<float> cpu(B * T * c.dim);
    sinusoidal_table(c, view(pos.data(), {B * T}), view(cpu.data(), {B * T, c.dim}));
    DeviceBuffer<float> out(cpu.size());
    out.poison();
    sinusoidal_table(c, view(dpos.get(), {B * T}, Device::cuda),
                     view(out.get(), {B * T, c.dim}, Device::cuda));
    EXPECT_TRUE(all_close(out.to_host(), cpu, {8 * std::ldexp(1.0, -24), 0}));
    // added to embeddings, fp32 and bf16
    const std::vector<float> x = random_floats(cpu.size(), 3);
    std::vector<float> cpu_x = x;
    sinusoidal_add(c, view(pos.data(), {B, T}), view(cpu_x.data(), {B, T, c.dim}));
    DeviceBuffer<float> dx(x);
    sinusoidal_add(c, view(dpos.get(), {B, T}, Device::cuda), view(dx.get(), {B, T, c.dim}, Device::cuda));
    EXPECT_TRUE(all_close(dx.to_host(), cpu_x, {16 * std::ldexp(1.0, -24), 0}));
    std::vector<uint16_t> x16(x.size());
    for (size_t i = 0; i < x.size(); ++i) x16[i] = detail::f32_to_bf16(x[i]);
    std::vector<uint16_t> cpu16 = x16;
    TensorView cv = view(reinterpret_cast<float*>(cpu16.data()), {B, T, c.dim});
    cv.dtype = DType::bf16;
    sinusoidal_add(c, view(pos.data(), {B, T}), cv);
    DeviceBuffer<uint16_t> d16(x16);
    TensorView dv = view(reinterpret_cast<float*>(d16.get()), {B, T, c.dim}, Device::cuda);
    dv.dtype = DType::bf16;
    sinusoidal_add(c, view(dpos.get(), {B, T}, Device::cuda), dv);
    // One bf16 rounding of nearly equal fp32 sums: at most one bf16 ulp apart.
    EXPECT_TRUE(all_close(widen(DType::bf16, d16.to_host()), widen(DType::bf16, cpu16),
                          {std::ldexp(1.0, -7), std::ldexp(1.0, -7)}));
  }
}

TEST(AbsoluteCuda, LearnedRowsAndGradient) {
  POSENC_SKIP_WITHOUT_GPU();
  const int64_t L = 50, E = 24, B = 3, T = 33;
  const std::vector<float> table = random_floats(L * E, 1);
  std::vector<int64_t> pos(B * T);
  std::mt19937 rng(5);
  for (int64_t& p : pos) p = static_cast<int64_t>(rng() % L);  // repeated positions: several tokens a row
  DeviceBuffer<float> dtable(table);
  DeviceBuffer<int64_t> dpos(pos);
  const std::vector<float> x = random_floats(B * T * E, 2);
  std::vector<float> cpu = x;
  learned_add(view(table.data(), {L, E}), view(pos.data(), {B, T}), view(cpu.data(), {B, T, E}));
  DeviceBuffer<float> dx(x);
  learned_add(view(dtable.get(), {L, E}, Device::cuda), view(dpos.get(), {B, T}, Device::cuda),
              view(dx.get(), {B, T, E}, Device::cuda));
  EXPECT_EQ(dx.to_host(), cpu);
  // gradient, twice
  const std::vector<float> g = random_floats(B * T * E, 3), start = random_floats(L * E, 4);
  std::vector<float> cpu_grad = start;
  learned_backward(view(g.data(), {B, T, E}), view(pos.data(), {B, T}), view(cpu_grad.data(), {L, E}));
  DeviceBuffer<float> dg(g);
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    DeviceBuffer<float> grad_table(start);
    learned_backward(view(dg.get(), {B, T, E}, Device::cuda), view(dpos.get(), {B, T}, Device::cuda),
                     view(grad_table.get(), {L, E}, Device::cuda));
    runs.push_back(grad_table.to_host());
  }
  EXPECT_EQ(runs[0], runs[1]) << "not deterministic";
  EXPECT_TRUE(all_close(runs[0], cpu_grad, kF32Reduction));
  // a position outside the table: NaN rows, never a read or write out of bounds
  std::vector<int64_t> bad = pos;
  bad[7] = L;
  DeviceBuffer<int64_t> dbad(bad);
  DeviceBuffer<float> dy(x);
  learned_add(view(dtable.get(), {L, E}, Device::cuda), view(dbad.get(), {B, T}, Device::cuda),
              view(dy.get(), {B, T, E}, Device::cuda));
  const std::vector<float> y = dy.to_host();
  EXPECT_TRUE(std::isnan(y[7 * E]));
  EXPECT_EQ(y[8 * E], cpu[8 * E]);
  DeviceBuffer<float> grad_table(start);
  learned_backward(view(dg.get(), {B, T, E}, Device::cuda), view(dbad.get(), {B, T}, Device::cuda),
                   view(grad_table.get(), {L, E}, Device::cuda));
  const std::vector<float> gt = grad_table.to_host();
  EXPECT_TRUE(std::all_of(gt.begin(), gt.end(), [](float v) { return std::isnan(v); }));
}

}  // namespace
}  // namespace posenc::test
