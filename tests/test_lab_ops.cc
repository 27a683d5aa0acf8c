// tests/test_lab_ops.cc: the lab's layers (lab/ops.h) against naive double-precision loops, and
// their backwards against central differences of those loops (exact in double), on odd sizes and
// on more rows than one task, with 1, 2 and 3 threads giving the same bits; and the SIMD kernels
// under them (lab/kernels.h) on every compiled target: the matrix product in each operand layout
// and epilogue against a double loop with its rounding bound, the other loops against double loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "attention.h"
#include "hwy/targets.h"
#include "kernels.h"
#include "ops.h"
#include "test_util.h"

namespace posenc::lab::ops {
namespace {

using test::all_close;
using test::random_floats;
using test::to_double;
using Vec = std::vector<double>;

// ---- naive references, double
Vec ref_matmul(const Vec& inp, const Vec& w, const Vec* bias, int64_t N, int64_t C, int64_t OC) {
  Vec out(static_cast<size_t>(N * OC));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o) {
      double s = bias ? (*bias)[static_cast<size_t>(o)] : 0.0;
      for (int64_t c = 0; c < C; ++c)
        s += inp[static_cast<size_t>(n * C + c)] * w[static_cast<size_t>(o * C + c)];
      out[static_cast<size_t>(n * OC + o)] = s;
    }
  return out;
}
Vec ref_norm(Norm norm, const Vec& inp, const Vec& w, const Vec& b, int64_t N, int64_t C) {
  Vec out(inp.size());
  for (int64_t n = 0; n < N; ++n) {
    double m = 0, v = 0;
    if (norm == Norm::layer) {
      for (int64_t c = 0; c < C; ++c) m += inp[static_cast<size_t>(n * C + c)];
      m /= static_cast<double>(C);
    }
    for (int64_t c = 0; c < C; ++c) v += std::pow(inp[static_cast<size_t>(n * C + c)] - m, 2);
    const double s = 1.0 / std::sqrt(v / static_cast<double>(C) + kNormEps);
    for (int64_t c = 0; c < C; ++c) {
      const size_t i = static_cast<size_t>(n * C + c);
      out[i] = (inp[i] - m) * s * w[static_cast<size_t>(c)] +
               (norm == Norm::layer ? b[static_cast<size_t>(c)] : 0.0);
    }
  }
  return out;
}
double ref_gelu(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
Vec ref_losses(const Vec& logits, const std::vector<int32_t>& targets, int64_t N, int64_t V) {
  Vec out(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    if (targets[static_cast<size_t>(n)] == kIgnoreTarget) continue;  // counts as 0
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += std::exp(logits[static_cast<size_t>(n * V + v)]);
    out[static_cast<size_t>(n)] =
        std::log(s) - logits[static_cast<size_t>(n * V + targets[static_cast<size_t>(n)])];
  }
  return out;
}

// d/dx of sum(f(x) * weights) by central differences in double.
// Central differences of dot(f(x), weights) at every coordinate of x, or at `coords` only (a large
// input's sample: each coordinate costs two reference passes, minutes under the sanitizers).
Vec fd_grad(const std::function<Vec(const Vec&)>& f, Vec x, const Vec& weights,
            const std::vector<size_t>* coords = nullptr, double h = 1e-6) {
  std::vector<size_t> all;
  if (!coords) {
    for (size_t i = 0; i < x.size(); ++i) all.push_back(i);
    coords = &all;
  }
  Vec g;
  for (size_t i : *coords) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = test::dot(f(x), weights);
    x[i] = saved - h;
    const double down = test::dot(f(x), weights);
    x[i] = saved;
    g.push_back((up - down) / (2 * h));
  }
  return g;
}

struct Shape {
  int64_t N, C, OC;
};
class LabOps : public ::testing::TestWithParam<Shape> {};

// Named copies of the shape, not structured bindings: clang < 16 cannot capture bindings in lambdas.
TEST_P(LabOps, MatmulForwardAndBackward) {
  const int64_t N = GetParam().N, C = GetParam().C, OC = GetParam().OC;
  const auto inp = random_floats(static_cast<size_t>(N * C), 1),
             w = random_floats(static_cast<size_t>(OC * C), 2);
  const auto bias = random_floats(static_cast<size_t>(OC), 3),
             dout = random_floats(static_cast<size_t>(N * OC), 4);
  std::vector<float> out(static_cast<size_t>(N * OC));
  matmul_forward(out.data(), inp.data(), w.data(), bias.data(), N, C, OC);
  const Vec bias_d = to_double(bias);
  EXPECT_TRUE(
      all_close(out, ref_matmul(to_double(inp), to_double(w), &bias_d, N, C, OC), test::kF32Reduction));
  // gradients accumulate onto what is there (ones)
  std::vector<float> dinp(inp.size(), 1.0f), dw(w.size(), 1.0f), db(bias.size(), 1.0f);
  matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C, OC);
  const Vec weights = to_double(dout);
  const std::vector<size_t> at_inp = test::sample_coords(inp.size(), 256),
                            at_w = test::sample_coords(w.size(), 256);
  Vec g_inp = fd_grad([&](const Vec& x) { return ref_matmul(x, to_double(w), &bias_d, N, C, OC); },
                      to_double(inp), weights, &at_inp);
  Vec g_w = fd_grad([&](const Vec& x) { return ref_matmul(to_double(inp), x, &bias_d, N, C, OC); },
                    to_double(w), weights, &at_w);
  Vec g_b = fd_grad([&](const Vec& x) { return ref_matmul(to_double(inp), to_double(w), &x, N, C, OC); },
                    bias_d, weights);
  for (Vec* g : {&g_inp, &g_w, &g_b})
    for (double& x : *g) x += 1.0;
  const test::Tolerance tol{1e-4, 1e-4};  // fp32 sums of up to ~300 products; FD error ~1e-9
  EXPECT_TRUE(all_close(test::gather(dinp, at_inp), g_inp, tol));
  EXPECT_TRUE(all_close(test::gather(dw, at_w), g_w, tol));
  EXPECT_TRUE(all_close(db, g_b, tol));
}

TEST_P(LabOps, NormsForwardAndBackward) {
  const int64_t N = GetParam().N, C = GetParam().C, OC = GetParam().OC;
  (void)OC;
  for (Norm norm : {Norm::layer, Norm::rms}) {
    SCOPED_TRACE(norm == Norm::layer ? "layer" : "rms");
    const auto inp = random_floats(static_cast<size_t>(N * C), 5, -2, 2),
               w = random_floats(static_cast<size_t>(C), 6);
    const auto b = random_floats(static_cast<size_t>(C), 7),
               dout = random_floats(static_cast<size_t>(N * C), 8);
    std::vector<float> out(inp.size()), mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N));
    norm_forward(norm, out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
    const Vec wd = to_double(w), bd = to_double(b);
    EXPECT_TRUE(all_close(out, ref_norm(norm, to_double(inp), wd, bd, N, C), test::kF32Reduction));
    std::vector<float> dinp(inp.size(), 0.5f), dw(w.size(), 0.5f), db(b.size(), 0.5f);
    norm_backward(norm, dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), mean.data(),
                  rstd.data(), N, C);
    const Vec weights = to_double(dout);
    const std::vector<size_t> at_inp = test::sample_coords(inp.size(), 256);
    Vec g_inp = fd_grad([&](const Vec& x) { return ref_norm(norm, x, wd, bd, N, C); }, to_double(inp),
                        weights, &at_inp);
    Vec g_w = fd_grad([&](const Vec& x) { return ref_norm(norm, to_double(inp), x, bd, N, C); }, wd, weights);
    Vec g_b = fd_grad([&](const Vec& x) { return ref_norm(norm, to_double(inp), wd, x, N, C); }, bd, weights);
    for (Vec* g : {&g_inp, &g_w, &g_b})
      for (double& x : *g) x += 0.5;
    EXPECT_TRUE(all_close(test::gather(dinp, at_inp), g_inp, {2e-4, 2e-4}));
    EXPECT_TRUE(all_close(dw, g_w, {2e-4, 2e-4}));
    EXPECT_TRUE(all_close(db, g_b, {2e-4, 2e-4}));
  }
}

