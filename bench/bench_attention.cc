// bench/bench_attention.cc: fused attention next to the machine's own limits, measured in the
// same run on the same thread count:
//   forward, backward: compute-bound; limits = OpenBLAS sgemm of the QK^T shape ((S x D)(D x S)) and
//     the fp32 FMA peak of the same threads (compute_peak.h), both measured after each benchmark.
//     effective FLOP = 4 S^2 D heads for the forward (QK^T and PV), 2.5x that for the backward
//     (QK^T, dP = dO V^T, dV, dK, dQ), halved for causal. vs_sgemm = GFLOP/s / sgemm GFLOP/s.
//   (decode against a long KV cache: bench/bench_kv_cache.cc; MLA's decode here, against keys and
//   values in plain tensors, since the KV cache stores one head size)
//   memory: the process's peak RSS after forwards at growing S (registered first, so nothing
//     else has run): it must grow with S D, not S^2.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <sys/resource.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "bench_limits.h"
#include "compute_peak.h"
#include "posenc/attention.h"
#include "posenc/threads.h"
#include "src/half.h"

namespace {
using posenc::bench::random_floats;

double sgemm_gflops(int64_t S, int64_t D) {
  openblas_set_num_threads(posenc::num_threads());
  const std::vector<float> a = random_floats(S * D, 1), b = random_floats(S * D, 2);
  std::vector<float> c(S * S);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = posenc::bench::now_seconds();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(S), static_cast<int>(S),
                static_cast<int>(D), 1.0f, a.data(), static_cast<int>(D), b.data(), static_cast<int>(D), 0.0f,
                c.data(), static_cast<int>(S));
    best = std::max(best, 2.0 * S * S * D / (posenc::bench::now_seconds() - t0) / 1e9);
  }
  return best;
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// kSoftcap: Gemma 2's logit softcap (50) alone; kSinks: gpt-oss's learned sinks alone.
enum Encoding : int64_t { kNone, kRope, kAlibi, kT5, kSoftcap, kSinks };

// A causal config with one encoding; the Rope and the T5 table live in the fixture. bf16: q, k, v
// and out stored in bf16 (the inputs rounded once from the same random numbers).
struct Fixture {
  int64_t S, D, H = 8;
  std::vector<float> q, k, v, out, lse, table, sinks;
  std::vector<uint16_t> q16, k16, v16, out16;
  posenc::Rope rope;
  posenc::AttentionConfig cfg;
  Fixture(int64_t S_, int64_t D_, int64_t enc)
      : S(S_),
        D(D_),
        q(random_floats(S * H * D, 3)),
        k(random_floats(S * H * D, 4)),
        v(random_floats(S * H * D, 5)),
        out(S * H * D),
        lse(S * H),
        table(random_floats(32 * H, 6)),
        sinks(random_floats(H, 7)),
        rope([&] {
          posenc::RopeConfig rc;
          rc.head_dim = D_;
          return rc;
        }()) {
    cfg.causal = true;
    if (enc == kRope) cfg.rope = &rope;
    if (enc == kAlibi) {
      cfg.bias.kind = posenc::AttentionBias::Kind::alibi;
      cfg.bias.alibi.heads = H;
    }
    if (enc == kSoftcap) cfg.softcap = 50.0;
    if (enc == kSinks) cfg.sinks = posenc::view(sinks.data(), {H});
    if (enc == kT5) {
      cfg.bias.kind = posenc::AttentionBias::Kind::relative;
      cfg.bias.relative = posenc::RelativeBiasConfig::t5(H, 32, 128, false);
      cfg.bias.relative_table = posenc::view(table.data(), {32, H});
    }
  }
  void store_bf16() {
    for (auto [x, x16] : {std::pair{&q, &q16}, std::pair{&k, &k16}, std::pair{&v, &v16}})
      for (float xi : *x) x16->push_back(posenc::detail::f32_to_bf16(xi));
    out16.resize(out.size());
  }
  static posenc::TensorView bf16_view(const std::vector<uint16_t>& x, std::initializer_list<int64_t> shape) {
    posenc::TensorView view =
        posenc::view(const_cast<float*>(reinterpret_cast<const float*>(x.data())), shape);
    view.dtype = posenc::DType::bf16;
    return view;
  }
  posenc::AttentionInputs inputs() const {
    if (!q16.empty())
      return posenc::qkv(bf16_view(q16, {1, S, H, D}), bf16_view(k16, {1, S, H, D}),
                         bf16_view(v16, {1, S, H, D}));
    return posenc::qkv(posenc::view(q.data(), {1, S, H, D}), posenc::view(k.data(), {1, S, H, D}),
                       posenc::view(v.data(), {1, S, H, D}));
  }
  void forward() {
    posenc::attention_forward(
        cfg, inputs(), q16.empty() ? posenc::view(out.data(), {1, S, H, D}) : bf16_view(out16, {1, S, H, D}),
        posenc::view(lse.data(), {1, H, S}));
  }
  double causal_flops() const { return 4.0 * S * S * D * H / 2; }
};

