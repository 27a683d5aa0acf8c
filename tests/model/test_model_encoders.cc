// Encoder families' plans (RoFormer, ESM, ALBERT, MPNet, MobileBERT, the BERT family's
// position_embedding_type; the encoders refused by mechanism):
// real configs where the collection has them, each rule against transformers 5.23's modeling file.
// Their layers are checked against transformers' own modules by python/tests/model/test_model_families.py.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>

#include "posenc/error.h"
#include "posenc/model.h"
#include "model_plan.h"

namespace posenc {
namespace {

const std::string kDir = std::string(POSENC_TEST_DATA_DIR) + "/hf_configs/";

ModelPositions load(const std::string& file) { return model_positions_from_hf_file(kDir + file); }
ModelPositions plan(const std::string& type, const std::string& members = "") {
  return model_positions_from_hf_json(test::model_json(type, members));
}
using test::has_warning;
using test::plan_error;

// RoFormer (modeling_roformer.py RoFormerSinusoidalPositionalEmbedding.create_weight,
// RoFormerSelfAttention.apply_rotary_position_embeddings): create_weight's table of base 10000 over the head,
// rotated in pairs (2j, 2j + 1), every head dim; bidirectional unless is_decoder; scale head^-0.5.
TEST(ModelEncoders, RoformerPairsOfAFixedBase) {
  const ModelPositions m = load("roformer__roformer_chinese_base.json");
  EXPECT_EQ(m.max_position_embeddings, 512);
  for (const LayerPlan& l : m.layers) {
    ASSERT_TRUE(l.rope.has_value());
    EXPECT_EQ(l.rope->layout, RopeLayout::interleaved);
    EXPECT_EQ(l.rope->base, 1e4);
    EXPECT_EQ(l.rope->scaling.type, RopeScalingType::none);
    EXPECT_EQ(l.rotary_hi, 64);
    EXPECT_FALSE(l.attention.causal);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 0.125);
  }
  EXPECT_TRUE(plan("roformer", R"("is_decoder": true)").layers[0].attention.causal);
  EXPECT_EQ(plan("roformer").max_position_embeddings, 1536);  // RoFormerConfig's default
  // The table's base is fixed: a rope_theta is reported, not applied.
  const ModelPositions themed = plan("roformer", R"("rope_theta": 5e5)");
  EXPECT_EQ(themed.layers[0].rope->base, 1e4);
  EXPECT_TRUE(has_warning(themed, "rope_theta is ignored by roformer"));
  // Rotated values (rotary_value) are not modeled: refused by name.
  EXPECT_NE(plan_error(test::model_json("roformer", R"("rotary_value": true)")).find("rotary_value = true"),
            std::string::npos);
  EXPECT_FALSE(plan("roformer", R"("rotary_value": false)").layers[0].attention.causal);
}

// ESM (configuration_esm.py, modeling_esm.py): "rotary" (ESM-2) rotates halves of every head with
// rope_theta (10000) from position 0; "absolute" (the class default, ESM-1b) adds a learned table read
// at row p + pad_token_id + 1 (create_position_ids_from_input_ids). The query is scaled by head^-0.5
// before RoPE and the kernel by 1 (modeling_esm.py EsmSelfAttention.forward): the same scores as scale
// head^-0.5.
TEST(ModelEncoders, EsmRotaryOrLearned) {
  const ModelPositions esm2 = load("esm__esm2_t33_650M_UR50D.json");
  EXPECT_EQ(esm2.learned_position_offset, 0);
  for (const LayerPlan& l : esm2.layers) {
    ASSERT_TRUE(l.rope.has_value());
    EXPECT_EQ(l.rope->layout, RopeLayout::half);
    EXPECT_EQ(l.rope->head_dim, 64);
    EXPECT_FALSE(l.attention.causal);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 0.125);
  }
  EXPECT_EQ(plan("esm", R"("position_embedding_type": "rotary", "rope_theta": 5e4)").layers[0].rope->base,
            5e4);
  const ModelPositions absolute = plan("esm", R"("pad_token_id": 1)");
  EXPECT_EQ(absolute.layers[0].position, PositionMethod::learned);
  EXPECT_FALSE(absolute.layers[0].rope.has_value());
  EXPECT_EQ(absolute.learned_position_offset, 2);
  EXPECT_EQ(absolute.max_position_embeddings, 1024);  // 1026 rows
  EXPECT_TRUE(plan("esm", R"("pad_token_id": 1, "is_decoder": true)").layers[0].attention.causal);
  // EsmConfig's pad_token_id is None: the learned rows are then undefined.
  EXPECT_NE(plan_error(test::model_json("esm")).find("pad_token_id is missing"), std::string::npos);
  // transformers 5 adds no position for any other kind (ESM-1's relative_key): refused.
  EXPECT_NE(
      plan_error(test::model_json("esm", R"("position_embedding_type": "relative_key", "pad_token_id": 1)"))
          .find("position_embedding_type = \"relative_key\" is not supported for esm"),
      std::string::npos);
  EXPECT_TRUE(has_warning(plan("esm", R"("pad_token_id": 1, "rope_theta": 1e4)"), "rope_theta is not used"));
}

