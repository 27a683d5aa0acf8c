// fuzz/fuzz_config_json.cc: libFuzzer target for the HuggingFace config.json readers,
// rope_config_from_hf_json (posenc/rope.h) and model_positions_from_hf_json (posenc/model.h).
//
// Oracle: each reader either throws posenc::Error, or returns a configuration that works
// everywhere it is defined: its frequency tables (at lengths 0, 1, 2^20, max_position_embeddings,
// the original context + 1 and 2^53), cos/sin at positions 0, 1, 2^20, max_position_embeddings
// (and their negatives) and a forward pass on a small buffer are all finite, and using it throws
// nothing. Any other exception, a crash or a sanitizer report is a finding.
//
// The model reader's findings listed below are fixed, so every input is held to the whole oracle by
// default. POSENC_FUZZ_STRICT=0 skips the inputs that reach one of them (model_positions_from_hf_json
// not called, an unusable query temperature printed instead of fatal), to fuzz past a finding while it
// is open; rope_config_from_hf_json then skips them too when they have a model_type (it reads them
// through the model reader).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/model.h"
#include "posenc/rope.h"

namespace {
using posenc::Error;
using posenc::Rope;
using posenc::RopeConfig;

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz_config_json: %s\n", what.c_str());
  std::abort();
}

void expect_finite(const std::vector<float>& v, const char* what) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) finding(std::string(what) + "[" + std::to_string(i) + "] is not finite");
}

void check_frequencies(const Rope& rope, int64_t seq_len) {
  const posenc::RopeFrequencies f = rope.frequencies(seq_len);
  const auto pairs = static_cast<size_t>(rope.config().effective_rotary_dim() / 2);
  if (f.inv_freq.size() != pairs || f.stream.size() != pairs)
    finding("frequency table of the wrong size at seq_len " + std::to_string(seq_len));
  for (size_t j = 0; j < pairs; ++j) {
    if (!std::isfinite(f.inv_freq[j]) || !(f.inv_freq[j] >= 0))
      finding("inv_freq[" + std::to_string(j) + "] = " + std::to_string(f.inv_freq[j]) + " at seq_len " +
              std::to_string(seq_len));
    if (f.stream[j] >= rope.config().num_position_streams()) finding("stream index out of range");
  }
  // The kernels multiply cos and sin by the attention factor in fp32.
  if (!(f.attention_factor > 0) || !std::isfinite(static_cast<float>(f.attention_factor)))
    finding("attention_factor = " + std::to_string(f.attention_factor));
}

// Everything an accepted RopeConfig is used for, on small buffers.
void check_rope(const RopeConfig& c) {
  const Rope rope(c);  // an accepted config must construct
  const int64_t max_pos = c.max_position_embeddings;
  for (int64_t len :
       {int64_t{0}, int64_t{1}, int64_t{1} << 20, max_pos, c.original_context() + 1, int64_t{1} << 53})
    check_frequencies(rope, len);

  const int64_t streams = c.num_position_streams();
  const int64_t pairs = c.effective_rotary_dim() / 2;
  const std::vector<int64_t> at = {0, 1, int64_t{1} << 20, max_pos, -1, -(int64_t{1} << 20), -max_pos};
  const auto n = static_cast<int64_t>(at.size());
  std::vector<int64_t> positions;
  for (int64_t s = 0; s < streams; ++s) positions.insert(positions.end(), at.begin(), at.end());
  std::vector<float> cos(static_cast<size_t>(n * pairs)), sin(cos.size());
  const posenc::ConstTensorView pos_view =
      streams > 1 ? posenc::view(positions.data(), {streams, n}) : posenc::view(positions.data(), {n});
  rope.cos_sin(pos_view, posenc::view(cos.data(), {n, pairs}), posenc::view(sin.data(), {n, pairs}));
  expect_finite(cos, "cos");
  expect_finite(sin, "sin");

  // A forward and a backward at the same positions on (1, n, 1, head_dim), with the length the
  // dynamic and longrope types switch on both derived and given.
  std::vector<float> x(static_cast<size_t>(n * c.head_dim));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
  std::vector<float> out(x.size());
  const auto xv = posenc::view(static_cast<const float*>(x.data()), {1, n, 1, c.head_dim});
  const auto ov = posenc::view(out.data(), {1, n, 1, c.head_dim});
  rope.forward(xv, ov, pos_view);
  expect_finite(out, "forward");
  posenc::RopeCall call;
  call.seq_len = int64_t{1} << 53;
  rope.backward(xv, ov, pos_view, call);
  expect_finite(out, "backward");
}

// The model reader's findings (below) are fixed: strict by default; POSENC_FUZZ_STRICT=0 skips them
// again (to fuzz past one while it is open).
const bool kModelStrict = [] {
  const char* e = std::getenv("POSENC_FUZZ_STRICT");
  return !(e && std::string(e) == "0");
}();

