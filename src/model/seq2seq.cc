// src/model/seq2seq.cc: encoder-decoder models with absolute positions, as transformers 5.23 builds them.
//
// Each stack adds a table to its (scaled) token embeddings before its first layer; the encoder's
// self-attention is bidirectional, the decoder's causal, and the decoder's cross-attention carries no
// positions. Separate tensors per stack (encoder.embed_positions, decoder.embed_positions), one shape:
//   learned, row p + 2 (a fairseq leftover): bart, mbart, plbart, mvp (modeling_bart.py
//     BartLearnedPositionalEmbedding; position ids arange(past, past + T), padding ignored);
//   learned, row p: blenderbot, blenderbot-small (modeling_blenderbot.py
//     BlenderbotLearnedPositionalEmbedding);
//   sinusoidal [sin | cos], w_i = 10000^(-2i / d), row p of a frozen table of max_position_embeddings
//     rows: marian, pegasus (modeling_marian.py MarianSinusoidalPositionalEmbedding);
//   sinusoidal [sin | cos], w_i = 10000^(-i / (d/2 - 1)) (fairseq), row p + pad_token_id + 1, where p
//     counts the non-padding tokens (make_positions; pads read the zeroed row pad_token_id); the table
//     regrows past max_position_embeddings: m2m_100 (NLLB-200), nllb-moe
//     (modeling_m2m_100.py M2M100SinusoidalPositionalEmbedding);
//   whisper: the encoder a fixed fairseq table of max_source_positions rows, row p, all of them added
//     (input features are exactly 2 max_source_positions frames; modeling_whisper.py sinusoids,
//     WhisperEncoder.forward), the decoder a learned table of max_target_positions rows, row p
//     (WhisperPositionalEmbedding).
// A checkpoint of a *ForCausalLM head (is_encoder_decoder false) is the decoder alone.
#include <cmath>
#include <string>

#include "src/model/parse.h"

