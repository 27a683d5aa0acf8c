// bench/ggml/compare.cc: posenc next to ggml (the CPU engine under llama.cpp) on the same shapes,
// the same input bits and the same thread counts. Built only by scripts/bench_ggml.sh: ggml is never
// a dependency of the library or of its tests.
//
//   attention  prefill, causal, H 8, D 128, S 4096 and 1024, batch 1, with and without ALiBi:
//              ggml_flash_attn_ext (Q f32; K/V f16 as llama.cpp's cache, and f32) against
//              posenc::attention_forward (f32 q/k/v; f32 q with f16 or bf16 k/v; bf16 q/k/v).
//              FLOP = 4 S^2 D H / 2 (QK^T and PV, causal half).
//   decode     one token against a 32k f16 cache, 8 q heads over 8 and 2 kv heads, D 128, no mask
//              (every key visible): ggml_flash_attn_ext (its one-row path rounds Q to f16) against
//              posenc::attention_forward given the same f16 q (token-major cache, llama.cpp's layout;
//              posenc's own KVCache is head-major). Bytes = the cached keys and values, read once.
//   rope       NEOX / half layout, q and k [1, 4096, 32, 128] in place, f32 and f16:
//              two ggml_rope_ext_inplace nodes in one graph against Rope::forward_qk.
//              Bytes = q and k, each read and written once.
// Both sides see the same memory layout: (B, S, H, D) with D fastest, which is the layout of
// llama.cpp's q and KV cache ([D, H, S] tensors permuted to [D, S, H] views), so neither side copies.
// Each measurement: one warm-up call, then the best and the median of `reps` timed calls.
// ggml runs on its own persistent threadpool (as llama.cpp attaches one) that is freed before posenc
// runs, so ggml's polling workers never compete with posenc's threads for the 2 cores.
#include <ggml-cpu.h>
#include <ggml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "posenc/attention.h"
#include "posenc/rope.h"
#include "posenc/tensor.h"
#include "posenc/threads.h"
#include "src/half.h"

namespace {

constexpr int64_t kHeads = 8, kDim = 128;                    // attention
constexpr int64_t kRopeT = 4096, kRopeH = 32, kRopeD = 128;  // rope
constexpr double kRopeBase = 10000.0;
constexpr float kMaxBias = 8.0f;  // ggml's ALiBi parameter; with H = 8, slopes 2^-(h+1) = BLOOM's

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& xi : x) xi = dist(gen);
  return x;
}

std::vector<uint16_t> to_f16(const std::vector<float>& x) {  // ggml's rounding: both sides read these bits
  std::vector<uint16_t> h(x.size());
  ggml_fp32_to_fp16_row(x.data(), reinterpret_cast<ggml_fp16_t*>(h.data()), static_cast<int64_t>(x.size()));
  return h;
}
std::vector<float> from_f16(const std::vector<uint16_t>& h) {
  std::vector<float> x(h.size());
  ggml_fp16_to_fp32_row(reinterpret_cast<const ggml_fp16_t*>(h.data()), x.data(),
                        static_cast<int64_t>(h.size()));
  return x;
}
std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = posenc::detail::f32_to_bf16(x[i]);
  return h;
}

