// tools/output.h: one result array with labels, written as an aligned table, CSV, JSON or .npy.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace posenc::tools {

enum class Format { table, csv, json, npy };
Format parse_format(const std::string& name);  // throws posenc::Error naming --format

// data is (blocks, rows, cols) row-major; blocks = 1 for a plain matrix (e.g. heads for a bias).
struct Array {
  std::string title;        // e.g. "alibi bias (head, query, key)"
  std::string block_label;  // e.g. "head"; empty when blocks == 1
  std::string row_label;    // e.g. "position"
  std::vector<std::string> row_names, col_names;
  int64_t blocks = 1;
  std::vector<float> data;
  std::vector<std::string> notes;  // printed under the table, included in JSON
};

void write(const Array& a, Format format, std::ostream& out);
// The .npy v1.0 format: magic, little-endian header length, a Python dict literal, raw <f4 data.
void write_npy(const std::vector<int64_t>& shape, const std::vector<float>& data, std::ostream& out);

}  // namespace posenc::tools
