// bench/bench_bias.cc: scalar bias blocks against a same-run memcpy.
//   t5_bias, alibi_bias   one head, a 4096 x 4096 block (write only)
#include "bench_limits.h"
#include "posenc/posenc.h"

namespace {
using namespace posenc::bench;

void BM_bias(benchmark::State& state, bool t5) {
  const int64_t S = state.range(0), H = 1;
  std::vector<int64_t> pos(S);
  for (int64_t i = 0; i < S; ++i) pos[i] = i;
  std::vector<float> out(H * S * S);
  const posenc::RelativeBiasConfig rc = posenc::RelativeBiasConfig::t5(H);
  const std::vector<float> table = random_floats(rc.num_rows() * H);
  posenc::AlibiConfig ac;
  ac.heads = H;
  const LoopTimer timer;
  for (auto _ : state) {
    if (t5)
      posenc::relative_bias(rc, posenc::view(table.data(), {rc.num_rows(), H}), posenc::view(pos.data(), {S}),
                            posenc::view(pos.data(), {S}), posenc::view(out.data(), {H, S, S}));
    else
      posenc::alibi_bias(ac, posenc::view(pos.data(), {S}), posenc::view(pos.data(), {S}),
                         posenc::view(out.data(), {H, S, S}));
    benchmark::ClobberMemory();
  }
  const size_t bytes = static_cast<size_t>(H * S * S) * sizeof(float);
  report_vs_memcpy(state, timer, static_cast<double>(bytes), bytes / 2);
}
void BM_t5_bias(benchmark::State& state) { BM_bias(state, true); }
void BM_alibi_bias(benchmark::State& state) { BM_bias(state, false); }

}  // namespace

BENCHMARK(BM_t5_bias)->ArgName("S")->Arg(4096)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_alibi_bias)->ArgName("S")->Arg(4096)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
