// src/cpu/bias.cc: see bias.h.
#include "src/cpu/bias.h"

#include <algorithm>
#include <cstring>

#include "src/cpu/half.h"
#include "src/cpu/parallel.h"
#include "src/half.h"

namespace posenc::cpu {

// A decode step reads each entry once, so building the table must cost no more than a read: ALiBi's
// entries are one multiply each (the same double product as Bias::value, vectorized), a learned
// table's row index (T5's logarithmic buckets) is computed once per distance for all heads.
std::vector<float> distance_lut(const Bias& bias, int64_t heads, const DistanceRange& range) {
  const int64_t size = range.size();
  std::vector<float> lut(static_cast<size_t>(heads * size));
  if (bias.slopes) {
    parallel_chunks(heads * size, 1, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end;) {
        const int64_t h = e / size, stop = std::min(end, (h + 1) * size);
        const double m = bias.slopes[h];
        float* row = lut.data() + h * size;
        for (int64_t x = e - h * size; x < stop - h * size; ++x) {
          const double d = static_cast<double>(range.lo + x);
          row[x] = static_cast<float>(bias.symmetric ? -m * (d < 0 ? -d : d) : m * d);
        }
        e = stop;
      }
    });
    return lut;
  }
  parallel_chunks(size, heads, [&](int64_t begin, int64_t end) {
    for (int64_t x = begin; x < end; ++x) {
      const int64_t row = relative_bias_row(*bias.rows_config, range.lo + x);
      for (int64_t h = 0; h < heads; ++h) lut[h * size + x] = bias.table(row, h);
    }
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

void bias_block(const Bias& bias, const std::vector<int64_t>& q_pos, const std::vector<int64_t>& k_pos,
                Strided<float, 3> out) {
  const int64_t heads = out.extent[0], sk = out.stride[2];
  const int64_t nq = static_cast<int64_t>(q_pos.size()), nk = static_cast<int64_t>(k_pos.size());
  if (nq == 0 || nk == 0) return;
  const DistanceRange range = distance_range(q_pos, k_pos);
  if (!range.use_lut) {
    parallel_chunks(heads * nq, nk, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t h = r / nq, i = r % nq;
        for (int64_t j = 0; j < nk; ++j) out(h, i, j) = bias.value(k_pos[j] - q_pos[i], h);
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
      float* o = out.at(h, i, 0);
      if (contiguous)
        std::memcpy(o, lut.data() + (base + k_pos[0]), sizeof(float) * static_cast<size_t>(nk));
      else
        for (int64_t j = 0; j < nk; ++j) o[j * sk] = lut[base + k_pos[j]];
    }
  });
}

namespace {
// grad(h, i, j) as a float: load(h, i, j).
template <typename Load>
void backward_rows(const RelativeBiasConfig& config, const std::vector<int64_t>& q_pos,
                   const std::vector<int64_t>& k_pos, Load load, Strided<float, 2> grad_table) {
  const int64_t nq = static_cast<int64_t>(q_pos.size()), nk = static_cast<int64_t>(k_pos.size());
  if (nq == 0 || nk == 0) return;
  const DistanceRange range = distance_range(q_pos, k_pos);
  const int64_t rows = config.num_rows();
  // forward: out(h, i, j) = table[row(k_j - q_i), h], so each table row collects the gradients of
  // the pairs mapped to it. One task per head: the head's column of grad_table is owned by it, sums run in
  // (i, j) order in double, so the result does not depend on the number of threads.
  parallel_for(config.heads, [&](int64_t h) {
    std::vector<double> per_row(rows, 0.0);
    if (range.use_lut) {
      std::vector<double> per_distance(range.size(), 0.0);
      for (int64_t i = 0; i < nq; ++i) {
        const int64_t base = -range.lo - q_pos[i];  // per_distance[base + k] sums distance k - q_i
        for (int64_t j = 0; j < nk; ++j) per_distance[base + k_pos[j]] += load(h, i, j);
      }
      for (int64_t d = range.lo; d <= range.hi; ++d)
        per_row[relative_bias_row(config, d)] += per_distance[d - range.lo];
    } else {
      for (int64_t i = 0; i < nq; ++i)
        for (int64_t j = 0; j < nk; ++j)
          per_row[relative_bias_row(config, k_pos[j] - q_pos[i])] += load(h, i, j);
    }
    for (int64_t r = 0; r < rows; ++r) grad_table(r, h) += static_cast<float>(per_row[r]);
  });
}
}  // namespace

void bias_block_backward(const RelativeBiasConfig& config, const std::vector<int64_t>& q_pos,
                         const std::vector<int64_t>& k_pos, Strided<const float, 3> grad,
                         Strided<float, 2> grad_table) {
  backward_rows(
      config, q_pos, k_pos, [&](int64_t h, int64_t i, int64_t j) { return grad(h, i, j); }, grad_table);
}

void bias_block_backward(const RelativeBiasConfig& config, const std::vector<int64_t>& q_pos,
                         const std::vector<int64_t>& k_pos, Strided<const uint16_t, 3> grad, DType dtype,
                         Strided<float, 2> grad_table) {
  const bool bf16 = dtype == DType::bf16;
  backward_rows(
      config, q_pos, k_pos,
      [&](int64_t h, int64_t i, int64_t j) {
        const uint16_t x = grad(h, i, j);
        return bf16 ? detail::bf16_to_f32(x) : detail::f16_to_f32(x);
      },
      grad_table);
}

void bias_block16(const Bias& bias, const std::vector<int64_t>& q_pos, const std::vector<int64_t>& k_pos,
                  Strided<uint16_t, 3> out, DType dtype) {
  const int64_t heads = out.extent[0];
  const int64_t nq = static_cast<int64_t>(q_pos.size()), nk = static_cast<int64_t>(k_pos.size());
  if (nq == 0 || nk == 0) return;
  const DistanceRange range = distance_range(q_pos, k_pos);
  const std::vector<float> lut = range.use_lut ? distance_lut(bias, heads, range) : std::vector<float>{};
  parallel_chunks(heads * nq, nk, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(nk));  // the fp32 values of one row, rounded once
    for (int64_t r = begin; r < end; ++r) {
      const int64_t h = r / nq, i = r % nq;
      if (range.use_lut) {
        const int64_t base = h * range.size() - range.lo - q_pos[i];
        for (int64_t j = 0; j < nk; ++j) row[j] = lut[base + k_pos[j]];
      } else {
        for (int64_t j = 0; j < nk; ++j) row[j] = bias.value(k_pos[j] - q_pos[i], h);
      }
      narrow_row(dtype, row.data(), nk, out.at(h, i, 0));
    }
  });
}

}  // namespace posenc::cpu
