// lab/safetensors.cc: see safetensors.h.
#include "safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "files.h"
#include "posenc/error.h"
#include "src/json_depth.h"

namespace posenc::lab {
namespace {

constexpr uint64_t kMaxHeader = 100u << 20;  // the reference implementation's limit
// A header nests 3 levels ({"name": {"shape": [..]}}); nlohmann's dump() and copies recurse once
// per level, so a 100,000-deep value would overflow the stack. Checked before parsing.
constexpr int kMaxHeaderDepth = 16;

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw Error(origin + ": " + what);
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// The product of the dimensions, or nullopt when it (or its size in bytes) exceeds 2^62.
std::optional<uint64_t> element_count(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > (uint64_t{1} << 60) / static_cast<uint64_t>(d)) return std::nullopt;
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

// Text for an error message, cut to max_chars characters.
std::string cut(std::string s, size_t max_chars) {
  return s.size() > max_chars ? s.substr(0, max_chars) + "... (" + std::to_string(s.size()) + " characters)"
                              : s;
}
// A JSON value for an error message, cut to 80 characters.
std::string excerpt(const nlohmann::json& value) { return cut(value.dump(), 80); }

}  // namespace

const NamedTensor& Checkpoint::get(const std::string& name, const std::vector<int64_t>& shape) const {
  for (const NamedTensor& t : tensors)
    if (t.name == name) {
      if (t.shape != shape)
        throw Error("checkpoint: tensor '" + name + "' has shape " + shape_text(t.shape) + ", expected " +
                    shape_text(shape));
      return t;
    }
  throw Error("checkpoint: no tensor named '" + name + "'");
}

std::string encode_safetensors(const Checkpoint& c) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!c.metadata.empty()) header["__metadata__"] = c.metadata;
  uint64_t offset = 0;
  for (const NamedTensor& t : c.tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      throw Error("save_safetensors: tensor name '" + t.name + "' is invalid");
    if (header.contains(t.name)) throw Error("save_safetensors: tensor name '" + t.name + "' appears twice");
    for (int64_t d : t.shape)
      if (d < 0)
        throw Error("save_safetensors: tensor '" + t.name + "' has shape " + shape_text(t.shape) +
                    " with a negative dimension");
    const std::optional<uint64_t> count = element_count(t.shape);
    if (!count)
      throw Error("save_safetensors: tensor '" + t.name + "' has shape " + shape_text(t.shape) +
                  ", more than 2^60 elements");
    if (*count != t.data.size())
      throw Error("save_safetensors: tensor '" + t.name + "' has shape " + shape_text(t.shape) + " but " +
                  std::to_string(t.data.size()) + " values");
    const uint64_t bytes = t.data.size() * sizeof(float);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  std::string out(8, '\0');
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += json;
  static_assert(sizeof(float) == 4 && std::numeric_limits<float>::is_iec559);
  for (const NamedTensor& t : c.tensors) {  // little-endian IEEE floats (x86, ARM)
    const size_t at = out.size();
    out.resize(at + t.data.size() * sizeof(float));
    if (!t.data.empty()) std::memcpy(&out[at], t.data.data(), t.data.size() * sizeof(float));
  }
  return out;
}

