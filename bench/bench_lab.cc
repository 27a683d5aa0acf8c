// bench/bench_lab.cc: one training step of the lab's default model (2 layers, d_model 64, 4 heads,
// MLP 256, vocabulary 63, batch 32 x 64 tokens): forward, backward and AdamW, per encoding.
// Compute-bound at these shapes; the limit is the same run's OpenBLAS sgemm (all threads) of the
// MLP's shape (2048 x 64)(64 x 256). FLOP counted: 6 per matrix parameter per token (forward 2,
// backward 4; the tied output layer included) plus causal attention (4 T^2 D / 2 per head forward,
// 2.5x that backward). vs_sgemm = GFLOP/s / sgemm GFLOP/s.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include "bench_limits.h"

#include <random>
#include <vector>

#include "model.h"
#include "optimizer.h"

namespace {

using posenc::lab::EncodingSpec;

double sgemm_gflops(int64_t M, int64_t N, int64_t K) {
  openblas_set_num_threads(posenc::num_threads());
  std::vector<float> a(static_cast<size_t>(M * K), 0.5f), b(static_cast<size_t>(N * K), 0.25f),
      c(static_cast<size_t>(M * N));
  double best = 0;
  for (int rep = 0; rep < 200; ++rep) {  // best of many: OpenBLAS's threads take a while to wake
    const double t0 = posenc::bench::now_seconds();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(M), static_cast<int>(N),
                static_cast<int>(K), 1.0f, a.data(), static_cast<int>(K), b.data(), static_cast<int>(K), 0.0f,
                c.data(), static_cast<int>(N));
    best = std::max(best, 2.0 * static_cast<double>(M * N * K) / (posenc::bench::now_seconds() - t0) / 1e9);
  }
  openblas_set_num_threads(1);  // as the lab runs it
  return best;
}

const char* kEncodings[] = {"none", "rope", "alibi", "t5", "shaw", "xl", "learned"};

void BM_lab_train_step(benchmark::State& state) {
  posenc::lab::ModelConfig c;
  c.vocab_size = 63;
  c.encoding = EncodingSpec::parse(kEncodings[state.range(0)]);
  posenc::lab::Model model(c, 1);
  const int64_t B = 32, T = c.train_len, N = B * T;
  std::mt19937 rng(1);
  std::vector<int32_t> tokens(static_cast<size_t>(N)), targets(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>(rng() % 63), targets[i] = static_cast<int32_t>(rng() % 63);
  posenc::lab::AdamW optimizer({});
  double seconds = 0;
  for (auto _ : state) {
    const double t0 = posenc::bench::now_seconds();
    model.forward(tokens.data(), targets.data(), B, T);
    model.zero_grad();
    model.backward();
    optimizer.step(model, 1e-4);
    seconds += posenc::bench::now_seconds() - t0;
  }
  const double C = static_cast<double>(c.d_model), F = static_cast<double>(c.mlp),
               L = static_cast<double>(c.layers);
  const double matrix_params = L * (3 * C * C + C * C + 2 * C * F) + static_cast<double>(c.vocab_size) * C;
  const double attention = L * 3.5 * 4.0 * static_cast<double>(B * T * T) * C / 2.0;
  const double flops = 6.0 * matrix_params * static_cast<double>(N) + attention;
  const double gflops = flops * static_cast<double>(state.iterations()) / seconds / 1e9;
  static const double sgemm = sgemm_gflops(N, c.mlp, c.d_model);  // once per run
  state.SetLabel(kEncodings[state.range(0)]);
  state.counters["GFLOPs"] = gflops;
  state.counters["sgemm_GFLOPs"] = sgemm;
  state.counters["vs_sgemm"] = gflops / sgemm;
  state.counters["tokens_per_s"] = static_cast<double>(N) * static_cast<double>(state.iterations()) / seconds;
}

}  // namespace

BENCHMARK(BM_lab_train_step)
    ->ArgNames({"enc"})
    ->DenseRange(0, 6)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
