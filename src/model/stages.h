// src/model/stages.h: the stages of the config reader (config.json -> ModelPositions,
// detail::positions_from_root in src/model/config_json.cc) and the state one stage hands the next. They
// run in the order transformers 5.23 reads a config and builds the model from it:
//   identify   which model's code reads the config: AutoConfig's model_type (or the class auto_map names),
//              a wrapper's text config as SubConfigSpec.create_subconfig builds it, aliases, the family
//              whose positional code it runs, and every refusal (src/model/identify.cc);
//   normalize  the text config as its class rebuilds it (FamilyHooks::resolve), one Obj whose reads are
//              recorded (src/model/config_json.cc);
//   plan       the config class's attributes (sizes, head dims), the embeddings' position tables, the
//              layer types and windows (src/model/plan_shape.cc); convert_rope_params_to_dict and the
//              rotary modules (src/model/plan_rope.cc); each attention module's scale, softcap and
//              temperature, and the masks the model builds (src/model/plan_attention.cc);
//   assemble   each layer's plan from the model-wide choices, then the last warnings (src/model/assemble.cc).
// What a family does at a stage is its Family row (src/model/families.h) or its hook (src/model/hooks.h);
// no stage tests a model type by name.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/model.h"
#include "src/model/hooks.h"
#include "src/model/parse.h"

namespace posenc::detail {

// What the identify stage finds: the config's type, where its text model's keys are, and the types the
// reader plans it as.
struct Identity {
  std::string outer_type;     // the config's model_type
  bool remote = false;        // a remote-code type planned from its authors' files (src/model/remote.cc)
  bool wrapped = false;       // a multimodal wrapper with the language model under text_config
  bool flat_wrapper = false;  // a wrapper saved without text_config: its top-level keys are the text model's
  json text = nullptr;        // wrapped: text_config over the keys the wrapper's class fills in
  std::string where;          // "text_config." or ""
  std::string declared_type;  // the text config's type as its class is chosen, before aliases
  std::string own_type;       // canonical_type(declared_type): the model's row, the plan's model_type
  std::string type;           // rules_type(own_type): the family whose positional code it runs
  std::vector<std::string> warnings;  // what identifying changed (a text model_type the wrapper ignores)

  // The object holding the text model's keys: the filled text_config, or the config itself.
  const json& text_config(const json& root) const { return wrapped ? text : root; }
};

// The identify stage of a config.json (after identified_as_other_type's renaming). why == nullptr: fails at
// the first refusal with the reader's error. Otherwise answers unplanned_reason: the first refusal's reason
// lands in *why (left empty when the config is planned) and the checks only the reader makes (text_config
// and its model_type of the wrong JSON type) are left to the reader.
Identity identify(const json& root, std::string* why);

// The model-wide choices of the plan stages, which assemble turns into each layer's plan.
struct Plan {
  HeadDims dims{};                 // the q/k and v head dims (plan_heads)
  int64_t window = 0;              // the sliding window, 0 = none (plan_layer_types)
  std::vector<std::string> types;  // each layer's type
  std::vector<int64_t> head_dims;  // each layer's rotated head dim
  MlaLayerDims mla_dims;           // dots3_note_text's MLA dims per layer; empty elsewhere
  bool falcon_alibi = false;       // Falcon's alibi = true: ALiBi in place of RoPE (plan_rope)
  bool rope_off = false;           // the config leaves the rotary module out (or a learned table replaces it)
  std::optional<double> flat_prf;  // the flat dict's partial_rotary_factor as given, for messages
  std::optional<double> beta;      // rope_parameters.llama_4_scaling_beta (Ministral 3, Mistral 4)
  double scale = 1.0;              // the softmax scale (plan_scale)
  std::optional<double> softcap;   // the attention logits' softcap
  int64_t chunk = 0;               // Llama 4's attention_chunk_size
  QueryTemperature llama4_temp;    // Llama 4's NoPE layers
  QueryTemperature ministral_temp;   // Mistral's llama_4_scaling_beta, every layer
  bool bidirectional = false;        // every layer's self-attention sees both ways (plan_masks)
  bool inverse_layer_scale = false;  // GPT-2's scale_attn_by_inverse_layer_idx
};

// The plan stages, in the reader's order (each names the transformers code it follows).
// src/model/plan_shape.cc:
void read_sizes(Reading& r, const std::string& declared_type);
void plan_attention_free(Reading& r);  // the whole plan of a model without softmax attention
void plan_heads(Reading& r, Plan& p);
void plan_position_tables(Reading& r);
void plan_layer_types(Reading& r, Plan& p);
// src/model/plan_rope.cc:
void plan_rope(Reading& r, Plan& p);
// src/model/plan_attention.cc:
void plan_scale(Reading& r, Plan& p);
void plan_masks(Reading& r, Plan& p, const std::string& outer_type);
void plan_t5_buckets(Reading& r);
// src/model/assemble.cc: every layer's plan into r.out, then the warnings of what was read and not.
void assemble_layers(Reading& r, const Plan& p);
void warn_unread_keys(Reading& r, const json& root, const Identity& id);

}  // namespace posenc::detail