// Compute-bound figures next to two same-run limits: OpenBLAS sgemm of the QK^T shape, and the
// fp32 FMA peak of the same threads (bench/compute_peak.h; sgemm itself reaches only part of it
// with the OPENBLAS_CORETYPE this environment sets).
void report_vs_sgemm(benchmark::State& state, double flops, double seconds, int64_t S, int64_t D) {
  const double gflops = flops * static_cast<double>(state.iterations()) / seconds / 1e9;
  const double sgemm = sgemm_gflops(S, D);
  const double fma = posenc::bench::fma_peak_gflops();
  state.counters["GFLOPs"] = gflops;
  state.counters["sgemm_GFLOPs"] = sgemm;
  state.counters["vs_sgemm"] = gflops / sgemm;
  state.counters["fma_peak_GFLOPs"] = fma;
  state.counters["vs_fma_peak"] = gflops / fma;
}

// The arithmetic limits alone: fp32 FMA and bf16 dot-product peaks on the benchmark's threads.
void BM_compute_peak(benchmark::State& state) {
  double fma = 0, bf16 = 0;
  for (auto _ : state) fma = posenc::bench::fma_peak_gflops(), bf16 = posenc::bench::bf16_dot_peak_gflops();
  state.counters["fma_GFLOPs"] = fma;
  state.counters["bf16_dot_GFLOPs"] = bf16;
  state.counters["threads"] = posenc::num_threads();
}

// range(0): S, range(1): D, range(2): encoding
void BM_attention_forward(benchmark::State& state) {
  Fixture f(state.range(0), state.range(1), state.range(2));
  f.forward();  // warm-up: the first call of a shape maps its buffers (BENCHMARKS.md)
  const double t0 = posenc::bench::now_seconds();
  for (auto _ : state) {
    f.forward();
    benchmark::ClobberMemory();
  }
  report_vs_sgemm(state, f.causal_flops(), posenc::bench::now_seconds() - t0, f.S, f.D);
}

void BM_attention_backward(benchmark::State& state) {
  Fixture f(state.range(0), state.range(1), state.range(2));
  f.forward();
  const std::vector<float> grad_out = random_floats(f.out.size(), 7);
  std::vector<float> gq(f.q.size()), gk(f.k.size()), gv(f.v.size());
  posenc::AttentionGrads g;
  g.q = posenc::view(gq.data(), {1, f.S, f.H, f.D});
  g.k = posenc::view(gk.data(), {1, f.S, f.H, f.D});
  g.v = posenc::view(gv.data(), {1, f.S, f.H, f.D});
  auto backward = [&] {
    posenc::attention_backward(f.cfg, f.inputs(), posenc::view(f.out.data(), {1, f.S, f.H, f.D}),
                               posenc::view(f.lse.data(), {1, f.H, f.S}),
                               posenc::view(grad_out.data(), {1, f.S, f.H, f.D}), g);
  };
  backward();  // warm-up
  const double t0 = posenc::bench::now_seconds();
  for (auto _ : state) {
    backward();
    benchmark::ClobberMemory();
  }
  report_vs_sgemm(state, 2.5 * f.causal_flops(), posenc::bench::now_seconds() - t0, f.S, f.D);
}

// Peak RSS after one forward at S (none, D = 128).
void BM_attention_memory(benchmark::State& state) {
  Fixture f(state.range(0), 128, kNone);
  for (auto _ : state) f.forward();
  state.counters["peak_rss_MiB"] = peak_rss_mib();
  state.counters["inputs_MiB"] = 4.0 * f.q.size() * sizeof(float) / (1 << 20);  // q, k, v, out
  state.counters["one_SxS_fp32_MiB"] = static_cast<double>(f.S) * f.S * sizeof(float) / (1 << 20);
}

