// tools/analyze/analyze.cc: see analyze.h. Per encoding, the codes the four conditions are judged
// on: absolute encodings by position (PE(p), p in [0, L2)); relative encodings by distance (the
// T5 bucket or clipped row of d, ALiBi's per-head penalty, Transformer-XL's R_d, RoPE's rotation
// [cos d theta | sin d theta], which is what q_m . k_n depends on).
#include "analyze.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>

#include "metrics.h"
#include "posenc/posenc.h"

namespace posenc::analyze {
namespace {

constexpr double kUniqueRatio = 1e-3;     // min distance / mean distance
constexpr double kNeighbourRatio = 1e-3;  // min adjacent distance / mean distance: not merged
constexpr double kNeighbourSpread = 2.0;  // max / min adjacent distance: consistent steps
constexpr double kLinearResidual = 1e-6;  // relative least-squares residual of M_k
constexpr double kRelativeDeviation = 1e-4;  // RoPE: max |q_m.k_n - g(m - n)| / max |q_m.k_n|
const int64_t kOffsets[] = {1, 2, 4, 8, 16};

std::string fmt(double x, int precision = 3) {
  std::ostringstream os;
  os << std::setprecision(precision) << x;
  return os.str();
}
std::vector<int64_t> range(int64_t lo, int64_t hi) {
  std::vector<int64_t> r;
  for (int64_t i = lo; i < hi; ++i) r.push_back(i);
  return r;
}
Codes rows(const Codes& c, int64_t lo, int64_t hi) {
  Codes r{hi - lo, c.dim, std::vector<double>(c.data.begin() + lo * c.dim, c.data.begin() + hi * c.dim)};
  return r;
}
Codes from_floats(const std::vector<float>& f, int64_t n, int64_t dim) { return {n, dim, std::vector<double>(f.begin(), f.end())}; }
std::vector<int64_t> powers_of_two(int64_t upto) {
  std::vector<int64_t> r;
  for (int64_t d = 1; d <= upto; d *= 2) r.push_back(d);
  return r;
}

// The conditions judged on continuous codes (rows = positions or distances 0 .. L2 - 1).
void judge_continuous(const Options& o, const Codes& all, Report& r, bool judge_composability) {
  const Codes trained = rows(all, 0, o.length), fresh = rows(all, o.length, all.n);
  const Uniqueness u = uniqueness(trained);
  const double ratio = u.mean_distance > 0 ? u.min_distance / u.mean_distance : 0;
  r.uniqueness.mark = ratio > kUniqueRatio ? Verdict::Mark::pass : Verdict::Mark::fail;
  r.uniqueness.summary = "min dist " + fmt(u.min_distance) + " (" + std::to_string(u.a) + "," + std::to_string(u.b) + ")";
  r.uniqueness.detail = {{"min_distance", u.min_distance}, {"pair", {u.a, u.b}}, {"mean_distance", u.mean_distance}, {"ratio", ratio}};

  const Neighbours nb = neighbours(trained, o.horizon);
  const bool monotone = nb.first_violation < 0 || nb.first_violation >= o.horizon;
  const bool consistent = nb.max_ratio <= kNeighbourSpread * nb.min_ratio;
  r.neighbours.mark = nb.min_ratio >= kNeighbourRatio && consistent ? Verdict::Mark::pass : Verdict::Mark::fail;
  r.neighbours.summary = "adjacent " + fmt(nb.min_ratio, 2) + (consistent ? "" : "-" + fmt(nb.max_ratio, 2)) + " of mean; similarity " +
                         (monotone ? "falls to lag " + std::to_string(o.horizon) : "rises at lag " + std::to_string(nb.first_violation + 1));
  r.neighbours.detail = {{"adjacent_over_mean_min", nb.min_ratio}, {"min_at", {nb.min_at, nb.min_at + 1}},
                         {"adjacent_over_mean_max", nb.max_ratio}, {"max_at", {nb.max_at, nb.max_at + 1}},
                         {"similarity_by_lag", nb.similarity}, {"first_violation_lag", nb.first_violation}};

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
  r.generalization.summary = std::string(nv.new_max_abs <= nv.trained_max_abs * (1 + 1e-3) ? "bounded" : "grows") +
                             ", new codes " + fmt(nv.max_ratio, 2) + " steps from trained";
  r.generalization.detail = {{"defined_beyond_length", true}, {"trained_max_abs", nv.trained_max_abs}, {"new_max_abs", nv.new_max_abs},
                             {"nearest_trained_over_adjacent_max", nv.max_ratio}, {"nearest_trained_over_adjacent_mean", nv.mean_ratio}};
}

// Discrete relative codes (bucket / row of a distance): merges are where offsets stop being told apart.
void judge_discrete(const Options& o, const std::function<int64_t(int64_t)>& code_of, bool with_negatives, Report& r,
                    const std::string& why) {
  const int64_t merged = first_merged_distance(code_of, o.length, with_negatives);
  const Verdict::Mark mark = merged < 0 ? Verdict::Mark::pass : Verdict::Mark::fail;
  r.uniqueness.mark = mark;
  r.uniqueness.summary = merged < 0 ? "every distance < L distinct" : "distances merge from d = " + std::to_string(merged);
  r.uniqueness.detail = {{"first_merged_distance", merged}, {"why", why}};
  int64_t distinct_steps = 0;
  for (int64_t d = 1; d < o.length; ++d) distinct_steps += code_of(d) != code_of(d - 1);
  r.neighbours.mark = mark;
  r.neighbours.summary = std::to_string(distinct_steps) + "/" + std::to_string(o.length - 1) + " steps d-1 -> d change the code";
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
  r.generalization.summary = "defined; " + std::to_string(unseen) + " distances in [L, L2) get an untrained code";
  r.generalization.detail = {{"defined_beyond_length", true}, {"untrained_codes_beyond", unseen}, {"code_of_last_trained_distance", last}};
}

Report analyze_one(const Options& o, const EncodingInfo& info) {
  Report r;
  r.encoding = std::string(info.name);
  r.family = std::string(info.family);
  const int64_t L = o.length, L2 = o.extrapolate_to, D = o.dim;
  const std::vector<int64_t> all = range(0, L2);
  switch (info.kind) {
    case EncodingKind::none: {
      r.uniqueness = {Verdict::Mark::fail, "every position has the same (empty) code", {{"min_distance", 0.0}}};
      r.neighbours = {Verdict::Mark::fail, "no difference between neighbours", {}};
      r.composability = {Verdict::Mark::not_applicable, "no offsets to compose", {}};
      r.generalization = {Verdict::Mark::pass, "defined everywhere (nothing to extrapolate)", {{"defined_beyond_length", true}}};
      r.notes.push_back("none: causal decoders can still infer order from the mask (Haviv et al. 2022); this measures the code only");
      break;
    }
    case EncodingKind::sinusoidal: {
      SinusoidalConfig c;
      c.dim = D;
      std::vector<float> pe(L2 * D);
      sinusoidal_table(c, view(all.data(), {L2}), view(pe.data(), {L2, D}));
      judge_continuous(o, from_floats(pe, L2, D), r, true);
      break;
    }
    case EncodingKind::learned: {
      std::mt19937 rng(o.seed);
      std::normal_distribution<float> dist(0.0f, 0.02f);  // GPT-2's initialisation: an untrained table
      std::vector<float> table(L * D), pe(L * D);
      for (float& x : table) x = dist(rng);
      const std::vector<int64_t> trained = range(0, L);
      learned_lookup(view(table.data(), {L, D}), view(trained.data(), {L}), view(pe.data(), {L, D}));
      // Judge on [0, L) and one repeated row standing in for [L, L2), then replace generalization.
      judge_continuous(o, from_floats(pe, L, D), r, true);
      std::string error;
      try {
        std::vector<float> out(D);
        const int64_t past = L;
        learned_lookup(view(table.data(), {L, D}), view(&past, {1}), view(out.data(), {1, D}));
      } catch (const Error& e) {
        error = e.what();
      }
      r.generalization = {Verdict::Mark::fail, "undefined past L", {{"defined_beyond_length", false}, {"library_error", error}}};
      r.notes.push_back("learned: a random N(0, 0.02) table (untrained, seed " + std::to_string(o.seed) + "): uniqueness holds by chance, training decides the rest");
      break;
    }
    case EncodingKind::binary: {
      BinaryConfig c;
      c.bits = binary_bits_for_length(L);
      std::vector<float> pe(L * c.bits);
      const std::vector<int64_t> trained = range(0, L);
      binary_table(c, view(trained.data(), {L}), view(pe.data(), {L, c.bits}));
      judge_continuous(o, from_floats(pe, L, c.bits), r, true);
      // The bits are sized for L, as a model trained on L would be: positions from 2^bits on need more.
      const int64_t first_undefined = int64_t{1} << c.bits;
      std::string error;
      try {
        std::vector<float> out(c.bits);
        binary_table(c, view(&first_undefined, {1}), view(out.data(), {1, c.bits}));
      } catch (const Error& e) {
        error = e.what();
      }
      const bool defined = o.extrapolate_to <= first_undefined;
      r.generalization = {defined ? Verdict::Mark::pass : Verdict::Mark::fail,
                          "undefined from 2^" + std::to_string(c.bits) + " = " + std::to_string(first_undefined) + " on",
                          {{"defined_beyond_length", defined}, {"first_undefined_position", first_undefined}, {"library_error", error}}};
      // Seed 004's example: 7 = 0111 and 8 = 1000 differ in every low bit.
      const Codes codes = from_floats(pe, L, c.bits);
      auto hamming = [&](int64_t a, int64_t b) { return static_cast<int64_t>(std::lround(std::pow(distance(codes, a, b), 2) / 4)); };
      if (L > 8) {
        r.neighbours.detail["seed_example"] = {{"hamming_6_7", hamming(6, 7)}, {"hamming_7_8", hamming(7, 8)}};
        r.notes.push_back("binary: Hamming(6, 7) = " + std::to_string(hamming(6, 7)) + ", Hamming(7, 8) = " + std::to_string(hamming(7, 8)) +
                          " (seed 004: 0111 -> 1000), Hamming(" + std::to_string(L / 2 - 1) + ", " + std::to_string(L / 2) + ") = " +
                          std::to_string(hamming(L / 2 - 1, L / 2)));
      }
      break;
    }
    case EncodingKind::relative_bias: {
      const RelativeBiasConfig c = RelativeBiasConfig::clipped(1, 16);
      judge_discrete(o, [&](int64_t d) { return relative_bias_row(c, d); }, true, r, "clipped at |d| = 16 (deliberate)");
      break;
    }
    case EncodingKind::t5_bias: {
      const RelativeBiasConfig c = RelativeBiasConfig::t5(1, 32, 128, true);
      judge_discrete(o, [&](int64_t d) { return relative_bias_row(c, d); }, true, r,
                     "T5 buckets: 8 exact per side, then log-spaced to 128 (deliberate)");
      break;
    }
    case EncodingKind::shaw: {
      const int64_t k = 16;
      judge_discrete(o, [&](int64_t d) { return std::clamp<int64_t>(d, -k, k); }, true, r, "a^K, a^V rows clipped at |d| = 16 (deliberate)");
      break;
    }
    case EncodingKind::alibi: {
      AlibiConfig c;
      c.heads = 8;
      const std::vector<double> m = alibi_slopes(c);
      Codes codes{L2, c.heads, {}};
      for (int64_t d = 0; d < L2; ++d)
        for (int64_t h = 0; h < c.heads; ++h) codes.data.push_back(-m[h] * static_cast<double>(d));
      judge_continuous(o, codes, r, false);
      r.composability = {Verdict::Mark::pass, "exact: -m_h (q - k) by construction", r.composability.detail};
      r.generalization.summary = "defined; penalty grows linearly (far keys fade)";
      nlohmann::json curve = nlohmann::json::array();
      for (int64_t d : powers_of_two(L2)) curve.push_back({{"distance", d}, {"first_head", -m.front() * d}, {"last_head", -m.back() * d}});
      r.decay = {{"kind", "alibi penalty -m_h d"}, {"heads", c.heads}, {"curve", curve}};
      break;
    }
    case EncodingKind::transformer_xl: {
      TransformerXLConfig c;
      c.d_model = D;
      c.heads = 1;
      c.head_dim = D;
      std::vector<float> R(L2 * D);
      transformer_xl_sinusoid(c, view(all.data(), {L2}), view(R.data(), {L2, D}));
      judge_continuous(o, from_floats(R, L2, D), r, false);
      r.composability.mark = Verdict::Mark::pass;
      r.composability.summary = "exact: terms of q - k by construction";
      r.notes.push_back("transformer_xl: codes are R_d by distance d = q - k (the sinusoid W_R projects)");
      break;
    }
    case EncodingKind::rope: {
      RopeConfig c;
      c.head_dim = D;
      const Rope rope(c);
      const RopeFrequencies f = rope.frequencies();
      const int64_t pairs = static_cast<int64_t>(f.inv_freq.size());
      Codes codes{L2, 2 * pairs, {}};  // the rotation by d: [cos d theta | sin d theta]
      for (int64_t d = 0; d < L2; ++d) {
        for (int64_t j = 0; j < pairs; ++j) codes.data.push_back(std::cos(static_cast<double>(d) * f.inv_freq[j]));
        for (int64_t j = 0; j < pairs; ++j) codes.data.push_back(std::sin(static_cast<double>(d) * f.inv_freq[j]));
      }
      judge_continuous(o, codes, r, false);
      // q_m . k_n through the library's fp32 kernel: a function of m - n only?
      const int64_t n_pos = std::min<int64_t>(L, 256);
      std::mt19937 rng(o.seed + 1);
      std::normal_distribution<float> dist;
      std::vector<float> q(D), k(D), qr(n_pos * D), kr(n_pos * D);
      for (float& x : q) x = dist(rng);
      for (float& x : k) x = dist(rng);
      for (int64_t p = 0; p < n_pos; ++p) std::copy(q.begin(), q.end(), qr.begin() + p * D), std::copy(k.begin(), k.end(), kr.begin() + p * D);
      const std::vector<int64_t> pos = range(0, n_pos);
      rope.forward(view(qr.data(), {1, n_pos, 1, D}), view(pos.data(), {n_pos}));
      rope.forward(view(kr.data(), {1, n_pos, 1, D}), view(pos.data(), {n_pos}));
      double max_abs = 0;
      auto score = [&](int64_t a, int64_t b) {
        double s = 0;
        for (int64_t e = 0; e < D; ++e) s += static_cast<double>(qr[a * D + e]) * kr[b * D + e];
        max_abs = std::max(max_abs, std::abs(s));
        return s;
      };
      const double dev = max_deviation_from_relative(score, n_pos) / max_abs;
      r.composability = {dev < kRelativeDeviation ? Verdict::Mark::pass : Verdict::Mark::fail,
                         "q_m.k_n off a function of m-n by " + fmt(dev, 2),
                         {{"max_relative_deviation", dev}, {"positions", n_pos}, {"computed_with", "posenc::Rope fp32"}}};
      nlohmann::json curve = nlohmann::json::array();
      for (int64_t d : powers_of_two(L2)) curve.push_back({{"distance", d}, {"bound", rope_decay_bound(f.inv_freq, static_cast<double>(d))}});
      r.decay = {{"kind", "RoFormer bound (1/(d/2)) sum_j |S_j|"}, {"head_dim", D}, {"base", c.base}, {"curve", curve}};
      r.notes.push_back("rope: codes are the rotations R(d) by distance; |R(d+1) - R(d)| is the same for every d");
      break;
    }
  }
  return r;
}

const char* mark_text(Verdict::Mark m) {
  switch (m) {
    case Verdict::Mark::pass: return "✓";
    case Verdict::Mark::fail: return "✗";
    default: return "–";
  }
}

}  // namespace

void validate(const Options& o) {
  if (o.length < 2) throw Error("--length = " + std::to_string(o.length) + " is invalid: must be >= 2");
  if (o.length > 8192) throw Error("--length = " + std::to_string(o.length) + " is invalid: at most 8192 (pairwise metrics are O(L^2))");
  if (o.extrapolate_to <= o.length)
    throw Error("--extrapolate-to = " + std::to_string(o.extrapolate_to) + " is invalid: must be > --length (" + std::to_string(o.length) + ")");
  if (o.extrapolate_to > 65536) throw Error("--extrapolate-to = " + std::to_string(o.extrapolate_to) + " is invalid: at most 65536");
  if (o.dim < 2 || o.dim % 2 != 0 || o.dim > 1024)
    throw Error("--dim = " + std::to_string(o.dim) + " is invalid: must be even, in [2, 1024]");
  if (o.horizon < 1) throw Error("--horizon = " + std::to_string(o.horizon) + " is invalid: must be >= 1");
  for (const std::string& e : o.encodings) encoding_info(e);  // throws, listing the known names
}

std::vector<Report> analyze(const Options& o) {
  validate(o);
  std::vector<Report> out;
  for (const EncodingInfo& info : all_encodings())
    if (o.encodings.empty() || std::find(o.encodings.begin(), o.encodings.end(), info.name) != o.encodings.end())
      out.push_back(analyze_one(o, info));
  return out;
}

std::vector<std::string> thresholds(const Options& o) {
  return {"uniqueness ✓: min distance between codes of [0, L) > " + fmt(kUniqueRatio) + " x mean distance (discrete codes: no two distances < L share one)",
          "neighbours ✓: every adjacent distance >= " + fmt(kNeighbourRatio) + " x the mean distance (not merged) and within a factor " +
              fmt(kNeighbourSpread) + " of each other (consistent steps); reported, not judged: whether mean similarity falls over lags 0.." +
              std::to_string(o.horizon),
          "composability ✓: PE(p+k) = M_k PE(p) with relative residual < " + fmt(kLinearResidual) + " for k in 1,2,4,8,16; RoPE: q_m.k_n within " +
              fmt(kRelativeDeviation) + " of a function of m-n; bias/relative terms: by construction",
          "generalization ✓: defined for every position/distance in [L, L2)"};
}

nlohmann::json to_json(const Options& o, const std::vector<Report>& reports) {
  nlohmann::json j;
  j["options"] = {{"length", o.length}, {"extrapolate_to", o.extrapolate_to}, {"dim", o.dim}, {"horizon", o.horizon}, {"seed", o.seed}};
  j["thresholds"] = thresholds(o);
  auto verdict = [](const Verdict& v) {
    return nlohmann::json{{"mark", v.mark == Verdict::Mark::pass ? "pass" : v.mark == Verdict::Mark::fail ? "fail" : "n/a"},
                          {"summary", v.summary}, {"detail", v.detail}};
  };
  for (const Report& r : reports)
    j["encodings"].push_back({{"encoding", r.encoding}, {"family", r.family}, {"uniqueness", verdict(r.uniqueness)},
                              {"neighbours", verdict(r.neighbours)}, {"composability", verdict(r.composability)},
                              {"generalization", verdict(r.generalization)}, {"decay", r.decay}, {"notes", r.notes}});
  return j;
}

namespace {
void print_table(const Options& o, const std::vector<Report>& reports, std::ostream& os) {
  os << "posenc analyze: L = " << o.length << ", L2 = " << o.extrapolate_to << ", dim = " << o.dim << "\n\n";
  os << "| encoding | uniqueness | neighbours | composability | generalization |\n|---|---|---|---|---|\n";
  for (const Report& r : reports)
    os << "| " << r.encoding << " | " << mark_text(r.uniqueness.mark) << " " << r.uniqueness.summary << " | " << mark_text(r.neighbours.mark)
       << " " << r.neighbours.summary << " | " << mark_text(r.composability.mark) << " " << r.composability.summary << " | "
       << mark_text(r.generalization.mark) << " " << r.generalization.summary << " |\n";
  os << "\nDecay (distance: value):\n";
  for (const Report& r : reports) {
    if (r.decay.is_null()) continue;
    os << "  " << r.encoding << " (" << r.decay["kind"].get<std::string>() << "):";
    for (const auto& p : r.decay["curve"])
      os << " " << p["distance"].get<int64_t>() << ": " << fmt(p.contains("bound") ? p["bound"].get<double>() : p["first_head"].get<double>());
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
  auto mark = [](Verdict::Mark m) { return m == Verdict::Mark::pass ? "pass" : m == Verdict::Mark::fail ? "fail" : "n/a"; };
  os << "encoding,family,uniqueness,uniqueness_summary,neighbours,neighbours_summary,composability,composability_summary,generalization,generalization_summary\n";
  for (const Report& r : reports)
    os << r.encoding << "," << quote(r.family) << "," << mark(r.uniqueness.mark) << "," << quote(r.uniqueness.summary) << ","
       << mark(r.neighbours.mark) << "," << quote(r.neighbours.summary) << "," << mark(r.composability.mark) << ","
       << quote(r.composability.summary) << "," << mark(r.generalization.mark) << "," << quote(r.generalization.summary) << "\n";
}
}  // namespace

void add_analyze_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto encodings = std::make_shared<std::string>("all");
  auto format = std::make_shared<std::string>("table");
  CLI::App* cmd = app.add_subcommand("analyze", "Measure seed 004's four conditions (and decay) for every encoding");
  cmd->add_option("--encodings,-e", *encodings, "all, or a comma-separated list of names (see `posenc list`)")->capture_default_str();
  cmd->add_option("--length,-L", o->length, "L: positions [0, L) are the trained range")->capture_default_str();
  cmd->add_option("--extrapolate-to", o->extrapolate_to, "L2: generalization is judged on [L, L2)")->capture_default_str();
  cmd->add_option("--dim,-d", o->dim, "code width (model dim; head_dim for rope)")->capture_default_str();
  cmd->add_option("--horizon", o->horizon, "lags over which similarity must fall")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the untrained learned table")->capture_default_str();
  cmd->add_option("--format,-f", *format, "table, json or csv")->capture_default_str();
  cmd->callback([o, encodings, format] {
    if (*format != "table" && *format != "json" && *format != "csv")
      throw Error("--format = '" + *format + "' is invalid: expected table, json or csv");
    o->encodings.clear();
    if (*encodings != "all") {
      std::stringstream ss(*encodings);
      std::string name;
      while (std::getline(ss, name, ',')) o->encodings.push_back(name);
    }
    const std::vector<Report> reports = analyze(*o);
    if (*format == "json") std::cout << to_json(*o, reports).dump(2) << "\n";
    else if (*format == "csv") print_csv(reports, std::cout);
    else print_table(*o, reports, std::cout);
  });
}

}  // namespace posenc::analyze
