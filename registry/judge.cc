// registry/judge.cc: see judge.h.
#include "registry/judge.h"

#include <algorithm>
#include <iomanip>
#include <set>
#include <sstream>

namespace posenc::analyze {
namespace {

const int64_t kOffsets[] = {1, 2, 4, 8, 16};

Codes rows(const Codes& c, int64_t lo, int64_t hi) {
  return {hi - lo, c.dim, std::vector<double>(c.data.begin() + lo * c.dim, c.data.begin() + hi * c.dim)};
}

}  // namespace

std::string fmt(double x, int precision) {
  std::ostringstream os;
  os << std::setprecision(precision) << x;
  return os.str();
}
std::vector<int64_t> range(int64_t lo, int64_t hi) {
  std::vector<int64_t> r;
  for (int64_t i = lo; i < hi; ++i) r.push_back(i);
  return r;
}
Codes from_floats(const std::vector<float>& f, int64_t n, int64_t dim) {
  return {n, dim, std::vector<double>(f.begin(), f.end())};
}
std::vector<int64_t> powers_of_two(int64_t upto) {
  std::vector<int64_t> r;
  for (int64_t d = 1; d <= upto; d *= 2) r.push_back(d);
  return r;
}

void judge_continuous(const Options& o, const Codes& all, Report& r, bool judge_composability) {
  const Codes trained = rows(all, 0, o.length), fresh = rows(all, o.length, all.n);
  const Uniqueness u = uniqueness(trained);
  const double ratio = u.mean_distance > 0 ? u.min_distance / u.mean_distance : 0;
  r.uniqueness.mark = ratio > kUniqueRatio ? Verdict::Mark::pass : Verdict::Mark::fail;
  r.uniqueness.summary =
      "min dist " + fmt(u.min_distance) + " (" + std::to_string(u.a) + "," + std::to_string(u.b) + ")";
  r.uniqueness.detail = {{"min_distance", u.min_distance},
                         {"pair", {u.a, u.b}},
                         {"mean_distance", u.mean_distance},
                         {"ratio", ratio}};

  const Neighbours nb = neighbours(trained, o.horizon);
  const bool monotone = nb.first_violation < 0 || nb.first_violation >= o.horizon;
  const bool consistent = nb.max_ratio <= kNeighbourSpread * nb.min_ratio;
  r.neighbours.mark =
      nb.min_ratio >= kNeighbourRatio && consistent ? Verdict::Mark::pass : Verdict::Mark::fail;
  r.neighbours.summary = "adjacent " + fmt(nb.min_ratio, 2) + (consistent ? "" : "-" + fmt(nb.max_ratio, 2)) +
                         " of mean; similarity " +
                         (monotone ? "falls to lag " + std::to_string(o.horizon)
                                   : "rises at lag " + std::to_string(nb.first_violation + 1));
  r.neighbours.detail = {
      {"adjacent_over_mean_min", nb.min_ratio}, {"min_at", {nb.min_at, nb.min_at + 1}},
      {"adjacent_over_mean_max", nb.max_ratio}, {"max_at", {nb.max_at, nb.max_at + 1}},
      {"similarity_by_lag", nb.similarity},     {"first_violation_lag", nb.first_violation}};

  double worst = 0;
  nlohmann::json residuals = nlohmann::json::object();
  for (int64_t k : kOffsets) {
    if (k >= trained.n) break;
    const double res = linear_map_residual(trained, k);
    residuals[std::to_string(k)] = res;
    worst = std::max(worst, res);
  }
  if (judge_composability) {
    r.composability.mark = worst < kLinearResidual ? Verdict::Mark::pass : Verdict::Mark::fail;
    r.composability.summary = "PE(p+k) = M_k PE(p): residual " + fmt(worst, 2);
  }
  r.composability.detail["linear_map_residual_by_offset"] = residuals;

  const Novelty nv = novelty(trained, fresh);
  r.generalization.mark = Verdict::Mark::pass;
  r.generalization.summary =
      std::string(nv.new_max_abs <= nv.trained_max_abs * (1 + 1e-3) ? "bounded" : "grows") + ", new codes " +
      fmt(nv.max_ratio, 2) + " steps from trained";
  r.generalization.detail = {{"defined_beyond_length", true},
                             {"trained_max_abs", nv.trained_max_abs},
                             {"new_max_abs", nv.new_max_abs},
                             {"nearest_trained_over_adjacent_max", nv.max_ratio},
                             {"nearest_trained_over_adjacent_mean", nv.mean_ratio}};
}

void judge_discrete(const Options& o, const std::function<int64_t(int64_t)>& code_of, bool with_negatives,
                    Report& r, const std::string& why) {
  const int64_t merged = first_merged_distance(code_of, o.length, with_negatives);
  const Verdict::Mark mark = merged < 0 ? Verdict::Mark::pass : Verdict::Mark::fail;
  r.uniqueness.mark = mark;
  r.uniqueness.summary =
      merged < 0 ? "every distance < L distinct" : "distances merge from d = " + std::to_string(merged);
  r.uniqueness.detail = {{"first_merged_distance", merged}, {"why", why}};
  int64_t distinct_steps = 0;
  for (int64_t d = 1; d < o.length; ++d) distinct_steps += code_of(d) != code_of(d - 1);
  r.neighbours.mark = mark;
  r.neighbours.summary =
      std::to_string(distinct_steps) + "/" + std::to_string(o.length - 1) + " steps d-1 -> d change the code";
  r.neighbours.detail = {{"distinct_adjacent_steps", distinct_steps}, {"steps", o.length - 1}};
  r.composability.mark = Verdict::Mark::pass;
  r.composability.summary = "exact: a function of k - q by construction";
  const int64_t last = code_of(o.length - 1);
  int64_t unseen = 0;
  std::set<int64_t> trained;
  for (int64_t d = 0; d < o.length; ++d) {
    trained.insert(code_of(d));
    if (with_negatives) trained.insert(code_of(-d));
  }
  for (int64_t d = o.length; d < o.extrapolate_to; ++d) unseen += !trained.count(code_of(d));
  r.generalization.mark = Verdict::Mark::pass;
  r.generalization.summary =
      "defined; " + std::to_string(unseen) + " distances in [L, L2) get an untrained code";
  r.generalization.detail = {{"defined_beyond_length", true},
                             {"untrained_codes_beyond", unseen},
                             {"code_of_last_trained_distance", last}};
}

}  // namespace posenc::analyze
