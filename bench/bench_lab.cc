// bench/bench_lab.cc: one training step (forward, backward and AdamW) per encoding of the lab's model at
// `posenc lab`'s small scale (the default: 2 layers, d_model 64, 4 heads, MLP 256, batch 32 x 64 tokens)
// and its medium one (4 layers, d_model 128, 4 heads, MLP 512, 32 x 128 tokens), vocabulary 63; the
// small step's matrix products (lab/kernels.h) one by one, each next to the same run's limits: the fp32
// FMA peak of the same threads (compute_peak.h) and OpenBLAS's sgemm of the same shape on as many
// threads, with the core OpenBLAS chose for this CPU in the context (on a core it does not know it
// runs generic kernels; OPENBLAS_CORETYPE overrides it); and the step's attention, forward and backward,
// on the lab's kernels beside posenc's fused attention. A step reports its wall time (ms_median) and
// this process's CPU time per step, every thread, user + system (cpu_ms_per_step).
// bench/lab_vs_torch.py runs this beside the same model in PyTorch.
//
// FLOP of a step: 6 per matrix parameter per token (forward 2, backward 4; the tied output layer
// included) plus causal attention (4 T^2 D / 2 per head forward, 2.5x that backward).
// vs_peak = GFLOP/s / FMA peak GFLOP/s; vs_sgemm = the lab's product GFLOP/s / sgemm's.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench_limits.h"
#include "compute_peak.h"
#include "experiment.h"
#include "kernels.h"
#include "attention.h"
#include "model.h"
#include "posenc/attention.h"
#include "optimizer.h"

