// python/src/attention.cc: the fused attention (posenc/attention.h) forward and backward. One
// Attention object holds the configuration (encoding and its parameters) that both passes need.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "arrays.h"
#include "posenc/attention.h"

namespace posenc::python {
namespace {

// The configuration plus the tables it views (kept alive by Python references to the arrays).
struct Attention {
  AttentionConfig config;
  std::optional<Rope> rope;
  std::string bias = "none";  // none, alibi, relative

  void set_rope(const std::optional<RopeConfig>& c) {
    rope.reset();
    if (c) rope.emplace(*c);
    config.rope = rope ? &*rope : nullptr;
  }
};

AttentionInputs inputs_of(const InArray& q, const InArray& k, const InArray& v, const OptInArray& q_positions,
                          const OptInArray& k_positions) {
  AttentionInputs in = qkv(in_view(q, "q"), in_view(k, "k"), in_view(v, "v"));
  in.q_positions = in_view(q_positions, "q_positions");
  in.k_positions = in_view(k_positions, "k_positions");
  return in;
}

}  // namespace

void bind_attention(nb::module_& m) {
  nb::class_<Attention>(m, "Attention")
      .def(
          "__init__",
          [](Attention* self, bool causal, int64_t window, std::optional<double> scale, std::optional<RopeConfig> rope,
             const std::string& bias, int64_t heads, const std::string& alibi_slopes, double alibi_bias_max, bool alibi_symmetric,
             const std::string& bucketing, int64_t num_buckets, int64_t max_distance, bool bidirectional, int64_t shaw_max_distance,
             int64_t head_dim) {
            new (self) Attention();
            self->config.causal = causal;
            self->config.window = window;
            self->config.scale = scale;
            self->set_rope(rope);
            self->bias = bias;
            if (bias == "alibi") {
              self->config.bias.kind = AttentionBias::Kind::alibi;
              self->config.bias.alibi = alibi_config(heads, alibi_slopes, alibi_bias_max, alibi_symmetric);
            } else if (bias == "relative") {
              self->config.bias.kind = AttentionBias::Kind::relative;
              self->config.bias.relative = relative_config(heads, bucketing, num_buckets, max_distance, bidirectional);
            } else if (bias != "none") {
              throw Error("attention: bias = '" + bias + "' is invalid: expected 'none', 'alibi' or 'relative'");
            }
            if (shaw_max_distance > 0) self->config.shaw = AttentionShaw{ShawConfig{shaw_max_distance, head_dim}, {}, {}};
          },
          nb::arg("causal"), nb::arg("window"), nb::arg("scale").none(), nb::arg("rope").none(), nb::arg("bias"), nb::arg("heads"),
          nb::arg("alibi_slopes"), nb::arg("alibi_bias_max"), nb::arg("alibi_symmetric"), nb::arg("bucketing"), nb::arg("num_buckets"),
          nb::arg("max_distance"), nb::arg("bidirectional"), nb::arg("shaw_max_distance"), nb::arg("head_dim"))
      .def(
          "forward",
          [](Attention& a, const InArray& q, const InArray& k, const InArray& v, const OutArray& out, const OptOutArray& lse,
             const OptInArray& q_positions, const OptInArray& k_positions, const OptInArray& relative_table, const OptInArray& shaw_a_k,
             const OptInArray& shaw_a_v) {
            AttentionConfig c = a.config;
            c.bias.relative_table = in_view(relative_table, "relative_table");
            if (c.shaw) c.shaw->a_k = in_view(shaw_a_k, "shaw_a_k"), c.shaw->a_v = in_view(shaw_a_v, "shaw_a_v");
            const AttentionInputs in = inputs_of(q, k, v, q_positions, k_positions);
            const TensorView o = out_view(out, "out"), l = out_view(lse, "lse");
            nb::gil_scoped_release release;
            attention_forward(c, in, o, l);
          },
          nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("lse").none(), nb::arg("q_positions").none(),
          nb::arg("k_positions").none(), nb::arg("relative_table").none(), nb::arg("shaw_a_k").none(), nb::arg("shaw_a_v").none())
      .def(
          "backward",
          [](Attention& a, const InArray& q, const InArray& k, const InArray& v, const InArray& out, const InArray& lse,
             const InArray& grad_out, const OutArray& grad_q, const OutArray& grad_k, const OutArray& grad_v, const OptInArray& q_positions,
             const OptInArray& k_positions, const OptInArray& relative_table, const OptInArray& shaw_a_k, const OptInArray& shaw_a_v,
             const OptOutArray& grad_relative_table, const OptOutArray& grad_shaw_a_k, const OptOutArray& grad_shaw_a_v) {
            AttentionConfig c = a.config;
            c.bias.relative_table = in_view(relative_table, "relative_table");
            if (c.shaw) c.shaw->a_k = in_view(shaw_a_k, "shaw_a_k"), c.shaw->a_v = in_view(shaw_a_v, "shaw_a_v");
            const AttentionInputs in = inputs_of(q, k, v, q_positions, k_positions);
            AttentionGrads g;
            g.q = out_view(grad_q, "grad_q");
            g.k = out_view(grad_k, "grad_k");
            g.v = out_view(grad_v, "grad_v");
            g.relative_table = out_view(grad_relative_table, "grad_relative_table");
            g.shaw_a_k = out_view(grad_shaw_a_k, "grad_shaw_a_k");
            g.shaw_a_v = out_view(grad_shaw_a_v, "grad_shaw_a_v");
            const ConstTensorView o = in_view(out, "out"), l = in_view(lse, "lse"), go = in_view(grad_out, "grad_out");
            nb::gil_scoped_release release;
            attention_backward(c, in, o, l, go, g);
          },
          nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("lse"), nb::arg("grad_out"), nb::arg("grad_q"),
          nb::arg("grad_k"), nb::arg("grad_v"), nb::arg("q_positions").none(), nb::arg("k_positions").none(),
          nb::arg("relative_table").none(), nb::arg("shaw_a_k").none(), nb::arg("shaw_a_v").none(),
          nb::arg("grad_relative_table").none(), nb::arg("grad_shaw_a_k").none(), nb::arg("grad_shaw_a_v").none());
}

}  // namespace posenc::python