// ALBERT (modeling_albert.py AlbertTransformer, AlbertLayerGroup): num_hidden_layers steps of inner_group_num
// layers each, every attention bidirectional with the learned table read at row p.
TEST(ModelEncoders, AlbertRunsInnerGroupsOfSharedLayers) {
  const ModelPositions base = load("albert__albert-base-v2.json");
  EXPECT_EQ(base.num_layers, 12);
  EXPECT_EQ(base.learned_position_offset, 0);
  EXPECT_EQ(base.max_position_embeddings, 512);
  for (const LayerPlan& l : base.layers) {
    EXPECT_EQ(l.position, PositionMethod::learned);
    EXPECT_FALSE(l.attention.causal);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 0.125);  // 768 / 12 = 64
  }
  EXPECT_FALSE(plan("albert", R"("is_decoder": true)").layers[0].attention.causal);  // no decoder path
  const ModelPositions twice = plan("albert", R"("num_hidden_layers": 3, "inner_group_num": 2)");
  EXPECT_EQ(twice.num_layers, 6);
  EXPECT_EQ(twice.layers.size(), 6u);
  EXPECT_DOUBLE_EQ(plan("albert").layers[0].attention.softmax_scale, 1.0 / 8);  // 4096 / 64 heads
  EXPECT_NE(plan_error(test::model_json("albert", R"("inner_group_num": 0)")).find("inner_group_num = 0"),
            std::string::npos);
}

// MPNet (modeling_mpnet.py): a learned table with padding_idx 1 whatever pad_token_id says (row p + 2,
// MPNetEmbeddings) and T5's bidirectional buckets, 32 of them and max_distance 128 (the defaults of
// MPNetEncoder.compute_position_bias), one table for all layers; scores scaled by head^-0.5 before the bias.
TEST(ModelEncoders, MpnetLearnedTableAndBuckets) {
  const ModelPositions m = load("mpnet__all-mpnet-base-v2.json");
  EXPECT_TRUE(m.learned_embeddings);
  EXPECT_EQ(m.learned_position_offset, 2);
  EXPECT_EQ(m.max_position_embeddings, 512);  // 514 rows
  EXPECT_EQ(m.t5_num_buckets, 32);
  EXPECT_EQ(m.t5_max_distance, 128);
  EXPECT_FALSE(m.t5_bias_per_layer);
  for (const LayerPlan& l : m.layers) {
    EXPECT_EQ(l.position, PositionMethod::t5);
    EXPECT_FALSE(l.attention.causal);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 0.125);
  }
  EXPECT_EQ(plan("mpnet", R"("pad_token_id": 0)").learned_position_offset, 2);
  const ModelPositions more = plan("mpnet", R"("relative_attention_num_buckets": 64)");
  EXPECT_EQ(more.t5_num_buckets, 32);
  EXPECT_TRUE(has_warning(more, "relative_attention_num_buckets = 64 only sizes mpnet's bias table"));
  EXPECT_NE(plan_error(test::model_json("mpnet", R"("max_position_embeddings": 2)"))
                .find("max_position_embeddings = 2 is invalid for mpnet"),
            std::string::npos);
  EXPECT_FALSE(load("bert__bert-base-uncased-finetuned-seqcls.json").learned_embeddings);
}

