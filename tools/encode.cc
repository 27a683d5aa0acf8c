// tools/encode.cc: `posenc list` and `posenc encode`. Each encoding is tabulated by its registry
// entry (registry/entries/) with the library; arguments go straight into the library's
// config structs, so its validation messages (which name the field and the value) are what a user
// sees.
#include "encode.h"

#include <iostream>
#include <memory>
#include <sstream>

#include "files.h"
#include "memory.h"
#include "output.h"
#include "posenc/error.h"
#include "registry/registry.h"

namespace posenc::tools {
namespace {

// The flags of `posenc encode`: what to tabulate and how to write it, plus the encodings' own.
struct EncodeOptions {
  std::string encoding, positions = "0:8", keys, format = "table", output;
  registry::TableOptions table;
};

// "a:b[:step]" or "p0,p1,...", at most kMaxPositions of them (a table of a million rows is
// already more than anyone reads; the limit keeps 0:2^63 from exhausting memory).
constexpr uint64_t kMaxPositions = 1000000;
std::vector<int64_t> parse_positions(const std::string& spec, const char* flag) {
  std::vector<int64_t> out;
  auto bad = [&]() -> std::vector<int64_t> {
    throw Error(std::string(flag) + " = '" + spec +
                "' is invalid: expected start:end[:step] or a comma-separated list");
  };
  try {
    if (spec.find(':') != std::string::npos) {
      std::stringstream ss(spec);
      std::string a, b, c;
      std::getline(ss, a, ':');
      std::getline(ss, b, ':');
      std::getline(ss, c, ':');
      const int64_t start = std::stoll(a), end = std::stoll(b), step = c.empty() ? 1 : std::stoll(c);
      if (step <= 0 || end < start) return bad();
      // In uint64: end - start and p += step overflowed int64 for ranges near the int64 limits.
      const uint64_t span = static_cast<uint64_t>(end) - static_cast<uint64_t>(start);
      const uint64_t count = span / static_cast<uint64_t>(step) + (span % static_cast<uint64_t>(step) != 0);
      if (count > kMaxPositions)
        throw Error(std::string(flag) + " = '" + spec + "' has " + std::to_string(count) +
                    " positions, more than the limit of " + std::to_string(kMaxPositions));
      for (uint64_t i = 0; i < count; ++i)
        out.push_back(static_cast<int64_t>(static_cast<uint64_t>(start) + i * static_cast<uint64_t>(step)));
    } else {
      std::stringstream ss(spec);
      std::string item;
      while (std::getline(ss, item, ',')) {
        size_t used = 0;
        out.push_back(std::stoll(item, &used));
        if (used != item.size()) return bad();
      }
    }
  } catch (const Error&) {
    throw;
  } catch (const std::logic_error&) {  // stoll: invalid_argument / out_of_range
    return bad();
  }
  if (out.empty()) return bad();
  return out;
}

// The size flags, whichever encoding reads them; each encoding's tabulate then checks the memory
// its table needs before allocating it.
void check_sizes(const registry::TableOptions& t) {
  require_size("--dim", t.dim);
  require_size("--max-len", t.max_len);
  require_size("--bits", t.bits, 0, kMaxSize, "0 = enough for the positions");
  require_size("--heads", t.heads);
  require_size("--num-buckets", t.num_buckets);
  require_size("--max-distance", t.max_distance, 0, kMaxSize, "0 = the default: t5 128, relative and shaw 4");
  require_size("--head-dim", t.head_dim);
  require_size("--rotary-dim", t.rotary_dim, 0, kMaxSize, "0 = head_dim");
  require_size("--max-position-embeddings", t.max_position_embeddings, 0, kMaxSize, "0 = not given");
  require_size("--original-max", t.original_max, 0, kMaxSize, "0 = not given");
}

void run_encode(const EncodeOptions& o) {
  const registry::Entry& entry = registry::find(o.encoding);
  const Format format = parse_format(o.format);
  check_sizes(o.table);
  const std::vector<int64_t> pos = parse_positions(o.positions, "--positions");
  const std::vector<int64_t> keys = o.keys.empty() ? pos : parse_positions(o.keys, "--keys");
  const tools::Array a = entry.tabulate({o.table, pos, keys, require_memory});
  // Everything is computed before the output file is opened: an error writes nothing.
  if (o.output.empty()) {
    write(a, format, std::cout);
    return;
  }
  std::ostringstream bytes;
  write(a, format, bytes);
  lab::write_file("--output", o.output, bytes.str());
}
}  // namespace

void add_list_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("list", "List every encoding and its variants");
  cmd->callback([] {
    for (const registry::Entry& entry : registry::entries()) {
      const EncodingInfo& e = *entry.info;
      std::cout << e.name << std::string(12 - std::min<size_t>(11, e.name.size()), ' ') << "[" << e.family
                << "] " << e.description << "\n";
      if (!e.alias.empty()) std::cout << std::string(12, ' ') << "also accepted as: " << e.alias << "\n";
      if (!e.variants.empty()) std::cout << std::string(12, ' ') << "variants: " << e.variants << "\n";
    }
  });
}

