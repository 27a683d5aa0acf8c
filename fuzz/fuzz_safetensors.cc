// fuzz/fuzz_safetensors.cc: libFuzzer target for the lab's safetensors reader
// (lab/safetensors.h, decode_safetensors: what load_safetensors runs on a file's bytes).
//
// Oracle: the reader either throws posenc::Error, or returns a checkpoint that the writer accepts
// and that reads back identical (names, shapes, metadata and the values bit for bit). Any other
// exception, a crash or a sanitizer report is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "posenc/error.h"
#include "safetensors.h"

namespace {
using posenc::lab::Checkpoint;

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz_safetensors: %s\n", what.c_str());
  std::abort();
}

bool same(const Checkpoint& a, const Checkpoint& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto &x = a.tensors[i], &y = b.tensors[i];
    if (x.name != y.name || x.shape != y.shape || x.data.size() != y.data.size()) return false;
    if (!x.data.empty() && std::memcmp(x.data.data(), y.data.data(), x.data.size() * sizeof(float)) != 0)
      return false;  // bitwise: NaN payloads and -0 must survive
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::optional<Checkpoint> c;
  try {
    c = posenc::lab::decode_safetensors(bytes, "fuzz");
  } catch (const posenc::Error&) {
    return 0;
  }
  // Accepted: the writer must take it (an Error here is a finding) and the result read back equal.
  const std::string again = posenc::lab::encode_safetensors(*c);
  if (!same(*c, posenc::lab::decode_safetensors(again, "fuzz round trip")))
    finding("a decoded checkpoint does not round-trip through encode_safetensors");
  return 0;
}
