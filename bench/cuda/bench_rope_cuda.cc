// bench/cuda/bench_rope_cuda.cc: RoPE on the GPU against the card's copy bandwidth measured in the same run.
//   q+k in place (B, T, Hq / Hkv, D) bf16 (and fp32): bytes = q and k read and written once.
// One JSON line per figure on stdout; run by scripts/gpu_check.sh.   usage: bench_rope_cuda [repeats]
#include <string>

#include "cuda_timing.h"
#include "posenc/device.h"
#include "posenc/rope.h"

namespace posenc::bench {
namespace {

struct Shape {
  const char* name;
  int64_t batch, tokens, heads, kv_heads, dim;
};

void run(const Shape& s, DType dtype, bool backward, int repeats) {
  const size_t elem = dtype == DType::f32 ? 4 : 2;
  const size_t q_n = s.batch * s.tokens * s.heads * s.dim, k_n = s.batch * s.tokens * s.kv_heads * s.dim;
  const size_t set_bytes = (q_n + k_n) * elem;
  const std::vector<void*> bufs = random_device_sets(rotating_sets(set_bytes), set_bytes);
  std::vector<int64_t> pos(s.tokens);
  for (int64_t t = 0; t < s.tokens; ++t) pos[t] = t;
  int64_t* dpos;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&dpos), 8 * pos.size()), "cudaMalloc");
  cuda_ok(cudaMemcpy(dpos, pos.data(), 8 * pos.size(), cudaMemcpyHostToDevice), "copy in");
  RopeConfig cfg;
  cfg.head_dim = s.dim;
  cfg.base = 500000;
  const Rope rope(cfg);
  const ConstTensorView positions = view(dpos, {s.tokens}, Device::cuda);
  const double ms = median_ms(repeats, static_cast<int>(bufs.size()), [&](int i) {
    char* base = static_cast<char*>(bufs[i]);
    TensorView q = view(reinterpret_cast<float*>(base), {s.batch, s.tokens, s.heads, s.dim}, Device::cuda);
    TensorView k = view(reinterpret_cast<float*>(base + q_n * elem), {s.batch, s.tokens, s.kv_heads, s.dim},
                        Device::cuda);
    q.dtype = k.dtype = dtype;
    if (backward) {
      rope.backward(q, positions);
      rope.backward(k, positions);
    } else {
      rope.forward_qk(q, k, positions);
    }
  });
  print_figure(backward ? "rope_qk_backward" : "rope_qk_forward", s.name, dtype_name(dtype), ms,
               2.0 * static_cast<double>(set_bytes), copy_tb_per_s(bufs, set_bytes, repeats));
  cudaFree(dpos);
  for (void* b : bufs) cudaFree(b);
}

}  // namespace
}  // namespace posenc::bench

int main(int argc, char** argv) {
  using namespace posenc::bench;
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
