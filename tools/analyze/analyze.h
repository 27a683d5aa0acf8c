// tools/analyze/analyze.h: `posenc analyze`: every encoding of the library measured against the
// four conditions of a good positional encoding (uniqueness, distinguishable neighbours,
// composable offsets, generalization past the training length) and RoPE/ALiBi's long-term decay,
// with the library computing the codes (each encoding's registry entry says which).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "registry/analysis.h"

namespace posenc::analyze {

void validate(const Options& options);

std::vector<Report> analyze(const Options& options);
nlohmann::json to_json(const Options& options, const std::vector<Report>& reports);
// The thresholds behind the marks, printed under the table and stored in the JSON.
std::vector<std::string> thresholds(const Options& options);

void print_table(const Options& options, const std::vector<Report>& reports, std::ostream& os);
void print_csv(const std::vector<Report>& reports, std::ostream& os);

}  // namespace posenc::analyze
