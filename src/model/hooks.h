// src/model/hooks.h: the code of the families whose positional rules are more than their Family row
// (src/model/families.h) says: one FamilyHooks record per such model_type, each member a stage of the reader
// (src/model/stages.h) where the family's code runs. The functions live in src/model/hooks.cc, or in
// the family's own file (step3p5.cc, zaya.cc, ultrabert.cc, dots3.cc, deepseek_v4.cc).
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "posenc/model.h"
#include "src/model/parse.h"

namespace posenc::detail {

// One config's reading as the reader's stages and the family hooks share it.
struct Reading {
  Obj& j;
  Model& m;
  ModelPositions& out;
  const std::string& own_type;     // the model's type (its class defaults; the plan's model_type)
  const std::string& type;         // the family whose rules it runs (Model::type)
  std::vector<int> use_rope = {};  // per layer: 0 = a NoPE layer (llama4_text, smollm3, muse_glimmer_text)
  bool learned_table = false;      // a learned table instead of the family's rotation (esm's "absolute")
  // The rope dict as it is read: the dict (rp, named rp_name), a dict built here (owned), the bases of the
  // full and sliding layers, the partial rotation, and the RopeConfig(s) read from it.
  json owned = nullptr;
  const json* rp = nullptr;
  std::string rp_name = "rope_parameters";
  double theta = 0, local_theta = 0;
  std::optional<double> prf = std::nullopt;
  std::optional<RopeConfig> flat = std::nullopt;
  std::map<std::string, std::optional<RopeConfig>> nested = {};
  // Per layer, set by FamilyHooks::layers.
  std::vector<int> force_rope = {};  // RoPE whatever Family::rope_layers says (cohere2_moe's dense prefix)
  std::vector<int> scaled = {};      // molmo2_text: 1 = the rope dict, 0 = the default rope of its base
  std::vector<double> layer_theta = {};  // the layer's own base, 0 = NoPE (granite_swa)
  std::set<int64_t> cross = {};          // cross-attention layers (mllama_text_model)
};

// Whether a rope dict holds one dict per layer type (full_attention, sliding_attention, ...).
bool nested_rope_dict(const json& d, const Family& rules);

struct FamilyHooks {
  const char* model_type = nullptr;
  // The text config in the form the family's config class builds it, before anything is read.
  json (*resolve)(const json& text, const std::string& where, std::vector<std::string>& warnings) = nullptr;
  // Sizes the family derives from other keys (after hidden_size / heads / layers are read).
  void (*sizes)(Reading&) = nullptr;
  // The whole plan (a family the reader's stages do not describe).
  ModelPositions (*plan)(Obj&, Model&) = nullptr;
  // Position tables and encoder options (after the learned / sinusoidal tables).
  void (*tables)(Reading&) = nullptr;
  // Which layers rotate (Reading::use_rope).
  void (*use_rope)(Reading&) = nullptr;
  // The window from the class default's (src/model/layer_types.cc sliding_window).
  int64_t (*window)(Obj&, const Model&, int64_t window) = nullptr;
  // The layer types of a config without a list (LayerRule::hook).
  std::vector<std::string> (*layer_types)(Obj&, const Model&, const std::vector<int>& use_rope,
                                          int64_t window) = nullptr;
  // Other keys that must agree with the layer types.
  void (*check_types)(Obj&, const Model&, const std::vector<std::string>& types) = nullptr;
  // Whether this config leaves the rotary module out (no RoPE on any layer).
  bool (*rope_off)(Reading&) = nullptr;
  // The base and the partial rotation (Reading::theta, prf) from the family's own keys.
  void (*rope_base)(Reading&) = nullptr;
  // Top-level rope keys the family does not read, before the dict is chosen.
  void (*rope_keys)(Reading&) = nullptr;
  // A flat or legacy dict made one per layer type, with the bases (Reading::rp, theta, local_theta).
  void (*rope_dicts)(Reading&) = nullptr;
  // The flat RopeConfig's details (Reading::flat).
  void (*flat_rope)(Reading&) = nullptr;
  // Checks and warnings of the rope read against the config's other keys.
  void (*rope_checks)(Reading&) = nullptr;
  // The attention scale's own keys, after Family::scale_rule.
  void (*scale)(Reading&, double& scale) = nullptr;
  // Attention options before the masks (cross-attention layers, encoder keys).
  void (*attention)(Reading&) = nullptr;
  // Per-layer lists (Reading::force_rope, scaled, layer_theta).
  void (*layers)(Reading&) = nullptr;
  // The plan's last touches.
  void (*finish)(Reading&) = nullptr;
};

// The hooks of a model: each member its own row's, else its rules family's (a follower runs the code of the
// family it follows unless it has its own).
FamilyHooks family_hooks(const Family& own, const Family& rules);

}  // namespace posenc::detail
