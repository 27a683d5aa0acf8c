// bench/bench_attention.cc: fused attention forward next to the machine's own compute limit, an
// OpenBLAS sgemm on the same thread count, measured in the same run.
//   effective FLOP = 4 * S^2 * D * heads, halved for causal (the two products QK^T and PV)
//   vs_sgemm = attention GFLOP/s / sgemm GFLOP/s (sgemm of (S x D) x (D x S), the QK^T shape)
// Also reports the peak RSS, which must grow with S * D, not S^2.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>
#include <sys/resource.h>

#include <cmath>
#include <random>
#include <vector>

#include "posenc/attention.h"

namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

double sgemm_gflops(int64_t S, int64_t D) {
  openblas_set_num_threads(omp_get_max_threads());
  const std::vector<float> a = random_floats(S * D, 1), b = random_floats(S * D, 2);
  std::vector<float> c(S * S);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = omp_get_wtime();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(S), static_cast<int>(S), static_cast<int>(D), 1.0f,
                a.data(), static_cast<int>(D), b.data(), static_cast<int>(D), 0.0f, c.data(), static_cast<int>(S));
    best = std::max(best, 2.0 * S * S * D / (omp_get_wtime() - t0) / 1e9);
  }
  return best;
}

// range(0): S, range(1): D, range(2): encoding (0 none, 1 rope, 2 alibi, 3 t5)
void BM_attention_forward(benchmark::State& state) {
  const int64_t S = state.range(0), D = state.range(1), H = 8, enc = state.range(2);
  const std::vector<float> q = random_floats(S * H * D, 3), k = random_floats(S * H * D, 4), v = random_floats(S * H * D, 5);
  std::vector<float> out(S * H * D), table = random_floats(32 * H, 6);
  posenc::RopeConfig rc;
  rc.head_dim = D;
  const posenc::Rope rope(rc);
  posenc::AttentionConfig cfg;
  cfg.causal = true;
  if (enc == 1) cfg.rope = &rope;
  if (enc == 2) {
    cfg.bias.kind = posenc::AttentionBias::Kind::alibi;
    cfg.bias.alibi.heads = H;
  }
  if (enc == 3) {
    cfg.bias.kind = posenc::AttentionBias::Kind::relative;
    cfg.bias.relative = posenc::RelativeBiasConfig::t5(H, 32, 128, false);
    cfg.bias.relative_table = posenc::view(table.data(), {32, H});
  }
  const posenc::AttentionInputs in = posenc::qkv(posenc::view(q.data(), {1, S, H, D}), posenc::view(k.data(), {1, S, H, D}),
                                                     posenc::view(v.data(), {1, S, H, D}));
  const double t0 = omp_get_wtime();
  for (auto _ : state) {
    posenc::attention_forward(cfg, in, posenc::view(out.data(), {1, S, H, D}), posenc::TensorView{});
    benchmark::ClobberMemory();
  }
  const double seconds = omp_get_wtime() - t0;
  const double gflops = 4.0 * S * S * D * H / 2 * static_cast<double>(state.iterations()) / seconds / 1e9;
  const double sgemm = sgemm_gflops(S, D);
  state.counters["GFLOPs"] = gflops;
  state.counters["sgemm_GFLOPs"] = sgemm;
  state.counters["vs_sgemm"] = gflops / sgemm;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["peak_rss_MiB"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
}

}  // namespace

BENCHMARK(BM_attention_forward)
    ->ArgNames({"S", "D", "enc"})
    ->Args({512, 64, 0})->Args({2048, 128, 0})
    ->Args({4096, 128, 0})->Args({4096, 128, 1})->Args({4096, 128, 2})->Args({4096, 128, 3})
    ->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_MAIN();