// Findings of the model reader, fixed, that POSENC_FUZZ_STRICT=0 would skip again: numbers it casts to
// int64 or uses as sizes without bounds (src/model/rope_dict.cc head_dim * partial_rotary_factor and
// mrope_section, src/model/hooks.cc mllama_attention's cross_attention_layers: float -> int64 overflow;
// the layer count: num_hidden_layers 1e8 allocates the plans until memory runs out).
bool reaches_open_model_finding(const nlohmann::json& v, const std::string& key = "", int depth = 0) {
  if (depth > 64) return false;  // the reader refuses the document (src/model/document.h)
  if (v.is_number()) {
    const double d = v.get<double>();
    if (std::abs(d) > 2147483648.0) return true;
    for (const char* k : {"num_hidden_layers", "n_layer", "n_layers", "num_layers", "num_decoder_layers"})
      if (key == k && d > 4096) return true;
    return false;
  }
  if (v.is_array()) {
    for (const auto& e : v)
      if (reaches_open_model_finding(e, key, depth + 1)) return true;
  } else if (v.is_object()) {
    for (const auto& [k, e] : v.items())
      if (reaches_open_model_finding(e, k, depth + 1)) return true;
  }
  return false;
}

// A finding of the model reader that is open (reported): fatal only in strict mode.
void open_model_finding(const std::string& what) {
  if (kModelStrict) finding(what);
  static bool printed = false;
  if (!printed)
    std::fprintf(stderr, "fuzz_config_json: open model finding (reported, not fatal): %s\n", what.c_str());
  printed = true;
}

void check_model(const posenc::ModelPositions& m) {
  if (m.layers.size() != static_cast<size_t>(m.num_layers)) finding("layers.size() != num_layers");
  // Layers repeat a handful of plans: check the first few and the last.
  for (size_t i = 0; i < m.layers.size(); ++i) {
    if (i >= 4 && i + 1 != m.layers.size()) continue;
    const posenc::LayerPlan& l = m.layers[i];
    if (l.rope) {
      check_rope(*l.rope);
      if (!(0 <= l.rotary_lo && l.rotary_lo < l.rotary_hi && l.rotary_hi <= l.qk_head_dim))
        finding("rotary range [" + std::to_string(l.rotary_lo) + ", " + std::to_string(l.rotary_hi) +
                ") outside the head of " + std::to_string(l.qk_head_dim));
    }
    const posenc::LayerAttention& a = l.attention;
    if (!std::isfinite(a.softmax_scale) || !(a.softmax_scale > 0))
      finding("softmax_scale = " + std::to_string(a.softmax_scale));
    if (a.softcap && !(std::isfinite(*a.softcap) && *a.softcap > 0))
      finding("softcap = " + std::to_string(*a.softcap));
    if (a.window < 0 || a.chunk < 0) finding("negative window or chunk");
    // The bounds attention_forward holds a query temperature to (src/attention_plan.cc).
    const posenc::QueryTemperature& t = a.temperature;
    if (t.kind != posenc::QueryTemperature::Kind::none &&
        !(std::abs(t.scale) <= 1e6 && std::isfinite(t.floor_scale) && t.floor_scale >= 1)) {
      open_model_finding("query temperature scale " + std::to_string(t.scale) + ", floor_scale " +
                         std::to_string(t.floor_scale) + ": attention_forward refuses it");
      continue;
    }
    for (int64_t p : {int64_t{0}, int64_t{1}, int64_t{1} << 20, int64_t{1} << 53})
      if (!std::isfinite(t.factor(p)))
        finding("query temperature not finite at position " + std::to_string(p));
    const Rope* rope = nullptr;
    std::optional<Rope> r;
    if (l.rope) rope = &r.emplace(*l.rope);
    (void)a.attention_config(rope);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // rope_config_from_hf_json reads a config with a model_type through the model reader: the open model
  // findings' inputs skip both readers then (those without one stay held to the rope oracle).
  bool open_finding = false;
  if (!kModelStrict) {
    const nlohmann::json root = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    open_finding = !root.is_discarded() && reaches_open_model_finding(root);
    if (open_finding && root.is_object() && root.contains("model_type")) return 0;
  }
  std::optional<RopeConfig> config;
  try {
    config = posenc::rope_config_from_hf_json(text);
  } catch (const Error&) {
  }
  if (config) check_rope(*config);  // outside the try: an Error here is a finding
  if (open_finding) return 0;
  std::optional<posenc::ModelPositions> model;
  try {
    model = posenc::model_positions_from_hf_json(text);
  } catch (const Error&) {
  }
  if (model) check_model(*model);
  return 0;
}
