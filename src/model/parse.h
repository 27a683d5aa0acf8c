// src/model/parse.h: helpers shared by the config.json reader (src/model/config_json.cc) and its
// rope-dict part (src/model/rope_dict.cc): a JSON object whose reads are recorded, and the model
// facts the rope dicts need.
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "posenc/model.h"
#include "src/check.h"
#include "src/model/document.h"
#include "src/model/families.h"

namespace posenc::detail {
using json = nlohmann::json;
inline constexpr const char* kOp = "model config";

inline bool has(const json& j, const std::string& key) {
  return j.is_object() && j.contains(key) && !j.at(key).is_null();
}

// model_positions_from_hf_json on the parsed document (parse_config_json, src/model/document.h): the
// readers that rewrite a config (a model_type filled in or renamed, a sub-config planned alone) hand the
// rewritten object back here instead of writing it out as text and parsing it again.
ModelPositions positions_from_root(const json& root);

// A config.json whose model is another model_type than the one it states (src/model/identify.cc): no
// model_type, and a configuration class in auto_map that names one (MiniCPM 1 / 2's own files); Kimi K2's
// remote code, DeepSeek-V3's (kimi_k2, and kimi_k25's text_config of type kimi_k2). The config rewritten to
// that type and the warning that says so; nullopt when the config is read as it is.
struct Identified {
  json root;
  std::string note;
};
std::optional<Identified> identified_as_other_type(const json& root);
// Whether model_type "internlm" is InternLM2's early revisions: architectures lists InternLM2ForCausalLM.
bool internlm2_architecture(const json& root);

// Why posenc's model table does not plan this config.json (empty when it does): its model_type's
// refusal (remote code, a mechanism posenc lacks), its absence from the table, or no model_type.
std::string unplanned_reason(const json& root);

// A multimodal wrapper's text_config as transformers 5.23 builds it (src/model/wrappers.cc):
// the model_type of the wrapper's concrete text class (which wins over the dict's), or nullptr;
const char* wrapper_text_class(const std::string& outer);
// the default text model_type of its AutoConfig spec (for a dict without one), or nullptr;
const char* wrapper_default_text_type(const std::string& outer);
// the type it builds: the class's, else the dict's model_type, else the spec's default, else `outer`;
std::string wrapper_text_type(const std::string& outer, const json& text_config);
// the dict over the keys the wrapper's __post_init__ fills in where the dict lacks them.
json wrapper_text_config(const std::string& outer, const json& text_config);
// Whether transformers 5.23's config class of wrapper `outer` builds text_config from the top-level keys
// of a config that has none (a flat config); every other wrapper builds its text class's defaults.
bool wrapper_reads_flat_keys(const std::string& outer);
// The text model_type a wrapper builds whatever its text_config says, flat or wrapped ("" for others).
std::string wrapper_fixed_text_type(const std::string& outer);
// Why a wrapper's flat config is refused, where its class reads its top-level keys in part; else nullptr.
const char* wrapper_flat_refusal(const std::string& outer);
// The prefix-LM mask a wrapper's model adds over its text layers (read in place of the text config's
// use_bidirectional_attention), or nullptr.
const char* wrapper_prefix_lm_note(const std::string& outer);
// The bidirectional blocks a wrapper's model adds over its text layers (image tokens), or nullptr.
const char* wrapper_block_mask_note(const std::string& outer);

// A JSON object whose reads are recorded, so that unread keys can be reported.
// Sizes no real model approaches (the largest have ~128 layers and heads of 576), checked before any
// allocation or cast: a config beyond them is refused, not allocated.
inline constexpr int64_t kMaxModelLayers = 65536;
inline constexpr int64_t kMaxModelHeadDim = 65536;

struct Obj {
  const json& j;
  std::string where;  // "" or "text_config." or "rope_parameters.full_attention."
  std::set<std::string> read;
  bool has(const std::string& k) {
    read.insert(k);
    return ::posenc::detail::has(j, k);
  }
  const json& at(const std::string& k) {
    read.insert(k);
    return j.at(k);
  }
  double num(const std::string& k) {
    const json& v = at(k);
    if (!json_finite_number(v)) fail(kOp, where, k, " = ", v.dump(), " is invalid: must be a finite number");
    return v.get<double>();
  }
  int64_t integer(const std::string& k) {
    const json& v = at(k);
    int64_t out = 0;
    switch (json_int64(v, out)) {
      case JsonInt::ok:
        return out;
      case JsonInt::too_large:
        fail(kOp, where, k, " = ", v.get<uint64_t>(), " is invalid: larger than the int64 range");
      case JsonInt::not_integer:
        break;
    }
    fail(kOp, where, k, " = ", v.dump(), " is invalid: must be an integer");
  }
  bool boolean(const std::string& k) {
    const json& v = at(k);
    if (!v.is_boolean()) fail(kOp, where, k, " = ", v.dump(), " is invalid: must be true or false");
    return v.get<bool>();
  }
  std::string str(const std::string& k) {
    const json& v = at(k);
    if (!v.is_string()) fail(kOp, where, k, " = ", v.dump(), " is invalid: must be a string");
    return v.get<std::string>();
  }
  double num_or(const std::string& k, double d) { return has(k) ? num(k) : d; }
  int64_t int_or(const std::string& k, int64_t d) { return has(k) ? integer(k) : d; }
  bool bool_or(const std::string& k, bool d) { return has(k) ? boolean(k) : d; }
  std::string str_or(const std::string& k, const std::string& d) { return has(k) ? str(k) : d; }
  std::vector<double> numbers(const std::string& k) {
    const json& v = at(k);
    if (!v.is_array()) fail(kOp, where, k, " = ", v.dump(), " is invalid: must be a list of numbers");
    std::vector<double> out;
    for (const json& e : v) {
      if (!e.is_number()) fail(kOp, where, k, " contains ", e.dump(), ": must be a list of numbers");
      out.push_back(e.get<double>());
    }
    return out;
  }
  // A list of integers, each in [lo, hi] (checked before any conversion: 1e300 is an error, not a cast).
  std::vector<int64_t> integers(const std::string& k, int64_t lo, int64_t hi) {
    std::vector<int64_t> out;
    for (double x : numbers(k)) {
      if (!(x >= static_cast<double>(lo) && x <= static_cast<double>(hi)) || std::floor(x) != x)
        fail(kOp, where, k, " contains ", x, ": must be integers in [", lo, ", ", hi, "]");
      out.push_back(static_cast<int64_t>(x));
    }
    return out;
  }
  // Warn about every unread key whose name looks positional.
  void warn_unread(std::vector<std::string>& warnings, const std::string& model_type) const {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      if (read.count(k) || detail::known_irrelevant_key(k) || !detail::looks_positional(k)) continue;
      const std::string instead = detail::ignored_by_transformers(model_type, k);
      if (!instead.empty())  // (transformers' family ignores it too: the plan agrees, the user should know)
        warnings.push_back("key '" + where + k + "' is ignored, as transformers 5's " + model_type +
                           " ignores it: " + instead);
      else
        warnings.push_back("key '" + where + k + "' is not understood by posenc for model_type '" +
                           model_type + "': ignored");
    }
  }
};

