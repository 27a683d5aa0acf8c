// python/src/bias.cc: the logit biases (posenc/bias.h): T5 buckets, learned relative bias tables
// (T5 or clipped) with their backward, ALiBi slopes and bias blocks.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.h"
#include "posenc/bias.h"

namespace posenc::python {

RelativeBiasConfig relative_config(int64_t heads, const std::string& bucketing, int64_t num_buckets,
                                   int64_t max_distance, bool bidirectional) {
  RelativeBiasConfig c;
  if (bucketing == "t5")
    c = RelativeBiasConfig::t5(heads, num_buckets, max_distance, bidirectional);
  else if (bucketing == "clipped")
    c = RelativeBiasConfig::clipped(heads, max_distance);
  else
    throw Error("relative bias: bucketing = '" + bucketing + "' is invalid: expected 't5' or 'clipped'");
  validate(c);
  return c;
}

AlibiConfig alibi_config(int64_t heads, const std::string& slopes, double alibi_bias_max, bool symmetric) {
  AlibiConfig c;
  c.heads = heads;
  if (slopes == "bloom")
    c.slopes = AlibiSlopes::bloom;
  else if (slopes == "mpt")
    c.slopes = AlibiSlopes::mpt;
  else
    throw Error("alibi: slopes = '" + slopes + "' is invalid: expected 'bloom' or 'mpt'");
  c.alibi_bias_max = alibi_bias_max;
  c.symmetric = symmetric;
  validate(c);
  return c;
}

void bind_bias(nb::module_& m) {
  m.def("t5_buckets", [](const InArray& relative_positions, const OutArray& out, bool bidirectional,
                         int64_t num_buckets, int64_t max_distance) {
    relative_config(1, "t5", num_buckets, max_distance, bidirectional);  // validates the parameters
    const ConstTensorView d = in_view(relative_positions, "relative_positions");
    const TensorView o = out_view(out, "out");
    if (d.dtype != DType::i64 || o.dtype != DType::i64 || !d.is_contiguous() || !o.is_contiguous() ||
        d.numel() != o.numel())
      throw Error("t5_buckets: relative_positions and out must be contiguous int64 arrays of one size");
    for (int64_t i = 0; i < d.numel(); ++i)
      o.ptr<int64_t>()[i] = t5_bucket(d.ptr<int64_t>()[i], bidirectional, num_buckets, max_distance);
  });
  m.def("relative_bias", [](int64_t heads, const std::string& bucketing, int64_t num_buckets,
                            int64_t max_distance, bool bidirectional, const InArray& table,
                            const InArray& q_positions, const InArray& k_positions, const OutArray& out) {
    relative_bias(relative_config(heads, bucketing, num_buckets, max_distance, bidirectional),
                  in_view(table, "table"), in_view(q_positions, "q_positions"),
                  in_view(k_positions, "k_positions"), out_view(out, "out"));
  });
  m.def("relative_bias_backward",
        [](int64_t heads, const std::string& bucketing, int64_t num_buckets, int64_t max_distance,
           bool bidirectional, const InArray& grad_out, const InArray& q_positions,
           const InArray& k_positions, const OutArray& grad_table) {
          relative_bias_backward(relative_config(heads, bucketing, num_buckets, max_distance, bidirectional),
                                 in_view(grad_out, "grad_out"), in_view(q_positions, "q_positions"),
                                 in_view(k_positions, "k_positions"), out_view(grad_table, "grad_table"));
        });
  m.def("relative_bias_rows", [](int64_t heads, const std::string& bucketing, int64_t num_buckets,
                                 int64_t max_distance, bool bidirectional) {
    return relative_config(heads, bucketing, num_buckets, max_distance, bidirectional).num_rows();
  });
  m.def("alibi_slopes", [](int64_t heads, const std::string& slopes, double alibi_bias_max) {
    return alibi_slopes(alibi_config(heads, slopes, alibi_bias_max, false));
  });
  m.def("alibi_bias", [](int64_t heads, const std::string& slopes, double alibi_bias_max, bool symmetric,
                         const InArray& q_positions, const InArray& k_positions, const OutArray& out) {
    alibi_bias(alibi_config(heads, slopes, alibi_bias_max, symmetric), in_view(q_positions, "q_positions"),
               in_view(k_positions, "k_positions"), out_view(out, "out"));
  });
}

}  // namespace posenc::python