double max_abs_diff(const float* a, const float* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

struct Timing {
  double best_ms = 0, median_ms = 0;
};

// One warm-up call (first touch, pools started, caches warm), then `reps` timed calls.
Timing time_calls(const std::function<void()>& call, int reps) {
  call();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  if (ms.empty()) return {};  // reps 0: the checks want the one call's output, not its time
  std::sort(ms.begin(), ms.end());
  return {ms.front(), ms[ms.size() / 2]};
}

// ---- ggml plumbing -------------------------------------------------------------------------------

// A no_alloc context: tensors point at our buffers (the same ones posenc reads), so ggml neither
// copies inputs nor owns memory; only the graph object and tensor headers live in the context.
struct GgmlContext {
  ggml_context* ctx;
  GgmlContext() {
    ggml_init_params p{};
    p.mem_size = 64 * ggml_tensor_overhead() + ggml_graph_overhead() + 4096;
    p.no_alloc = true;
    ctx = ggml_init(p);
  }
  ~GgmlContext() { ggml_free(ctx); }
  ggml_tensor* tensor(ggml_type type, std::initializer_list<int64_t> ne, const void* data) const {
    const std::vector<int64_t> dims(ne);
    ggml_tensor* t = ggml_new_tensor(ctx, type, static_cast<int>(dims.size()), dims.data());
    t->data = const_cast<void*>(data);  // set before any view is made: views copy the pointer
    return t;
  }
};

// Runs `root`'s graph on a fresh persistent threadpool of n threads (ggml's default polling), timed.
Timing ggml_time(const GgmlContext& g, ggml_tensor* root, int n_threads, int reps,
                 ggml_tensor* second_root = nullptr) {
  ggml_cgraph* graph = ggml_new_graph(g.ctx);
  ggml_build_forward_expand(graph, root);
  if (second_root) ggml_build_forward_expand(graph, second_root);
  ggml_threadpool_params tp_params = ggml_threadpool_params_default(n_threads);
  ggml_threadpool* pool = ggml_threadpool_new(&tp_params);
  ggml_cplan plan = ggml_graph_plan(graph, n_threads, pool);
  std::vector<uint8_t> work(plan.work_size);
  plan.work_data = work.data();
  const Timing t = time_calls(
      [&] {
        if (ggml_graph_compute(graph, &plan) != GGML_STATUS_SUCCESS) {
          std::fprintf(stderr, "ggml_graph_compute failed\n");
          std::exit(1);
        }
      },
      reps);
  ggml_threadpool_free(pool);  // its workers poll: they must not share the cores with posenc's
  return t;
}

// ---- attention ------------------------------------------------------------------------------------

// Inputs of one prefill problem in every storage either side reads, from the same random numbers.
struct AttentionProblem {
  int64_t S;
  std::vector<float> q, k, v;              // f32, (1, S, H, D)
  std::vector<uint16_t> k16, v16;          // f16 (ggml's rounding)
  std::vector<uint16_t> qb, kb, vb;        // bf16
  std::vector<uint16_t> mask, alibi_mask;  // ggml's (S_q, S_kv) f16 masks
  explicit AttentionProblem(int64_t S_)
      : S(S_),
        q(random_floats(S * kHeads * kDim, 1)),
        k(random_floats(S * kHeads * kDim, 2)),
        v(random_floats(S * kHeads * kDim, 3)),
        k16(to_f16(k)),
        v16(to_f16(v)),
        qb(to_bf16(q)),
        kb(to_bf16(k)),
        vb(to_bf16(v)) {
    // llama.cpp's causal mask: 0 where k <= q, -inf after; with ALiBi the entry is -|q - k| and ggml
    // multiplies it by each head's slope (so ALiBi costs ggml nothing beyond the mask it reads).
    std::vector<float> m(S * S), a(S * S);
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < S; ++j) {
        m[i * S + j] = j <= i ? 0.0f : -INFINITY;
        a[i * S + j] = j <= i ? -static_cast<float>(i - j) : -INFINITY;
      }
    mask = to_f16(m);
    alibi_mask = to_f16(a);  // distances above 2048 round to even numbers in f16 (ggml's format)
  }
  double flops() const { return 4.0 * S * S * kDim * kHeads / 2; }
};

enum class KvType { f32, f16 };

// ggml_flash_attn_ext: Q f32 [D, S, H] (permuted view of [D, H, S]), K/V the same over keys,
// out f32 [D, H, S] = (S, H, D) in memory, the layout posenc writes.
Timing ggml_attention(const AttentionProblem& p, KvType kv, bool alibi, int threads, int reps,
                      std::vector<float>& out) {
  GgmlContext g;
  const int64_t S = p.S;
  out.assign(S * kHeads * kDim, 0.0f);
  const ggml_type kv_type = kv == KvType::f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
  const void* kd = kv == KvType::f16 ? static_cast<const void*>(p.k16.data()) : p.k.data();
  const void* vd = kv == KvType::f16 ? static_cast<const void*>(p.v16.data()) : p.v.data();
  ggml_tensor* q = ggml_permute(g.ctx, g.tensor(GGML_TYPE_F32, {kDim, kHeads, S}, p.q.data()), 0, 2, 1, 3);
  ggml_tensor* k = ggml_permute(g.ctx, g.tensor(kv_type, {kDim, kHeads, S}, kd), 0, 2, 1, 3);
  ggml_tensor* v = ggml_permute(g.ctx, g.tensor(kv_type, {kDim, kHeads, S}, vd), 0, 2, 1, 3);
  ggml_tensor* mask = g.tensor(GGML_TYPE_F16, {S, S}, alibi ? p.alibi_mask.data() : p.mask.data());
  ggml_tensor* o = ggml_flash_attn_ext(g.ctx, q, k, v, mask, 1.0f / std::sqrt(static_cast<float>(kDim)),
                                       alibi ? kMaxBias : 0.0f, 0.0f);
  o->data = out.data();
  return ggml_time(g, o, threads, reps);
}

