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

namespace posenc::analyze {

struct Options {
  std::vector<std::string> encodings;  // names or aliases; empty: all
  int64_t length = 512;                // L: the "training" range [0, L)
  int64_t extrapolate_to = 2048;       // L2: generalization is judged on [L, L2)
  int64_t dim = 64;                    // code width (model dim, head_dim for RoPE, d_model for XL)
  int64_t horizon = 16;                // similarity must fall monotonically over lags 0 .. horizon
  uint32_t seed = 0;                   // the untrained learned table
};
void validate(const Options& options);

// One condition: passed or not against the stated threshold, a short summary, numbers as JSON.
struct Verdict {
  enum class Mark { pass, fail, not_applicable } mark = Mark::not_applicable;
  std::string summary;
  nlohmann::json detail = nlohmann::json::object();
};

struct Report {
  std::string encoding, family;
  Verdict uniqueness, neighbours, composability, generalization;
  nlohmann::json decay;  // RoPE / ALiBi curves, else null
  std::vector<std::string> notes;
};

std::vector<Report> analyze(const Options& options);
nlohmann::json to_json(const Options& options, const std::vector<Report>& reports);
// The thresholds behind the marks, printed under the table and stored in the JSON.
std::vector<std::string> thresholds(const Options& options);

void print_table(const Options& options, const std::vector<Report>& reports, std::ostream& os);
void print_csv(const std::vector<Report>& reports, std::ostream& os);

}  // namespace posenc::analyze
