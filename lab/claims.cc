// lab/claims.cc: see claims.h.
#include "claims.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace posenc::lab {

const std::vector<PublishedRow>& published_table() {
  // Press et al. 2022, Appendix Table 2 (L = 512, WikiText-103 validation perplexity).
  static const std::vector<PublishedRow> table = {
      {"sinusoidal",
       "Sinusoidal",
       {{512, 20.05}, {1012, 43.54}, {2512, 132.41}, {4512, 209.37}, {8512, 305.65}}},
      {"rope", "Rotary", {{512, 20.07}, {1012, 21.37}, {2512, 31.58}, {4512, 39.15}, {8512, 54.98}}},
      {"t5", "T5 Bias", {{512, 19.65}, {1012, 18.79}, {2512, 20.41}, {4512, 25.91}, {8512, 43.08}}},
      {"alibi", "ALiBi", {{512, 19.73}, {1012, 18.73}, {2512, 18.41}, {4512, 18.41}, {8512, 18.34}}},
  };
  return table;
}

std::optional<PublishedRatio> published_ratio(const std::string& label, double length_ratio) {
  for (const PublishedRow& row : published_table()) {
    if (label != row.label) continue;
    const PublishedRow::Point* best = nullptr;
    double best_distance = 0;
    for (const PublishedRow::Point& p : row.points) {
      const double distance = std::abs(std::log(static_cast<double>(p.length) /
                                                static_cast<double>(kPublishedTrainLength) / length_ratio));
      if (!best || distance < best_distance) best = &p, best_distance = distance;
    }
    PublishedRatio r;
    r.length = best->length;
    r.perplexity_train = row.points.front().perplexity;
    r.perplexity_at = best->perplexity;
    r.ratio = std::log(r.perplexity_at) / std::log(r.perplexity_train);
    return r;
  }
  return std::nullopt;
}

const char* trend_name(Trend trend) {
  switch (trend) {
    case Trend::holds:
      return "holds";
    case Trend::degrades:
      return "degrades";
    case Trend::undecided:
      return "undecided";
  }
  return "?";
}

Trend trend_of(double low, double high) {
  if (high <= kHoldsAt) return Trend::holds;
  if (low > kHoldsAt) return Trend::degrades;
  return Trend::undecided;
}

std::vector<std::string> verdict_rule(int64_t seeds) {
  char buf[256];
  std::vector<std::string> out{
      "unit: the loss at the longest length over the loss at the training length, a ratio of log-likelihoods",
      "  per token: bits/char here, ln(perplexity) in the paper (a raw perplexity ratio is not the same "
      "unit)"};
  if (seeds > 1)
    std::snprintf(buf, sizeof buf,
                  "interval: 95%% confidence interval of the mean over %lld seeds (Student's t, t = %.3f)",
                  static_cast<long long>(seeds), student_t95(seeds - 1));
  else
    std::snprintf(buf, sizeof buf,
                  "interval: none with one seed (its value stands for it; no ordering is called)");
  out.emplace_back(buf);
  std::snprintf(
      buf, sizeof buf,
      "rule: holds if the whole interval is <= %.2f (the loss rises by at most %.0f%%), degrades if it is "
      "all above,",
      kHoldsAt, 100 * (kHoldsAt - 1));
  out.emplace_back(buf);
  out.emplace_back(
      "  undecided otherwise; the paper's ratio takes the same rule: 'agrees' when both hold or both "
      "degrade,");
  out.emplace_back(
      "  then 'within' if the paper's ratio is inside the interval, else whether the lab's is larger or "
      "smaller;");
  out.emplace_back(
      "  the seeds' 'extrapolates' is right if the row holds; a < b only where a's interval is all below "
      "b's");
  return out;
}