TEST_P(LabOps, GeluCrossEntropyEmbedding) {
  const int64_t N = GetParam().N, C = GetParam().C, V = GetParam().OC;
  // GELU
  const auto x = random_floats(static_cast<size_t>(N * C), 9, -4, 4), dy = random_floats(x.size(), 10);
  std::vector<float> y(x.size()), dx(x.size(), 0.25f);
  gelu_forward(y.data(), x.data(), N * C);
  gelu_backward(dx.data(), x.data(), dy.data(), N * C);
  Vec y_ref(x.size()), dx_ref(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    y_ref[i] = ref_gelu(x[i]);
    dx_ref[i] = 0.25 + dy[i] * (ref_gelu(x[i] + 1e-6) - ref_gelu(x[i] - 1e-6)) / 2e-6;
  }
  EXPECT_TRUE(all_close(y, y_ref, test::kF32Reduction));
  EXPECT_TRUE(all_close(dx, dx_ref, {1e-5, 1e-5}));
  // cross-entropy: probs may alias logits
  auto logits = random_floats(static_cast<size_t>(N * V), 11, -5, 5);
  std::vector<int32_t> targets(static_cast<size_t>(N));
  // Every fourth target past the first is ignored: loss 0, gradient 0, mean over the rest.
  int64_t counted = 0;
  for (int64_t n = 0; n < N; ++n) {
    targets[static_cast<size_t>(n)] = n % 4 == 3 ? kIgnoreTarget : static_cast<int32_t>((n * 7 + 3) % V);
    counted += targets[static_cast<size_t>(n)] != kIgnoreTarget;
  }
  const Vec losses_ref = ref_losses(to_double(logits), targets, N, V);
  std::vector<float> losses(static_cast<size_t>(N)), probs = logits;
  crossentropy_forward(probs.data(), losses.data(), probs.data(), targets.data(), N, V);
  EXPECT_TRUE(all_close(losses, losses_ref, test::kF32Reduction));
  std::vector<float> dlogits(probs.size());
  crossentropy_backward(dlogits.data(), probs.data(), targets.data(), 1.0f / static_cast<float>(counted), N,
                        V);
  Vec weights(static_cast<size_t>(N), 1.0 / static_cast<double>(counted));
  const Vec g =
      fd_grad([&](const Vec& z) { return ref_losses(z, targets, N, V); }, to_double(logits), weights);
  EXPECT_TRUE(all_close(dlogits, g, {1e-6, 1e-4}));
  // embedding: forward gathers scaled rows, backward scatters them back in order
  const auto wte = random_floats(static_cast<size_t>(V * C), 12);
  std::vector<int32_t> tokens(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) tokens[static_cast<size_t>(n)] = static_cast<int32_t>((n * 7 + 3) % V);
  std::vector<float> emb(static_cast<size_t>(N * C)), dwte(wte.size(), 0.0f);
  embedding_forward(emb.data(), tokens.data(), wte.data(), 2.0f, N, C);
  embedding_backward(dwte.data(), emb.data(), tokens.data(), 0.5f, N, C);
  Vec emb_ref(emb.size()), dwte_ref(wte.size(), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const size_t row = static_cast<size_t>(tokens[static_cast<size_t>(n)] * C + c);
      emb_ref[static_cast<size_t>(n * C + c)] = 2.0 * wte[row];
      dwte_ref[row] += wte[row];
    }
  EXPECT_TRUE(all_close(emb, emb_ref, test::kF32Elementwise));
  EXPECT_TRUE(all_close(dwte, dwte_ref, test::kF32Reduction));
}

// N = 1 and odd sizes; N = 300 spans three row chunks; C = 33 is not a multiple of any SIMD width.
INSTANTIATE_TEST_SUITE_P(Shapes, LabOps,
                         ::testing::Values(Shape{1, 1, 2}, Shape{5, 7, 9}, Shape{3, 16, 63},
                                           Shape{300, 33, 17}),
                         [](const auto& info) {
                           return "N" + std::to_string(info.param.N) + "_C" + std::to_string(info.param.C) +
                                  "_OC" + std::to_string(info.param.OC);
                         });

TEST(LabOps, MatmulRefusesAnOutputThatAliasesAnInput) {
  std::vector<float> x(12, 1.0f), w(4, 1.0f), act(12);
  test::expect_error([&] { matmul_forward(x.data(), x.data(), w.data(), nullptr, 6, 2, 2); },
                     "aliases its inp");
  test::expect_error([&] { matmul_forward(act.data(), x.data(), w.data(), nullptr, 6, 2, 2, act.data()); },
                     "aliases its residual");
  test::expect_error(
      [&] {
        matmul_backward(x.data(), w.data(), nullptr, act.data(), x.data(), w.data(), 6, 2, 2, Dinp::store,
                        x.data());
      },
      "factor is set with mode add or store");
  test::expect_error(
      [&] { matmul_forward(act.data(), x.data(), w.data(), nullptr, 6, 2, 2, nullptr, nullptr, true); },
      "gelu_grad is true without gelu_out");
}

// Requesting the caller's next operands (Ahead) during the products changes no bit of their results,
// whatever the region's size against the products' tiles (larger, smaller, none).
TEST(LabOps, MatmulBackwardAheadChangesNoBit) {
  const int64_t N = 131, C = 70, OC = 45;
  const auto inp = random_floats(static_cast<size_t>(N * C), 1),
             w = random_floats(static_cast<size_t>(OC * C), 2);
  const auto dout = random_floats(static_cast<size_t>(N * OC), 3), factor = random_floats(inp.size(), 4);
  const auto next = random_floats(5000, 5);
  auto run = [&](const Ahead& ahead) {
    std::vector<float> dinp(inp.size()), dw(w.size(), 0.5f), db(static_cast<size_t>(OC), 0.5f);
    matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C, OC,
                    Dinp::times, factor.data(), ahead);
    dinp.insert(dinp.end(), dw.begin(), dw.end());
    dinp.insert(dinp.end(), db.begin(), db.end());
    return dinp;
  };
  const std::vector<float> none = run({});
  for (int64_t floats : {int64_t{1}, int64_t{37}, int64_t{2500}}) {
    SCOPED_TRACE(floats);
    EXPECT_EQ(run({next.data(), next.data() + 2500, floats}), none);
  }
}

TEST(LabOps, ThreadCountDoesNotChangeBits) {
  const int64_t N = 517, C = 40, OC = 300;
  const auto inp = random_floats(static_cast<size_t>(N * C), 1),
             w = random_floats(static_cast<size_t>(OC * C), 2);
  const auto dout = random_floats(static_cast<size_t>(N * OC), 3), res = random_floats(dout.size(), 4);
  const auto nw = random_floats(static_cast<size_t>(C), 5), nb = random_floats(static_cast<size_t>(C), 6);
  auto run = [&](int threads) {
    set_threads(threads);
    std::vector<float> out(static_cast<size_t>(N * OC)), act(out.size()), dinp(inp.size(), 0.0f),
        dw(w.size(), 0.0f), db(static_cast<size_t>(OC), 0.0f), dpre(inp.size());
    matmul_forward(out.data(), inp.data(), w.data(), nullptr, N, C, OC, res.data(), act.data());
    matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C, OC);
    matmul_backward(dpre.data(), dw.data(), nullptr, dout.data(), inp.data(), w.data(), N, C, OC, Dinp::times,
                    dinp.data());
    std::vector<float> dgelu(out.size()), act2(out.size());
    matmul_forward(dgelu.data(), inp.data(), w.data(), nullptr, N, C, OC, res.data(), act2.data(), true);
    out.insert(out.end(), dgelu.begin(), dgelu.end());
    std::vector<float> normed(inp.size()), mean(static_cast<size_t>(N)), rstd(mean.size()),
        dnorm(inp.size(), 0.0f), dnw(nw.size(), 0.0f), dnb(nb.size(), 0.0f);
    norm_forward(Norm::layer, normed.data(), mean.data(), rstd.data(), inp.data(), nw.data(), nb.data(), N,
                 C);
    norm_backward(Norm::layer, dnorm.data(), dnw.data(), dnb.data(), dpre.data(), inp.data(), nw.data(),
                  mean.data(), rstd.data(), N, C);
    for (const auto* v : {&act, &dinp, &dw, &db, &dpre, &normed, &dnorm, &dnw, &dnb})
      out.insert(out.end(), v->begin(), v->end());
    return out;
  };
  const std::vector<float> one = run(1), two = run(2), three = run(3);
  set_threads(2);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, three);
}

