// bench/cuda/bench_attention_cuda.cc: the fused attention forward on the GPU, bf16, B 4, H 32, S 4096, D 128
// and 64, causal: no bias, ALiBi, T5 (32 buckets, max_distance 128), clipped (max_distance 128), softcap 50,
// sliding window 1024, Shaw (max_distance 128), Transformer-XL (d_model = H D, its tables built in each
// call); no bias at D 256 (Gemma, and its softcap 50) and at q / k 192, v 128 (MLA); the forward and backward
// together at D 128
// with no bias, ALiBi, T5 (its table's gradient), Shaw (its tables' gradients) and Transformer-XL (u, v and
// W_R's gradients, d_model = H D), every gradient deterministic. TFLOP/s count the FLOPs done (4 B H D per
// visible pair: q.k and P V; the backward 10 B H D more: the recomputed q.k, dP, dV, dQ and dK,
// FlashAttention-2's count), as the anchors of scripts/gpu_anchors.py count theirs (the same run times a
// large bf16 matmul as the limit). On a Hopper GPU the forward's rows without Shaw's terms run on the sm_90a
// kernel (Transformer-XL's on its key tiles of 64); the rows marked "tiled" run the same calls on the tiled
// kernel, which every GPU runs. One JSON line per figure on stdout; run by scripts/gpu_check.sh.
//   usage: bench_attention_cuda [repeats]
#include <algorithm>
#include <cstdlib>
#include <string>

#include "cuda_timing.h"
#include "posenc/attention.h"
#include "posenc/device.h"
#include "src/cuda/attention.h"