// MobileBERT (configuration_mobilebert.py, modeling_mobilebert.py): the learned table read at row p,
// bidirectional whatever is_decoder says; heads of true_hidden_size / num_attention_heads, where
// true_hidden_size is intra_bottleneck_size with use_bottleneck (the default) and hidden_size without.
TEST(ModelEncoders, MobileBertHeadsOfTheBottleneck) {
  for (const char* file : {"mobilebert__mobilebert-uncased-finetune-ner.json",
                           "mobilebert__mobilebert-uncased-finetuned-seqcls.json"}) {
    SCOPED_TRACE(file);
    const ModelPositions m = load(file);
    EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
    EXPECT_EQ(m.num_layers, 24);
    EXPECT_EQ(m.num_heads, 4);
    EXPECT_EQ(m.learned_position_offset, 0);
    EXPECT_EQ(m.max_position_embeddings, 512);
    for (const LayerPlan& l : m.layers) {
      EXPECT_EQ(l.position, PositionMethod::learned);
      EXPECT_FALSE(l.attention.causal);
      EXPECT_EQ(l.qk_head_dim, 32);  // intra_bottleneck_size 128 / 4 heads, not hidden_size 512 / 4
      EXPECT_EQ(l.v_head_dim, 32);
      EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / std::sqrt(32.0));
    }
  }
  // MobileBertConfig's defaults: 24 layers of 4 heads over the 128-wide bottleneck
  const ModelPositions defaults = plan("mobilebert");
  EXPECT_EQ(defaults.num_layers, 24);
  EXPECT_EQ(defaults.layers[0].qk_head_dim, 32);
  // Without the bottleneck the heads split hidden_size (512 / 4); intra_bottleneck_size is then unused.
  for (const char* members :
       {R"("use_bottleneck": false)", R"("use_bottleneck": false, "intra_bottleneck_size": 96)"}) {
    SCOPED_TRACE(members);
    const ModelPositions wide = plan("mobilebert", members);
    EXPECT_EQ(wide.layers[0].qk_head_dim, 128);
    EXPECT_DOUBLE_EQ(wide.layers[0].attention.softmax_scale, 1.0 / std::sqrt(128.0));
  }
  const ModelPositions narrow =
      plan("mobilebert", R"("intra_bottleneck_size": 96, "num_attention_heads": 8)");
  EXPECT_EQ(narrow.layers[0].qk_head_dim, 12);
  EXPECT_EQ(narrow.num_heads, 8);
  // use_bottleneck_attention only feeds the values from the bottleneck: the heads stay (read, not
  // reported, with or without the bottleneck).
  for (const char* members : {R"("use_bottleneck_attention": true)",
                              R"("use_bottleneck_attention": true, "use_bottleneck": false)"}) {
    const ModelPositions values = plan("mobilebert", members);
    EXPECT_TRUE(values.warnings.empty()) << values.warnings.front();
    EXPECT_EQ(values.layers[0].qk_head_dim,
              std::string(members).find("false") != std::string::npos ? 128 : 32);
  }
  EXPECT_NE(plan_error(test::model_json("mobilebert", R"("use_bottleneck_attention": 1)"))
                .find("use_bottleneck_attention = 1 is invalid: must be true or false"),
            std::string::npos);
  // Without the shared bottleneck (and without use_bottleneck_attention), q and k read the 512-wide input
  // through projections of 128 inputs: transformers cannot run it.
  EXPECT_NE(plan_error(test::model_json("mobilebert", R"("key_query_shared_bottleneck": false)"))
                .find("key_query_shared_bottleneck = false is not supported for mobilebert: without "
                      "use_bottleneck_attention its queries and keys read the hidden_size = 512 input"),
            std::string::npos);
  for (const char* members : {R"("key_query_shared_bottleneck": false, "use_bottleneck_attention": true)",
                              R"("key_query_shared_bottleneck": false, "intra_bottleneck_size": 512)",
                              R"("key_query_shared_bottleneck": false, "use_bottleneck": false)"})
    EXPECT_EQ(plan("mobilebert", members).layers[0].qk_head_dim,
              std::string(members).find("use_bottleneck_attention") != std::string::npos ? 32 : 128)
        << members;
  // A saved true_hidden_size overrides the derived one in transformers 5.23 (set after __post_init__'s
  // rule): equal to the width, it is the same model; another value cannot run (refused).
  EXPECT_EQ(plan("mobilebert", R"("use_bottleneck": false, "true_hidden_size": 512)").layers[0].qk_head_dim,
            128);
  EXPECT_NE(
      plan_error(test::model_json("mobilebert", R"("intra_bottleneck_size": 64, "true_hidden_size": 128)"))
          .find("true_hidden_size = 128 is invalid for mobilebert: transformers keeps it, and its layers "
                "then take inputs of intra_bottleneck_size = 64"),
      std::string::npos);
  EXPECT_FALSE(plan("mobilebert", R"("is_decoder": true)").layers[0].attention.causal);  // no decoder path
  // Heads that do not split the width: transformers floors the head and its output projection fails.
  EXPECT_NE(
      plan_error(test::model_json("mobilebert", R"("intra_bottleneck_size": 130)"))
          .find("the attention width 130 (intra_bottleneck_size, or hidden_size without use_bottleneck) "
                "is not divisible by num_attention_heads = 4"),
      std::string::npos);
  EXPECT_NE(plan_error(test::model_json("mobilebert", R"("use_bottleneck": false, "hidden_size": 510)"))
                .find("the attention width 510"),
            std::string::npos);
}