enum class PosencStorage { f32, f16_kv, bf16_kv, bf16_qkv };
const char* storage_name(PosencStorage s) {
  switch (s) {
    case PosencStorage::f32:
      return "q/k/v f32";
    case PosencStorage::f16_kv:
      return "q f32, k/v f16";
    case PosencStorage::bf16_kv:
      return "q f32, k/v bf16";
    case PosencStorage::bf16_qkv:
      return "q/k/v bf16";
  }
  return "?";
}

posenc::ConstTensorView view16(const std::vector<uint16_t>& x, posenc::DType dtype, int64_t S) {
  posenc::ConstTensorView v = posenc::view(reinterpret_cast<const float*>(x.data()), {1, S, kHeads, kDim});
  v.dtype = dtype;
  return v;
}

Timing posenc_attention(const AttentionProblem& p, PosencStorage s, bool alibi, int threads, int reps,
                        std::vector<float>& out) {
  const int64_t S = p.S;
  out.assign(S * kHeads * kDim, 0.0f);
  posenc::AttentionConfig cfg;
  cfg.causal = true;
  if (alibi) {
    cfg.bias.kind = posenc::AttentionBias::Kind::alibi;
    cfg.bias.alibi.heads = kHeads;  // BLOOM slopes 2^(-8(h+1)/H): ggml's with max_bias 8
  }
  const posenc::ConstTensorView q32 = posenc::view(p.q.data(), {1, S, kHeads, kDim});
  posenc::AttentionInputs in;
  switch (s) {
    case PosencStorage::f32:
      in = posenc::qkv(q32, posenc::view(p.k.data(), {1, S, kHeads, kDim}),
                       posenc::view(p.v.data(), {1, S, kHeads, kDim}));
      break;
    case PosencStorage::f16_kv:
      in = posenc::qkv(q32, view16(p.k16, posenc::DType::f16, S), view16(p.v16, posenc::DType::f16, S));
      break;
    case PosencStorage::bf16_kv:
      in = posenc::qkv(q32, view16(p.kb, posenc::DType::bf16, S), view16(p.vb, posenc::DType::bf16, S));
      break;
    case PosencStorage::bf16_qkv:  // every q a bf16 value: posenc's vdpbf16ps logits where the CPU has them
      in = posenc::qkv(view16(p.qb, posenc::DType::bf16, S), view16(p.kb, posenc::DType::bf16, S),
                       view16(p.vb, posenc::DType::bf16, S));
      break;
  }
  posenc::set_num_threads(threads);
  // No lse output: ggml has none, so neither side writes more than out.
  return time_calls(
      [&] {
        posenc::attention_forward(cfg, in, posenc::view(out.data(), {1, S, kHeads, kDim}),
                                  posenc::TensorView{});
      },
      reps);
}

// Causal softmax attention in double over f32 q and the given (already widened) k/v: the check's truth.
std::vector<float> reference_attention(const AttentionProblem& p, const std::vector<float>& k,
                                       const std::vector<float>& v, bool alibi) {
  const int64_t S = p.S, HD = kHeads * kDim;
  std::vector<float> out(S * HD);
  std::vector<double> logit(S);
  const double scale = 1.0 / std::sqrt(static_cast<double>(kDim));
  for (int64_t h = 0; h < kHeads; ++h) {
    const double slope = std::pow(2.0, -8.0 * static_cast<double>(h + 1) / kHeads);
    for (int64_t i = 0; i < S; ++i) {
      double mx = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < kDim; ++d)
          dot += static_cast<double>(p.q[i * HD + h * kDim + d]) * k[j * HD + h * kDim + d];
        logit[j] = dot * scale - (alibi ? slope * static_cast<double>(i - j) : 0.0);
        mx = std::max(mx, logit[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j <= i; ++j) sum += (logit[j] = std::exp(logit[j] - mx));
      for (int64_t d = 0; d < kDim; ++d) {
        double acc = 0;
        for (int64_t j = 0; j <= i; ++j) acc += logit[j] * v[j * HD + h * kDim + d];
        out[i * HD + h * kDim + d] = static_cast<float>(acc / sum);
      }
    }
  }
  return out;
}