namespace {
using namespace posenc;
using namespace posenc::bench;

// Visible (query, key) pairs of a causal prefill of S tokens, optionally within a window.
double visible_pairs(int64_t S, int64_t window) {
  double pairs = 0;
  for (int64_t i = 0; i < S; ++i) pairs += static_cast<double>(window > 0 ? std::min(window, i + 1) : i + 1);
  return pairs;
}

TensorView bf16_view(void* data, std::initializer_list<int64_t> shape) {
  TensorView v = view(static_cast<float*>(data), shape, Device::cuda);
  v.dtype = DType::bf16;
  return v;
}
// The forward and backward of a training step at D 128 (every gradient bf16 but the tables').
void forward_backward_rows(int repeats, int64_t B, int64_t H, int64_t S) {
  const int64_t D = 128, rows = 257;
  const size_t bytes = static_cast<size_t>(B * S * H * D) * 2;
  const std::vector<void*> q = random_device_sets(1, bytes), k = random_device_sets(1, bytes),
                           v = random_device_sets(1, bytes), out = random_device_sets(1, bytes),
                           grad_out = random_device_sets(1, bytes), dq = random_device_sets(1, bytes),
                           dk = random_device_sets(1, bytes), dv = random_device_sets(1, bytes);
  float *lse, *tables;  // lse (B, H, S); the T5 table and its gradient, Shaw's a_k, a_v and their gradients
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&lse), 4 * B * H * S), "cudaMalloc");
  const size_t table_floats = 2 * 32 * H + 4 * rows * D;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&tables), 4 * table_floats), "cudaMalloc");
  cuda_ok(cudaMemset(tables, 0, 4 * table_floats), "memset");
  const AttentionInputs in =
      qkv(bf16_view(q[0], {B, S, H, D}), bf16_view(k[0], {B, S, H, D}), bf16_view(v[0], {B, S, H, D}));
  const TensorView o = bf16_view(out[0], {B, S, H, D}), l = view(lse, {B, H, S}, Device::cuda);
  AttentionGrads grads;
  grads.q = bf16_view(dq[0], {B, S, H, D}), grads.k = bf16_view(dk[0], {B, S, H, D});
  grads.v = bf16_view(dv[0], {B, S, H, D});
  grads.accumulate = false;  // written, as an autograd step's fresh gradients are (posenc.torch, the anchors)
  struct Variant {
    const char* name;
    AttentionConfig config;
    AttentionGrads grads;
  };
  AttentionConfig none;
  none.causal = true;
  AttentionConfig alibi = none;
  alibi.bias.kind = AttentionBias::Kind::alibi;
  alibi.bias.alibi.heads = H;
  AttentionConfig t5 = none;
  t5.bias.kind = AttentionBias::Kind::relative;
  t5.bias.relative = RelativeBiasConfig::t5(H, 32, 128, false);
  t5.bias.relative_table = view(tables, {32, H}, Device::cuda);
  AttentionGrads t5_grads = grads;
  t5_grads.relative_table = view(tables + 32 * H, {32, H}, Device::cuda);
  AttentionConfig shaw = none;
  float* shaw_tables = tables + 2 * 32 * H;
  shaw.shaw = AttentionShaw{ShawConfig{128, D}, view(shaw_tables, {rows, D}, Device::cuda),
                            view(shaw_tables + rows * D, {rows, D}, Device::cuda)};
  AttentionGrads shaw_grads = grads;
  shaw_grads.shaw_a_k = view(shaw_tables + 2 * rows * D, {rows, D}, Device::cuda);
  shaw_grads.shaw_a_v = view(shaw_tables + 3 * rows * D, {rows, D}, Device::cuda);
  // Transformer-XL, d_model = H D: u, v, W_R and their gradients, zero (the work does not depend on them).
  const int64_t d_model = H * D;
  const size_t xl_floats = static_cast<size_t>(2 * (2 * H * D + H * D * d_model));
  float* xl;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&xl), 4 * xl_floats), "cudaMalloc");
  cuda_ok(cudaMemset(xl, 0, 4 * xl_floats), "memset");
  float* xl_grads = xl + xl_floats / 2;
  AttentionConfig transformer_xl = none;
  transformer_xl.transformer_xl = AttentionTransformerXL{
      TransformerXLConfig{d_model, H, D, 10000.0}, view(xl, {H, D}, Device::cuda),
      view(xl + H * D, {H, D}, Device::cuda), view(xl + 2 * H * D, {H * D, d_model}, Device::cuda)};
  AttentionGrads xl_param_grads = grads;
  xl_param_grads.transformer_xl_u = view(xl_grads, {H, D}, Device::cuda);
  xl_param_grads.transformer_xl_v = view(xl_grads + H * D, {H, D}, Device::cuda);
  xl_param_grads.transformer_xl_w_r = view(xl_grads + 2 * H * D, {H * D, d_model}, Device::cuda);
  const Variant variants[] = {
      {"none", none, grads},         {"alibi", alibi, grads},
      {"t5", t5, t5_grads},          {"t5 table frozen", t5, grads},
      {"shaw128", shaw, shaw_grads}, {"transformer_xl", transformer_xl, xl_param_grads}};
  const std::string shape =
      "B" + std::to_string(B) + " H" + std::to_string(H) + " S" + std::to_string(S) + " D128 causal";
  const auto row = [&](const Variant& var, const char* suffix) {
    const double ms = median_ms(repeats, 1, [&](int) {
      attention_forward(var.config, in, o, l);
      attention_backward(var.config, in, o, l, bf16_view(grad_out[0], {B, S, H, D}), var.grads);
    });
    const double flops = 14.0 * B * H * D * visible_pairs(S, 0);
    std::printf(
        "{\"op\": \"attention_forward_backward\", \"variant\": \"%s%s\", \"shape\": \"%s\", "
        "\"dtype\": \"bf16\", \"ms\": %.4f, \"tflops\": %.1f}\n",
        var.name, suffix, shape.c_str(), ms, flops / (ms * 1e-3) / 1e12);
    std::fflush(stdout);
  };
  for (const Variant& var : variants) row(var, "");
  // The backward's sm_90a kernel takes none, ALiBi and T5 (its table's gradient or a frozen table): those
  // once more on the tiled passes.
  if (cuda::attention_sm90_available() && cuda::attention_backward_choice != cuda::AttentionKernel::tiled) {
    cuda::attention_backward_choice = cuda::AttentionKernel::tiled;
    for (size_t i : {0, 1, 2, 3}) row(variants[i], " tiled backward");
    cuda::attention_backward_choice = cuda::AttentionKernel::automatic;
  }
  cudaFree(lse), cudaFree(tables), cudaFree(xl);
  for (const auto* set : {&q, &k, &v, &out, &grad_out, &dq, &dk, &dv}) cudaFree((*set)[0]);
}
}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 10;
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_attention_cuda: no CUDA device\n");
    return 2;
  }
  // POSENC_TEST_FORWARD_KERNEL=tiled: every row on the tiled kernel (scripts/gpu_check.sh sets it when the
  // sm_90a kernel failed its first test).
  const char* kernel = std::getenv("POSENC_TEST_FORWARD_KERNEL");
  const bool tiled_only = kernel != nullptr && std::string(kernel) == "tiled";
  if (tiled_only) cuda::attention_forward_choice = cuda::AttentionKernel::tiled;
  // POSENC_TEST_BACKWARD_KERNEL=tiled: the same for the backward.
  const char* backward_kernel = std::getenv("POSENC_TEST_BACKWARD_KERNEL");
  if (backward_kernel != nullptr && std::string(backward_kernel) == "tiled")
    cuda::attention_backward_choice = cuda::AttentionKernel::tiled;
  const int64_t B = 4, H = 32, S = 4096;
  for (int64_t D : {128, 64}) {
    const size_t bytes = static_cast<size_t>(B * S * H * D) * 2;
    const std::vector<void*> q = random_device_sets(1, bytes), k = random_device_sets(1, bytes),
                             v = random_device_sets(1, bytes), out = random_device_sets(1, bytes);
    float* table;
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&table), 4 * 257 * H), "cudaMalloc");
    cuda_ok(cudaMemset(table, 0, 4 * 257 * H), "memset");
    const AttentionInputs in =
        qkv(bf16_view(q[0], {B, S, H, D}), bf16_view(k[0], {B, S, H, D}), bf16_view(v[0], {B, S, H, D}));
    const TensorView o = bf16_view(out[0], {B, S, H, D});
    struct Variant {
      const char* name;
      AttentionConfig config;
      int64_t window;
    };
    std::vector<Variant> variants;
    AttentionConfig base;
    base.causal = true;
    variants.push_back({"none", base, 0});
    AttentionConfig alibi = base;
    alibi.bias.kind = AttentionBias::Kind::alibi;
    alibi.bias.alibi.heads = H;
    variants.push_back({"alibi", alibi, 0});
    AttentionConfig t5 = base;
    t5.bias.kind = AttentionBias::Kind::relative;
    t5.bias.relative = RelativeBiasConfig::t5(H, 32, 128, false);
    t5.bias.relative_table = view(table, {32, H}, Device::cuda);
    variants.push_back({"t5", t5, 0});
    AttentionConfig clipped = base;
    clipped.bias.kind = AttentionBias::Kind::relative;
    clipped.bias.relative = RelativeBiasConfig::clipped(H, 128);
    clipped.bias.relative_table = view(table, {257, H}, Device::cuda);
    variants.push_back({"clipped", clipped, 0});
    AttentionConfig softcap = base;
    softcap.softcap = 50;
    variants.push_back({"softcap", softcap, 0});
    AttentionConfig window = base;
    window.window = 1024;
    variants.push_back({"window1024", window, 1024});
    AttentionConfig shaw = base;  // Shaw's key and value terms, max_distance 128: a_k, a_v (257, D) zero
    float* shaw_tables;
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&shaw_tables), 2 * 4 * 257 * D), "cudaMalloc");
    cuda_ok(cudaMemset(shaw_tables, 0, 2 * 4 * 257 * D), "memset");
    shaw.shaw = AttentionShaw{ShawConfig{128, D}, view(shaw_tables, {257, D}, Device::cuda),
                              view(shaw_tables + 257 * D, {257, D}, Device::cuda)};
    variants.push_back({"shaw128", shaw, 0});
    // Transformer-XL with d_model = H D (as the paper's models): u, v (H, D) and W_R (H D, H D) zero (the
    // work does not depend on them); each call tabulates W_R R over the S deltas causal attention sees, then
    // runs the fused forward.
    const int64_t d_model = H * D;
    const size_t xl_bytes = static_cast<size_t>(2 * H * D + H * D * d_model) * 4;
    float* xl;
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&xl), xl_bytes), "cudaMalloc");
    cuda_ok(cudaMemset(xl, 0, xl_bytes), "memset");
    AttentionConfig transformer_xl = base;
    transformer_xl.transformer_xl = AttentionTransformerXL{
        TransformerXLConfig{d_model, H, D, 10000.0}, view(xl, {H, D}, Device::cuda),
        view(xl + H * D, {H, D}, Device::cuda), view(xl + 2 * H * D, {H * D, d_model}, Device::cuda)};
    variants.push_back({"transformer_xl", transformer_xl, 0});
    const std::string shape = "B4 H32 S4096 D" + std::to_string(D) + " causal";
    const auto row = [&](const Variant& var, const char* suffix) {
      const double ms = median_ms(repeats, 1, [&](int) { attention_forward(var.config, in, o, {}); });
      const double flops = 4.0 * B * H * D * visible_pairs(S, var.window);
      std::printf(
          "{\"op\": \"attention_forward\", \"variant\": \"%s%s\", \"shape\": \"%s\", \"dtype\": \"bf16\", "
          "\"ms\": %.4f, \"tflops\": %.1f}\n",
          var.name, suffix, shape.c_str(), ms, flops / (ms * 1e-3) / 1e12);
      std::fflush(stdout);
    };
    for (const Variant& var : variants) row(var, "");
    if (cuda::attention_sm90_available() && !tiled_only) {  // the scalar terms once more, tiled
      cuda::attention_forward_choice = cuda::AttentionKernel::tiled;
      for (size_t i = 0; i < 5; ++i) row(variants[i], " tiled");  // none, alibi, t5, clipped, softcap
      row(variants.back(), " tiled");                             // transformer_xl
      cuda::attention_forward_choice = cuda::AttentionKernel::automatic;
    }
    cudaFree(table), cudaFree(shaw_tables), cudaFree(xl);
    for (const auto* set : {&q, &k, &v, &out}) cudaFree((*set)[0]);
  }
  {  // head dims of Gemma (256) and of MLA (q / k 192, v 128)
    for (const auto& [D, Dv] : {std::pair<int64_t, int64_t>{256, 256}, {192, 128}}) {
      const std::vector<void*> q = random_device_sets(1, static_cast<size_t>(B * S * H * D) * 2),
                               k = random_device_sets(1, static_cast<size_t>(B * S * H * D) * 2),
                               v = random_device_sets(1, static_cast<size_t>(B * S * H * Dv) * 2),
                               out = random_device_sets(1, static_cast<size_t>(B * S * H * Dv) * 2);
      const AttentionInputs in =
          qkv(bf16_view(q[0], {B, S, H, D}), bf16_view(k[0], {B, S, H, D}), bf16_view(v[0], {B, S, H, Dv}));
      AttentionConfig causal;
      causal.causal = true;
      AttentionConfig softcap = causal;  // Gemma 2's
      softcap.softcap = 50;
      const std::string shape = "B4 H32 S4096 D" + std::to_string(D) + " Dv" + std::to_string(Dv) + " causal";
      const auto row = [&](const AttentionConfig& config, const char* variant) {
        const double ms = median_ms(repeats, 1, [&](int) {
          attention_forward(config, in, bf16_view(out[0], {B, S, H, Dv}), {});
        });
        const double flops = 2.0 * B * H * (D + Dv) * visible_pairs(S, 0);
        std::printf(
            "{\"op\": \"attention_forward\", \"variant\": \"%s\", \"shape\": \"%s\", \"dtype\": \"bf16\", "
            "\"ms\": %.4f, \"tflops\": %.1f}\n",
            variant, shape.c_str(), ms, flops / (ms * 1e-3) / 1e12);
        std::fflush(stdout);
      };
      row(causal, "none");
      if (D == 256) row(softcap, "softcap");
      if (cuda::attention_sm90_available() && !tiled_only) {  // once more, tiled
        cuda::attention_forward_choice = cuda::AttentionKernel::tiled;
        row(causal, "none tiled");
        if (D == 256) row(softcap, "softcap tiled");
        cuda::attention_forward_choice = cuda::AttentionKernel::automatic;
      }
      for (const auto* set : {&q, &k, &v, &out}) cudaFree((*set)[0]);
    }
  }
  forward_backward_rows(repeats, B, H, S);
  for (int64_t batch : {1, 16}) {  // decoding
    const int64_t K = 32768, Hq = 32, Hkv = 8, D = 128;
    const size_t cache = static_cast<size_t>(batch * K * Hkv * D) * 2;
    const std::vector<void*> k = random_device_sets(1, cache), v = random_device_sets(1, cache),
                             q = random_device_sets(1, static_cast<size_t>(batch * Hq * D) * 2),
                             out = random_device_sets(1, static_cast<size_t>(batch * Hq * D) * 2);
    const AttentionInputs in = qkv(bf16_view(q[0], {batch, 1, Hq, D}), bf16_view(k[0], {batch, K, Hkv, D}),
                                   bf16_view(v[0], {batch, K, Hkv, D}));
    AttentionConfig config;
    config.causal = true;
    const double ms = median_ms(repeats, 1, [&](int) {
      attention_forward(config, in, bf16_view(out[0], {batch, 1, Hq, D}), {});
    });
    std::printf(
        "{\"op\": \"attention_decode\", \"variant\": \"none\", \"shape\": \"B%lld K32768 H32/8 D128\", "
        "\"dtype\": \"bf16\", \"ms\": %.4f, \"tb_per_s\": %.3f}\n",
        static_cast<long long>(batch), ms, 2.0 * static_cast<double>(cache) / (ms * 1e-3) / 1e12);
    std::fflush(stdout);
    for (const auto* set : {&q, &k, &v, &out}) cudaFree((*set)[0]);
  }
  return 0;
}
