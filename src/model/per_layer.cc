// src/model/per_layer.cc: each family's q/k and v head dims (head_dims: MLA splits, aliases, fixed
// sizes), and per-layer head dims of transformers 5's heterogeneous configs.
//
// transformers 5.23 lets a config override attributes layer by layer: `per_layer_config` maps layer indices
// to overrides (configuration_utils.py PreTrainedConfig's per_layer_config, PreTrainedConfig.__post_init__;
// integrations/heterogeneity/configuration_utils.py _apply_heterogeneous_config). Gemma 4 builds one when a
// config has none: its full-attention layers take head_dim = global_head_dim (512 by default)
// (configuration_gemma4.py Gemma4TextConfig.__post_init__), and its rotary module builds each layer type's
// frequencies from that type's layer config (modeling_gemma4.py Gemma4TextRotaryEmbedding:
// per_layer_config[layer_type]). posenc models the head_dim override, and dots3_note_text's MLA dims
// (qk_nope / qk_rope / v_head_dim, as src/model/dots3.cc writes them); overrides of anything else positional
// are refused by name.
#include <string>
#include <vector>

#include "src/model/document.h"
#include "src/model/parse.h"

namespace posenc::detail {

HeadDims head_dims(Obj& j, Model& m, std::vector<std::string>& warnings) {
  const std::string& type = m.type;
  // The model's own head rule where its row has one (axk2's MLA sizes, hunyuan_vl_text's required head),
  // else its family's.
  const Family& row = m.family->head_rule != HeadRule::standard ? *m.family : *m.rules;
  const HeadRule rule = row.head_rule;
  // HeadRule::mla: DeepSeek/MiniCPM3 post_init sets head_dim = qk_rope_head_dim
  // (configuration_deepseek_v3.py); the rows' MLA sizes are their config classes' defaults.
  const bool mla = rule == HeadRule::mla;
  int64_t qk_head_dim = 0, v_head_dim = 0;
  if (mla) {
    m.head_dim = j.int_or("qk_rope_head_dim", row.mla.rope);
    m.nope = j.int_or("qk_nope_head_dim", row.mla.nope);
    // v_head_dim: 128 (DeepseekV2Config/V3Config defaults); MiniCPM3Config: None -> hidden / heads.
    v_head_dim = j.has("v_head_dim") ? j.integer("v_head_dim") : row.mla.v;
    // Family trait kRotaryHeadDim (longcat_flash): its rotary module sizes the ladder by config.head_dim
    // (modeling_longcat_flash.py LongcatFlashRotaryEmbedding.compute_default_rope_parameters), which must
    // then be the rotated width.
    if (m.rules->has(kRotaryHeadDim) && j.has("head_dim") && j.integer("head_dim") != m.head_dim)
      fail(kOp, j.where, "head_dim = ", j.integer("head_dim"), " is invalid for ", type,
           ": its rotary module ", "takes head_dim frequencies for the qk_rope_head_dim = ", m.head_dim,
           " rotated dims");
    j.read.insert("head_dim");
    qk_head_dim = m.nope + m.head_dim;
  } else if (rule == HeadRule::nope_mla) {
    // configuration_glm5_next.py Glm5NextTextConfig.__post_init__ and validate_architecture: head_dim forced
    // to qk_rope_head_dim, which must be 0 (NoPE); q / k heads of qk_nope_head_dim.
    if (j.int_or("qk_rope_head_dim", 0) != 0)
      fail(kOp, j.where, "qk_rope_head_dim = ", j.integer("qk_rope_head_dim"), " is invalid for ", type,
           ": its indexed attention is NoPE (transformers 5.23 raises)");
    m.head_dim = j.int_or("qk_nope_head_dim", 256);
    v_head_dim = j.int_or("v_head_dim", 256);
    qk_head_dim = m.head_dim;
    // configuration_glm5_next.py Glm5NextTextConfig's defaults and validate_architecture: num_key_value_heads
    // (64 by default, whatever the heads) must equal num_attention_heads; a null one fails the strict int
    // field (transformers 5.23 raises).
    if (j.j.contains("num_key_value_heads") && !j.has("num_key_value_heads"))
      fail(kOp, j.where, "num_key_value_heads = null is invalid for ", type,
           ": an integer equal to num_attention_heads (transformers 5.23 raises)");
    if (const int64_t kv = j.int_or("num_key_value_heads", 64); kv != m.heads)
      fail(kOp, j.where, "num_key_value_heads = ", kv, " is invalid for ", type, ": it must equal ",
           "num_attention_heads = ", m.heads, j.has("num_key_value_heads") ? "" : " (64 when absent)",
           " (transformers 5.23 raises)");
    if (j.has("head_dim") && j.integer("head_dim") != 0)
      warnings.push_back(j.where + "head_dim = " + std::to_string(j.integer("head_dim")) +
                         " is not read by " + type +
                         ": its q / k heads are qk_nope_head_dim = " + std::to_string(m.head_dim));
  } else if (rule == HeadRule::kimi_mla) {
    // configuration_kimi_linear.py KimiLinearConfig.__post_init__: MLA heads of qk_nope + qk_rope dims,
    // nothing rotated (head_dim is rewritten to qk_rope_head_dim: not a head size).
    m.head_dim = j.int_or("qk_nope_head_dim", 128) + j.int_or("qk_rope_head_dim", 64);
    v_head_dim = j.int_or("v_head_dim", 128);
    qk_head_dim = m.head_dim;
    j.read.insert("head_dim");
  } else if (rule == HeadRule::d_kv) {
    // attribute_map head_dim -> d_kv (configuration_mt5.py MT5Config, t5 and umt5 alike): the alias wins
    m.head_dim = j.has("head_dim") ? j.integer("head_dim") : j.int_or("d_kv", 64);
  } else if (rule == HeadRule::required) {
    // configuration_hunyuan_vl.py: head_dim (alias attention_head_dim) None by default, which its attention
    // cannot run (scaling = head_dim ** -0.5) and its NTK-alpha base reads directly.
    if (!j.has("head_dim") && !j.has("attention_head_dim"))
      fail(kOp, j.where, "head_dim is missing: model_type '", m.family->model_type,
           "' reads it (or attention_head_dim) and has no default (transformers 5.23 fails without it)");
    m.head_dim = j.has("attention_head_dim") ? j.integer("attention_head_dim") : j.integer("head_dim");
  } else if (rule == HeadRule::given_over) {
    // configuration_cohere_compass.py CohereCompassTextConfig.__post_init__: head_dim = hidden_size //
    // num_attention_heads, then a given head_dim is set over it (its super().__post_init__, that is
    // PreTrainedConfig.__post_init__, sets the remaining kwargs).
    m.head_dim = j.has("head_dim") ? j.integer("head_dim") : m.hidden / m.heads;
    if (j.has("sliding_window_pattern"))  // dead code there (layer_types is set before it)
      warnings.push_back(j.where + "sliding_window_pattern is not read by " + type +
                         ": layer_types is (all full_attention when absent)");
  } else if (rule == HeadRule::kv_channels) {
    m.head_dim = j.int_or("kv_channels", 128);  // JetMoeConfig.attribute_map: head_dim -> kv_channels
    j.read.insert("head_dim");
  } else if (rule == HeadRule::doubled) {
    // attribute_map head_dim -> attention_head_dim; default 2 * hidden // heads, floored as Python does
    // (configuration_zamba.py ZambaConfig.__post_init__, configuration_zamba2.py Zamba2Config.__post_init__):
    // q/k/v read 2 * hidden inputs.
    m.head_dim = j.has("attention_head_dim") ? j.integer("attention_head_dim")
                 : j.has("head_dim")         ? j.integer("head_dim")
                                             : 2 * m.hidden / m.heads;
  } else if (rule == HeadRule::fixed) {  // DbrxAttention.__init__: head_dim = d_model // n_heads, always
    if (m.hidden % m.heads != 0)
      fail(kOp, j.where, "d_model = ", m.hidden, " is not divisible by n_heads = ", m.heads);
    m.head_dim = m.hidden / m.heads;
    if (j.has("head_dim") && j.integer("head_dim") != m.head_dim)
      warnings.push_back("head_dim = " + std::to_string(j.integer("head_dim")) + " is ignored by " + type +
                         " (d_model / n_heads = " + std::to_string(m.head_dim) + ")");
  } else if (rule == HeadRule::bottleneck) {
    // configuration_mobilebert.py MobileBertConfig.__post_init__: true_hidden_size = intra_bottleneck_size
    // (128) with use_bottleneck (the default), else hidden_size; modeling_mobilebert.py
    // MobileBertSelfAttention.__init__: heads of int(true_hidden_size / heads), scaled by that head^-0.5. A
    // saved true_hidden_size is set again after that rule (configuration_utils.py
    // PreTrainedConfig.__post_init__: extra keys win), and q / k / v take inputs of the bottleneck's or
    // hidden_size's width (MobileBertSelfAttention.__init__, BottleneckLayer.__init__,
    // MobileBertLayer.forward): another value cannot run.
    const bool bottleneck = j.bool_or("use_bottleneck", true);
    const int64_t width = bottleneck ? j.int_or("intra_bottleneck_size", 128) : m.hidden;
    if (j.has("true_hidden_size") && j.integer("true_hidden_size") != width)
      fail(kOp, j.where, "true_hidden_size = ", j.integer("true_hidden_size"), " is invalid for ", type,
           ": transformers keeps it, and its layers then take inputs of ",
           bottleneck ? "intra_bottleneck_size" : "hidden_size", " = ", width);
    if (width <= 0 || width % m.heads != 0)
      fail(kOp, j.where, "the attention width ", width, " (intra_bottleneck_size, or hidden_size without ",
           "use_bottleneck) is not divisible by num_attention_heads = ", m.heads,
           " (transformers floors the head, and its output projection then fails)");
    // Bottleneck.forward: q and k read the shared bottleneck (key_query_shared_bottleneck, the default) or,
    // with use_bottleneck_attention, the layer's bottleneck; with neither they read the hidden_size-wide
    // layer input through projections of true_hidden_size inputs (MobileBertSelfAttention.__init__), which
    // transformers cannot run unless the two widths agree. use_bottleneck_attention otherwise only picks the
    // value projection's input (the same).
    const bool bottleneck_attention = j.bool_or("use_bottleneck_attention", false);
    const bool shared_query_key = j.bool_or("key_query_shared_bottleneck", true);
    if (bottleneck && !bottleneck_attention && !shared_query_key && width != m.hidden)
      fail(kOp, j.where, "key_query_shared_bottleneck = false is not supported for ", type,
           ": without use_bottleneck_attention its queries and keys read the hidden_size = ", m.hidden,
           " input through projections of intra_bottleneck_size = ", width,
           " inputs, which transformers 5 cannot run");
    m.head_dim = width / m.heads;
  } else if (rule == HeadRule::nemotron) {
    // NemotronHConfig.head_dim = 128 (configuration_nemotron_h.py); its older configs' attention_head_dim is
    // not read by transformers 5 (the authors' code read it): a different value is reported.
    m.head_dim = j.int_or("head_dim", 128);
    if (j.has("attention_head_dim") && j.integer("attention_head_dim") != m.head_dim)
      warnings.push_back("attention_head_dim = " + std::to_string(j.integer("attention_head_dim")) +
                         " is not read by transformers 5's " + type +
                         ": head_dim = " + std::to_string(m.head_dim) + " is used");
  } else {
    // Family trait kHeadDimRequired (HunYuanDenseV1Config / HunYuanMoEV1Config): head_dim None by default,
    // which the attention cannot use (modeling_hunyuan_v1_dense.py HunYuanDenseV1Attention.__init__:
    // None ** -0.5 raises).
    if (m.rules->has(kHeadDimRequired) && !j.has("head_dim"))
      fail(kOp, j.where, "head_dim is missing: required for ", type, " (transformers 5 fails without it)");
    // A config class that derives head_dim (None -> hidden / heads) where its family's row fixes one
    // (SizeDefaults::derived_head_dim: Qwen3VLMoeTextConfig beside Qwen3-VL's 128).
    const int64_t class_head_dim = m.sizes && m.sizes->derived_head_dim ? 0 : m.family->head_dim;
    m.head_dim = j.has("head_dim") ? j.integer("head_dim") : class_head_dim;
    if (m.head_dim == 0) {
      if (m.hidden % m.heads != 0)
        fail(kOp, j.where, "hidden_size = ", m.hidden, " is not divisible by num_attention_heads = ", m.heads,
             " (model_type '", m.family->model_type, "' without head_dim; transformers would floor it)");
      m.head_dim = m.hidden / m.heads;
    }
  }
  if (m.head_dim <= 0 || m.head_dim > kMaxModelHeadDim)
    fail(kOp, j.where, "head_dim = ", m.head_dim, " is invalid: must be in [1, ", kMaxModelHeadDim, "]");
  if (mla && (m.nope < 0 || m.nope > kMaxModelHeadDim))
    fail(kOp, j.where, "qk_nope_head_dim = ", m.nope, " is invalid: must be in [0, ", kMaxModelHeadDim, "]");
  if (!mla && rule != HeadRule::kimi_mla && rule != HeadRule::nope_mla) qk_head_dim = v_head_dim = m.head_dim;
  // Family::v_head_dim: a class default of its own (mimo_v2_flash: q/k 192, v 128).
  if (m.rules->v_head_dim) v_head_dim = j.int_or("v_head_dim", m.rules->v_head_dim);
  if (v_head_dim == 0) {  // MiniCPM3 without v_head_dim
    if (m.hidden % m.heads != 0)
      fail(kOp, j.where, "hidden_size = ", m.hidden, " is not divisible by num_attention_heads = ", m.heads);
    v_head_dim = m.hidden / m.heads;
  }
  if (v_head_dim <= 0 || v_head_dim > kMaxModelHeadDim)
    fail(kOp, j.where, "v_head_dim = ", v_head_dim, " is invalid: must be in [1, ", kMaxModelHeadDim, "]");
  return {mla, qk_head_dim, v_head_dim};
}

std::vector<int64_t> layer_head_dims(Obj& j, const Model& m, const std::vector<std::string>& types) {
  std::vector<int64_t> dims(m.layers, m.head_dim);
  auto checked_dim = [&](const std::string& where, const json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > kMaxModelHeadDim)
      fail(kOp, j.where, where, " = ", json_excerpt(v), " is invalid: must be an integer in [1, ",
           kMaxModelHeadDim, "]");
    return v.get<int64_t>();
  };
  const bool gemma4 = m.rules->per_layer_config == PerLayerConfig::head_dims;
  // Only Gemma 4's modeling code builds its layers from per-layer configs (other families read the
  // global attributes, or raise AmbiguousGlobalPerLayerAttributeError): refused elsewhere.
  // step3p5's config class writes per_layer_config itself (its sliding layers' head counts,
  // configuration_step3p7.py Step3p7TextConfig.__post_init__); its rotary module reads the global head_dim.
  const bool step3p5 = m.rules->per_layer_config == PerLayerConfig::global_head_dim;
  // dots3_note_text: each layer builds its MLA from its layer config (modeling_dots3_note.py
  // Dots3NoteTextAttention.__init__); src/model/dots3.cc writes the per-type dims as qk_nope_head_dim /
  // qk_rope_head_dim / v_head_dim overrides. An MLA layer's head dim here is its rotated width,
  // qk_rope_head_dim (the dims its RopeConfig spans).
  const bool dots3 = m.rules->per_layer_config == PerLayerConfig::mla_dims;
  if (!gemma4 && !step3p5 && !dots3 && j.has("per_layer_config"))
    fail(kOp, j.where, "per_layer_config is not modeled by posenc for model_type '", m.family->model_type,
         "' (read for gemma4_text, step3p5 and dots3_note_text only)");
  // Gemma4TextConfig: `if "per_layer_config" not in kwargs` -- an explicit null counts as given.
  if (gemma4 && j.j.contains("per_layer_config") && !j.has("per_layer_config")) return dims;
  if (j.has("per_layer_config")) {
    const json& plc = j.at("per_layer_config");
    if (!plc.is_object())
      fail(kOp, j.where, "per_layer_config = ", json_excerpt(plc), " is invalid: must be an object");
    for (auto it = plc.begin(); it != plc.end(); ++it) {
      const std::string where = "per_layer_config." + it.key();
      size_t used = 0;
      int64_t layer = -1;
      try {
        layer = std::stoll(it.key(), &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != it.key().size() || layer < 0 || layer >= m.layers)
        fail(kOp, j.where, where, ": keys must be layer indices in [0, ", m.layers, ")");
      if (!it.value().is_object())
        fail(kOp, j.where, where, " = ", json_excerpt(it.value()), " must be an object");
      for (auto o = it.value().begin(); o != it.value().end(); ++o) {
        if (dots3 && o.key() == "qk_rope_head_dim") {
          dims[layer] = checked_dim(where + ".qk_rope_head_dim", o.value());
        } else if (dots3 && (o.key() == "qk_nope_head_dim" || o.key() == "v_head_dim")) {
          // mla_layer_dims
        } else if (o.key() == "head_dim" && step3p5) {
          if (checked_dim(where + ".head_dim", o.value()) != m.head_dim)
            fail(kOp, j.where, where, ".head_dim = ", json_excerpt(o.value()),
                 " is not modeled by posenc: ", m.type,
                 "'s rotary module sizes every layer's rotation by the global head_dim = ", m.head_dim);
        } else if (o.key() == "head_dim") {
          dims[layer] = checked_dim(where + ".head_dim", o.value());
        } else if (o.key() == "num_attention_heads" || o.key() == "num_key_value_heads") {
          // head counts: not positional
        } else if (o.key() == "skip" || looks_positional(o.key())) {
          fail(kOp, j.where, where, ".", o.key(),
               ": a per-layer override of this attribute is not modeled by posenc (head_dim is)");
        }  // num_key_value_heads, intermediate_size, ...: not positional
      }
    }
    // Gemma4TextConfig pops global_head_dim and ignores it when per_layer_config is given.
    if (gemma4 && j.has("global_head_dim")) {
      const int64_t global = checked_dim("global_head_dim", j.at("global_head_dim"));
      for (int64_t i = 0; i < m.layers; ++i)
        if (types[i] == "full_attention" && dims[i] != global) {
          m.warnings->push_back(j.where + "global_head_dim = " + std::to_string(global) +
                                " is ignored: per_layer_config is given (transformers 5 reads it only)");
          break;
        }
    }
  } else if (gemma4) {
    const int64_t global = j.has("global_head_dim") ? checked_dim("global_head_dim", j.at("global_head_dim"))
                                                    : m.rules->global_head_dim;
    for (int64_t i = 0; i < m.layers; ++i)
      if (types[i] == "full_attention") dims[i] = global;
  }
  return dims;
}

MlaLayerDims mla_layer_dims(Obj& j, const Model& m, int64_t v_head_dim) {
  MlaLayerDims out;
  if (m.rules->per_layer_config != PerLayerConfig::mla_dims) return out;
  out.nope.assign(static_cast<size_t>(m.layers), m.nope);
  out.v.assign(static_cast<size_t>(m.layers), v_head_dim);
  if (!j.has("per_layer_config")) return out;
  const json& plc = j.at("per_layer_config");  // (its keys and values checked by layer_head_dims)
  for (auto it = plc.begin(); it != plc.end(); ++it) {
    const auto layer = static_cast<size_t>(std::stoll(it.key()));
    for (auto [key, dims] : {std::pair{"qk_nope_head_dim", &out.nope}, std::pair{"v_head_dim", &out.v}})
      if (has(it.value(), key)) {
        const json& v = it.value().at(key);
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxModelHeadDim)
          fail(kOp, j.where, "per_layer_config.", it.key(), ".", key, " = ", json_excerpt(v),
               " is invalid: must be an integer in [0, ", kMaxModelHeadDim, "]");
        (*dims)[layer] = v.get<int64_t>();
      }
  }
  return out;
}

// The head dim of every layer of one type: the rotary module builds one set of frequencies per
// type (from that type's layer config), so its layers must agree.
int64_t type_head_dim(const std::vector<int64_t>& dims, const std::vector<std::string>& types,
                      const std::string& type, int64_t fallback) {
  int64_t found = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (types[i] != type) continue;
    if (found != 0 && dims[i] != found)
      fail(kOp, "per_layer_config gives the ", type, " layers head_dim ", found, " and ", dims[i],
           ": one rotary setup per layer type needs one head_dim per type");
    found = dims[i];
  }
  return found != 0 ? found : fallback;
}

}  // namespace posenc::detail
