// src/cpu/transformer_xl.cc: Transformer-XL position terms, CPU loops.
//   logits[b,h,i,j] = (q_i + v_h) . rproj_h(delta_ij) + u_h . k_j,   delta_ij = q_pos[i] - k_pos[j]
//   rproj_h(delta) = W_R[h*D:(h+1)*D, :] R_delta   (computed once per distinct delta)
#include <algorithm>
#include <cmath>

#include "src/cpu/parallel.h"
#include "src/cpu/transformer_xl.h"

namespace posenc::cpu {
std::vector<double> transformer_xl_sinusoids(std::span<const int64_t> deltas, int64_t d_model, double base) {
  const int64_t half = d_model / 2, n = static_cast<int64_t>(deltas.size());
  std::vector<double> r(static_cast<size_t>(n * d_model));
  for (int64_t m = 0; m < n; ++m)
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(deltas[m]) *
                       std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d_model));
      r[m * d_model + i] = std::sin(a);
      r[m * d_model + half + i] = std::cos(a);
    }
  return r;
}

void transformer_xl_sinusoid_rows(std::span<const int64_t> deltas, int64_t d_model, double base,
                                  Strided<float, 2> out) {
  const std::vector<double> r = transformer_xl_sinusoids(deltas, d_model, base);
  for (size_t m = 0; m < deltas.size(); ++m)
    for (int64_t e = 0; e < d_model; ++e) out(m, e) = static_cast<float>(r[m * d_model + e]);
}

std::vector<double> transformer_xl_project(int64_t heads, int64_t dim, int64_t d_model,
                                           Strided<const float, 2> w_r, const std::vector<double>& r,
                                           int64_t n) {
  std::vector<double> out(static_cast<size_t>(heads * n * dim));
  parallel_for(heads, [&](int64_t h) {
    for (int64_t m = 0; m < n; ++m)
      for (int64_t d = 0; d < dim; ++d) {
        double acc = 0;
        for (int64_t e = 0; e < d_model; ++e)
          acc += static_cast<double>(w_r(h * dim + d, e)) * r[m * d_model + e];
        out[(h * n + m) * dim + d] = acc;
      }
  });
  return out;
}

void transformer_xl_project_backward(int64_t heads, int64_t dim, int64_t d_model,
                                     const std::vector<float>& d_rproj, const std::vector<double>& r,
                                     int64_t n, Strided<float, 2> grad_w_r) {
  parallel_for(heads * dim, [&](int64_t hd) {
    const int64_t h = hd / dim, d = hd % dim;
    for (int64_t e = 0; e < d_model; ++e) {
      double s = 0;
      for (int64_t m = 0; m < n; ++m)
        s += static_cast<double>(d_rproj[(h * n + m) * dim + d]) * r[m * d_model + e];
      grad_w_r(hd, e) += static_cast<float>(s);
    }
  });
}

void transformer_xl_logits(const TransformerXLShapes& sh, const TransformerXLInputs& p,
                           Strided<float, 4> out) {
  const DeltaIndex idx(sh.q_pos, sh.k_pos);
  const std::vector<double> r = transformer_xl_sinusoids(idx.deltas, sh.d_model, sh.base);
  const std::vector<double> rproj =
      transformer_xl_project(sh.heads, sh.dim, sh.d_model, p.w_r, r, idx.size());
  parallel_for(sh.batch * sh.heads, [&](int64_t bh) {
    const int64_t b = bh / sh.heads, h = bh % sh.heads;
    std::vector<double> uk(sh.nk), qv(sh.dim);
    for (int64_t j = 0; j < sh.nk; ++j) {
      double acc = 0;
      for (int64_t d = 0; d < sh.dim; ++d) acc += static_cast<double>(p.u(h, d)) * p.k(b, j, h, d);
      uk[j] = acc;
    }
    for (int64_t i = 0; i < sh.nq; ++i) {
      for (int64_t d = 0; d < sh.dim; ++d) qv[d] = static_cast<double>(p.q(b, i, h, d)) + p.v(h, d);
      for (int64_t j = 0; j < sh.nk; ++j) {
        const double* rp = rproj.data() + (h * idx.size() + idx(sh.q_pos[i] - sh.k_pos[j])) * sh.dim;
        double acc = uk[j];
        for (int64_t d = 0; d < sh.dim; ++d) acc += qv[d] * rp[d];
        out(b, h, i, j) = static_cast<float>(acc);
      }
    }
  });
}

