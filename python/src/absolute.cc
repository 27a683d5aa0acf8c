// python/src/absolute.cc: sinusoidal, binary and learned absolute encodings (posenc/absolute.h).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.h"
#include "posenc/absolute.h"

namespace posenc::python {
namespace {

SinusoidalConfig sinusoidal_config(int64_t dim, double base, const std::string& layout,
                                   const std::string& frequencies, int64_t offset) {
  SinusoidalConfig c;
  c.dim = dim;
  c.base = base;
  if (layout == "interleaved")
    c.layout = SinusoidalLayout::interleaved;
  else if (layout == "split")
    c.layout = SinusoidalLayout::split;
  else
    throw Error("sinusoidal: layout = '" + layout + "' is invalid: expected 'interleaved' or 'split'");
  if (frequencies == "model_dim")
    c.frequencies = SinusoidalFrequencies::model_dim;
  else if (frequencies == "half_dim_minus_one")
    c.frequencies = SinusoidalFrequencies::half_dim_minus_one;
  else
    throw Error("sinusoidal: frequencies = '" + frequencies +
                "' is invalid: expected 'model_dim' or 'half_dim_minus_one'");
  c.position_offset = offset;
  validate(c);
  return c;
}

}  // namespace

void bind_absolute(nb::module_& m) {
  m.def("sinusoidal_frequencies",
        [](int64_t dim, double base, const std::string& layout, const std::string& frequencies) {
          return sinusoidal_frequencies(sinusoidal_config(dim, base, layout, frequencies, 0));
        });
  // out (and grad_out below): fp32, or the uint16 bits of bf16 / fp16 storage named by `storage`.
  m.def(
      "sinusoidal_table",
      [](const InArray& positions, const OutArray& out, int64_t dim, double base, const std::string& layout,
         const std::string& frequencies, int64_t offset, const std::string& storage) {
        sinusoidal_table(sinusoidal_config(dim, base, layout, frequencies, offset),
                         in_view(positions, "positions"), out_view(out, "out", storage_dtype(storage)));
      },
      nb::arg("positions"), nb::arg("out"), nb::arg("dim"), nb::arg("base"), nb::arg("layout"),
      nb::arg("frequencies"), nb::arg("offset"), nb::arg("storage") = "f32");
  m.def("binary_table", [](const InArray& positions, const OutArray& out, int64_t bits, bool signed_values) {
    binary_table(BinaryConfig{bits, signed_values}, in_view(positions, "positions"), out_view(out, "out"));
  });
  m.def(
      "learned_lookup",
      [](const InArray& table, const InArray& positions, const OutArray& out, const std::string& storage) {
        learned_lookup(in_view(table, "table"), in_view(positions, "positions"),
                       out_view(out, "out", storage_dtype(storage)));
      },
      nb::arg("table"), nb::arg("positions"), nb::arg("out"), nb::arg("storage") = "f32");
  m.def(
      "learned_backward",
      [](const InArray& grad_out, const InArray& positions, const OutArray& grad_table,
         const std::string& storage) {
        learned_backward(in_view(grad_out, "grad_out", storage_dtype(storage)),
                         in_view(positions, "positions"), out_view(grad_table, "grad_table"));
      },
      nb::arg("grad_out"), nb::arg("positions"), nb::arg("grad_table"), nb::arg("storage") = "f32");
}

}  // namespace posenc::python