namespace {

using posenc::lab::EncodingSpec;

// Once per run, before OpenBLAS's threads exist; the best of 10 measurements (each the best of 3 loops of
// ~15 ms): on a machine shared with other work a loop that loses its core for a moment reads low.
double fma_peak() {
  static const double peak = [] {
    double best = 0;
    for (int i = 0; i < 10; ++i) best = std::max(best, posenc::bench::fma_peak_gflops());
    return best;
  }();
  return peak;
}

const char* kEncodings[] = {"none", "rope", "alibi", "t5", "shaw", "xl", "learned"};
// The model shapes of `posenc lab --scale NAME` (lab/experiment.h), one training step each.
const char* kScales[] = {"small", "medium"};
constexpr int64_t kVocab = 63;
constexpr int64_t kBatch = 32;  // windows per step at every scale (2,048 tokens small, 4,096 medium)

posenc::lab::ModelConfig step_config(int64_t encoding, int64_t scale) {
  const posenc::lab::ScalePreset& p = posenc::lab::scale_preset(kScales[scale]);
  posenc::lab::ModelConfig c;
  c.vocab_size = kVocab;
  c.d_model = p.d_model, c.layers = p.layers, c.heads = p.heads, c.mlp = p.mlp, c.train_len = p.train_len;
  c.encoding = EncodingSpec::parse(kEncodings[encoding]);
  return c;
}

// This process's CPU time, user + system, every thread: what a step costs the machine whatever else
// runs on it (on 2 threads, the pool's waits included).
double process_cpu_seconds() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

void BM_lab_train_step(benchmark::State& state) {
  const posenc::lab::ModelConfig c = step_config(state.range(0), state.range(1));
  posenc::lab::Model model(c, 1);
  const int64_t B = kBatch, T = c.train_len, N = B * T;
  std::mt19937 rng(1);
  std::vector<int32_t> tokens(static_cast<size_t>(N)), targets(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>(rng() % kVocab), targets[i] = static_cast<int32_t>(rng() % kVocab);
  posenc::lab::AdamW optimizer({});
  auto step = [&] {
    model.forward(tokens.data(), targets.data(), B, T);
    model.zero_grad();
    model.backward();
    optimizer.step(model, 1e-4);
  };
  // Untimed, as PyTorch's warm-up in lab_vs_torch.py: the first step allocates the activations and
  // AdamW's moments (at the medium scale, 14 ms per step spread over a run of 12).
  step();
  std::vector<double> steps;
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    const double t0 = posenc::bench::now_seconds();
    step();
    steps.push_back(posenc::bench::now_seconds() - t0);
  }
  const double cpu = process_cpu_seconds() - cpu0;
  double seconds = 0;
  for (double s : steps) seconds += s;
  std::sort(steps.begin(), steps.end());
  const double C = static_cast<double>(c.d_model), F = static_cast<double>(c.mlp),
               L = static_cast<double>(c.layers);
  const double matrix_params = L * (3 * C * C + C * C + 2 * C * F) + static_cast<double>(c.vocab_size) * C;
  const double attention = L * 3.5 * 4.0 * static_cast<double>(B * T * T) * C / 2.0;
  const double flops = 6.0 * matrix_params * static_cast<double>(N) + attention;
  const double gflops = flops * static_cast<double>(steps.size()) / seconds / 1e9;
  state.SetLabel(std::string(kEncodings[state.range(0)]) + ", " + kScales[state.range(1)]);
  state.counters["GFLOPs"] = gflops;
  state.counters["vs_peak"] = gflops / fma_peak();
  state.counters["ms_median"] = 1e3 * steps[steps.size() / 2];
  state.counters["ms_min"] = 1e3 * steps.front();
  state.counters["cpu_ms_per_step"] = 1e3 * cpu / static_cast<double>(steps.size());
  state.counters["tokens_per_s"] = static_cast<double>(N) * static_cast<double>(steps.size()) / seconds;
}

// The attention of a step (encoding none: causal, 1 / sqrt(D)), forward and backward at the step's
// shape, on the lab's kernels (lab/attention.h) and on posenc's fused attention, the same inputs; the best
// of many calls each (a noisy machine slows some calls, never speeds one up), the two alternated.
void BM_lab_attention(benchmark::State& state) {
  const posenc::lab::ModelConfig c = step_config(0, state.range(0));
  const int64_t B = kBatch, T = c.train_len, H = c.heads, D = c.head_dim(), C = c.d_model, N = B * T;
  const auto qkv = posenc::bench::random_floats(static_cast<size_t>(N * 3 * C), 1);
  const auto dout = posenc::bench::random_floats(static_cast<size_t>(N * C), 2);
  std::vector<float> out(static_cast<size_t>(N * C)), lse(static_cast<size_t>(B * H * T)), dqkv(qkv.size());
  std::vector<int64_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[static_cast<size_t>(t)] = t;
  posenc::AttentionConfig cfg;
  cfg.causal = true;
  posenc::lab::LabAttention lab;
  auto part = [&](auto* x, int64_t which) {
    return posenc::strided_view(x + which * C, {B, T, H, D}, {T * 3 * C, 3 * C, D, 1});
  };
  const posenc::AttentionInputs in =
      posenc::qkv(part(qkv.data(), 0), part(qkv.data(), 1), part(qkv.data(), 2));
  posenc::AttentionGrads grads;
  grads.q = part(dqkv.data(), 0), grads.k = part(dqkv.data(), 1), grads.v = part(dqkv.data(), 2);
  const auto pos = posenc::view(static_cast<const int64_t*>(positions.data()), {T});
  double lab_f = 1e9, lab_b = 1e9, posenc_f = 1e9, posenc_b = 1e9;
  auto best = [](double& b, const auto& fn) {
    const double t0 = posenc::bench::now_seconds();
    fn();
    b = std::min(b, posenc::bench::now_seconds() - t0);
  };
  for (auto _ : state) {
    for (int rep = 0; rep < 5; ++rep) {
      best(lab_f, [&] { lab.forward(cfg, qkv.data(), B, T, H, D, pos, out.data(), lse.data()); });
      best(lab_b, [&] {
        lab.backward(cfg, qkv.data(), B, T, H, D, pos, out.data(), lse.data(), dout.data(), dqkv.data(), {});
      });
      best(posenc_f, [&] {
        posenc::attention_forward(cfg, in, posenc::view(out.data(), {B, T, H, D}),
                                  posenc::view(lse.data(), {B, H, T}));
      });
      std::fill(dqkv.begin(), dqkv.end(), 0.0f);  // posenc's backward accumulates; the lab's stores
      best(posenc_b, [&] {
        posenc::attention_backward(cfg, in, posenc::view(static_cast<const float*>(out.data()), {B, T, H, D}),
                                   posenc::view(static_cast<const float*>(lse.data()), {B, H, T}),
                                   posenc::view(dout.data(), {B, T, H, D}), grads);
      });
    }
  }
  state.SetLabel(std::string(kScales[state.range(0)]) + ": B " + std::to_string(B) + ", T " +
                 std::to_string(T) + ", H " + std::to_string(H) + ", D " + std::to_string(D));
  state.counters["lab_fwd_ms"] = 1e3 * lab_f;
  state.counters["lab_bwd_ms"] = 1e3 * lab_b;
  state.counters["posenc_fwd_ms"] = 1e3 * posenc_f;
  state.counters["posenc_bwd_ms"] = 1e3 * posenc_b;
  state.counters["vs_posenc"] = (posenc_f + posenc_b) / (lab_f + lab_b);
}

// The step's products: C (m, n) = A (m, k) B (k, n) in the three layouts of a linear layer.
struct Product {
  const char* name;
  int64_t m, n, k;
  char layout;  // 'f' forward: inp W^T;  'd' d inp: dout W;  'w' d weight: dout^T inp (accumulating)
};
const Product kProducts[] = {
    {"fwd qkv", 2048, 192, 64, 'f'},         {"fwd fc", 2048, 256, 64, 'f'},
    {"fwd fc_proj", 2048, 64, 256, 'f'},     {"fwd logits", 2048, 63, 64, 'f'},
    {"dinp qkv", 2048, 64, 192, 'd'},        {"dinp fc_proj", 2048, 256, 64, 'd'},
    {"dinp fc", 2048, 64, 256, 'd'},         {"dweight qkv", 192, 64, 2048, 'w'},
    {"dweight fc_proj", 64, 256, 2048, 'w'},
};

void BM_lab_matmul(benchmark::State& state) {
  const Product& p = kProducts[state.range(0)];
  const int threads = posenc::num_threads();
  openblas_set_num_threads(threads);
  // Row-major storage: forward A (m, k), W (n, k); d inp A (m, k), W (k, n); d weight dout (k, m), inp (k,
  // n).
  const auto a = posenc::bench::random_floats(static_cast<size_t>(p.m * p.k), 1);
  const auto b = posenc::bench::random_floats(static_cast<size_t>(p.k * p.n), 2);
  std::vector<float> c(static_cast<size_t>(p.m * p.n), 0.0f);
  posenc::lab::kernels::Gemm g;
  g.m = p.m, g.n = p.n, g.k = p.k, g.c = c.data(), g.ldc = p.n;
  g.a = p.layout == 'w' ? posenc::lab::kernels::Matrix{a.data(), 1, p.m}
                        : posenc::lab::kernels::Matrix{a.data(), p.k, 1};
  g.b = p.layout == 'f' ? posenc::lab::kernels::Matrix{b.data(), 1, p.k}
                        : posenc::lab::kernels::Matrix{b.data(), p.n, 1};
  g.accumulate = p.layout == 'w';
  auto sgemm = [&] {
    const int m = static_cast<int>(p.m), n = static_cast<int>(p.n), k = static_cast<int>(p.k);
    if (p.layout == 'f')
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f,
                  c.data(), n);
    else if (p.layout == 'd')
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f,
                  c.data(), n);
    else
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), m, b.data(), n, 1.0f,
                  c.data(), n);
  };
  // Best of many calls each (a noisy machine slows some calls, never speeds one up): the lab's product
  // first, then OpenBLAS's, so that its threads (which spin after a call) do not share the cores with it.
  double lab = 1e9, blas = 1e9;
  for (auto _ : state) {
    for (int rep = 0; rep < 20; ++rep) {
      const double t0 = posenc::bench::now_seconds();
      posenc::lab::kernels::gemm(g);
      lab = std::min(lab, posenc::bench::now_seconds() - t0);
    }
    for (int rep = 0; rep < 20; ++rep) {
      const double t0 = posenc::bench::now_seconds();
      sgemm();
      blas = std::min(blas, posenc::bench::now_seconds() - t0);
    }
  }
  openblas_set_num_threads(1);  // its threads asleep for what runs next
  const double flops = 2.0 * static_cast<double>(p.m * p.n * p.k);
  state.SetLabel(std::string(p.name) + ", " + std::to_string(p.m) + " x " + std::to_string(p.n) + " x " +
                 std::to_string(p.k));
  state.counters["GFLOPs"] = flops / lab / 1e9;
  state.counters["sgemm_GFLOPs"] = flops / blas / 1e9;
  state.counters["vs_sgemm"] = blas / lab;
  state.counters["vs_peak"] = flops / lab / 1e9 / fma_peak();
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name = "unknown", family, model;
  auto value = [](const std::string& l) { return l.substr(l.find(':') + 2); };
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 && name == "unknown") name = value(line);
    if (line.rfind("cpu family", 0) == 0 && family.empty()) family = value(line);
    if (line.rfind("model\t", 0) == 0 && model.empty()) model = value(line);
  }
  return name + " (family " + family + ", model " + model + ")";
}

}  // namespace

