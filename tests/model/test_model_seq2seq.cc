// tests/model/test_model_seq2seq.cc: encoder-decoder plans (src/model/seq2seq.cc, and T5's family in
// src/model/config_json.cc). Expected values from transformers 5.23.0's configuration_<type>.py and
// modeling_<type>.py, cited per case; python/tests/model/test_model_families.py checks them against the
// running models (attention scale and mask per layer, the rows each stack's position module returns).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "model_plan.h"
#include "posenc/error.h"
#include "posenc/model.h"

namespace posenc {
namespace {
using test::model_json;

ModelPositions plan(const std::string& type, const std::string& extra = "") {
  return model_positions_from_hf_json(model_json(type, extra));
}

std::string error_of(const std::string& type, const std::string& extra) {
  return test::plan_error(model_json(type, extra));
}

int64_t count(const ModelPositions& m, const std::string& layer_type) {
  int64_t n = 0;
  for (const LayerPlan& l : m.layers) n += l.layer_type == layer_type;
  return n;
}

// configuration_bart.py: 12 + 12 layers, 16 heads of d_model 1024; BartLearnedPositionalEmbedding: row p + 2.
TEST(ModelSeq2Seq, BartEncoderThenDecoderWithLearnedRowsPlusTwo) {
  const ModelPositions m = plan("bart");
  EXPECT_EQ(m.model_type, "bart");
  ASSERT_EQ(m.num_layers, 24);
  EXPECT_EQ(count(m, "encoder"), 12);
  EXPECT_EQ(count(m, "decoder"), 12);
  EXPECT_EQ(m.max_position_embeddings, 1024);
  EXPECT_EQ(m.encoder_max_position_embeddings, 1024);
  EXPECT_EQ(m.learned_position_offset, 2);
  EXPECT_FALSE(m.sinusoidal);
  for (const LayerPlan& l : m.layers) {
    SCOPED_TRACE(l.layer);
    EXPECT_EQ(l.layer_type, l.layer < 12 ? "encoder" : "decoder");
    EXPECT_STREQ(position_method_name(l.position), "learned");
    EXPECT_EQ(l.attention.causal, l.layer >= 12);
    EXPECT_EQ(l.qk_head_dim, 64);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 0.125);
  }
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
}

// BartForCausalLM saves is_encoder_decoder false: the decoder alone, its own head count.
TEST(ModelSeq2Seq, CausalLmCheckpointIsTheDecoderAlone) {
  const ModelPositions m =
      plan("mbart", R"("is_encoder_decoder": false, "is_decoder": true, "d_model": 64, "decoder_layers": 3,
                       "encoder_layers": 5, "decoder_attention_heads": 8, "encoder_attention_heads": 2)");
  ASSERT_EQ(m.num_layers, 3);
  EXPECT_EQ(m.encoder_max_position_embeddings, 0);
  EXPECT_EQ(m.num_heads, 8);
  for (const LayerPlan& l : m.layers) {
    EXPECT_EQ(l.layer_type, "decoder");
    EXPECT_TRUE(l.attention.causal);
    EXPECT_EQ(l.qk_head_dim, 8);
  }
}

// Heads of each stack: head_dim = d_model / its heads, and the scale from it.
TEST(ModelSeq2Seq, EachStackHasItsOwnHeadSize) {
  const ModelPositions m = plan("blenderbot", R"("d_model": 96, "encoder_attention_heads": 3,
                                               "decoder_attention_heads": 12, "encoder_layers": 1,
                                               "decoder_layers": 1)");
  ASSERT_EQ(m.num_layers, 2);
  EXPECT_EQ(m.layers[0].qk_head_dim, 32);
  EXPECT_EQ(m.layers[1].qk_head_dim, 8);
  EXPECT_DOUBLE_EQ(m.layers[1].attention.softmax_scale, 1.0 / std::sqrt(8.0));
  EXPECT_EQ(m.learned_position_offset, 0);  // modeling_blenderbot.py: row p
  EXPECT_EQ(m.max_position_embeddings, 128);
}

// modeling_marian.py MarianSinusoidalPositionalEmbedding: [sin | cos], w_i = 10000^(-2i/d), row p.
TEST(ModelSeq2Seq, MarianAndPegasusSinusoidalTables) {
  for (const char* type : {"marian", "pegasus"}) {
    SCOPED_TRACE(type);
    const ModelPositions m = plan(type, R"("d_model": 512, "max_position_embeddings": 512)");
    ASSERT_TRUE(m.sinusoidal);
    EXPECT_EQ(m.sinusoidal->dim, 512);
    EXPECT_EQ(m.sinusoidal->layout, SinusoidalLayout::split);
    EXPECT_EQ(m.sinusoidal->frequencies, SinusoidalFrequencies::model_dim);
    EXPECT_EQ(m.sinusoidal->position_offset, 0);
    EXPECT_EQ(m.max_position_embeddings, 512);
    for (const LayerPlan& l : m.layers) EXPECT_STREQ(position_method_name(l.position), "sinusoidal");
  }
  EXPECT_NE(
      error_of("marian", R"("d_model": 513, "encoder_attention_heads": 3, "decoder_attention_heads": 3)")
          .find("even width"),
      std::string::npos);
}

// modeling_m2m_100.py: fairseq's table, w_i = 10000^(-i / (d/2 - 1)), row p + pad_token_id + 1.
TEST(ModelSeq2Seq, M2M100FairseqTableAfterThePaddingRow) {
  const ModelPositions m = plan("m2m_100", R"("pad_token_id": 1)");
  ASSERT_TRUE(m.sinusoidal);
  EXPECT_EQ(m.sinusoidal->frequencies, SinusoidalFrequencies::half_dim_minus_one);
  EXPECT_EQ(m.sinusoidal->position_offset, 2);
  EXPECT_EQ(plan("nllb-moe", R"("pad_token_id": 0)").sinusoidal->position_offset, 1);
  EXPECT_NE(error_of("m2m_100", R"("pad_token_id": -3)").find("pad_token_id = -3"), std::string::npos);
}

// modeling_whisper.py: the encoder adds all max_source_positions rows of sinusoids() (fairseq's
// frequencies, row p), the decoder a learned table of max_target_positions rows.
TEST(ModelSeq2Seq, WhisperSinusoidalEncoderLearnedDecoder) {
  const ModelPositions m = plan("whisper", R"("d_model": 1280, "encoder_layers": 32, "decoder_layers": 4,
                                             "encoder_attention_heads": 20, "decoder_attention_heads": 20)");
  ASSERT_EQ(m.num_layers, 36);
  EXPECT_EQ(m.encoder_max_position_embeddings, 1500);
  EXPECT_EQ(m.max_position_embeddings, 448);
  EXPECT_EQ(m.learned_position_offset, 0);
  ASSERT_TRUE(m.sinusoidal);
  EXPECT_EQ(m.sinusoidal->frequencies, SinusoidalFrequencies::half_dim_minus_one);
  EXPECT_EQ(m.sinusoidal->position_offset, 0);
  EXPECT_STREQ(position_method_name(m.layers[0].position), "sinusoidal");
  EXPECT_STREQ(position_method_name(m.layers[32].position), "learned");
  EXPECT_FALSE(m.layers[31].attention.causal);
  EXPECT_TRUE(m.layers[32].attention.causal);
  // The decoder alone (WhisperForCausalLM): no sinusoidal table.
  EXPECT_FALSE(plan("whisper", R"("is_encoder_decoder": false)").sinusoidal);
}

TEST(ModelSeq2Seq, BadSizesNameTheKey) {
  EXPECT_NE(error_of("bart", R"("d_model": 100, "encoder_attention_heads": 16)")
                .find("encoder_attention_heads = 16"),
            std::string::npos);
  EXPECT_NE(error_of("bart", R"("encoder_layers": -1)").find("encoder_layers = -1"), std::string::npos);
  EXPECT_NE(error_of("bart", R"("encoder_layers": 0, "decoder_layers": 0)").find("no layer"),
            std::string::npos);
  EXPECT_NE(error_of("whisper", R"("max_source_positions": 0)").find("max_source_positions = 0"),
            std::string::npos);
  EXPECT_NE(error_of("bart", R"("max_position_embeddings": 1e300)").find("max_position_embeddings"),
            std::string::npos);
}

// transformers 5 lets an attribute_map alias win over the field it maps to (BartConfig.from_dict({d_model:
// 512, hidden_size: 256}).d_model is 256; MT5Config's head_dim -> d_kv likewise); null keys as transformers.
TEST(ModelSeq2Seq, AliasesNullsAndWarnings) {
  const ModelPositions b = plan("bart", R"("d_model": 512, "hidden_size": 256, "encoder_layers": 12,
                                          "num_hidden_layers": 6, "decoder_layers": 1)");
  ASSERT_EQ(b.num_layers, 7);
  EXPECT_EQ(b.layers[0].qk_head_dim, 16);
  EXPECT_EQ(plan("mt5", R"("head_dim": 32, "d_kv": 64)").layers[0].qk_head_dim, 32);
  EXPECT_EQ(plan("switch_transformers", R"("num_layers": 6, "num_decoder_layers": null)").num_layers, 12);
  EXPECT_NE(error_of("pix2struct_text_model", R"("is_decoder": false)").find("is_decoder = false"),
            std::string::npos);
  EXPECT_NE(error_of("m2m_100", R"("pad_token_id": null)").find("pad_token_id = null"), std::string::npos);
  EXPECT_NE(error_of("whisper", R"("d_model": 2, "encoder_attention_heads": 1, "decoder_attention_heads": 1)")
                .find("d_model = 2 is invalid for whisper"),
            std::string::npos);
  const ModelPositions mvp = plan("mvp", R"("use_prompt": true)");
  ASSERT_EQ(mvp.warnings.size(), 1u);
  EXPECT_NE(mvp.warnings[0].find("use_prompt = true"), std::string::npos);
}

// A legacy key that claims what transformers 5 does not do is reported; an agreeing one is not.
TEST(ModelSeq2Seq, StaticPositionEmbeddingsIsCheckedNotRead) {
  EXPECT_TRUE(plan("marian", R"("static_position_embeddings": true)").warnings.empty());
  const ModelPositions m = plan("bart", R"("static_position_embeddings": true)");
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("learned position tables"), std::string::npos) << m.warnings[0];
}

