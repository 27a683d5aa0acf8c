// src/cpu/absolute.cc: CPU loops of the absolute encodings; see absolute.h.
#include "src/cpu/absolute.h"

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

void binary_rows(int64_t bits, float zero, const std::vector<int64_t>& positions, Strided<float, 2> out) {
  for (int64_t i = 0; i < out.extent[0]; ++i)
    for (int64_t b = 0; b < bits; ++b)  // most significant bit first
      out(i, b) = ((positions[i] >> (bits - 1 - b)) & 1) ? 1.0f : zero;
}

}  // namespace posenc::cpu
