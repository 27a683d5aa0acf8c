// tools/encode.cc: `posenc list` and `posenc encode`. Each encoding is computed by the library
// itself; arguments go straight into its config structs, so the library's validation messages
// (which name the field and the value) are what a user sees.
#include "encode.h"

#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>

#include "output.h"
#include "posenc/posenc.h"

namespace posenc::tools {
namespace {

struct EncodeOptions {
  std::string encoding, positions = "0:8", keys, format = "table", output, show;
  int64_t dim = 8, heads = 2, max_len = 0, bits = 0, num_buckets = 32, max_distance = 0, head_dim = 8, rotary_dim = 0;
  int64_t offset = 0, max_position_embeddings = 0, original_max = 0;
  double base = 10000, factor = 1, alibi_bias_max = 8;
  std::string layout, frequencies = "model_dim", scaling = "default", slopes = "bloom", config;
  bool causal = false, unsigned_bits = false, symmetric = false;
  uint32_t seed = 0;
};

// "a:b[:step]" or "p0,p1,...".
std::vector<int64_t> parse_positions(const std::string& spec, const char* flag) {
  std::vector<int64_t> out;
  auto bad = [&]() -> std::vector<int64_t> {
    throw Error(std::string(flag) + " = '" + spec + "' is invalid: expected start:end[:step] or a comma-separated list");
  };
  try {
    if (spec.find(':') != std::string::npos) {
      std::stringstream ss(spec);
      std::string a, b, c;
      std::getline(ss, a, ':');
      std::getline(ss, b, ':');
      std::getline(ss, c, ':');
      const int64_t start = std::stoll(a), end = std::stoll(b), step = c.empty() ? 1 : std::stoll(c);
      if (step <= 0 || end < start || (end - start) / step > 1000000) return bad();
      for (int64_t p = start; p < end; p += step) out.push_back(p);
    } else {
      std::stringstream ss(spec);
      std::string item;
      while (std::getline(ss, item, ',')) {
        size_t used = 0;
        out.push_back(std::stoll(item, &used));
        if (used != item.size()) return bad();
      }
    }
  } catch (const std::logic_error&) {  // stoll: invalid_argument / out_of_range
    return bad();
  }
  if (out.empty()) return bad();
  return out;
}

std::vector<std::string> names(const std::vector<int64_t>& v) {
  std::vector<std::string> s;
  for (int64_t x : v) s.push_back(std::to_string(x));
  return s;
}
std::vector<std::string> numbered(const std::string& prefix, int64_t n) {
  std::vector<std::string> s;
  for (int64_t i = 0; i < n; ++i) s.push_back(prefix + std::to_string(i));
  return s;
}
int64_t size(const std::vector<int64_t>& v) { return static_cast<int64_t>(v.size()); }

std::vector<float> normal_table(int64_t n, uint32_t seed, float stddev) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> t(n);
  for (float& x : t) x = dist(rng);
  return t;
}

Array encode_sinusoidal(const EncodeOptions& o, const std::vector<int64_t>& pos) {
  SinusoidalConfig c;
  c.dim = o.dim;
  c.base = o.base;
  c.position_offset = o.offset;
  if (o.layout == "split") c.layout = SinusoidalLayout::split;
  else if (!o.layout.empty() && o.layout != "interleaved")
    throw Error("--layout = '" + o.layout + "' is invalid for sinusoidal: expected interleaved or split");
  if (o.frequencies == "half_dim_minus_one") c.frequencies = SinusoidalFrequencies::half_dim_minus_one;
  else if (o.frequencies != "model_dim")
    throw Error("--frequencies = '" + o.frequencies + "' is invalid: expected model_dim or half_dim_minus_one");
  Array a{"sinusoidal encoding (position, dim)", "", "position", names(pos), numbered("d", c.dim), 1, {}, {}};
  a.data.resize(pos.size() * c.dim);
  sinusoidal_table(c, view(pos.data(), {size(pos)}), view(a.data.data(), {size(pos), c.dim}));
  return a;
}

Array encode_learned(const EncodeOptions& o, const std::vector<int64_t>& pos) {
  const int64_t max_len = o.max_len > 0 ? o.max_len : 512;
  if (o.dim <= 0) throw Error("--dim = " + std::to_string(o.dim) + " is invalid: must be > 0");
  const std::vector<float> table = normal_table(max_len * o.dim, o.seed, 0.02f);  // GPT-2 initialisation
  Array a{"learned encoding (position, dim): a random N(0, 0.02) table, seed " + std::to_string(o.seed), "", "position",
          names(pos), numbered("d", o.dim), 1, {}, {}};
  a.data.resize(pos.size() * o.dim);
  learned_lookup(view(table.data(), {max_len, o.dim}), view(pos.data(), {size(pos)}), view(a.data.data(), {size(pos), o.dim}));
  a.notes.push_back("max_len = " + std::to_string(max_len) + ": positions past it have no encoding");
  return a;
}

Array encode_binary(const EncodeOptions& o, const std::vector<int64_t>& pos) {
  BinaryConfig c;
  const int64_t max_pos = *std::max_element(pos.begin(), pos.end());
  c.bits = o.bits > 0 ? o.bits : binary_bits_for_length(std::max<int64_t>(max_pos + 1, 1));
  c.signed_values = !o.unsigned_bits;
  Array a{"binary encoding (position, bit), most significant bit first", "", "position", names(pos), numbered("b", c.bits), 1, {}, {}};
  a.data.resize(pos.size() * c.bits);
  binary_table(c, view(pos.data(), {size(pos)}), view(a.data.data(), {size(pos), c.bits}));
  return a;
}

Array bias_array(const std::string& title, int64_t heads, const std::vector<int64_t>& q, const std::vector<int64_t>& k) {
  Array a{title, "head", "query", names(q), numbered("k", 0), heads, {}, {}};
  a.col_names = names(k);
  a.data.resize(heads * q.size() * k.size());
  return a;
}

Array encode_relative(const EncodeOptions& o, const std::vector<int64_t>& q, const std::vector<int64_t>& k, bool t5) {
  RelativeBiasConfig c = t5 ? RelativeBiasConfig::t5(o.heads, o.num_buckets, o.max_distance > 0 ? o.max_distance : 128, !o.causal)
                            : RelativeBiasConfig::clipped(o.heads, o.max_distance > 0 ? o.max_distance : 4);
  validate(c);
  if (o.show == "rows" || o.show == "buckets") {
    Array a{t5 ? "T5 bucket of key - query (query, key)" : "clipped distance row of key - query (query, key)", "", "query",
            names(q), names(k), 1, {}, {}};
    for (int64_t qi : q)
      for (int64_t kj : k) a.data.push_back(static_cast<float>(relative_bias_row(c, kj - qi)));
    return a;
  }
  if (!o.show.empty() && o.show != "bias") throw Error("--show = '" + o.show + "' is invalid: expected bias or buckets");
  const std::vector<float> table = normal_table(c.num_rows() * c.heads, o.seed, 1.0f);
  Array a = bias_array(std::string(t5 ? "T5" : "clipped relative") + " bias (head, query, key) from a random N(0, 1) table, seed " +
                           std::to_string(o.seed),
                       c.heads, q, k);
  relative_bias(c, view(table.data(), {c.num_rows(), c.heads}), view(q.data(), {size(q)}), view(k.data(), {size(k)}),
                view(a.data.data(), {c.heads, size(q), size(k)}));
  return a;
}

Array encode_alibi(const EncodeOptions& o, const std::vector<int64_t>& q, const std::vector<int64_t>& k) {
  AlibiConfig c;
  c.heads = o.heads;
  c.symmetric = o.symmetric;
  c.alibi_bias_max = o.alibi_bias_max;
  if (o.slopes == "mpt") c.slopes = AlibiSlopes::mpt;
  else if (o.slopes != "bloom") throw Error("--slopes = '" + o.slopes + "' is invalid: expected bloom or mpt");
  Array a = bias_array("alibi bias (head, query, key)", c.heads, q, k);
  alibi_bias(c, view(q.data(), {size(q)}), view(k.data(), {size(k)}), view(a.data.data(), {c.heads, size(q), size(k)}));
  std::ostringstream slopes;
  for (double s : alibi_slopes(c)) slopes << s << " ";
  a.notes.push_back("slopes: " + slopes.str());
  return a;
}

Array encode_shaw(const EncodeOptions& o, const std::vector<int64_t>& q, const std::vector<int64_t>& k) {
  const int64_t kmax = o.max_distance > 0 ? o.max_distance : 4;
  validate(ShawConfig{kmax, 1});
  const RelativeBiasConfig rows = RelativeBiasConfig::clipped(1, kmax);
  Array a{"Shaw et al. table row clip(key - query, -k, k) + k (query, key), k = " + std::to_string(kmax), "", "query", names(q),
          names(k), 1, {}, {}};
  for (int64_t qi : q)
    for (int64_t kj : k) a.data.push_back(static_cast<float>(relative_bias_row(rows, kj - qi)));
  a.notes.push_back("a^K and a^V rows are learned vectors shared by all heads; these are the rows each pair reads");
  return a;
}

Array encode_xl(const EncodeOptions& o, const std::vector<int64_t>& distances) {
  const TransformerXLConfig c{o.dim, 1, 1, o.base};
  Array a{"Transformer-XL R_delta for delta = query - key (delta, dim), split layout [sin | cos]", "", "delta", names(distances),
          numbered("d", o.dim), 1, {}, {}};
  validate(c);
  a.data.resize(distances.size() * o.dim);
  transformer_xl_sinusoid(c, view(distances.data(), {size(distances)}), view(a.data.data(), {size(distances), o.dim}));
  return a;
}

RopeConfig rope_config(const EncodeOptions& o) {
  if (!o.config.empty()) return rope_config_from_hf_file(o.config);
  RopeConfig c;
  c.head_dim = o.head_dim;
  c.rotary_dim = o.rotary_dim;
  c.base = o.base;
  c.max_position_embeddings = o.max_position_embeddings;
  if (o.layout == "interleaved") c.layout = RopeLayout::interleaved;
  else if (!o.layout.empty() && o.layout != "half")
    throw Error("--layout = '" + o.layout + "' is invalid for rope: expected half or interleaved");
  const std::vector<std::pair<std::string, RopeScalingType>> types = {
      {"default", RopeScalingType::none}, {"linear", RopeScalingType::linear}, {"dynamic", RopeScalingType::dynamic},
      {"yarn", RopeScalingType::yarn}, {"llama3", RopeScalingType::llama3}};
  bool found = false;
  for (auto& [name, type] : types)
    if (o.scaling == name) {
      c.scaling.type = type;
      found = true;
    }
  if (!found)
    throw Error("--scaling = '" + o.scaling + "' is invalid: expected default, linear, dynamic, yarn or llama3 "
                "(longrope needs factor lists: use --config with a config.json)");
  c.scaling.factor = o.factor;
  c.scaling.original_max_position_embeddings = o.original_max;
  return c;
}

Array encode_rope(const EncodeOptions& o, const std::vector<int64_t>& pos) {
  const Rope rope(rope_config(o));
  if (rope.config().num_position_streams() != 1)
    throw Error("--config describes a multimodal rope (" + std::string(rope_multimodal_name(rope.config().multimodal)) +
                "): posenc encode shows single-stream positions only");
  const int64_t pairs = rope.config().effective_rotary_dim() / 2;
  const std::string show = o.show.empty() ? "cos" : o.show;
  const RopeFrequencies f = rope.frequencies(*std::max_element(pos.begin(), pos.end()) + 1);
  if (show == "inv-freq") {
    Array a{"rope inverse frequencies (pair) in radians per position", "", "pair", numbered("", pairs), {"inv_freq"}, 1, {}, {}};
    for (double w : f.inv_freq) a.data.push_back(static_cast<float>(w));
    a.notes.push_back("attention_factor = " + std::to_string(f.attention_factor));
    return a;
  }
  if (show != "cos" && show != "sin") throw Error("--show = '" + show + "' is invalid for rope: expected cos, sin or inv-freq");
  std::vector<float> cs(pos.size() * pairs), sn(pos.size() * pairs);
  rope.cos_sin(view(pos.data(), {size(pos)}), view(cs.data(), {size(pos), pairs}), view(sn.data(), {size(pos), pairs}));
  Array a{"rope " + show + "(position * inv_freq) * attention_factor (position, pair)", "", "position", names(pos),
          numbered("p", pairs), 1, show == "cos" ? cs : sn, {}};
  a.notes.push_back(std::string("layout ") + rope_layout_name(rope.config().layout) + ", scaling " +
                    rope_scaling_name(rope.config().scaling.type) + ", attention_factor " + std::to_string(f.attention_factor));
  return a;
}

void run_encode(const EncodeOptions& o) {
  const EncodingInfo& info = encoding_info(o.encoding);
  const Format format = parse_format(o.format);
  const std::vector<int64_t> pos = parse_positions(o.positions, "--positions");
  const std::vector<int64_t> keys = o.keys.empty() ? pos : parse_positions(o.keys, "--keys");
  Array a;
  switch (info.kind) {
    case EncodingKind::none:
      a = {"none (NoPE): no positional encoding; every position maps to the empty vector", "", "position", names(pos), {}, 1, {}, {}};
      break;
    case EncodingKind::sinusoidal: a = encode_sinusoidal(o, pos); break;
    case EncodingKind::learned: a = encode_learned(o, pos); break;
    case EncodingKind::binary: a = encode_binary(o, pos); break;
    case EncodingKind::relative_bias: a = encode_relative(o, pos, keys, false); break;
    case EncodingKind::t5_bias: a = encode_relative(o, pos, keys, true); break;
    case EncodingKind::alibi: a = encode_alibi(o, pos, keys); break;
    case EncodingKind::shaw: a = encode_shaw(o, pos, keys); break;
    case EncodingKind::transformer_xl: a = encode_xl(o, pos); break;
    case EncodingKind::rope: a = encode_rope(o, pos); break;
  }
  // Everything is computed before the output file is opened: an error writes nothing.
  if (o.output.empty()) {
    write(a, format, std::cout);
    return;
  }
  std::ofstream out(o.output, std::ios::binary);
  if (!out) throw Error("--output = '" + o.output + "' cannot be opened for writing");
  write(a, format, out);
}
}  // namespace