Checkpoint decode_safetensors(const std::string& bytes, const std::string& origin) {
  if (bytes.size() < 8)
    fail(origin,
         "file is " + std::to_string(bytes.size()) + " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (n > kMaxHeader) fail(origin, "header length " + std::to_string(n) + " exceeds the 100 MiB limit");
  if (n > bytes.size() - 8)
    fail(origin, "header length " + std::to_string(n) + " runs past the end of the file (" +
                     std::to_string(bytes.size()) + " bytes)");
  const std::string_view text(bytes.data() + 8, n);
  if (text.empty() || text.front() != '{') fail(origin, "header does not start with '{'");
  if (detail::json_too_deep_at(text, kMaxHeaderDepth))
    fail(origin,
         "header nests objects and arrays more than " + std::to_string(kMaxHeaderDepth) + " levels deep");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for numbers like 1e400
    fail(origin, "header is not valid JSON: " + cut(e.what(), 200));  // nlohmann quotes whole tokens
  }
  if (!header.is_object()) fail(origin, "header is not a JSON object");
  const uint64_t buffer = bytes.size() - 8 - n;
  const char* data = bytes.data() + 8 + n;

  Checkpoint c;
  struct Span {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Span> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(origin, "__metadata__ = " + excerpt(entry) + " is not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail(origin, "__metadata__['" + k + "'] is not a string");
        c.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    // The writer's rule (encode_safetensors): a checkpoint read here can be saved again.
    if (name.empty()) fail(origin, "a tensor has the empty name ''");
    if (!entry.is_object()) fail(origin, where + " = " + excerpt(entry) + " is not an object");
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!entry.contains(key)) fail(origin, where + " has no '" + key + "'");
    if (!entry["dtype"].is_string())
      fail(origin, where + ": dtype " + excerpt(entry["dtype"]) + " is not a string");
    const std::string dtype = entry["dtype"].get<std::string>();
    if (dtype != "F32") fail(origin, where + ": dtype " + dtype + " is not supported (the lab stores F32)");
    NamedTensor t;
    t.name = name;
    if (!entry["shape"].is_array())
      fail(origin, where + ": shape " + excerpt(entry["shape"]) + " is not an array");
    for (const auto& d : entry["shape"]) {
      // Unsigned values above INT64_MAX would wrap to negative ones.
      if (!d.is_number_integer() || (d.is_number_unsigned() && d.get<uint64_t>() > (uint64_t{1} << 62)) ||
          d.get<int64_t>() < 0)
        fail(origin, where + ": shape " + excerpt(entry["shape"]) + " is invalid");
      t.shape.push_back(d.get<int64_t>());
    }
    const auto& off = entry["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(origin, where + ": data_offsets " + excerpt(off) + " is not [begin, end]");
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > buffer)
      fail(origin, where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                       "] outside the " + std::to_string(buffer) + "-byte data buffer");
    // elements * 4 must not wrap: [2^62] with empty offsets once wrapped to 0 bytes, passed, and
    // threw std::length_error from the resize below.
    const std::optional<uint64_t> count = element_count(t.shape);
    if (!count) fail(origin, where + ": shape " + shape_text(t.shape) + " has more than 2^60 elements");
    const uint64_t elements = *count;
    if (end - begin != elements * sizeof(float))
      fail(origin, where + ": shape " + shape_text(t.shape) + " needs " +
                       std::to_string(elements * sizeof(float)) + " bytes, data_offsets give " +
                       std::to_string(end - begin));
    t.data.resize(elements);
    if (elements) std::memcpy(t.data.data(), data + begin, elements * sizeof(float));
    spans.push_back({begin, end, c.tensors.size()});
    c.tensors.push_back(std::move(t));
  }
  // The buffer must be covered exactly: sorted by offset, each tensor starts where the last ended.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  uint64_t at = 0;
  for (const Span& s : spans) {
    const std::string& name = c.tensors[s.index].name;
    if (s.begin < at) fail(origin, "tensor '" + name + "' overlaps the tensor before it");
    if (s.begin > at)
      fail(origin, "bytes [" + std::to_string(at) + ", " + std::to_string(s.begin) + ") before tensor '" +
                       name + "' belong to no tensor");
    at = s.end;
  }
  if (at != buffer)
    fail(origin,
         "bytes [" + std::to_string(at) + ", " + std::to_string(buffer) + ") at the end belong to no tensor");
  std::vector<NamedTensor> ordered;
  for (const Span& s : spans) ordered.push_back(std::move(c.tensors[s.index]));
  c.tensors = std::move(ordered);
  return c;
}

void save_safetensors(const std::string& path, const Checkpoint& checkpoint) {
  write_file("save_safetensors", path, encode_safetensors(checkpoint));  // validates before the disk
}

Checkpoint load_safetensors(const std::string& path) {
  const std::string origin = "load_safetensors '" + path + "'";
  return decode_safetensors(read_regular_file("load_safetensors", path, kMaxSafetensorsBytes), origin);
}

}  // namespace posenc::lab