struct FamilyHooks;

// What the rest of the parse needs to know about the model.
struct Model {
  const detail::Family* family;  // the model's own row (its class defaults)
  const detail::Family* rules;   // the row whose positional code it runs (Family::rules, else its own)
  const FamilyHooks* hooks;      // the family's code (src/model/hooks.h): its own, else its rules row's
  std::string type;              // rules->model_type
  const SizeDefaults* sizes;     // the config class's default sizes (nullptr: the config must give them)
  int64_t hidden = 0, heads = 0, layers = 0, max_pos = 0, head_dim = 0;
  int64_t nope = 0;                     // DeepSeek/MiniCPM3: q/k dims before the rotated ones
  std::optional<int64_t> top_original;  // top-level original_max_position_embeddings
  std::vector<std::string>* warnings;

  // A row's value for a field rows without rules of their own leave unset: the model's own row's when it
  // sets it (gemma3n_text's layer pattern beside gemma3_text's), else the rules family's.
  template <class T>
  T first_set(T Family::*field) const {
    return family->*field != T{} ? family->*field : rules->*field;
  }
};

// One standardized rope dict -> RopeConfig (src/model/rope_dict.cc).
RopeConfig rope_from_dict(Obj& d, const Model& m, double theta, std::optional<double> prf, bool top_level,
                          std::optional<double>& ministral_beta);

// Whether the rope_theta transformers 5 would store is None (olmo_hybrid then builds no rotary module).
bool rope_theta_is_null(const json& j);
// mimo_v2_flash: the checkpoint's rope_theta, swa_rope_theta, partial_rotary_factor, swa_head_dim and
// swa_v_head_dim, which transformers 5 ignores, must equal what it uses (an error names the key).
void check_mimo_keys(Obj& j, const json& rope_parameters,
                     const std::map<std::string, std::optional<RopeConfig>>& nested);

// Per layer, DeepSeek sparse attention's indexer (deepseek_v32, glm_moe_dsa; nullopt elsewhere) without
// its rope, which the caller copies from the layer's (src/model/indexer.cc).
std::vector<std::optional<TopkIndexer>> topk_indexers(Obj& j, const Model& m,
                                                      const std::vector<std::string>& types,
                                                      std::vector<std::string>& warnings);

