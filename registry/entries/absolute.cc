// registry/entries/absolute.cc: the encodings added to the token embeddings (sinusoidal,
// learned, binary) and the NoPE baseline. Analysis: the codes by position PE(p), p in [0, L2).
#include <cmath>
#include <limits>
#include <random>

#include "registry/judge.h"
#include "registry/entries/entries.h"
#include "posenc/absolute.h"
#include "posenc/error.h"

namespace posenc::registry {
namespace {
using analyze::Report;
using analyze::Verdict;
using Array = Table;
using namespace table;

// ---- none (NoPE)
Array tabulate_none(const TableRequest& r) {
  require_table_memory(r, "none", "", 0, static_cast<double>(r.positions.size()));
  return {"none (NoPE): no positional encoding; every position maps to the empty vector",
          "",
          "position",
          names(r.positions),
          {},
          1,
          {},
          {}};
}
void analyze_none(const analyze::Options&, Report& r) {
  r.uniqueness = {Verdict::Mark::fail, "every position has the same (empty) code", {{"min_distance", 0.0}}};
  r.neighbours = {Verdict::Mark::fail, "no difference between neighbours", {}};
  r.composability = {Verdict::Mark::not_applicable, "no offsets to compose", {}};
  r.generalization = {
      Verdict::Mark::pass, "defined everywhere (nothing to extrapolate)", {{"defined_beyond_length", true}}};
  r.notes.push_back(
      "none: causal decoders can still infer order from the mask (Haviv et al. 2022); this measures the code "
      "only");
}

// ---- sinusoidal
Array tabulate_sinusoidal(const TableRequest& r) {
  const TableOptions& o = r.options;
  const std::vector<int64_t>& pos = r.positions;
  SinusoidalConfig c;
  c.dim = o.dim;
  c.base = o.base;
  c.position_offset = o.offset;
  if (o.layout == "split")
    c.layout = SinusoidalLayout::split;
  else if (!o.layout.empty() && o.layout != "interleaved")
    throw Error("--layout = '" + o.layout + "' is invalid for sinusoidal: expected interleaved or split");
  if (o.frequencies == "half_dim_minus_one")
    c.frequencies = SinusoidalFrequencies::half_dim_minus_one;
  else if (o.frequencies != "model_dim")
    throw Error("--frequencies = '" + o.frequencies +
                "' is invalid: expected model_dim or half_dim_minus_one");
  validate(c);
  const double P = static_cast<double>(pos.size());
  require_table_memory(r, "sinusoidal", "--dim " + std::to_string(c.dim), P * c.dim, P + c.dim);
  Array a{"sinusoidal encoding (position, dim)", "", "position", names(pos), numbered("d", c.dim), 1, {}, {}};
  a.data.resize(pos.size() * c.dim);
  sinusoidal_table(c, view(pos.data(), {size(pos)}), view(a.data.data(), {size(pos), c.dim}));
  return a;
}
void analyze_sinusoidal(const analyze::Options& o, Report& r) {
  const int64_t L2 = o.extrapolate_to, D = o.dim;
  const std::vector<int64_t> all = analyze::range(0, L2);
  SinusoidalConfig c;
  c.dim = D;
  std::vector<float> pe(L2 * D);
  sinusoidal_table(c, view(all.data(), {L2}), view(pe.data(), {L2, D}));
  analyze::judge_continuous(o, analyze::from_floats(pe, L2, D), r, true);
}
void validate_sinusoidal(const LabModel& m) {
  validate(SinusoidalConfig{m.d_model, m.options->sinusoidal_base});
}
void add_sinusoidal(const LabModel& m, const TensorLookup&, ConstTensorView positions, TensorView x) {
  sinusoidal_add(SinusoidalConfig{m.d_model, m.options->sinusoidal_base}, positions, x);
}

// ---- learned
Array tabulate_learned(const TableRequest& r) {
  const TableOptions& o = r.options;
  const std::vector<int64_t>& pos = r.positions;
  const int64_t max_len = o.max_len;
  if (o.dim <= 0) throw Error("--dim = " + std::to_string(o.dim) + " is invalid: must be > 0");
  if (max_len <= 0) throw Error("--max-len = " + std::to_string(max_len) + " is invalid: must be > 0");
  const double P = static_cast<double>(pos.size());
  require_table_memory(r, "learned",
                       "--max-len " + std::to_string(max_len) + " --dim " + std::to_string(o.dim), P * o.dim,
                       P + o.dim, 4.0 * static_cast<double>(max_len) * o.dim);
  const std::vector<float> table = normal_table(max_len * o.dim, o.seed, 0.02f);  // GPT-2 initialisation
  Array a{"learned encoding (position, dim): a random N(0, 0.02) table, seed " + std::to_string(o.seed),
          "",
          "position",
          names(pos),
          numbered("d", o.dim),
          1,
          {},
          {}};
  a.data.resize(pos.size() * o.dim);
  learned_lookup(view(table.data(), {max_len, o.dim}), view(pos.data(), {size(pos)}),
                 view(a.data.data(), {size(pos), o.dim}));
  a.notes.push_back("max_len = " + std::to_string(max_len) + ": positions past it have no encoding");
  return a;
}
void analyze_learned(const analyze::Options& o, Report& r) {
  const int64_t L = o.length, D = o.dim;
  std::mt19937 rng(o.seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);  // GPT-2's initialisation: an untrained table
  std::vector<float> table(L * D), pe(L * D);
  for (float& x : table) x = dist(rng);
  const std::vector<int64_t> trained = analyze::range(0, L);
  learned_lookup(view(table.data(), {L, D}), view(trained.data(), {L}), view(pe.data(), {L, D}));
  // Judge on [0, L) and one repeated row standing in for [L, L2), then replace generalization.
  analyze::judge_continuous(o, analyze::from_floats(pe, L, D), r, true);
  std::string error;
  try {
    std::vector<float> out(D);
    const int64_t past = L;
    learned_lookup(view(table.data(), {L, D}), view(&past, {1}), view(out.data(), {1, D}));
  } catch (const Error& e) {
    error = e.what();
  }
  r.generalization = {
      Verdict::Mark::fail, "undefined past L", {{"defined_beyond_length", false}, {"library_error", error}}};
  r.notes.push_back("learned: a random N(0, 0.02) table (untrained, seed " + std::to_string(o.seed) +
                    "): uniqueness holds by chance, training decides the rest");
}
std::vector<LabTensor> learned_tensors(const LabModel& m) {
  // N(0, C^-1/2), as fairseq pairs its embeddings with the sqrt(C) scale.
  return {{"wpe.weight", {m.train_len, m.d_model}, 1.0 / std::sqrt(static_cast<double>(m.d_model))}};
}
void add_learned(const LabModel& m, const TensorLookup& params, ConstTensorView positions, TensorView x) {
  learned_add(view(params("wpe.weight"), {m.train_len, m.d_model}), positions, x);  // throws past the table
}
void learned_embeddings_backward(const LabModel& m, const TensorLookup& grads, ConstTensorView positions,
                                 ConstTensorView dx) {
  learned_backward(dx, positions, view(grads("wpe.weight"), {m.train_len, m.d_model}));
}

// ---- binary
Array tabulate_binary(const TableRequest& r) {
  const std::vector<int64_t>& pos = r.positions;
  BinaryConfig c;
  const int64_t max_pos = *std::max_element(pos.begin(), pos.end());
  const int64_t length = max_pos < std::numeric_limits<int64_t>::max() ? max_pos + 1 : max_pos;
  c.bits = r.options.bits > 0 ? r.options.bits : binary_bits_for_length(std::max<int64_t>(length, 1));
  c.signed_values = !r.options.unsigned_bits;
  validate(c);
  const double P = static_cast<double>(pos.size());
  require_table_memory(r, "binary", "--bits " + std::to_string(c.bits), P * c.bits, P + c.bits);
  Array a{"binary encoding (position, bit), most significant bit first",
          "",
          "position",
          names(pos),
          numbered("b", c.bits),
          1,
          {},
          {}};
  a.data.resize(pos.size() * c.bits);
  binary_table(c, view(pos.data(), {size(pos)}), view(a.data.data(), {size(pos), c.bits}));
  return a;
}
void analyze_binary(const analyze::Options& o, Report& r) {
  const int64_t L = o.length;
  BinaryConfig c;
  c.bits = binary_bits_for_length(L);
  std::vector<float> pe(L * c.bits);
  const std::vector<int64_t> trained = analyze::range(0, L);
  binary_table(c, view(trained.data(), {L}), view(pe.data(), {L, c.bits}));
  const analyze::Codes codes = analyze::from_floats(pe, L, c.bits);
  analyze::judge_continuous(o, codes, r, true);
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
  r.generalization = {
      defined ? Verdict::Mark::pass : Verdict::Mark::fail,
      "undefined from 2^" + std::to_string(c.bits) + " = " + std::to_string(first_undefined) + " on",
      {{"defined_beyond_length", defined},
       {"first_undefined_position", first_undefined},
       {"library_error", error}}};
  // The classic counter-example to "neighbours are close": 7 = 0111 and 8 = 1000 differ in every
  // low bit. (The JSON key "seed_example" is kept for readers of earlier output.)
  auto hamming = [&](int64_t a, int64_t b) {
    return static_cast<int64_t>(std::lround(std::pow(analyze::distance(codes, a, b), 2) / 4));
  };
  if (L > 8) {
    r.neighbours.detail["seed_example"] = {{"hamming_6_7", hamming(6, 7)}, {"hamming_7_8", hamming(7, 8)}};
    r.notes.push_back("binary: Hamming(6, 7) = " + std::to_string(hamming(6, 7)) +
                      ", Hamming(7, 8) = " + std::to_string(hamming(7, 8)) + " (0111 -> 1000), Hamming(" +
                      std::to_string(L / 2 - 1) + ", " + std::to_string(L / 2) +
                      ") = " + std::to_string(hamming(L / 2 - 1, L / 2)));
  }
}
void validate_binary(const LabModel& m) {
  const int64_t bits = m.options->binary_bits;
  if (bits > m.d_model)
    throw Error("lab model: binary_bits = " + std::to_string(bits) + " is invalid: must be <= d_model = " +
                std::to_string(m.d_model) + " (the code is added to the first channels)");
  validate(BinaryConfig{bits, true});
}
// x: (B, T, C); the code of each position is added to its first `bits` channels.
void add_binary(const LabModel& m, const TensorLookup&, ConstTensorView positions, TensorView x) {
  const int64_t bits = m.options->binary_bits, T = positions.shape[0], C = m.d_model;
  const int64_t N = x.shape[0] * x.shape[1];
  std::vector<float> code(static_cast<size_t>(T * bits));
  binary_table(BinaryConfig{bits, true}, positions, view(code.data(), {T, bits}));  // throws past 2^bits
  float* out = x.ptr<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < bits; ++i) out[n * C + i] += code[static_cast<size_t>((n % T) * bits + i)];
}

}  // namespace

Entry none_entry() { return {&encoding_info(EncodingKind::none), tabulate_none, analyze_none, {}}; }

Entry sinusoidal_entry() {
  Entry e{&encoding_info(EncodingKind::sinusoidal), tabulate_sinusoidal, analyze_sinusoidal, {}};
  e.lab.validate = validate_sinusoidal;
  e.lab.add_to_embeddings = add_sinusoidal;
  return e;
}

Entry learned_entry() {
  Entry e{&encoding_info(EncodingKind::learned), tabulate_learned, analyze_learned, {}};
  e.lab.model_tensors = learned_tensors;
  e.lab.add_to_embeddings = add_learned;
  e.lab.embeddings_backward = learned_embeddings_backward;
  return e;
}

Entry binary_entry() {
  Entry e{&encoding_info(EncodingKind::binary), tabulate_binary, analyze_binary, {}};
  e.lab.validate = validate_binary;
  e.lab.add_to_embeddings = add_binary;
  return e;
}

}  // namespace posenc::registry
