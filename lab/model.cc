// lab/model.cc: the configuration, the parameter layout and checkpoints of the lab's model (the
// passes are in model_passes.cc).
#include "model.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "posenc/attention.h"
#include "posenc/error.h"

namespace posenc::lab {
namespace {

void require(bool ok, const std::string& field, double value, const std::string& why) {
  if (!ok) {
    std::ostringstream os;
    os << "lab model: " << field << " = " << value << " is invalid: " << why;
    throw Error(os.str());
  }
}

const char* norm_name(ops::Norm n) { return n == ops::Norm::layer ? "layer" : "rms"; }

}  // namespace

void validate(const ModelConfig& c) {
  require(c.vocab_size >= 2, "vocab_size", static_cast<double>(c.vocab_size), "must be >= 2");
  require(c.d_model >= 2, "d_model", static_cast<double>(c.d_model), "must be >= 2");
  require(c.layers >= 1, "layers", static_cast<double>(c.layers), "must be >= 1");
  require(c.heads >= 1 && c.d_model % c.heads == 0, "heads", static_cast<double>(c.heads),
          "must be >= 1 and divide d_model = " + std::to_string(c.d_model));
  require(c.mlp >= 1, "mlp", static_cast<double>(c.mlp), "must be >= 1");
  require(c.train_len >= 1, "train_len", static_cast<double>(c.train_len), "must be >= 1");
  // RoPE is the lab's to configure (it rescales it at evaluation time); every other encoding
  // validates its own parameters.
  if (c.encoding.has(EncodingKind::rope))
    validate(lab_rope_config(c.options, c.head_dim(), c.train_len, RopeEval::plain, c.train_len));
  const registry::LabModel shape = lab_model(c);
  for (const registry::Entry* e : c.encoding.entries())
    if (e->lab.validate) e->lab.validate(shape);
}

registry::LabModel lab_model(const ModelConfig& c, const Rope* rope) {
  return {c.d_model, c.heads, c.head_dim(), c.train_len, &c.options, rope};
}

std::string ModelConfig::to_json() const {
  nlohmann::ordered_json j;
  j["vocab_size"] = vocab_size;
  j["d_model"] = d_model;
  j["layers"] = layers;
  j["heads"] = heads;
  j["mlp"] = mlp;
  j["train_len"] = train_len;
  j["norm"] = norm_name(norm);
  j["encoding"] = encoding.name();
  j["t5_buckets"] = options.t5_buckets;
  j["t5_max_distance"] = options.t5_max_distance;
  j["max_distance"] = options.max_distance;
  j["rope_base"] = options.rope_base;
  j["sinusoidal_base"] = options.sinusoidal_base;
  j["binary_bits"] = options.binary_bits;
  return j.dump();
}

ModelConfig ModelConfig::from_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("lab model: config is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw Error("lab model: config is not a JSON object");
  auto field = [&](const char* key) -> const nlohmann::json& {
    if (!j.contains(key)) throw Error(std::string("lab model: config has no '") + key + "'");
    return j[key];
  };
  auto integer = [&](const char* key) {
    const auto& v = field(key);
    if (!v.is_number_integer())
      throw Error(std::string("lab model: config '") + key + "' = " + v.dump() + " is not an integer");
    return v.get<int64_t>();
  };
  auto number = [&](const char* key) {
    const auto& v = field(key);
    if (!v.is_number())
      throw Error(std::string("lab model: config '") + key + "' = " + v.dump() + " is not a number");
    return v.get<double>();
  };
  auto text_of = [&](const char* key) {
    const auto& v = field(key);
    if (!v.is_string())
      throw Error(std::string("lab model: config '") + key + "' = " + v.dump() + " is not a string");
    return v.get<std::string>();
  };
  ModelConfig c;
  c.vocab_size = integer("vocab_size");
  c.d_model = integer("d_model");
  c.layers = integer("layers");
  c.heads = integer("heads");
  c.mlp = integer("mlp");
  c.train_len = integer("train_len");
  const std::string norm = text_of("norm");
  if (norm != "layer" && norm != "rms")
    throw Error("lab model: config 'norm' = '" + norm + "' is invalid: expected layer or rms");
  c.norm = norm == "layer" ? ops::Norm::layer : ops::Norm::rms;
  c.encoding = EncodingSpec::parse(text_of("encoding"));
  c.options.t5_buckets = integer("t5_buckets");
  c.options.t5_max_distance = integer("t5_max_distance");
  c.options.max_distance = integer("max_distance");
  c.options.rope_base = number("rope_base");
  c.options.sinusoidal_base = number("sinusoidal_base");
  c.options.binary_bits = integer("binary_bits");
  validate(c);
  return c;
}

std::vector<ParamSlice> model_layout(const ModelConfig& c) {
  validate(c);
  const int64_t C = c.d_model, F = c.mlp;
  // GPT-2's initialisation: linear weights N(0, 0.02), the residual projections scaled by
  // 1/sqrt(2 * layers); embeddings N(0, C^-1/2) as fairseq pairs them with the sqrt(C) scale.
  const double emb_std = 1.0 / std::sqrt(static_cast<double>(C));
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.layers));
  const bool layer_norm = c.norm == ops::Norm::layer;
  std::vector<ParamSlice> out;
  auto add = [&](std::string name, std::vector<int64_t> shape, double std, bool one = false) {
    ParamSlice s;
    s.name = std::move(name);
    s.shape = std::move(shape);
    s.size = 1;
    for (int64_t d : s.shape) s.size *= d;
    s.offset = out.empty() ? 0 : out.back().offset + out.back().size;
    s.init_std = std, s.init_one = one;
    s.decay = s.shape.size() >= 2;
    out.push_back(std::move(s));
  };
  auto add_norm = [&](const std::string& name) {
    add(name + ".weight", {C}, 0.0, true);
    if (layer_norm) add(name + ".bias", {C}, 0.0);
  };
  // The tensors an encoding adds, from its registry entry: once per model, and in each layer
  // after the attention's own (biases on the logits before vector terms, as checkpoints have them).
  const registry::LabModel shape = lab_model(c);
  std::vector<const registry::Entry*> encodings = c.encoding.entries();
  std::stable_sort(encodings.begin(), encodings.end(),
                   [](const registry::Entry* a, const registry::Entry* b) {
                     return (a->role() == EncodingRole::logit_bias) > (b->role() == EncodingRole::logit_bias);
                   });
  auto add_encoding_tensors = [&](const std::string& prefix, auto hook) {
    for (const registry::Entry* e : encodings)
      if (e->lab.*hook)
        for (const registry::LabTensor& t : (e->lab.*hook)(shape)) add(prefix + t.name, t.shape, t.init_std);
  };
  add("wte.weight", {c.vocab_size, C}, emb_std);
  add_encoding_tensors("", &registry::LabHooks::model_tensors);
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    add_norm(p + "norm1");
    add(p + "attn.qkv.weight", {3 * C, C}, 0.02);
    add(p + "attn.qkv.bias", {3 * C}, 0.0);
    add(p + "attn.proj.weight", {C, C}, proj_std);
    add(p + "attn.proj.bias", {C}, 0.0);
    add_encoding_tensors(p, &registry::LabHooks::layer_tensors);
    add_norm(p + "norm2");
    add(p + "mlp.fc.weight", {F, C}, 0.02);
    add(p + "mlp.fc.bias", {F}, 0.0);
    add(p + "mlp.proj.weight", {C, F}, proj_std);
    add(p + "mlp.proj.bias", {C}, 0.0);
  }
  add_norm("normf");
  return out;
}

