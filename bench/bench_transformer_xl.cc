// bench/bench_transformer_xl.cc: Transformer-XL's position terms as a standalone op (the fused
// attention has its own figures in bench_attention): logits (1, 8, S, S) from q, k (1, S, 8, 64),
// u, v and W_R (512, 512). A D-long dot per pair: reported against a same-run memcpy of the
// logits' bytes, the floor any implementation pays.
#include "bench_limits.h"
#include "posenc/transformer_xl.h"

namespace {
using namespace posenc::bench;

void BM_transformer_xl_logits(benchmark::State& state) {
  const int64_t S = state.range(0), H = 8, D = 64;
  posenc::TransformerXLConfig c;
  c.heads = H;
  c.head_dim = D;
  c.d_model = H * D;
  const std::vector<float> q = random_floats(S * H * D, 1), k = random_floats(S * H * D, 2);
  const std::vector<float> u = random_floats(H * D, 3), v = random_floats(H * D, 4);
  const std::vector<float> w_r = random_floats(H * D * c.d_model, 5);
  std::vector<int64_t> pos(S);
  for (int64_t i = 0; i < S; ++i) pos[i] = i;
  std::vector<float> logits(H * S * S);
  const LoopTimer timer;
  for (auto _ : state) {
    posenc::transformer_xl_logits(c, posenc::view(q.data(), {1, S, H, D}),
                                  posenc::view(k.data(), {1, S, H, D}), posenc::view(u.data(), {H, D}),
                                  posenc::view(v.data(), {H, D}),
                                  posenc::view(w_r.data(), {H * D, c.d_model}), posenc::view(pos.data(), {S}),
                                  posenc::view(pos.data(), {S}), posenc::view(logits.data(), {1, H, S, S}));
    benchmark::ClobberMemory();
  }
  const size_t bytes = logits.size() * sizeof(float);
  report_vs_memcpy(state, timer, static_cast<double>(bytes), bytes / 2);
}

}  // namespace

BENCHMARK(BM_transformer_xl_logits)->ArgName("S")->Arg(1024)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
