// posenc/model.h: a real model's positional setup, per layer, read from its HuggingFace config.json
// with transformers 5's semantics (config class defaults, aliases, legacy keys, per-layer types).
//
//   ModelPositions m = model_positions_from_hf_file("config.json");
//   for (const LayerPlan& l : m.layers) { l.position, l.rope, l.rotary_lo/hi, l.attention ... }
//   m.warnings: every key that looks positional and that posenc does not understand.
//
// The rotated range [rotary_lo, rotary_hi) of a layer is in the q/k head as the model's attention
// sees it. RopeConfig describes the rotation of that range alone when it does not start at 0:
// DeepSeek-V2/V3 and MiniCPM3 rotate the last qk_rope_head_dim dims of the 192-dim q/k head, so
// their RopeConfig has head_dim = qk_rope_head_dim and the plan says [nope, nope + rope).
//
// Layouts (RopeConfig::layout, pictograms in posenc/rope.h): interleaved for gptj, cohere, cohere2,
// glm, glm4, deepseek_v2, deepseek_v3 (rope_interleave, the default), llama4 and roformer; half elsewhere.
// DeepSeek-V3 reads pairs (2j, 2j + 1) but writes them back de-interleaved, [x_even' | x_odd']
// (modeling_deepseek_v3.py apply_rotary_pos_emb_interleave): the same q.k products as the
// interleaved layout, with permuted q/k tensors.
//
// Window semantics: HF's sliding_window w keeps w keys including the query's own
// (transformers/masking_utils.py sliding_window_overlay: kv_idx > q_idx - w). AttentionConfig's
// window masks q_pos - k_pos >= window: the same count, so window is copied unchanged.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/absolute.h"
#include "posenc/attention.h"
#include "posenc/rope.h"

