// registry/table.h: what an entry's `tabulate` hook returns for `posenc encode`: one result array with
// labels. The CLI writes it as an aligned table, CSV, JSON or .npy (tools/output.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace posenc::registry {

// data is (blocks, rows, cols) row-major; blocks = 1 for a plain matrix (e.g. heads for a bias).
struct Table {
  std::string title;        // e.g. "alibi bias (head, query, key)"
  std::string block_label;  // e.g. "head"; empty when blocks == 1
  std::string row_label;    // e.g. "position"
  std::vector<std::string> row_names, col_names;
  int64_t blocks = 1;
  std::vector<float> data;
  std::vector<std::string> notes;  // printed under the table, included in JSON
};

}  // namespace posenc::registry
