// python/src/attention.h: the attention configuration object shared by the bindings of the fused
// attention (attention.cc) and of the KV cache (kv_cache.cc).
#pragma once
#include <optional>

#include "arrays.h"
#include "posenc/attention.h"

namespace posenc::python {

// One attention configuration (encoding and its parameters), built once by posenc.AttentionCall.
struct Attention {
  AttentionConfig config;
  std::optional<Rope> rope;
};

template <typename Array>
std::optional<Array> entry(const nb::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return std::nullopt;
  return nb::cast<Array>(d[key]);
}

// The configuration with this call's tables (relative_table, shaw_a_k, ..., sinks) viewed in it.
AttentionConfig with_tables(const Attention& a, const nb::dict& tables);

}  // namespace posenc::python