// DeepSeek-V4: its layer types, two rope dicts, compressed keys and indexer (src/model/deepseek_v4.cc).
ModelPositions deepseek_v4_positions(Obj& j, Model& m);

// step3p5's text config in the form its config class builds: MTP tails trimmed, rope_parameters per
// layer type (src/model/step3p5.cc); the reader then plans it like laguna's.
json step3p5_resolved(const json& text, const std::string& where, std::vector<std::string>& warnings);
// zaya's text config with its layer types (hybrid, hybrid_sliding) and rope dict keys renamed to
// full_attention / sliding_attention (src/model/zaya.cc); zaya_layer_type names a plan's type back.
json zaya_resolved(const json& text, const std::string& where, std::vector<std::string>& warnings);
std::string zaya_layer_type(const std::string& type);
// ultrabert's text config with its checkpoints' attention_windows and per-layer rope_theta read as its config
// class reads them: layer_types, sliding_window and one rope dict per layer type (src/model/ultrabert.cc).
json ultrabert_resolved(const json& text, const std::string& where, std::vector<std::string>& warnings);
// dots3_note_text's text config (flat under a "dots3_note" wrapper too) in the form its config class builds:
// layer types from use_dsa / use_sliding_window, one rope dict per layer type, its per-type MLA dims as
// per_layer_config's qk_nope_head_dim / qk_rope_head_dim / v_head_dim overrides (src/model/dots3.cc).
json dots3_resolved(const json& text, const std::string& where, std::vector<std::string>& warnings);

// Remote-code model types posenc plans from the authors' modeling files (src/model/remote.cc).
bool remote_code_planned(const std::string& model_type);
// Why posenc does not plan this config of a remote-code type it plans others of (empty when it does):
// "internlm" configs that are not InternLM2's early revisions.
std::string remote_code_refusal(const json& root, const std::string& model_type);
ModelPositions remote_code_positions(const json& root, const std::string& model_type);

// Encoder-decoder families with absolute position tables (BART's, Marian's, M2M100's, Whisper's) and
// T5Gemma's two Gemma 2 stacks: the whole plan (src/model/seq2seq.cc). T5's family goes through the main
// reader.
bool seq2seq_family(const std::string& model_type);
ModelPositions seq2seq_positions(Obj& j, const std::string& model_type);
// T5Gemma: its encoder and decoder sub-configs, each planned as gemma2 (src/model/t5gemma.cc).
ModelPositions t5gemma_positions(Obj& j);

// A layer pattern's period `key` (fallback when absent), which must be >= 1 (src/model/layer_types.cc).
int64_t layer_period(Obj& j, const char* key, int64_t fallback);

// The sliding window (0 = none) as each family's config class fills and gates it (src/model/layer_types.cc).
int64_t sliding_window(Obj& j, const Model& m);

// Each layer's type: the config's layer_types (legacy names remapped as configuration_utils.py
// _LEGACY_LAYER_TYPE_REMAP), or the family's rule when it has none (src/model/layer_types.cc).
// use_rope: llama4 / smollm3 NoPE layers; window: the sliding window (0 = none).
std::vector<std::string> layer_types(Obj& j, const Model& m, const std::vector<int>& use_rope, int64_t window,
                                     std::vector<std::string>& warnings);

// The q/k and v head dims (m.head_dim: the rotated part for MLA; m.nope: the dims before it): MLA
// families (qk_nope + qk_rope, v_head_dim), T5's d_kv, jetmoe's kv_channels, zamba's 2 * hidden / heads,
// nemotron_h's 128, dbrx's d_model / n_heads, else head_dim or hidden / heads (src/model/per_layer.cc).
struct HeadDims {
  bool mla;    // DeepSeek-V3's latent attention (its variants): the rotary range is [nope, nope + rope)
  int64_t qk;  // the q/k head the attention scale and the rotated range refer to
  int64_t v;
};
HeadDims head_dims(Obj& j, Model& m, std::vector<std::string>& warnings);

// Per-layer head dims (per_layer_config's head_dim overrides; Gemma 4's global_head_dim on its
// full-attention layers), and the one head dim of a layer type (src/model/per_layer.cc).
std::vector<int64_t> layer_head_dims(Obj& j, const Model& m, const std::vector<std::string>& types);
int64_t type_head_dim(const std::vector<int64_t>& dims, const std::vector<std::string>& types,
                      const std::string& type, int64_t fallback);
// MLA dims per layer (dots3_note_text: per_layer_config's qk_nope_head_dim and v_head_dim overrides, the
// rotated qk_rope_head_dim being layer_head_dims'); empty for every other family (src/model/per_layer.cc).
struct MlaLayerDims {
  std::vector<int64_t> nope, v;
};
MlaLayerDims mla_layer_dims(Obj& j, const Model& m, int64_t v_head_dim);

}  // namespace posenc::detail
