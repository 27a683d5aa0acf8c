// registry/registry.cc: the registry's list (see registry.h) and the entries' shared helpers.
#include "registry/registry.h"

#include <array>
#include <random>

#include "registry/entries/entries.h"
#include "posenc/error.h"

namespace posenc::registry {
namespace {

// In the catalogue's order (all_encodings(), i.e. EncodingKind's), checked on first use.
const std::array<Entry, 10>& table_of_entries() {
  static const std::array<Entry, 10> kEntries = [] {
    std::array<Entry, 10> out{none_entry(),           sinusoidal_entry(), learned_entry(), binary_entry(),
                              relative_bias_entry(),  t5_bias_entry(),    alibi_entry(),   shaw_entry(),
                              transformer_xl_entry(), rope_entry()};
    const std::span<const EncodingInfo> catalogue = all_encodings();
    if (catalogue.size() != out.size())
      throw Error("registry: the catalogue and the registry differ in size");
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i].info != &catalogue[i])
        throw Error("registry: entry " + std::to_string(i) + " is not the catalogue's " +
                    std::string(catalogue[i].name));
    return out;
  }();
  return kEntries;
}

}  // namespace

std::span<const Entry> entries() { return table_of_entries(); }

const Entry& find(std::string_view name) { return entry(encoding_info(name).kind); }

const Entry& entry(EncodingKind kind) { return table_of_entries()[static_cast<size_t>(kind)]; }

namespace table {
std::vector<std::string> names(const std::vector<int64_t>& values) {
  std::vector<std::string> s;
  for (int64_t x : values) s.push_back(std::to_string(x));
  return s;
}
std::vector<std::string> numbered(const std::string& prefix, int64_t count) {
  std::vector<std::string> s;
  for (int64_t i = 0; i < count; ++i) s.push_back(prefix + std::to_string(i));
  return s;
}
std::vector<float> normal_table(int64_t count, uint32_t seed, float stddev) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> t(static_cast<size_t>(count));
  for (float& x : t) x = dist(rng);
  return t;
}
void require_table_memory(const TableRequest& r, const std::string& encoding, const std::string& flags,
                          double cells, double labels, double other_bytes, bool pairs) {
  if (r.require_memory == nullptr) return;
  // A value: the float, its JSON value (16 bytes) and up to 28 characters of text; a label: its
  // std::string, its JSON copy and its text.
  constexpr double kCellBytes = 48, kLabelBytes = 96;
  const std::string positions = pairs ? std::to_string(r.positions.size()) + " query and " +
                                            std::to_string(r.keys.size()) + " key positions"
                                      : std::to_string(r.positions.size()) + " positions";
  r.require_memory(
      "posenc encode " + encoding + " with " + flags + (flags.empty() ? "" : " and ") + positions,
      kCellBytes * cells + kLabelBytes * labels + other_bytes);
}
Table bias_array(const std::string& title, int64_t heads, const std::vector<int64_t>& queries,
                 const std::vector<int64_t>& keys) {
  Table a{title, "head", "query", names(queries), names(keys), heads, {}, {}};
  a.data.resize(static_cast<size_t>(heads) * queries.size() * keys.size());
  return a;
}
}  // namespace table

}  // namespace posenc::registry
