// tools/attention_cmd.cc: `posenc attention`: the fused attention (and optionally its backward) on
// random q, k, v and random positional parameters, with timings, and with --check a comparison
// against the naive double-precision reference (reference/attention.h, the tests' oracle).
#include "attention_cmd.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "attention_device.h"
#include "memory.h"
#include "posenc/posenc.h"
#include "reference/attention.h"
#include "reference/rope.h"
#include "src/half.h"

namespace posenc::tools {
namespace {

struct AttentionOptions {
  std::string encoding = "rope", format = "table", dtype = "fp32", device = "cpu", temperature = "none";
  int64_t batch = 1, seq = 512, kv_len = 0, heads = 8, kv_heads = 0, dim = 64, window = 0, repeat = 3;
  int64_t num_buckets = 32, max_distance = 128, shaw_max_distance = 16, d_model = 0;
  int64_t value_dim = 0, chunk = 0, rope_offset = 0;
  double base = 10000, softcap = 0;
  bool causal = false, backward = false, check = false, round_probabilities = false, sinks = false;
  uint32_t seed = 0;
};

// --query-temperature: none, or rule:scale:floor_scale (llama4:0.1:8192, ministral3:0.1:16384,
// qwen_logn:0:8192).
QueryTemperature parse_temperature(const std::string& text) {
  QueryTemperature t;
  if (text == "none") return t;
  const size_t a = text.find(':'), b = a == std::string::npos ? a : text.find(':', a + 1);
  const auto invalid = [&] {
    return Error(
        "--query-temperature = '" + text +
        "' is invalid: expected none or rule:scale:floor_scale with rule llama4, ministral3 or qwen_logn");
  };
  if (b == std::string::npos) throw invalid();
  const std::string rule = text.substr(0, a);
  using K = QueryTemperature::Kind;
  bool found = false;
  for (K k : {K::llama4, K::ministral3, K::qwen_logn})
    if (rule == query_temperature_name(k)) t.kind = k, found = true;
  if (!found) throw invalid();
  try {
    size_t used = 0;
    const std::string scale = text.substr(a + 1, b - a - 1), floor = text.substr(b + 1);
    t.scale = std::stod(scale, &used);
    if (used != scale.size()) throw invalid();
    t.floor_scale = std::stod(floor, &used);
    if (used != floor.size()) throw invalid();
  } catch (const std::logic_error&) {
    throw invalid();
  }
  return t;
}

// --repeat's limit: the best of a million runs is as good as the best of more, which only take longer.
constexpr int64_t kMaxRepeat = 1000000;

std::vector<float> random_vector(int64_t n, std::mt19937& rng, float stddev) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Everything one run needs, owned here; config() points into it.
struct Problem {
  int64_t B, Q, K, H, Hkv, D, Dv;
  std::vector<float> q, k, v, table, a_k, a_v, u, xv, w_r, sinks;
  std::unique_ptr<Rope> rope;
  AttentionConfig config;
};

// Every buffer run_attention allocates, counted in double so that no product of arguments overflows:
// q, out, k, v and lse in fp32; the encoding's parameters; the backward's grad_out, dq, dk, dv; and
// --check's double copies of q, k, v, out.
double problem_bytes(const AttentionOptions& o, const Problem& p) {
  const double q = static_cast<double>(p.B) * p.Q * p.H * (p.D + p.Dv),  // q and out
      kv = static_cast<double>(p.B) * p.K * p.Hkv * (p.D + p.Dv);        // k and v
  double floats = q + kv + static_cast<double>(p.B) * p.H * p.Q;
  if (o.encoding == "shaw") floats += 2.0 * (2.0 * o.shaw_max_distance + 1) * p.D;
  if (o.encoding == "relative") floats += (2.0 * o.shaw_max_distance + 1) * p.H;
  if (o.encoding == "t5" || o.encoding == "rope+t5") floats += static_cast<double>(o.num_buckets) * p.H;
  if (o.encoding == "transformer_xl" || o.encoding == "xl")
    floats += static_cast<double>(p.H) * p.D * (o.d_model > 0 ? o.d_model : static_cast<double>(p.H) * p.D);
  if (o.backward) floats += q + kv;
  double bytes = 4 * floats;
  if (o.check) bytes += 8 * (q + kv);
  return bytes;
}

Problem make_problem(const AttentionOptions& o) {
  Problem p{o.batch,
            o.seq,
            o.kv_len > 0 ? o.kv_len : o.seq,
            o.heads,
            o.kv_heads > 0 ? o.kv_heads : o.heads,
            o.dim,
            o.value_dim > 0 ? o.value_dim : o.dim,
            {},
            {},
            {},
            {},
            {},
            {},
            {},
            {},
            {},
            {},
            nullptr,
            {}};
  require_size("--batch", o.batch);
  require_size("--seq", o.seq);
  require_size("--kv-len", o.kv_len, 0, kMaxSize, "0 = --seq");
  require_size("--heads", o.heads);
  require_size("--kv-heads", o.kv_heads, 0, kMaxSize, "0 = --heads");
  require_size("--dim", o.dim);
  require_size("--window", o.window, 0, std::numeric_limits<int64_t>::max(), "0 = no window");
  require_size("--repeat", o.repeat, 1, kMaxRepeat);
  require_size("--num-buckets", o.num_buckets);
  require_size("--max-distance", o.max_distance);
  require_size("--clip", o.shaw_max_distance, 0);
  require_size("--d-model", o.d_model, 0, kMaxSize, "0 = --heads x --dim");
  require_size("--value-dim", o.value_dim, 0, kMaxSize, "0 = --dim");
  require_size("--chunk", o.chunk, 0, std::numeric_limits<int64_t>::max(), "0 = no chunks");
  require_size("--rope-offset", o.rope_offset, 0, o.dim - 1, "RoPE rotates dims [offset, dim)");
  // The encoding's own sizes, where it has a table or a projection.
  const std::string& e = o.encoding;
  const std::string encoding_sizes =
      e == "shaw" || e == "relative"       ? " --clip " + std::to_string(o.shaw_max_distance)
      : e == "t5" || e == "rope+t5"        ? " --num-buckets " + std::to_string(o.num_buckets)
      : e == "transformer_xl" || e == "xl" ? " --d-model " + std::to_string(o.d_model)
                                           : "";
  require_memory("posenc attention with --batch " + std::to_string(p.B) + " --seq " + std::to_string(p.Q) +
                     " --kv-len " + std::to_string(p.K) + " --heads " + std::to_string(p.H) + " --kv-heads " +
                     std::to_string(p.Hkv) + " --dim " + std::to_string(p.D) + " --value-dim " +
                     std::to_string(p.Dv) + encoding_sizes,
                 problem_bytes(o, p));
  std::mt19937 rng(o.seed);
  p.q = random_vector(p.B * p.Q * p.H * p.D, rng, 1.0f);
  p.k = random_vector(p.B * p.K * p.Hkv * p.D, rng, 1.0f);
  p.v = random_vector(p.B * p.K * p.Hkv * p.Dv, rng, 1.0f);
  AttentionConfig& c = p.config;
  c.causal = o.causal;
  c.window = o.window;
  c.chunk = o.chunk;
  c.softcap = o.softcap;  // checked by the library
  c.query_temperature = parse_temperature(o.temperature);
  if (o.sinks) {
    p.sinks = random_vector(p.H, rng, 1.0f);
    c.sinks = view(p.sinks.data(), {p.H});
  }
  if (o.rope_offset > 0 && e != "rope" && e != "rope+alibi" && e != "rope+t5")
    throw Error("--rope-offset = " + std::to_string(o.rope_offset) + " is given but --encoding " + e +
                " has no RoPE");
  if (e == "rope" || e == "rope+alibi" || e == "rope+t5") {
    RopeConfig rc;
    rc.head_dim = p.D - o.rope_offset;
    rc.base = o.base;
    p.rope = std::make_unique<Rope>(rc);
    c.rope = p.rope.get();
    c.rope_offset = o.rope_offset;
  }
  if (e == "alibi" || e == "rope+alibi") {
    c.bias.kind = AttentionBias::Kind::alibi;
    c.bias.alibi.heads = p.H;
  } else if (e == "t5" || e == "rope+t5" || e == "relative") {
    c.bias.kind = AttentionBias::Kind::relative;
    c.bias.relative = e == "relative" ? RelativeBiasConfig::clipped(p.H, o.shaw_max_distance)
                                      : RelativeBiasConfig::t5(p.H, o.num_buckets, o.max_distance, !o.causal);
    validate(c.bias.relative);
    p.table = random_vector(c.bias.relative.num_rows() * p.H, rng, 1.0f);
    c.bias.relative_table = view(p.table.data(), {c.bias.relative.num_rows(), p.H});
  } else if (e == "shaw") {
    AttentionShaw s;
    s.config.max_distance = o.shaw_max_distance;
    s.config.head_dim = p.D;
    validate(s.config);
    p.a_k = random_vector(s.config.num_rows() * p.D, rng, 0.5f);
    p.a_v = random_vector(s.config.num_rows() * p.D, rng, 0.5f);
    s.a_k = view(p.a_k.data(), {s.config.num_rows(), p.D});
    s.a_v = view(p.a_v.data(), {s.config.num_rows(), p.D});
    c.shaw = s;
  } else if (e == "transformer_xl" || e == "xl") {
    AttentionTransformerXL x;
    x.config = {o.d_model > 0 ? o.d_model : p.H * p.D, p.H, p.D, o.base};
    validate(x.config);
    p.u = random_vector(p.H * p.D, rng, 0.1f);
    p.xv = random_vector(p.H * p.D, rng, 0.1f);
    p.w_r = random_vector(p.H * p.D * x.config.d_model, rng,
                          1.0f / std::sqrt(static_cast<float>(x.config.d_model)));
    x.u = view(p.u.data(), {p.H, p.D});
    x.v = view(p.xv.data(), {p.H, p.D});
    x.w_r = view(p.w_r.data(), {p.H * p.D, x.config.d_model});
    c.transformer_xl = x;
  } else if (e != "none" && e != "rope") {
    throw Error("--encoding = '" + e +
                "' is invalid: expected none, rope, alibi, t5, relative, shaw, transformer_xl (or xl), "
                "rope+alibi or rope+t5");
  }
  return p;
}

DType parse_dtype(const std::string& name) {
  if (name == "fp32" || name == "f32") return DType::f32;
  if (name == "bf16") return DType::bf16;
  if (name == "fp16" || name == "f16") return DType::f16;
  throw Error("--dtype = '" + name + "' is invalid: expected fp32, bf16 or fp16");
}
uint16_t round16(DType dtype, float x) {
  return dtype == DType::bf16 ? detail::f32_to_bf16(x) : detail::f32_to_f16(x);
}
float widen16(DType dtype, uint16_t h) {
  return dtype == DType::bf16 ? detail::bf16_to_f32(h) : detail::f16_to_f32(h);
}
// A contiguous view of 16-bit bits tagged with their storage.
TensorView view16(std::vector<uint16_t>& bits, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView v = view(reinterpret_cast<float*>(bits.data()), shape);
  v.dtype = dtype;
  return v;
}

// The largest |fused - reference| over out, with the reference in double.
double check_against_reference(const Problem& p, const std::vector<float>& out) {
  ref::AttentionProblem<double> r;
  r.B = p.B, r.Q = p.Q, r.K = p.K, r.H = p.H, r.Hkv = p.Hkv, r.D = p.D, r.Dv = p.Dv;
  r.causal = p.config.causal;
  r.window = p.config.window;
  r.chunk = p.config.chunk;
  r.softcap = p.config.softcap;
  r.sinks.assign(p.sinks.begin(), p.sinks.end());
  r.scale = 1 / std::sqrt(static_cast<double>(p.D));
  for (int64_t b = 0; b < p.B; ++b) {
    for (int64_t i = 0; i < p.Q; ++i) r.q_pos.push_back(p.K - p.Q + i);
    for (int64_t j = 0; j < p.K; ++j) r.k_pos.push_back(j);
  }
  const AttentionConfig& c = p.config;
  r.kind = c.bias.kind;
  if (c.bias.kind == AttentionBias::Kind::alibi) r.alibi_slopes = alibi_slopes(c.bias.alibi);
  if (c.bias.kind == AttentionBias::Kind::relative)
    r.relative = c.bias.relative, r.relative_table.assign(p.table.begin(), p.table.end());
  if (c.shaw) {
    r.shaw_max_distance = c.shaw->config.max_distance;
    r.shaw_a_k.assign(p.a_k.begin(), p.a_k.end());
    r.shaw_a_v.assign(p.a_v.begin(), p.a_v.end());
  }
  if (c.transformer_xl) {
    r.transformer_xl_d_model = c.transformer_xl->config.d_model;
    r.transformer_xl_base = c.transformer_xl->config.base;
    r.transformer_xl_u.assign(p.u.begin(), p.u.end()), r.transformer_xl_v.assign(p.xv.begin(), p.xv.end()),
        r.transformer_xl_w_r.assign(p.w_r.begin(), p.w_r.end());
  }
  std::vector<double> q(p.q.begin(), p.q.end()), k(p.k.begin(), p.k.end());
  if (c.rope) {  // dims [rope_offset, D) of each head rotated
    const RopeFrequencies f = c.rope->frequencies();
    const int64_t lo = c.rope_offset, R = p.D - lo;
    const auto rotate = [&](std::vector<double>& x, const std::vector<int64_t>& pos, int64_t T,
                            int64_t heads) {
      const int64_t rows = static_cast<int64_t>(x.size()) / p.D;
      std::vector<double> sub(static_cast<size_t>(rows * R));
      for (int64_t i = 0; i < rows; ++i) std::copy_n(x.begin() + i * p.D + lo, R, sub.begin() + i * R);
      sub = ref::rope<double>(f, c.rope->config().layout, R, sub, pos, p.B, T, heads);
      for (int64_t i = 0; i < rows; ++i) std::copy_n(sub.begin() + i * R, R, x.begin() + i * p.D + lo);
    };
    rotate(q, r.q_pos, p.Q, p.H);
    rotate(k, r.k_pos, p.K, p.Hkv);
  }
  if (c.query_temperature.kind != QueryTemperature::Kind::none)  // q_i *= factor(q_pos), after RoPE
    for (size_t t = 0; t < r.q_pos.size(); ++t)
      for (int64_t e = 0; e < p.H * p.D; ++e) q[t * p.H * p.D + e] *= c.query_temperature.factor(r.q_pos[t]);
  const auto expected = ref::attention<double>(r, q, k, std::vector<double>(p.v.begin(), p.v.end()));
  double worst = 0;
  for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(out[i] - expected.out[i]));
  return worst;
}

template <typename Fn>
double best_seconds(int64_t repeat, Fn&& fn) {
  double best = INFINITY;
  for (int64_t r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void run_attention(const AttentionOptions& o) {
  if (o.format != "table" && o.format != "json")
    throw Error("--format = '" + o.format + "' is invalid: expected table or json");
  Problem p = make_problem(o);
  const double check_scores = static_cast<double>(p.B) * p.Q * p.K * p.H;  // may exceed int64
  if (o.check && check_scores > 1 << 24) {
    char scores[32];
    std::snprintf(scores, sizeof scores, "%.0f", check_scores);
    throw Error("--check: batch * seq * kv_len * heads = " + std::string(scores) +
                " is too large for the naive reference (limit 2^24)");
  }
  const DType dtype = parse_dtype(o.dtype);
  p.config.round_probabilities = o.round_probabilities;  // the library refuses it unless bf16
  if (o.device != "cpu" && o.device != "cuda")
    throw Error("--device = '" + o.device + "' is invalid: expected cpu or cuda");
  AttentionInputs in = qkv(view(p.q.data(), {p.B, p.Q, p.H, p.D}), view(p.k.data(), {p.B, p.K, p.Hkv, p.D}),
                           view(p.v.data(), {p.B, p.K, p.Hkv, p.Dv}));
  std::vector<float> out(static_cast<size_t>(p.B * p.Q * p.H * p.Dv)),
      lse(static_cast<size_t>(p.B * p.H * p.Q));
  TensorView out_view = view(out.data(), {p.B, p.Q, p.H, p.Dv});
  const TensorView lse_view = view(lse.data(), {p.B, p.H, p.Q});
  // 16-bit storage: q, k, v rounded once (and the fp32 copies replaced by their exact values, so
  // --check's reference sees the same inputs); out in the same storage, widened for the summary.
  std::vector<uint16_t> q16, k16, v16, out16;
  if (dtype != DType::f32) {
    auto to16 = [&](std::vector<float>& x, std::vector<uint16_t>& bits,
                    std::initializer_list<int64_t> shape) {
      bits.resize(x.size());
      for (size_t i = 0; i < x.size(); ++i) bits[i] = round16(dtype, x[i]), x[i] = widen16(dtype, bits[i]);
      return view16(bits, dtype, shape);
    };
    in.q = to16(p.q, q16, {p.B, p.Q, p.H, p.D});
    in.k = to16(p.k, k16, {p.B, p.K, p.Hkv, p.D});
    in.v = to16(p.v, v16, {p.B, p.K, p.Hkv, p.Dv});
    out16.resize(out.size());
    out_view = view16(out16, dtype, {p.B, p.Q, p.H, p.Dv});
  }
  const double fwd =
      o.device == "cuda"
          ? attention_forward_on_cuda(p.config, in, out_view, lse_view, o.repeat)
          : best_seconds(o.repeat, [&] { attention_forward(p.config, in, out_view, lse_view); });
  if (dtype != DType::f32)
    for (size_t i = 0; i < out.size(); ++i) out[i] = widen16(dtype, out16[i]);
  // Visible (query, key) pairs: the work the forward does (2 D flops each for q.k, 2 Dv for P V).
  // Query i sits at K - Q + i and sees the keys kp with qp - window < kp < qp + window (when
  // windowed) and kp <= qp (when causal): one interval of [0, K) per query.
  double pairs = 0;
  for (int64_t i = 0; i < p.Q; ++i) {
    const int64_t qp = p.K - p.Q + i;
    int64_t lo = 0, hi = p.K - 1;
    if (o.window > 0) {  // compared, not added: --window may be near the int64 limit
      if (qp >= o.window) lo = qp - o.window + 1;
      if (o.window - 1 < p.K - 1 - qp) hi = qp + o.window - 1;
    }
    if (o.causal) hi = std::min(hi, qp);
    if (o.chunk > 0) {  // the query's own chunk (positions here are >= 0)
      const int64_t first = qp / o.chunk * o.chunk;
      lo = std::max(lo, first);
      if (o.chunk - 1 < hi - first) hi = first + o.chunk - 1;
    }
    pairs += static_cast<double>(std::max<int64_t>(0, hi - lo + 1));
  }
  const double flops = 2.0 * pairs * static_cast<double>(p.D + p.Dv) * p.H * p.B;
  nlohmann::json j;
  j["shape"] = {{"batch", p.B}, {"q_len", p.Q},      {"kv_len", p.K},
                {"heads", p.H}, {"kv_heads", p.Hkv}, {"head_dim", p.D}};
  j["encoding"] = o.encoding;
  j["dtype"] = dtype_name(dtype);
  j["round_probabilities"] = o.round_probabilities;
  j["device"] = o.device;
  j["causal"] = o.causal;
  j["window"] = o.window;
  j["chunk"] = o.chunk;
  j["softcap"] = o.softcap;
  j["sinks"] = o.sinks;
  j["value_dim"] = p.Dv;
  j["rope_offset"] = o.rope_offset;
  j["query_temperature"] = o.temperature;
  j["forward_ms"] = fwd * 1e3;
  j["forward_gflops"] = flops / fwd * 1e-9;
  double sum_abs = 0;
  for (float x : out) sum_abs += std::abs(x);
  j["mean_abs_out"] = sum_abs / static_cast<double>(out.size());
  if (o.backward) {
    // grad_out and the gradients of q, k, v in the same storage as the inputs (16-bit: the backward
    // widens once and rounds each gradient once).
    std::vector<float> grad_out(out.size(), 1.0f / static_cast<float>(out.size())), gq(p.q.size()),
        gk(p.k.size()), gv(p.v.size());
    std::vector<uint16_t> grad_out16, gq16, gk16, gv16;
    TensorView grad_out_view = view(grad_out.data(), {p.B, p.Q, p.H, p.Dv});
    AttentionGrads g;
    g.q = view(gq.data(), {p.B, p.Q, p.H, p.D}), g.k = view(gk.data(), {p.B, p.K, p.Hkv, p.D}),
    g.v = view(gv.data(), {p.B, p.K, p.Hkv, p.Dv});
    if (dtype != DType::f32) {
      grad_out16.assign(grad_out.size(), round16(dtype, grad_out[0]));
      gq16.resize(gq.size()), gk16.resize(gk.size()), gv16.resize(gv.size());
      grad_out_view = view16(grad_out16, dtype, {p.B, p.Q, p.H, p.Dv});
      g.q = view16(gq16, dtype, {p.B, p.Q, p.H, p.D}), g.k = view16(gk16, dtype, {p.B, p.K, p.Hkv, p.D}),
      g.v = view16(gv16, dtype, {p.B, p.K, p.Hkv, p.Dv});
    }
    const double bwd =
        o.device == "cuda"
            ? attention_backward_on_cuda(p.config, in, out_view, lse_view, grad_out_view, g, o.repeat)
            : best_seconds(o.repeat,
                           [&] { attention_backward(p.config, in, out_view, lse_view, grad_out_view, g); });
    j["backward_ms"] = bwd * 1e3;
    j["backward_gflops"] = 2.5 * flops / bwd * 1e-9;  // dV, dP, dS, dK, dQ: 5 products vs the forward's 2
  }
  if (o.check) {
    j["max_abs_error_vs_reference"] = check_against_reference(p, out);
  }
  if (o.format == "json") {
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << "attention " << o.encoding << (o.causal ? " causal" : " bidirectional") << " on " << o.device
            << ", " << dtype_name(dtype) << (o.round_probabilities ? " (P rounded to bf16)" : "")
            << ": batch " << p.B << ", q_len " << p.Q << ", kv_len " << p.K << ", heads " << p.H << "/"
            << p.Hkv << ", head_dim " << p.D << "\n";
  std::cout << "  forward   " << j["forward_ms"].get<double>() << " ms, " << j["forward_gflops"].get<double>()
            << " GFLOP/s\n";
  if (o.backward)
    std::cout << "  backward  " << j["backward_ms"].get<double>() << " ms, "
              << j["backward_gflops"].get<double>() << " GFLOP/s\n";
  std::cout << "  mean |out| " << j["mean_abs_out"].get<double>() << "\n";
  if (o.check)
    std::cout << "  max |out - reference| " << j["max_abs_error_vs_reference"].get<double>()
              << " (double reference"
              << (dtype == DType::f32 ? ")" : " on the rounded inputs; out itself is rounded once)") << "\n";
}

}  // namespace

void add_attention_command(CLI::App& app) {
  auto o = std::make_shared<AttentionOptions>();
  CLI::App* cmd = app.add_subcommand(
      "attention", "Run the fused attention on random inputs (timings; --check vs the naive reference)");
  cmd->add_option("--encoding,-e", o->encoding,
                  "none, rope, alibi, t5, relative, shaw, transformer_xl (or xl), rope+alibi or rope+t5")
      ->capture_default_str();
  cmd->add_option("--batch", o->batch, "Batch size")->capture_default_str();
  cmd->add_option("--seq,-s", o->seq, "Query length")->capture_default_str();
  cmd->add_option("--kv-len", o->kv_len, "Key/value length (0, the default: --seq; queries sit at its end)");
  cmd->add_option("--heads", o->heads, "Query heads")->capture_default_str();
  cmd->add_option("--kv-heads", o->kv_heads, "Key/value heads (0, the default: --heads; fewer for GQA/MQA)");
  cmd->add_option("--dim,-d", o->dim, "head_dim")->capture_default_str();
  cmd->add_flag("--causal", o->causal, "Causal mask");
  cmd->add_option("--window", o->window, "Sliding window (0 = none)")->capture_default_str();
  cmd->add_option("--base", o->base, "rope theta / transformer_xl sinusoid base")->capture_default_str();
  cmd->add_option("--num-buckets", o->num_buckets, "t5 buckets")->capture_default_str();
  cmd->add_option("--max-distance", o->max_distance, "t5 max_distance")->capture_default_str();
  cmd->add_option("--clip", o->shaw_max_distance, "shaw / relative: clipping distance k")
      ->capture_default_str();
  cmd->add_option("--d-model", o->d_model,
                  "transformer_xl: width of the relative sinusoid (0, the default: heads * dim)");
  cmd->add_option("--dtype", o->dtype,
                  "storage of q, k, v and out: fp32, bf16 or fp16 (accumulation is fp32)")
      ->capture_default_str();
  cmd->add_flag("--round-probabilities", o->round_probabilities,
                "bf16 only: round each probability to bf16 before P V (AttentionConfig::round_probabilities; "
                "vdpbf16ps on AMD CPUs with AVX512_BF16)");
  cmd->add_option("--value-dim", o->value_dim,
                  "Value head_dim (0, the default: --dim; MLA: 128 with --dim 192)");
  cmd->add_option("--softcap", o->softcap, "Logit softcap (0 = none; Gemma 2: 50)")->capture_default_str();
  cmd->add_flag("--sinks", o->sinks, "Learned attention sinks, one random logit per head (gpt-oss)");
  cmd->add_option("--chunk", o->chunk, "Chunked attention (0 = none; Llama 4: 8192)")->capture_default_str();
  cmd->add_option("--rope-offset", o->rope_offset, "RoPE rotates dims [offset, dim) of each head (MLA: 128)")
      ->capture_default_str();
  cmd->add_option("--query-temperature", o->temperature,
                  "none, or rule:scale:floor_scale (llama4:0.1:8192, ministral3:0.1:16384, qwen_logn:0:8192)")
      ->capture_default_str();
  cmd->add_option("--device", o->device, "cpu or cuda (bf16 or fp16 on cuda)")->capture_default_str();
  cmd->add_flag("--backward", o->backward, "Also time the backward");
  cmd->add_flag("--check", o->check, "Compare the output with the naive double-precision reference");
  cmd->add_option("--repeat", o->repeat, "Runs per timing (the best is reported)")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random inputs")->capture_default_str();
  cmd->add_option("--format,-f", o->format, "table or json")->capture_default_str();
  cmd->callback([o] { run_attention(*o); });
}

}  // namespace posenc::tools