BENCHMARK(BM_lab_train_step)
    ->ArgNames({"enc", "scale"})
    ->ArgsProduct({benchmark::CreateDenseRange(0, 6, 1), {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lab_attention)
    ->ArgNames({"scale"})
    ->DenseRange(0, 1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lab_matmul)
    ->ArgNames({"product"})
    ->DenseRange(0, static_cast<int64_t>(std::size(kProducts)) - 1)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cpu", cpu_name());
  benchmark::AddCustomContext("threads", std::to_string(posenc::num_threads()));
  benchmark::AddCustomContext("fma_peak_GFLOPs", std::to_string(fma_peak()));
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  for (int64_t scale = 0; scale < static_cast<int64_t>(std::size(kScales)); ++scale) {
    const posenc::lab::ModelConfig c = step_config(0, scale);  // what bench/lab_vs_torch.py builds in PyTorch
    benchmark::AddCustomContext(
        std::string("step_") + kScales[scale],
        "vocab " + std::to_string(c.vocab_size) + " d_model " + std::to_string(c.d_model) + " layers " +
            std::to_string(c.layers) + " heads " + std::to_string(c.heads) + " mlp " + std::to_string(c.mlp) +
            " batch " + std::to_string(kBatch) + " length " + std::to_string(c.train_len));
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