// ---- decode ---------------------------------------------------------------------------------------

// One new token (f16 q, as ggml rounds it) against a cache of K tokens, (1, K, Hkv, D) f16.
struct DecodeProblem {
  int64_t K, Hkv;
  std::vector<uint16_t> q16, k16, v16, mask;  // mask (1, K) f16 zeros: every key visible
  DecodeProblem(int64_t K_, int64_t Hkv_)
      : K(K_),
        Hkv(Hkv_),
        q16(to_f16(random_floats(kHeads * kDim, 21))),
        k16(to_f16(random_floats(K * Hkv * kDim, 22))),
        v16(to_f16(random_floats(K * Hkv * kDim, 23))),
        mask(K, 0) {}
  double bytes() const { return 2.0 * K * Hkv * kDim * sizeof(uint16_t); }
};

Timing ggml_decode(const DecodeProblem& p, int threads, int reps, std::vector<float>& out) {
  GgmlContext g;
  out.assign(kHeads * kDim, 0.0f);
  const std::vector<float> q = from_f16(p.q16);  // f32 as llama.cpp passes it; ggml rounds it to f16
  ggml_tensor* tq = ggml_permute(g.ctx, g.tensor(GGML_TYPE_F32, {kDim, kHeads, 1}, q.data()), 0, 2, 1, 3);
  ggml_tensor* tk =
      ggml_permute(g.ctx, g.tensor(GGML_TYPE_F16, {kDim, p.Hkv, p.K}, p.k16.data()), 0, 2, 1, 3);
  ggml_tensor* tv =
      ggml_permute(g.ctx, g.tensor(GGML_TYPE_F16, {kDim, p.Hkv, p.K}, p.v16.data()), 0, 2, 1, 3);
  ggml_tensor* mask = g.tensor(GGML_TYPE_F16, {p.K, 1}, p.mask.data());
  ggml_tensor* o =
      ggml_flash_attn_ext(g.ctx, tq, tk, tv, mask, 1.0f / std::sqrt(static_cast<float>(kDim)), 0.0f, 0.0f);
  o->data = out.data();
  return ggml_time(g, o, threads, reps);
}

Timing posenc_decode(const DecodeProblem& p, int threads, int reps, std::vector<float>& out) {
  out.assign(kHeads * kDim, 0.0f);
  posenc::ConstTensorView q =
      posenc::view(reinterpret_cast<const float*>(p.q16.data()), {1, 1, kHeads, kDim});
  posenc::ConstTensorView k =
      posenc::view(reinterpret_cast<const float*>(p.k16.data()), {1, p.K, p.Hkv, kDim});
  posenc::ConstTensorView v =
      posenc::view(reinterpret_cast<const float*>(p.v16.data()), {1, p.K, p.Hkv, kDim});
  q.dtype = k.dtype = v.dtype = posenc::DType::f16;
  const posenc::AttentionInputs in = posenc::qkv(q, k, v);
  posenc::set_num_threads(threads);
  return time_calls(
      [&] {
        posenc::attention_forward(posenc::AttentionConfig{}, in,
                                  posenc::view(out.data(), {1, 1, kHeads, kDim}), posenc::TensorView{});
      },
      reps);
}

// ---- rope -----------------------------------------------------------------------------------------

posenc::RopeConfig rope_config() {
  posenc::RopeConfig c;
  c.head_dim = kRopeD;
  c.base = kRopeBase;
  c.layout = posenc::RopeLayout::half;  // = ggml's GGML_ROPE_TYPE_NEOX: pair (x[j], x[j + D/2])
  return c;
}