double estimated_memory_bytes(const ModelConfig& c, double tokens) {
  const double C = static_cast<double>(c.d_model), F = static_cast<double>(c.mlp),
               V = static_cast<double>(c.vocab_size), H = static_cast<double>(c.heads),
               L = static_cast<double>(c.layers);
  const registry::LabModel shape = lab_model(c);
  auto encoding_floats = [&](auto hook) {
    double n = 0;
    for (const registry::Entry* e : c.encoding.entries())
      if (e->lab.*hook)
        for (const registry::LabTensor& t : (e->lab.*hook)(shape)) {
          double size = 1;
          for (int64_t d : t.shape) size *= static_cast<double>(d);
          n += size;
        }
    return n;
  };
  // model_layout's tensors: embeddings, per layer qkv + proj + two MLP matrices, biases and norms.
  const double params =
      V * C + encoding_floats(&registry::LabHooks::model_tensors) + 3 * C +
      L * (4 * C * C + 2 * C * F + 9 * C + F + encoding_floats(&registry::LabHooks::layer_tensors));
  // Per token: each layer's qkv, atty, res2, res3 (8 C), gelu' and gelu of fc (2 F), the statistics and lse
  // (4 + H); then x0, the norms' out (2 C: normed), normf's statistics and the probabilities (V); the
  // backward's dres, dnorm, dqkv, datty (6 C), dfch and dlogits (F + V: a bound; it holds chunks of rows);
  // with RoPE, the attention's rotated q and k (2 C, attention.h).
  const double rope = c.encoding.has(EncodingKind::rope) ? 2 * C : 0;
  const double per_token = L * (8 * C + 2 * F + 4 + H) + 2 * C + V + 3 + 6 * C + F + V + rope;
  return 4 * (4 * params + tokens * per_token);
}

Checkpoint Model::to_checkpoint(const std::map<std::string, std::string>& metadata) const {
  Checkpoint ck;
  ck.metadata = metadata;
  ck.metadata["format"] = "posenc-lab";
  ck.metadata["config"] = config_.to_json();
  for (const ParamSlice& s : layout_)
    ck.tensors.push_back(
        {s.name, s.shape,
         std::vector<float>(params_.begin() + s.offset, params_.begin() + s.offset + s.size)});
  return ck;
}

Model Model::from_checkpoint(const Checkpoint& ck) {
  const auto config = ck.metadata.find("config");
  if (config == ck.metadata.end())
    throw Error("lab model: checkpoint has no metadata 'config' (not written by posenc lab)");
  Model model(ModelConfig::from_json(config->second), 0);
  for (const NamedTensor& t : ck.tensors) {
    bool known = false;
    for (const ParamSlice& s : model.layout_) known = known || s.name == t.name;
    if (!known)
      throw Error("lab model: checkpoint tensor '" + t.name + "' is not a parameter of a '" +
                  model.config_.encoding.name() + "' model");
  }
  std::vector<float> params(model.params_.size());
  for (const ParamSlice& s : model.layout_) {
    const NamedTensor& t = ck.get(s.name, s.shape);
    for (float v : t.data)
      if (!std::isfinite(v))
        throw Error("lab model: checkpoint tensor '" + s.name + "' holds a non-finite value");
    std::copy(t.data.begin(), t.data.end(), params.begin() + s.offset);
  }
  model.params_ = std::move(params);
  return model;
}

}  // namespace posenc::lab
