// src/model/t5gemma.cc: T5Gemma (transformers 5.23 models/t5gemma), an encoder-decoder of two Gemma 2 stacks.
// T5GemmaConfig holds an `encoder` and a `decoder` T5GemmaModuleConfig (configuration_t5gemma.py
// T5GemmaConfig.__post_init__; a missing one takes the class defaults), whose fields and defaults are
// Gemma2Config's (the same to_dict but for model_type and is_decoder): each stack is planned as gemma2, then
//   encoder layers (layer_type "encoder"): bidirectional; sliding layers keep |q - k| <= sliding_window
//     (create_bidirectional_sliding_window_mask, modeling_t5gemma.py T5GemmaEncoder.forward; masking_utils.py
//     sliding_window_bidirectional_overlay), posenc's symmetric window + 1. flash_attention_2 runs
//     |q - k| <= sliding_window - 1 instead (modeling_flash_attention_utils.py
//     _process_flash_attention_kwargs): the eager and sdpa masks are the model's;
//   decoder layers ("decoder"): causal self-attention, sliding_window keys as every HF decoder.
// Both: RoPE of their own rope parameters on q / k (rotate_half), scale query_pre_attn_scalar^-0.5,
// softcap attn_logit_softcapping. The decoder's cross-attention (no positions; the same scale and
// softcap, no window) is not a planned layer, as in the other encoder-decoders. is_encoder_decoder false
// (T5GemmaEncoderModel, the classifiers' encoder-only form) plans the encoder alone.
#include <string>

#include "src/model/document.h"
#include "src/model/parse.h"

namespace posenc::detail {

ModelPositions t5gemma_positions(Obj& j) {
  ModelPositions out;
  out.model_type = "t5gemma";
  const bool decoder_too = j.bool_or("is_encoder_decoder", true);
  ModelPositions stacks[2];
  const char* names[2] = {"encoder", "decoder"};
  for (int s = 0; s < 2; ++s) {
    json sub = json::object();
    if (j.has(names[s])) {
      if (!j.at(names[s]).is_object())
        fail(kOp, j.where, names[s], " = ", json_excerpt(j.at(names[s])), " is invalid: must be an object");
      sub = j.at(names[s]);
    }
    // T5GemmaConfig.__post_init__ sets is_decoder itself; the stack's own model_type is t5_gemma_module.
    sub.erase("is_decoder");
    sub["model_type"] = "gemma2";
    try {
      stacks[s] = positions_from_root(sub);
    } catch (const Error& e) {
      // "model config: num_heads = 0 ..." -> "model config: encoder.num_heads = 0 ..."; a message about
      // the stack as a whole ("model_type 'gemma2': rope: ...") names t5gemma's stack instead.
      std::string msg = e.what();
      const std::string prefix = std::string(kOp) + ": ", whole = "model_type 'gemma2': ";
      if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
      if (msg.rfind(whole, 0) == 0)
        fail(kOp, "t5gemma's ", j.where, names[s], ": ", msg.substr(whole.size()));
      fail(kOp, j.where, names[s], ".", msg);
    }
    for (const std::string& w : stacks[s].warnings) out.warnings.push_back(std::string(names[s]) + ": " + w);
  }
  const ModelPositions& enc = stacks[0];
  const ModelPositions& dec = stacks[1];
  out.num_heads = dec.num_heads;
  out.max_position_embeddings = decoder_too ? dec.max_position_embeddings : enc.max_position_embeddings;
  out.encoder_max_position_embeddings = decoder_too ? enc.max_position_embeddings : 0;
  for (LayerPlan p : enc.layers) {
    p.layer_type = "encoder";
    p.attention.causal = false;
    if (p.attention.window > 0) p.attention.window += 1;  // |q - k| <= w: posenc's |q - k| < w + 1
    out.layers.push_back(std::move(p));
  }
  if (decoder_too)
    for (LayerPlan p : dec.layers) {
      p.layer_type = "decoder";
      out.layers.push_back(std::move(p));
    }
  for (size_t i = 0; i < out.layers.size(); ++i) out.layers[i].layer = static_cast<int64_t>(i);
  out.num_layers = static_cast<int64_t>(out.layers.size());
  j.warn_unread(out.warnings, "t5gemma");
  return out;
}

}  // namespace posenc::detail
