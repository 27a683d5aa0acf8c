// bench/compute_peak.h: the machine's arithmetic limits, measured in the same run as the kernels
// they rate (as bench_limits.h does for memory): fp32 FMA and bf16 dot-product throughput on the
// threads of posenc's pool (the kernels' own), each thread running independent register accumulators (enough
// to cover the FMA latency) with no memory traffic. On x86 with AVX-512: vfmadd231ps zmm and vdpbf16ps zmm (2
// multiply-adds per lane pair, 32 bf16 products per instruction); AVX2 + FMA otherwise; bf16 0 when the
// CPU lacks avx512_bf16. GFLOP/s count a multiply-add as 2.
#pragma once
#include <immintrin.h>
#include <chrono>
#include <vector>

#include "posenc/threads.h"

#include <algorithm>
#include <cstdint>

namespace posenc::bench {

namespace peak_detail {
constexpr int64_t kIterations = 1 << 22;

__attribute__((target("avx512f"))) inline float fma_loop_avx512(float seed) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < kIterations; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) inline float fma_loop_avx2(float seed) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(seed + static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < kIterations; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float total = 0;
  for (float x : lanes) total += x;
  return total;
}

__attribute__((target("avx512f,avx512bf16"))) inline float bf16_dot_loop(float seed) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
  for (int64_t it = 0; it < kIterations; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

// GFLOP/s of `loop` (flops_per_iteration per thread per iteration), all threads, best of 3.
template <typename Loop>
double rate(Loop loop, double flops_per_iteration) {
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    // One loop per thread of posenc's pool (the kernels' threads); each runs for milliseconds, so
    // every worker has claimed its own long before the caller could take a second one.
    const int threads = posenc::num_threads();
    std::vector<float> sinks(static_cast<size_t>(threads));
    const auto t0 = std::chrono::steady_clock::now();
    posenc::parallel_for(threads,
                         [&](int64_t t) { sinks[static_cast<size_t>(t)] = loop(static_cast<float>(t)); });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    volatile float keep = sinks[0];  // the loops' results are used
    (void)keep;
    best = std::max(best, flops_per_iteration * kIterations * threads / seconds / 1e9);
  }
  return best;
}
}  // namespace peak_detail

// fp32 FMA peak, GFLOP/s on all of the pool's threads (12 accumulators x 16 lanes x 2 flops per iteration).
inline double fma_peak_gflops() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return peak_detail::rate(peak_detail::fma_loop_avx512, 12 * 16 * 2);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return peak_detail::rate(peak_detail::fma_loop_avx2, 12 * 8 * 2);
  return 0;
}

// bf16 dot-product peak (vdpbf16ps: 16 lanes x 2 products x 2 flops), GFLOP/s; 0 without avx512_bf16.
inline double bf16_dot_peak_gflops() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) return 0;
  return peak_detail::rate(peak_detail::bf16_dot_loop, 12 * 16 * 2 * 2);
}

}  // namespace posenc::bench
