// bench/cuda/bench_absolute_cuda.cc: sinusoidal and learned adds on the GPU against the same run's copy
// bandwidth: x (B 8, T 4096, E 4096) bf16 += the encoding; bytes = x read and written once. The learned
// table's gradient: bytes = the bf16 gradient read.
// One JSON line per figure on stdout; run by scripts/gpu_check.sh.   usage: bench_absolute_cuda [repeats]
#include "cuda_timing.h"
#include "posenc/absolute.h"
#include "posenc/device.h"

int main(int argc, char** argv) {
  using namespace posenc;
  using namespace posenc::bench;
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 30;
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_absolute_cuda: no CUDA device\n");
    return 2;
  }
  const int64_t B = 8, T = 4096, E = 4096;
  const char* shape = "B8 T4096 E4096";
  const size_t bytes = static_cast<size_t>(B * T * E) * 2;
  const std::vector<void*> bufs = random_device_sets(rotating_sets(bytes), bytes);
  const double copy = copy_tb_per_s(bufs, bytes, repeats);
  std::vector<int64_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = t;
  int64_t* dpos;
  float* table;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&dpos), 8 * T), "cudaMalloc");
  cuda_ok(cudaMemcpy(dpos, pos.data(), 8 * T, cudaMemcpyHostToDevice), "copy in");
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&table), 4 * T * E), "cudaMalloc");
  cuda_ok(cudaMemset(table, 0, 4 * T * E), "memset");
  const ConstTensorView positions = view(dpos, {T}, Device::cuda);
  auto x = [&](int i) {
    TensorView v = view(static_cast<float*>(bufs[i]), {B, T, E}, Device::cuda);
    v.dtype = DType::bf16;
    return v;
  };
  const SinusoidalConfig sin_cfg{.dim = E};
  print_figure("sinusoidal_add", shape, "bf16",
               median_ms(repeats, static_cast<int>(bufs.size()),
                         [&](int i) { sinusoidal_add(sin_cfg, positions, x(i)); }),
               2.0 * static_cast<double>(bytes), copy);
  const ConstTensorView tv = view(table, {T, E}, Device::cuda);
  print_figure(
      "learned_add", shape, "bf16",
      median_ms(repeats, static_cast<int>(bufs.size()), [&](int i) { learned_add(tv, positions, x(i)); }),
      2.0 * static_cast<double>(bytes), copy);
  const TensorView gv = view(table, {T, E}, Device::cuda);
  print_figure("learned_backward", shape, "bf16",
               median_ms(repeats, static_cast<int>(bufs.size()),
                         [&](int i) { learned_backward(x(i), positions, gv); }),
               static_cast<double>(bytes), copy);
  cudaFree(table);
  cudaFree(dpos);
  for (void* b : bufs) cudaFree(b);
  return 0;
}
