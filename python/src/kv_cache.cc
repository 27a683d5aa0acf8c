// python/src/kv_cache.cc: posenc::KVCache (posenc/kv_cache.h) for the Python layer
// (python/posenc/kv_cache.py): append, attend with any Attention configuration (its rope is the
// cache's), the context shift and the re-rotation, and copies of the stored keys, values, positions.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>

#include <algorithm>
#include <memory>
#include <string>

#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "attention.h"
#include "device_views.h"
#include "posenc/device.h"
#include "posenc/kv_cache.h"

namespace posenc::python {
namespace {

// The cache keeps a pointer to its rope: both live here, the rope first, at a stable address.
struct Cache {
  std::unique_ptr<Rope> rope;
  std::unique_ptr<KVCache> cache;
};

// dst (same shape and element type as src, any strides) = src, element by element (rank <= 4).
template <typename T>
void copy_into(const ConstTensorView& src, const TensorView& dst, const char* name) {
  if (dst.rank != src.rank ||
      !std::equal(src.shape.begin(), src.shape.begin() + src.rank, dst.shape.begin()) ||
      dst.dtype != src.dtype)
    throw Error(std::string("kv_cache: ") + name + " has shape " + dst.shape_string() + ", expected " +
                src.shape_string());
  int64_t n[4] = {1, 1, 1, 1}, ss[4] = {0, 0, 0, 0}, ds[4] = {0, 0, 0, 0};
  for (int i = 0; i < src.rank; ++i) {
    n[4 - src.rank + i] = src.shape[i], ss[4 - src.rank + i] = src.strides[i];
    ds[4 - src.rank + i] = dst.strides[i];
  }
  const T* s = src.ptr<T>();
  T* d = dst.ptr<T>();
  for (int64_t a = 0; a < n[0]; ++a)
    for (int64_t b = 0; b < n[1]; ++b)
      for (int64_t e = 0; e < n[2]; ++e)
        for (int64_t f = 0; f < n[3]; ++f)
          d[a * ds[0] + b * ds[1] + e * ds[2] + f * ds[3]] = s[a * ss[0] + b * ss[1] + e * ss[2] + f * ss[3]];
}

}  // namespace

void bind_kv_cache(nb::module_& m) {
  nb::class_<Cache>(m, "KVCache")
      .def(
          "__init__",
          [](Cache* self, int64_t batch, int64_t kv_heads, int64_t head_dim, std::optional<RopeConfig> rope,
             const std::string& storage, const std::string& device) {
            if (device != "cpu" && device != "cuda")
              throw Error("KVCache: device = '" + device + "' is invalid: expected cpu or cuda");
            new (self) Cache();
            if (rope) self->rope = std::make_unique<Rope>(*rope);
            self->cache =
                std::make_unique<KVCache>(batch, kv_heads, head_dim, self->rope.get(), storage_dtype(storage),
                                          device == "cuda" ? Device::cuda : Device::cpu);
          },
          nb::arg("batch"), nb::arg("kv_heads"), nb::arg("head_dim"), nb::arg("rope").none(),
          nb::arg("storage"), nb::arg("device") = "cpu")
      // A cache on a CUDA device: CUDA tensors as (pointer, shape, strides, dtype), queued on `stream`.
      .def(
          "append_cuda",
          [](Cache& c, const CudaSpec& k, const CudaSpec& v, const std::optional<CudaSpec>& positions,
             uintptr_t stream) {
            const ConstTensorView kv = cuda_view(k, "k"), vv = cuda_view(v, "v");
            ConstTensorView p;
            if (positions) p = cuda_view(*positions, "positions");
            nb::gil_scoped_release release;
            const CudaStreamGuard guard(reinterpret_cast<void*>(stream));
            c.cache->append(kv, vv, p);
          },
          nb::arg("k"), nb::arg("v"), nb::arg("positions").none(), nb::arg("stream"))
      .def(
          "attend_cuda",
          [](const Cache& c, const Attention& a, const nb::dict& tables, const CudaSpec& q,
             const CudaSpec& out, const std::optional<CudaSpec>& q_positions, const CudaSpec& lse,
             uintptr_t stream) {
            AttentionConfig config = a.config;
            config.rope = c.rope.get();
            if (tables.contains("relative_table"))
              config.bias.relative_table =
                  cuda_view(nb::cast<CudaSpec>(tables["relative_table"]), "relative_table");
            if (tables.contains("sinks"))
              config.sinks = cuda_view(nb::cast<CudaSpec>(tables["sinks"]), "sinks");
            const ConstTensorView qv = cuda_view(q, "q");
            ConstTensorView qp;
            if (q_positions) qp = cuda_view(*q_positions, "q_positions");
            const TensorView o = cuda_view(out, "out"), l = cuda_view(lse, "lse");
            nb::gil_scoped_release release;
            const CudaStreamGuard guard(reinterpret_cast<void*>(stream));
            c.cache->attend(config, qv, o, qp, l);
          },
          nb::arg("attention"), nb::arg("tables"), nb::arg("q"), nb::arg("out"),
          nb::arg("q_positions").none(), nb::arg("lse"), nb::arg("stream"))
      // k, v: fp32, or the uint16 bits of the cache's 16-bit storage (storage names which).
      .def(
          "append",
          [](Cache& c, const InArray& k, const InArray& v, const OptInArray& positions,
             const std::string& storage) {
            const DType dtype = storage_dtype(storage);
            const ConstTensorView kv = in_view(k, "k", dtype), vv = in_view(v, "v", dtype),
                                  p = in_view(positions, "positions");
            nb::gil_scoped_release release;
            c.cache->append(kv, vv, p);
          },
          nb::arg("k"), nb::arg("v"), nb::arg("positions").none(), nb::arg("storage"))
      .def(
          "attend",
          [](const Cache& c, const Attention& a, const nb::dict& tables, const InArray& q,
             const OutArray& out, const OptInArray& q_positions, const OutArray& lse,
             const std::string& q_storage) {
            AttentionConfig config = with_tables(a, tables);
            config.rope = c.rope.get();
            const DType dtype = storage_dtype(q_storage);
            const ConstTensorView qv = in_view(q, "q", dtype), qp = in_view(q_positions, "q_positions");
            const TensorView o = out_view(out, "out", dtype), l = out_view(lse, "lse");
            nb::gil_scoped_release release;
            c.cache->attend(config, qv, o, qp, l);
          },
          nb::arg("attention"), nb::arg("tables"), nb::arg("q"), nb::arg("out"),
          nb::arg("q_positions").none(), nb::arg("lse"), nb::arg("q_storage"))
      // stream: a cache on a CUDA device queues on it (0: the CPU cache, or CUDA's default stream).
      .def(
          "shift_positions",
          [](Cache& c, int64_t delta, uintptr_t stream) {
            nb::gil_scoped_release release;
            const CudaStreamGuard guard(reinterpret_cast<void*>(stream));
            c.cache->shift_positions(delta);
          },
          nb::arg("delta"), nb::arg("stream") = 0)
      .def(
          "erase_front",
          [](Cache& c, int64_t n, uintptr_t stream) {
            nb::gil_scoped_release release;
            const CudaStreamGuard guard(reinterpret_cast<void*>(stream));
            c.cache->erase_front(n);
          },
          nb::arg("n"), nb::arg("stream") = 0)
      .def(
          "rerotate",
          [](Cache& c, int64_t from, int64_t to, uintptr_t stream) {
            nb::gil_scoped_release release;
            const CudaStreamGuard guard(reinterpret_cast<void*>(stream));
            c.cache->rerotate(from, to);
          },
          nb::arg("from_seq_len"), nb::arg("to_seq_len"), nb::arg("stream") = 0)
      .def(
          "reserve", [](Cache& c, int64_t tokens) { c.cache->reserve(tokens); }, nb::arg("tokens"))
      .def("clear", [](Cache& c) { c.cache->clear(); })
      .def_prop_ro("size", [](const Cache& c) { return c.cache->size(); })
      // Copies (B, size, Hkv, D) / (B, size) of the stored tensors into arrays the caller allocated.
      .def(
          "copy_state",
          [](const Cache& c, const OutArray& keys, const OutArray& values, const OutArray& positions) {
            const DType dtype = c.cache->dtype();
            if (dtype == DType::f32) {
              copy_into<float>(c.cache->keys(), out_view(keys, "keys"), "keys");
              copy_into<float>(c.cache->values(), out_view(values, "values"), "values");
            } else {  // keys and values are the uint16 bits of the cache's storage
              copy_into<uint16_t>(c.cache->keys(), out_view(keys, "keys", dtype), "keys");
              copy_into<uint16_t>(c.cache->values(), out_view(values, "values", dtype), "values");
            }
            copy_into<int64_t>(c.cache->positions(), out_view(positions, "positions"), "positions");
          },
          nb::arg("keys"), nb::arg("values"), nb::arg("positions"));
}

}  // namespace posenc::python
