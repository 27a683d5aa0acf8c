// python/src/cuda_ops.cc: the CUDA registrations of posenc.torch's table ops (relative biases, learned
// rows and their gradients): views of CUDA tensors given as (data pointer, shape, strides, dtype), the call
// queued on the caller's stream. RoPE's is Rope.apply_cuda (python/src/rope.cc).
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "arrays.h"
#include "device_views.h"
#include "posenc/absolute.h"
#include "posenc/bias.h"
#include "posenc/device.h"

namespace posenc::python {
namespace {

using Spec = CudaSpec;

TensorView view_of(const Spec& s, const char* name) { return cuda_view(s, name); }

RelativeBiasConfig bias_config(int64_t heads, const std::string& bucketing, bool bidirectional,
                               int64_t num_buckets, int64_t max_distance) {
  return bucketing == "t5" ? RelativeBiasConfig::t5(heads, num_buckets, max_distance, bidirectional)
                           : RelativeBiasConfig::clipped(heads, max_distance);
}

}  // namespace

void bind_cuda_ops(nb::module_& m) {
  m.def("relative_bias_cuda", [](const Spec& table, const Spec& q, const Spec& k, const Spec& out,
                                 const std::string& bucketing, bool bidirectional, int64_t num_buckets,
                                 int64_t max_distance, uintptr_t stream) {
    const TensorView t = view_of(table, "table"), qv = view_of(q, "q_positions"),
                     kv = view_of(k, "k_positions");
    const TensorView o = view_of(out, "out");
    const RelativeBiasConfig c = bias_config(t.shape[1], bucketing, bidirectional, num_buckets, max_distance);
    nb::gil_scoped_release release;
    const CudaStreamGuard guard(reinterpret_cast<void*>(stream));
    relative_bias(c, t, qv, kv, o);
  });
  m.def("relative_bias_backward_cuda", [](const Spec& grad, const Spec& q, const Spec& k,
                                          const Spec& grad_table, const std::string& bucketing,
                                          bool bidirectional, int64_t num_buckets, int64_t max_distance,
                                          uintptr_t stream) {
    const TensorView g = view_of(grad, "grad"), qv = view_of(q, "q_positions"),
                     kv = view_of(k, "k_positions");
    const TensorView gt = view_of(grad_table, "grad_table");
    const RelativeBiasConfig c = bias_config(g.shape[0], bucketing, bidirectional, num_buckets, max_distance);
    nb::gil_scoped_release release;
    const CudaStreamGuard guard(reinterpret_cast<void*>(stream));
    relative_bias_backward(c, g, qv, kv, gt);
  });
  m.def("learned_lookup_cuda",
        [](const Spec& table, const Spec& positions, const Spec& out, uintptr_t stream) {
          const TensorView t = view_of(table, "table"), p = view_of(positions, "positions"),
                           o = view_of(out, "out");
          nb::gil_scoped_release release;
          const CudaStreamGuard guard(reinterpret_cast<void*>(stream));
          learned_lookup(t, p, o);
        });
  m.def("learned_backward_cuda",
        [](const Spec& grad, const Spec& positions, const Spec& grad_table, uintptr_t stream) {
          const TensorView g = view_of(grad, "grad"), p = view_of(positions, "positions");
          const TensorView gt = view_of(grad_table, "grad_table");
          nb::gil_scoped_release release;
          const CudaStreamGuard guard(reinterpret_cast<void*>(stream));
          learned_backward(g, p, gt);
        });
}

}  // namespace posenc::python
