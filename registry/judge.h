// registry/judge.h: the four conditions (uniqueness, distinguishable neighbours, composable
// offsets, generalization) judged against fixed thresholds, for the two kinds of codes encodings
// have: continuous codes (a vector per position or distance) and discrete codes (the table row or
// bucket of a distance). The registry's entries call these with the codes the library computes.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "registry/analysis.h"
#include "registry/metrics.h"

namespace posenc::analyze {

constexpr double kUniqueRatio = 1e-3;        // min distance / mean distance
constexpr double kNeighbourRatio = 1e-3;     // min adjacent distance / mean distance: not merged
constexpr double kNeighbourSpread = 2.0;     // max / min adjacent distance: consistent steps
constexpr double kLinearResidual = 1e-6;     // relative least-squares residual of M_k
constexpr double kRelativeDeviation = 1e-4;  // RoPE: max |q_m.k_n - g(m - n)| / max |q_m.k_n|

// Continuous codes, rows 0 .. L2 - 1 (positions or distances): every condition from the metrics.
// Without judge_composability, composability keeps its mark (the caller knows it by construction)
// and only receives the residuals as detail.
void judge_continuous(const Options& o, const Codes& all, Report& r, bool judge_composability);
// Discrete codes of distances: merges are where offsets stop being told apart; `why` says why the
// encoding merges them (on purpose, as a rule).
void judge_discrete(const Options& o, const std::function<int64_t(int64_t)>& code_of, bool with_negatives,
                    Report& r, const std::string& why);

std::string fmt(double x, int precision = 3);
std::vector<int64_t> range(int64_t lo, int64_t hi);  // lo .. hi - 1
Codes from_floats(const std::vector<float>& f, int64_t n, int64_t dim);
std::vector<int64_t> powers_of_two(int64_t upto);  // 1, 2, 4, ... <= upto

}  // namespace posenc::analyze