// q and k (1, T, H, D) in place: ggml sees [D, H, T] tensors (its [n_embd, n_head, n_token]).
Timing ggml_rope(void* q, void* k, ggml_type type, int64_t T, int64_t H, const std::vector<int32_t>& pos,
                 int threads, int reps) {
  GgmlContext g;
  ggml_tensor* tq = g.tensor(type, {kRopeD, H, T}, q);
  ggml_tensor* tk = g.tensor(type, {kRopeD, H, T}, k);
  ggml_tensor* tp = g.tensor(GGML_TYPE_I32, {T}, pos.data());
  // freq_scale 1, ext_factor 0 (no YaRN), attn_factor 1: plain RoPE with base kRopeBase.
  ggml_tensor* rq = ggml_rope_ext_inplace(g.ctx, tq, tp, nullptr, kRopeD, GGML_ROPE_TYPE_NEOX, 0,
                                          static_cast<float>(kRopeBase), 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
  ggml_tensor* rk = ggml_rope_ext_inplace(g.ctx, tk, tp, nullptr, kRopeD, GGML_ROPE_TYPE_NEOX, 0,
                                          static_cast<float>(kRopeBase), 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
  return ggml_time(g, rq, threads, reps, rk);
}

Timing posenc_rope(void* q, void* k, posenc::DType dtype, int64_t T, int64_t H,
                   const std::vector<int64_t>& pos, int threads, int reps) {
  const posenc::Rope rope(rope_config());
  posenc::TensorView vq = posenc::view(static_cast<float*>(q), {1, T, H, kRopeD});
  posenc::TensorView vk = posenc::view(static_cast<float*>(k), {1, T, H, kRopeD});
  vq.dtype = vk.dtype = dtype;
  posenc::set_num_threads(threads);
  return time_calls([&] { rope.forward_qk(vq, vk, posenc::view(pos.data(), {T})); }, reps);
}

std::vector<float> reference_rope(const std::vector<float>& x, int64_t T, int64_t H) {
  std::vector<float> out(x.size());
  const int64_t half = kRopeD / 2;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < half; ++j) {
        const double theta =
            static_cast<double>(t) * std::pow(kRopeBase, -2.0 * static_cast<double>(j) / kRopeD);
        const float* r = &x[(t * H + h) * kRopeD];
        const double a = r[j], b = r[j + half];
        out[(t * H + h) * kRopeD + j] = static_cast<float>(a * std::cos(theta) - b * std::sin(theta));
        out[(t * H + h) * kRopeD + j + half] = static_cast<float>(b * std::cos(theta) + a * std::sin(theta));
      }
  return out;
}

// ---- report ---------------------------------------------------------------------------------------

struct Row {
  std::string op, shape;
  int threads;
  std::string side, variant;
  Timing t;
  double rate;      // GFLOP/s or GB/s
  double ref_rate;  // the matching ggml row's rate, 0 for ggml rows
  std::string unit;
};
std::vector<Row> rows;

void add_row(Row r) {
  std::printf("  %-10s %-20s t=%d %-6s %-16s best %9.2f ms  median %9.2f ms  %8.2f %s\n", r.op.c_str(),
              r.shape.c_str(), r.threads, r.side.c_str(), r.variant.c_str(), r.t.best_ms, r.t.median_ms,
              r.rate, r.unit.c_str());
  std::fflush(stdout);
  rows.push_back(std::move(r));
}

void print_table() {
  std::printf("\n%-10s %-20s %2s  %-6s %-16s %10s %10s %10s %7s\n", "op", "shape", "th", "side", "variant",
              "best ms", "median ms", "rate", "ratio");
  std::printf("%s\n", std::string(101, '-').c_str());
  for (const Row& r : rows) {
    char ratio[16] = "";
    if (r.ref_rate > 0) std::snprintf(ratio, sizeof ratio, "%.2f", r.rate / r.ref_rate);
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.1f %s", r.rate, r.unit == "GFLOP/s" ? "GF/s" : "GB/s");
    std::printf("%-10s %-20s %2d  %-6s %-16s %10.2f %10.2f %10s %7s\n", r.op.c_str(), r.shape.c_str(),
                r.threads, r.side.c_str(), r.variant.c_str(), r.t.best_ms, r.t.median_ms, rate, ratio);
  }
  std::printf(
      "ratio = posenc rate / rate of the ggml row it is paired with (>1: posenc faster), from best times;\n"
      "pairs: posenc f32 <-> ggml K/V f32, every 16-bit posenc row <-> ggml K/V f16 (ggml's CPU flash\n"
      "attention has no tiled bf16 path), decode f16 <-> f16, rope f32 <-> f32 and f16 <-> f16.\n");
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  return out;
}

// ---- the runs -------------------------------------------------------------------------------------

void check_attention() {
  // S 300: more than one 64-query tile of ggml's and a partial last tile; small enough for a double truth.
  const AttentionProblem p(300);
  const std::vector<float> k16 = from_f16(p.k16), v16 = from_f16(p.v16);
  for (bool alibi : {false, true}) {
    std::vector<float> g32, g16, p32, p16;
    ggml_attention(p, KvType::f32, alibi, 2, 1, g32);
    ggml_attention(p, KvType::f16, alibi, 2, 1, g16);
    posenc_attention(p, PosencStorage::f32, alibi, 2, 1, p32);
    posenc_attention(p, PosencStorage::f16_kv, alibi, 2, 1, p16);
    const std::vector<float> ref32 = reference_attention(p, p.k, p.v, alibi);
    const std::vector<float> ref16 = reference_attention(p, k16, v16, alibi);
    const size_t n = g32.size();
    std::printf(
        "  attention S=300 %-8s max|diff|: f32 kv: ggml-posenc %.2e, ggml-ref %.2e, posenc-ref %.2e;"
        "\n  %26s f16 kv: ggml-posenc %.2e, ggml-ref %.2e, posenc-ref %.2e\n",
        alibi ? "alibi" : "no bias", max_abs_diff(g32.data(), p32.data(), n),
        max_abs_diff(g32.data(), ref32.data(), n), max_abs_diff(p32.data(), ref32.data(), n), "",
        max_abs_diff(g16.data(), p16.data(), n), max_abs_diff(g16.data(), ref16.data(), n),
        max_abs_diff(p16.data(), ref16.data(), n));
  }
}

void check_rope() {
  // T 4096 (positions to 4095, where a float angle drifts most), 2 heads: small enough for a double truth.
  const int64_t T = kRopeT, H = 2;
  const std::vector<float> x = random_floats(T * H * kRopeD, 7);
  std::vector<int32_t> pos32(T);
  std::vector<int64_t> pos64(T);
  for (int64_t t = 0; t < T; ++t) pos32[t] = static_cast<int32_t>(t), pos64[t] = t;
  const std::vector<float> ref = reference_rope(x, T, H);
  std::vector<float> gq = x, gk = x, pq = x, pk = x;
  ggml_rope(gq.data(), gk.data(), GGML_TYPE_F32, T, H, pos32, 2, 0);  // the warm-up call only
  posenc_rope(pq.data(), pk.data(), posenc::DType::f32, T, H, pos64, 2, 0);
  std::printf("  rope f32 [1,%ld,%ld,%ld] max|diff|: ggml-posenc %.2e, ggml-ref %.2e, posenc-ref %.2e\n",
              static_cast<long>(T), static_cast<long>(H), static_cast<long>(kRopeD),
              max_abs_diff(gq.data(), pq.data(), x.size()), max_abs_diff(gq.data(), ref.data(), x.size()),
              max_abs_diff(pq.data(), ref.data(), x.size()));
  std::vector<uint16_t> g16 = to_f16(x), gk16 = g16, p16 = g16, pk16 = g16;
  const std::vector<float> ref16 = reference_rope(from_f16(g16), T, H);
  ggml_rope(g16.data(), gk16.data(), GGML_TYPE_F16, T, H, pos32, 2, 0);
  posenc_rope(p16.data(), pk16.data(), posenc::DType::f16, T, H, pos64, 2, 0);
  const std::vector<float> gf = from_f16(g16), pf = from_f16(p16);
  std::printf(
      "  rope f16 [1,%ld,%ld,%ld] max|diff|: ggml-posenc %.2e, ggml-ref %.2e, posenc-ref %.2e"
      " (f16 half-ulp at 1: 4.9e-04)\n",
      static_cast<long>(T), static_cast<long>(H), static_cast<long>(kRopeD),
      max_abs_diff(gf.data(), pf.data(), x.size()), max_abs_diff(gf.data(), ref16.data(), x.size()),
      max_abs_diff(pf.data(), ref16.data(), x.size()));
}

void run_attention(const std::vector<int>& sizes, const std::vector<int>& thread_counts) {
  for (int S : sizes) {
    const AttentionProblem p(S);
    const int reps = S >= 4096 ? 3 : 5;
    char shape[32];
    std::snprintf(shape, sizeof shape, "S=%d H=%ld D=%ld", S, static_cast<long>(kHeads),
                  static_cast<long>(kDim));
    for (int th : thread_counts)
      for (bool alibi : {false, true}) {
        const std::string op = alibi ? "attn+alibi" : "attn";
        std::vector<float> g16_out, g32_out, out;
        Row r{op, shape, th, "ggml", "Q f32, K/V f16", {}, 0, 0, "GFLOP/s"};
        r.t = ggml_attention(p, KvType::f16, alibi, th, reps, g16_out);
        r.rate = p.flops() / r.t.best_ms / 1e6;
        const double ggml16 = r.rate;
        add_row(r);
        r.variant = "Q f32, K/V f32";
        r.t = ggml_attention(p, KvType::f32, alibi, th, reps, g32_out);
        r.rate = p.flops() / r.t.best_ms / 1e6;
        const double ggml32 = r.rate;
        add_row(r);
        for (PosencStorage s :
             {PosencStorage::f32, PosencStorage::f16_kv, PosencStorage::bf16_kv, PosencStorage::bf16_qkv}) {
          Row pr{op, shape, th, "posenc", storage_name(s), {}, 0, 0, "GFLOP/s"};
          pr.t = posenc_attention(p, s, alibi, th, reps, out);
          pr.rate = p.flops() / pr.t.best_ms / 1e6;
          pr.ref_rate = s == PosencStorage::f32 ? ggml32 : ggml16;
          add_row(pr);
          // Full-size agreement on the timed outputs themselves (same input bits on both sides).
          if (s == PosencStorage::f32 || s == PosencStorage::f16_kv)
            std::printf(
                "    check %s: max|ggml - posenc| = %.2e\n", storage_name(s),
                max_abs_diff(out.data(), (s == PosencStorage::f32 ? g32_out : g16_out).data(), out.size()));
        }
      }
  }
}

// Softmax attention of the one query in double over the stored f16 q, k, v: the decode check's truth.
std::vector<float> reference_decode(const DecodeProblem& p) {
  const std::vector<float> q = from_f16(p.q16), k = from_f16(p.k16), v = from_f16(p.v16);
  std::vector<float> out(kHeads * kDim);
  std::vector<double> w(p.K), acc(kDim);
  for (int64_t h = 0; h < kHeads; ++h) {
    const int64_t hk = h / (kHeads / p.Hkv);
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < p.K; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < kDim; ++d)
        dot += static_cast<double>(q[h * kDim + d]) * k[(j * p.Hkv + hk) * kDim + d];
      mx = std::max(mx, w[j] = dot / std::sqrt(static_cast<double>(kDim)));
    }
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t j = 0; j < p.K; ++j) {
      sum += (w[j] = std::exp(w[j] - mx));
      for (int64_t d = 0; d < kDim; ++d) acc[d] += w[j] * v[(j * p.Hkv + hk) * kDim + d];
    }
    for (int64_t d = 0; d < kDim; ++d) out[h * kDim + d] = static_cast<float>(acc[d] / sum);
  }
  return out;
}

