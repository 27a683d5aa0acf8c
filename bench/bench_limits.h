// bench/bench_limits.h: the machine's own limits, measured in the same run as each kernel, and the
// helpers every benchmark shares. Bandwidth-bound kernels report `vs_memcpy` = their bytes/s over
// a memcpy's bytes/s for that size, split across the same threads (OpenMP). Ratios survive a
// noisy or different machine; raw GB/s do not.
#pragma once
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace posenc::bench {

// A memcpy of `bytes` split into one contiguous chunk per thread.
inline void parallel_memcpy(char* dst, const char* src, size_t bytes) {
#pragma omp parallel
  {
    const size_t n = static_cast<size_t>(omp_get_num_threads()),
                 t = static_cast<size_t>(omp_get_thread_num());
    const size_t begin = bytes * t / n, end = bytes * (t + 1) / n;
    std::memcpy(dst + begin, src + begin, end - begin);
  }
}

// The memcpy rate for `bytes` (best of 5, counting reads + writes), measured right after each
// kernel run so that both figures of a ratio come from the same moment of a noisy machine.
inline double measure_memcpy_rate(size_t bytes) {
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

inline void report_vs_memcpy(benchmark::State& state, const LoopTimer& timer, double bytes_per_iteration,
                             size_t memcpy_bytes) {
  const double seconds = timer.seconds();
  const double iterations = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes_per_iteration * iterations));
  const double memcpy_rate = measure_memcpy_rate(memcpy_bytes);
  state.counters["GBps"] = bytes_per_iteration * iterations / seconds / 1e9;
  state.counters["memcpy_GBps"] = memcpy_rate / 1e9;
  state.counters["vs_memcpy"] =
      bytes_per_iteration * iterations / seconds / memcpy_rate;  // both count reads + writes
}

inline std::vector<float> random_floats(size_t n, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace posenc::bench
