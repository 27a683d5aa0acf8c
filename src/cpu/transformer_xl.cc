// src/cpu/transformer_xl.cc: Transformer-XL position terms, CPU loops.
//   logits[b,h,i,j] = (q_i + v_h) . rproj_h(delta_ij) + u_h . k_j,   delta_ij = q_pos[i] - k_pos[j]
//   rproj_h(delta) = W_R[h*D:(h+1)*D, :] R_delta   (computed once per distinct delta)
#include <algorithm>
#include <cmath>

#include "src/cpu/parallel.h"
#include "src/cpu/relative_terms.h"

namespace posenc::cpu {
DeltaIndex::DeltaIndex(const std::vector<int64_t>& q, const std::vector<int64_t>& k) {
  if (q.empty() || k.empty()) return;
  const auto [qmin, qmax] = std::minmax_element(q.begin(), q.end());
  const auto [kmin, kmax] = std::minmax_element(k.begin(), k.end());
  lo = *qmin - *kmax;
  const int64_t hi = *qmax - *kmin;
  dense = hi - lo < 4 * static_cast<int64_t>(q.size() + k.size()) + 4096;
  if (dense) {
    for (int64_t d = lo; d <= hi; ++d) deltas.push_back(d);
  } else {  // scattered positions: the distinct deltas only
    for (int64_t a : q)
      for (int64_t b : k) deltas.push_back(a - b);
    std::sort(deltas.begin(), deltas.end());
    deltas.erase(std::unique(deltas.begin(), deltas.end()), deltas.end());
  }
}

std::vector<double> xl_sinusoids(const XLShapes& sh, const DeltaIndex& idx) {
  const int64_t half = sh.d_model / 2;
  std::vector<double> r(static_cast<size_t>(idx.size() * sh.d_model));
  for (int64_t n = 0; n < idx.size(); ++n)
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(idx.deltas[n]) * std::pow(sh.base, -2.0 * static_cast<double>(i) / static_cast<double>(sh.d_model));
      r[n * sh.d_model + i] = std::sin(a);
      r[n * sh.d_model + half + i] = std::cos(a);
    }
  return r;
}

// rproj (H, n, D) = W_R,h R_delta.
std::vector<double> xl_project(const XLShapes& sh, Table w_r, const std::vector<double>& r, int64_t n) {
  std::vector<double> out(static_cast<size_t>(sh.heads * n * sh.dim));
  parallel_for(sh.heads, [&](int64_t h) {
    for (int64_t m = 0; m < n; ++m)
      for (int64_t d = 0; d < sh.dim; ++d) {
        const float* w = w_r.cdata + (h * sh.dim + d) * w_r.s_row;
        double acc = 0;
        for (int64_t e = 0; e < sh.d_model; ++e) acc += static_cast<double>(w[e * w_r.s_col]) * r[m * sh.d_model + e];
        out[(h * n + m) * sh.dim + d] = acc;
      }
  });
  return out;
}

void transformer_xl_logits(const XLShapes& sh, const XLParams& p, Logits out) {
  const DeltaIndex idx(*sh.q_pos, *sh.k_pos);
  const std::vector<double> r = xl_sinusoids(sh, idx);
  const std::vector<double> rproj = xl_project(sh, p.w_r, r, idx.size());
  parallel_for(sh.batch * sh.heads, [&](int64_t bh) {
    const int64_t b = bh / sh.heads, h = bh % sh.heads;
    std::vector<double> uk(sh.nk), qv(sh.dim);
    for (int64_t j = 0; j < sh.nk; ++j) {
      double acc = 0;
      for (int64_t d = 0; d < sh.dim; ++d)
        acc += static_cast<double>(p.u.cdata[h * p.u.s_row + d * p.u.s_col]) * p.k.cdata[b * p.k.s[0] + j * p.k.s[1] + h * p.k.s[2] + d * p.k.s[3]];
      uk[j] = acc;
    }
    for (int64_t i = 0; i < sh.nq; ++i) {
      for (int64_t d = 0; d < sh.dim; ++d)
        qv[d] = static_cast<double>(p.q.cdata[b * p.q.s[0] + i * p.q.s[1] + h * p.q.s[2] + d * p.q.s[3]]) +
                p.v.cdata[h * p.v.s_row + d * p.v.s_col];
      for (int64_t j = 0; j < sh.nk; ++j) {
        const double* rp = rproj.data() + (h * idx.size() + idx((*sh.q_pos)[i] - (*sh.k_pos)[j])) * sh.dim;
        double acc = uk[j];
        for (int64_t d = 0; d < sh.dim; ++d) acc += qv[d] * rp[d];
        out.data[b * out.s[0] + h * out.s[1] + i * out.s[2] + j * out.s[3]] = static_cast<float>(acc);
      }
    }
  });
}