void run_decode(const std::vector<int>& thread_counts) {
  for (int64_t Hkv : {int64_t{8}, int64_t{2}}) {
    const DecodeProblem p(32768, Hkv);
    const std::vector<float> ref = reference_decode(p);
    char shape[32];
    std::snprintf(shape, sizeof shape, "32k, %ld/%ld heads", static_cast<long>(kHeads),
                  static_cast<long>(Hkv));
    for (int th : thread_counts) {
      std::vector<float> g_out, p_out;
      Row r{"decode", shape, th, "ggml", "Q f16, K/V f16", {}, 0, 0, "GB/s"};
      r.t = ggml_decode(p, th, 7, g_out);
      r.rate = p.bytes() / r.t.best_ms / 1e6;
      const double ggml_rate = r.rate;
      add_row(r);
      r = Row{"decode", shape, th, "posenc", "q/k/v f16", {}, 0, ggml_rate, "GB/s"};
      r.t = posenc_decode(p, th, 7, p_out);
      r.rate = p.bytes() / r.t.best_ms / 1e6;
      add_row(r);
      // ggml accumulates P V in f16 on this path (posenc: fp32).
      const size_t n = p_out.size();
      std::printf("    check: max|diff| ggml-posenc %.2e, ggml-ref %.2e, posenc-ref %.2e (max|ref| %.1e)\n",
                  max_abs_diff(g_out.data(), p_out.data(), n), max_abs_diff(g_out.data(), ref.data(), n),
                  max_abs_diff(p_out.data(), ref.data(), n),
                  max_abs_diff(ref.data(), std::vector<float>(n).data(), n));
    }
  }
}