// ---- lab/kernels.h on every SIMD target compiled in and supported by this CPU.

void for_each_target(const std::function<void(int64_t target)>& fn) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    fn(target);
  }
  hwy::SetSupportedTargetsForTest(0);  // back to the best target
}
// Targets with fused multiply-adds, on which kernels.h promises the matrix product the same bits.
bool has_fma(int64_t target) { return HWY_ARCH_X86 && target <= HWY_AVX2; }

constexpr double kUnitRoundoff = 0x1p-24;  // fp32

// Every actual[i] within bound[i] of expected[i]; reports the worst offender relative to its bound.
::testing::AssertionResult within(const std::vector<float>& actual, const Vec& expected, const Vec& bound) {
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double ratio = std::abs(actual[i] - expected[i]) / bound[i];
    if (!(ratio <= worst)) worst = std::isnan(ratio) ? INFINITY : ratio, at = i;
  }
  if (worst <= 1) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << at << ": " << actual[at] << " vs " << expected[at]
                                       << ", bound " << bound[at] << " (" << worst << "x the bound)";
}

double gelu_grad(double x) {
  const double s = std::sqrt(2 / M_PI), t = std::tanh(s * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * s * (1 + 3 * 0.044715 * x * x);
}

enum class Epilogue { plain, accumulate, bias, residual, gelu_out, gelu_grad, factor };
const char* name(Epilogue e) {
  const char* names[] = {
      "plain", "accumulate", "bias", "bias+residual", "bias+gelu_out", "bias+gelu_out+gelu_grad", "factor"};
  return names[static_cast<int>(e)];
}

// One product C = A B in one operand layout and epilogue, on every target, against a double loop. A
// sum of n fp32 roundings is within n u (u = 2^-24) times the sum of its terms' magnitudes (to first
// order): k multiply-adds from c0 (2 roundings each where the target has no FMA), then the epilogue's
// adds. GELU's tanh is within 2.8e-7 (kernels.cc), which moves gelu(x) by < 1e-6 (1 + |x|) and
// gelu'(x) by < 1e-6 (1 + x^2) for |x| <= 4; an error e in x moves gelu'(x) by < 0.6 e (|gelu''| < 0.6).
void check_gemm(int64_t m, int64_t n, int64_t k, bool a_transposed, bool b_transposed, Epilogue e) {
  SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k << (a_transposed ? " A^T" : "")
                                    << (b_transposed ? " B^T" : "") << " " << name(e));
  // A stored (m, k) with a padded row, or (k, m); B stored (k, n), or (n, k) with a padded row.
  const int64_t lda = a_transposed ? m : k + 1, ldb = b_transposed ? k + 2 : n;
  const auto a = random_floats(static_cast<size_t>(std::max<int64_t>(a_transposed ? k * m : m * lda, 1)), 21);
  const auto b = random_floats(static_cast<size_t>(std::max<int64_t>(b_transposed ? n * ldb : k * n, 1)), 22);
  const auto c0 = random_floats(static_cast<size_t>(m * n), 23),
             bias = random_floats(static_cast<size_t>(n), 24);
  const auto residual = random_floats(c0.size(), 25), factor = random_floats(c0.size(), 26, -1, 1);
  auto at_a = [&](int64_t i, int64_t l) {
    return a[static_cast<size_t>(a_transposed ? l * lda + i : i * lda + l)];
  };
  auto at_b = [&](int64_t l, int64_t j) {
    return b[static_cast<size_t>(b_transposed ? j * ldb + l : l * ldb + j)];
  };
  const bool with_bias =
      e == Epilogue::bias || e == Epilogue::residual || e == Epilogue::gelu_out || e == Epilogue::gelu_grad;
  Vec want(c0.size()), bound(c0.size()), want_gelu(c0.size()), bound_gelu(c0.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const auto ij = static_cast<size_t>(i * n + j);
      double s = 0, mag = 0;
      for (int64_t l = 0; l < k; ++l) {
        s += static_cast<double>(at_a(i, l)) * at_b(l, j);
        mag += std::abs(static_cast<double>(at_a(i, l)) * at_b(l, j));
      }
      double adds = 0;
      if (e == Epilogue::accumulate) s += c0[ij], mag += std::abs(c0[ij]);
      if (with_bias) s += bias[static_cast<size_t>(j)], mag += std::abs(bias[static_cast<size_t>(j)]), ++adds;
      if (e == Epilogue::residual) s += residual[ij], mag += std::abs(residual[ij]), ++adds;
      double err = static_cast<double>(2 * k + adds) * kUnitRoundoff * mag;
      want_gelu[ij] = 0.5 * s * (1 + std::tanh(std::sqrt(2 / M_PI) * (s + 0.044715 * s * s * s)));
      bound_gelu[ij] = 1.13 * 1.01 * err + 1e-6 * (1 + std::abs(s));
      if (e == Epilogue::factor) {
        err = std::abs(factor[ij]) * err + kUnitRoundoff * std::abs(factor[ij] * s);
        s *= factor[ij];
      }
      if (e == Epilogue::gelu_grad) {  // C = gelu'(x), x's error through |gelu''| < 0.6, plus tanh's: past
        err = 0.6 * err + 1e-6 * (1 + s * s) + 8 * kUnitRoundoff;  // |x| = 4, gelu' is 0 or 1 within 1e-5
        s = gelu_grad(s);
      }
      want[ij] = s;
      bound[ij] = 1.01 * err + 1e-30;
    }
  std::vector<float> first_fma;
  for_each_target([&](int64_t target) {
    std::vector<float> c = c0, gelu_out(c0.size());
    kernels::Gemm g;
    g.m = m, g.n = n, g.k = k;
    g.a = a_transposed ? kernels::Matrix{a.data(), 1, lda} : kernels::Matrix{a.data(), lda, 1};
    g.b = b_transposed ? kernels::Matrix{b.data(), 1, ldb} : kernels::Matrix{b.data(), ldb, 1};
    g.c = c.data(), g.ldc = n;
    g.accumulate = e == Epilogue::accumulate;
    if (with_bias) g.bias = bias.data();
    if (e == Epilogue::residual) g.residual = residual.data();
    if (e == Epilogue::gelu_out || e == Epilogue::gelu_grad) g.gelu_out = gelu_out.data();
    g.gelu_grad = e == Epilogue::gelu_grad;
    if (e == Epilogue::factor) g.factor = factor.data();
    kernels::gemm(g);
    EXPECT_TRUE(within(c, want, bound));
    if (e == Epilogue::gelu_out || e == Epilogue::gelu_grad) {
      EXPECT_TRUE(within(gelu_out, want_gelu, bound_gelu));
    }
    if (!has_fma(target) || e == Epilogue::gelu_out || e == Epilogue::gelu_grad) return;
    if (first_fma.empty()) first_fma = c;
    EXPECT_EQ(c, first_fma) << "the same bits on every target with FMA";
  });
}

