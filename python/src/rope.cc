// python/src/rope.cc: RoPE (posenc/rope.h): its configuration with HF's vocabulary, the HF
// config.json parser, frequencies, and the forward/backward rotations on numpy arrays.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "arrays.h"
#include "device_views.h"
#include "posenc/device.h"
#include "posenc/rope.h"

namespace posenc::python {
namespace {

RopeCall call_of(std::optional<int64_t> seq_len) {
  RopeCall call;
  call.seq_len = seq_len;
  return call;
}

}  // namespace

void bind_rope(nb::module_& m) {
  using T = RopeScalingType;
  nb::class_<RopeScaling>(m, "RopeScaling")
      .def(nb::init<>())
      .def_prop_rw(
          "rope_type", [](const RopeScaling& s) { return std::string(rope_scaling_name(s.type)); },
          [](RopeScaling& s, const std::string& v) {
            s.type = parse_enum("rope_type", v,
                                {T::none, T::linear, T::dynamic, T::yarn, T::longrope, T::llama3,
                                 T::proportional, T::qwen_dynamic},
                                rope_scaling_name);
          })
      .def_rw("factor", &RopeScaling::factor)
      .def_rw("original_max_position_embeddings", &RopeScaling::original_max_position_embeddings)
      .def_rw("attention_factor", &RopeScaling::attention_factor)
      .def_rw("beta_fast", &RopeScaling::beta_fast)
      .def_rw("beta_slow", &RopeScaling::beta_slow)
      .def_rw("mscale", &RopeScaling::mscale)
      .def_rw("mscale_all_dim", &RopeScaling::mscale_all_dim)
      .def_rw("truncate", &RopeScaling::truncate)
      .def_rw("short_factor", &RopeScaling::short_factor)
      .def_rw("long_factor", &RopeScaling::long_factor)
      .def_rw("low_freq_factor", &RopeScaling::low_freq_factor)
      .def_rw("high_freq_factor", &RopeScaling::high_freq_factor)
      .def_rw("proportion", &RopeScaling::proportion);

  using M = RopeMultimodal;
  nb::class_<RopeConfig>(m, "RopeConfig")
      .def(nb::init<>())
      .def_rw("head_dim", &RopeConfig::head_dim)
      .def_rw("rotary_dim", &RopeConfig::rotary_dim)
      .def_rw("base", &RopeConfig::base)
      .def_prop_rw(
          "layout", [](const RopeConfig& c) { return std::string(rope_layout_name(c.layout)); },
          [](RopeConfig& c, const std::string& v) {
            c.layout = parse_enum("layout", v, {RopeLayout::half, RopeLayout::interleaved}, rope_layout_name);
          })
      .def_rw("scaling", &RopeConfig::scaling)
      .def_rw("max_position_embeddings", &RopeConfig::max_position_embeddings)
      .def_rw("frequency_divisors", &RopeConfig::frequency_divisors)
      .def_prop_rw(
          "multimodal", [](const RopeConfig& c) { return std::string(rope_multimodal_name(c.multimodal)); },
          [](RopeConfig& c, const std::string& v) {
            c.multimodal =
                parse_enum("multimodal", v,
                           {M::none, M::mrope, M::mrope_interleaved, M::axial_2d, M::mrope_alternating_hw},
                           rope_multimodal_name);
          })
      .def_rw("mrope_section", &RopeConfig::mrope_section)
      .def_rw("reversed", &RopeConfig::reversed)
      .def_prop_ro("effective_rotary_dim", &RopeConfig::effective_rotary_dim)
      .def_prop_ro("num_position_streams", &RopeConfig::num_position_streams)
      .def("validate", [](const RopeConfig& c) { validate(c); });

  // (config, warnings): python/posenc/rope.py emits the warnings.
  m.def(
      "rope_config_from_hf_json",
      [](const std::string& text) {
        std::vector<std::string> warnings;
        RopeConfig c = rope_config_from_hf_json(text, &warnings);
        return std::make_tuple(c, warnings);
      },
      nb::arg("json_text"));

  nb::class_<Rope>(m, "Rope")
      .def(nb::init<RopeConfig>(), nb::arg("config"))
      .def_prop_ro("config", &Rope::config)
      .def(
          "frequencies",
          [](const Rope& r, int64_t seq_len) {
            const RopeFrequencies f = r.frequencies(seq_len);
            return std::make_tuple(f.inv_freq, std::vector<int64_t>(f.stream.begin(), f.stream.end()),
                                   f.attention_factor);
          },
          nb::arg("seq_len") = 0)
      .def(
          "forward",
          [](const Rope& r, const InArray& x, const OutArray& out, const InArray& positions,
             std::optional<int64_t> seq_len, const std::string& storage) {
            const DType s = storage_dtype(storage);
            const ConstTensorView xv = in_view(x, "x", s), p = in_view(positions, "positions");
            const TensorView o = out_view(out, "out", s);
            nb::gil_scoped_release release;
            r.forward(xv, o, p, call_of(seq_len));
          },
          nb::arg("x"), nb::arg("out"), nb::arg("positions"), nb::arg("seq_len") = nb::none(),
          nb::arg("storage") = "f32")
      .def(
          "forward_",
          [](const Rope& r, const OutArray& x, const InArray& positions, std::optional<int64_t> seq_len,
             const std::string& storage) {
            const TensorView xv = out_view(x, "x", storage_dtype(storage));
            const ConstTensorView p = in_view(positions, "positions");
            nb::gil_scoped_release release;
            r.forward(xv, p, call_of(seq_len));
          },
          nb::arg("x"), nb::arg("positions"), nb::arg("seq_len") = nb::none(), nb::arg("storage") = "f32")
      .def(
          "backward",
          [](const Rope& r, const InArray& grad_out, const OutArray& grad_in, const InArray& positions,
             std::optional<int64_t> seq_len, const std::string& storage) {
            const DType s = storage_dtype(storage);
            const ConstTensorView g = in_view(grad_out, "grad", s), p = in_view(positions, "positions");
            const TensorView gi = out_view(grad_in, "grad_in", s);
            nb::gil_scoped_release release;
            r.backward(g, gi, p, call_of(seq_len));
          },
          nb::arg("grad_out"), nb::arg("grad_in"), nb::arg("positions"), nb::arg("seq_len") = nb::none(),
          nb::arg("storage") = "f32")
      .def(
          "cos_sin",
          [](const Rope& r, const InArray& positions, const OutArray& cos, const OutArray& sin,
             std::optional<int64_t> seq_len) {
            r.cos_sin(in_view(positions, "positions"), out_view(cos, "cos"), out_view(sin, "sin"),
                      call_of(seq_len));
          },
          nb::arg("positions"), nb::arg("cos"), nb::arg("sin"), nb::arg("seq_len") = nb::none())
      // CUDA tensors (posenc.torch): x -> out, forward or backward, queued on `stream`.
      .def(
          "apply_cuda",
          [](const Rope& r, uintptr_t x, uintptr_t out, const std::vector<int64_t>& shape,
             const std::vector<int64_t>& x_strides, const std::vector<int64_t>& out_strides,
             const std::string& storage, uintptr_t positions, const std::vector<int64_t>& positions_shape,
             const std::vector<int64_t>& positions_strides, std::optional<int64_t> seq_len, bool backward,
             uintptr_t stream) {
            const DType s = storage_dtype(storage);
            const TensorView xv = cuda_view(x, shape, x_strides, s, "x");
            const TensorView ov = cuda_view(out, shape, out_strides, s, "out");
            const TensorView pv =
                cuda_view(positions, positions_shape, positions_strides, DType::i64, "positions");
            nb::gil_scoped_release release;
            const CudaStreamGuard guard(reinterpret_cast<void*>(stream));
            if (backward)
              r.backward(xv, ov, pv, call_of(seq_len));
            else
              r.forward(xv, ov, pv, call_of(seq_len));
          },
          nb::arg("x"), nb::arg("out"), nb::arg("shape"), nb::arg("x_strides"), nb::arg("out_strides"),
          nb::arg("storage"), nb::arg("positions"), nb::arg("positions_shape"), nb::arg("positions_strides"),
          nb::arg("seq_len"), nb::arg("backward"), nb::arg("stream"));
}

}  // namespace posenc::python
