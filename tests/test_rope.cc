// tests/test_rope.cc: RoPE kernels vs the naive reference on every SIMD target, gradients,
// the seeds' properties and bad input.
#include <complex>
#include <numbers>

#include "rope_cases.h"
#include "posenc/device.h"
#include "posenc/error.h"
#include "posenc/rope.h"
#include "reference/rope.h"
#include "test_util.h"

namespace posenc::test {
namespace {

int64_t max_plus_one(const std::vector<int64_t>& p) { return *std::max_element(p.begin(), p.end()) + 1; }

TEST(Rope, ForwardQKMatchesReferenceOnEveryTarget) {
  for (const RopeCase& c : rope_cases()) {
    SCOPED_TRACE(c.name);
    const Rope rope(c.config);
    const int64_t D = c.config.head_dim;
    const std::vector<float> q0 = random_floats(c.batch * c.tokens * c.heads * D, 1);
    const std::vector<float> k0 = random_floats(c.batch * c.tokens * c.kv_heads * D, 2);
    const std::vector<int64_t> pos = case_positions(c);
    const RopeFrequencies f = rope.frequencies(max_plus_one(pos));
    const bool rev = c.config.reversed;  // R(-p theta)
    const auto q_ref =
        ref::rope<double>(f, c.config.layout, D, to_double(q0), pos, c.batch, c.tokens, c.heads, rev);
    const auto k_ref =
        ref::rope<double>(f, c.config.layout, D, to_double(k0), pos, c.batch, c.tokens, c.kv_heads, rev);
    for_each_cpu_target([&](const std::string&) {
      std::vector<float> q = q0, k = k0;
      rope.forward_qk(view(q.data(), {c.batch, c.tokens, c.heads, D}),
                      view(k.data(), {c.batch, c.tokens, c.kv_heads, D}), positions_view(c, pos));
      const Tolerance tol{2e-6 * f.attention_factor, 2e-6};
      EXPECT_TRUE(all_close(q, q_ref, tol));
      EXPECT_TRUE(all_close(k, k_ref, tol));
      // Out of place gives the same bits as in place; the input is untouched.
      std::vector<float> out(q0.size(), -7.0f);
      rope.forward(view(q0.data(), {c.batch, c.tokens, c.heads, D}),
                   view(out.data(), {c.batch, c.tokens, c.heads, D}), positions_view(c, pos));
      EXPECT_EQ(out, q);
    });
  }
}

TEST(Rope, BackwardMatchesFiniteDifferencesOfTheReference) {
  for (const RopeCase& c : rope_cases()) {
    SCOPED_TRACE(c.name);
    const Rope rope(c.config);
    const int64_t D = c.config.head_dim, n = c.batch * c.tokens * c.heads * D;
    const std::vector<int64_t> pos = case_positions(c);
    const RopeFrequencies f = rope.frequencies(max_plus_one(pos));
    const std::vector<double> x = to_double(random_floats(n, 3));
    const std::vector<float> w = random_floats(n, 4);  // loss = sum(w * rope(x))
    auto loss = [&](const std::vector<double>& xs) {
      return dot(
          ref::rope<double>(f, c.config.layout, D, xs, pos, c.batch, c.tokens, c.heads, c.config.reversed),
          to_double(w));
    };
    const std::vector<size_t> coords = sample_coords(n);
    const std::vector<double> fd = finite_difference(loss, x, coords);
    for_each_cpu_target([&](const std::string&) {
      std::vector<float> grad = w;
      rope.backward(view(grad.data(), {c.batch, c.tokens, c.heads, D}), positions_view(c, pos));
      EXPECT_TRUE(all_close(gather(grad, coords), fd, {1e-5, 1e-5}));
    });
  }
}

TEST(Rope, StridedViewsOfAFusedQkvBuffer) {
  // qkv (B, T, 3, H, D): q and k are views with a token stride of 3 * H * D.
  RopeConfig c;
  c.head_dim = 40;
  const Rope rope(c);
  const int64_t B = 2, T = 5, H = 3, D = 40;
  const std::vector<float> qkv0 = random_floats(B * T * 3 * H * D, 5);
  std::vector<float> qkv = qkv0;
  std::vector<int64_t> pos = {4, 5, 6, 7, 8};
  TensorView q = strided_view(qkv.data(), {B, T, H, D}, {T * 3 * H * D, 3 * H * D, D, 1});
  TensorView k = strided_view(qkv.data() + H * D, {B, T, H, D}, {T * 3 * H * D, 3 * H * D, D, 1});
  rope.forward_qk(q, k, view(pos.data(), {T}));
  const RopeFrequencies f = rope.frequencies(9);
  std::vector<int64_t> pos_bt(B * T);
  for (int64_t i = 0; i < B * T; ++i) pos_bt[i] = pos[i % T];
  for (int part = 0; part < 3; ++part) {
    std::vector<double> in, got;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < H * D; ++e) {
          const size_t idx = ((b * T + t) * 3 + part) * H * D + e;
          in.push_back(qkv0[idx]);
          got.push_back(qkv[idx]);
        }
    if (part == 2) {
      EXPECT_EQ(got, in) << "v must be untouched";
    } else {
      EXPECT_TRUE(all_close(got, ref::rope<double>(f, c.layout, D, in, pos_bt, B, T, H), kF32Elementwise));
    }
  }
  // A non-unit stride on head_dim is rejected.
  EXPECT_THROW(rope.forward(strided_view(qkv.data(), {B, T, H, D / 2}, {T * 3 * H * D, 3 * H * D, D, 2}),
                            view(pos.data(), {T})),
               Error);
}

TEST(Rope, AccurateAtPositionTwoToTheTwenty) {
  RopeConfig c;
  c.head_dim = 128;
  const Rope rope(c);
  std::vector<int64_t> pos = {(1 << 20) - 1, 1 << 20, (1 << 20) + 12345};
  const std::vector<float> x0 = random_floats(3 * 128, 6);
  const auto expected = ref::rope<double>(rope.frequencies(), c.layout, 128, to_double(x0), pos, 1, 3, 1);
  for_each_cpu_target([&](const std::string&) {
    std::vector<float> x = x0;
    rope.forward(view(x.data(), {1, 3, 1, 128}), view(pos.data(), {3}));
    EXPECT_TRUE(all_close(x, expected, kF32Elementwise));
  });
}

// The seeds' central claim: <R(m) q, R(n) k> depends on m - n only.
TEST(Rope, ScoreDependsOnlyOnRelativePosition) {
  for (RopeLayout layout : {RopeLayout::half, RopeLayout::interleaved}) {
    RopeConfig c;
    c.head_dim = 64;
    c.layout = layout;
    const Rope rope(c);
    const std::vector<float> q0 = random_floats(64, 8), k0 = random_floats(64, 9);
    auto score = [&](int64_t m, int64_t n) {
      std::vector<float> q = q0, k = k0;
      std::vector<int64_t> pm = {m}, pn = {n};
      rope.forward(view(q.data(), {1, 1, 1, 64}), view(pm.data(), {1}));
      rope.forward(view(k.data(), {1, 1, 1, 64}), view(pn.data(), {1}));
      double s = 0;
      for (int i = 0; i < 64; ++i) s += static_cast<double>(q[i]) * k[i];
      return s;
    };
    for (int64_t delta : {0, 1, 7, 100, 4000}) {
      const double base_score = score(delta + 3, 3);
      for (int64_t shift : {int64_t{1}, int64_t{1000}, int64_t{1} << 16, int64_t{1} << 20})
        EXPECT_NEAR(score(delta + 3 + shift, 3 + shift), base_score, 2e-5)
            << "delta " << delta << " shift " << shift;
    }
  }
}

TEST(Rope, PreservesNorm) {
  RopeConfig c;
  c.head_dim = 80;
  const Rope rope(c);
  std::vector<float> x = random_floats(4 * 80, 10);
  std::vector<double> before(4), after(4);
  for (int i = 0; i < 4; ++i)
    for (int e = 0; e < 80; ++e) before[i] += static_cast<double>(x[i * 80 + e]) * x[i * 80 + e];
  std::vector<int64_t> pos = {0, 1, 12345, 1 << 20};
  rope.forward(view(x.data(), {1, 4, 1, 80}), view(pos.data(), {4}));
  for (int i = 0; i < 4; ++i)
    for (int e = 0; e < 80; ++e) after[i] += static_cast<double>(x[i * 80 + e]) * x[i * 80 + e];
  EXPECT_TRUE(all_close(after, before, {1e-5, 1e-6}));
}

// RoFormer section 3.4.3: with S_j = sum_{k<j} e^{i r theta_k} and h_j = q_[2j:2j+1] conj(k_[2j:2j+1]),
// |sum_j h_j e^{i r theta_j}| <= (max_j |h_{j+1} - h_j|) sum_j |S_{j+1}|, and the relative bound
// (1/(d/2)) sum_j |S_j| decays with the distance r.
TEST(Rope, LongTermDecayBoundOfRoFormer) {
  RopeConfig c;
  c.head_dim = 128;
  const RopeFrequencies f = rope_frequencies(c);
  const size_t P = f.inv_freq.size();
  auto partial_sums = [&](double r) {
    std::vector<std::complex<double>> S(P + 1);
    for (size_t j = 0; j < P; ++j) S[j + 1] = S[j] + std::polar(1.0, r * f.inv_freq[j]);
    return S;
  };
  auto relative_bound = [&](double r) {
    const auto S = partial_sums(r);
    double s = 0;
    for (size_t j = 1; j <= P; ++j) s += std::abs(S[j]);
    return s / static_cast<double>(P);
  };
  // The bound holds for random q, k at many distances.
  const std::vector<float> q = random_floats(128, 11), k = random_floats(128, 12);
  std::vector<std::complex<double>> h(P + 1);
  for (size_t j = 0; j < P; ++j)  // interleaved pairs as complex numbers
    h[j] = std::complex<double>(q[2 * j], q[2 * j + 1]) *
           std::conj(std::complex<double>(k[2 * j], k[2 * j + 1]));
  double max_step = 0;
  for (size_t j = 0; j < P; ++j) max_step = std::max(max_step, std::abs(h[j + 1] - h[j]));
  for (double r : {0.0, 1.0, 3.0, 10.0, 50.0, 200.0, 1000.0, 5000.0}) {
    std::complex<double> score = 0;
    for (size_t j = 0; j < P; ++j) score += h[j] * std::polar(1.0, r * f.inv_freq[j]);
    const auto S = partial_sums(r);
    double bound = 0;
    for (size_t j = 1; j <= P; ++j) bound += std::abs(S[j]);
    EXPECT_LE(std::abs(score), max_step * bound + 1e-9) << "r = " << r;
  }
  // Decay: the bound averaged over windows of distance shrinks as the distance grows.
  auto window_mean = [&](int lo, int hi) {
    double s = 0;
    for (int r = lo; r < hi; ++r) s += relative_bound(r);
    return s / (hi - lo);
  };
  EXPECT_NEAR(relative_bound(0), (P + 1) / 2.0, 1e-9);
  const double near = window_mean(1, 8), mid = window_mean(64, 128), far = window_mean(1024, 2048);
  EXPECT_GT(near, mid);
  EXPECT_GT(mid, far);
}

TEST(Rope, ForwardThenBackwardIsIdentityTimesAttentionFactorSquared) {
  RopeConfig c;
  c.head_dim = 64;
  c.max_position_embeddings = 4096;
  c.scaling.type = RopeScalingType::yarn;
  c.scaling.factor = 8;
  const Rope rope(c);
  const std::vector<float> x0 = random_floats(5 * 64, 13);
  std::vector<float> x = x0;
  std::vector<int64_t> pos = {0, 9, 99, 999, 99999};
  rope.forward(view(x.data(), {1, 5, 1, 64}), view(pos.data(), {5}), {.seq_len = 4096});
  rope.backward(view(x.data(), {1, 5, 1, 64}), view(pos.data(), {5}), {.seq_len = 4096});
  const double af = rope.frequencies().attention_factor;
  std::vector<double> expected(x0.size());
  for (size_t i = 0; i < x0.size(); ++i) expected[i] = x0[i] * af * af;
  EXPECT_TRUE(all_close(x, expected, {4e-6, 4e-6}));
}

TEST(Rope, CosSinTableMatchesDoublePrecision) {
  RopeConfig c;
  c.head_dim = 20;
  const Rope rope(c);
  std::vector<int64_t> pos = {0, 1, 2, 1000, 1 << 20};
  std::vector<float> cs(5 * 10), sn(5 * 10);
  rope.cos_sin(view(pos.data(), {5}), view(cs.data(), {5, 10}), view(sn.data(), {5, 10}));
  const RopeFrequencies f = rope.frequencies();
  std::vector<double> ec, es;
  for (int64_t p : pos)
    for (double w : f.inv_freq) {
      ec.push_back(std::cos(static_cast<long double>(p) * w));
      es.push_back(std::sin(static_cast<long double>(p) * w));
    }
  EXPECT_TRUE(all_close(cs, ec, kF32Elementwise));
  EXPECT_TRUE(all_close(sn, es, kF32Elementwise));
}

// RopeConfig::reversed against NanoChat's own formula, written out (transformers modeling_nanochat.py
// apply_rotary_pos_emb, rotate_half): q cos + rotate_half(q) sin with rotate_half(x) = [x2, -x1] and HF's
// cos / sin tables of p theta (emb = cat(freqs, freqs)); and it is exactly the usual rotation's transpose.
TEST(Rope, ReversedIsNanoChatsRotateHalf) {
  RopeConfig c;
  c.head_dim = 16;
  c.base = 10000;
  c.reversed = true;
  const Rope rope(c);
  const int64_t T = 5, H = 2, D = 16, h = D / 2;
  const std::vector<int64_t> pos = {0, 1, 7, 300, 1 << 20};
  const std::vector<float> x0 = random_floats(T * H * D, 9);
  std::vector<float> x = x0;
  rope.forward(view(x.data(), {1, T, H, D}), view(pos.data(), {T}));
  std::vector<double> expected(x0.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t hd = 0; hd < H; ++hd)
      for (int64_t d = 0; d < D; ++d) {
        const long double inv_freq = std::pow(10000.0L, -2.0L * static_cast<long double>(d % h) / D);
        const long double angle = static_cast<long double>(pos[t]) * inv_freq;
        const float* row = x0.data() + (t * H + hd) * D;
        const double rotated_half = d < h ? row[d + h] : -row[d - h];
        expected[(t * H + hd) * D + d] = row[d] * std::cos(angle) + rotated_half * std::sin(angle);
      }
  EXPECT_TRUE(all_close(x, expected, {2e-6, 2e-6}));
  // The usual RoPE's backward is the same rotation, bit for bit; cos_sin gives sin(-p theta).
  RopeConfig usual = c;
  usual.reversed = false;
  std::vector<float> back = x0;
  Rope(usual).backward(view(back.data(), {1, T, H, D}), view(pos.data(), {T}));
  EXPECT_EQ(back, x);
  std::vector<float> cs(T * h), sn(T * h), cs_usual(T * h), sn_usual(T * h);
  rope.cos_sin(view(pos.data(), {T}), view(cs.data(), {T, h}), view(sn.data(), {T, h}));
  Rope(usual).cos_sin(view(pos.data(), {T}), view(cs_usual.data(), {T, h}), view(sn_usual.data(), {T, h}));
  EXPECT_EQ(cs, cs_usual);
  for (size_t i = 0; i < sn.size(); ++i) ASSERT_EQ(sn[i], -sn_usual[i]) << i;
}

TEST(Rope, DynamicAndLongRopeFollowTheSequenceLength) {
  // With the default seq_len = max(position) + 1, a short prompt uses the short factors and a
  // long one the long factors, as HF's dynamic_rope_update switches them.
  const RopeCase c = rope_cases()[5];  // phi3_longrope_long
  ASSERT_EQ(c.name, "phi3_longrope_long");
  const Rope rope(c.config);
  EXPECT_EQ(rope.frequencies(4096).inv_freq[10], rope_frequencies(c.config, 100).inv_freq[10]);
  EXPECT_NE(rope.frequencies(4097).inv_freq[10], rope.frequencies(4096).inv_freq[10]);
  // An explicit seq_len overrides the positions.
  std::vector<float> a = random_floats(96, 14), b = a;
  std::vector<int64_t> pos = {10};
  rope.forward(view(a.data(), {1, 1, 1, 96}), view(pos.data(), {1}));
  rope.forward(view(b.data(), {1, 1, 1, 96}), view(pos.data(), {1}), {.seq_len = 100000});
  EXPECT_NE(a, b);
}

// Each validation error is reached, and the output is left untouched.
TEST(Rope, BadInputIsRejectedAndNothingIsWritten) {
  auto expect_error = [](const RopeConfig& c, const std::string& needle) {
    try {
      Rope r(c);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  RopeConfig c;
  c.head_dim = 64;
  RopeConfig bad = c;
  bad.rotary_dim = 7;
  expect_error(bad, "rotary_dim = 7");
  bad.rotary_dim = 66;
  expect_error(bad, "rotary_dim = 66");
  bad = c;
  bad.head_dim = 5;
  expect_error(bad, "head_dim (used as rotary_dim) = 5");
  bad = c;
  bad.base = -1;
  expect_error(bad, "base = -1");
  bad.base = std::nan("");
  expect_error(bad, "base = nan");
  bad = c;
  bad.scaling.type = RopeScalingType::linear;
  bad.scaling.factor = 0;
  expect_error(bad, "rope_scaling.factor = 0");
  bad.scaling.type = RopeScalingType::dynamic;
  bad.scaling.factor = 2;
  expect_error(bad, "max_position_embeddings = 0");
  bad = c;
  bad.scaling.type = RopeScalingType::longrope;
  bad.max_position_embeddings = 8192;
  bad.scaling.short_factor.assign(31, 1.0);
  bad.scaling.long_factor.assign(32, 1.0);
  expect_error(bad, "short_factor has 31 values, expected rotary_dim/2 = 32");
  bad = c;
  bad.scaling.type = RopeScalingType::llama3;
  bad.scaling.factor = 8;
  expect_error(bad, "original_max_position_embeddings = 0");
  bad = c;
  bad.multimodal = RopeMultimodal::mrope;
  bad.mrope_section = {8, 8, 8};
  expect_error(bad, "sums to 24, expected rotary_dim/2 = 32");
  bad = c;
  bad.multimodal = RopeMultimodal::mrope_interleaved;
  bad.mrope_section = {16, 16};
  expect_error(bad, "needs 3 values");
  bad.multimodal = RopeMultimodal::mrope_alternating_hw;
  bad.mrope_section = {12, 10, 10};
  expect_error(bad, "needs h == w");
  bad = c;
  bad.mrope_section = {16, 8, 8};
  expect_error(bad, "mrope_section is set but multimodal is 'none'");
  bad = c;
  bad.multimodal = RopeMultimodal::axial_2d;
  bad.scaling.type = RopeScalingType::yarn;
  bad.scaling.factor = 2;
  bad.max_position_embeddings = 4096;
  expect_error(bad, "not defined for axial_2d");
  bad = c;
  bad.head_dim = 6;
  bad.multimodal = RopeMultimodal::axial_2d;
  expect_error(bad, "multiple of 4 for axial_2d");
  bad = c;
  bad.scaling.type = RopeScalingType::yarn;
  bad.scaling.factor = 4;
  expect_error(bad, "needs original_max_position_embeddings or max_position_embeddings");
  bad.max_position_embeddings = 4096;
  bad.base = 1;
  expect_error(bad, "base = 1 is invalid: must be > 1 for rope_scaling 'yarn'");
  bad.base = 10000;
  bad.scaling.beta_fast = 0;
  expect_error(bad, "rope_scaling.beta_fast = 0");
  bad.scaling.beta_fast = 32;
  bad.scaling.attention_factor = -1;
  expect_error(bad, "rope_scaling.attention_factor = -1");
  bad = c;
  bad.scaling.type = RopeScalingType::llama3;
  bad.scaling.factor = 8;
  bad.scaling.original_max_position_embeddings = 8192;
  bad.scaling.high_freq_factor = 0.5;  // equal factors are accepted (transformers only warns)
  expect_error(bad, "rope_scaling.high_freq_factor = 0.5");
  bad = c;
  bad.head_dim = 2;
  bad.scaling.type = RopeScalingType::dynamic;
  bad.scaling.factor = 2;
  bad.max_position_embeddings = 16;
  expect_error(bad, "must be > 2 for rope_scaling 'dynamic'");
  bad = c;
  bad.scaling.type = RopeScalingType::longrope;
  bad.scaling.original_max_position_embeddings = 4096;
  bad.scaling.short_factor.assign(32, 1.0);
  bad.scaling.long_factor.assign(32, 1.0);
  expect_error(bad, "needs max_position_embeddings > 0");
  bad = c;
  bad.max_position_embeddings = -5;
  expect_error(bad, "max_position_embeddings = -5");
  bad = c;
  bad.frequency_divisors.assign(31, 1.0);
  expect_error(bad, "frequency_divisors has 31 values");
  bad = c;
  bad.frequency_divisors.assign(32, 1.0);
  bad.frequency_divisors[3] = -2;
  expect_error(bad, "frequency_divisors[3] = -2");

  const Rope rope(c);
  const std::vector<float> x0 = random_floats(2 * 3 * 2 * 64, 15);
  std::vector<float> x = x0;
  std::vector<int64_t> pos = {0, 1, 2, 3};
  auto expect_untouched_error = [&](auto&& call, const std::string& needle) {
    try {
      call();
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(x, x0);
  };
  expect_untouched_error(
      [&] {
        rope.forward(view(x.data(), {2, 3, 2, 64}), view(pos.data(), {4}));
      },
      "positions has shape [4], expected (T=3) or (B=2, T=3)");
  expect_untouched_error(
      [&] {
        rope.forward(view(x.data(), {2, 3, 2, 32}), view(pos.data(), {3}));
      },
      "x has shape [2, 3, 2, 32], expected [-1, -1, -1, 64]");
  expect_untouched_error(
      [&] {
        rope.forward(view(x.data(), {2, 3, 128}), view(pos.data(), {3}));
      },
      "expected rank 4");
  std::vector<double> xd(x0.size());
  EXPECT_THROW(rope.forward(view(xd.data(), {2, 3, 2, 64}), view(pos.data(), {3})), Error);
  std::vector<int64_t> huge = {0, int64_t{1} << 60, 2};
  expect_untouched_error(
      [&] {
        rope.forward(view(x.data(), {2, 3, 2, 64}), view(huge.data(), {3}));
      },
      "outside [-2^53, 2^53]");
  std::vector<float> out(x0.size());
  expect_untouched_error(
      [&] {
        rope.forward(view(x.data(), {2, 3, 2, 64}), view(out.data(), {2, 3, 1, 64}), view(pos.data(), {3}));
      },
      "out has shape");
  // Host memory marked cuda: refused before anything runs (no backend in this build, or not device memory).
  const TensorView on_gpu = view(x.data(), {2, 3, 2, 64}, Device::cuda);
  expect_untouched_error([&] { rope.forward(on_gpu, view(pos.data(), {3})); },
                         cuda_built() ? "positions is on device cpu, expected cuda" : "has no CUDA backend");
  if (cuda_built())
    expect_untouched_error([&] { rope.forward(on_gpu, view(pos.data(), {3}, Device::cuda)); },
                           cuda_device_count() > 0 ? "not CUDA device memory" : "could not be checked");
}

}  // namespace
}  // namespace posenc::test