// Ones, odd sizes, k = 0, a partial vector past a whole AVX-512 strip (n 70 = 64 + 6), two k-blocks
// (k 260 > 256), and more rows than one task.
TEST(LabKernels, GemmMatchesDoubleInEveryLayoutAndEpilogue) {
  struct Case {
    int64_t m, n, k;
  };
  for (const Case& c : {Case{1, 1, 1}, Case{1, 17, 3}, Case{7, 1, 5}, Case{5, 9, 1}, Case{3, 5, 0},
                        Case{13, 33, 7}, Case{26, 70, 260}, Case{97, 64, 64}})
    for (int layout = 0; layout < 4; ++layout)
      for (Epilogue e : {Epilogue::plain, Epilogue::accumulate, Epilogue::bias, Epilogue::residual,
                         Epilogue::gelu_out, Epilogue::gelu_grad, Epilogue::factor})
        check_gemm(c.m, c.n, c.k, (layout & 1) != 0, (layout & 2) != 0, e);
}

// GELU, the column sums, the norms, the softmax and AdamW against double loops (AdamW and the norms
// with the same bits on every target, as kernels.cc promises).
// The norms take 16 rows at a time where C is a multiple of 16 on AVX-512 (their row sums' lanes reduced
// together, in RowSum's order): the same bits as one row at a time (N = 1) and as every other target, for
// whole groups of 16 rows and the rest (37 = 2 x 16 + 5), against double for scale.
TEST(LabKernels, NormsInGroupsOfRowsGiveEachRowsBits) {
  const int64_t N = 37;
  for (int64_t C : {int64_t{16}, int64_t{64}}) {
    SCOPED_TRACE(C);
    const auto x = random_floats(static_cast<size_t>(N * C), 41, -3, 3), dy = random_floats(x.size(), 42);
    const auto w = random_floats(static_cast<size_t>(C), 43), b = random_floats(static_cast<size_t>(C), 44);
    std::vector<float> first;
    for_each_target([&](int64_t) {
      std::vector<float> bits;
      for (Norm norm : {Norm::layer, Norm::rms}) {
        const bool layer = norm == Norm::layer;
        std::vector<float> out(x.size()), mean(static_cast<size_t>(N)), rstd(mean.size()),
            dinp(x.size(), 0.5f), dw(w.size(), 0.5f), db(b.size(), 0.5f);
        kernels::norm_forward(layer, out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                              kNormEps, N, C);
        EXPECT_TRUE(all_close(out, ref_norm(norm, to_double(x), to_double(w), to_double(b), N, C),
                              test::kF32Reduction));
        kernels::norm_backward(layer, dinp.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                               mean.data(), rstd.data(), N, C);
        for (int64_t n = 0; n < N; ++n) {  // row by row: each row's output, mean, rstd and d x
          const auto at = static_cast<size_t>(n * C);
          std::vector<float> row_out(static_cast<size_t>(C)), row_dinp(row_out.size(), 0.5f), dw1(w.size()),
              db1(b.size());
          float m = 0, r = 0;
          kernels::norm_forward(layer, row_out.data(), &m, &r, x.data() + at, w.data(), b.data(), kNormEps, 1,
                                C);
          kernels::norm_backward(layer, row_dinp.data(), dw1.data(), db1.data(), dy.data() + at,
                                 x.data() + at, w.data(), &m, &r, 1, C);
          ASSERT_EQ(std::vector<float>(out.begin() + at, out.begin() + at + C), row_out) << "row " << n;
          ASSERT_EQ(m, mean[static_cast<size_t>(n)]) << "row " << n;
          ASSERT_EQ(r, rstd[static_cast<size_t>(n)]) << "row " << n;
          ASSERT_EQ(std::vector<float>(dinp.begin() + at, dinp.begin() + at + C), row_dinp) << "row " << n;
        }
        for (const auto* v : {&out, &mean, &rstd, &dinp, &dw, &db})
          bits.insert(bits.end(), v->begin(), v->end());
      }
      if (first.empty()) first = bits;
      EXPECT_EQ(bits, first) << "the norms' bits on every target";
    });
  }
}

// The model recomputes the norms' outputs in its backward (norm_apply) instead of keeping them:
// norm_forward's out bit for bit, both norms, with and without the 16-row groups (C 64 and 70; N 37 = 2 x 16
// + 5), on every target.
TEST(LabKernels, NormApplyIsNormForwardsOut) {
  for (const int64_t C : {int64_t{64}, int64_t{70}})
    for (const bool layer : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "C " << C << (layer ? " layer" : " rms"));
      const int64_t N = 37;
      const auto x = random_floats(static_cast<size_t>(N * C), 41, -3, 3),
                 w = random_floats(static_cast<size_t>(C), 42), b = random_floats(static_cast<size_t>(C), 43);
      for_each_target([&](int64_t) {
        std::vector<float> out(x.size()), mean(static_cast<size_t>(N)), rstd(mean.size()), again(x.size());
        kernels::norm_forward(layer, out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                              kNormEps, N, C);
        kernels::norm_apply(layer, again.data(), x.data(), w.data(), b.data(), mean.data(), rstd.data(), N,
                            C);
        EXPECT_EQ(again, out);
      });
    }
}

// The MLP's first product streams C = gelu'(x) where C's rows are aligned to a vector (GeluTile) and stores
// it otherwise: the same bits either way, with gelu_out's, on every target (whole tiles of 64 columns and a
// partial one past them).
TEST(LabKernels, GeluGradProductHasTheSameBitsAlignedOrNot) {
  const int64_t m = 29, n = 80, k = 17;
  const auto a = random_floats(static_cast<size_t>(m * k), 51, -2, 2),
             b = random_floats(static_cast<size_t>(k * n), 52, -2, 2),
             bias = random_floats(static_cast<size_t>(n), 53);
  for_each_target([&](int64_t) {
    kernels::LineFloats aligned(static_cast<size_t>(m * n + 1)), aligned_gelu(aligned.size());
    auto run = [&](float* c, float* gelu) {
      kernels::Gemm g;
      g.m = m, g.n = n, g.k = k;
      g.a = {a.data(), k, 1}, g.b = {b.data(), n, 1};
      g.c = c, g.ldc = n, g.bias = bias.data(), g.gelu_out = gelu, g.gelu_grad = true;
      kernels::gemm(g);
    };
    run(aligned.data(), aligned_gelu.data());
    kernels::LineFloats shifted(aligned.size()), shifted_gelu(aligned.size());
    run(shifted.data() + 1, shifted_gelu.data() + 1);  // rows one float past a line: stored
    EXPECT_TRUE(std::equal(aligned.begin(), aligned.end() - 1, shifted.begin() + 1));
    EXPECT_TRUE(std::equal(aligned_gelu.begin(), aligned_gelu.end() - 1, shifted_gelu.begin() + 1));
  });
}

// The attention's exponential: Highway's Exp's bits wherever x <= 177 (past it Highway's overflows to NaN),
// NaN, infinities and subnormal results included, on every target; within 4 ulp of e^x in double.
TEST(LabKernels, AttentionExpIsHighwaysExp) {
  std::vector<float> x = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          -87.3f,
                          -88.0f,
                          -100.0f,
                          -103.97f,
                          -104.0f,
                          -104.01f,
                          88.7f,
                          88.73f,
                          176.9f,
                          -1e30f,
                          std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 65521) {  // bit patterns across every float
    const auto bits = static_cast<uint32_t>(u);
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    x.push_back(f);
  }
  for (int i = 0; i <= 20000; ++i) x.push_back(-104.0f + 0.0052f * static_cast<float>(i));  // [-104, 0]
  for_each_target([&](int64_t) {
    std::vector<float> ours(x.size()), highway(x.size());
    kernels::attention_exp(x.data(), ours.data(), highway.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      if (!(x[i] <= 177.0f) && !std::isnan(x[i])) continue;
      ASSERT_EQ(std::memcmp(&ours[i], &highway[i], sizeof(float)), 0)
          << "x " << x[i] << ": " << ours[i] << " against Highway's " << highway[i];
      if (x[i] < -87.0f || x[i] > 88.0f || std::isnan(x[i])) continue;  // subnormal or infinite
      const double want = std::exp(static_cast<double>(x[i]));
      ASSERT_LE(std::abs(ours[i] - want), 4 * 0x1p-23 * want) << "x " << x[i];
    }
  });
}

