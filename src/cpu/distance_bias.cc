// src/cpu/distance_bias.cc: see distance_bias.h.
#include "src/cpu/distance_bias.h"

#include <algorithm>
#include <cstring>

#include "src/cpu/parallel.h"

namespace posenc::cpu {

float DistanceBias::value(int64_t d, int64_t head) const {
  if (slopes) {
    const double m = slopes[head];
    return static_cast<float>(symmetric ? -m * static_cast<double>(d < 0 ? -d : d) : m * static_cast<double>(d));
  }
  return table[relative_bias_row(*rows_config, d) * table_stride_row + head * table_stride_head];
}

DistanceRange distance_range(const std::vector<int64_t>& q_pos, const std::vector<int64_t>& k_pos) {
  DistanceRange r;
  if (q_pos.empty() || k_pos.empty()) return r;
  const auto [qmin, qmax] = std::minmax_element(q_pos.begin(), q_pos.end());
  const auto [kmin, kmax] = std::minmax_element(k_pos.begin(), k_pos.end());
  r.lo = *kmin - *qmax;
  r.hi = *kmax - *qmin;
  // Tabulate when the range is comparable to the block (always, for ordinary sequences).
  const int64_t limit = 4 * static_cast<int64_t>(q_pos.size() + k_pos.size()) + 4096;
  r.use_lut = r.hi - r.lo < limit;
  return r;
}

std::vector<float> distance_lut(const DistanceBias& bias, int64_t heads, const DistanceRange& range) {
  std::vector<float> lut(static_cast<size_t>(heads * range.size()));
  parallel_for(heads, [&](int64_t h) {
    for (int64_t d = range.lo; d <= range.hi; ++d) lut[h * range.size() + (d - range.lo)] = bias.value(d, h);
  });
  return lut;
}

namespace {
bool is_unit_run(const std::vector<int64_t>& p) {
  for (size_t j = 1; j < p.size(); ++j)
    if (p[j] != p[0] + static_cast<int64_t>(j)) return false;
  return true;
}
}  // namespace

void distance_bias_forward(const DistanceBias& bias, int64_t heads, const std::vector<int64_t>& q_pos,
                           const std::vector<int64_t>& k_pos, float* out, int64_t sh, int64_t sq, int64_t sk) {
  const int64_t nq = static_cast<int64_t>(q_pos.size()), nk = static_cast<int64_t>(k_pos.size());
  if (nq == 0 || nk == 0) return;
  const DistanceRange range = distance_range(q_pos, k_pos);
  if (!range.use_lut) {
    parallel_chunks(heads * nq, nk, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t h = r / nq, i = r % nq;
        for (int64_t j = 0; j < nk; ++j) out[h * sh + i * sq + j * sk] = bias.value(k_pos[j] - q_pos[i], h);
      }
    });
    return;
  }
  const std::vector<float> lut = distance_lut(bias, heads, range);
  // With keys at consecutive positions a row is a contiguous slice of the lut.
  const bool contiguous = sk == 1 && is_unit_run(k_pos);
  parallel_chunks(heads * nq, nk, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t h = r / nq, i = r % nq;
      const int64_t base = h * range.size() - range.lo - q_pos[i];  // lut[base + k] = bias(k - q_i)
      float* o = out + h * sh + i * sq;
      if (contiguous) std::memcpy(o, lut.data() + (base + k_pos[0]), sizeof(float) * static_cast<size_t>(nk));
      else
        for (int64_t j = 0; j < nk; ++j) o[j * sk] = lut[base + k_pos[j]];
    }
  });
}

void distance_bias_backward(const RelativeBiasConfig& config, const std::vector<int64_t>& q_pos,
                            const std::vector<int64_t>& k_pos, const float* grad, int64_t sh, int64_t sq,
                            int64_t sk, float* grad_table, int64_t gt_stride_row, int64_t gt_stride_head) {
  const int64_t nq = static_cast<int64_t>(q_pos.size()), nk = static_cast<int64_t>(k_pos.size());
  if (nq == 0 || nk == 0) return;
  const DistanceRange range = distance_range(q_pos, k_pos);
  const int64_t rows = config.num_rows();
  // One task per head: the head's column of grad_table is owned by it, sums run in (i, j) order
  // in double, so the result does not depend on the number of threads.
  parallel_for(config.heads, [&](int64_t h) {
    std::vector<double> per_row(rows, 0.0);
    if (range.use_lut) {
      std::vector<double> per_distance(range.size(), 0.0);
      for (int64_t i = 0; i < nq; ++i) {
        const int64_t base = -range.lo - q_pos[i];  // per_distance[base + k] sums distance k - q_i
        const float* g = grad + h * sh + i * sq;
        for (int64_t j = 0; j < nk; ++j) per_distance[base + k_pos[j]] += g[j * sk];
      }
      for (int64_t d = range.lo; d <= range.hi; ++d) per_row[relative_bias_row(config, d)] += per_distance[d - range.lo];
    } else {
      for (int64_t i = 0; i < nq; ++i)
        for (int64_t j = 0; j < nk; ++j)
          per_row[relative_bias_row(config, k_pos[j] - q_pos[i])] += grad[h * sh + i * sq + j * sk];
    }
    for (int64_t r = 0; r < rows; ++r)
      grad_table[r * gt_stride_row + h * gt_stride_head] += static_cast<float>(per_row[r]);
  });
}

}  // namespace posenc::cpu
