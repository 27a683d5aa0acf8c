// src/cpu/shaw.cc: Shaw et al. relative position representations, CPU loops.
// With r(i, j) = clip(k_j - q_i, -K, K) + K, both terms go through a (Q, 2K+1) projection:
//   key:   Qa[i, r] = q_i . a_k[r];          logits[i, j] = Qa[i, r(i, j)]
//   value: P[i, r] = sum_{j: r(i,j) = r} p_ij; out_i += sum_r P[i, r] a_v[r]
#include <algorithm>
#include <vector>

#include "src/cpu/parallel.h"
#include "src/cpu/shaw.h"

namespace posenc::cpu {
namespace {
inline int64_t row_of(const ShawShapes& sh, int64_t i, int64_t j) {
  return std::clamp(sh.k_pos[j] - sh.q_pos[i], -sh.max_distance, sh.max_distance) + sh.max_distance;
}
// Adds per-(b, h) partial tables (bh, rows, D) into the table, in bh order (deterministic).
void reduce_partials(const std::vector<double>& partial, int64_t bh_count, int64_t rows, int64_t dim,
                     Strided<float, 2> t) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < dim; ++d) {
      double acc = 0;
      for (int64_t bh = 0; bh < bh_count; ++bh) acc += partial[(bh * rows + r) * dim + d];
      t(r, d) += static_cast<float>(acc);
    }
}
}  // namespace

void shaw_key_logits(const ShawShapes& sh, Strided<const float, 2> a_k, Strided<const float, 4> q,
                     Strided<float, 4> out) {
  const int64_t rows = 2 * sh.max_distance + 1;
  parallel_for(sh.batch * sh.heads, [&](int64_t bh) {
    const int64_t b = bh / sh.heads, h = bh % sh.heads;
    std::vector<float> qa(static_cast<size_t>(sh.nq * rows));
    for (int64_t i = 0; i < sh.nq; ++i) {
      const float* qi = q.at(b, i, h, 0);
      for (int64_t r = 0; r < rows; ++r) {
        float acc = 0;
        for (int64_t d = 0; d < sh.dim; ++d) acc += qi[d * q.stride[3]] * a_k(r, d);
        qa[i * rows + r] = acc;
      }
    }
    for (int64_t i = 0; i < sh.nq; ++i)
      for (int64_t j = 0; j < sh.nk; ++j) out(b, h, i, j) = qa[i * rows + row_of(sh, i, j)];
  });
}

void shaw_key_logits_backward(const ShawShapes& sh, Strided<const float, 2> a_k, Strided<const float, 4> q,
                              Strided<const float, 4> grad, Strided<float, 4> grad_q,
                              Strided<float, 2> grad_a_k) {
  const int64_t rows = 2 * sh.max_distance + 1, bhs = sh.batch * sh.heads;
  std::vector<double> partial(static_cast<size_t>(bhs * rows * sh.dim), 0.0);
  parallel_for(bhs, [&](int64_t bh) {
    const int64_t b = bh / sh.heads, h = bh % sh.heads;
    std::vector<double> g_row(rows);
    // forward: logits_ij = Qa[i, r(i, j)] with Qa[i, r] = q_i . a_k[r]; so d Qa[i, r] = sum_{j: r(i,j) = r}
    // g_ij, d q_i = sum_r d Qa[i, r] a_k[r] and d a_k[r] = sum_i d Qa[i, r] q_i.
    for (int64_t i = 0; i < sh.nq; ++i) {
      std::fill(g_row.begin(), g_row.end(), 0.0);
      for (int64_t j = 0; j < sh.nk; ++j) g_row[row_of(sh, i, j)] += grad(b, h, i, j);
      const float* qi = q.at(b, i, h, 0);
      float* gqi = grad_q.at(b, i, h, 0);
      for (int64_t d = 0; d < sh.dim; ++d) {
        double acc = 0;
        for (int64_t r = 0; r < rows; ++r) acc += g_row[r] * a_k(r, d);
        gqi[d * grad_q.stride[3]] += static_cast<float>(acc);
      }
      double* part = partial.data() + bh * rows * sh.dim;
      for (int64_t r = 0; r < rows; ++r)
        if (g_row[r] != 0)
          for (int64_t d = 0; d < sh.dim; ++d) part[r * sh.dim + d] += g_row[r] * qi[d * q.stride[3]];
    }
  });
  reduce_partials(partial, bhs, rows, sh.dim, grad_a_k);
}