TEST(LabKernels, ElementwiseAndRowLoopsMatchDouble) {
  const int64_t N = 37, C = 53;  // 53 = 3 x 16 + 5: a partial vector and a tail past the 16-lane sums
  const auto x = random_floats(static_cast<size_t>(N * C), 31, -4, 4), dy = random_floats(x.size(), 32);
  const auto w = random_floats(static_cast<size_t>(C), 33), b = random_floats(static_cast<size_t>(C), 34);
  Vec gelu_want(x.size()), dgelu_want(x.size()), gelu_bound(x.size()), dgelu_bound(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    gelu_want[i] = ref_gelu(x[i]);
    dgelu_want[i] = 0.5 + gelu_grad(x[i]) * dy[i];
    gelu_bound[i] = 1e-6 * (1 + std::abs(x[i]));
    dgelu_bound[i] = std::abs(dy[i]) * 1e-6 * (1 + x[i] * x[i]) + 4 * kUnitRoundoff;
  }
  Vec sums_want(static_cast<size_t>(C), 0.25), sums_bound(static_cast<size_t>(C), 0.0);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t j = 0; j < C; ++j) {
      sums_want[static_cast<size_t>(j)] += dy[static_cast<size_t>(r * C + j)];
      sums_bound[static_cast<size_t>(j)] += (N + 1) * kUnitRoundoff;  // |terms| and |0.25| <= 1
    }
  std::vector<float> first_norms, first_adamw;
  std::vector<double> first_squares;
  for_each_target([&](int64_t) {
    std::vector<float> y(x.size()), dx(x.size(), 0.5f), sums(static_cast<size_t>(C), 0.25f);
    kernels::gelu_forward(y.data(), x.data(), N * C);
    kernels::gelu_backward(dx.data(), x.data(), dy.data(), N * C);
    EXPECT_TRUE(within(y, gelu_want, gelu_bound));
    EXPECT_TRUE(within(dx, dgelu_want, dgelu_bound));
    kernels::column_sums(sums.data(), dy.data(), N, C, C);
    EXPECT_TRUE(within(sums, sums_want, sums_bound));
    std::vector<float> norms;
    for (Norm norm : {Norm::layer, Norm::rms}) {
      std::vector<float> out(x.size()), mean(static_cast<size_t>(N)), rstd(mean.size()), dinp(x.size(), 0.5f),
          dw(w.size(), 0.5f), db(b.size(), 0.5f);
      kernels::norm_forward(norm == Norm::layer, out.data(), mean.data(), rstd.data(), x.data(), w.data(),
                            b.data(), kNormEps, N, C);
      EXPECT_TRUE(all_close(out, ref_norm(norm, to_double(x), to_double(w), to_double(b), N, C),
                            test::kF32Reduction));
      kernels::norm_backward(norm == Norm::layer, dinp.data(), dw.data(), db.data(), dy.data(), x.data(),
                             w.data(), mean.data(), rstd.data(), N, C);
      // d x = s (g - mean(g) - xhat mean(g xhat)) with g = dy w (mean(g) = 0 for rms), in double
      Vec dinp_want(x.size()), dw_want(w.size(), 0.5), db_want(b.size(), 0.5);
      for (int64_t r = 0; r < N; ++r) {
        double m = 0, v = 0, gm = 0, gxm = 0;
        for (int64_t c = 0; c < C; ++c)
          m += norm == Norm::layer ? x[static_cast<size_t>(r * C + c)] / double(C) : 0;
        for (int64_t c = 0; c < C; ++c) v += std::pow(x[static_cast<size_t>(r * C + c)] - m, 2) / double(C);
        const double s = 1 / std::sqrt(v + kNormEps);
        for (int64_t c = 0; c < C; ++c) {
          const auto i = static_cast<size_t>(r * C + c);
          const double g = dy[i] * double(w[static_cast<size_t>(c)]), xh = (x[i] - m) * s;
          gm += norm == Norm::layer ? g / double(C) : 0;
          gxm += g * xh / double(C);
          dw_want[static_cast<size_t>(c)] += dy[i] * xh;
          db_want[static_cast<size_t>(c)] += norm == Norm::layer ? dy[i] : 0;
        }
        for (int64_t c = 0; c < C; ++c) {
          const auto i = static_cast<size_t>(r * C + c);
          dinp_want[i] = 0.5 + s * (dy[i] * double(w[static_cast<size_t>(c)]) - gm - (x[i] - m) * s * gxm);
        }
      }
      const test::Tolerance tol{2e-5, 2e-5};  // sums of 53 (rows) or 37 (columns) products of O(1) terms
      EXPECT_TRUE(all_close(dinp, dinp_want, tol));
      EXPECT_TRUE(all_close(dw, dw_want, tol));
      EXPECT_TRUE(all_close(db, db_want, tol));
      for (const auto* v : {&out, &mean, &rstd, &dinp, &dw, &db})
        norms.insert(norms.end(), v->begin(), v->end());
    }
    if (first_norms.empty()) first_norms = norms;
    EXPECT_EQ(norms, first_norms) << "the norms' bits on every target";
    // softmax and cross-entropy (probs in place of the logits), against ref_losses
    std::vector<float> probs = x, losses(static_cast<size_t>(N));
    std::vector<int32_t> targets(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n)
      targets[static_cast<size_t>(n)] = n % 5 == 4 ? -1 : static_cast<int32_t>(n * 7 % C);
    kernels::crossentropy_forward(probs.data(), losses.data(), probs.data(), targets.data(), -1, N, C);
    EXPECT_TRUE(all_close(losses, ref_losses(to_double(x), targets, N, C), test::kF32Reduction));
    Vec probs_want(x.size());
    for (int64_t n = 0; n < N; ++n) {
      double z = 0;
      for (int64_t c = 0; c < C; ++c) z += std::exp(double(x[static_cast<size_t>(n * C + c)]));
      for (int64_t c = 0; c < C; ++c)
        probs_want[static_cast<size_t>(n * C + c)] = std::exp(double(x[static_cast<size_t>(n * C + c)])) / z;
    }
    EXPECT_TRUE(all_close(probs, probs_want, test::kF32Elementwise));
    // its gradient: (probs - onehot(target)) * dloss, zero rows where the target is ignored
    std::vector<float> dlogits(probs.size());
    kernels::crossentropy_backward(dlogits.data(), probs.data(), targets.data(), -1, 0.03f, N, C);
    Vec dlogits_want(probs.size(), 0.0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C && targets[static_cast<size_t>(n)] >= 0; ++c)
        dlogits_want[static_cast<size_t>(n * C + c)] =
            (probs[static_cast<size_t>(n * C + c)] - (c == targets[static_cast<size_t>(n)] ? 1.0 : 0.0)) *
            double(0.03f);
    EXPECT_TRUE(all_close(dlogits, dlogits_want, test::kF32Elementwise));
    // the sum of squares (a gradient's norm): against a double loop, and the same bits on every target
    std::vector<double> squares;
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, N * C}) {
      double want = 0;
      for (int64_t i = 0; i < n; ++i) want += double(x[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)];
      squares.push_back(kernels::sum_of_squares(x.data(), n));
      // each square exact in double; n adds of a running sum <= want, each off by <= 2^-53 of it
      EXPECT_NEAR(squares.back(), want, 2.0 * static_cast<double>(n) * 0x1p-53 * want) << "n " << n;
    }
    if (first_squares.empty()) first_squares = squares;
    EXPECT_EQ(squares, first_squares) << "the sum of squares' bits on every target";
    // AdamW: the scalar update's operations in its order, so its exact bits
    std::vector<float> p = w, m(w.size(), 0.1f), v(w.size(), 0.2f);
    const kernels::AdamWStep step{0.9f, 0.95f, 0.19f, 0.0975f, 3e-3f, 1e-8f, 0.1f, 0.5f};
    kernels::adamw(step, p.data(), b.data(), m.data(), v.data(), C);
    for (int64_t i = 0; i < C; ++i) {
      const auto u = static_cast<size_t>(i);
      const float grad = b[u] * step.clip_scale;
      const float mu = step.b1 * 0.1f + (1 - step.b1) * grad,
                  vu = step.b2 * 0.2f + (1 - step.b2) * grad * grad;
      const float want =
          w[u] - step.lr * (mu / step.c1 / (std::sqrt(vu / step.c2) + step.eps) + step.decay * w[u]);
      EXPECT_EQ(p[u], want) << "parameter " << i;
      EXPECT_EQ(m[u], mu);
      EXPECT_EQ(v[u], vu);
    }
  });
}