// Encoders whose attention or positions posenc does not model: refused by name, with the mechanism
// (src/model/families.cc refusal_reason), whatever the config holds.
TEST(ModelEncoders, EncodersWithTheirOwnAttentionAreRefusedByMechanism) {
  const std::pair<const char*, const char*> kRefused[] = {
      {"deberta", "disentangled attention"},
      {"deberta-v2", "disentangled attention"},
      {"xlnet", "relative attention (Transformer-XL's content and position terms"},
      {"funnel", "relative attention over pooled sequences"},
      {"longformer", "sliding-window attention with global tokens"},
      {"reformer", "LSH and chunked local attention"},
      {"nystromformer", "Nystrom approximation"},
      {"yoso", "LSH-sampled approximate attention"},
      {"mra", "multi-resolution approximate attention"},
      {"fnet", "Fourier token mixing"},
      {"convbert", "span-based dynamic convolution"},
      {"layoutlm", "2-D layout embeddings"},
      {"tapas", "table row / column embeddings"},
      {"luke", "entity positions (the mean of each entity's word position embeddings)"},
  };
  for (const auto& [type, mechanism] : kRefused) {
    SCOPED_TRACE(type);
    const std::string msg = plan_error(test::model_json(type, R"("num_hidden_layers": 2)"));
    EXPECT_NE(msg.find("model_type '" + std::string(type) + "' is not supported: "), std::string::npos)
        << msg;
    EXPECT_NE(msg.find(mechanism), std::string::npos) << msg;
    EXPECT_NE(msg.find("is not modeled by posenc yet"), std::string::npos) << msg;
  }
}

