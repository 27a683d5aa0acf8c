// registry/metrics.h: the four conditions of a good positional encoding (uniqueness,
// distinguishable neighbours, composable relative offsets, generalization) and the long-term decay
// of RoPE/ALiBi, as numbers. Each function works on plain codes (one row per position or per
// distance) in double, so it can be tested on hand-built encodings with known answers; the
// registry's entries (registry/entries/) feed it the library's.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace posenc::analyze {

// N codes of width `dim`, row-major: code of row r at data[r * dim, (r + 1) * dim).
struct Codes {
  int64_t n = 0, dim = 0;
  std::vector<double> data;
  const double* row(int64_t r) const { return data.data() + r * dim; }
};
double distance(const Codes& c, int64_t a, int64_t b);  // Euclidean

// Uniqueness: the closest two rows (a < b). min_distance 0 means two positions share a code.
struct Uniqueness {
  double min_distance = 0, mean_distance = 0;
  int64_t a = 0, b = 0;
};
Uniqueness uniqueness(const Codes& c);

// Neighbours: the distance of each row to the next, relative to the mean pairwise distance, and
// the similarity curve sim(lag) = mean over p of <c_p, c_{p+lag}> / mean |c_p|^2 (1 at lag 0).
struct Neighbours {
  double min_ratio = 0, max_ratio = 0;  // adjacent distance / mean pairwise distance
  int64_t min_at = 0, max_at = 0;       // p of the pair (p, p + 1)
  std::vector<double> similarity;       // lag 0 .. horizon
  int64_t first_violation = -1;         // first lag with sim(lag + 1) > sim(lag) + 1e-12, or -1
};
Neighbours neighbours(const Codes& c, int64_t horizon);

// Composability: the least-squares linear map M_k with c_{p+k} ~ M_k c_p over every p, and the
// relative residual ||C_{+k} - M_k C||_F / ||C_{+k}||_F (0: offsets compose linearly).
double linear_map_residual(const Codes& c, int64_t k);

// Generalization: for each new row, the distance to the nearest trained row, relative to the mean
// adjacent distance of the trained rows (~0: looks like a trained position; >> 1: like nothing seen).
struct Novelty {
  double max_ratio = 0, mean_ratio = 0;
  double trained_max_abs = 0, new_max_abs = 0;  // largest |value|: bounded if new <= trained
};
Novelty novelty(const Codes& trained, const Codes& fresh);

// Relative encodings that map a distance d to a discrete code (T5 bucket, clipped row): the
// smallest d >= 0 of [0, limit) whose code equals that of d - 1 (or, with negatives, of -d), i.e.
// where two offsets become indistinguishable; -1 if none.
int64_t first_merged_distance(const std::function<int64_t(int64_t)>& code_of, int64_t limit,
                              bool with_negatives);

// RoFormer (Su et al. 2021, section 3.4.3): |sum_j h_j e^{i delta theta_j}| <= max_j |h_{j+1} - h_j|
// * sum_j |S_j|, S_j = sum_{k<j} e^{i delta theta_k}; returns (1 / (d/2)) sum_j |S_j| at delta.
double rope_decay_bound(const std::vector<double>& inv_freq, double delta);

// The largest |f(m, n) - g(m - n)| over m, n in [0, n_pos), g(delta) taken as the mean of f over
// the pairs at that delta: 0 when f depends on positions only through their difference.
double max_deviation_from_relative(const std::function<double(int64_t, int64_t)>& f, int64_t n_pos);

}  // namespace posenc::analyze