namespace {

struct Claim {
  const char* label;
  bool seeds_extrapolates;  // the seeds' table
};
constexpr Claim kSeedsTable[] = {
    {"sinusoidal", true}, {"rope", true}, {"alibi", true}, {"t5", true}, {"learned", false},
};

const Claim* seeds_claim(const std::string& label) {
  for (const Claim& c : kSeedsTable)
    if (label == c.label) return &c;
  return nullptr;
}

std::string format(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[96];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

std::string pad(const std::string& text, size_t width) {
  return text.size() >= width ? text + " " : text + std::string(width - text.size(), ' ');
}

}  // namespace

std::vector<std::string> verdicts(const std::vector<SummaryRow>& rows, const std::vector<int64_t>& lengths,
                                  int64_t train_len) {
  std::vector<std::string> out;
  if (lengths.empty()) return out;
  std::optional<size_t> base;  // the 1x column
  size_t last = 0;             // the longest one
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] == train_len && !base) base = i;
    if (lengths[i] > lengths[last]) last = i;
  }
  if (!base || lengths[last] <= train_len) {
    out.push_back("no verdicts: the evaluation lengths need the training length " +
                  std::to_string(train_len) + " and a longer one");
    return out;
  }
  const double ratio_len = static_cast<double>(lengths[last]) / static_cast<double>(train_len);
  const std::string at = format("%gx", ratio_len);
  out.push_back(pad("encoding", 20) + pad("here " + at + "/1x [95%]", 22) + pad("paper (perplexity)", 33) +
                pad("here", 11) + pad("paper", 11) + pad("vs paper", 22) + "seeds' table");
  std::vector<std::pair<const SummaryRow*, Stat>> at_longest;  // the paper's rows, bits/char at `last`
  for (const SummaryRow& row : rows) {
    const Claim* seeds = seeds_claim(row.label);
    const std::optional<PublishedRatio> paper = published_ratio(row.label, ratio_len);
    const std::vector<double>& b = row.seed_bits_per_char[*base];
    const std::vector<double>& l = row.seed_bits_per_char[last];
    const bool runs = !b.empty() && l.size() == b.size();
    std::string here, paper_text, here_trend = "-", paper_trend = "-", vs_paper = "-", seeds_text = "-";
    std::optional<Trend> trend;
    bool one_seed = false;
    if (runs) {
      std::vector<double> ratios;
      for (size_t s = 0; s < b.size(); ++s) ratios.push_back(l[s] / b[s]);
      const Stat r = stat_of(ratios);
      one_seed = r.n < 2;
      trend = trend_of(r.low(), r.high());
      here =
          one_seed ? format("%.3f (1 seed)", r.mean) : format("%.3f [%.3f, %.3f]", r.mean, r.low(), r.high());
      here_trend = trend_name(*trend);
      if (paper) {
        const Trend p = trend_of(paper->ratio, paper->ratio);
        paper_trend = trend_name(p);
        if (*trend == Trend::undecided)
          vs_paper = "undecided";
        else
          vs_paper =
              std::string(*trend == p ? "agrees" : "differs") + (paper->ratio < r.low()    ? ", larger here"
                                                                 : paper->ratio > r.high() ? ", smaller here"
                                                                                           : ", within");
      }
    } else {
      here = "cannot run at " + at;
      here_trend = "cannot run";
      if (paper) vs_paper = "differs";
    }
    if (paper) {
      paper_text = format("%.3f", paper->ratio) + " (" +
                   format("%.2f -> %.2f at %g", paper->perplexity_train, paper->perplexity_at,
                          static_cast<double>(paper->length)) +
                   ")";
    } else if (row.label == "learned") {  // the paper's footnote: no way to encode positions past L
      paper_text = "cannot run past its table";
      paper_trend = "cannot run";
      vs_paper = runs ? "differs" : "agrees";
    } else {
      paper_text = "-";
    }
    if (seeds) {
      const bool right = seeds->seeds_extrapolates ? trend == Trend::holds : !runs;
      const bool undecided = trend == Trend::undecided;
      seeds_text = std::string(seeds->seeds_extrapolates ? "extrapolates: " : "does not extrapolate: ") +
                   (undecided ? "undecided"
                    : right   ? "right"
                              : "wrong");
    }
    if (one_seed && (paper || seeds)) seeds_text += " (1 seed)";
    out.push_back(pad(row.label, 20) + pad(here, 22) + pad(paper_text, 33) + pad(here_trend, 11) +
                  pad(paper_trend, 11) + pad(vs_paper, 22) + seeds_text);
    if (paper && runs) at_longest.emplace_back(&row, row.bits_per_char[last]);
  }
  if (at_longest.size() < 2) return out;

  // The ordering at the longest length: the lab's by mean, '<' only where the intervals separate.
  std::sort(at_longest.begin(), at_longest.end(),
            [](const auto& a, const auto& b) { return a.second.mean < b.second.mean; });
  const bool intervals = at_longest.front().second.n >= 2;
  const auto below = [](const Stat& a, const Stat& b) { return a.high() < b.low(); };
  std::string here =
      intervals ? "  here (bits/char): " + at_longest.front().first->label : "  here (bits/char):";
  for (size_t i = intervals ? 1 : 0; i < at_longest.size(); ++i)
    here += intervals ? std::string(below(at_longest[i - 1].second, at_longest[i].second) ? " < " : " ~ ") +
                            at_longest[i].first->label
                      : std::string(i ? ", " : " ") + at_longest[i].first->label +
                            format(" %.3f", at_longest[i].second.mean);
  // The paper's, by perplexity at its length nearest ratio_len, over the rows measured here.
  std::vector<std::pair<double, std::string>> paper;
  for (const auto& [row, stat] : at_longest)
    paper.emplace_back(published_ratio(row->label, ratio_len)->perplexity_at, row->label);
  std::sort(paper.begin(), paper.end());
  std::string paper_line =
      "  paper (perplexity at " +
      format("%g", static_cast<double>(published_ratio(paper[0].second, ratio_len)->length)) +
      "): " + paper[0].second;
  for (size_t i = 1; i < paper.size(); ++i) paper_line += " < " + paper[i].second;
  out.push_back("ordering at " + at + " (" +
                (intervals ? "'<' where the 95% intervals separate, '~' where they overlap):"
                           : "one seed: no interval, so no ordering is called; means shown):"));
  out.push_back(here);
  out.push_back(paper_line);
  if (!intervals) return out;
  std::string agrees, differs, open;
  const auto stat_of_label = [&](const std::string& label) {
    for (const auto& [row, stat] : at_longest)
      if (row->label == label) return stat;
    return Stat{};
  };
  for (size_t i = 0; i < paper.size(); ++i)
    for (size_t j = i + 1; j < paper.size(); ++j) {
      const Stat a = stat_of_label(paper[i].second), b = stat_of_label(paper[j].second);
      std::string& list = below(a, b) ? agrees : below(b, a) ? differs : open;
      list += (list.empty() ? "" : ", ") + paper[i].second + (&list == &open ? "~" : "<") + paper[j].second;
    }
  const auto none = [](const std::string& s) { return s.empty() ? std::string("none") : s; };
  out.push_back("  the paper's pairs (a<b: its order): agree " + none(agrees) + "; differ " + none(differs) +
                "; not separated here " + none(open));
  return out;
}

}  // namespace posenc::lab