// T5's family: mt5 / umt5 / switch_transformers keep T5's buckets; umt5 has a table in every layer
// (modeling_umt5.py UMT5LayerSelfAttention); Pix2Struct's text model is a decoder alone.
TEST(ModelSeq2Seq, T5Variants) {
  const ModelPositions mt5 = plan("mt5");
  EXPECT_EQ(mt5.model_type, "mt5");
  EXPECT_EQ(mt5.num_layers, 16);  // num_layers 8, num_decoder_layers None -> 8
  EXPECT_EQ(count(mt5, "encoder"), 8);
  EXPECT_FALSE(mt5.t5_bias_per_layer);
  EXPECT_EQ(mt5.layers[0].qk_head_dim, 64);
  EXPECT_DOUBLE_EQ(mt5.layers[0].attention.softmax_scale, 1.0);
  EXPECT_TRUE(plan("umt5").t5_bias_per_layer);
  const ModelPositions sw = plan("switch_transformers", R"("num_layers": 24)");
  EXPECT_EQ(count(sw, "decoder"), 12);  // SwitchTransformersConfig.num_decoder_layers = 12
  const ModelPositions p = plan("pix2struct_text_model");
  EXPECT_EQ(p.num_layers, 12);
  EXPECT_EQ(count(p, "decoder"), 12);
  EXPECT_TRUE(p.layers[0].attention.causal);
  EXPECT_EQ(p.t5_num_buckets, 32);
}

