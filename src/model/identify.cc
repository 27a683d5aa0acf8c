// src/model/identify.cc: which model's code a config.json is, where that is not its model_type as written,
// for both readers (model_positions_from_hf_json, and rope_config_from_hf_json's unplanned_reason): a type
// taken from auto_map, Kimi K2 read as DeepSeek-V3, InternLM's early type told apart by its architectures.
#include <optional>
#include <string>

#include "src/model/parse.h"

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
     "reads kimi_k2 as deepseek_v3 (configuration_kimi_k25.py L85-86)"},
    {"kimi_k2", "kimi_k25", "deepseek_v3", nullptr,  // Kimi_K25Config.__post_init__
     "text_config.model_type = \"kimi_k2\" is read as deepseek_v3, as Kimi_K25Config rewrites it "
     "(configuration_kimi_k25.py L85-86)"},
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

}  // namespace posenc::detail
