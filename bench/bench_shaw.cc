// bench/bench_shaw.cc: Shaw et al.'s key term as a standalone op (the fused attention has its own
// figures in bench_attention): logits (1, 8, S, S) from q (1, S, 8, 64) and a_k (2K+1, 64), write
// bound; limit = a same-run memcpy of the logits' bytes.
#include "bench_limits.h"
#include "posenc/shaw.h"

namespace {
using namespace posenc::bench;

void BM_shaw_key_logits(benchmark::State& state) {
  const int64_t S = state.range(0), H = 8, D = 64;
  posenc::ShawConfig c;
  c.head_dim = D;
  c.max_distance = 32;
  const std::vector<float> q = random_floats(S * H * D), a_k = random_floats(c.num_rows() * D);
  std::vector<int64_t> pos(S);
  for (int64_t i = 0; i < S; ++i) pos[i] = i;
  std::vector<float> logits(H * S * S);
  const LoopTimer timer;
  for (auto _ : state) {
    posenc::shaw_key_logits(c, posenc::view(a_k.data(), {c.num_rows(), D}),
                            posenc::view(q.data(), {1, S, H, D}), posenc::view(pos.data(), {S}),
                            posenc::view(pos.data(), {S}), posenc::view(logits.data(), {1, H, S, S}));
    benchmark::ClobberMemory();
  }
  const size_t bytes = logits.size() * sizeof(float);
  report_vs_memcpy(state, timer, static_cast<double>(bytes), bytes / 2);
}

}  // namespace

BENCHMARK(BM_shaw_key_logits)->ArgName("S")->Arg(2048)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