// The BERT family in transformers 5 has no position_embedding_type and adds its learned table whatever a
// config says: a checkpoint trained with ALiBi (Jina's remote code) or transformers 4's relative
// distances did not train that table, so such configs are refused.
TEST(ModelEncoders, BertPositionKindsTransformers5CannotRun) {
  const std::string jina = [] {
    try {
      load("bert__jina-embeddings-v2-base-en.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  }();
  EXPECT_NE(jina.find("position_embedding_type = \"alibi\" is not supported for bert"), std::string::npos)
      << jina;
  EXPECT_NE(jina.find("remote code"), std::string::npos) << jina;
  EXPECT_NE(plan_error(test::model_json("roberta", R"("position_embedding_type": "relative_key_query")"))
                .find("relative distance embeddings"),
            std::string::npos);
  EXPECT_EQ(plan("bert", R"("position_embedding_type": "absolute")").layers[0].position,
            PositionMethod::learned);
}

// Gemma 3 text models with use_bidirectional_attention (EmbeddingGemma): every layer bidirectional, the
// sliding layers keeping |q - k| < sliding_window // 2 + 1 (configuration_gemma3.py
// Gemma3TextConfig.__post_init__, modeling_gemma3.py Gemma3TextModel.forward's
// _bidirectional_window_overlay).
TEST(ModelEncoders, EmbeddingGemmaBidirectionalHalvedWindows) {
  // EmbeddingGemma's 24-layer pattern, cut to 12: five sliding layers, then a full one
  std::string types;
  for (int i = 0; i < 12; ++i)
    types += std::string(i ? ", " : "") + (i % 6 == 5 ? "\"full" : "\"sliding") + "_attention\"";
  const ModelPositions m =
      plan("gemma3_text", R"("num_hidden_layers": 12, "sliding_window": 512, )"
                          R"("use_bidirectional_attention": true, "_sliding_window_pattern": 6, )"
                          R"("layer_types": [)" +
                              types + "]");
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
  for (const LayerPlan& l : m.layers) {
    EXPECT_FALSE(l.attention.causal);
    EXPECT_EQ(l.attention.window, l.layer_type == "sliding_attention" ? 257 : 0);
  }
  const ModelPositions causal = plan("gemma3_text", R"("sliding_window": 512, "_sliding_window_pattern": 3)");
  EXPECT_TRUE(causal.layers[0].attention.causal);
  EXPECT_EQ(causal.layers[0].attention.window, 512);
  EXPECT_EQ(causal.layers[2].attention.window, 512);  // sliding_window_pattern 6, not 3
  EXPECT_TRUE(has_warning(causal, "_sliding_window_pattern is ignored"));
  // Gemma 1 / 2 text models build a causal mask whatever the flag says (modeling_gemma.py): reported.
  EXPECT_TRUE(has_warning(plan("gemma", R"("use_bidirectional_attention": true)"),
                          "use_bidirectional_attention = true is not modeled"));
}

// EmbeddingGemma 2 (configuration_embedding_gemma2.py EmbeddingGemma2TextConfig, modeling_embedding_gemma2.py
// EmbeddingGemma2RotaryEmbedding, EmbeddingGemma2Attention.__init__, EmbeddingGemma2TextModel.forward):
// Gemma 4's per-type dicts and per-layer head dims, every layer bidirectional, sliding layers
// |q - k| <= sliding_window (posenc's window one more), scale 1; the last layer is forced full.
TEST(ModelEncoders, EmbeddingGemma2IsGemma4BothWaysWithInclusiveWindows) {
  const ModelPositions m = plan("embedding_gemma2_text", R"("num_hidden_layers": 8)");
  ASSERT_EQ(m.layers.size(), 8u);
  for (const LayerPlan& l : m.layers) {
    const bool full = l.layer == 5 || l.layer == 7;  // (i + 1) % 6 == 0, and the last layer
    EXPECT_EQ(l.layer_type, full ? "full_attention" : "sliding_attention") << l.layer;
    EXPECT_FALSE(l.attention.causal);
    EXPECT_EQ(l.attention.window, full ? 0 : 513);
    EXPECT_EQ(l.attention.softmax_scale, 1.0);
    EXPECT_EQ(l.qk_head_dim, full ? 512 : 256);
    EXPECT_EQ(l.rope->base, full ? 1e6 : 1e4);
    EXPECT_EQ(l.rope->layout, RopeLayout::half);
    EXPECT_EQ(l.rotary_hi, l.qk_head_dim);
  }
  EXPECT_TRUE(has_warning(plan("embedding_gemma2_text", R"("use_bidirectional_attention": false)"),
                          "use_bidirectional_attention = false is not read by embedding_gemma2_text"));
  EXPECT_NE(plan_error(test::model_json("embedding_gemma2_text", R"("sliding_window": 0)"))
                .find("sliding_window = 0"),
            std::string::npos);
}

// OpenAI's privacy filter (configuration_openai_privacy_filter.py OpenAIPrivacyFilterConfig,
// modeling_openai_privacy_filter.py apply_rotary_pos_emb, _apply_rotary_emb, eager_attention_forward,
// OpenAIPrivacyFilterAttention.__init__, OpenAIPrivacyFilterModel.forward): gpt-oss's yarn and sinks, pairs
// (2j, 2j + 1), one bidirectional window mask on every layer (|q - k| <= 128), q and k each times
// head_dim^-0.25 (the logits' scale head_dim^-0.5).
TEST(ModelEncoders, OpenAiPrivacyFilterIsGptOssBothWaysInPairs) {
  const ModelPositions m = plan("openai_privacy_filter", R"("layer_types": ["full_attention"])");
  ASSERT_EQ(m.layers.size(), 8u);
  EXPECT_TRUE(has_warning(m, "layer_types is ignored by openai_privacy_filter"));
  for (const LayerPlan& l : m.layers) {
    EXPECT_EQ(l.layer_type, "sliding_attention");
    EXPECT_FALSE(l.attention.causal);
    EXPECT_EQ(l.attention.window, 129);
    EXPECT_TRUE(l.attention.sinks);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 0.125);
    EXPECT_EQ(l.rope->layout, RopeLayout::interleaved);
    EXPECT_EQ(l.rope->base, 1.5e5);
    EXPECT_EQ(l.rope->scaling.type, RopeScalingType::yarn);
    EXPECT_EQ(l.rope->scaling.factor, 32);
  }
  // Its rotation splits the whole head: a partial rotation fails in transformers, as gpt-oss's does.
  for (const char* type : {"openai_privacy_filter", "gpt_oss"})
    EXPECT_NE(plan_error(test::model_json(type, R"("rope_parameters": {"rope_type": "yarn", "factor": 32.0, )"
                                                R"("rope_theta": 1e4, "partial_rotary_factor": 0.5})"))
                  .find("partial_rotary_factor = 0.5 with rope_type 'yarn' is not supported for model_type"),
              std::string::npos)
        << type;
}

// UltraBERT (configuration_ultrabert.py UltrabertConfig.__post_init__, modeling_ultrabert.py
// UltrabertRotaryEmbedding, rotate_half, UltrabertAttention.__init__): per-type bases, full attention every
// third layer, bidirectional windows |q - k| <= sliding_window; its checkpoints' attention_windows (types and
// the first window) and per-layer rope_theta (the type's last base wins).
TEST(ModelEncoders, UltrabertReadsItsCheckpointsWindowsAndBases) {
  const ModelPositions d = plan("ultrabert", R"("num_hidden_layers": 6)");
  for (const LayerPlan& l : d.layers) {
    const bool full = l.layer % 3 == 2;
    EXPECT_EQ(l.layer_type, full ? "full_attention" : "sliding_attention");
    EXPECT_EQ(l.rope->base, full ? 2.56e6 : 1e4);
    EXPECT_EQ(l.attention.window, full ? 0 : 129);
    EXPECT_FALSE(l.attention.causal);
  }
  const ModelPositions c = plan("ultrabert", R"("num_hidden_layers": 4, "sliding_window": 512,
      "attention_windows": [0, 16, 8, 0], "rope_theta": [7e5, 1e4, 2e4, 8e5])");
  const char* types[] = {"full_attention", "sliding_attention", "sliding_attention", "full_attention"};
  for (const LayerPlan& l : c.layers) {
    EXPECT_EQ(l.layer_type, types[l.layer]);
    EXPECT_EQ(l.rope->base, l.layer_type == "full_attention" ? 8e5 : 2e4);
    EXPECT_EQ(l.attention.window, l.layer_type == "full_attention" ? 0 : 17);
  }
  EXPECT_TRUE(has_warning(c, "sliding_window = 512 is replaced by attention_windows' first window, 16"));
  EXPECT_NE(plan_error(test::model_json("ultrabert", R"("rope_theta": 1e4)")).find("a base per layer"),
            std::string::npos);
  EXPECT_NE(plan_error(test::model_json("ultrabert", R"("num_hidden_layers": 6, "rope_theta": [1e4, 2e4])"))
                .find("no dict for layer type 'full_attention'"),
            std::string::npos);
}

}  // namespace
}  // namespace posenc