// Multi-head latent attention (DeepSeek-V3, modeling_deepseek_v3.py): kMlaHeads, 16 heads with q/k
// heads of 192 (RoPE on the last 64, interleaved) and v heads of 128; kMlaAbsorbed, the absorbed form
// FlashMLA runs: 16 query heads of 576 over one key head of 576 whose first 512 dims are the value
// (a view of the keys, nothing copied), RoPE on [512, 576).
enum MlaForm : int64_t { kMlaHeads, kMlaAbsorbed };
struct MlaFixture {
  int64_t Q, K, H = 16, Hkv, D, Dv;
  std::vector<float> q, k, v, out, lse;
  posenc::Rope rope;
  posenc::AttentionConfig cfg;
  MlaFixture(int64_t Q_, int64_t K_, int64_t form, bool with_rope)
      : Q(Q_),
        K(K_),
        Hkv(form == kMlaHeads ? 16 : 1),
        D(form == kMlaHeads ? 192 : 576),
        Dv(form == kMlaHeads ? 128 : 512),
        q(random_floats(Q * H * D, 3)),
        k(random_floats(K * Hkv * D, 4)),
        v(form == kMlaHeads ? random_floats(K * Hkv * Dv, 5) : std::vector<float>{}),
        out(Q * H * Dv),
        lse(Q * H),
        rope([] {
          posenc::RopeConfig rc;
          rc.head_dim = 64;
          rc.layout = posenc::RopeLayout::interleaved;
          return rc;
        }()) {
    cfg.causal = true;
    if (with_rope) cfg.rope = &rope, cfg.rope_offset = D - 64;
  }
  posenc::AttentionInputs inputs() const {
    const posenc::ConstTensorView values =
        v.empty() ? posenc::strided_view(k.data(), {1, K, 1, Dv}, {K * D, D, D, 1})
                  : posenc::view(v.data(), {1, K, Hkv, Dv});
    return posenc::qkv(posenc::view(q.data(), {1, Q, H, D}), posenc::view(k.data(), {1, K, Hkv, D}), values);
  }
  void forward() {
    posenc::attention_forward(cfg, inputs(), posenc::view(out.data(), {1, Q, H, Dv}),
                              posenc::view(lse.data(), {1, H, Q}));
  }
};

// Prefill, causal, RoPE on the sub-range: FLOP = 2 Q K H (D + Dv) / 2 (q.k over D, p.v over Dv).
// range(0): S, range(1): form.
void BM_attention_mla_forward(benchmark::State& state) {
  MlaFixture f(state.range(0), state.range(0), state.range(1), true);
  f.forward();  // warm-up
  const double t0 = posenc::bench::now_seconds();
  for (auto _ : state) {
    f.forward();
    benchmark::ClobberMemory();
  }
  report_vs_sgemm(state, 1.0 * f.Q * f.K * f.H * (f.D + f.Dv), posenc::bench::now_seconds() - t0, f.Q, f.D);
}

// Decode, one token against a cache of range(0) tokens whose keys are stored rotated (as an engine's
// cache: no RoPE in the step): bandwidth-bound, limit = a memcpy of the cache's bytes (keys and
// values; the absorbed form reads one 576-dim row per token for both).
void BM_attention_mla_decode(benchmark::State& state) {
  MlaFixture f(1, state.range(0), state.range(1), false);
  const double bytes = 4.0 * f.K * f.Hkv * (f.D + (f.v.empty() ? 0 : f.Dv));
  f.forward();  // warm-up
  const posenc::bench::LoopTimer timer;
  for (auto _ : state) {
    f.forward();
    benchmark::ClobberMemory();
  }
  state.counters["tokens_per_s"] = static_cast<double>(state.iterations()) / timer.seconds();
  posenc::bench::report_vs_memcpy(state, timer, bytes, static_cast<size_t>(bytes) / 2);
}

// Decode, one token (8 query heads, D 128) against keys and values of range(0) tokens and range(1)
// kv heads stored in fp32 (range(2) = 0) or bf16 (1): half the bytes, widened a tile at a time.
void BM_attention_decode_storage(benchmark::State& state) {
  const int64_t K = state.range(0), Hkv = state.range(1), H = 8, D = 128;
  const bool bf16 = state.range(2) == 1;
  state.SetLabel(bf16 ? "bf16 cache" : "fp32 cache");
  const std::vector<float> k = random_floats(K * Hkv * D, 8), v = random_floats(K * Hkv * D, 9);
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  for (size_t i = 0; i < k.size(); ++i)
    k16[i] = posenc::detail::f32_to_bf16(k[i]), v16[i] = posenc::detail::f32_to_bf16(v[i]);
  const std::vector<float> q = random_floats(H * D, 10);
  std::vector<float> out(H * D);
  posenc::AttentionConfig cfg;
  cfg.causal = true;
  auto kv_view = [&](const std::vector<float>& x, const std::vector<uint16_t>& x16) {
    posenc::ConstTensorView view =
        posenc::view(bf16 ? reinterpret_cast<const float*>(x16.data()) : x.data(), {1, K, Hkv, D});
    if (bf16) view.dtype = posenc::DType::bf16;
    return view;
  };
  const posenc::AttentionInputs in =
      posenc::qkv(posenc::view(q.data(), {1, 1, H, D}), kv_view(k, k16), kv_view(v, v16));
  const double bytes = 2.0 * K * Hkv * D * (bf16 ? 2 : 4);
  const posenc::bench::LoopTimer timer;
  for (auto _ : state) {
    posenc::attention_forward(cfg, in, posenc::view(out.data(), {1, 1, H, D}), posenc::TensorView{});
    benchmark::ClobberMemory();
  }
  state.counters["tokens_per_s"] = static_cast<double>(state.iterations()) / timer.seconds();
  posenc::bench::report_vs_memcpy(state, timer, bytes, static_cast<size_t>(bytes) / 2);
}