void shaw_value_output(const ShawShapes& sh, Strided<const float, 2> a_v, Strided<const float, 4> probs,
                       Strided<float, 4> out) {
  const int64_t rows = 2 * sh.max_distance + 1;
  parallel_for(sh.batch * sh.heads, [&](int64_t bh) {
    const int64_t b = bh / sh.heads, h = bh % sh.heads;
    std::vector<double> p_row(rows);
    for (int64_t i = 0; i < sh.nq; ++i) {
      std::fill(p_row.begin(), p_row.end(), 0.0);
      for (int64_t j = 0; j < sh.nk; ++j) p_row[row_of(sh, i, j)] += probs(b, h, i, j);
      float* oi = out.at(b, i, h, 0);
      for (int64_t d = 0; d < sh.dim; ++d) {
        double acc = 0;
        for (int64_t r = 0; r < rows; ++r) acc += p_row[r] * a_v(r, d);
        oi[d * out.stride[3]] += static_cast<float>(acc);
      }
    }
  });
}

void shaw_value_output_backward(const ShawShapes& sh, Strided<const float, 2> a_v,
                                Strided<const float, 4> probs, Strided<const float, 4> grad_out,
                                Strided<float, 4> grad_probs, Strided<float, 2> grad_a_v) {
  const int64_t rows = 2 * sh.max_distance + 1, bhs = sh.batch * sh.heads;
  std::vector<double> partial(static_cast<size_t>(bhs * rows * sh.dim), 0.0);
  parallel_for(bhs, [&](int64_t bh) {
    const int64_t b = bh / sh.heads, h = bh % sh.heads;
    std::vector<double> p_row(rows), dv(rows);
    double* part = partial.data() + bh * rows * sh.dim;
    // forward: out_i += sum_r P[i, r] a_v[r] with P[i, r] = sum_{j: r(i,j) = r} p_ij; so
    // d p_ij = grad_out_i . a_v[r(i, j)] and d a_v[r] = sum_i P[i, r] grad_out_i.
    for (int64_t i = 0; i < sh.nq; ++i) {
      const float* go = grad_out.at(b, i, h, 0);
      for (int64_t r = 0; r < rows; ++r) {  // dv[r] = grad_out_i . a_v[r]
        double acc = 0;
        for (int64_t d = 0; d < sh.dim; ++d)
          acc += static_cast<double>(go[d * grad_out.stride[3]]) * a_v(r, d);
        dv[r] = acc;
      }
      std::fill(p_row.begin(), p_row.end(), 0.0);
      for (int64_t j = 0; j < sh.nk; ++j) {
        const int64_t r = row_of(sh, i, j);
        grad_probs(b, h, i, j) += static_cast<float>(dv[r]);
        p_row[r] += probs(b, h, i, j);
      }
      for (int64_t r = 0; r < rows; ++r)
        if (p_row[r] != 0)
          for (int64_t d = 0; d < sh.dim; ++d) part[r * sh.dim + d] += p_row[r] * go[d * grad_out.stride[3]];
    }
  });
  reduce_partials(partial, bhs, rows, sh.dim, grad_a_v);
}

void shaw_pack_table(Strided<const float, 2> table, float* dst, float* dst_t) {
  const int64_t rows = table.extent[0], cols = table.extent[1];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float x = table(r, c);
      dst[r * cols + c] = x;
      dst_t[c * rows + r] = x;
    }
}

}  // namespace posenc::cpu
