// tests/test_lab_ops.cc: the lab's layers (lab/ops.h) against naive double-precision loops, and
// their backwards against central differences of those loops (exact in double), on odd sizes and
// on more rows than one task, with 1, 2 and 3 threads giving the same bits; and the SIMD kernels
// under them (lab/kernels.h) on every compiled target: the matrix product in each operand layout
// and epilogue against a double loop with its rounding bound, the other loops against double loops.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
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
// here, so that no row starts on a vector boundary); out, dout (B T, H D).
struct AttentionCase {
  int64_t B, T, H, D;
  bool bias;
};
struct AttentionData {
  int64_t B, T, H, D, ld;
  float scale;
  std::vector<float> qkv, bias, dout;
  int64_t at(int64_t which, int64_t b, int64_t t, int64_t h, int64_t d) const {
    return (b * T + t) * ld + which * H * D + h * D + d;
  }
};
AttentionData attention_data(const AttentionCase& c) {
  AttentionData x{c.B, c.T, c.H, c.D, 3 * c.H * c.D + 1, static_cast<float>(1 / std::sqrt(double(c.D))),
                  {},  {},  {}};
  x.qkv = random_floats(static_cast<size_t>(c.B * c.T * x.ld), 41, -2, 2);
  if (c.bias) x.bias = random_floats(static_cast<size_t>(c.H * c.T), 42, -3, 1);
  x.dout = random_floats(static_cast<size_t>(c.B * c.T * c.H * c.D), 43);
  return x;
}

// The definition in double: out (B T, H D) = softmax(scale q k^T + bias, causal) v, and lse (B, H, T).
Vec ref_attention(const AttentionData& x, const Vec& qkv, const Vec& bias, Vec* lse = nullptr) {
  const int64_t T = x.T, H = x.H, D = x.D;
  Vec out(static_cast<size_t>(x.B * T * H * D), 0.0);
  if (lse) lse->assign(static_cast<size_t>(x.B * H * T), 0.0);
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        Vec s(static_cast<size_t>(i + 1));
        double mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot +=
                qkv[static_cast<size_t>(x.at(0, b, i, h, d))] * qkv[static_cast<size_t>(x.at(1, b, j, h, d))];
          s[static_cast<size_t>(j)] =
              x.scale * dot + (bias.empty() ? 0.0 : bias[static_cast<size_t>(h * T + T - 1 - (i - j))]);
          mx = std::max(mx, s[static_cast<size_t>(j)]);
        }
        double l = 0;
        for (double& e : s) l += (e = std::exp(e - mx));
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t d = 0; d < D; ++d)
            out[static_cast<size_t>(((b * T + i) * H + h) * D + d)] +=
                s[static_cast<size_t>(j)] / l * qkv[static_cast<size_t>(x.at(2, b, j, h, d))];
        if (lse) (*lse)[static_cast<size_t>((b * H + h) * T + i)] = mx + std::log(l);
      }
  return out;
}

struct AttentionResult {
  std::vector<float> out, lse, dqkv, dbias;
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
  kernels::attention_forward(a, {r.out.data(), C}, r.lse.data());
  kernels::attention_backward(a, {r.out.data(), C}, r.lse.data(), {x.dout.data(), C}, {r.dqkv.data(), x.ld},
                              {r.dqkv.data() + C, x.ld}, {r.dqkv.data() + 2 * C, x.ld},
                              x.bias.empty() ? nullptr : r.dbias.data());
  return r;
}

// Odd sizes, one token, one dimension, one sequence, head dims of 16 (the lab's) and 17, windows past
// 64 keys (two AVX-512 strips of four vectors plus a partial one), with and without a bias.
TEST(LabKernels, AttentionMatchesDoubleAndFiniteDifferences) {
  for (const AttentionCase& c : {AttentionCase{1, 1, 1, 1, false}, AttentionCase{1, 1, 2, 3, true},
                                 AttentionCase{2, 5, 3, 7, true}, AttentionCase{1, 17, 2, 16, false},
                                 AttentionCase{3, 33, 2, 8, true}, AttentionCase{1, 70, 1, 17, true}}) {
    SCOPED_TRACE(::testing::Message()
                 << "B " << c.B << " T " << c.T << " H " << c.H << " D " << c.D << (c.bias ? " bias" : ""));
    const AttentionData x = attention_data(c);
    const Vec qkv = to_double(x.qkv), bias = to_double(x.bias), weights = to_double(x.dout);
    Vec lse_want;
    const Vec out_want = ref_attention(x, qkv, bias, &lse_want);
    // d sum(out * dout) by central differences of the double definition, at sampled q, k, v elements
    // (the padding float of each row excluded) and at every bias element.
    std::vector<size_t> at_qkv;
    for (size_t i : test::sample_coords(x.qkv.size(), 96))
      if (static_cast<int64_t>(i) % x.ld != x.ld - 1) at_qkv.push_back(i);
    Vec g_qkv = fd_grad([&](const Vec& y) { return ref_attention(x, y, bias); }, qkv, weights, &at_qkv, 1e-5);
    Vec g_bias;
    if (c.bias) {
      g_bias = fd_grad([&](const Vec& y) { return ref_attention(x, qkv, y); }, bias, weights, nullptr, 1e-5);
      for (double& g : g_bias) g += 0.5;
    }
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
    });
  }
}

