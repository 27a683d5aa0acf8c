// bench/cuda/bench_rope_cuda.cc: RoPE on the GPU against the card's own copy bandwidth, measured in the
// same run (a device-to-device copy of the same bytes, counted as bytes read + written). Each figure is the
// median of CUDA-event timings over rotating input sets larger than L2 (so the cache does not serve them).
//   posenc RoPE q+k in place: (B, T, Hq / Hkv, D), bytes = 2 (q + k) (read and written)
// Prints a JSON object per case on stdout; run by scripts/gpu_check.sh.
//   usage: bench_rope_cuda [repeats]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "posenc/device.h"
#include "posenc/rope.h"

namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// The median of `repeats` timings (ms) of fn(i), i the rotating set index, after 3 warm-ups.
template <typename Fn>
double median_ms(int repeats, int sets, Fn fn) {
  cudaEvent_t start, stop;
  ok(cudaEventCreate(&start), "event");
  ok(cudaEventCreate(&stop), "event");
  for (int i = 0; i < 3; ++i) fn(i % sets);
  std::vector<float> ms;
  for (int r = 0; r < repeats; ++r) {
    ok(cudaEventRecord(start), "record");
    fn(r % sets);
    ok(cudaEventRecord(stop), "record");
    ok(cudaEventSynchronize(stop), "sync");
    float t = 0;
    ok(cudaEventElapsedTime(&t, start, stop), "elapsed");
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

struct Shape {
  const char* name;
  int64_t batch, tokens, heads, kv_heads, dim;
};

void fill_random_bf16(void* dst, size_t n, uint32_t seed) {
  std::vector<uint16_t> host(n);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> mant(0, 127);
  for (auto& h : host) h = static_cast<uint16_t>(0x3f00 | mant(rng));  // bf16 values in [0.5, 1)
  ok(cudaMemcpy(dst, host.data(), 2 * n, cudaMemcpyHostToDevice), "copy in");
}

void run(const Shape& s, posenc::DType dtype, bool backward, int repeats) {
  using posenc::Device;
  const size_t elem = dtype == posenc::DType::f32 ? 4 : 2;
  const size_t q_n = s.batch * s.tokens * s.heads * s.dim, k_n = s.batch * s.tokens * s.kv_heads * s.dim;
  const size_t set_bytes = (q_n + k_n) * elem;
  const int sets =
      static_cast<int>(std::max<size_t>(2, (size_t{1} << 30) / set_bytes + 1));  // > 1 GiB in all
  std::vector<void*> bufs(sets);
  for (int i = 0; i < sets; ++i) {
    ok(cudaMalloc(&bufs[i], set_bytes), "cudaMalloc");
    fill_random_bf16(bufs[i], set_bytes / 2, 17 + i);  // random bits of any dtype: finite values
  }
  std::vector<int64_t> pos(s.tokens);
  for (int64_t t = 0; t < s.tokens; ++t) pos[t] = t;
  int64_t* dpos;
  ok(cudaMalloc(reinterpret_cast<void**>(&dpos), 8 * pos.size()), "cudaMalloc");
  ok(cudaMemcpy(dpos, pos.data(), 8 * pos.size(), cudaMemcpyHostToDevice), "copy in");
  posenc::RopeConfig cfg;
  cfg.head_dim = s.dim;
  cfg.base = 500000;
  const posenc::Rope rope(cfg);
  const auto positions = posenc::view(dpos, {s.tokens}, Device::cuda);
  const double rope_ms = median_ms(repeats, sets, [&](int i) {
    char* base = static_cast<char*>(bufs[i]);
    posenc::TensorView q =
        posenc::view(reinterpret_cast<float*>(base), {s.batch, s.tokens, s.heads, s.dim}, Device::cuda);
    posenc::TensorView k = posenc::view(reinterpret_cast<float*>(base + q_n * elem),
                                        {s.batch, s.tokens, s.kv_heads, s.dim}, Device::cuda);
    q.dtype = k.dtype = dtype;
    if (backward) {
      rope.backward(q, positions);
      rope.backward(k, positions);
    } else {
      rope.forward_qk(q, k, positions);
    }
  });
  // The copy limit: the same bytes read and written, device to device.
  void* dst;
  ok(cudaMalloc(&dst, set_bytes), "cudaMalloc");
  const double copy_ms = median_ms(repeats, sets, [&](int i) {
    ok(cudaMemcpyAsync(dst, bufs[i], set_bytes, cudaMemcpyDeviceToDevice), "copy");
  });
  const double bytes = 2.0 * static_cast<double>(set_bytes);
  const double rope_tbs = bytes / (rope_ms * 1e-3) / 1e12, copy_tbs = bytes / (copy_ms * 1e-3) / 1e12;
  std::printf(
      "{\"op\": \"rope_qk_%s\", \"shape\": \"%s\", \"dtype\": \"%s\", \"ms\": %.4f, \"tb_per_s\": %.3f, "
      "\"copy_tb_per_s\": %.3f, \"vs_copy\": %.3f}\n",
      backward ? "backward" : "forward", s.name, posenc::dtype_name(dtype), rope_ms, rope_tbs, copy_tbs,
      rope_tbs / copy_tbs);
  cudaFree(dst);
  cudaFree(dpos);
  for (void* b : bufs) cudaFree(b);
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 50;
  if (posenc::cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_rope_cuda: no CUDA device\n");
    return 2;
  }
  const Shape shapes[] = {{"B1 T32768 H32/8 D128", 1, 32768, 32, 8, 128},
                          {"B8 T4096 H32/8 D128", 8, 4096, 32, 8, 128}};
  for (const Shape& s : shapes) {
    run(s, posenc::DType::bf16, false, repeats);
    run(s, posenc::DType::bf16, true, repeats);
  }
  run(shapes[1], posenc::DType::f32, false, repeats);
  return 0;
}