namespace {
// "Encoding name: none, sinusoidal, ..., rope (also: xl)", from the registry.
std::string encoding_names() {
  std::string names, aliases;
  for (const registry::Entry& e : registry::entries()) {
    names += (names.empty() ? "" : ", ") + std::string(e.name());
    if (!e.info->alias.empty()) aliases += (aliases.empty() ? "" : ", ") + std::string(e.info->alias);
  }
  return "Encoding name: " + names + (aliases.empty() ? "" : " (also: " + aliases + ")");
}
}  // namespace

void add_encode_command(CLI::App& app) {
  auto o = std::make_shared<EncodeOptions>();
  CLI::App* cmd =
      app.add_subcommand("encode", "Tabulate an encoding for given positions (see `posenc list`)");
  cmd->add_option("encoding", o->encoding, encoding_names())->required();
  cmd->add_option("--positions,-p", o->positions,
                  "Positions (query positions for biases): start:end[:step] or a,b,c")
      ->capture_default_str();
  cmd->add_option("--keys", o->keys, "Key positions for bias encodings (default: the positions)");
  cmd->add_option("--format,-f", o->format, "Output format: table, csv, json or npy")->capture_default_str();
  cmd->add_option("--output,-o", o->output,
                  "Write to this file instead of standard output (needed for npy on a terminal)");
  cmd->add_option("--dim", o->table.dim, "Width (sinusoidal, learned, xl)")->capture_default_str();
  cmd->add_option("--base", o->table.base, "Frequency base (sinusoidal, xl, rope theta)")
      ->capture_default_str();
  cmd->add_option("--layout", o->table.layout, "sinusoidal: interleaved|split; rope: half|interleaved");
  cmd->add_option("--frequencies", o->table.frequencies,
                  "sinusoidal: model_dim (paper) or half_dim_minus_one (fairseq)")
      ->capture_default_str();
  cmd->add_option("--offset", o->table.offset,
                  "sinusoidal: added to every position (fairseq: padding_idx + 1)");
  cmd->add_option("--max-len", o->table.max_len, "learned: table length")->capture_default_str();
  cmd->add_option("--seed", o->table.seed, "Seed of the random tables shown for learned encodings")
      ->capture_default_str();
  cmd->add_option("--bits", o->table.bits,
                  "binary: number of bits (0, the default: enough for the positions)");
  cmd->add_flag("--unsigned", o->table.unsigned_bits, "binary: 0/1 instead of -1/+1");
  cmd->add_option("--heads", o->table.heads, "Heads (relative, t5, alibi)")->capture_default_str();
  cmd->add_option("--num-buckets", o->table.num_buckets, "t5: number of buckets")->capture_default_str();
  cmd->add_option("--max-distance", o->table.max_distance,
                  "t5: log buckets end (0, the default: 128); relative, shaw: clip k (0, the default: 4)");
  cmd->add_flag("--causal", o->table.causal, "t5: the causal (decoder) bucketing");
  cmd->add_option("--show", o->table.show, "relative/t5: bias|buckets; rope: cos|sin|inv-freq");
  cmd->add_option("--slopes", o->table.slopes, "alibi: bloom or mpt")->capture_default_str();
  cmd->add_option("--alibi-bias-max", o->table.alibi_bias_max, "alibi mpt: alibi_bias_max")
      ->capture_default_str();
  cmd->add_flag("--symmetric", o->table.symmetric, "alibi: -m|i-j| instead of the causal -m(i-j)");
  cmd->add_option("--head-dim", o->table.head_dim, "rope: head_dim")->capture_default_str();
  cmd->add_option("--rotary-dim", o->table.rotary_dim, "rope: rotary_dim (0 = head_dim)");
  cmd->add_option("--scaling", o->table.scaling, "rope: default, linear, dynamic, yarn or llama3")
      ->capture_default_str();
  cmd->add_option("--factor", o->table.factor, "rope scaling factor")->capture_default_str();
  cmd->add_option("--original-max", o->table.original_max, "rope: original_max_position_embeddings");
  cmd->add_option("--max-position-embeddings", o->table.max_position_embeddings,
                  "rope: max_position_embeddings");
  cmd->add_option("--config", o->table.config, "rope: read everything from a HuggingFace config.json")
      ->check(CLI::ExistingFile);
  cmd->callback([o] { run_encode(*o); });
}

}  // namespace posenc::tools
