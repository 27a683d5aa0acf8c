// lab/positional.cc: see positional.h.
#include "positional.h"

#include <algorithm>

#include "posenc/error.h"

namespace posenc::lab {
namespace {

[[noreturn]] void bad_encoding(std::string_view text, const std::string& why) {
  throw Error("lab: encoding = '" + std::string(text) + "' is invalid: " + why);
}

// "none, or '+'-joined sinusoidal|learned|binary, relative|t5|alibi, ...", from the catalogue.
std::string expected_parts() {
  std::string out = "none, or '+'-joined ";
  for (EncodingRole role : {EncodingRole::absolute, EncodingRole::logit_bias, EncodingRole::attention_vectors,
                            EncodingRole::rotation}) {
    std::string group;
    for (const EncodingInfo& e : all_encodings())
      if (e.role == role) group += (group.empty() ? "" : "|") + std::string(e.name);
    out += group + (role == EncodingRole::rotation ? "" : ", ");
  }
  return out;
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
    const EncodingInfo* info = nullptr;
    for (const EncodingInfo& e : all_encodings())
      if (e.role != EncodingRole::none && (e.name == part || (!e.alias.empty() && e.alias == part)))
        info = &e;
    if (!info)
      bad_encoding(text, "unknown part '" + std::string(part) + "' (expected " + expected_parts() + ")");
    if (spec.has(info->kind)) bad_encoding(text, "'" + std::string(part) + "' appears twice");
    if (spec.part(info->role))
      bad_encoding(text, "'" + std::string(part) + "' conflicts with another encoding of its group");
    spec.parts.push_back(info->kind);
    start = end + 1;
  }
  std::sort(spec.parts.begin(), spec.parts.end(),
            [](EncodingKind a, EncodingKind b) { return encoding_info(a).role < encoding_info(b).role; });
  return spec;
}

std::string EncodingSpec::name() const {
  if (parts.empty()) return "none";
  std::string out;
  for (EncodingKind kind : parts) out += (out.empty() ? "" : "+") + std::string(encoding_info(kind).name);
  return out;
}

bool EncodingSpec::has(EncodingKind kind) const {
  return std::find(parts.begin(), parts.end(), kind) != parts.end();
}

std::optional<EncodingKind> EncodingSpec::part(EncodingRole role) const {
  for (EncodingKind kind : parts)
    if (encoding_info(kind).role == role) return kind;
  return std::nullopt;
}

std::vector<const registry::Entry*> EncodingSpec::entries() const {
  std::vector<const registry::Entry*> out;
  for (EncodingKind kind : parts) out.push_back(&registry::entry(kind));
  return out;
}

std::vector<EncodingSpec> default_lab_encodings() {
  std::vector<EncodingSpec> out;
  for (const char* name : {"none", "learned", "sinusoidal", "binary", "relative", "t5", "shaw",
                           "transformer_xl", "rope", "alibi", "rope+alibi"})
    out.push_back(EncodingSpec::parse(name));
  return out;
}

const char* rope_eval_name(RopeEval mode) {
  switch (mode) {
    case RopeEval::plain:
      return "plain";
    case RopeEval::linear:
      return "linear";
    case RopeEval::ntk:
      return "ntk";
    case RopeEval::yarn:
      return "yarn";
  }
  return "?";
}

RopeEval parse_rope_eval(std::string_view text) {
  for (RopeEval m : {RopeEval::plain, RopeEval::linear, RopeEval::ntk, RopeEval::yarn})
    if (text == rope_eval_name(m)) return m;
  throw Error("lab: rope evaluation = '" + std::string(text) +
              "' is invalid: expected plain, linear, ntk or yarn");
}

bool rope_eval_is_plain(RopeEval mode, int64_t train_len, int64_t eval_len) {
  return mode == RopeEval::plain || eval_len <= train_len;
}

RopeConfig lab_rope_config(const EncodingOptions& options, int64_t head_dim, int64_t train_len, RopeEval mode,
                           int64_t eval_len) {
  RopeConfig c;
  c.head_dim = head_dim;
  c.base = options.rope_base;
  c.layout = RopeLayout::half;
  c.max_position_embeddings = train_len;
  if (rope_eval_is_plain(mode, train_len, eval_len)) return c;
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
    case RopeEval::plain:
      break;
  }
  return c;
}

}  // namespace posenc::lab
