// lab/claims.h: what the lab's text comparison is set against, and the rule that turns its figures
// into verdicts.
//
// Two sources of claims:
// - the seeds' table: sinusoidal, RoPE, ALiBi and T5 "extrapolate", a learned table does not;
// - Press et al. 2022 ("Train Short, Test Long", arXiv 2108.12409), Appendix Table 2: WikiText-103
//   validation perplexity of the Baevski & Auli word-level model (16 layers, d 1024) trained at
//   L = 512 and evaluated on nonoverlapping windows of L_valid tokens. published_table() keeps the
//   rows at L_valid = 512, 1012, 2512, 4512 and 8512 (1x, 2.0x, 4.9x, 8.8x and 16.6x).
//
// The unit: a loss ratio. Bits per character are log2 of the per-character perplexity, so
//   ratio(L) = bits/char at L / bits/char at the training length        (here, per seed)
//   ratio(L) = ln(perplexity at L) / ln(perplexity at 512)              (the paper)
// are the same quantity, a ratio of mean log-likelihoods per token; a raw perplexity ratio (x15 for
// sinusoidal) and a percentage change of bits/char are not comparable with each other.
//
// The rule (verdict_rule() prints it): with the 95% interval [lo, hi] of the mean ratio over seeds,
//   holds      hi <= kHoldsAt    (the loss rises by at most 2%, whatever the seeds)
//   degrades   lo >  kHoldsAt
//   undecided  otherwise         (the interval straddles the threshold)
// The paper's single ratio takes the same rule; the row agrees with the paper when both hold or both
// degrade, and the paper's ratio is "within" the interval or smaller / larger than the lab's. The seeds'
// "extrapolates" is right when the row holds. An ordering a < b at the longest length is called only
// where a's interval lies wholly below b's. With one seed there is no interval: the value stands for
// it, the verdicts say so, and no ordering is called.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "experiment.h"

namespace posenc::lab {

inline constexpr double kHoldsAt = 1.02;  // the ratio up to which a row "holds"
inline constexpr int64_t kPublishedTrainLength = 512;

struct PublishedRow {
  const char* label;  // the lab's encoding ("rope")
  const char* name;   // the paper's ("Rotary")
  struct Point {
    int64_t length;  // L_valid
    double perplexity;
  };
  std::vector<Point> points;  // the first at L_valid = kPublishedTrainLength
};
const std::vector<PublishedRow>& published_table();

// The paper's ratio for `label` at the length whose L_valid / 512 is nearest `length_ratio` (in log
// scale); nullopt where the paper has no row for the label.
struct PublishedRatio {
  double ratio = 0;  // ln(perplexity at length) / ln(perplexity at 512)
  int64_t length = 0;
  double perplexity_train = 0, perplexity_at = 0;
};
std::optional<PublishedRatio> published_ratio(const std::string& label, double length_ratio);

enum class Trend : uint8_t { holds, degrades, undecided };
const char* trend_name(Trend trend);
Trend trend_of(double low, double high);  // the rule above on an interval (low = high: one value)

// The unit and the rule, printed once above the verdicts.
std::vector<std::string> verdict_rule(int64_t seeds);

// One line per encoding with a claim (the seeds' table or the paper), the measured ratio at the
// longest length with its interval beside the paper's, and the verdicts by the rule; then the
// ordering at the longest length, called only where the intervals separate, against the paper's.
// Without the training length among `lengths` there is no ratio: one line says so.
std::vector<std::string> verdicts(const std::vector<SummaryRow>& rows, const std::vector<int64_t>& lengths,
                                  int64_t train_len);

}  // namespace posenc::lab
