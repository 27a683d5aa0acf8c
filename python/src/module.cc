// python/src/module.cc: the extension module posenc._core. Thin: each function takes numpy arrays
// already shaped and typed by the Python layer and calls the library; posenc::Error becomes
// posenc.Error, a subclass of ValueError, with the library's message (argument and value named).
#include "arrays.h"
#include "posenc/attention.h"
#include "posenc/device.h"
#include "posenc/threads.h"

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
  posenc::python::bind_cuda_ops(m);
  m.def("set_num_threads", &posenc::set_num_threads, nb::arg("n"),
        "Threads of posenc's CPU kernels, the caller included (0: POSENC_NUM_THREADS, else "
        "OMP_NUM_THREADS, else the CPUs this process may use). Results do not depend on it.");
  m.def("num_threads", &posenc::num_threads, "Threads posenc's CPU kernels use (set_num_threads).");
  m.def("set_bf16_dot_products", &posenc::set_bf16_dot_products, nb::arg("enabled"),
        "Whether the attention forward may sum q.k of bf16 keys with the CPU's bf16 dot product "
        "(vdpbf16ps) where the queries are bf16 values: exact products, fp32 sums in another order. "
        "Default on (unless POSENC_BF16_DOT=0); off, 16-bit attention is bit for bit the float32 "
        "computation of its widened values.");
  m.def("cuda_built", &posenc::cuda_built, "Whether this build has posenc's CUDA backend.");
  m.def("cuda_device_count", &posenc::cuda_device_count,
        "CUDA devices posenc's backend sees (0 without the backend, a driver or a GPU).");
  m.def("bf16_dot_products", &posenc::bf16_dot_products,
        "Whether the bf16 dot-product path runs: enabled and the CPU has AVX512_BF16.");
}
