// registry/analysis.h: what an entry's `analyze` hook reads and fills for `posenc analyze`
// (tools/analyze/): the options of the run and one report per encoding, a verdict per condition of a good
// positional encoding (uniqueness, distinguishable neighbours, composable offsets, generalization).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
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

}  // namespace posenc::analyze
