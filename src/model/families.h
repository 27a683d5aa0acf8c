// src/model/families.h: per-model_type facts from transformers 5.23's config classes and modeling
// files (see src/model/families.cc for the table and the citations).
#pragma once
#include <cstdint>
#include <string>

#include "posenc/model.h"

namespace posenc::detail {

// What a family's code does that the numbers of its row do not say, one bit each (Family::traits).
enum FamilyTrait : uint32_t {
  // No softmax attention (Mamba's state-space layers): every layer is linear_attention.
  kAttentionFree = 1u << 0,
  // Rotates by -p theta (RopeConfig::reversed): NanoChat's rotate_half returns [x2, -x1]
  // (modeling_nanochat.py apply_rotary_pos_emb); its weightless q / k RMS norms after RoPE commute with it.
  kReversedRotation = 1u << 1,
  // Self-attention bidirectional on every layer (is_causal = False, create_bidirectional_mask), whatever
  // is_decoder says: ModernBERT, the RoPE embedding encoders, DistilBERT, SqueezeBERT, I-BERT, ALBERT,
  // MPNet, MobileBERT.
  kBidirectional = 1u << 2,
  // The mask is causal iff is_decoder: BERT's family, RoFormer, ESM.
  kCausalIffDecoder = 1u << 3,
  // BERT's encoder family: learned positions (position_embedding_type picks other kinds).
  kBertFamily = 1u << 4,
  // Position p reads row p + pad_token_id + 1 (create_position_ids_from_input_ids): RoBERTa's members.
  kRobertaRows = 1u << 5,
  // A fixed sin / cos table of base 10000 (GPT-J's and CodeGen's create_sinusoidal_positions over rotary_dim,
  // RoFormer's create_weight over the head): rope_theta and any rope dict are ignored.
  kFixedRotaryTable = 1u << 6,
  // rope_parameters hold one dict per layer type only (no flat dict is read): MiMo-V2-Flash, Laguna,
  // Step 3.5, Cohere Compass, ZAYA, Dots 3 Note, UltraBERT.
  kRopePerLayerTypeOnly = 1u << 7,
  // MLA rotating pairs (2j, 2j + 1) whatever rope_interleave says (their modular files drop it).
  kAlwaysPairs = 1u << 8,
};

struct Family {
  const char* model_type;
  PositionMethod method;  // rope, alibi, t5, learned
  double theta;           // class default_theta (rope_theta when the config omits it)
  int64_t max_pos;        // class default max_position_embeddings
  int64_t head_dim;       // class default head_dim; 0 = hidden_size / num_attention_heads
  double prf;             // class default partial_rotary_factor (kwargs.setdefault); 0 = none
  bool default_uses_prf;  // the family's compute_default_rope_parameters reads partial_rotary_factor
  RopeLayout layout;      // half = rotate_half; interleaved = pairs (2j, 2j + 1)
  uint32_t traits = 0;    // FamilyTrait bits
  // Text models whose positional code is another family's (their modular file imports its rotary module,
  // apply_rotary_pos_emb and attention), with class defaults of their own: that family's rules apply
  // (its model_type here), the plan reports the model's own type. nullptr: the type's own rules.
  const char* rules = nullptr;
  // The class default rope_parameters (JSON text) where it is not {rope_type: default, rope_theta: theta}
  // (gpt_oss's yarn, Gemma 4's per layer type, ...); nullptr otherwise.
  const char* rope_parameters = nullptr;
};

// Whether the type's row has the trait (false for a type without a row).
bool has_trait(const std::string& model_type, FamilyTrait trait);

// nullptr when posenc has no entry for the type.
const Family* find_family(const std::string& model_type);
// The config class's default sizes, for configs that omit them (save_pretrained keeps them, but
// hand-written and sparse configs, e.g. Gemma 3's, do not).
struct SizeDefaults {
  const char* model_type;  // the text config's model_type (qwen3_vl_moe_text differs from qwen3_vl_text)
  int64_t hidden, heads, layers;
};
const SizeDefaults* find_size_defaults(const std::string& model_type);
// The class default rope_parameters (JSON text) of a family whose default is not {rope_type: default,
// rope_theta: theta}, e.g. gpt_oss's yarn; nullptr otherwise. Used when a config has neither
// rope_parameters nor rope_scaling.
const char* default_rope_parameters(const std::string& model_type);
// Non-empty: why the type is refused (remote code, or a family posenc does not model yet).
std::string refusal_reason(const std::string& model_type);
// Keys known to carry no positional meaning although their names look positional.
bool known_irrelevant_key(const std::string& key);
bool looks_positional(const std::string& key);
// Non-empty (what transformers reads instead) for a key of model_type that transformers 5.23 never reads.
std::string ignored_by_transformers(const std::string& model_type, const std::string& key);
// BERT's encoder family (learned positions, bidirectional unless is_decoder); roberta_like: its
// members whose position p reads row p + pad_token_id + 1 (create_position_ids_from_input_ids).
bool bert_like(const std::string& model_type);
// Families without any softmax attention (Mamba's state-space layers): every layer is linear_attention.
bool attention_free(const std::string& model_type);
bool roberta_like(const std::string& model_type);
// Encoders whose mask is causal iff is_decoder (BERT's family, RoFormer, ESM).
bool causal_iff_decoder(const std::string& model_type);
// Families whose rotation turns by -p theta (RopeConfig::reversed): NanoChat.
bool reversed_rotation(const std::string& model_type);
// Encoders whose self-attention is bidirectional on every layer (ModernBERT, the RoPE embedding
// encoders, DistilBERT, SqueezeBERT).
bool always_bidirectional(const std::string& model_type);

}  // namespace posenc::detail