void add_list_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("list", "List every encoding and its variants");
  cmd->callback([] {
    for (const EncodingInfo& e : all_encodings()) {
      std::cout << e.name << std::string(12 - std::min<size_t>(11, e.name.size()), ' ') << "[" << e.family << "] "
                << e.description << "\n";
      if (!e.variants.empty()) std::cout << std::string(12, ' ') << "variants: " << e.variants << "\n";
    }
  });
}

void add_encode_command(CLI::App& app) {
  auto o = std::make_shared<EncodeOptions>();
  CLI::App* cmd = app.add_subcommand("encode", "Tabulate an encoding for given positions (see `posenc list`)");
  cmd->add_option("encoding", o->encoding, "Encoding name: none, sinusoidal, learned, binary, relative, t5, alibi, shaw, xl, rope")
      ->required();
  cmd->add_option("--positions,-p", o->positions, "Positions (query positions for biases): start:end[:step] or a,b,c")
      ->capture_default_str();
  cmd->add_option("--keys", o->keys, "Key positions for bias encodings (default: the positions)");
  cmd->add_option("--format,-f", o->format, "Output format: table, csv, json or npy")->capture_default_str();
  cmd->add_option("--output,-o", o->output, "Write to this file instead of standard output (needed for npy on a terminal)");
  cmd->add_option("--dim", o->dim, "Width (sinusoidal, learned, xl)")->capture_default_str();
  cmd->add_option("--base", o->base, "Frequency base (sinusoidal, xl, rope theta)")->capture_default_str();
  cmd->add_option("--layout", o->layout, "sinusoidal: interleaved|split; rope: half|interleaved");
  cmd->add_option("--frequencies", o->frequencies, "sinusoidal: model_dim (paper) or half_dim_minus_one (fairseq)")
      ->capture_default_str();
  cmd->add_option("--offset", o->offset, "sinusoidal: added to every position (fairseq: padding_idx + 1)");
  cmd->add_option("--max-len", o->max_len, "learned: table length (default 512)");
  cmd->add_option("--seed", o->seed, "Seed of the random tables shown for learned encodings")->capture_default_str();
  cmd->add_option("--bits", o->bits, "binary: number of bits (default: enough for the positions)");
  cmd->add_flag("--unsigned", o->unsigned_bits, "binary: 0/1 instead of -1/+1");
  cmd->add_option("--heads", o->heads, "Heads (relative, t5, alibi)")->capture_default_str();
  cmd->add_option("--num-buckets", o->num_buckets, "t5: number of buckets")->capture_default_str();
  cmd->add_option("--max-distance", o->max_distance, "t5: log buckets end (default 128); relative, shaw: clip k (default 4)");
  cmd->add_flag("--causal", o->causal, "t5: the causal (decoder) bucketing");
  cmd->add_option("--show", o->show, "relative/t5: bias|buckets; rope: cos|sin|inv-freq");
  cmd->add_option("--slopes", o->slopes, "alibi: bloom or mpt")->capture_default_str();
  cmd->add_option("--alibi-bias-max", o->alibi_bias_max, "alibi mpt: alibi_bias_max")->capture_default_str();
  cmd->add_flag("--symmetric", o->symmetric, "alibi: -m|i-j| instead of the causal -m(i-j)");
  cmd->add_option("--head-dim", o->head_dim, "rope: head_dim")->capture_default_str();
  cmd->add_option("--rotary-dim", o->rotary_dim, "rope: rotary_dim (0 = head_dim)");
  cmd->add_option("--scaling", o->scaling, "rope: default, linear, dynamic, yarn or llama3")->capture_default_str();
  cmd->add_option("--factor", o->factor, "rope scaling factor")->capture_default_str();
  cmd->add_option("--original-max", o->original_max, "rope: original_max_position_embeddings");
  cmd->add_option("--max-position-embeddings", o->max_position_embeddings, "rope: max_position_embeddings");
  cmd->add_option("--config", o->config, "rope: read everything from a HuggingFace config.json")->check(CLI::ExistingFile);
  cmd->callback([o] { run_encode(*o); });
}

}  // namespace posenc::tools