namespace posenc {

enum class PositionMethod : uint8_t { rope, none, alibi, t5, learned, sinusoidal };
const char* position_method_name(PositionMethod method);

struct LayerAttention {
  bool causal = true;
  int64_t window = 0;  // HF sliding_window (w keys including the current one); 0 = none
  int64_t chunk = 0;   // Llama 4 chunked attention: keys in the query's chunk of this size; 0 = none
  double softmax_scale = 1.0;
  std::optional<double> softcap;  // logits = softcap * tanh(logits / softcap)
  bool sinks = false;             // gpt-oss: one learned logit per head joins the softmax
  QueryTemperature temperature;
  // The posenc AttentionConfig for this layer: mask (causal, window copied: same semantics, see
  // above; chunk), softmax scale, softcap and query temperature. What the config alone cannot
  // give stays with the caller: the learned sink logits (set AttentionConfig::sinks to the layer's
  // (H) tensor when `sinks`).
  AttentionConfig attention_config(const Rope* rope = nullptr) const;
};

// DeepSeek sparse attention (DeepSeek-V3.2, GLM-5): a lightning indexer scores every visible key,
// sum_h w_h relu(q_h . k), and each query attends to the `topk` keys of highest score
// (modeling_deepseek_v32.py DeepseekV32Indexer, topk = min(index_topk, keys)). The selection depends on
// the content, so a layer's attention_config() is dense attention: exact while a query sees at most
// `topk` keys; beyond that the caller masks all but the indexer's choice.
struct TopkIndexer {
  int64_t topk = 0;                 // index_topk
  int64_t heads = 0, head_dim = 0;  // index_n_heads, index_head_dim (one key head)
  bool shared = false;              // GLM-5 "shared" layers reuse the previous layer's selection
  // The layer's frequencies, the indexer's own layout (GLM-5's pairs are written back de-interleaved,
  // as DeepSeek-V3's attention: the same q.k products).
  RopeConfig rope;
  int64_t rotary_lo = 0, rotary_hi = 0;  // rotated dims of the index head: its first qk_rope_head_dim
  // DeepSeek-V4's compressed_sparse_attention layers: the indexer picks among the layer's compressed
  // entries only (their positions w * rate; DeepseekV4Indexer), the window's keys are always attended; its
  // RoPE is on the index head's last qk_rope_head_dim dims.
  bool over_compressed = false;
  // Block indexers (block_size > 0; 0: DeepSeek's per-key selection), topk counting blocks:
  // MiniMax-M3's (minimax_m3_sparse layers): the scores of each block of block_size keys max-pooled, the
  // query's own block and the local_blocks - 1 before it always kept (modeling_minimax_m3_vl.py
  // MiniMaxM3VLIndexer). Qwen4-Exp's QSA (pooled_keys): each block's keys mean-pooled and rotated at the
  // block's first position, the incomplete tail of visible keys always kept (modeling_qwen4_exp.py
  // Qwen4ExpTextQSAIndexer).
  int64_t block_size = 0, local_blocks = 0;
  bool pooled_keys = false;
};

// DeepSeek-V4's compressed keys (compressed_sparse_attention, heavily_compressed_attention layers): beside
// the window's keys, one softmax also covers entries that pool the keys of `rate` tokens each by learned
// gates (DeepseekV4HCACompressor, DeepseekV4CSACompressor). Entry w is rotated at position w * rate and
// query t sees it iff (w + 1) * rate <= t + 1, without the window's limit. Its content depends on learned
// weights: the caller computes the entries.
struct CompressedKeys {
  int64_t rate = 0;
  bool overlapping =
      false;  // CSA: entry w pools tokens [rate (w - 1), rate (w + 1)); HCA: [rate w, rate (w + 1))
};

struct LayerPlan {
  int64_t layer = 0;
  std::string layer_type;  // HF layer_types entry, e.g. "sliding_attention"; "full_attention" if none
  // false: the layer mixes tokens without softmax attention (linear_attention: Mamba, gated DeltaNet,
  // lightning attention, RecurrentGemma's recurrence; conv: LFM2's convolutions) or not at all
  // (moe: Nemotron-H's MLP-only layers). Its position is none and `attention` does not apply.
  bool softmax_attention = true;
  PositionMethod position = PositionMethod::none;
  std::optional<RopeConfig> rope;        // position == rope
  int64_t rotary_lo = 0, rotary_hi = 0;  // rotated dims of the q/k head (rope only)
  int64_t qk_head_dim = 0;               // the q/k head the range refers to
  int64_t v_head_dim = 0;                // the value (and attention output) head: DeepSeek 128 of 192
  LayerAttention attention;
  std::optional<TopkIndexer> indexer;        // indexed_attention layers (DeepSeek sparse attention)
  std::optional<CompressedKeys> compressed;  // DeepSeek-V4's compressed layers
  // DeepSeek-V4: keys are values (K = V, rotated), and the output is rotated back at the query's
  // position on [rotary_lo, rotary_hi): o_t = R(-t) sum_s p_ts R(s) v_s = sum_s p_ts R(s - t) v_s
  // (modeling_deepseek_v4.py DeepseekV4Attention.forward, apply_rotary_pos_emb(attn_output, cos, -sin)).
  bool rotated_values = false;
  // attention.attention_config(rope) with RoPE on this layer's range: rope_offset = rotary_lo. rope
  // must be built from `this->rope` (or null for a layer without RoPE); q/k heads of qk_head_dim,
  // v heads of v_head_dim; rotate_values with rotated_values (DeepSeek-V4's sliding layers). Throws for a
  // layer with compressed keys (DeepSeek-V4's CSA / HCA), whose entries AttentionConfig does not hold.
  AttentionConfig attention_config(const Rope* rope = nullptr) const;
};

struct ModelPositions {
  std::string model_type;  // the text model's type (text_config.model_type for multimodal wrappers)
  int64_t num_layers = 0, num_heads = 0, max_position_embeddings = 0;
  // alibi: slopes as BLOOM (Falcon: also scaled by softmax_scale); t5: buckets (bidirectional in
  // layers whose attention is not causal: T5's "encoder" layers, MPNet's; causal in "decoder" layers),
  // one table per stack in its first layer, shared by the stack's layers; UMT5: a table in every layer
  // (t5_bias_per_layer).
  int64_t t5_num_buckets = 0, t5_max_distance = 0;
  bool t5_bias_per_layer = false;
  // learned: position p reads row p + learned_position_offset of a table of max_position_embeddings +
  // learned_position_offset rows. OPT: 2 (modeling_opt.py OPTLearnedPositionalEmbedding, a fairseq
  // leftover: rows 0 and 1 belong to no position); 0 elsewhere.
  int64_t learned_position_offset = 0;
  // A learned table added to the token embeddings besides the layers' own positions (MPNet: t5 layers
  // and a learned table read at row p + 2). Layers whose position is learned imply the table already.
  bool learned_embeddings = false;
  // sinusoidal layers: the fixed table added to the token embeddings (posenc::sinusoidal_add with it):
  // XGLM's fairseq table [sin | cos], w_i = 10000^(-i / (dim/2 - 1)), position p at row p + 2
  // (modeling_xglm.py XGLMSinusoidalPositionalEmbedding); CTRL's [sin | cos], w_i = 10000^(-2i / dim)
  // (modeling_ctrl.py positional_encoding). Empty for the other families.
  std::optional<SinusoidalConfig> sinusoidal;
  // Encoder-decoder models (T5, BART, Marian, Whisper, ...): layer_type "encoder" layers (bidirectional)
  // come first, then the "decoder" layers (causal self-attention; their cross-attention to the encoder
  // carries no positions in these families). The fields above then describe the decoder's positions
  // and heads; the encoder's table holds encoder_max_position_embeddings positions (Whisper: 1500
  // sinusoidal rows, its decoder 448 learned ones; 0 for decoder-only models and T5).
  int64_t encoder_max_position_embeddings = 0;
  // Model types whose positional code is remote code (the model repository's own modeling file, loaded
  // with trust_remote_code), planned from the authors' file: that file (e.g. "... modeling_qwen.py ...").
  // Empty for the families of transformers 5.
  std::string remote_code;
  std::vector<LayerPlan> layers;
  std::vector<std::string> warnings;
};

// Throws posenc::Error naming the key (malformed JSON, missing or mistyped keys) or the model_type
// (families whose positional code lives outside transformers and that posenc does not follow, e.g.
// baichuan: pass a RopeConfig). Remote-code families posenc follows: qwen (Qwen 1), chatglm (ChatGLM2,
// ChatGLM3, GLM-4), internlm2, stablelm_epoch, RefinedWeb / RefinedWebModel (Falcon's first), minicpmv.
ModelPositions model_positions_from_hf_json(const std::string& json_text);
ModelPositions model_positions_from_hf_file(const std::string& path);

}  // namespace posenc
