// registry/entries/entries.h: one function per encoding building its registry entry
// (registry.cc lists them in the catalogue's order), and helpers the entries share.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "registry/registry.h"
#include "registry/table.h"

namespace posenc::registry {

Entry none_entry();
Entry sinusoidal_entry();
Entry learned_entry();
Entry binary_entry();
Entry relative_bias_entry();
Entry t5_bias_entry();
Entry alibi_entry();
Entry shaw_entry();
Entry transformer_xl_entry();
Entry rope_entry();

namespace table {
std::vector<std::string> names(const std::vector<int64_t>& values);           // "0", "1", ...
std::vector<std::string> numbered(const std::string& prefix, int64_t count);  // "d0", "d1", ...
inline int64_t size(const std::vector<int64_t>& v) { return static_cast<int64_t>(v.size()); }
// A random N(0, stddev) table standing in for a trained one (`posenc encode` shows its shape).
std::vector<float> normal_table(int64_t count, uint32_t seed, float stddev);
// Before a table is allocated: hands r.require_memory (when set) the bytes of `cells` values and
// `labels` row and column names, each with its JSON value and its text, plus `other_bytes` (the
// encoding's own tables), all in double; the message names the encoding, `flags` (e.g. "--heads 8")
// and the number of positions (of queries and keys when `pairs`).
void require_table_memory(const TableRequest& r, const std::string& encoding, const std::string& flags,
                          double cells, double labels, double other_bytes = 0, bool pairs = false);
// (heads, queries, keys), zero-filled, for a bias written by the library.
Table bias_array(const std::string& title, int64_t heads, const std::vector<int64_t>& queries,
                 const std::vector<int64_t>& keys);
// (queries, keys): code_of(key - query) per pair, e.g. the table row a relative encoding reads.
template <typename CodeOf>
Table pair_codes(const std::string& title, const std::vector<int64_t>& queries,
                 const std::vector<int64_t>& keys, CodeOf code_of) {
  Table a{title, "", "query", names(queries), names(keys), 1, {}, {}};
  for (int64_t q : queries)
    for (int64_t k : keys) a.data.push_back(static_cast<float>(code_of(k - q)));
  return a;
}
}  // namespace table

}  // namespace posenc::registry
