// tools/output.cc: see output.h.
#include "output.h"

#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "posenc/error.h"

namespace posenc::tools {

Format parse_format(const std::string& name) {
  if (name == "table") return Format::table;
  if (name == "csv") return Format::csv;
  if (name == "json") return Format::json;
  if (name == "npy") return Format::npy;
  throw Error("--format = '" + name + "' is invalid: expected table, csv, json or npy");
}

void write_npy(const std::vector<int64_t>& shape, const std::vector<float>& data, std::ostream& out) {
  std::ostringstream dict;
  dict << "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict << shape[i] << (shape.size() == 1 || i + 1 < shape.size() ? ", " : "");
  dict << "), }";
  std::string header = dict.str();
  // Pad so that magic (6) + version (2) + length (2) + header is a multiple of 64, ending in '\n'.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char len_le[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(len_le, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  // x86-64 and every platform posenc targets are little-endian, as '<f4' requires.
  out.write(reinterpret_cast<const char*>(data.data()),
            static_cast<std::streamsize>(data.size() * sizeof(float)));
}

namespace {
std::string fmt(float v) {
  std::ostringstream os;
  os << std::setprecision(6) << v;
  return os.str();
}

void write_table(const Array& a, std::ostream& out) {
  const int64_t rows = static_cast<int64_t>(a.row_names.size()),
                cols = static_cast<int64_t>(a.col_names.size());
  out << a.title << "\n";
  size_t w = a.row_label.size();
  for (const auto& r : a.row_names) w = std::max(w, r.size());
  size_t cw = 9;
  for (const auto& c : a.col_names) cw = std::max(cw, c.size());
  for (float v : a.data) cw = std::max(cw, fmt(v).size());
  for (int64_t b = 0; b < a.blocks; ++b) {
    if (a.blocks > 1) out << "\n" << a.block_label << " " << b << "\n";
    out << std::left << std::setw(static_cast<int>(w)) << a.row_label << std::right;
    for (const auto& c : a.col_names) out << " " << std::setw(static_cast<int>(cw)) << c;
    out << "\n";
    for (int64_t r = 0; r < rows; ++r) {
      out << std::left << std::setw(static_cast<int>(w)) << a.row_names[r] << std::right;
      for (int64_t c = 0; c < cols; ++c)
        out << " " << std::setw(static_cast<int>(cw)) << fmt(a.data[(b * rows + r) * cols + c]);
      out << "\n";
    }
  }
  for (const auto& n : a.notes) out << "note: " << n << "\n";
}

void write_csv(const Array& a, std::ostream& out) {
  const int64_t rows = static_cast<int64_t>(a.row_names.size()),
                cols = static_cast<int64_t>(a.col_names.size());
  if (a.blocks > 1) out << a.block_label << ",";
  out << a.row_label;
  for (const auto& c : a.col_names) out << "," << c;
  out << "\n";
  for (int64_t b = 0; b < a.blocks; ++b)
    for (int64_t r = 0; r < rows; ++r) {
      if (a.blocks > 1) out << b << ",";
      out << a.row_names[r];
      for (int64_t c = 0; c < cols; ++c)
        out << "," << std::setprecision(9) << a.data[(b * rows + r) * cols + c];
      out << "\n";
    }
}

void write_json(const Array& a, std::ostream& out) {
  const int64_t rows = static_cast<int64_t>(a.row_names.size()),
                cols = static_cast<int64_t>(a.col_names.size());
  nlohmann::json j;
  j["title"] = a.title;
  j["row_label"] = a.row_label;
  j["rows"] = a.row_names;
  j["columns"] = a.col_names;
  if (a.blocks > 1) j["block_label"] = a.block_label;
  j["shape"] = a.blocks > 1 ? std::vector<int64_t>{a.blocks, rows, cols} : std::vector<int64_t>{rows, cols};
  nlohmann::json data = nlohmann::json::array();
  for (int64_t b = 0; b < a.blocks; ++b) {
    nlohmann::json m = nlohmann::json::array();
    for (int64_t r = 0; r < rows; ++r)
      m.push_back(std::vector<float>(a.data.begin() + (b * rows + r) * cols,
                                     a.data.begin() + (b * rows + r + 1) * cols));
    if (a.blocks > 1)
      data.push_back(m);
    else
      data = m;
  }
  j["data"] = data;
  j["notes"] = a.notes;
  out << j.dump(1) << "\n";
}
}  // namespace

void write(const Array& a, Format format, std::ostream& out) {
  switch (format) {
    case Format::table:
      write_table(a, out);
      break;
    case Format::csv:
      write_csv(a, out);
      break;
    case Format::json:
      write_json(a, out);
      break;
    case Format::npy: {
      const int64_t rows = static_cast<int64_t>(a.row_names.size()),
                    cols = static_cast<int64_t>(a.col_names.size());
      write_npy(a.blocks > 1 ? std::vector<int64_t>{a.blocks, rows, cols} : std::vector<int64_t>{rows, cols},
                a.data, out);
      break;
    }
  }
}

}  // namespace posenc::tools
