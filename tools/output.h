// tools/output.h: one result array with labels, written as an aligned table, CSV, JSON or .npy.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "registry/table.h"

namespace posenc::tools {

enum class Format { table, csv, json, npy };
Format parse_format(const std::string& name);  // throws posenc::Error naming --format

// The array `posenc encode` writes: an entry's table (registry/table.h).
using Array = registry::Table;

void write(const Array& a, Format format, std::ostream& out);
// The .npy v1.0 format: magic, little-endian header length, a Python dict literal, raw <f4 data.
void write_npy(const std::vector<int64_t>& shape, const std::vector<float>& data, std::ostream& out);

}  // namespace posenc::tools
