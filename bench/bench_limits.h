// bench/bench_limits.h: the machine's own limits, measured in the same run as each kernel, and the
// helpers every benchmark shares. Bandwidth-bound kernels report `vs_memcpy` = their bytes/s over
// a memcpy's bytes/s for that size, split across the same threads (posenc's pool: an OpenMP team
// here would spin after each copy on the cores the next kernel run needs). Ratios survive a noisy
// or different machine; raw GB/s do not.
#pragma once
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "posenc/threads.h"

namespace posenc::bench {

// Seconds on a monotonic clock.
inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A memcpy of `bytes` split into one contiguous chunk per thread of posenc's pool.
inline void parallel_memcpy(char* dst, const char* src, size_t bytes) {
  const auto n = static_cast<size_t>(posenc::num_threads());
  posenc::parallel_for(static_cast<int64_t>(n), [&](int64_t t) {
    const size_t begin = bytes * static_cast<size_t>(t) / n, end = bytes * (static_cast<size_t>(t) + 1) / n;
    std::memcpy(dst + begin, src + begin, end - begin);
  });
}

// A read of `bytes` (a multiple of 32) split like parallel_memcpy, every 64-bit word summed: the fair
// limit of a kernel that only reads its operands (decode against a KV cache), which moves no write
// traffic that a memcpy's destination does. Returns the sum, for DoNotOptimize.
inline uint64_t parallel_read(const char* src, size_t bytes) {
  const auto n = static_cast<size_t>(posenc::num_threads());
  std::vector<uint64_t> sums(n);
  posenc::parallel_for(static_cast<int64_t>(n), [&](int64_t t) {
    const size_t words = bytes / 32 * 4, begin = words * static_cast<size_t>(t) / n / 4 * 4,
                 end = words * (static_cast<size_t>(t) + 1) / n / 4 * 4;
    uint64_t s[4] = {0, 0, 0, 0};  // independent sums: the loads, not an add chain, set the pace
    for (size_t i = begin; i < end; i += 4) {
      uint64_t w[4];
      std::memcpy(w, src + i * 8, sizeof(w));
      for (int j = 0; j < 4; ++j) s[j] += w[j];
    }
    sums[static_cast<size_t>(t)] = s[0] + s[1] + s[2] + s[3];
  });
  uint64_t total = 0;
  for (const uint64_t s : sums) total += s;
  return total;
}

// The memcpy rate for `bytes` (best of 5, counting reads + writes), measured right after each
// kernel run so that both figures of a ratio come from the same moment of a noisy machine.
inline double measure_memcpy_rate(size_t bytes) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  parallel_memcpy(dst.data(), src.data(), bytes);  // warm up, fault pages in
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const int iters = bytes > (1 << 24) ? 3 : 200;
    const double t0 = now_seconds();
    for (int i = 0; i < iters; ++i) {
      parallel_memcpy(dst.data(), src.data(), bytes);
      benchmark::DoNotOptimize(dst.data());
    }
    const double rate = 2.0 * static_cast<double>(bytes) * iters / (now_seconds() - t0);
    best = std::max(best, rate);
  }
  return best;
}

// Times the benchmark loop itself so the ratio is a plain number (Google Benchmark's own rate is
// only known after the function returns).
class LoopTimer {
 public:
  LoopTimer() : start_(now_seconds()) {}
  double seconds() const { return now_seconds() - start_; }

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

// The rate of an in-place pass (each 32-bit word read, changed and written back), counting reads +
// writes: the fair limit of a kernel that updates its tensors in place (RoPE's q and k), which moves
// no write-allocate traffic that a memcpy's destination does.
inline double measure_in_place_rate(size_t bytes) {
  std::vector<uint32_t> x(bytes / sizeof(uint32_t), 1);
  const auto n = static_cast<size_t>(posenc::num_threads());
  auto pass = [&] {
    posenc::parallel_for(static_cast<int64_t>(n), [&](int64_t t) {
      const size_t begin = x.size() * static_cast<size_t>(t) / n,
                   end = x.size() * (static_cast<size_t>(t) + 1) / n;
      for (size_t i = begin; i < end; ++i) x[i] ^= 0x5a5a5a5au;
    });
    benchmark::DoNotOptimize(x.data());
  };
  pass();  // fault pages in
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const int iters = bytes > (1 << 24) ? 3 : 200;
    const double t0 = now_seconds();
    for (int i = 0; i < iters; ++i) pass();
    best = std::max(best, 2.0 * static_cast<double>(bytes) * iters / (now_seconds() - t0));
  }
  return best;
}

// report_vs_memcpy, and vs_in_place = the kernel's rate over measure_in_place_rate(in_place_bytes).
inline void report_vs_in_place(benchmark::State& state, const LoopTimer& timer, double bytes_per_iteration,
                               size_t in_place_bytes) {
  report_vs_memcpy(state, timer, bytes_per_iteration, in_place_bytes);
  const double rate = state.counters["GBps"] * 1e9;  // set by report_vs_memcpy from the same timer
  const double limit = measure_in_place_rate(in_place_bytes);
  state.counters["in_place_GBps"] = limit / 1e9;
  state.counters["vs_in_place"] = rate / limit;
}

inline std::vector<float> random_floats(size_t n, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace posenc::bench
