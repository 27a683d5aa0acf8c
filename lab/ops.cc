// lab/ops.cc: see ops.h.
#include "ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "posenc/threads.h"

namespace posenc::lab::ops {

void set_threads(int n) { posenc::set_num_threads(n); }

namespace {

// OpenBLAS runs single-threaded: its pthreads and OpenMP's would take turns spinning on the same
// cores (measured: 17k tokens/s with both on 2 cores, 47k with OpenBLAS on one). The lab splits
// each product into fixed row chunks itself, so results do not depend on the thread count.
constexpr int64_t kRowChunk = 128;
void single_threaded_blas() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

}  // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N,
                    int64_t C, int64_t OC) {
  single_threaded_blas();
  // out[r0:r1] = inp[r0:r1] @ weight^T (+ bias), one chunk of rows per task
  posenc::parallel_for((N + kRowChunk - 1) / kRowChunk, [&](int64_t chunk) {
    const int64_t r0 = chunk * kRowChunk, rows = std::min(kRowChunk, N - r0);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(OC),
                static_cast<int>(C), 1.0f, inp + r0 * C, static_cast<int>(C), weight, static_cast<int>(C),
                0.0f, out + r0 * OC, static_cast<int>(OC));
    if (bias != nullptr)
      for (int64_t n = r0; n < r0 + rows; ++n)
        for (int64_t o = 0; o < OC; ++o) out[n * OC + o] += bias[o];
  });
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int64_t C, int64_t OC) {
  single_threaded_blas();
  const int c = static_cast<int>(C), oc = static_cast<int>(OC);
  // forward: out[n, o] = sum_c inp[n, c] weight[o, c] + bias[o]
  if (dinp != nullptr) {  // dinp (N, C) += dout (N, OC) @ weight (OC, C), by row chunks of N
    posenc::parallel_for((N + kRowChunk - 1) / kRowChunk, [&](int64_t chunk) {
      const int64_t r0 = chunk * kRowChunk;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(std::min(kRowChunk, N - r0)), c,
                  oc, 1.0f, dout + r0 * OC, oc, weight, c, 1.0f, dinp + r0 * C, c);
    });
  }
  // dweight (OC, C) += dout^T (OC, N) @ inp (N, C), by row chunks of OC; the sum over N stays whole
  const int64_t chunk = std::max<int64_t>(16, kRowChunk * 64 / std::max<int64_t>(C, 1) / 16 * 16);
  posenc::parallel_for((OC + chunk - 1) / chunk, [&](int64_t k) {
    const int64_t o0 = k * chunk;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(std::min(chunk, OC - o0)), c,
                static_cast<int>(N), 1.0f, dout + o0, oc, inp, c, 1.0f, dweight + o0 * C, c);
  });
  if (dbias == nullptr) return;
  posenc::parallel_chunks(OC, N, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      float sum = 0.0f;
      for (int64_t r = 0; r < N; ++r) sum += dout[r * OC + o];
      dbias[o] += sum;
    }
  });
}

void norm_forward(Norm norm, float* out, float* mean, float* rstd, const float* inp, const float* weight,
                  const float* bias, int64_t N, int64_t C) {
  posenc::parallel_chunks(N, C, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* x = inp + n * C;
      float m = 0.0f;
      if (norm == Norm::layer) {
        for (int64_t i = 0; i < C; ++i) m += x[i];
        m /= static_cast<float>(C);
      }
      float var = 0.0f;  // mean of (x - m)^2; for rms m = 0, the mean square
      for (int64_t i = 0; i < C; ++i) var += (x[i] - m) * (x[i] - m);
      var /= static_cast<float>(C);
      const float s = 1.0f / std::sqrt(var + kNormEps);
      float* o = out + n * C;
      for (int64_t i = 0; i < C; ++i) {
        o[i] = (x[i] - m) * s * weight[i];
        if (norm == Norm::layer) o[i] += bias[i];
      }
      mean[n] = m;
      rstd[n] = s;
    }
  });
}