TEST(LabKernels, AttentionThreadCountDoesNotChangeBits) {
  const AttentionData x = attention_data({5, 64, 4, 16, true});
  auto run = [&](int threads) {
    set_threads(threads);
    AttentionResult r = run_attention(x);
    for (const auto* v : {&r.lse, &r.dqkv, &r.dbias}) r.out.insert(r.out.end(), v->begin(), v->end());
    return r.out;
  };
  const std::vector<float> one = run(1), two = run(2), three = run(3);
  set_threads(2);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, three);
}

// ---- lab/attention.h: the lab's kernels against posenc's attention, through RoPE and each bias kind.

TEST(LabAttention, KernelsMatchPosencAttention) {
  const int64_t B = 2, T = 37, H = 3, D = 16, C = H * D;  // 37: a partial vector on every target
  const auto qkv = random_floats(static_cast<size_t>(B * T * 3 * C), 51, -2, 2),
             dout = random_floats(static_cast<size_t>(B * T * C), 52);
  const auto table = random_floats(8 * H, 53);  // T5 buckets, causal: 8 rows
  std::vector<int64_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[static_cast<size_t>(t)] = t;
  const auto pos = view(positions.data(), {T});
  RopeConfig rc;
  rc.head_dim = D;
  const Rope rope(rc);
  for (int variant = 0; variant < 5; ++variant) {
    AttentionConfig cfg;
    cfg.causal = true;
    const char* names[] = {"none", "rope", "alibi", "t5", "rope+t5"};
    SCOPED_TRACE(names[variant]);
    if (variant == 1 || variant == 4) cfg.rope = &rope;
    if (variant == 2) cfg.bias.kind = AttentionBias::Kind::alibi, cfg.bias.alibi = AlibiConfig{H};
    if (variant >= 3) {
      cfg.bias.kind = AttentionBias::Kind::relative;
      cfg.bias.relative = RelativeBiasConfig::t5(H, 8, 16, false);
      cfg.bias.relative_table = view(table.data(), {8, H});
    }
    ASSERT_TRUE(on_lab_kernels(cfg, T, D));
    const bool relative = variant >= 3;
    // posenc's attention
    std::vector<float> out(static_cast<size_t>(B * T * C)), lse(static_cast<size_t>(B * H * T)),
        dqkv(qkv.size(), 0.0f), dtable(table.size(), 0.25f);
    auto part = [&](auto* x, int64_t which) {
      return strided_view(x + which * C, {B, T, H, D}, {T * 3 * C, 3 * C, D, 1});
    };
    const float* in = qkv.data();
    attention_forward(cfg, posenc::qkv(part(in, 0), part(in, 1), part(in, 2)), view(out.data(), {B, T, H, D}),
                      view(lse.data(), {B, H, T}));
    AttentionGrads grads;
    grads.q = part(dqkv.data(), 0), grads.k = part(dqkv.data(), 1), grads.v = part(dqkv.data(), 2);
    if (relative) grads.relative_table = view(dtable.data(), {8, H});
    attention_backward(cfg, posenc::qkv(part(in, 0), part(in, 1), part(in, 2)),
                       view(static_cast<const float*>(out.data()), {B, T, H, D}),
                       view(static_cast<const float*>(lse.data()), {B, H, T}),
                       view(dout.data(), {B, T, H, D}), grads);
    // the lab's: dqkv stored over whatever is there, the table's gradient accumulated
    LabAttention lab;
    std::vector<float> lab_out(out.size()), lab_lse(lse.size()), lab_dqkv(qkv.size(), 9.0f),
        lab_dtable(table.size(), 0.25f);
    lab.forward(cfg, qkv.data(), B, T, H, D, pos, lab_out.data(), lab_lse.data());
    AttentionGrads params;
    if (relative) params.relative_table = view(lab_dtable.data(), {8, H});
    lab.backward(cfg, qkv.data(), B, T, H, D, pos, lab_out.data(), lab_lse.data(), dout.data(),
                 lab_dqkv.data(), params);
    const test::Tolerance tol{1e-5, 1e-5};  // two fp32 orders of the same sums
    EXPECT_TRUE(all_close(lab_out, to_double(out), tol));
    EXPECT_TRUE(all_close(lab_lse, to_double(lse), tol));
    EXPECT_TRUE(all_close(lab_dqkv, to_double(dqkv), tol));
    EXPECT_TRUE(all_close(lab_dtable, to_double(dtable), {1e-4, 1e-5}));  // sums over ~2000 pairs
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
  AttentionConfig shaw = cfg;
  shaw.shaw.emplace();
  EXPECT_FALSE(on_lab_kernels(shaw, 64, 16));
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
