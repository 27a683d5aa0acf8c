// src/model/report.cc: see posenc/model_report.h.
#include "posenc/model_report.h"

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "posenc/error.h"

namespace posenc {
namespace {
using json = nlohmann::json;

json rope_json(const LayerPlan& l, int64_t seq_len) {
  if (!l.rope) return nullptr;
  const RopeConfig& c = *l.rope;
  const RopeFrequencies f = rope_frequencies(c, seq_len);
  json r = {{"layout", rope_layout_name(c.layout)},
            {"rotary_dims", {l.rotary_lo, l.rotary_hi}},
            {"head_dim", l.qk_head_dim},
            {"base", c.base},
            {"rope_type", rope_scaling_name(c.scaling.type)},
            {"inv_freq", f.inv_freq},
            {"attention_factor", f.attention_factor},
            {"reversed", c.reversed}};  // angles -p theta (RopeConfig::reversed)
  if (c.multimodal != RopeMultimodal::none) {
    r["multimodal"] = rope_multimodal_name(c.multimodal);
    r["mrope_section"] = c.mrope_section;
  }
  if (c.scaling.type != RopeScalingType::none) r["factor"] = c.scaling.factor;
  return r;
}

// DeepSeek sparse attention's top-k indexer, or MiniMax-M3's block one (posenc/model.h TopkIndexer), or null.
json indexer_json(const LayerPlan& l) {
  if (!l.indexer) return nullptr;
  const TopkIndexer& x = *l.indexer;
  return {
      {"topk", x.topk},
      {"heads", x.heads},
      {"head_dim", x.head_dim},
      {"shared", x.shared},
      {"over_compressed", x.over_compressed},
      {"block_size", x.block_size},
      {"local_blocks", x.local_blocks},
      {"pooled_keys", x.pooled_keys},
      {"rope", {{"layout", rope_layout_name(x.rope.layout)}, {"rotary_dims", {x.rotary_lo, x.rotary_hi}}}}};
}

json attention_json(const LayerPlan& l) {
  if (!l.softmax_attention) return nullptr;
  const LayerAttention& a = l.attention;
  json t = nullptr;
  if (a.temperature.kind != QueryTemperature::Kind::none)
    t = {{"rule", query_temperature_name(a.temperature.kind)},
         {"scale", a.temperature.scale},
         {"floor_scale", a.temperature.floor_scale}};
  return {{"causal", a.causal},
          {"qk_head_dim", l.qk_head_dim},
          {"v_head_dim", l.v_head_dim},
          {"window", a.window > 0 ? json(a.window) : json(nullptr)},
          {"chunk", a.chunk > 0 ? json(a.chunk) : json(nullptr)},
          {"softmax_scale", a.softmax_scale},
          {"softcap", a.softcap ? json(*a.softcap) : json(nullptr)},
          {"sinks", a.sinks},
          {"query_temperature", t},
          {"indexer", indexer_json(l)},
          {"rotated_values", l.rotated_values},
          {"compressed", l.compressed
                             ? json{{"rate", l.compressed->rate}, {"overlapping", l.compressed->overlapping}}
                             : json(nullptr)}};
}

std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// One line's description of a layer, without its index: identical layers share it.
std::string describe(const LayerPlan& l) {
  std::string s = l.layer_type + ", " + position_method_name(l.position);
  if (l.rope) {
    const RopeConfig& c = *l.rope;
    s += " " + std::string(rope_scaling_name(c.scaling.type)) + " base " + short_number(c.base) + " dims [" +
         std::to_string(l.rotary_lo) + ", " + std::to_string(l.rotary_hi) + ") of " +
         std::to_string(l.qk_head_dim) + " " + rope_layout_name(c.layout);
    if (c.scaling.type != RopeScalingType::none) s += " factor " + short_number(c.scaling.factor);
    if (c.multimodal != RopeMultimodal::none) s += " " + std::string(rope_multimodal_name(c.multimodal));
    if (c.reversed) s += " reversed";
  }
  if (!l.softmax_attention) return s;
  const LayerAttention& a = l.attention;
  s += a.causal ? ", causal" : ", bidirectional";
  if (l.v_head_dim != l.qk_head_dim) s += ", v head " + std::to_string(l.v_head_dim);
  if (a.window > 0) s += ", window " + std::to_string(a.window);
  if (a.chunk > 0) s += ", chunk " + std::to_string(a.chunk);
  s += ", scale " + short_number(a.softmax_scale);
  if (a.softcap) s += ", softcap " + short_number(*a.softcap);
  if (a.sinks) s += ", sinks";
  if (a.temperature.kind != QueryTemperature::Kind::none)
    s += ", query temperature " + std::string(query_temperature_name(a.temperature.kind));
  if (l.indexer)
    s += ", top-" + std::to_string(l.indexer->topk) +
         (l.indexer->block_size > 0 ? " blocks of " + std::to_string(l.indexer->block_size) +
                                          (l.indexer->pooled_keys ? " pooled keys" : "")
                                    : std::string()) +
         " indexer (" + rope_layout_name(l.indexer->rope.layout) + " RoPE on [" +
         std::to_string(l.indexer->rotary_lo) + ", " + std::to_string(l.indexer->rotary_hi) + ") of " +
         std::to_string(l.indexer->head_dim) + (l.indexer->shared ? ", shared" : "") +
         (l.indexer->over_compressed ? ", over the compressed" : "") + ")";
  if (l.compressed)
    s += ", compressed entries of " + std::to_string(l.compressed->rate) + " tokens at w * " +
         std::to_string(l.compressed->rate) + (l.compressed->overlapping ? " (overlapping)" : "");
  if (l.rotated_values) s += ", values rotated (output rotated back)";
  return s;
}

std::string ranges(const std::vector<int64_t>& idx) {
  std::string s;
  for (size_t i = 0; i < idx.size();) {
    size_t k = i;
    while (k + 1 < idx.size() && idx[k + 1] == idx[k] + 1) ++k;
    if (!s.empty()) s += ", ";
    s += std::to_string(idx[i]);
    if (k > i) {  // two appends: GCC 12 -O3 warns falsely (-Wrestrict) on "-" + to_string here
      s += '-';
      s += std::to_string(idx[k]);
    }
    i = k + 1;
  }
  return s;
}

bool has_learned_table(const ModelPositions& m) {
  bool learned = m.learned_embeddings;
  for (const LayerPlan& l : m.layers) learned = learned || l.position == PositionMethod::learned;
  return learned;
}

int64_t report_seq_len(const ModelPositions& m, int64_t seq_len) {
  if (seq_len < 0)
    throw Error("model report: seq_len = " + std::to_string(seq_len) + " is invalid: must be >= 0");
  return seq_len > 0 ? seq_len : m.max_position_embeddings;
}
}  // namespace

std::string model_report_json(const ModelPositions& m, int64_t seq_len_arg) {
  const int64_t seq_len = report_seq_len(m, seq_len_arg);
  const bool learned = has_learned_table(m);
  json layers = json::array();
  for (const LayerPlan& l : m.layers)
    layers.push_back({{"layer", l.layer},
                      {"layer_type", l.layer_type},
                      {"position", position_method_name(l.position)},
                      {"rope", rope_json(l, seq_len)},
                      {"attention", attention_json(l)}});
  json doc = {{"model_type", m.model_type}, {"num_layers", m.num_layers},
              {"num_heads", m.num_heads},   {"max_position_embeddings", m.max_position_embeddings},
              {"seq_len", seq_len},         {"layers", layers},
              {"warnings", m.warnings}};
  if (m.encoder_max_position_embeddings > 0)
    doc["encoder_max_position_embeddings"] = m.encoder_max_position_embeddings;
  if (!m.remote_code.empty()) doc["remote_code"] = m.remote_code;
  if (m.t5_num_buckets > 0)
    doc["t5"] = {{"num_buckets", m.t5_num_buckets},
                 {"max_distance", m.t5_max_distance},
                 {"table_per_layer", m.t5_bias_per_layer}};
  if (learned)
    doc["learned"] = {{"table_rows", m.max_position_embeddings + m.learned_position_offset},
                      {"position_offset", m.learned_position_offset}};
  if (m.sinusoidal)
    doc["sinusoidal"] = {{"dim", m.sinusoidal->dim},
                         {"base", m.sinusoidal->base},
                         {"layout", sinusoidal_layout_name(m.sinusoidal->layout)},
                         {"frequencies", sinusoidal_frequencies_name(m.sinusoidal->frequencies)},
                         {"position_offset", m.sinusoidal->position_offset}};
  return doc.dump(2);
}

std::string model_report_table(const ModelPositions& m, int64_t seq_len_arg) {
  const int64_t seq_len = report_seq_len(m, seq_len_arg);
  const bool learned = has_learned_table(m);
  std::ostringstream out;
  out << m.model_type << ": " << m.num_layers << " layers, " << m.num_heads
      << " heads, max_position_embeddings " << m.max_position_embeddings;
  if (m.encoder_max_position_embeddings > 0) out << " (encoder " << m.encoder_max_position_embeddings << ")";
  out << "\n";
  if (!m.remote_code.empty()) out << "remote code, planned from the authors' " << m.remote_code << "\n";
  std::vector<std::string> order;
  std::map<std::string, std::vector<int64_t>> groups;
  std::map<std::string, const LayerPlan*> first;  // each group's first layer (not indexed by its number)
  for (const LayerPlan& l : m.layers) {
    const std::string d = describe(l);
    if (!groups.count(d)) order.push_back(d), first[d] = &l;
    groups[d].push_back(l.layer);
  }
  for (const std::string& d : order) {
    const auto& idx = groups[d];
    out << (idx.size() == 1 ? "layer " : "layers ") << ranges(idx) << ": " << d << "\n";
  }
  if (m.t5_num_buckets > 0)
    out << "t5 buckets: " << m.t5_num_buckets << ", max_distance " << m.t5_max_distance
        << (m.t5_bias_per_layer ? ", a table in every layer" : ", one table per stack (its first layer)")
        << "\n";
  if (m.sinusoidal)
    out << "sinusoidal table: dim " << m.sinusoidal->dim << ", "
        << (m.sinusoidal->layout == SinusoidalLayout::split ? "[sin | cos]" : "interleaved")
        << ", w_i = " << short_number(m.sinusoidal->base) << "^(-"
        << (m.sinusoidal->frequencies == SinusoidalFrequencies::model_dim ? "2i / dim" : "i / (dim/2 - 1)")
        << "), position p at row p + " << m.sinusoidal->position_offset << "\n";
  if (learned)
    out << "learned table: " << m.max_position_embeddings + m.learned_position_offset
        << " rows, position p reads row p + " << m.learned_position_offset << "\n";
  // The frequencies at seq_len, once per distinct RoPE (same description as the table line).
  for (const std::string& d : order) {
    const LayerPlan& l = *first[d];
    if (!l.rope) continue;
    const RopeFrequencies f = rope_frequencies(*l.rope, seq_len);
    out << "layer " << l.layer << " rope at seq_len " << seq_len << ": attention_factor "
        << short_number(f.attention_factor) << ", inv_freq[0] " << short_number(f.inv_freq.front())
        << ", inv_freq[last] " << short_number(f.inv_freq.back()) << "\n";
  }
  return out.str();
}

}  // namespace posenc
