// python/src/attention.cc: the fused attention (posenc/attention.h) forward and backward. One
// Attention object holds the configuration (encoding and its parameters) that both passes need;
// the encoding's tables and their gradients come per call in dicts keyed by the Python names
// (relative_table, shaw_a_k, shaw_a_v, transformer_xl_u, transformer_xl_v, transformer_xl_w_r,
// sinks).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "attention.h"
#include "device_views.h"
#include "posenc/device.h"

namespace posenc::python {

AttentionConfig with_tables(const Attention& a, const nb::dict& tables) {
  AttentionConfig c = a.config;
  c.bias.relative_table = in_view(entry<InArray>(tables, "relative_table"), "relative_table");
  c.sinks = in_view(entry<InArray>(tables, "sinks"), "sinks");
  if (c.shaw) {
    c.shaw->a_k = in_view(entry<InArray>(tables, "shaw_a_k"), "shaw_a_k");
    c.shaw->a_v = in_view(entry<InArray>(tables, "shaw_a_v"), "shaw_a_v");
  }
  if (c.transformer_xl) {
    c.transformer_xl->u = in_view(entry<InArray>(tables, "transformer_xl_u"), "transformer_xl_u");
    c.transformer_xl->v = in_view(entry<InArray>(tables, "transformer_xl_v"), "transformer_xl_v");
    c.transformer_xl->w_r = in_view(entry<InArray>(tables, "transformer_xl_w_r"), "transformer_xl_w_r");
  }
  return c;
}

namespace {

// q, k, v: fp32, or the uint16 bits of 16-bit storage ("bf16" / "f16" in storage: q, then k and v).
AttentionInputs inputs_of(const InArray& q, const InArray& k, const InArray& v, const nb::dict& positions,
                          const std::string& q_storage = "f32", const std::string& kv_storage = "f32") {
  const DType kv = storage_dtype(kv_storage);
  AttentionInputs in =
      qkv(in_view(q, "q", storage_dtype(q_storage)), in_view(k, "k", kv), in_view(v, "v", kv));
  in.q_positions = in_view(entry<InArray>(positions, "q_positions"), "q_positions");
  in.k_positions = in_view(entry<InArray>(positions, "k_positions"), "k_positions");
  in.cu_seqlens_q = in_view(entry<InArray>(positions, "cu_seqlens_q"), "cu_seqlens_q");
  in.cu_seqlens_k = in_view(entry<InArray>(positions, "cu_seqlens_k"), "cu_seqlens_k");
  return in;
}

// A CUDA tensor of the dict by name, or an empty view.
TensorView optional_cuda_view(const nb::dict& d, const char* name) {
  TensorView view;
  if (d.contains(name)) view = cuda_view(nb::cast<CudaSpec>(d[name]), name);
  return view;
}

// The config and inputs of a call on CUDA tensors: positions and tables (relative_table, sinks, shaw_a_k,
// shaw_a_v, transformer_xl_u, transformer_xl_v, transformer_xl_w_r) by name.
struct CudaCall {
  AttentionConfig config;
  AttentionInputs in;
};
CudaCall cuda_call(const Attention& a, const CudaSpec& q, const CudaSpec& k, const CudaSpec& v,
                   const nb::dict& positions, const nb::dict& tables) {
  CudaCall call{a.config, qkv(cuda_view(q, "q"), cuda_view(k, "k"), cuda_view(v, "v"))};
  call.config.bias.relative_table = optional_cuda_view(tables, "relative_table");
  call.config.sinks = optional_cuda_view(tables, "sinks");
  if (call.config.shaw) {
    call.config.shaw->a_k = optional_cuda_view(tables, "shaw_a_k");
    call.config.shaw->a_v = optional_cuda_view(tables, "shaw_a_v");
  }
  if (call.config.transformer_xl) {
    call.config.transformer_xl->u = optional_cuda_view(tables, "transformer_xl_u");
    call.config.transformer_xl->v = optional_cuda_view(tables, "transformer_xl_v");
    call.config.transformer_xl->w_r = optional_cuda_view(tables, "transformer_xl_w_r");
  }
  call.in.q_positions = optional_cuda_view(positions, "q_positions");
  call.in.k_positions = optional_cuda_view(positions, "k_positions");
  call.in.cu_seqlens_q = optional_cuda_view(positions, "cu_seqlens_q");
  call.in.cu_seqlens_k = optional_cuda_view(positions, "cu_seqlens_k");
  return call;
}

}  // namespace

void bind_attention(nb::module_& m) {
  nb::class_<Attention>(m, "Attention")
      .def(
          "__init__",
          [](Attention* self, bool causal, int64_t window, std::optional<double> scale,
             std::optional<RopeConfig> rope, const std::string& bias, int64_t heads,
             const std::string& alibi_slopes, double alibi_bias_max, bool alibi_symmetric,
             const std::string& bucketing, int64_t num_buckets, int64_t max_distance, bool bidirectional,
             int64_t shaw_max_distance, int64_t head_dim, int64_t transformer_xl_d_model,
             double transformer_xl_base, int64_t chunk, double softcap, int64_t rope_offset,
             const std::string& temperature_rule, double temperature_scale, double temperature_floor_scale,
             bool round_probabilities, bool rotate_values) {
            new (self) Attention();
            AttentionConfig& c = self->config;
            c.round_probabilities = round_probabilities;
            c.rotate_values = rotate_values;
            c.causal = causal;
            c.window = window;
            c.chunk = chunk;
            c.softcap = softcap;
            c.scale = scale;
            if (rope) self->rope.emplace(*rope);
            c.rope = self->rope ? &*self->rope : nullptr;
            c.rope_offset = rope_offset;
            using K = QueryTemperature::Kind;
            c.query_temperature.kind =
                parse_enum("query_temperature rule", temperature_rule,
                           {K::none, K::llama4, K::ministral3, K::qwen_logn}, query_temperature_name);
            if (c.query_temperature.kind != K::none) {
              c.query_temperature.scale = temperature_scale;
              c.query_temperature.floor_scale = temperature_floor_scale;
            }
            if (bias == "alibi") {
              c.bias.kind = AttentionBias::Kind::alibi;
              c.bias.alibi = alibi_config(heads, alibi_slopes, alibi_bias_max, alibi_symmetric);
            } else if (bias == "relative") {
              c.bias.kind = AttentionBias::Kind::relative;
              c.bias.relative = relative_config(heads, bucketing, num_buckets, max_distance, bidirectional);
            } else if (bias != "none") {
              throw Error("attention: bias = '" + bias +
                          "' is invalid: expected 'none', 'alibi' or 'relative'");
            }
            if (shaw_max_distance > 0)
              c.shaw = AttentionShaw{ShawConfig{shaw_max_distance, head_dim}, {}, {}};
            if (transformer_xl_d_model > 0)
              c.transformer_xl = AttentionTransformerXL{
                  TransformerXLConfig{transformer_xl_d_model, heads, head_dim, transformer_xl_base},
                  {},
                  {},
                  {}};
          },
          nb::arg("causal"), nb::arg("window"), nb::arg("scale").none(), nb::arg("rope").none(),
          nb::arg("bias"), nb::arg("heads"), nb::arg("alibi_slopes"), nb::arg("alibi_bias_max"),
          nb::arg("alibi_symmetric"), nb::arg("bucketing"), nb::arg("num_buckets"), nb::arg("max_distance"),
          nb::arg("bidirectional"), nb::arg("shaw_max_distance"), nb::arg("head_dim"),
          nb::arg("transformer_xl_d_model"), nb::arg("transformer_xl_base"), nb::arg("chunk") = 0,
          nb::arg("softcap") = 0.0, nb::arg("rope_offset") = 0, nb::arg("temperature_rule") = "none",
          nb::arg("temperature_scale") = 0.0, nb::arg("temperature_floor_scale") = 0.0,
          nb::arg("round_probabilities") = false, nb::arg("rotate_values") = false)
      .def(
          "forward",
          [](const Attention& a, const InArray& q, const InArray& k, const InArray& v, const OutArray& out,
             const OutArray& lse, const nb::dict& positions, const nb::dict& tables,
             const std::string& q_storage, const std::string& kv_storage) {
            const AttentionConfig c = with_tables(a, tables);
            const AttentionInputs in = inputs_of(q, k, v, positions, q_storage, kv_storage);
            const TensorView o = out_view(out, "out", storage_dtype(q_storage)), l = out_view(lse, "lse");
            nb::gil_scoped_release release;
            attention_forward(c, in, o, l);
          },
          nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("lse"), nb::arg("positions"),
          nb::arg("tables"), nb::arg("q_storage") = "f32", nb::arg("kv_storage") = "f32")
      .def(
          "forward_cuda",
          // CUDA tensors as (pointer, shape, strides, dtype); positions and tables by name, queued on
          // `stream`.
          [](const Attention& a, const CudaSpec& q, const CudaSpec& k, const CudaSpec& v, const CudaSpec& out,
             const CudaSpec& lse, const nb::dict& positions, const nb::dict& tables, uintptr_t stream) {
            const CudaCall call = cuda_call(a, q, k, v, positions, tables);
            const TensorView o = cuda_view(out, "out"), l = cuda_view(lse, "lse");
            nb::gil_scoped_release release;
            const CudaStreamGuard guard(reinterpret_cast<void*>(stream));
            attention_forward(call.config, call.in, o, l);
          },
          nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("lse"), nb::arg("positions"),
          nb::arg("tables"), nb::arg("stream"))
      .def(
          "backward_cuda",
          // The gradients (CUDA tensors, added into, or written with accumulate false) of the forward on the
          // same tensors: grads holds q, k, v and the tables' (relative_table, Shaw's, Transformer-XL's,
          // sinks) by name.
          [](const Attention& a, const CudaSpec& q, const CudaSpec& k, const CudaSpec& v, const CudaSpec& out,
             const CudaSpec& lse, const CudaSpec& grad_out, const nb::dict& positions, const nb::dict& tables,
             const nb::dict& grads, uintptr_t stream, bool accumulate) {
            const CudaCall call = cuda_call(a, q, k, v, positions, tables);
            AttentionGrads g;
            g.accumulate = accumulate;
            g.q = optional_cuda_view(grads, "q"), g.k = optional_cuda_view(grads, "k");
            g.v = optional_cuda_view(grads, "v");
            g.relative_table = optional_cuda_view(grads, "relative_table");
            g.sinks = optional_cuda_view(grads, "sinks");
            g.shaw_a_k = optional_cuda_view(grads, "shaw_a_k"),
            g.shaw_a_v = optional_cuda_view(grads, "shaw_a_v");
            g.transformer_xl_u = optional_cuda_view(grads, "transformer_xl_u");
            g.transformer_xl_v = optional_cuda_view(grads, "transformer_xl_v");
            g.transformer_xl_w_r = optional_cuda_view(grads, "transformer_xl_w_r");
            const ConstTensorView o = cuda_view(out, "out"), l = cuda_view(lse, "lse"),
                                  go = cuda_view(grad_out, "grad_out");
            nb::gil_scoped_release release;
            const CudaStreamGuard guard(reinterpret_cast<void*>(stream));
            attention_backward(call.config, call.in, o, l, go, g);
          },
          nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("lse"), nb::arg("grad_out"),
          nb::arg("positions"), nb::arg("tables"), nb::arg("grads"), nb::arg("stream"),
          nb::arg("accumulate") = true)
      .def(
          "backward",
          [](const Attention& a, const InArray& q, const InArray& k, const InArray& v, const InArray& out,
             const InArray& lse, const InArray& grad_out, const nb::dict& positions, const nb::dict& tables,
             const nb::dict& grads, const std::string& q_storage, const std::string& kv_storage,
             const std::string& out_storage, const std::string& grad_out_storage) {
            const AttentionConfig c = with_tables(a, tables);
            const AttentionInputs in = inputs_of(q, k, v, positions, q_storage, kv_storage);
            // grads of q, k and v in their inputs' storage; the tables' in fp32.
            AttentionGrads g;
            g.q = out_view(*entry<OutArray>(grads, "q"), "grad_q", storage_dtype(q_storage));
            g.k = out_view(*entry<OutArray>(grads, "k"), "grad_k", storage_dtype(kv_storage));
            g.v = out_view(*entry<OutArray>(grads, "v"), "grad_v", storage_dtype(kv_storage));
            g.relative_table = out_view(entry<OutArray>(grads, "relative_table"), "grad_relative_table");
            g.shaw_a_k = out_view(entry<OutArray>(grads, "shaw_a_k"), "grad_shaw_a_k");
            g.shaw_a_v = out_view(entry<OutArray>(grads, "shaw_a_v"), "grad_shaw_a_v");
            g.transformer_xl_u = out_view(entry<OutArray>(grads, "transformer_xl_u"), "grad_xl_u");
            g.transformer_xl_v = out_view(entry<OutArray>(grads, "transformer_xl_v"), "grad_xl_v");
            g.transformer_xl_w_r = out_view(entry<OutArray>(grads, "transformer_xl_w_r"), "grad_xl_w_r");
            g.sinks = out_view(entry<OutArray>(grads, "sinks"), "grad_sinks");
            const ConstTensorView o = in_view(out, "out", storage_dtype(out_storage)),
                                  l = in_view(lse, "lse"),
                                  go = in_view(grad_out, "grad_out", storage_dtype(grad_out_storage));
            nb::gil_scoped_release release;
            attention_backward(c, in, o, l, go, g);
          },
          nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("lse"), nb::arg("grad_out"),
          nb::arg("positions"), nb::arg("tables"), nb::arg("grads"), nb::arg("q_storage") = "f32",
          nb::arg("kv_storage") = "f32", nb::arg("out_storage") = "f32", nb::arg("grad_out_storage") = "f32");
}

}  // namespace posenc::python