// Prefill, S 4096, D 128, 8 heads, causal, encoding range(0), q k v out in fp32 (range(1) = 0) or
// bf16 (1: the logits by vdpbf16ps where the CPU has it, src/cpu/bf16_dot.h; 2: and
// round_probabilities, P V by vdpbf16ps too). One warm-up call, then 3 timed; rated against the
// fp32 FMA peak and the bf16 dot peak of the same threads.
void BM_attention_prefill_storage(benchmark::State& state) {
  Fixture f(4096, 128, state.range(0));
  const bool bf16 = state.range(1) >= 1;
  f.cfg.round_probabilities = state.range(1) == 2;
  state.SetLabel(!bf16 ? "fp32" : f.cfg.round_probabilities ? "bf16 rounded P" : "bf16");
  if (bf16) f.store_bf16();
  f.forward();
  const double t0 = posenc::bench::now_seconds();
  for (auto _ : state) {
    f.forward();
    benchmark::ClobberMemory();
  }
  const double gflops =
      f.causal_flops() * static_cast<double>(state.iterations()) / (posenc::bench::now_seconds() - t0) / 1e9;
  const double fma = posenc::bench::fma_peak_gflops(), dot = posenc::bench::bf16_dot_peak_gflops();
  state.counters["GFLOPs"] = gflops;
  state.counters["vs_fma_peak"] = gflops / fma;
  state.counters["vs_bf16_peak"] = dot > 0 ? gflops / dot : 0.0;
}

// The encodings and score mechanisms side by side at a reference shape, S 4096, D 128.
void every_encoding_at_4096_by_128(benchmark::internal::Benchmark* b) {
  for (int64_t enc : {kNone, kRope, kAlibi, kT5, kSoftcap, kSinks}) b->Args({4096, 128, enc});
}

}  // namespace

BENCHMARK(BM_compute_peak)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_attention_memory)
    ->ArgNames({"S"})
    ->Arg(4096)
    ->Arg(8192)
    ->Arg(16384)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_attention_forward)
    ->ArgNames({"S", "D", "enc"})
    ->Args({512, 64, kNone})
    ->Args({512, 128, kNone})
    ->Args({2048, 64, kNone})
    ->Args({2048, 128, kNone})
    ->Args({4096, 64, kNone})
    ->Args({4096, 64, kRope})
    ->Args({4096, 64, kAlibi})
    ->Args({4096, 64, kT5})
    ->Apply(every_encoding_at_4096_by_128)
    ->Args({16384, 128, kNone})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_attention_backward)
    ->ArgNames({"S", "D", "enc"})
    ->Args({512, 64, kNone})
    ->Args({4096, 64, kNone})
    ->Args({2048, 128, kNone})
    ->Apply(every_encoding_at_4096_by_128)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_attention_mla_forward)
    ->ArgNames({"S", "form"})
    ->Args({4096, kMlaHeads})
    ->Args({4096, kMlaAbsorbed})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_attention_mla_decode)
    ->ArgNames({"K", "form"})
    ->Args({32768, kMlaHeads})
    ->Args({32768, kMlaAbsorbed})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_attention_decode_storage)
    ->ArgNames({"K", "Hkv", "bf16"})
    ->Args({32768, 8, 0})
    ->Args({32768, 8, 1})
    ->Args({32768, 2, 0})
    ->Args({32768, 2, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_attention_prefill_storage)
    ->ArgNames({"enc", "bf16"})
    ->ArgsProduct({{kNone, kAlibi, kT5}, {0, 1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_attention_backward)
    ->ArgNames({"S", "D", "enc"})
    ->Args({16384, 128, kNone})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_MAIN();