void transformer_xl_logits_backward(const XLShapes& sh, const XLParams& p, Logits grad, const XLParams& g) {
  const DeltaIndex idx(*sh.q_pos, *sh.k_pos);
  const int64_t n = idx.size();
  const std::vector<double> r = xl_sinusoids(sh, idx);
  const std::vector<double> rproj = xl_project(sh, p.w_r, r, n);
  // One task per head: every gradient slice written belongs to that head.
  parallel_for(sh.heads, [&](int64_t h) {
    std::vector<double> dr(static_cast<size_t>(n * sh.dim), 0.0), g_delta(n, 0.0), du(sh.dim, 0.0), dq(sh.dim), gk(sh.nk);
    for (int64_t b = 0; b < sh.batch; ++b) {
      std::fill(gk.begin(), gk.end(), 0.0);
      for (int64_t i = 0; i < sh.nq; ++i) {
        std::fill(dq.begin(), dq.end(), 0.0);
        const float* qi = p.q.cdata + b * p.q.s[0] + i * p.q.s[1] + h * p.q.s[2];
        for (int64_t j = 0; j < sh.nk; ++j) {
          const double gij = grad.cdata[b * grad.s[0] + h * grad.s[1] + i * grad.s[2] + j * grad.s[3]];
          if (gij == 0) continue;
          const int64_t m = idx((*sh.q_pos)[i] - (*sh.k_pos)[j]);
          const double* rp = rproj.data() + (h * n + m) * sh.dim;
          double* drm = dr.data() + m * sh.dim;
          for (int64_t d = 0; d < sh.dim; ++d) {
            dq[d] += gij * rp[d];
            drm[d] += gij * (static_cast<double>(qi[d * p.q.s[3]]) + p.v.cdata[h * p.v.s_row + d * p.v.s_col]);
          }
          g_delta[m] += gij;
          gk[j] += gij;
        }
        float* gq = g.q.data + b * g.q.s[0] + i * g.q.s[1] + h * g.q.s[2];
        for (int64_t d = 0; d < sh.dim; ++d) gq[d * g.q.s[3]] += static_cast<float>(dq[d]);
      }
      for (int64_t j = 0; j < sh.nk; ++j) {
        const float* kj = p.k.cdata + b * p.k.s[0] + j * p.k.s[1] + h * p.k.s[2];
        float* gkj = g.k.data + b * g.k.s[0] + j * g.k.s[1] + h * g.k.s[2];
        for (int64_t d = 0; d < sh.dim; ++d) {
          gkj[d * g.k.s[3]] += static_cast<float>(gk[j] * p.u.cdata[h * p.u.s_row + d * p.u.s_col]);
          du[d] += gk[j] * kj[d * p.k.s[3]];
        }
      }
    }
    for (int64_t d = 0; d < sh.dim; ++d) {
      double dv = 0;
      for (int64_t m = 0; m < n; ++m) dv += g_delta[m] * rproj[(h * n + m) * sh.dim + d];
      g.v.data[h * g.v.s_row + d * g.v.s_col] += static_cast<float>(dv);
      g.u.data[h * g.u.s_row + d * g.u.s_col] += static_cast<float>(du[d]);
      for (int64_t e = 0; e < sh.d_model; ++e) {
        double acc = 0;
        for (int64_t m = 0; m < n; ++m) acc += dr[m * sh.dim + d] * r[m * sh.d_model + e];
        g.w_r.data[(h * sh.dim + d) * g.w_r.s_row + e * g.w_r.s_col] += static_cast<float>(acc);
      }
    }
  });
}

}  // namespace posenc::cpu
