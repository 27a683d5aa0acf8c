// tools/analyze/analyze.cc: see analyze.h. The loop over the registry's entries, the thresholds
// and the reports; each entry computes its codes (registry/entries/) and judges them with
// judge.h.
#include "analyze.h"

#include <algorithm>

#include "registry/judge.h"
#include "posenc/error.h"
#include "registry/registry.h"

namespace posenc::analyze {
namespace {

const char* mark_text(Verdict::Mark m) {
  switch (m) {
    case Verdict::Mark::pass:
      return "✓";
    case Verdict::Mark::fail:
      return "✗";
    default:
      return "–";
  }
}
const char* mark_word(Verdict::Mark m) {
  return m == Verdict::Mark::pass ? "pass" : m == Verdict::Mark::fail ? "fail" : "n/a";
}

[[noreturn]] void bad(const std::string& flag, int64_t value, const std::string& why) {
  throw Error(flag + " = " + std::to_string(value) + " is invalid: " + why);
}

}  // namespace

void validate(const Options& o) {
  if (o.length < 2) bad("--length", o.length, "must be >= 2");
  if (o.length > 8192) bad("--length", o.length, "at most 8192 (pairwise metrics are O(L^2))");
  if (o.extrapolate_to <= o.length)
    bad("--extrapolate-to", o.extrapolate_to, "must be > --length (" + std::to_string(o.length) + ")");
  if (o.extrapolate_to > 65536) bad("--extrapolate-to", o.extrapolate_to, "at most 65536");
  if (o.dim < 2 || o.dim % 2 != 0 || o.dim > 1024) bad("--dim", o.dim, "must be even, in [2, 1024]");
  // Lags of the trained range [0, L) go up to L - 1: a longer horizon would claim unmeasured lags.
  if (o.horizon < 1 || o.horizon >= o.length)
    bad("--horizon", o.horizon, "must be in [1, --length - 1 = " + std::to_string(o.length - 1) + "]");
  for (const std::string& e : o.encodings) registry::find(e);  // throws, listing the known names
}

std::vector<Report> analyze(const Options& o) {
  validate(o);
  auto wanted = [&](const registry::Entry& e) {
    return o.encodings.empty() ||
           std::any_of(o.encodings.begin(), o.encodings.end(),
                       [&](const std::string& name) { return registry::find(name).kind() == e.kind(); });
  };
  std::vector<Report> out;
  for (const registry::Entry& e : registry::entries()) {
    if (!wanted(e)) continue;
    Report r;
    r.encoding = std::string(e.name());
    r.family = std::string(e.info->family);
    e.analyze(o, r);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> thresholds(const Options& o) {
  return {"uniqueness ✓: min distance between codes of [0, L) > " + fmt(kUniqueRatio) +
              " x mean distance (discrete codes: no two distances < L share one)",
          "neighbours ✓: every adjacent distance >= " + fmt(kNeighbourRatio) +
              " x the mean distance (not merged) and within a factor " + fmt(kNeighbourSpread) +
              " of each other (consistent steps); reported, not judged: whether mean similarity falls over "
              "lags 0.." +
              std::to_string(o.horizon),
          "composability ✓: PE(p+k) = M_k PE(p) with relative residual < " + fmt(kLinearResidual) +
              " for k in 1,2,4,8,16; RoPE: q_m.k_n within " + fmt(kRelativeDeviation) +
              " of a function of m-n; bias/relative terms: by construction",
          "generalization ✓: defined for every position/distance in [L, L2)"};
}

nlohmann::json to_json(const Options& o, const std::vector<Report>& reports) {
  nlohmann::json j;
  j["options"] = {{"length", o.length},
                  {"extrapolate_to", o.extrapolate_to},
                  {"dim", o.dim},
                  {"horizon", o.horizon},
                  {"seed", o.seed}};
  j["thresholds"] = thresholds(o);
  auto verdict = [](const Verdict& v) {
    return nlohmann::json{{"mark", mark_word(v.mark)}, {"summary", v.summary}, {"detail", v.detail}};
  };
  for (const Report& r : reports)
    j["encodings"].push_back({{"encoding", r.encoding},
                              {"family", r.family},
                              {"uniqueness", verdict(r.uniqueness)},
                              {"neighbours", verdict(r.neighbours)},
                              {"composability", verdict(r.composability)},
                              {"generalization", verdict(r.generalization)},
                              {"decay", r.decay},
                              {"notes", r.notes}});
  return j;
}

void print_table(const Options& o, const std::vector<Report>& reports, std::ostream& os) {
  os << "posenc analyze: L = " << o.length << ", L2 = " << o.extrapolate_to << ", dim = " << o.dim << "\n\n";
  os << "| encoding | uniqueness | neighbours | composability | generalization |\n|---|---|---|---|---|\n";
  for (const Report& r : reports) {
    os << "| " << r.encoding;
    for (const Verdict* v : {&r.uniqueness, &r.neighbours, &r.composability, &r.generalization})
      os << " | " << mark_text(v->mark) << " " << v->summary;
    os << " |\n";
  }
  os << "\nDecay (distance: value):\n";
  for (const Report& r : reports) {
    if (r.decay.is_null()) continue;
    os << "  " << r.encoding << " (" << r.decay["kind"].get<std::string>() << "):";
    for (const auto& p : r.decay["curve"])
      os << " " << p["distance"].get<int64_t>() << ": "
         << fmt(p.contains("bound") ? p["bound"].get<double>() : p["first_head"].get<double>());
    os << "\n";
  }
  os << "\nThresholds:\n";
  for (const std::string& t : thresholds(o)) os << "  " << t << "\n";
  os << "\nNotes:\n";
  for (const Report& r : reports)
    for (const std::string& n : r.notes) os << "  " << n << "\n";
}

void print_csv(const std::vector<Report>& reports, std::ostream& os) {
  auto quote = [](const std::string& s) { return "\"" + s + "\""; };
  os << "encoding,family,uniqueness,uniqueness_summary,neighbours,neighbours_summary,composability,"
        "composability_summary,generalization,generalization_summary\n";
  for (const Report& r : reports) {
    os << r.encoding << "," << quote(r.family);
    for (const Verdict* v : {&r.uniqueness, &r.neighbours, &r.composability, &r.generalization})
      os << "," << mark_word(v->mark) << "," << quote(v->summary);
    os << "\n";
  }
}

}  // namespace posenc::analyze
