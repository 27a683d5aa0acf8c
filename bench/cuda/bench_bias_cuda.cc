// bench/cuda/bench_bias_cuda.cc: the distance biases on the GPU against the same run's copy bandwidth.
//   blocks (H 32, Q 4096, K 4096) bf16: ALiBi, T5 (32 buckets), clipped (max_distance 128); bytes = the
//   block written. relative_bias_backward (T5, clipped): bytes = the bf16 gradient block read.
// One JSON line per figure on stdout; run by scripts/gpu_check.sh.   usage: bench_bias_cuda [repeats]
#include <string>

#include "cuda_timing.h"
#include "posenc/bias.h"
#include "posenc/device.h"

int main(int argc, char** argv) {
  using namespace posenc;
  using namespace posenc::bench;
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 30;
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_bias_cuda: no CUDA device\n");
    return 2;
  }
  const int64_t H = 32, Q = 4096, K = 4096;
  const char* shape = "H32 Q4096 K4096";
  const size_t bytes = static_cast<size_t>(H * Q * K) * 2;
  const std::vector<void*> bufs = random_device_sets(rotating_sets(bytes), bytes);
  const double copy = copy_tb_per_s(bufs, bytes, repeats);
  std::vector<int64_t> pos(Q);
  for (int64_t i = 0; i < Q; ++i) pos[i] = i;
  int64_t* dpos;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&dpos), 8 * Q), "cudaMalloc");
  cuda_ok(cudaMemcpy(dpos, pos.data(), 8 * Q, cudaMemcpyHostToDevice), "copy in");
  const ConstTensorView qp = view(dpos, {Q}, Device::cuda), kp = view(dpos, {K}, Device::cuda);
  auto block = [&](int i) {
    TensorView out = view(static_cast<float*>(bufs[i]), {H, Q, K}, Device::cuda);
    out.dtype = DType::bf16;
    return out;
  };
  const AlibiConfig alibi{.heads = H};
  print_figure(
      "alibi_bias", shape, "bf16",
      median_ms(repeats, static_cast<int>(bufs.size()), [&](int i) { alibi_bias(alibi, qp, kp, block(i)); }),
      static_cast<double>(bytes), copy);
  const RelativeBiasConfig configs[] = {RelativeBiasConfig::t5(H), RelativeBiasConfig::clipped(H, 128)};
  const char* names[] = {"t5", "clipped"};
  for (int c = 0; c < 2; ++c) {
    const RelativeBiasConfig& cfg = configs[c];
    float* table;
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&table), 4 * cfg.num_rows() * H), "cudaMalloc");
    cuda_ok(cudaMemset(table, 0, 4 * cfg.num_rows() * H), "memset");
    const ConstTensorView tv = view(table, {cfg.num_rows(), H}, Device::cuda);
    const TensorView gv = view(table, {cfg.num_rows(), H}, Device::cuda);
    print_figure((std::string(names[c]) + "_bias").c_str(), shape, "bf16",
                 median_ms(repeats, static_cast<int>(bufs.size()),
                           [&](int i) { relative_bias(cfg, tv, qp, kp, block(i)); }),
                 static_cast<double>(bytes), copy);
    print_figure((std::string(names[c]) + "_bias_backward").c_str(), shape, "bf16",
                 median_ms(repeats, static_cast<int>(bufs.size()),
                           [&](int i) { relative_bias_backward(cfg, block(i), qp, kp, gv); }),
                 static_cast<double>(bytes), copy);
    cudaFree(table);
  }
  cudaFree(dpos);
  for (void* b : bufs) cudaFree(b);
  return 0;
}
