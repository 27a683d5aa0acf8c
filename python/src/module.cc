// python/src/module.cc: the extension module posenc._core. Thin: each function takes numpy arrays
// already shaped and typed by the Python layer and calls the library; posenc::Error becomes
// posenc.Error, a subclass of ValueError, with the library's message (argument and value named).
#include "arrays.h"

NB_MODULE(_core, m) {
  namespace nb = nanobind;
  m.doc() =
      "posenc's C++ library (use the functions of the posenc package, which check and convert arguments)";
  nb::exception<posenc::Error>(m, "Error", PyExc_ValueError);
  // Objects still referenced at interpreter exit (e.g. by a torch autograd graph that holds an
  // Attention in its context) are not leaks of ours; nanobind would print a report for them.
  nb::set_leak_warnings(false);
  posenc::python::bind_absolute(m);
  posenc::python::bind_rope(m);
  posenc::python::bind_bias(m);
  posenc::python::bind_attention(m);
  posenc::python::bind_model(m);
  posenc::python::bind_kv_cache(m);
  posenc::python::bind_mrope(m);
}
