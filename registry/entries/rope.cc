// registry/entries/rope.cc: RoPE, the rotation of q and k. Analysis: the rotation R(d) by
// distance d ([cos d theta | sin d theta], what q_m . k_n depends on), and the library's fp32
// kernel checked to make scores a function of m - n. The lab builds the Rope itself (it rescales
// it at evaluation time, lab/positional.h) and hands it to this entry in LabModel::rope.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <random>

#include "registry/judge.h"
#include "registry/entries/entries.h"
#include "posenc/error.h"
#include "posenc/rope.h"

namespace posenc::registry {
namespace {
using analyze::Report;
using analyze::Verdict;
using Array = Table;
using namespace table;

RopeConfig table_rope_config(const TableOptions& o) {
  if (!o.config.empty()) {
    std::vector<std::string> warnings;
    RopeConfig c = rope_config_from_hf_file(o.config, &warnings);
    for (const std::string& w : warnings) std::cerr << "posenc: warning: " << w << "\n";
    return c;
  }
  RopeConfig c;
  c.head_dim = o.head_dim;
  c.rotary_dim = o.rotary_dim;
  c.base = o.base;
  c.max_position_embeddings = o.max_position_embeddings;
  if (o.layout == "interleaved")
    c.layout = RopeLayout::interleaved;
  else if (!o.layout.empty() && o.layout != "half")
    throw Error("--layout = '" + o.layout + "' is invalid for rope: expected half or interleaved");
  const std::vector<std::pair<std::string, RopeScalingType>> types = {{"default", RopeScalingType::none},
                                                                      {"linear", RopeScalingType::linear},
                                                                      {"dynamic", RopeScalingType::dynamic},
                                                                      {"yarn", RopeScalingType::yarn},
                                                                      {"llama3", RopeScalingType::llama3}};
  const auto type =
      std::find_if(types.begin(), types.end(), [&](const auto& t) { return t.first == o.scaling; });
  if (type == types.end())
    throw Error("--scaling = '" + o.scaling +
                "' is invalid: expected default, linear, dynamic, yarn or llama3 "
                "(longrope needs factor lists: use --config with a config.json)");
  c.scaling.type = type->second;
  c.scaling.factor = o.factor;
  c.scaling.original_max_position_embeddings = o.original_max;
  return c;
}

Array tabulate_rope(const TableRequest& r) {
  const TableOptions& o = r.options;
  const std::vector<int64_t>& pos = r.positions;
  const Rope rope(table_rope_config(o));
  if (rope.config().num_position_streams() != 1)
    throw Error("--config describes a multimodal rope (" +
                std::string(rope_multimodal_name(rope.config().multimodal)) +
                "): posenc encode shows single-stream positions only");
  const int64_t pairs = rope.config().effective_rotary_dim() / 2;
  const std::string show = o.show.empty() ? "cos" : o.show;
  const double P = static_cast<double>(pos.size());
  // cos and sin in fp32 beside the table (a copy of one of them).
  require_table_memory(
      r, "rope",
      (o.config.empty() ? "--head-dim " + std::to_string(o.head_dim) : "--config " + o.config) + " (" +
          std::to_string(pairs) + " rotated pairs)",
      P * pairs, P + pairs, 8.0 * P * pairs);
  const int64_t last = *std::max_element(pos.begin(), pos.end());
  const RopeFrequencies f = rope.frequencies(last < std::numeric_limits<int64_t>::max() ? last + 1 : last);
  if (show == "inv-freq") {
    Array a{"rope inverse frequencies (pair) in radians per position",
            "",
            "pair",
            numbered("", pairs),
            {"inv_freq"},
            1,
            {},
            {}};
    for (double w : f.inv_freq) a.data.push_back(static_cast<float>(w));
    a.notes.push_back("attention_factor = " + std::to_string(f.attention_factor));
    return a;
  }
  if (show != "cos" && show != "sin")
    throw Error("--show = '" + show + "' is invalid for rope: expected cos, sin or inv-freq");
  std::vector<float> cs(pos.size() * pairs), sn(pos.size() * pairs);
  rope.cos_sin(view(pos.data(), {size(pos)}), view(cs.data(), {size(pos), pairs}),
               view(sn.data(), {size(pos), pairs}));
  Array a{"rope " + show + "(position * inv_freq) * attention_factor (position, pair)",
          "",
          "position",
          names(pos),
          numbered("p", pairs),
          1,
          show == "cos" ? cs : sn,
          {}};
  a.notes.push_back(std::string("layout ") + rope_layout_name(rope.config().layout) + ", scaling " +
                    rope_scaling_name(rope.config().scaling.type) + ", attention_factor " +
                    std::to_string(f.attention_factor) +
                    (rope.config().reversed ? ", reversed (angles -position * inv_freq)" : ""));
  return a;
}

// q_m . k_n through the library's fp32 kernel for one random q and k at positions [0, n_pos): the
// largest deviation from a function of m - n, relative to the largest score.
double relative_deviation(const Rope& rope, int64_t n_pos, int64_t D, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> q(D), k(D), qr(n_pos * D), kr(n_pos * D);
  for (float& x : q) x = dist(rng);
  for (float& x : k) x = dist(rng);
  for (int64_t p = 0; p < n_pos; ++p) {
    std::copy(q.begin(), q.end(), qr.begin() + p * D);
    std::copy(k.begin(), k.end(), kr.begin() + p * D);
  }
  const std::vector<int64_t> pos = analyze::range(0, n_pos);
  rope.forward(view(qr.data(), {1, n_pos, 1, D}), view(pos.data(), {n_pos}));
  rope.forward(view(kr.data(), {1, n_pos, 1, D}), view(pos.data(), {n_pos}));
  double max_abs = 0;
  auto score = [&](int64_t a, int64_t b) {
    double s = 0;
    for (int64_t e = 0; e < D; ++e) s += static_cast<double>(qr[a * D + e]) * kr[b * D + e];
    max_abs = std::max(max_abs, std::abs(s));
    return s;
  };
  return analyze::max_deviation_from_relative(score, n_pos) / max_abs;
}

void analyze_rope(const analyze::Options& o, Report& r) {
  const int64_t L2 = o.extrapolate_to, D = o.dim;
  RopeConfig c;
  c.head_dim = D;
  const Rope rope(c);
  const RopeFrequencies f = rope.frequencies();
  const int64_t pairs = static_cast<int64_t>(f.inv_freq.size());
  analyze::Codes codes{L2, 2 * pairs, {}};  // the rotation by d: [cos d theta | sin d theta]
  for (int64_t d = 0; d < L2; ++d) {
    for (int64_t j = 0; j < pairs; ++j)
      codes.data.push_back(std::cos(static_cast<double>(d) * f.inv_freq[j]));
    for (int64_t j = 0; j < pairs; ++j)
      codes.data.push_back(std::sin(static_cast<double>(d) * f.inv_freq[j]));
  }
  analyze::judge_continuous(o, codes, r, false);
  const int64_t n_pos = std::min<int64_t>(o.length, 256);
  const double dev = relative_deviation(rope, n_pos, D, o.seed + 1);
  r.composability = {
      dev < analyze::kRelativeDeviation ? Verdict::Mark::pass : Verdict::Mark::fail,
      "q_m.k_n off a function of m-n by " + analyze::fmt(dev, 2),
      {{"max_relative_deviation", dev}, {"positions", n_pos}, {"computed_with", "posenc::Rope fp32"}}};
  nlohmann::json curve = nlohmann::json::array();
  for (int64_t d : analyze::powers_of_two(L2))
    curve.push_back(
        {{"distance", d}, {"bound", analyze::rope_decay_bound(f.inv_freq, static_cast<double>(d))}});
  r.decay = {
      {"kind", "RoFormer bound (1/(d/2)) sum_j |S_j|"}, {"head_dim", D}, {"base", c.base}, {"curve", curve}};
  r.notes.push_back(
      "rope: codes are the rotations R(d) by distance; |R(d+1) - R(d)| is the same for every d");
}

void configure_rope(const LabModel& m, const TensorLookup&, AttentionConfig& config) { config.rope = m.rope; }

}  // namespace

Entry rope_entry() {
  Entry e{&encoding_info(EncodingKind::rope), tabulate_rope, analyze_rope, {}};
  e.lab.configure_attention = configure_rope;
  return e;
}

}  // namespace posenc::registry
