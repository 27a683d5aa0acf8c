// bench/bench_rope.cc: RoPE against a same-run memcpy and, its fair limit since it updates q and k in
// place, a same-run in-place pass over the same bytes (vs_in_place; bandwidth-bound).
//   rope_qk     [1, 4096, 32, 128] q and k in place (read + write each), and one decode step
//   rope_qk_16bit  the same in bf16 and fp16 storage
//   rope_case   every configuration of tests/rope_cases.h (the tests' grid) at [1, 4096, 32, D]
#include "bench_limits.h"
#include "posenc/posenc.h"
#include "rope_cases.h"
#include "src/half.h"

namespace {
using namespace posenc::bench;

void BM_rope_qk(benchmark::State& state) {
  const int64_t B = 1, T = state.range(0), H = 32, D = 128;
  posenc::RopeConfig c;
  c.head_dim = D;
  c.base = 500000;
  const posenc::Rope rope(c);
  std::vector<float> q = random_floats(B * T * H * D), k = random_floats(B * T * H * D);
  std::vector<int64_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = state.range(1) + t;
  const LoopTimer timer;
  for (auto _ : state) {
    rope.forward_qk(posenc::view(q.data(), {B, T, H, D}), posenc::view(k.data(), {B, T, H, D}),
                    posenc::view(pos.data(), {T}));
    benchmark::ClobberMemory();
  }
  const size_t tensor_bytes = static_cast<size_t>(B * T * H * D) * sizeof(float);
  report_vs_in_place(state, timer, 2.0 * 2.0 * static_cast<double>(tensor_bytes),
                     2 * tensor_bytes);  // q and k, read + write
}

// q and k [1, 4096, 32, 128] in place in bf16 (range(0) = 0) or fp16 (1) storage: widened to fp32,
// rotated, rounded once; half the bytes of fp32 for the same work (the target: >= 0.8 of memcpy).
void BM_rope_qk_16bit(benchmark::State& state) {
  const int64_t B = 1, T = 4096, H = 32, D = 128;
  const posenc::DType dtype = state.range(0) == 0 ? posenc::DType::bf16 : posenc::DType::f16;
  state.SetLabel(dtype == posenc::DType::bf16 ? "bf16" : "f16");
  posenc::RopeConfig c;
  c.head_dim = D;
  c.base = 500000;
  const posenc::Rope rope(c);
  const std::vector<float> init = random_floats(B * T * H * D);
  std::vector<uint16_t> q(init.size()), k(init.size());
  for (size_t i = 0; i < init.size(); ++i)  // values in [-1, 1] (no subnormals: fp32 assists would dominate)
    q[i] = k[i] = dtype == posenc::DType::bf16 ? posenc::detail::f32_to_bf16(init[i])
                                               : posenc::detail::f32_to_f16(init[i]);
  std::vector<int64_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = t;
  auto view16 = [&](std::vector<uint16_t>& x) {
    posenc::TensorView v = posenc::view(reinterpret_cast<float*>(x.data()), {B, T, H, D});
    v.dtype = dtype;
    return v;
  };
  const LoopTimer timer;
  for (auto _ : state) {
    rope.forward_qk(view16(q), view16(k), posenc::view(pos.data(), {T}));
    benchmark::ClobberMemory();
  }
  const size_t tensor_bytes = static_cast<size_t>(B * T * H * D) * sizeof(uint16_t);
  report_vs_in_place(state, timer, 2.0 * 2.0 * static_cast<double>(tensor_bytes), 2 * tensor_bytes);
}

// The tests' RoPE cases (real model configurations) at full size: q and k [1, 4096, 32, D].
void BM_rope_case(benchmark::State& state) {
  const posenc::test::RopeCase rc = posenc::test::rope_cases()[state.range(0)];
  state.SetLabel(rc.name);
  const int64_t B = 1, T = 4096, H = 32, D = rc.config.head_dim, S = rc.config.num_position_streams();
  const posenc::Rope rope(rc.config);
  std::vector<float> q = random_floats(B * T * H * D), k = random_floats(B * T * H * D);
  std::vector<int64_t> pos(S * T);
  for (int64_t i = 0; i < S * T; ++i) pos[i] = rc.first_position + i % T;
  const posenc::ConstTensorView positions =
      S > 1 ? posenc::view(pos.data(), {S, T}) : posenc::view(pos.data(), {T});
  const LoopTimer timer;
  for (auto _ : state) {
    rope.forward_qk(posenc::view(q.data(), {B, T, H, D}), posenc::view(k.data(), {B, T, H, D}), positions);
    benchmark::ClobberMemory();
  }
  const size_t tensor_bytes = static_cast<size_t>(B * T * H * D) * sizeof(float);
  report_vs_in_place(state, timer, 2.0 * 2.0 * static_cast<double>(tensor_bytes), 2 * tensor_bytes);
}

}  // namespace

BENCHMARK(BM_rope_qk)
    ->ArgNames({"T", "first_pos"})
    ->Args({4096, 0})
    ->Args({1, 32768})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_rope_qk_16bit)->ArgName("f16")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_rope_case)
    ->ArgName("case")
    ->DenseRange(0, static_cast<int>(posenc::test::rope_cases().size()) - 1)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
