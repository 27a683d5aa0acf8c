// bench/cuda/cuda_timing.h: what the CUDA benchmarks share: CUDA-event medians over rotating buffers (sets
// larger than L2 in all, so the cache does not serve them), the same-run device copy of the same bytes
// (counted as read + written), random device data, and one JSON line per figure.
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace posenc::bench {

inline void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// The median of `repeats` timings (ms) of fn(i), i the rotating set index, after 3 warm-ups.
template <typename Fn>
double median_ms(int repeats, int sets, Fn fn) {
  cudaEvent_t start, stop;
  cuda_ok(cudaEventCreate(&start), "event");
  cuda_ok(cudaEventCreate(&stop), "event");
  for (int i = 0; i < 3; ++i) fn(i % sets);
  std::vector<float> ms;
  for (int r = 0; r < repeats; ++r) {
    cuda_ok(cudaEventRecord(start), "record");
    fn(r % sets);
    cuda_ok(cudaEventRecord(stop), "record");
    cuda_ok(cudaEventSynchronize(stop), "sync");
    float t = 0;
    cuda_ok(cudaEventElapsedTime(&t, start, stop), "elapsed");
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

// Enough sets of `bytes` each to exceed 1 GiB together (at least 2).
inline int rotating_sets(size_t bytes) {
  return static_cast<int>(std::max<size_t>(2, (size_t{1} << 30) / std::max<size_t>(bytes, 1) + 1));
}

// Device buffers of `bytes` each, filled with bf16 values in [0.5, 1) (finite as any 16- or 32-bit type).
inline std::vector<void*> random_device_sets(int sets, size_t bytes) {
  std::vector<void*> bufs(sets);
  std::vector<uint16_t> host(bytes / 2);
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> mant(0, 127);
  for (auto& h : host) h = static_cast<uint16_t>(0x3f00 | mant(rng));
  for (void*& b : bufs) {
    cuda_ok(cudaMalloc(&b, bytes), "cudaMalloc");
    cuda_ok(cudaMemcpy(b, host.data(), host.size() * 2, cudaMemcpyHostToDevice), "copy in");
  }
  return bufs;
}

// The copy limit: `bytes` read and written device to device, rotating over `bufs`, in TB/s (read + written).
inline double copy_tb_per_s(const std::vector<void*>& bufs, size_t bytes, int repeats) {
  void* dst;
  cuda_ok(cudaMalloc(&dst, bytes), "cudaMalloc");
  const double ms = median_ms(repeats, static_cast<int>(bufs.size()), [&](int i) {
    cuda_ok(cudaMemcpyAsync(dst, bufs[i], bytes, cudaMemcpyDeviceToDevice), "copy");
  });
  cudaFree(dst);
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e12;
}

// One figure: `bytes` moved by the op (read + written) in `ms`, beside the copy limit of the same run.
inline void print_figure(const char* op, const char* shape, const char* dtype, double ms, double bytes,
                         double copy_tbs) {
  const double tbs = bytes / (ms * 1e-3) / 1e12;
  std::printf(
      "{\"op\": \"%s\", \"shape\": \"%s\", \"dtype\": \"%s\", \"ms\": %.4f, \"tb_per_s\": %.3f, "
      "\"copy_tb_per_s\": %.3f, \"vs_copy\": %.3f}\n",
      op, shape, dtype, ms, tbs, copy_tbs, tbs / copy_tbs);
  std::fflush(stdout);
}

}  // namespace posenc::bench
