// registry/metrics.cc: see metrics.h. Plain double loops: the sizes are small (L <= a few
// thousand rows of width <= a few hundred), and these numbers are the spec, not a kernel.
#include "registry/metrics.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <map>
#include <stdexcept>

namespace posenc::analyze {

double distance(const Codes& c, int64_t a, int64_t b) {
  double s = 0;
  for (int64_t e = 0; e < c.dim; ++e) s += (c.row(a)[e] - c.row(b)[e]) * (c.row(a)[e] - c.row(b)[e]);
  return std::sqrt(s);
}

Uniqueness uniqueness(const Codes& c) {
  Uniqueness u;
  u.min_distance = INFINITY;
  double sum = 0;
  int64_t pairs = 0;
  for (int64_t a = 0; a < c.n; ++a)
    for (int64_t b = a + 1; b < c.n; ++b) {
      const double d = distance(c, a, b);
      sum += d, ++pairs;
      if (d < u.min_distance) u.min_distance = d, u.a = a, u.b = b;
    }
  u.mean_distance = pairs ? sum / static_cast<double>(pairs) : 0;
  if (pairs == 0) u.min_distance = 0;
  return u;
}

Neighbours neighbours(const Codes& c, int64_t horizon) {
  Neighbours r;
  const double mean = uniqueness(c).mean_distance;
  r.min_ratio = INFINITY;
  for (int64_t p = 0; p + 1 < c.n; ++p) {
    const double ratio = mean > 0 ? distance(c, p, p + 1) / mean : 0;
    if (ratio < r.min_ratio) r.min_ratio = ratio, r.min_at = p;
    if (ratio > r.max_ratio) r.max_ratio = ratio, r.max_at = p;
  }
  if (c.n < 2) r.min_ratio = 0;
  double norm2 = 0;
  for (int64_t p = 0; p < c.n; ++p)
    for (int64_t e = 0; e < c.dim; ++e) norm2 += c.row(p)[e] * c.row(p)[e];
  norm2 /= static_cast<double>(std::max<int64_t>(c.n, 1));
  for (int64_t lag = 0; lag <= std::min(horizon, c.n - 1); ++lag) {
    double s = 0;
    for (int64_t p = 0; p + lag < c.n; ++p)
      for (int64_t e = 0; e < c.dim; ++e) s += c.row(p)[e] * c.row(p + lag)[e];
    r.similarity.push_back(norm2 > 0 ? s / static_cast<double>(c.n - lag) / norm2 : 1.0);
  }
  for (size_t lag = 0; lag + 1 < r.similarity.size(); ++lag)
    if (r.similarity[lag + 1] > r.similarity[lag] + 1e-12) {
      r.first_violation = static_cast<int64_t>(lag);
      break;
    }
  return r;
}

namespace {
// Solves A X = B for symmetric positive semi-definite A (n x n) by Gaussian elimination with
// partial pivoting, with a tiny ridge so that rank-deficient codes (NoPE, repeated columns) work.
std::vector<double> solve(std::vector<double> A, std::vector<double> B, int64_t n, int64_t m) {
  double scale = 0;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, A[i * n + i]);
  for (int64_t i = 0; i < n; ++i) A[i * n + i] += 1e-12 * std::max(scale, 1e-300);
  for (int64_t col = 0; col < n; ++col) {
    int64_t piv = col;
    for (int64_t r = col + 1; r < n; ++r)
      if (std::abs(A[r * n + col]) > std::abs(A[piv * n + col])) piv = r;
    if (A[piv * n + col] == 0) continue;
    for (int64_t k = 0; k < n; ++k) std::swap(A[col * n + k], A[piv * n + k]);
    for (int64_t k = 0; k < m; ++k) std::swap(B[col * m + k], B[piv * m + k]);
    for (int64_t r = 0; r < n; ++r) {
      if (r == col) continue;
      const double f = A[r * n + col] / A[col * n + col];
      if (f == 0) continue;
      for (int64_t k = col; k < n; ++k) A[r * n + k] -= f * A[col * n + k];
      for (int64_t k = 0; k < m; ++k) B[r * m + k] -= f * B[col * m + k];
    }
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < m; ++k) B[r * m + k] = A[r * n + r] != 0 ? B[r * m + k] / A[r * n + r] : 0;
  return B;
}
}  // namespace

