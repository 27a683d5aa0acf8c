// lab/positional.cc: see positional.h.
#include "positional.h"

#include "posenc/error.h"

namespace posenc::lab {
namespace {

[[noreturn]] void bad_encoding(std::string_view text, const std::string& why) {
  throw Error("lab: encoding = '" + std::string(text) + "' is invalid: " + why);
}

template <typename E>
void set_once(E& slot, E value, std::string_view text, std::string_view part) {
  if (slot != E::none) bad_encoding(text, "'" + std::string(part) + "' conflicts with another encoding of its group");
  slot = value;
}

}  // namespace

EncodingSpec EncodingSpec::parse(std::string_view text) {
  EncodingSpec spec;
  if (text == "none") return spec;
  if (text.empty()) bad_encoding(text, "empty");
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('+', start), text.size());
    const std::string_view part = text.substr(start, end - start);
    if (part == "sinusoidal") set_once(spec.absolute, Absolute::sinusoidal, text, part);
    else if (part == "learned") set_once(spec.absolute, Absolute::learned, text, part);
    else if (part == "binary") set_once(spec.absolute, Absolute::binary, text, part);
    else if (part == "alibi") set_once(spec.bias, Bias::alibi, text, part);
    else if (part == "t5") set_once(spec.bias, Bias::t5, text, part);
    else if (part == "relative") set_once(spec.bias, Bias::relative, text, part);
    else if (part == "shaw") set_once(spec.vector, Vector::shaw, text, part);
    else if (part == "xl") set_once(spec.vector, Vector::xl, text, part);
    else if (part == "rope") {
      if (spec.rope) bad_encoding(text, "'rope' appears twice");
      spec.rope = true;
    } else {
      bad_encoding(text, "unknown part '" + std::string(part) +
                             "' (expected none, or '+'-joined sinusoidal|learned|binary, alibi|t5|relative, shaw|xl, rope)");
    }
    start = end + 1;
  }
  return spec;
}

std::string EncodingSpec::name() const {
  std::vector<std::string> parts;
  if (rope) parts.emplace_back("rope");
  constexpr const char* kAbsolute[] = {"", "sinusoidal", "learned", "binary"};
  constexpr const char* kBias[] = {"", "alibi", "t5", "relative"};
  constexpr const char* kVector[] = {"", "shaw", "xl"};
  if (absolute != Absolute::none) parts.emplace_back(kAbsolute[static_cast<int>(absolute)]);
  if (vector != Vector::none) parts.emplace_back(kVector[static_cast<int>(vector)]);
  if (bias != Bias::none) parts.emplace_back(kBias[static_cast<int>(bias)]);
  if (parts.empty()) return "none";
  std::string out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) out += "+" + parts[i];
  return out;
}

std::vector<EncodingSpec> default_lab_encodings() {
  std::vector<EncodingSpec> out;
  for (const char* name : {"none", "learned", "sinusoidal", "binary", "relative", "t5", "shaw", "xl", "rope", "alibi",
                           "rope+alibi"})
    out.push_back(EncodingSpec::parse(name));
  return out;
}

const char* rope_eval_name(RopeEval mode) {
  switch (mode) {
    case RopeEval::plain: return "plain";
    case RopeEval::linear: return "linear";
    case RopeEval::ntk: return "ntk";
    case RopeEval::yarn: return "yarn";
  }
  return "?";
}

RopeEval parse_rope_eval(std::string_view text) {
  for (RopeEval m : {RopeEval::plain, RopeEval::linear, RopeEval::ntk, RopeEval::yarn})
    if (text == rope_eval_name(m)) return m;
  throw Error("lab: rope evaluation = '" + std::string(text) + "' is invalid: expected plain, linear, ntk or yarn");
}

RopeConfig lab_rope_config(const EncodingOptions& options, int64_t head_dim, int64_t train_len, RopeEval mode,
                           int64_t eval_len) {
  RopeConfig c;
  c.head_dim = head_dim;
  c.base = options.rope_base;
  c.layout = RopeLayout::half;
  c.max_position_embeddings = train_len;
  if (mode == RopeEval::plain || eval_len <= train_len) return c;
  const double factor = static_cast<double>(eval_len) / static_cast<double>(train_len);
  switch (mode) {
    case RopeEval::linear:
      c.scaling.type = RopeScalingType::linear;
      c.scaling.factor = factor;
      break;
    case RopeEval::ntk:
      // HF dynamic with factor 1: base' = base * (seq_len / max_position_embeddings)^(d / (d - 2)),
      // the NTK-aware base for the length of the evaluated window.
      c.scaling.type = RopeScalingType::dynamic;
      c.scaling.factor = 1.0;
      break;
    case RopeEval::yarn:
      c.scaling.type = RopeScalingType::yarn;
      c.scaling.factor = factor;
      c.scaling.original_max_position_embeddings = train_len;
      break;
    case RopeEval::plain: break;
  }
  return c;
}

}  // namespace posenc::lab