void transformer_xl_logits_backward(const TransformerXLShapes& sh, const TransformerXLInputs& p,
                                    Strided<const float, 4> grad, const TransformerXLGrads& g) {
  const DeltaIndex idx(sh.q_pos, sh.k_pos);
  const int64_t n = idx.size();
  const std::vector<double> r = transformer_xl_sinusoids(idx.deltas, sh.d_model, sh.base);
  const std::vector<double> rproj = transformer_xl_project(sh.heads, sh.dim, sh.d_model, p.w_r, r, n);
  // One task per head: every gradient slice written belongs to that head.
  parallel_for(sh.heads, [&](int64_t h) {
    std::vector<double> dr(static_cast<size_t>(n * sh.dim), 0.0), g_delta(n, 0.0), du(sh.dim, 0.0),
        dq(sh.dim), gk(sh.nk);
    for (int64_t b = 0; b < sh.batch; ++b) {
      std::fill(gk.begin(), gk.end(), 0.0);
      for (int64_t i = 0; i < sh.nq; ++i) {
        std::fill(dq.begin(), dq.end(), 0.0);
        const float* qi = p.q.at(b, i, h, 0);
        for (int64_t j = 0; j < sh.nk; ++j) {
          const double gij = grad(b, h, i, j);
          if (gij == 0) continue;
          const int64_t m = idx(sh.q_pos[i] - sh.k_pos[j]);
          const double* rp = rproj.data() + (h * n + m) * sh.dim;
          double* drm = dr.data() + m * sh.dim;
          // forward: logit_ij = (q_i + v_h) . rproj_h[m] + u_h . k_j
          for (int64_t d = 0; d < sh.dim; ++d) {
            dq[d] += gij * rp[d];                                                      // d q_i
            drm[d] += gij * (static_cast<double>(qi[d * p.q.stride[3]]) + p.v(h, d));  // d rproj_h[m]
          }
          g_delta[m] += gij;  // d v_h = sum_m g_delta[m] rproj_h[m]
          gk[j] += gij;       // d k_j = gk[j] u_h, d u_h = sum_j gk[j] k_j
        }
        float* gq = g.q.at(b, i, h, 0);
        for (int64_t d = 0; d < sh.dim; ++d) gq[d * g.q.stride[3]] += static_cast<float>(dq[d]);
      }
      for (int64_t j = 0; j < sh.nk; ++j) {
        const float* kj = p.k.at(b, j, h, 0);
        float* gkj = g.k.at(b, j, h, 0);
        for (int64_t d = 0; d < sh.dim; ++d) {
          gkj[d * g.k.stride[3]] += static_cast<float>(gk[j] * p.u(h, d));
          du[d] += gk[j] * kj[d * p.k.stride[3]];
        }
      }
    }
    for (int64_t d = 0; d < sh.dim; ++d) {
      double dv = 0;
      for (int64_t m = 0; m < n; ++m) dv += g_delta[m] * rproj[(h * n + m) * sh.dim + d];
      g.v(h, d) += static_cast<float>(dv);
      g.u(h, d) += static_cast<float>(du[d]);
      for (int64_t e = 0; e < sh.d_model; ++e) {  // forward: rproj_h[m] = W_R,h R_m
        double acc = 0;
        for (int64_t m = 0; m < n; ++m) acc += dr[m * sh.dim + d] * r[m * sh.d_model + e];
        g.w_r(h * sh.dim + d, e) += static_cast<float>(acc);
      }
    }
  });
}

void transformer_xl_shift_queries(Strided<const float, 3> q, int64_t dim, Strided<const float, 2> u,
                                  Strided<const float, 2> v, float* qu, float* qv) {
  const int64_t B = q.extent[0], Q = q.extent[1], H = q.extent[2];
  parallel_chunks(B * Q, H * dim, [&](int64_t begin, int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt)
      for (int64_t h = 0; h < H; ++h) {
        const float* row = q.at(bt / Q, bt % Q, h);
        for (int64_t d = 0; d < dim; ++d) {
          qu[(bt * H + h) * dim + d] = row[d] + u(h, d);
          qv[(bt * H + h) * dim + d] = row[d] + v(h, d);
        }
      }
  });
}

std::vector<float> transformer_xl_transpose_projection(const std::vector<float>& rproj, int64_t heads,
                                                       int64_t n, int64_t dim) {
  std::vector<float> t(rproj.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t c = 0; c < n; ++c)
      for (int64_t d = 0; d < dim; ++d) t[(h * dim + d) * n + c] = rproj[(h * n + c) * dim + d];
  return t;
}

}  // namespace posenc::cpu
