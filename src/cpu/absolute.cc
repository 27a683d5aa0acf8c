// src/cpu/absolute.cc: CPU loops of the absolute encodings; see absolute.h.
#include "src/cpu/absolute.h"

#include "src/cpu/half.h"
#include "src/cpu/parallel.h"
#include "src/cpu/rope.h"

namespace posenc::cpu {

void sinusoid_rows(const SinusoidalConfig& cfg, const std::vector<double>& w,
                   const std::vector<int64_t>& positions, Strided<float, 2> rows, bool accumulate) {
  const int64_t half = cfg.dim / 2;
  const TokenGrid grid{rows.extent[0], rows.extent[1]};
  AngleTable a;
  a.inv_freq = w.data();
  a.pairs = half;
  a.positions = positions.data();
  a.position_offset = cfg.position_offset;
  SinCosOut o;
  o.accumulate = accumulate;
  o.sin_out = o.cos_out = rows;
  if (cfg.layout == SinusoidalLayout::interleaved) {  // [s0 c0 s1 c1 ...]
    o.cos_out.data += 1;
    o.elem_stride = 2;
  } else {  // [s0 s1 ... | c0 c1 ...] (+ a zero column when dim is odd, as fairseq pads)
    o.cos_out.data += half;
  }
  sincos_rows(a, grid, o);
  if (cfg.dim % 2 == 1 && !accumulate)
    for (int64_t b = 0; b < grid.batch; ++b)
      for (int64_t t = 0; t < grid.tokens; ++t) rows.at(b, t)[cfg.dim - 1] = 0.0f;
}

void sinusoid_rows16(const SinusoidalConfig& cfg, const std::vector<double>& w,
                     const std::vector<int64_t>& positions, Strided<uint16_t, 2> rows, DType dtype,
                     bool accumulate) {
  const int64_t tokens = rows.extent[1], n = rows.extent[0] * tokens, dim = cfg.dim;
  parallel_chunks(n, 8 * dim, [&](int64_t begin, int64_t end) {
    // The fp32 rows of this chunk (the nested sincos_rows runs on this thread), then one rounding.
    const std::vector<int64_t> chunk_positions(positions.begin() + begin, positions.begin() + end);
    std::vector<float> wide(static_cast<size_t>((end - begin) * dim));
    sinusoid_rows(cfg, w, chunk_positions, {wide.data(), {1, end - begin}, {0, dim}}, false);
    std::vector<float> row(static_cast<size_t>(dim));
    for (int64_t r = begin; r < end; ++r) {
      uint16_t* x = rows.at(r / tokens, r % tokens);
      const float* pe = wide.data() + (r - begin) * dim;
      if (!accumulate) {
        narrow_row(dtype, pe, dim, x);
        continue;
      }
      widen_row(dtype, x, dim, row.data());
      for (int64_t d = 0; d < dim; ++d) row[d] += pe[d];
      narrow_row(dtype, row.data(), dim, x);
    }
  });
}

void learned_rows16(Strided<const float, 2> table, const std::vector<int64_t>& positions,
                    Strided<uint16_t, 3> out, DType dtype, bool accumulate) {
  const int64_t tokens = out.extent[1], dim = out.extent[2];
  parallel_chunks(out.extent[0] * tokens, dim, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(dim));
    for (int64_t r = begin; r < end; ++r) {
      uint16_t* x = out.at(r / tokens, r % tokens, 0);
      const float* t = table.at(positions[r], 0);
      if (accumulate) widen_row(dtype, x, dim, row.data());
      for (int64_t e = 0; e < dim; ++e)
        row[e] = accumulate ? row[e] + t[e * table.stride[1]] : t[e * table.stride[1]];
      narrow_row(dtype, row.data(), dim, x);
    }
  });
}

void learned_rows(Strided<const float, 2> table, const std::vector<int64_t>& positions, Strided<float, 3> out,
                  bool accumulate) {
  const int64_t tokens = out.extent[1], dim = out.extent[2];
  parallel_chunks(out.extent[0] * tokens, dim, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t e = 0; e < dim; ++e) {
        float& o = out(r / tokens, r % tokens, e);
        const float x = table(positions[r], e);
        o = accumulate ? o + x : x;
      }
  });
}

void learned_rows_backward(Strided<const float, 3> grad_out, const std::vector<int64_t>& positions,
                           Strided<float, 2> grad_table) {
  const int64_t tokens = grad_out.extent[1], rows = grad_out.extent[0] * tokens, dim = grad_out.extent[2];
  // forward: out(b, t) = table[positions(b, t)], so every row of grad_out adds into its table row.
  // Each chunk of columns is summed over rows in row order: the result is thread-count independent.
  parallel_chunks(dim, rows, [&](int64_t e0, int64_t e1) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t e = e0; e < e1; ++e) grad_table(positions[r], e) += grad_out(r / tokens, r % tokens, e);
  });
}

void learned_rows_backward16(Strided<const uint16_t, 3> grad_out, DType dtype,
                             const std::vector<int64_t>& positions, Strided<float, 2> grad_table) {
  const int64_t tokens = grad_out.extent[1], rows = grad_out.extent[0] * tokens, dim = grad_out.extent[2];
  parallel_chunks(dim, rows, [&](int64_t e0, int64_t e1) {
    std::vector<float> wide(static_cast<size_t>(e1 - e0));
    for (int64_t r = 0; r < rows; ++r) {
      widen_row(dtype, grad_out.at(r / tokens, r % tokens, e0), e1 - e0, wide.data());
      for (int64_t e = e0; e < e1; ++e) grad_table(positions[r], e) += wide[e - e0];
    }
  });
}

void binary_rows(int64_t bits, float zero, const std::vector<int64_t>& positions, Strided<float, 2> out) {
  for (int64_t i = 0; i < out.extent[0]; ++i)
    for (int64_t b = 0; b < bits; ++b)  // most significant bit first
      out(i, b) = ((positions[i] >> (bits - 1 - b)) & 1) ? 1.0f : zero;
}

}  // namespace posenc::cpu
