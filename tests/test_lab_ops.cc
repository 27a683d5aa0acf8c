// tests/test_lab_ops.cc: the lab's layers (lab/ops.h) against naive double-precision loops, and
// their backwards against central differences of those loops (exact in double), on odd sizes and
// on more rows than one task chunk (128), with 1 and 2 threads giving the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

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

TEST(LabOps, ThreadCountDoesNotChangeBits) {
  const int64_t N = 517, C = 40, OC = 300;
  const auto inp = random_floats(static_cast<size_t>(N * C), 1),
             w = random_floats(static_cast<size_t>(OC * C), 2);
  const auto dout = random_floats(static_cast<size_t>(N * OC), 3);
  auto run = [&](int threads) {
    set_threads(threads);
    std::vector<float> out(static_cast<size_t>(N * OC)), dinp(inp.size(), 0.0f), dw(w.size(), 0.0f),
        db(static_cast<size_t>(OC), 0.0f);
    matmul_forward(out.data(), inp.data(), w.data(), nullptr, N, C, OC);
    matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C, OC);
    out.insert(out.end(), dinp.begin(), dinp.end());
    out.insert(out.end(), dw.begin(), dw.end());
    out.insert(out.end(), db.begin(), db.end());
    return out;
  };
  const std::vector<float> one = run(1), two = run(2), three = run(3);
  set_threads(2);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, three);
}

}  // namespace
}  // namespace posenc::lab::ops
