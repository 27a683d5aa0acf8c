// src/model/ultrabert.cc: UltraBERT's text config (model_type "ultrabert", transformers 5.23's
// configuration_ultrabert.py UltrabertConfig.__post_init__) in the reader's form. Its __post_init__ reads two
// keys of the authors' checkpoints before its own: attention_windows, one window per layer (0: full
// attention), which gives layer_types where none is saved and sliding_window (its first non-zero entry,
// whatever sliding_window says); and rope_theta, a list of bases per layer, which gives one default rope dict
// per layer type (the type's last layer wins) where rope_parameters is absent, and is dropped beside it.
// Without either: full attention on every third layer ((i + 1) % 3 == 0), bases 1e4 (sliding) and 2.56e6
// (full). Its rotary module reads rope_parameters[layer_type] for every type (modeling_ultrabert.py
// UltrabertRotaryEmbedding.__init__).
#include <string>
#include <vector>

#include "src/model/document.h"
#include "src/model/parse.h"

namespace posenc::detail {

json ultrabert_resolved(const json& text, const std::string& where, std::vector<std::string>& warnings) {
  json out = text;
  Obj j{text, where, {}};
  const int64_t n = j.int_or("num_hidden_layers", 32);
  if (n <= 0 || n > kMaxModelLayers)
    fail(kOp, where, "num_hidden_layers = ", n, " is invalid: must be in [1, ", kMaxModelLayers, "]");
  if (j.has("attention_windows")) {
    const std::vector<int64_t> windows = j.integers("attention_windows", 0, int64_t{1} << 40);
    if (static_cast<int64_t>(windows.size()) != n)
      fail(kOp, where, "attention_windows lists ", windows.size(),
           " layers, expected num_hidden_layers = ", n);
    for (int64_t w : windows)
      if (w != 0) {
        if (j.has("sliding_window") && j.at("sliding_window") != w)
          warnings.push_back(where + "sliding_window = " + json_excerpt(j.at("sliding_window")) +
                             " is replaced by attention_windows' first window, " + std::to_string(w) +
                             " (UltrabertConfig.__post_init__)");
        out["sliding_window"] = w;
        break;
      }
    if (!j.has("layer_types")) {
      json types = json::array();
      for (int64_t w : windows) types.push_back(w != 0 ? "sliding_attention" : "full_attention");
      out["layer_types"] = types;
    }
    out.erase("attention_windows");
  }
  if (!has(out, "layer_types")) {
    json types = json::array();
    for (int64_t i = 0; i < n; ++i)
      types.push_back((i + 1) % 3 != 0 ? "sliding_attention" : "full_attention");
    out["layer_types"] = types;
  }
  if (j.j.contains("rope_theta")) {
    const json& theta = j.j.at("rope_theta");
    if (j.has("rope_parameters") && !theta.is_null()) {
      warnings.push_back(where +
                         "rope_theta is ignored by ultrabert: rope_parameters is given "
                         "(UltrabertConfig.__post_init__)");
    } else if (!theta.is_null()) {
      if (!theta.is_array())
        fail(kOp, where, "rope_theta = ", json_excerpt(theta),
             " is not supported for model_type 'ultrabert': its config class reads a base per layer "
             "(a list; transformers 5 fails for a number)");
      const json& types = out.at("layer_types");
      json rp = json::object();
      for (size_t i = 0; i < types.size() && i < theta.size(); ++i) {  // zip(layer_types, rope_theta)
        if (!theta[i].is_number())
          fail(kOp, where, "rope_theta contains ", json_excerpt(theta[i]), ": must be a list of numbers");
        rp[types[i].get<std::string>()] = {{"rope_type", "default"}, {"rope_theta", theta[i]}};
      }
      out["rope_parameters"] = rp;
    }
    out.erase("rope_theta");
  }
  // Every layer type needs its dict (the rotary module raises KeyError otherwise; a flat dict is refused
  // by the reader as for every per-type family).
  if (has(out, "rope_parameters") && out.at("rope_parameters").is_object()) {
    const json& rp = out.at("rope_parameters");
    if (rp.contains("full_attention") || rp.contains("sliding_attention"))
      for (const json& t : out.at("layer_types"))
        if (t.is_string() && !rp.contains(t.get<std::string>()))
          fail(kOp, where, "rope_parameters has no dict for layer type '", t.get<std::string>(),
               "': ultrabert's rotary module reads one for every type (transformers 5 raises KeyError)");
  }
  return out;
}

}  // namespace posenc::detail