double linear_map_residual(const Codes& c, int64_t k) {
  if (k < 1 || k >= c.n)
    throw std::invalid_argument("linear_map_residual: offset k = " + std::to_string(k) +
                                " must be in [1, n)");
  const int64_t d = c.dim, rows = c.n - k;
  // Normal equations with X = C[0, rows), Y = C[k, k + rows): (X^T X) M^T = X^T Y.
  std::vector<double> xtx(d * d, 0.0), xty(d * d, 0.0);
  for (int64_t p = 0; p < rows; ++p)
    for (int64_t a = 0; a < d; ++a)
      for (int64_t b = 0; b < d; ++b) {
        xtx[a * d + b] += c.row(p)[a] * c.row(p)[b];
        xty[a * d + b] += c.row(p)[a] * c.row(p + k)[b];
      }
  const std::vector<double> mt = solve(xtx, xty, d, d);  // M^T (d x d)
  double err = 0, norm = 0;
  for (int64_t p = 0; p < rows; ++p)
    for (int64_t b = 0; b < d; ++b) {
      double pred = 0;
      for (int64_t a = 0; a < d; ++a) pred += c.row(p)[a] * mt[a * d + b];
      const double y = c.row(p + k)[b];
      err += (y - pred) * (y - pred);
      norm += y * y;
    }
  return norm > 0 ? std::sqrt(err / norm) : 0;
}

Novelty novelty(const Codes& trained, const Codes& fresh) {
  Novelty r;
  double adjacent = 0;
  for (int64_t p = 0; p + 1 < trained.n; ++p) adjacent += distance(trained, p, p + 1);
  adjacent /= static_cast<double>(std::max<int64_t>(trained.n - 1, 1));
  for (double x : trained.data) r.trained_max_abs = std::max(r.trained_max_abs, std::abs(x));
  for (double x : fresh.data) r.new_max_abs = std::max(r.new_max_abs, std::abs(x));
  double sum = 0;
  for (int64_t f = 0; f < fresh.n; ++f) {
    double nearest = INFINITY;
    for (int64_t t = 0; t < trained.n; ++t) {
      double s = 0;
      for (int64_t e = 0; e < fresh.dim; ++e)
        s += (fresh.row(f)[e] - trained.row(t)[e]) * (fresh.row(f)[e] - trained.row(t)[e]);
      nearest = std::min(nearest, s);
    }
    const double ratio = adjacent > 0 ? std::sqrt(nearest) / adjacent : (nearest > 0 ? INFINITY : 0);
    r.max_ratio = std::max(r.max_ratio, ratio);
    sum += ratio;
  }
  r.mean_ratio = fresh.n ? sum / static_cast<double>(fresh.n) : 0;
  return r;
}

int64_t first_merged_distance(const std::function<int64_t(int64_t)>& code_of, int64_t limit,
                              bool with_negatives) {
  std::map<int64_t, int64_t> seen;  // code -> the distance that had it first
  for (int64_t d = 0; d < limit; ++d) {
    std::vector<int64_t> signed_d = {d};
    if (with_negatives && d > 0) signed_d.push_back(-d);
    for (int64_t s : signed_d)
      if (!seen.emplace(code_of(s), s).second) return d;
  }
  return -1;
}

double rope_decay_bound(const std::vector<double>& inv_freq, double delta) {
  std::complex<double> s = 0;
  double total = 0;
  for (double theta : inv_freq) {
    s += std::polar(1.0, delta * theta);
    total += std::abs(s);  // |S_j| for j = 1 .. d/2
  }
  return inv_freq.empty() ? 0 : total / static_cast<double>(inv_freq.size());
}

double max_deviation_from_relative(const std::function<double(int64_t, int64_t)>& f, int64_t n_pos) {
  std::vector<double> value(n_pos * n_pos), sum(2 * n_pos, 0.0);
  std::vector<int64_t> count(2 * n_pos, 0);
  for (int64_t m = 0; m < n_pos; ++m)
    for (int64_t n = 0; n < n_pos; ++n) {
      value[m * n_pos + n] = f(m, n);
      sum[m - n + n_pos] += value[m * n_pos + n];
      ++count[m - n + n_pos];
    }
  double worst = 0;
  for (int64_t m = 0; m < n_pos; ++m)
    for (int64_t n = 0; n < n_pos; ++n)
      worst = std::max(worst, std::abs(value[m * n_pos + n] -
                                       sum[m - n + n_pos] / static_cast<double>(count[m - n + n_pos])));
  return worst;
}

}  // namespace posenc::analyze
