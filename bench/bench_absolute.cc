// bench/bench_absolute.cc: the sinusoidal table against a same-run memcpy.
//   sinusoidal    8192 x 1024 table (write only)
#include "bench_limits.h"
#include "posenc/posenc.h"

namespace {
using namespace posenc::bench;

void BM_sinusoidal_table(benchmark::State& state) {
  const int64_t N = state.range(0), D = state.range(1);
  posenc::SinusoidalConfig c;
  c.dim = D;
  std::vector<int64_t> pos(N);
  for (int64_t i = 0; i < N; ++i) pos[i] = i;
  std::vector<float> out(N * D);
  const LoopTimer timer;
  for (auto _ : state) {
    posenc::sinusoidal_table(c, posenc::view(pos.data(), {N}), posenc::view(out.data(), {N, D}));
    benchmark::ClobberMemory();
  }
  // Writes N x D floats; compared with a memcpy moving the same number of bytes (half read, half write).
  const size_t bytes = static_cast<size_t>(N * D) * sizeof(float);
  report_vs_memcpy(state, timer, static_cast<double>(bytes), bytes / 2);
}

}  // namespace

BENCHMARK(BM_sinusoidal_table)
    ->ArgNames({"N", "dim"})
    ->Args({8192, 1024})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
