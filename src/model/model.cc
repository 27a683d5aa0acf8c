// src/model/model.cc: the small pieces of posenc/model.h that are not parsing (src/model/config_json.cc).
#include "posenc/model.h"

#include <cmath>

#include "src/check.h"

namespace posenc {

const char* position_method_name(PositionMethod method) {
  switch (method) {
    case PositionMethod::rope:
      return "rope";
    case PositionMethod::none:
      return "none";
    case PositionMethod::alibi:
      return "alibi";
    case PositionMethod::t5:
      return "t5";
    case PositionMethod::learned:
      return "learned";
    case PositionMethod::sinusoidal:
      return "sinusoidal";
  }
  return "?";
}

AttentionConfig LayerAttention::attention_config(const Rope* rope) const {
  AttentionConfig c;
  c.causal = causal;
  c.window = window;  // HF w keys including the query's own == posenc's q_pos - k_pos >= window masked
  c.chunk = chunk;
  c.softcap = softcap.value_or(0.0);
  c.query_temperature = temperature;
  c.scale = softmax_scale;
  c.rope = rope;
  return c;
}

AttentionConfig LayerPlan::attention_config(const Rope* rope_for_layer) const {
  if (rope_for_layer != nullptr && position != PositionMethod::rope)
    detail::fail("model", "layer ", layer, " has no RoPE (", position_method_name(position),
                 "): attention_config takes no rope");
  if (rope_for_layer != nullptr && rope_for_layer->config().head_dim != rope->head_dim)
    detail::fail("model", "layer ", layer, ": the rope has head_dim ", rope_for_layer->config().head_dim,
                 ", the layer's RopeConfig ", rope->head_dim, " (build it from layer.rope)");
  if (compressed)
    detail::fail(
        "model", "layer ", layer, " (", layer_type,
        ") attends to compressed entries (DeepSeek-V4), whose keys AttentionConfig does not hold: "
        "build it from layer.attention.attention_config() with rotate_values, and the plan's compressed "
        "field for the entries");
  if (rotated_values && rope_for_layer == nullptr)
    detail::fail("model", "layer ", layer, " (", layer_type,
                 ") rotates its values with the keys: it needs its rope");
  AttentionConfig c = attention.attention_config(rope_for_layer);
  c.rotate_values = rotated_values;
  if (rope_for_layer != nullptr) c.rope_offset = rotary_lo;
  return c;
}

}  // namespace posenc