namespace posenc::detail {
namespace {
// gemma2_stacks: T5Gemma's encoder and decoder, each a Gemma 2 stack (src/model/t5gemma.cc).
enum class Table : uint8_t { learned, sinusoidal_t2t, sinusoidal_fairseq, whisper, gemma2_stacks };

struct Seq2Seq {
  const char* model_type;
  Table table;
  int64_t learned_offset;  // learned tables: row of position 0
  // configuration_<type>.py defaults
  int64_t max_pos, d_model, encoder_layers, decoder_layers, encoder_heads, decoder_heads, pad;
  // use_prompt prepends prompt_length learned keys and values to every attention layer (modeling_mvp.py).
  bool prompts = false;
};

// clang-format off
constexpr Seq2Seq kSeq2Seq[] = {
  // type               table                      off  max_pos d_model enc dec  enc_h dec_h pad
  {"bart",              Table::learned,            2,   1024,   1024,   12, 12,  16,   16,   1},
  {"mbart",             Table::learned,            2,   1024,   1024,   12, 12,  16,   16,   1},
  {"plbart",            Table::learned,            2,   1024,   768,    6,  6,   12,   12,   1},
  {"mvp",               Table::learned,            2,   1024,   1024,   12, 12,  16,   16,   1, true},
  {"blenderbot",        Table::learned,            0,   128,    2560,   2,  24,  32,   32,   0},
  {"blenderbot-small",  Table::learned,            0,   512,    512,    8,  8,   16,   16,   0},
  {"marian",            Table::sinusoidal_t2t,     0,   1024,   1024,   12, 12,  16,   16,   58100},
  {"pegasus",           Table::sinusoidal_t2t,     0,   1024,   1024,   12, 12,  16,   16,   0},
  {"m2m_100",           Table::sinusoidal_fairseq, 0,   1024,   1024,   12, 12,  16,   16,   1},
  {"nllb-moe",          Table::sinusoidal_fairseq, 0,   1024,   1024,   12, 12,  16,   16,   1},
  {"whisper",           Table::whisper,            0,   448,    384,    4,  4,   6,    6,    50256},
  {"t5gemma",           Table::gemma2_stacks,      0,   0,      0,      0,  0,   0,    0,    0},
};
// clang-format on

const Seq2Seq* find(const std::string& type) {
  for (const Seq2Seq& s : kSeq2Seq)
    if (type == s.model_type) return &s;
  return nullptr;
}

int64_t positive_size(Obj& j, const char* key, int64_t fallback) {
  const int64_t v = j.int_or(key, fallback);
  if (v <= 0 || v > kMaxModelLayers * 64)
    fail(kOp, j.where, key, " = ", v, " is invalid: must be in [1, ", kMaxModelLayers * 64, "]");
  return v;
}
}  // namespace

bool seq2seq_family(const std::string& type) { return find(type) != nullptr; }

ModelPositions seq2seq_positions(Obj& j, const std::string& type) {
  const Seq2Seq& f = *find(type);
  if (f.table == Table::gemma2_stacks) return t5gemma_positions(j);
  ModelPositions out;
  out.model_type = type;
  // attribute_map: hidden_size -> d_model, num_hidden_layers -> encoder_layers, num_attention_heads ->
  // encoder_attention_heads (configuration_bart.py BartConfig). Where a config has both, the alias wins, as
  // in transformers 5 (BartConfig.from_dict({d_model: 512, hidden_size: 256}).d_model is 256).
  const char* d_key = j.has("hidden_size") ? "hidden_size" : "d_model";
  const char* layers_key = j.has("num_hidden_layers") ? "num_hidden_layers" : "encoder_layers";
  const char* heads_key = j.has("num_attention_heads") ? "num_attention_heads" : "encoder_attention_heads";
  j.read.insert({"hidden_size", "d_model", "num_hidden_layers", "encoder_layers", "num_attention_heads",
                 "encoder_attention_heads"});
  const int64_t d = positive_size(j, d_key, f.d_model);
  const int64_t enc_layers = j.int_or(layers_key, f.encoder_layers);
  const int64_t dec_layers = j.int_or("decoder_layers", f.decoder_layers);
  const int64_t enc_heads = positive_size(j, heads_key, f.encoder_heads);
  const int64_t dec_heads = positive_size(j, "decoder_attention_heads", f.decoder_heads);
  // BartForCausalLM & co. save is_encoder_decoder false: the decoder alone (modeling_bart.py).
  const bool encoder = j.bool_or("is_encoder_decoder", true);
  j.read.insert("is_decoder");
  for (auto [key, n] : {std::pair{layers_key, enc_layers}, std::pair{"decoder_layers", dec_layers}})
    if (n < 0 || n > kMaxModelLayers)
      fail(kOp, j.where, key, " = ", n, " is invalid: must be in [0, ", kMaxModelLayers, "]");
  for (auto [key, h] : {std::pair{heads_key, enc_heads}, std::pair{"decoder_attention_heads", dec_heads}})
    if (d % h != 0)  // BartAttention: "embed_dim must be divisible by num_heads"
      fail(kOp, j.where, d_key, " = ", d, " is not divisible by ", key, " = ", h);

  const bool whisper = f.table == Table::whisper;
  if (whisper) {
    out.max_position_embeddings = positive_size(j, "max_target_positions", f.max_pos);
    out.encoder_max_position_embeddings = positive_size(j, "max_source_positions", 1500);
  } else {
    out.max_position_embeddings = positive_size(j, "max_position_embeddings", f.max_pos);
    out.encoder_max_position_embeddings = out.max_position_embeddings;
  }
  if (!encoder) out.encoder_max_position_embeddings = 0;
  const bool sinusoidal_stacks = f.table == Table::sinusoidal_t2t || f.table == Table::sinusoidal_fairseq;
  if (sinusoidal_stacks || (whisper && encoder)) {
    SinusoidalConfig s;
    s.dim = d;
    s.layout = SinusoidalLayout::split;
    s.frequencies = f.table == Table::sinusoidal_t2t ? SinusoidalFrequencies::model_dim
                                                     : SinusoidalFrequencies::half_dim_minus_one;
    // marian / pegasus: [sin of ceil(d/2) | cos of floor(d/2)]; whisper's sinusoids() needs d even;
    // fairseq's odd d appends a zero column, as posenc's split layout.
    if (f.table != Table::sinusoidal_fairseq && d % 2 != 0)
      fail(kOp, j.where, d_key, " = ", d, " is not supported for ", type,
           ": its sinusoidal table needs an even width");
    if (d < 4)  // fairseq's frequencies divide by d/2 - 1
      fail(kOp, j.where, d_key, " = ", d, " is invalid for ", type, "'s sinusoidal table: must be >= 4");
    if (f.table == Table::sinusoidal_fairseq) {
      // M2M100SinusoidalPositionalEmbedding.forward: padding_idx + 1 (a null pad_token_id fails there)
      const bool pad_null = j.j.contains("pad_token_id") && j.j.at("pad_token_id").is_null();
      const int64_t pad = j.int_or("pad_token_id", f.pad);
      if (pad_null || pad < 0 || pad > kMaxModelLayers * 64)
        fail(kOp, j.where, "pad_token_id = ", pad_null ? "null" : std::to_string(pad), " is invalid for ",
             type, ": position 0 reads row pad_token_id + 1 of its sinusoidal table");
      s.position_offset = pad + 1;
    }
    validate(s);
    out.sinusoidal = s;
  }
  if (f.table == Table::learned) out.learned_position_offset = f.learned_offset;
  // Legacy keys no transformers 5 code reads (fairseq conversions): reported where they claim otherwise.
  if (j.has("static_position_embeddings") && j.boolean("static_position_embeddings") != sinusoidal_stacks)
    out.warnings.push_back("static_position_embeddings = " + j.at("static_position_embeddings").dump() +
                           " is not read by transformers 5: " + type + " uses " +
                           (sinusoidal_stacks ? "sinusoidal" : "learned") + " position tables");
  j.read.insert("extra_pos_embeddings");  // a fairseq conversions' leftover: no transformers 5 code reads it
  if (f.prompts && j.bool_or("use_prompt", false))
    out.warnings.push_back("use_prompt = true: " + type +
                           " prepends prompt_length learned keys and values (no positions) "
                           "to every attention layer, which the caller's keys must include");
  j.read.insert("prompt_length");

  out.num_heads = dec_heads;
  const int64_t first_decoder = encoder ? enc_layers : 0;
  out.num_layers = first_decoder + dec_layers;
  if (out.num_layers == 0) fail(kOp, j.where, "encoder_layers + decoder_layers is 0: no layer to plan");
  for (int64_t i = 0; i < out.num_layers; ++i) {
    LayerPlan p;
    p.layer = i;
    const bool decoder = i >= first_decoder;
    p.layer_type = decoder ? "decoder" : "encoder";
    p.position = whisper ? (decoder ? PositionMethod::learned : PositionMethod::sinusoidal)
                 : f.table == Table::learned ? PositionMethod::learned
                                             : PositionMethod::sinusoidal;
    p.qk_head_dim = p.v_head_dim = d / (decoder ? dec_heads : enc_heads);
    p.attention.causal = decoder;
    p.attention.softmax_scale = 1.0 / std::sqrt(static_cast<double>(p.qk_head_dim));  // head_dim ** -0.5
    out.layers.push_back(std::move(p));
  }
  j.warn_unread(out.warnings, type);
  return out;
}

}  // namespace posenc::detail