void run_rope(const std::vector<int>& thread_counts) {
  const int64_t T = kRopeT, H = kRopeH, n = T * H * kRopeD;
  std::vector<int32_t> pos32(T);
  std::vector<int64_t> pos64(T);
  for (int64_t t = 0; t < T; ++t) pos32[t] = static_cast<int32_t>(t), pos64[t] = t;
  const std::vector<float> x = random_floats(n, 11), y = random_floats(n, 12);
  const std::string shape = "[1,4096,32,128] q+k";
  for (int th : thread_counts) {
    // In place, repeatedly: each call rotates again (a rotation, so values stay in [-1.5, 1.5]).
    std::vector<float> q = x, k = y;
    const double bytes32 = 4.0 * static_cast<double>(n) * sizeof(float);  // q, k: read + write
    Row r{"rope", shape, th, "ggml", "f32", {}, 0, 0, "GB/s"};
    r.t = ggml_rope(q.data(), k.data(), GGML_TYPE_F32, T, H, pos32, th, 7);
    r.rate = bytes32 / r.t.best_ms / 1e6;
    const double g32 = r.rate;
    add_row(r);
    r = Row{"rope", shape, th, "posenc", "f32", {}, 0, g32, "GB/s"};
    r.t = posenc_rope(q.data(), k.data(), posenc::DType::f32, T, H, pos64, th, 7);
    r.rate = bytes32 / r.t.best_ms / 1e6;
    add_row(r);
    std::vector<uint16_t> q16 = to_f16(x), k16 = to_f16(y);
    const double bytes16 = bytes32 / 2;
    r = Row{"rope", shape, th, "ggml", "f16", {}, 0, 0, "GB/s"};
    r.t = ggml_rope(q16.data(), k16.data(), GGML_TYPE_F16, T, H, pos32, th, 7);
    r.rate = bytes16 / r.t.best_ms / 1e6;
    const double g16 = r.rate;
    add_row(r);
    r = Row{"rope", shape, th, "posenc", "f16", {}, 0, g16, "GB/s"};
    r.t = posenc_rope(q16.data(), k16.data(), posenc::DType::f16, T, H, pos64, th, 7);
    r.rate = bytes16 / r.t.best_ms / 1e6;
    add_row(r);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes{4096, 1024}, thread_counts{2, 1};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--sizes")) {
      sizes = parse_list(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--threads")) {
      thread_counts = parse_list(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--sizes 4096,1024] [--threads 2,1]\n", argv[0]);
      return 2;
    }
  }
  ggml_cpu_init();  // ggml's f16 tables, as its CPU backend does before any graph
  std::printf("load average at start: %s\n", load_average().c_str());
  std::printf("checks (same inputs on both sides; ref = double-precision truth over the same stored k/v):\n");
  check_attention();
  check_rope();
  std::printf(
      "timings (one warm-up call, then best and median of 3 (S 4096), 5 (S 1024) or 7 (rope) calls):\n");
  run_attention(sizes, thread_counts);
  run_decode(thread_counts);
  run_rope(thread_counts);
  print_table();
  std::printf("load average at end: %s\n", load_average().c_str());
  return 0;
}
