// bench/bench_encodings.cc: encoding kernels next to the machine's own limit, measured in the
// same run. Every kernel here is bandwidth-bound, so the limit is a memcpy of the same bytes,
// split across the same threads (OpenMP), and each kernel reports `vs_memcpy` = its bytes/s over
// the memcpy's bytes/s for that size. Ratios survive a noisy or different machine; raw GB/s do not.
//
//   rope_qk       [1, 4096, 32, 128] q and k in place (read + write each)
//   rope_decode   [1, 1, 32, 128] q and k: one decode step
//   sinusoidal    8192 x 1024 table (write only)
//   t5_bias, alibi_bias   one head, a 4096 x 4096 block (write only)
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstring>
#include <random>
#include <vector>

#include "posenc/posenc.h"

namespace {

// A memcpy of `bytes` split into one contiguous chunk per thread.
void parallel_memcpy(char* dst, const char* src, size_t bytes) {
#pragma omp parallel
  {
    const size_t n = static_cast<size_t>(omp_get_num_threads()), t = static_cast<size_t>(omp_get_thread_num());
    const size_t begin = bytes * t / n, end = bytes * (t + 1) / n;
    std::memcpy(dst + begin, src + begin, end - begin);
  }
}

// The memcpy rate for `bytes` (best of 5, counting reads + writes), measured right after each
// kernel run so that both figures of a ratio come from the same moment of a noisy machine.
double measure_memcpy_rate(size_t bytes) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  parallel_memcpy(dst.data(), src.data(), bytes);  // warm up, fault pages in
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const int iters = bytes > (1 << 24) ? 3 : 200;
    const double t0 = omp_get_wtime();
    for (int i = 0; i < iters; ++i) {
      parallel_memcpy(dst.data(), src.data(), bytes);
      benchmark::DoNotOptimize(dst.data());
    }
    const double rate = 2.0 * static_cast<double>(bytes) * iters / (omp_get_wtime() - t0);
    best = std::max(best, rate);
  }
  return best;
}

// Times the benchmark loop itself so the ratio is a plain number (Google Benchmark's own rate is
// only known after the function returns).
class LoopTimer {
 public:
  LoopTimer() : start_(omp_get_wtime()) {}
  double seconds() const { return omp_get_wtime() - start_; }

 private:
  double start_;
};

void report(benchmark::State& state, const LoopTimer& timer, double bytes_per_iteration, size_t memcpy_bytes) {
  const double seconds = timer.seconds();
  const double iterations = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes_per_iteration * iterations));
  const double memcpy_rate = measure_memcpy_rate(memcpy_bytes);
  state.counters["GBps"] = bytes_per_iteration * iterations / seconds / 1e9;
  state.counters["memcpy_GBps"] = memcpy_rate / 1e9;
  state.counters["vs_memcpy"] = bytes_per_iteration * iterations / seconds / memcpy_rate;  // both count reads + writes
}

std::vector<float> random_floats(size_t n) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

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
    rope.forward_qk(posenc::view(q.data(), {B, T, H, D}), posenc::view(k.data(), {B, T, H, D}), posenc::view(pos.data(), {T}));
    benchmark::ClobberMemory();
  }
  const size_t tensor_bytes = static_cast<size_t>(B * T * H * D) * sizeof(float);
  report(state, timer, 2.0 * 2.0 * static_cast<double>(tensor_bytes), 2 * tensor_bytes);  // q and k, read + write
}

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
  report(state, timer, static_cast<double>(bytes), bytes / 2);
}

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
      posenc::alibi_bias(ac, posenc::view(pos.data(), {S}), posenc::view(pos.data(), {S}), posenc::view(out.data(), {H, S, S}));
    benchmark::ClobberMemory();
  }
  const size_t bytes = static_cast<size_t>(H * S * S) * sizeof(float);
  report(state, timer, static_cast<double>(bytes), bytes / 2);
}
void BM_t5_bias(benchmark::State& state) { BM_bias(state, true); }
void BM_alibi_bias(benchmark::State& state) { BM_bias(state, false); }

}  // namespace

BENCHMARK(BM_rope_qk)->ArgNames({"T", "first_pos"})->Args({4096, 0})->Args({1, 32768})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_sinusoidal_table)->ArgNames({"N", "dim"})->Args({8192, 1024})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_t5_bias)->ArgName("S")->Arg(4096)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_alibi_bias)->ArgName("S")->Arg(4096)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