void norm_backward(Norm norm, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                   const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C) {
  // forward: xhat = (x - m) * s,  out = xhat * w (+ b).  With g = dout * w:
  //   layer: dx = s * (g - mean(g) - xhat * mean(g * xhat))
  //   rms:   dx = s * (g - xhat * mean(g * xhat))
  posenc::parallel_chunks(N, C, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* x = inp + n * C;
      const float* dy = dout + n * C;
      const float m = mean[n], s = rstd[n];
      float g_mean = 0.0f, gx_mean = 0.0f;
      for (int64_t i = 0; i < C; ++i) {
        const float g = dy[i] * weight[i];
        g_mean += g;
        gx_mean += g * (x[i] - m) * s;
      }
      g_mean /= static_cast<float>(C);
      gx_mean /= static_cast<float>(C);
      if (norm == Norm::rms) g_mean = 0.0f;
      float* dx = dinp + n * C;
      for (int64_t i = 0; i < C; ++i) dx[i] += s * (dy[i] * weight[i] - g_mean - (x[i] - m) * s * gx_mean);
    }
  });
  // Parameter gradients: a fixed row order per column.
  posenc::parallel_chunks(C, N, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float dw = 0.0f, db = 0.0f;
      for (int64_t n = 0; n < N; ++n) {
        dw += dout[n * C + i] * (inp[n * C + i] - mean[n]) * rstd[n];
        db += dout[n * C + i];
      }
      dweight[i] += dw;
      if (norm == Norm::layer) dbias[i] += db;
    }
  });
}

namespace {
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
}

void gelu_forward(float* out, const float* inp, int64_t n) {
  posenc::parallel_chunks(n, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float x = inp[i];
      out[i] = 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + 0.044715f * x * x * x)));
    }
  });
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
  posenc::parallel_chunks(n, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float x = inp[i];
      const float t = std::tanh(kGeluScale * (x + 0.044715f * x * x * x));
      const float dt = (1.0f - t * t) * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
      dinp[i] += (0.5f * (1.0f + t) + 0.5f * x * dt) * dout[i];
    }
  });
}

void residual_forward(float* out, const float* a, const float* b, int64_t n) {
  posenc::parallel_chunks(n, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) out[i] = a[i] + b[i];
  });
}

void crossentropy_forward(float* probs, float* losses, const float* logits, const int32_t* targets, int64_t N,
                          int64_t V) {
  posenc::parallel_chunks(N, V, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* z = logits + n * V;
      const float zmax = *std::max_element(z, z + V);
      double sum = 0.0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(z[v] - zmax));
      const bool counted = targets[n] != kIgnoreTarget;
      losses[n] = counted ? static_cast<float>(std::log(sum) + zmax - z[targets[n]])
                          : 0.0f;  // before probs may overwrite z
      float* p = probs + n * V;
      for (int64_t v = 0; v < V; ++v)
        p[v] = static_cast<float>(std::exp(static_cast<double>(z[v] - zmax)) / sum);
    }
  });
}

void crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets, float dloss, int64_t N,
                           int64_t V) {
  posenc::parallel_chunks(N, V, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const bool counted = targets[n] != kIgnoreTarget;
      for (int64_t v = 0; v < V; ++v) dlogits[n * V + v] = counted ? probs[n * V + v] * dloss : 0.0f;
      if (counted) dlogits[n * V + targets[n]] -= dloss;
    }
  });
}

void embedding_forward(float* out, const int32_t* tokens, const float* wte, float scale, int64_t N,
                       int64_t C) {
  posenc::parallel_chunks(N, C, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t i = 0; i < C; ++i) out[n * C + i] = scale * wte[tokens[n] * C + i];
  });
}

void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, float scale, int64_t N,
                        int64_t C) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < C; ++i) dwte[tokens[n] * C + i] += scale * dout[n * C + i];
}

}  // namespace posenc::lab::ops
