// registry/entries/bias.cc: the scalar biases on the logits (clipped relative, T5 buckets,
// ALiBi). Analysis: the code of a distance d (the table row or bucket it reads; ALiBi's per-head
// penalty -m_h d).
#include <algorithm>
#include <sstream>

#include "registry/judge.h"
#include "registry/entries/entries.h"
#include "posenc/bias.h"
#include "posenc/error.h"

namespace posenc::registry {
namespace {
using analyze::Report;
using analyze::Verdict;
using Array = Table;
using namespace table;

// ---- relative (clipped) and t5: a learned table read at a row per distance
RelativeBiasConfig table_config(const TableOptions& o, bool t5) {
  return t5 ? RelativeBiasConfig::t5(o.heads, o.num_buckets, o.max_distance > 0 ? o.max_distance : 128,
                                     !o.causal)
            : RelativeBiasConfig::clipped(o.heads, o.max_distance > 0 ? o.max_distance : 4);
}
Array tabulate_bias_table(const TableRequest& r, bool t5) {
  const TableOptions& o = r.options;
  const RelativeBiasConfig c = table_config(o, t5);
  validate(c);
  const double nq = static_cast<double>(r.positions.size()), nk = static_cast<double>(r.keys.size());
  const std::string flags = "--heads " + std::to_string(c.heads) +
                            (t5 ? " --num-buckets " + std::to_string(c.num_buckets)
                                : " --max-distance " + std::to_string(c.max_distance));
  const bool show_rows = o.show == "rows" || o.show == "buckets";
  require_table_memory(r, t5 ? "t5" : "relative", flags, show_rows ? nq * nk : c.heads * nq * nk, nq + nk,
                       show_rows ? 0.0 : 4.0 * static_cast<double>(c.num_rows()) * c.heads, true);
  if (show_rows)
    return pair_codes(
        t5 ? "T5 bucket of key - query (query, key)" : "clipped distance row of key - query (query, key)",
        r.positions, r.keys, [&](int64_t d) { return relative_bias_row(c, d); });
  if (!o.show.empty() && o.show != "bias")
    throw Error("--show = '" + o.show + "' is invalid: expected bias or buckets");
  const std::vector<float> table = normal_table(c.num_rows() * c.heads, o.seed, 1.0f);
  const std::string title = std::string(t5 ? "T5" : "clipped relative") +
                            " bias (head, query, key) from a random N(0, 1) table, seed " +
                            std::to_string(o.seed);
  Array a = bias_array(title, c.heads, r.positions, r.keys);
  relative_bias(c, view(table.data(), {c.num_rows(), c.heads}), view(r.positions.data(), {size(r.positions)}),
                view(r.keys.data(), {size(r.keys)}),
                view(a.data.data(), {c.heads, size(r.positions), size(r.keys)}));
  return a;
}
Array tabulate_relative(const TableRequest& r) { return tabulate_bias_table(r, false); }
Array tabulate_t5(const TableRequest& r) { return tabulate_bias_table(r, true); }

void analyze_relative(const analyze::Options& o, Report& r) {
  const RelativeBiasConfig c = RelativeBiasConfig::clipped(1, 16);
  analyze::judge_discrete(
      o, [&](int64_t d) { return relative_bias_row(c, d); }, true, r, "clipped at |d| = 16 (deliberate)");
}
void analyze_t5(const analyze::Options& o, Report& r) {
  const RelativeBiasConfig c = RelativeBiasConfig::t5(1, 32, 128, true);
  analyze::judge_discrete(
      o, [&](int64_t d) { return relative_bias_row(c, d); }, true, r,
      "T5 buckets: 8 exact per side, then log-spaced to 128 (deliberate)");
}

// The lab's tables: causal T5 (its buckets are one-sided) or clipped, a row per head.
RelativeBiasConfig lab_config(const LabModel& m, bool t5) {
  const EncodingOptions& o = *m.options;
  return t5 ? RelativeBiasConfig::t5(m.heads, o.t5_buckets, o.t5_max_distance, false)
            : RelativeBiasConfig::clipped(m.heads, o.max_distance);
}
template <bool T5>
void validate_bias_table(const LabModel& m) {
  validate(lab_config(m, T5));
}
template <bool T5>
std::vector<LabTensor> bias_table_tensors(const LabModel& m) {
  return {{"attn.relative_bias", {lab_config(m, T5).num_rows(), m.heads}}};
}
template <bool T5>
void configure_bias_table(const LabModel& m, const TensorLookup& params, AttentionConfig& config) {
  config.bias.kind = AttentionBias::Kind::relative;
  config.bias.relative = lab_config(m, T5);
  config.bias.relative_table = view(params("attn.relative_bias"), {config.bias.relative.num_rows(), m.heads});
}
void bias_table_grads(const LabModel& m, const AttentionConfig& config, const TensorLookup& grads,
                      AttentionGrads& out) {
  out.relative_table = view(grads("attn.relative_bias"), {config.bias.relative_table.shape[0], m.heads});
}
template <bool T5>
LabHooks bias_table_hooks() {
  LabHooks h;
  h.validate = validate_bias_table<T5>;
  h.layer_tensors = bias_table_tensors<T5>;
  h.configure_attention = configure_bias_table<T5>;
  h.attention_grads = bias_table_grads;
  return h;
}

// ---- alibi
Array tabulate_alibi(const TableRequest& r) {
  const TableOptions& o = r.options;
  AlibiConfig c;
  c.heads = o.heads;
  c.symmetric = o.symmetric;
  c.alibi_bias_max = o.alibi_bias_max;
  if (o.slopes == "mpt")
    c.slopes = AlibiSlopes::mpt;
  else if (o.slopes != "bloom")
    throw Error("--slopes = '" + o.slopes + "' is invalid: expected bloom or mpt");
  validate(c);
  const double cells = static_cast<double>(r.positions.size()) * static_cast<double>(r.keys.size());
  // Beside the bias: the slopes, in double and as the note's text.
  require_table_memory(r, "alibi", "--heads " + std::to_string(c.heads), c.heads * cells,
                       static_cast<double>(r.positions.size() + r.keys.size()), 32.0 * c.heads, true);
  Array a = bias_array("alibi bias (head, query, key)", c.heads, r.positions, r.keys);
  const int64_t nq = size(r.positions), nk = size(r.keys);
  alibi_bias(c, view(r.positions.data(), {nq}), view(r.keys.data(), {nk}),
             view(a.data.data(), {c.heads, nq, nk}));
  std::ostringstream slopes;
  for (double s : alibi_slopes(c)) slopes << s << " ";
  a.notes.push_back("slopes: " + slopes.str());
  return a;
}
void analyze_alibi(const analyze::Options& o, Report& r) {
  const int64_t L2 = o.extrapolate_to;
  AlibiConfig c;
  c.heads = 8;
  const std::vector<double> m = alibi_slopes(c);
  analyze::Codes codes{L2, c.heads, {}};
  for (int64_t d = 0; d < L2; ++d)
    for (int64_t h = 0; h < c.heads; ++h) codes.data.push_back(-m[h] * static_cast<double>(d));
  analyze::judge_continuous(o, codes, r, false);
  r.composability = {Verdict::Mark::pass, "exact: -m_h (q - k) by construction", r.composability.detail};
  r.generalization.summary = "defined; penalty grows linearly (far keys fade)";
  nlohmann::json curve = nlohmann::json::array();
  for (int64_t d : analyze::powers_of_two(L2))
    curve.push_back({{"distance", d}, {"first_head", -m.front() * d}, {"last_head", -m.back() * d}});
  r.decay = {{"kind", "alibi penalty -m_h d"}, {"heads", c.heads}, {"curve", curve}};
}
void validate_alibi(const LabModel& m) { validate(AlibiConfig{m.heads}); }
void configure_alibi(const LabModel& m, const TensorLookup&, AttentionConfig& config) {
  config.bias.kind = AttentionBias::Kind::alibi;
  config.bias.alibi = AlibiConfig{m.heads};
}

}  // namespace

Entry relative_bias_entry() {
  return {&encoding_info(EncodingKind::relative_bias), tabulate_relative, analyze_relative,
          bias_table_hooks<false>()};
}

Entry t5_bias_entry() {
  return {&encoding_info(EncodingKind::t5_bias), tabulate_t5, analyze_t5, bias_table_hooks<true>()};
}

Entry alibi_entry() {
  Entry e{&encoding_info(EncodingKind::alibi), tabulate_alibi, analyze_alibi, {}};
  e.lab.validate = validate_alibi;
  e.lab.configure_attention = configure_alibi;
  return e;
}

}  // namespace posenc::registry
