// registry/entries/vectors.cc: the vector terms inside attention (Shaw et al.'s a^K and a^V
// rows, Transformer-XL's u, v and W_R R_{q-k}). Analysis: the code of a distance d (Shaw's clipped
// row; Transformer-XL's sinusoid R_d).
#include <algorithm>

#include "registry/judge.h"
#include "registry/entries/entries.h"
#include "posenc/bias.h"
#include "posenc/error.h"
#include "posenc/shaw.h"
#include "posenc/transformer_xl.h"

namespace posenc::registry {
namespace {
using analyze::Report;
using analyze::Verdict;
using Array = Table;
using namespace table;

// ---- shaw
Array tabulate_shaw(const TableRequest& r) {
  const int64_t kmax = r.options.max_distance > 0 ? r.options.max_distance : 4;
  validate(ShawConfig{kmax, 1});
  const RelativeBiasConfig rows = RelativeBiasConfig::clipped(1, kmax);
  const double nq = static_cast<double>(r.positions.size()), nk = static_cast<double>(r.keys.size());
  require_table_memory(r, "shaw", "--max-distance " + std::to_string(kmax), nq * nk, nq + nk, 0, true);
  Array a = pair_codes(
      "Shaw et al. table row clip(key - query, -k, k) + k (query, key), k = " + std::to_string(kmax),
      r.positions, r.keys, [&](int64_t d) { return relative_bias_row(rows, d); });
  a.notes.push_back(
      "a^K and a^V rows are learned vectors shared by all heads; these are the rows each pair reads");
  return a;
}
void analyze_shaw(const analyze::Options& o, Report& r) {
  const int64_t k = 16;
  analyze::judge_discrete(
      o, [&](int64_t d) { return std::clamp<int64_t>(d, -k, k); }, true, r,
      "a^K, a^V rows clipped at |d| = 16 (deliberate)");
}
ShawConfig lab_shaw(const LabModel& m) { return {m.options->max_distance, m.head_dim}; }
void validate_shaw(const LabModel& m) { validate(lab_shaw(m)); }
std::vector<LabTensor> shaw_tensors(const LabModel& m) {
  const int64_t rows = lab_shaw(m).num_rows();
  return {{"attn.shaw_a_k", {rows, m.head_dim}}, {"attn.shaw_a_v", {rows, m.head_dim}}};
}
void configure_shaw(const LabModel& m, const TensorLookup& params, AttentionConfig& config) {
  const ShawConfig shaw = lab_shaw(m);
  config.shaw = AttentionShaw{shaw, view(params("attn.shaw_a_k"), {shaw.num_rows(), m.head_dim}),
                              view(params("attn.shaw_a_v"), {shaw.num_rows(), m.head_dim})};
}
void shaw_grads(const LabModel& m, const AttentionConfig& config, const TensorLookup& grads,
                AttentionGrads& out) {
  out.shaw_a_k = view(grads("attn.shaw_a_k"), {config.shaw->a_k.shape[0], m.head_dim});
  out.shaw_a_v = view(grads("attn.shaw_a_v"), {config.shaw->a_v.shape[0], m.head_dim});
}

// ---- transformer_xl
Array tabulate_transformer_xl(const TableRequest& r) {
  const TableOptions& o = r.options;
  const std::vector<int64_t>& distances = r.positions;
  const TransformerXLConfig c{o.dim, 1, 1, o.base};
  validate(c);
  const double P = static_cast<double>(distances.size());
  require_table_memory(r, "transformer_xl", "--dim " + std::to_string(o.dim), P * o.dim, P + o.dim);
  Array a{"Transformer-XL R_delta for delta = query - key (delta, dim), split layout [sin | cos]",
          "",
          "delta",
          names(distances),
          numbered("d", o.dim),
          1,
          {},
          {}};
  a.data.resize(distances.size() * o.dim);
  transformer_xl_sinusoid(c, view(distances.data(), {size(distances)}),
                          view(a.data.data(), {size(distances), o.dim}));
  return a;
}
void analyze_transformer_xl(const analyze::Options& o, Report& r) {
  const int64_t L2 = o.extrapolate_to, D = o.dim;
  const std::vector<int64_t> all = analyze::range(0, L2);
  TransformerXLConfig c;
  c.d_model = D;
  c.heads = 1;
  c.head_dim = D;
  std::vector<float> R(L2 * D);
  transformer_xl_sinusoid(c, view(all.data(), {L2}), view(R.data(), {L2, D}));
  analyze::judge_continuous(o, analyze::from_floats(R, L2, D), r, false);
  r.composability.mark = Verdict::Mark::pass;
  r.composability.summary = "exact: terms of q - k by construction";
  r.notes.push_back("transformer_xl: codes are R_d by distance d = q - k (the sinusoid W_R projects)");
}
TransformerXLConfig lab_transformer_xl(const LabModel& m) {
  return {m.d_model, m.heads, m.head_dim, 10000.0};
}
void validate_transformer_xl(const LabModel& m) { validate(lab_transformer_xl(m)); }
std::vector<LabTensor> transformer_xl_tensors(const LabModel& m) {
  const int64_t H = m.heads, D = m.head_dim;
  return {{"attn.transformer_xl_u", {H, D}},
          {"attn.transformer_xl_v", {H, D}},
          {"attn.transformer_xl_w_r", {H * D, m.d_model}}};
}
void configure_transformer_xl(const LabModel& m, const TensorLookup& params, AttentionConfig& config) {
  const int64_t H = m.heads, D = m.head_dim;
  config.transformer_xl =
      AttentionTransformerXL{lab_transformer_xl(m), view(params("attn.transformer_xl_u"), {H, D}),
                             view(params("attn.transformer_xl_v"), {H, D}),
                             view(params("attn.transformer_xl_w_r"), {H * D, m.d_model})};
}
void transformer_xl_grads(const LabModel& m, const AttentionConfig&, const TensorLookup& grads,
                          AttentionGrads& out) {
  const int64_t H = m.heads, D = m.head_dim;
  out.transformer_xl_u = view(grads("attn.transformer_xl_u"), {H, D});
  out.transformer_xl_v = view(grads("attn.transformer_xl_v"), {H, D});
  out.transformer_xl_w_r = view(grads("attn.transformer_xl_w_r"), {H * D, m.d_model});
}

}  // namespace

Entry shaw_entry() {
  Entry e{&encoding_info(EncodingKind::shaw), tabulate_shaw, analyze_shaw, {}};
  e.lab = {validate_shaw, nullptr, shaw_tensors, nullptr, nullptr, configure_shaw, shaw_grads};
  return e;
}

Entry transformer_xl_entry() {
  Entry e{&encoding_info(EncodingKind::transformer_xl), tabulate_transformer_xl, analyze_transformer_xl, {}};
  e.lab = {
      validate_transformer_xl, nullptr, transformer_xl_tensors, nullptr, nullptr, configure_transformer_xl,
      transformer_xl_grads};
  return e;
}

}  // namespace posenc::registry