// ---- The causal attention of short windows (kernels::attention_forward / attention_backward).

// q, k, v in one fused buffer of rows (B * T) x ld, as the lab's (N, 3C) qkv (ld padded by one float
// here, so that no row starts on a vector boundary); out, dout (B T, H D). Relative vectors (rel 1: a
// key table, 2: key and value tables; shared: one table for every head, as Shaw's): position queries
// p (B T) x (C + 1), tables (heads, T, D) in the kernels' order (row m: distance T-1-m).
struct AttentionCase {
  int64_t B, T, H, D;
  bool bias;
  int rel = 0;
  bool shared = false;
};
struct AttentionData {
  int64_t B = 0, T = 0, H = 0, D = 0, ld = 0;
  float scale = 0;
  std::vector<float> qkv, bias, dout;
  int rel = 0;
  int64_t table_heads = 0, ldp = 0;
  std::vector<float> p, ek, fv;
  int64_t at(int64_t which, int64_t b, int64_t t, int64_t h, int64_t d) const {
    return (b * T + t) * ld + which * H * D + h * D + d;
  }
  int64_t p_at(int64_t b, int64_t t, int64_t h, int64_t d) const { return (b * T + t) * ldp + h * D + d; }
  int64_t table_at(int64_t h, int64_t m, int64_t d) const {
    return ((table_heads == 1 ? 0 : h) * T + m) * D + d;
  }
};
AttentionData attention_data(const AttentionCase& c) {
  AttentionData x;
  x.B = c.B, x.T = c.T, x.H = c.H, x.D = c.D, x.ld = 3 * c.H * c.D + 1;
  x.scale = static_cast<float>(1 / std::sqrt(double(c.D)));
  x.qkv = random_floats(static_cast<size_t>(c.B * c.T * x.ld), 41, -2, 2);
  if (c.bias) x.bias = random_floats(static_cast<size_t>(c.H * c.T), 42, -3, 1);
  x.dout = random_floats(static_cast<size_t>(c.B * c.T * c.H * c.D), 43);
  x.rel = c.rel;
  if (c.rel) {
    x.table_heads = c.shared ? 1 : c.H;
    x.ldp = c.H * c.D + 1;
    x.p = random_floats(static_cast<size_t>(c.B * c.T * x.ldp), 44, -2, 2);
    x.ek = random_floats(static_cast<size_t>(x.table_heads * c.T * c.D), 45, -1, 1);
    if (c.rel == 2) x.fv = random_floats(static_cast<size_t>(x.table_heads * c.T * c.D), 46, -1, 1);
  }
  return x;
}

// The inputs of the reference as doubles (each differentiated by central differences).
struct AttentionInputsD {
  Vec qkv, bias, p, ek, fv;
};
AttentionInputsD inputs_of(const AttentionData& x) {
  return {test::to_double(x.qkv), test::to_double(x.bias), test::to_double(x.p), test::to_double(x.ek),
          test::to_double(x.fv)};
}

// The definition in double: out (B T, H D) = softmax(scale (q k^T + p E^T shifted) + bias, causal)
// (v + F shifted), and lse (B, H, T).
Vec ref_attention(const AttentionData& x, const AttentionInputsD& in, Vec* lse = nullptr) {
  const int64_t T = x.T, H = x.H, D = x.D;
  Vec out(static_cast<size_t>(x.B * T * H * D), 0.0);
  if (lse) lse->assign(static_cast<size_t>(x.B * H * T), 0.0);
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        Vec s(static_cast<size_t>(i + 1));
        double mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          const int64_t m = T - 1 - (i - j);  // the tables' and the bias's row of the pair
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) {
            dot += in.qkv[static_cast<size_t>(x.at(0, b, i, h, d))] *
                   in.qkv[static_cast<size_t>(x.at(1, b, j, h, d))];
            if (x.rel)
              dot += in.p[static_cast<size_t>(x.p_at(b, i, h, d))] *
                     in.ek[static_cast<size_t>(x.table_at(h, m, d))];
          }
          s[static_cast<size_t>(j)] =
              x.scale * dot + (in.bias.empty() ? 0.0 : in.bias[static_cast<size_t>(h * T + m)]);
          mx = std::max(mx, s[static_cast<size_t>(j)]);
        }
        double l = 0;
        for (double& e : s) l += (e = std::exp(e - mx));
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t d = 0; d < D; ++d) {
            double value = in.qkv[static_cast<size_t>(x.at(2, b, j, h, d))];
            if (x.rel == 2) value += in.fv[static_cast<size_t>(x.table_at(h, T - 1 - (i - j), d))];
            out[static_cast<size_t>(((b * T + i) * H + h) * D + d)] += s[static_cast<size_t>(j)] / l * value;
          }
        if (lse) (*lse)[static_cast<size_t>((b * H + h) * T + i)] = mx + std::log(l);
      }
  return out;
}

struct AttentionResult {
  std::vector<float> out, lse, dqkv, dbias, dp, dek, dfv;  // dek, dfv: per head (H, T, D)
};
AttentionResult run_attention(const AttentionData& x) {
  const int64_t C = x.H * x.D;
  AttentionResult r;
  r.out.assign(static_cast<size_t>(x.B * x.T * C), 0.0f);
  r.lse.assign(static_cast<size_t>(x.B * x.H * x.T), 0.0f);
  r.dqkv.assign(x.qkv.size(), 7.0f);    // stored over: the padding float keeps its 7
  r.dbias.assign(x.bias.size(), 0.5f);  // accumulated onto
  kernels::Attention a;
  a.B = x.B, a.T = x.T, a.H = x.H, a.D = x.D, a.scale = x.scale;
  a.q = {x.qkv.data(), x.ld}, a.k = {x.qkv.data() + C, x.ld}, a.v = {x.qkv.data() + 2 * C, x.ld};
  a.bias = x.bias.empty() ? nullptr : x.bias.data();
  kernels::RelativeGrads rel;
  if (x.rel) {
    a.p = {x.p.data(), x.ldp}, a.rel_key = x.ek.data(),
    a.rel_head_stride = x.table_heads == 1 ? 0 : x.T * x.D;
    if (x.rel == 2) a.rel_value = x.fv.data();
    r.dp.assign(x.p.size(), 7.0f);  // stored over, as dqkv
    r.dek.assign(static_cast<size_t>(x.H * x.T * x.D), 0.5f);
    rel.dp = {r.dp.data(), x.ldp}, rel.rel_key = r.dek.data();
    if (x.rel == 2) r.dfv.assign(r.dek.size(), 0.5f), rel.rel_value = r.dfv.data();
  }
  kernels::attention_forward(a, {r.out.data(), C}, r.lse.data());
  kernels::attention_backward(a, {r.out.data(), C}, r.lse.data(), {x.dout.data(), C}, {r.dqkv.data(), x.ld},
                              {r.dqkv.data() + C, x.ld}, {r.dqkv.data() + 2 * C, x.ld},
                              x.bias.empty() ? nullptr : r.dbias.data(), rel);
  return r;
}

