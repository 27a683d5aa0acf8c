// bench/bench_kv_cache.cc: decode, one new token against a long KV cache; bandwidth-bound (it
// reads every cached key and value once): limits = a memcpy of the same bytes and a read of the same
// bytes (the fair limit of a kernel that only reads), timed in the same iterations. Reports tokens/s,
// vs_memcpy and vs_read.
#include <cstring>

#include "bench_limits.h"
#include "posenc/attention.h"
#include "posenc/kv_cache.h"
#include "posenc/threads.h"
#include "src/half.h"

namespace {
using namespace posenc::bench;

// One token against a cache of range(0) tokens, range(2) query heads over range(1) key/value heads,
// D 128, RoPE + ALiBi (the most work per key of the scalar encodings), on range(3) threads (0: all),
// keys and values stored in fp32 (range(4) = 0) or bf16 (1, 2: half the bytes per step; the
// target is >= 1.8x the fp32 cache's tokens/s), q fp32 (0, 1) or bf16 (2: a model running in bf16,
// whose rotated q is rounded to bf16 as Rope::forward returns it, so q.k runs on vdpbf16ps where the
// CPU has it). The memcpy limit copies the cache's own bytes.
void BM_attention_decode(benchmark::State& state) {
  const int64_t K = state.range(0), Hkv = state.range(1), H = state.range(2), D = 128;
  if (state.range(3) > 0) posenc::set_num_threads(static_cast<int>(state.range(3)));
  posenc::RopeConfig rc;
  rc.head_dim = D;
  const posenc::Rope rope(rc);
  const posenc::DType dtype = state.range(4) >= 1 ? posenc::DType::bf16 : posenc::DType::f32;
  const bool q_bf16 = state.range(4) == 2;
  state.SetLabel(state.range(4) == 0 ? "f32 cache" : q_bf16 ? "bf16 cache, bf16 q" : "bf16 cache, f32 q");
  posenc::KVCache cache(1, Hkv, D, &rope, dtype);
  {
    const std::vector<float> k = random_floats(K * Hkv * D, 8), v = random_floats(K * Hkv * D, 9);
    cache.append(posenc::view(k.data(), {1, K, Hkv, D}), posenc::view(v.data(), {1, K, Hkv, D}));
  }
  posenc::AttentionConfig cfg;
  cfg.causal = true;
  cfg.rope = &rope;
  cfg.bias.kind = posenc::AttentionBias::Kind::alibi;
  cfg.bias.alibi.heads = H;
  const std::vector<float> q = random_floats(H * D, 10);
  std::vector<posenc::bf16_t> q16(q.size());
  for (size_t i = 0; i < q.size(); ++i) q16[i] = {posenc::detail::f32_to_bf16(q[i])};
  const posenc::ConstTensorView q_view =
      q_bf16 ? posenc::view(q16.data(), {1, 1, H, D}) : posenc::view(q.data(), {1, 1, H, D});
  std::vector<float> out(H * D);
  const double bytes =
      2.0 * K * Hkv * D * (dtype == posenc::DType::bf16 ? 2 : 4);  // every key and value, once
  std::vector<float> src(static_cast<size_t>(bytes / sizeof(float))), dst(src.size()),
      other(src.size(), 1.0f);
  double attend_s = 0, memcpy_s = 0, read_s = 0;
  for (auto _ : state) {
    double t0 = now_seconds();
    cache.attend(cfg, q_view, posenc::view(out.data(), {1, 1, H, D}));
    attend_s += now_seconds() - t0;
    t0 = now_seconds();
    parallel_memcpy(reinterpret_cast<char*>(dst.data()), reinterpret_cast<const char*>(src.data()),
                    src.size() * sizeof(float));
    memcpy_s += now_seconds() - t0;
    t0 = now_seconds();  // a buffer of the cache's size, cold as the cache is (the copy evicted both)
    benchmark::DoNotOptimize(parallel_read(reinterpret_cast<const char*>(other.data()), other.size() * 4));
    read_s += now_seconds() - t0;
    benchmark::ClobberMemory();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["tokens_per_s"] = n / attend_s;
  state.counters["GBps"] = bytes * n / attend_s / 1e9;
  state.counters["memcpy_GBps"] = 2 * bytes * n / memcpy_s / 1e9;  // read + write
  state.counters["vs_memcpy"] = (bytes * n / attend_s) / (2 * bytes * n / memcpy_s);
  state.counters["read_GBps"] = bytes * n / read_s / 1e9;
  state.counters["vs_read"] = read_s / attend_s;
  posenc::set_num_threads(0);
}

}  // namespace

BENCHMARK(BM_attention_decode)
    ->ArgNames({"K", "Hkv", "H", "threads", "bf16"})
    ->Args({32768, 8, 8, 0, 0})
    ->Args({32768, 8, 8, 0, 1})
    ->Args({32768, 8, 8, 0, 2})
    ->Args({32768, 2, 8, 0, 0})
    ->Args({32768, 2, 8, 0, 1})
    ->Args({32768, 2, 8, 0, 2})
    ->Args({32768, 1, 32, 1, 0})  // multi-query, batch 1: flash-decoding splits the cache across threads
    ->Args({32768, 1, 32, 2, 0})
    ->Args({32768, 1, 32, 2, 1})
    ->Args({32768, 1, 32, 2, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
