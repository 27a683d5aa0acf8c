// src/model/identify.cc: the reader's identify stage (src/model/stages.h), for both readers
// (model_positions_from_hf_json, and rope_config_from_hf_json's unplanned_reason): which model's code a
// config.json is, where that is not its model_type as written (a type taken from auto_map, Kimi K2 read as
// DeepSeek-V3, InternLM's early type told apart by its architectures); the text model a multimodal wrapper
// builds; the types posenc plans it as; and every refusal.
#include <optional>
#include <string>

#include "src/model/parse.h"
#include "src/model/stages.h"

namespace posenc::detail {
namespace {

// auto_map.AutoConfig without a re-save's repository prefix, or "". Re-saves prefix the class with
// its repository ("openbmb/MiniCPM-1B-sft-bf16--configuration_minicpm.MiniCPMConfig").
std::string auto_map_config_class(const json& root) {
  if (!has(root, "auto_map") || !root.at("auto_map").is_object() || !has(root.at("auto_map"), "AutoConfig") ||
      !root.at("auto_map").at("AutoConfig").is_string())
    return "";
  std::string cls = root.at("auto_map").at("AutoConfig").get<std::string>();
  if (const size_t at = cls.rfind("--"); at != std::string::npos) cls = cls.substr(at + 2);
  return cls;
}

// Remote-code configs saved without model_type (MiniCPM 1 / 2's own files): transformers takes the type from
// the configuration class auto_map names (AutoConfig with trust_remote_code).
std::string model_type_from_auto_map(const json& root) {
  static const char* const kClasses[][2] = {{"configuration_minicpm.MiniCPMConfig", "minicpm"},
                                            {"configuration_baichuan.BaichuanConfig", "baichuan"},
                                            {"configuration_baichuan.BaiChuanConfig", "baichuan"},
                                            {"configuration_chatglm.ChatGLMConfig", "chatglm"},
                                            {"configuration_qwen.QWenConfig", "qwen"},
                                            {"configuration_internlm2.InternLM2Config", "internlm2"}};
  const std::string cls = auto_map_config_class(root);
  for (const auto& c : kClasses)
    if (cls == c[0]) return c[1];
  return "";
}

// Kimi K2 (moonshotai/Kimi-K2-*): model_type "kimi_k2", not in transformers 5.23's table, whose remote code
// (auto_map.AutoConfig = configuration_deepseek.DeepseekV3Config, architectures DeepseekV3ForCausalLM) is
// DeepSeek-V3's; transformers' own kimi_k25 reads a kimi_k2 text_config as deepseek_v3
// (configuration_kimi_k25.py Kimi_K25Config.__post_init__), as posenc does for either form.
bool kimi_k2_is_deepseek_v3(const json& root) {
  return auto_map_config_class(root) == "configuration_deepseek.DeepseekV3Config";
}

// Model types read as another (a config of `model_type`, or a `wrapper`'s text_config of that type, `when` it
// holds), with the warning that says so.
struct ReadAs {
  const char* model_type;
  const char* wrapper;  // nullptr: the config's own model_type
  const char* read_as;
  bool (*when)(const json& root);  // nullptr: always
  const char* note;
};
const ReadAs kReadAs[] = {
    {"kimi_k2", nullptr, "deepseek_v3", kimi_k2_is_deepseek_v3,
     "model_type 'kimi_k2' (remote code: auto_map.AutoConfig = configuration_deepseek.DeepseekV3Config) is "
     "read as deepseek_v3: Kimi K2 runs DeepSeek-V3's modeling_deepseek.py, and transformers 5.23's kimi_k25 "
     "reads kimi_k2 as deepseek_v3 (Kimi_K25Config.__post_init__)"},
    {"kimi_k2", "kimi_k25", "deepseek_v3", nullptr,  // Kimi_K25Config.__post_init__
     "text_config.model_type = \"kimi_k2\" is read as deepseek_v3, as Kimi_K25Config rewrites it "
     "(Kimi_K25Config.__post_init__)"},
};

}  // namespace

std::optional<Identified> identified_as_other_type(const json& root) {
  if (!has(root, "model_type")) {
    const std::string inferred = model_type_from_auto_map(root);
    if (inferred.empty()) return std::nullopt;
    json named = root;
    named["model_type"] = inferred;
    return Identified{std::move(named), "model_type is missing: read as '" + inferred +
                                            "', the type of auto_map.AutoConfig = " +
                                            root.at("auto_map").at("AutoConfig").get<std::string>()};
  }
  const json& type = root.at("model_type");
  for (const ReadAs& r : kReadAs) {
    if (!r.wrapper) {
      if (type != r.model_type || (r.when && !r.when(root))) continue;
      json named = root;
      named["model_type"] = r.read_as;
      return Identified{std::move(named), r.note};
    }
    if (type != r.wrapper || !has(root, "text_config") || !root.at("text_config").is_object() ||
        !has(root.at("text_config"), "model_type") ||
        root.at("text_config").at("model_type") != r.model_type || (r.when && !r.when(root)))
      continue;
    json renamed = root;
    renamed["text_config"]["model_type"] = r.read_as;
    return Identified{std::move(renamed), r.note};
  }
  return std::nullopt;
}

// modeling_internlm2.py's early revisions were published as model_type "internlm" with architectures
// ["InternLM2ForCausalLM"]; InternLM (1)'s own "internlm" is other remote code.
bool internlm2_architecture(const json& root) {
  if (has(root, "architectures") && root.at("architectures").is_array())
    for (const json& a : root.at("architectures"))
      if (a == "InternLM2ForCausalLM") return true;
  return false;
}

namespace {
// How the reader refuses a type it does not plan: the reason, then what to pass instead.
constexpr const char* kPassRopeConfig =
    ". Pass an explicit RopeConfig (C++ rope_config_from_hf_json, Python RopeConfig.from_hf, or RopeConfig "
    "fields) instead";

// Why a multimodal wrapper's config without text_config is not planned (empty when it is): a wrapper whose
// class reads its top-level keys in part (wrapper_flat_refusal: fuyu); a wrapper whose own type does not
// name a text model in posenc's table keeps keys of its own at the top level, and its class builds the
// text model from text_config alone.
std::string flat_wrapper_refusal(const std::string& outer, const json& root) {
  if (has(root, "text_config") || !(wrapper_text_class(outer) || wrapper_default_text_type(outer))) return "";
  if (const char* why = wrapper_flat_refusal(outer)) return why;
  const std::string fixed = wrapper_fixed_text_type(outer);
  const std::string own = fixed.empty() ? canonical_type(outer) : fixed;
  if (find_family(own) || seq2seq_family(own) || !refusal_reason(own).empty()) return "";
  return "model_type '" + outer +
         "' without text_config is not read: its config class builds the text model ('" +
         wrapper_text_type(outer, json::object()) +
         "') from text_config alone (transformers 5.23 would use that class's defaults). Pass the config "
         "with its text_config";
}
}  // namespace

// AutoConfig.from_pretrained: the config class of model_type (CONFIG_MAPPING; remote code, for posenc, the
// authors' files); a multimodal wrapper's class then builds its text_config (SubConfigSpec.create_subconfig
// and the wrapper's __post_init__, src/model/wrappers.cc). Refused, in this order: a type posenc does not
// model (refusal_reason), a flat wrapper whose class keeps keys of its own at the top level, then the text
// model's type when refused or not in posenc's table.
Identity identify(const json& root, std::string* why) {
  Identity id;
  // The first refusal: unplanned_reason's answer, or the reader's error.
  const auto refuse = [&](const std::string& reason, const std::string& error) {
    if (!why) fail(kOp, error);
    *why = reason;
  };
  const auto unsupported = [&](const std::string& type) {
    const std::string reason = "model_type '" + type + "' is not supported: " + refusal_reason(type);
    refuse(reason, reason + kPassRopeConfig);
  };
  if (!has(root, "model_type")) {
    refuse("it has no model_type", "model_type is missing");
    return id;
  }
  const json& model_type = root.at("model_type");
  if (!model_type.is_string()) {
    refuse("model_type = " + json_excerpt(model_type) + " is not a string",
           "model_type = " + model_type.dump() + " is invalid: must be a string");
    return id;
  }
  id.outer_type = model_type.get<std::string>();
  const std::string& outer = id.outer_type;
  if (remote_code_planned(outer)) {  // its refusals are the remote family's (src/model/remote.cc)
    id.remote = true;
    if (why) *why = remote_code_refusal(root, outer);
    return id;
  }
  if (!refusal_reason(outer).empty()) {
    unsupported(outer);
    return id;
  }
  // Multimodal wrappers (gemma3, llama4, mistral3, qwen3_5, voxtral, ...) keep the language model
  // under text_config; its model_type (or the wrapper's text class) decides the family.
  const bool has_text = has(root, "text_config");
  if (has_text && !root.at("text_config").is_object() && !why)
    fail(kOp, "text_config = ", root.at("text_config").dump(), " is invalid: must be an object");
  id.wrapped = has_text && root.at("text_config").is_object();
  if (id.wrapped) id.text = wrapper_text_config(outer, root.at("text_config"));
  const json& given = id.text_config(root);
  id.where = id.wrapped ? "text_config." : "";
  // A wrapper with a concrete text class builds text_config as that class whatever its model_type says
  // (kWrapperTextClasses, SubConfigSpec.create_subconfig): planned as the class's type, an ignored
  // model_type warned. Other wrappers build the class of text_config.model_type (AutoConfig specs), or
  // of their spec's default type where it has none (kWrapperDefaultTextTypes).
  // A wrapper with a fixed text type (wrapper_fixed_text_type: step3p7) builds that model, flat or not.
  // A wrapper saved flat (no text_config) is planned where its own type names a text model in posenc's
  // table (gemma3 -> gemma3_text, qwen3_vl, glm4v, ...): its top-level keys are read as that model's. Most
  // classes ignore them and build the text class's defaults: the reader says so (normalize). Other wrappers
  // (llava, blip-2, grounding-dino, ...) keep keys of their own at the top level: refused by name.
  // (kimi_k25 has two rules of its class, kept apart: its spec's default text type deepseek_v3 for a
  // text_config without model_type, Kimi_K25Config.sub_configs_defaults in kWrapperDefaultTextTypes; and a
  // text_config of type kimi_k2 renamed deepseek_v3, Kimi_K25Config.__post_init__ in kReadAs above.)
  id.flat_wrapper = !has_text && (wrapper_text_class(outer) || wrapper_default_text_type(outer));
  if (const std::string flat = flat_wrapper_refusal(outer, root); !flat.empty()) {
    refuse(flat, flat);
    return id;
  }
  const char* const text_class = id.wrapped ? wrapper_text_class(outer) : nullptr;
  const bool named = id.wrapped && has(given, "model_type");
  const char* const text_default = id.wrapped ? wrapper_default_text_type(outer) : nullptr;
  const std::string fixed = wrapper_fixed_text_type(outer);
  if (!fixed.empty())
    id.declared_type = fixed;
  else if (text_class)
    id.declared_type = text_class;
  else if (named && given.at("model_type").is_string())
    id.declared_type = given.at("model_type").get<std::string>();
  else if (named && !why)
    fail(kOp, id.where, "model_type = ", given.at("model_type").dump(), " is invalid: must be a string");
  else
    id.declared_type = text_default ? text_default : outer;
  if (text_class && fixed.empty() && named && given.at("model_type") != text_class)
    id.warnings.push_back(id.where + "model_type = " + json_excerpt(given.at("model_type")) +
                          " is ignored: " + outer + "'s config class builds text_config as its " +
                          "text class, model_type '" + text_class +
                          "', whatever model_type it has (SubConfigSpec.create_subconfig)");
  // The model's own row (its class defaults) and the row of the family whose positional code it runs.
  id.own_type = canonical_type(id.declared_type);
  id.type = rules_type(id.own_type);
  if (!refusal_reason(id.own_type).empty()) {
    unsupported(id.own_type);
    return id;
  }
  if (!find_family(id.own_type) && !seq2seq_family(id.own_type)) {
    const std::string reason = "model_type '" + id.own_type + "' is not in posenc's model table";
    refuse(reason, reason + kPassRopeConfig);
  }
  return id;
}

std::string unplanned_reason(const json& root) {
  if (const std::optional<Identified> renamed = identified_as_other_type(root))
    return unplanned_reason(renamed->root);
  std::string why;
  identify(root, &why);
  return why;
}

}  // namespace posenc::detail