// A per-head table gradient (H, T, D) as the gradient of the tables given (heads 1: their sum), less
// the 0.5 each element started from.
std::vector<float> table_gradient(const AttentionData& x, const std::vector<float>& per_head) {
  std::vector<float> g(static_cast<size_t>(x.table_heads * x.T * x.D), 0.0f);
  const int64_t TD = x.T * x.D;
  for (int64_t h = 0; h < x.H; ++h)
    for (int64_t e = 0; e < TD; ++e)
      g[static_cast<size_t>((x.table_heads == 1 ? 0 : h) * TD + e)] +=
          per_head[static_cast<size_t>(h * TD + e)] - 0.5f;
  return g;
}

// Odd sizes, one token, one dimension, one sequence, head dims of 16 (the lab's) and 17, windows past
// 64 keys (two AVX-512 strips of four vectors plus a partial one), with and without a bias, with a key
// table per head (Transformer-XL's shape) and shared key and value tables (Shaw's).
TEST(LabKernels, AttentionMatchesDoubleAndFiniteDifferences) {
  for (const AttentionCase& c :
       {AttentionCase{1, 1, 1, 1, false}, AttentionCase{1, 1, 2, 3, true}, AttentionCase{2, 5, 3, 7, true},
        AttentionCase{1, 17, 2, 16, false}, AttentionCase{3, 33, 2, 8, true},
        AttentionCase{1, 70, 1, 17, true}, AttentionCase{1, 1, 1, 1, false, 2, true},
        AttentionCase{2, 5, 3, 7, true, 1}, AttentionCase{2, 13, 2, 16, false, 2, true},
        AttentionCase{1, 37, 2, 5, true, 1}, AttentionCase{1, 70, 1, 17, false, 2, true}}) {
    SCOPED_TRACE(::testing::Message()
                 << "B " << c.B << " T " << c.T << " H " << c.H << " D " << c.D << (c.bias ? " bias" : "")
                 << " rel " << c.rel << (c.shared ? " shared" : ""));
    const AttentionData x = attention_data(c);
    const AttentionInputsD in = inputs_of(x);
    const Vec weights = test::to_double(x.dout);
    Vec lse_want;
    const Vec out_want = ref_attention(x, in, &lse_want);
    // d sum(out * dout) by central differences of the double definition, at sampled q, k, v, p and table
    // elements (the padding float of each row excluded) and at every bias element.
    auto fd = [&](Vec AttentionInputsD::*field, const std::vector<size_t>* coords) {
      AttentionInputsD y = in;
      return fd_grad(
          [&](const Vec& v) {
            y.*field = v;
            return ref_attention(x, y);
          },
          in.*field, weights, coords, 1e-5);
    };
    auto sample = [](size_t n, int64_t ld) {
      std::vector<size_t> at;
      for (size_t i : test::sample_coords(n, 96))
        if (static_cast<int64_t>(i) % ld != ld - 1) at.push_back(i);
      return at;
    };
    const std::vector<size_t> at_qkv = sample(x.qkv.size(), x.ld),
                              at_p = c.rel ? sample(x.p.size(), x.ldp) : std::vector<size_t>{};
    const Vec g_qkv = fd(&AttentionInputsD::qkv, &at_qkv);
    Vec g_bias, g_p, g_ek, g_fv;
    if (c.bias) {
      g_bias = fd(&AttentionInputsD::bias, nullptr);
      for (double& g : g_bias) g += 0.5;
    }
    // sampled as q, k, v: every element of a 70 x 17 table would take about a second
    const std::vector<size_t> at_table = c.rel ? test::sample_coords(x.ek.size(), 96) : std::vector<size_t>{};
    if (c.rel) g_p = fd(&AttentionInputsD::p, &at_p), g_ek = fd(&AttentionInputsD::ek, &at_table);
    if (c.rel == 2) g_fv = fd(&AttentionInputsD::fv, &at_table);
    for_each_target([&](int64_t) {
      const AttentionResult r = run_attention(x);
      EXPECT_TRUE(all_close(r.out, out_want, test::kF32Reduction));
      EXPECT_TRUE(all_close(r.lse, lse_want, test::kF32Reduction));
      const test::Tolerance tol{1e-4, 1e-4};  // fp32 sums of up to 70 products; FD error ~1e-9
      EXPECT_TRUE(all_close(test::gather(r.dqkv, at_qkv), g_qkv, tol));
      if (c.bias) {
        EXPECT_TRUE(all_close(r.dbias, g_bias, tol));
      }
      for (int64_t row = 0; row < x.B * x.T; ++row)
        EXPECT_EQ(r.dqkv[static_cast<size_t>(row * x.ld + x.ld - 1)], 7.0f) << "row " << row << "'s padding";
      if (c.rel) {
        EXPECT_TRUE(all_close(test::gather(r.dp, at_p), g_p, tol));
        EXPECT_TRUE(all_close(test::gather(table_gradient(x, r.dek), at_table), g_ek, tol));
        for (int64_t row = 0; row < x.B * x.T; ++row)
          EXPECT_EQ(r.dp[static_cast<size_t>(row * x.ldp + x.ldp - 1)], 7.0f)
              << "dp row " << row << "'s padding";
      }
      if (c.rel == 2) {
        EXPECT_TRUE(all_close(test::gather(table_gradient(x, r.dfv), at_table), g_fv, tol));
      }
    });
  }
}

// Long windows, whose forward runs in blocks of query rows (T 300: two blocks on every target; T 1024:
// sixteen), with a bias and shared key and value tables, and with a key table per head.
TEST(LabKernels, AttentionForwardInBlocksMatchesDouble) {
  for (const AttentionCase& c :
       {AttentionCase{1, 300, 2, 16, true, 2, true}, AttentionCase{1, 1024, 1, 16, false, 1},
        AttentionCase{2, 300, 1, 16, false}}) {
    SCOPED_TRACE(::testing::Message() << "B " << c.B << " T " << c.T << " rel " << c.rel);
    const AttentionData x = attention_data(c);
    Vec lse_want;
    const Vec out_want = ref_attention(x, inputs_of(x), &lse_want);
    for_each_target([&](int64_t) {
      const AttentionResult r = run_attention(x);
      EXPECT_TRUE(all_close(r.out, out_want, test::kF32Reduction));
      EXPECT_TRUE(all_close(r.lse, lse_want, test::kF32Reduction));
    });
  }
}

TEST(LabKernels, AttentionThreadCountDoesNotChangeBits) {
  for (const AttentionCase& c :
       {AttentionCase{5, 64, 4, 16, true}, AttentionCase{5, 64, 4, 16, true, 2, true},
        AttentionCase{5, 64, 4, 16, false, 1}}) {
    const AttentionData x = attention_data(c);
    auto run = [&](int threads) {
      set_threads(threads);
      AttentionResult r = run_attention(x);
      for (const auto* v : {&r.lse, &r.dqkv, &r.dbias, &r.dp, &r.dek, &r.dfv})
        r.out.insert(r.out.end(), v->begin(), v->end());
      return r.out;
    };
    const std::vector<float> one = run(1), two = run(2), three = run(3);
    set_threads(2);
    EXPECT_EQ(one, two) << "rel " << c.rel;
    EXPECT_EQ(one, three) << "rel " << c.rel;
  }
}

// ---- lab/attention.h: the lab's kernels against posenc's attention, through RoPE and each bias kind.