// T5Gemma (src/model/t5gemma.cc): two Gemma 2 stacks from the encoder / decoder sub-configs (class
// defaults when absent: 26 layers, sliding on even layers, window 4096, base 10000, scale 256^-0.5,
// softcap 50); the encoder's sliding layers keep |q - k| <= 4096 (posenc window 4097), bidirectional.
TEST(ModelSeq2Seq, T5GemmaTwoGemma2Stacks) {
  const ModelPositions m =
      plan("t5gemma", R"("encoder": {"num_hidden_layers": 4}, "decoder": {"num_hidden_layers": 2,
                                              "sliding_window": 512, "rope_theta": 5e5}, "is_encoder_decoder": true)");
  ASSERT_EQ(m.num_layers, 6);
  EXPECT_EQ(count(m, "encoder"), 4);
  EXPECT_EQ(count(m, "decoder"), 2);
  EXPECT_EQ(m.encoder_max_position_embeddings, 8192);
  for (const LayerPlan& l : m.layers) {
    SCOPED_TRACE(l.layer);
    const bool enc = l.layer < 4, sliding = (enc ? l.layer : l.layer - 4) % 2 == 0;
    EXPECT_EQ(l.attention.causal, !enc);
    EXPECT_EQ(l.attention.window, !sliding ? 0 : enc ? 4097 : 512);
    ASSERT_TRUE(l.rope.has_value());
    EXPECT_EQ(l.rope->base, enc ? 1e4 : 5e5);
    EXPECT_EQ(l.rope->head_dim, 256);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / 16);
    EXPECT_EQ(l.attention.softcap.value_or(0), 50.0);
  }
  EXPECT_EQ(plan("t5gemma").num_layers, 52);  // both stacks' defaults
  const ModelPositions encoder_only = plan("t5gemma", R"("is_encoder_decoder": false)");
  EXPECT_EQ(encoder_only.num_layers, 26);
  EXPECT_EQ(count(encoder_only, "encoder"), 26);
  EXPECT_EQ(error_of("t5gemma", R"("encoder": {"head_dim": 3})"),
            "model config: t5gemma's encoder: rope: rotary_dim = 3 is invalid: must be even");
  EXPECT_NE(error_of("t5gemma", R"("decoder": {"num_attention_heads": 0})")
                .find("model config: decoder.num_attention_heads = 0 is invalid"),
            std::string::npos);
  EXPECT_NE(error_of("t5gemma", R"("decoder": [])").find("decoder = [] is invalid: must be an object"),
            std::string::npos);
  EXPECT_TRUE(
      test::has_warning(plan("t5gemma", R"("decoder": {"rope_magic": 1})"), "decoder: key 'rope_magic'"));
  EXPECT_TRUE(test::has_warning(plan("t5gemma", R"("sliding_window": 7)"), "key 'sliding_window'"));
}

}  // namespace
}  // namespace posenc
