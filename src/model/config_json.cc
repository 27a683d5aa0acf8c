// src/model/config_json.cc: ModelPositions from a HuggingFace config.json, as transformers 5.23 reads it:
// PreTrainedConfig.convert_rope_params_to_dict + standardize_rope_params (modeling_rope_utils.py
// RotaryEmbeddingConfigMixin), each family's config class defaults and layer_types, and the per-layer
// choices of its modeling file (each rule cites its file and the function or class it follows).
// positions_from_root runs the reader's stages (src/model/stages.h) in transformers' order: identify, then
// normalize (here), then plan (sizes and head dims, position tables, windows and layer types, the rope
// dicts, the attention scale and masks), then assemble. What a family does at a stage is its Family row
// (src/model/families.h), or its hook (src/model/hooks.h) where the row's data cannot say it. No stage tests
// a model type by name.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/model.h"
#include "src/model/document.h"
#include "src/model/hooks.h"
#include "src/model/parse.h"
#include "src/model/stages.h"

namespace posenc {
namespace detail {
namespace {

// Marks the keys of a space-separated list read.
void quiet(Obj& j, const char* keys) {
  for (std::string_view rest = keys ? keys : ""; !rest.empty();) {
    const size_t end = std::min(rest.find(' '), rest.size());
    j.read.insert(std::string(rest.substr(0, end)));
    rest.remove_prefix(std::min(end + 1, rest.size()));
  }
}

// Most wrappers' config classes build the text model from text_config alone: transformers 5 gives a flat
// config (e.g. copies of GLM-4.1V from transformers 4.53's development builds, Llama 4 configs flattened
// for other engines) the text class's defaults (GLM-4.1V's cannot even run: 64 rotary pairs for
// mrope_section [8, 12, 12]). posenc reads the top-level keys as the text model's, as the file means them.
void warn_flat_wrapper(Identity& id) {
  if (id.flat_wrapper && !wrapper_reads_flat_keys(id.outer_type))
    id.warnings.push_back("model_type '" + id.outer_type + "' without text_config: the top-level keys are " +
                          "read as the text model's (model_type '" + id.own_type + "'); transformers " +
                          "5 reads text_config only and would build its class defaults");
}

}  // namespace

ModelPositions positions_from_root(const json& root) {
  // Identify: which model's code reads the config (src/model/identify.cc).
  if (const std::optional<Identified> renamed = identified_as_other_type(root)) {
    ModelPositions out = positions_from_root(renamed->root);
    out.warnings.insert(out.warnings.begin(), renamed->note);
    return out;
  }
  Identity id = identify(root, nullptr);
  if (id.remote) return remote_code_positions(root, id.outer_type);

  // Normalize: the text config as its class rebuilds it before anything is read (step3p5, zaya, ultrabert,
  // dots3_note_text: FamilyHooks::resolve), one object whose reads are recorded.
  const Family* const own_row = find_family(id.own_type);
  const FamilyHooks hooks = own_row ? family_hooks(*own_row, *find_family(id.type)) : FamilyHooks{};
  const json& given = id.text_config(root);
  const json resolved = hooks.resolve ? hooks.resolve(given, id.where, id.warnings) : json(nullptr);
  Obj j{resolved.is_null() ? given : resolved, id.where, {}};
  j.read.insert("model_type");
  warn_flat_wrapper(id);
  if (seq2seq_family(id.own_type)) {  // encoder-decoders with tables of their own (src/model/seq2seq.cc)
    ModelPositions out = seq2seq_positions(j, id.own_type);
    out.warnings.insert(out.warnings.begin(), id.warnings.begin(), id.warnings.end());
    return out;
  }
  ModelPositions out;
  out.warnings = id.warnings;
  Model m;
  m.family = own_row;  // the class defaults are the model's own
  m.rules = find_family(id.type);
  m.hooks = &hooks;
  m.type = id.type;
  m.warnings = &out.warnings;
  Reading r{j, m, out, id.own_type, id.type};
  // Keys of the family that carry no positions, or that its rules check elsewhere (Family::quiet_keys).
  quiet(j, m.family->quiet_keys);
  quiet(j, m.rules->quiet_keys);

  // Plan (src/model/plan_shape.cc, plan_rope.cc, plan_attention.cc): the config class's sizes, then a
  // family planned whole (FamilyHooks::plan) or without softmax attention, then the model-wide choices.
  read_sizes(r, id.declared_type);
  if (hooks.plan) return hooks.plan(j, m);
  if (m.rules->has(kAttentionFree)) {
    plan_attention_free(r);
    return out;
  }
  Plan p;
  plan_heads(r, p);
  plan_position_tables(r);
  plan_layer_types(r, p);
  plan_rope(r, p);
  plan_scale(r, p);
  plan_masks(r, p, id.outer_type);
  plan_t5_buckets(r);

  // Assemble (src/model/assemble.cc): each layer's plan, then what the config holds and no stage read.
  assemble_layers(r, p);
  warn_unread_keys(r, root, id);
  return out;
}

}  // namespace detail

ModelPositions model_positions_from_hf_json(const std::string& text) {
  return detail::positions_from_root(detail::parse_config_json(detail::kOp, text));
}

ModelPositions model_positions_from_hf_file(const std::string& path) {
  return model_positions_from_hf_json(detail::read_text_file(detail::kOp, path));
}

}  // namespace posenc