TEST(LabAttention, KernelsMatchPosencAttention) {
  const int64_t B = 2, T = 37, H = 3, D = 16, C = H * D;  // 37: a partial vector on every target
  const auto qkv = random_floats(static_cast<size_t>(B * T * 3 * C), 51, -2, 2),
             dout = random_floats(static_cast<size_t>(B * T * C), 52);
  const auto table = random_floats(8 * H, 53);  // T5 buckets, causal: 8 rows
  // Shaw clipped at 8 (T 37 reaches past it); Transformer-XL with R of width 12
  const ShawConfig shaw_config{8, D};
  const int64_t shaw_rows = shaw_config.num_rows(), xl_width = 12;
  const auto a_k = random_floats(static_cast<size_t>(shaw_rows * D), 54, -1, 1),
             a_v = random_floats(static_cast<size_t>(shaw_rows * D), 55, -1, 1),
             u = random_floats(static_cast<size_t>(H * D), 56, -1, 1),
             v = random_floats(static_cast<size_t>(H * D), 57, -1, 1),
             w_r = random_floats(static_cast<size_t>(C * xl_width), 58, -0.5, 0.5);
  std::vector<int64_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[static_cast<size_t>(t)] = t;
  const auto pos = view(positions.data(), {T});
  RopeConfig rc;
  rc.head_dim = D;
  const Rope rope(rc);
  const char* names[] = {
      "none", "rope", "alibi", "t5", "rope+t5", "shaw", "shaw+alibi", "transformer_xl", "transformer_xl+t5"};
  for (int variant = 0; variant < 9; ++variant) {
    AttentionConfig cfg;
    cfg.causal = true;
    const std::string name = names[variant];
    SCOPED_TRACE(name);
    auto with = [&](const char* part) { return name.find(part) != std::string::npos; };
    if (with("rope")) cfg.rope = &rope;
    if (with("alibi")) cfg.bias.kind = AttentionBias::Kind::alibi, cfg.bias.alibi = AlibiConfig{H};
    const bool relative = with("t5");
    if (relative) {
      cfg.bias.kind = AttentionBias::Kind::relative;
      cfg.bias.relative = RelativeBiasConfig::t5(H, 8, 16, false);
      cfg.bias.relative_table = view(table.data(), {8, H});
    }
    if (with("shaw"))
      cfg.shaw =
          AttentionShaw{shaw_config, view(a_k.data(), {shaw_rows, D}), view(a_v.data(), {shaw_rows, D})};
    if (with("transformer_xl"))
      cfg.transformer_xl =
          AttentionTransformerXL{TransformerXLConfig{xl_width, H, D, 10000.0}, view(u.data(), {H, D}),
                                 view(v.data(), {H, D}), view(w_r.data(), {C, xl_width})};
    ASSERT_TRUE(on_lab_kernels(cfg, T, D));
    // The parameter gradients: the relative table, Shaw's a^K and a^V, Transformer-XL's u, v and W_R,
    // each accumulated onto 0.25.
    struct ParamGrads {
      std::vector<float> table, a_k, a_v, u, v, w_r;
    };
    auto param_grads = [&](ParamGrads& g) {
      AttentionGrads grads;
      g.table.assign(table.size(), 0.25f), g.a_k.assign(a_k.size(), 0.25f), g.a_v.assign(a_v.size(), 0.25f);
      g.u.assign(u.size(), 0.25f), g.v.assign(v.size(), 0.25f), g.w_r.assign(w_r.size(), 0.25f);
      if (relative) grads.relative_table = view(g.table.data(), {8, H});
      if (cfg.shaw)
        grads.shaw_a_k = view(g.a_k.data(), {shaw_rows, D}),
        grads.shaw_a_v = view(g.a_v.data(), {shaw_rows, D});
      if (cfg.transformer_xl) {
        grads.transformer_xl_u = view(g.u.data(), {H, D}), grads.transformer_xl_v = view(g.v.data(), {H, D});
        grads.transformer_xl_w_r = view(g.w_r.data(), {C, xl_width});
      }
      return grads;
    };
    // posenc's attention
    std::vector<float> out(static_cast<size_t>(B * T * C)), lse(static_cast<size_t>(B * H * T)),
        dqkv(qkv.size(), 0.0f);
    auto part = [&](auto* x, int64_t which) {
      return strided_view(x + which * C, {B, T, H, D}, {T * 3 * C, 3 * C, D, 1});
    };
    const float* in = qkv.data();
    attention_forward(cfg, posenc::qkv(part(in, 0), part(in, 1), part(in, 2)), view(out.data(), {B, T, H, D}),
                      view(lse.data(), {B, H, T}));
    ParamGrads want;
    AttentionGrads grads = param_grads(want);
    grads.q = part(dqkv.data(), 0), grads.k = part(dqkv.data(), 1), grads.v = part(dqkv.data(), 2);
    attention_backward(cfg, posenc::qkv(part(in, 0), part(in, 1), part(in, 2)),
                       view(static_cast<const float*>(out.data()), {B, T, H, D}),
                       view(static_cast<const float*>(lse.data()), {B, H, T}),
                       view(dout.data(), {B, T, H, D}), grads);
    // the lab's: dqkv stored over whatever is there, the parameters' gradients accumulated
    LabAttention lab;
    std::vector<float> lab_out(out.size()), lab_lse(lse.size()), lab_dqkv(qkv.size(), 9.0f);
    lab.forward(cfg, qkv.data(), B, T, H, D, pos, lab_out.data(), lab_lse.data());
    ParamGrads got;
    lab.backward(cfg, qkv.data(), B, T, H, D, pos, lab_out.data(), lab_lse.data(), dout.data(),
                 lab_dqkv.data(), param_grads(got));
    const test::Tolerance tol{1e-5, 1e-5};  // two fp32 orders of the same sums
    EXPECT_TRUE(all_close(lab_out, to_double(out), tol));
    EXPECT_TRUE(all_close(lab_lse, to_double(lse), tol));
    EXPECT_TRUE(all_close(lab_dqkv, to_double(dqkv), tol));
    const test::Tolerance sums{1e-4, 1e-5};  // sums over ~2000 pairs
    EXPECT_TRUE(all_close(got.table, to_double(want.table), sums));
    EXPECT_TRUE(all_close(got.a_k, to_double(want.a_k), sums));
    EXPECT_TRUE(all_close(got.a_v, to_double(want.a_v), sums));
    EXPECT_TRUE(all_close(got.u, to_double(want.u), sums));
    EXPECT_TRUE(all_close(got.v, to_double(want.v), sums));
    EXPECT_TRUE(all_close(got.w_r, to_double(want.w_r), sums));
  }
}

TEST(LabAttention, OtherConfigurationsRunOnPosencAttention) {
  AttentionConfig cfg;
  cfg.causal = true;
  EXPECT_TRUE(on_lab_kernels(cfg, kMaxKernelWindow, 16));
  EXPECT_FALSE(on_lab_kernels(cfg, kMaxKernelWindow + 1, 16));  // a long evaluation window
  AttentionConfig bidirectional;
  EXPECT_FALSE(on_lab_kernels(bidirectional, 64, 16));
  AttentionConfig window = cfg;
  window.window = 8;
  EXPECT_FALSE(on_lab_kernels(window, 64, 16));
  AttentionConfig shaw = cfg;  // Shaw and Transformer-XL run on the kernels, not with RoPE
  const std::vector<float> a_k(33 * 16);
  shaw.shaw = AttentionShaw{ShawConfig{16, 16}, view(a_k.data(), {33, 16}), {}};
  EXPECT_TRUE(on_lab_kernels(shaw, 64, 16));
  EXPECT_FALSE(on_lab_kernels(shaw, 64, 8));  // the table's width is not the head's
  AttentionConfig xl = cfg;
  xl.transformer_xl.emplace();
  xl.transformer_xl->config.head_dim = 16;
  EXPECT_TRUE(on_lab_kernels(xl, 64, 16));
  RopeConfig rc16;
  rc16.head_dim = 16;
  const Rope rope16(rc16);
  shaw.rope = &rope16, xl.rope = &rope16;
  EXPECT_FALSE(on_lab_kernels(shaw, 64, 16));
  EXPECT_FALSE(on_lab_kernels(xl, 64, 16));
  RopeConfig rc;
  rc.head_dim = 8;
  const Rope rope(rc);
  AttentionConfig partial = cfg;  // RoPE on part of the head
  partial.rope = &rope;
  EXPECT_FALSE(on_lab_kernels(partial, 64, 16));
  EXPECT_TRUE(on_lab_kernels(partial, 64, 8));
}

}  // namespace
}  // namespace posenc::lab::ops
