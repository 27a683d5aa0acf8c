// tests/model/test_model_indexer.cc: DeepSeek sparse attention's top-k indexer in model plans (deepseek_v32,
// glm_moe_dsa; src/model/indexer.cc). Expected values from transformers 5.23.0's
// configuration_deepseek_v32.py, configuration_glm_moe_dsa.py and their modeling files, cited per case;
// python/tests/model/test_model_families.py checks the rotations against the running modules.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "model_plan.h"
#include "posenc/error.h"
#include "posenc/model.h"

namespace posenc {
namespace {
using test::expect_plan_error;
using test::has_warning;

std::string six_layers(const std::string& extra) {
  return R"("num_hidden_layers": 6)" + (extra.empty() ? "" : ", " + extra);
}

ModelPositions plan(const std::string& type, const std::string& extra = "") {
  return model_positions_from_hf_json(test::model_json(type, six_layers(extra)));
}

std::string error_of(const std::string& type, const std::string& extra) {
  return test::plan_error(test::model_json(type, six_layers(extra)));
}

TEST(ModelIndexer, DeepSeekV32IsV3MlaWithAHalfRotatedIndexerOnEveryLayer) {
  // DeepSeek-V3.2's released rope_scaling (as V3's): yarn, factor 40, mscale_all_dim 1.
  const ModelPositions m = plan("deepseek_v32", R"("rope_scaling": {"type": "yarn", "factor": 40,
      "mscale": 1.0, "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "beta_fast": 32,
      "beta_slow": 1}, "rope_interleave": true)");
  ASSERT_EQ(m.layers.size(), 6u);
  const double mscale = 0.1 * std::log(40.0) + 1.0;
  for (const LayerPlan& l : m.layers) {
    EXPECT_EQ(l.layer_type, "indexed_attention");  // DeepseekV32Config.__post_init__
    EXPECT_EQ(l.position, PositionMethod::rope);
    EXPECT_EQ(l.rotary_lo, 128);  // nope 128 + rope 64 (DeepseekV32Config's defaults)
    EXPECT_EQ(l.rotary_hi, 192);
    EXPECT_EQ(l.v_head_dim, 128);
    EXPECT_EQ(l.rope->layout, RopeLayout::interleaved);                                 // MLA: pairs
    EXPECT_NEAR(l.attention.softmax_scale, mscale * mscale / std::sqrt(192.0), 1e-12);  // yarn_apply_mscale
    ASSERT_TRUE(l.indexer.has_value());
    EXPECT_EQ(l.indexer->topk, 2048);  // DeepseekV32Config's index_* defaults
    EXPECT_EQ(l.indexer->heads, 64);
    EXPECT_EQ(l.indexer->head_dim, 128);
    EXPECT_FALSE(l.indexer->shared);
    EXPECT_EQ(l.indexer->rope.layout, RopeLayout::half);  // DeepseekV32Indexer.forward
    EXPECT_EQ(l.indexer->rotary_lo, 0);
    EXPECT_EQ(l.indexer->rotary_hi, 64);
    EXPECT_EQ(l.indexer->rope.head_dim, l.rope->head_dim);  // the layer's cos / sin
    EXPECT_EQ(l.indexer->rope.scaling.factor, 40.0);
  }
  EXPECT_TRUE(has_warning(m, "index_topk = 2048"));
  EXPECT_TRUE(m.layers[0].attention_config().causal);
}

TEST(ModelIndexer, GlmMoeDsaSharesSelectionsBySchedulePatternOrList) {
  // GlmMoeDsaConfig.__post_init__: "full" iff max(i - offset + 1, 0) % freq == 0.
  const ModelPositions every = plan("glm_moe_dsa");  // freq 1: every layer selects
  for (const LayerPlan& l : every.layers) EXPECT_FALSE(l.indexer->shared) << l.layer;
  const ModelPositions sched = plan("glm_moe_dsa", R"("index_topk_freq": 4, "index_skip_topk_offset": 2)");
  const bool want[6] = {false, false, true, true, true, false};  // full: 0, 1, 5
  for (int i = 0; i < 6; ++i) EXPECT_EQ(sched.layers[i].indexer->shared, want[i]) << i;
  const ModelPositions pattern = plan("glm_moe_dsa", R"("index_topk_pattern": "FFSSSF")");
  const ModelPositions list =
      plan("glm_moe_dsa", R"("indexer_types": ["full", "full", "shared", "shared", "shared", "full"])");
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(pattern.layers[i].indexer->shared, want[i]) << i;
    EXPECT_EQ(list.layers[i].indexer->shared, want[i]) << i;
  }
  const LayerPlan& l = every.layers[0];
  EXPECT_EQ(l.rotary_lo, 192);  // nope 192, v 256 (GlmMoeDsaConfig's defaults)
  EXPECT_EQ(l.v_head_dim, 256);
  EXPECT_EQ(l.indexer->heads, 32);
  EXPECT_EQ(l.indexer->rope.layout, RopeLayout::interleaved);  // GlmMoeDsaIndexer.forward
}

TEST(ModelIndexer, KeysTransformersIgnoresAreReported) {
  EXPECT_TRUE(has_warning(plan("deepseek_v32", R"("rope_interleave": false)"), "rope_interleave = false"));
  EXPECT_TRUE(has_warning(plan("glm_moe_dsa", R"("indexer_rope_interleave": false)"),
                          "indexer_rope_interleave = false is ignored"));
  EXPECT_FALSE(
      has_warning(plan("glm_moe_dsa", R"("indexer_rope_interleave": true)"), "indexer_rope_interleave"));
}

TEST(ModelIndexer, BadIndexerKeysAreRefusedByName) {
  EXPECT_NE(error_of("deepseek_v32", R"("index_topk": 0)").find("index_topk = 0"), std::string::npos);
  EXPECT_NE(error_of("deepseek_v32", R"("index_head_dim": 32)").find("index_head_dim = 32"),
            std::string::npos);
  EXPECT_NE(error_of("deepseek_v32", R"("index_n_heads": -1)").find("index_n_heads = -1"), std::string::npos);
  EXPECT_NE(error_of("glm_moe_dsa", R"("index_topk_pattern": "FFS")").find("index_topk_pattern"),
            std::string::npos);
  EXPECT_NE(error_of("glm_moe_dsa", R"("indexer_types": ["full", "x", "full", "full", "full", "full"])")
                .find("\"full\" / \"shared\""),
            std::string::npos);
  EXPECT_NE(error_of("glm_moe_dsa", R"("index_topk_pattern": "SFFFFF")").find("layer 0 is \"shared\""),
            std::string::npos);
  // Every layer of these models runs the indexer: other layer types are not theirs, and the others'
  // layers are not indexed.
  EXPECT_NE(error_of("deepseek_v32", R"("layer_types": ["full_attention", "indexed_attention",
      "indexed_attention", "indexed_attention", "indexed_attention", "indexed_attention"])")
                .find("full_attention"),
            std::string::npos);
  EXPECT_NE(
      error_of("llama", R"("hidden_size": 64, "num_attention_heads": 2, "layer_types": ["full_attention",
      "indexed_attention", "full_attention", "full_attention", "full_attention", "full_attention"])")
          .find("indexed_attention"),
      std::string::npos);
}

// configuration_minimax_m3_vl.py: layer types from the legacy sparse_attention_config.sparse_attention_freq
// (else every layer full), its sparse_* names over the flat index_* ones; modeling_minimax_m3_vl.py
// MiniMaxM3VLIndexer: blocks of index_block_size keys, top index_topk_blocks, the index head rotated on the
// layer's first rotated dims (partial_rotary_factor; rotary_dim is not read).
TEST(ModelIndexer, MiniMaxM3BlockIndexerOnItsSparseLayers) {
  const std::string base =
      R"({"model_type": "minimax_m3_vl_text", "num_hidden_layers": 4, "partial_rotary_factor": 0.5,
      "index_topk_blocks": 8, "rotary_dim": 32,
      "sparse_attention_config": {"sparse_attention_freq": [0, 1, 1, 0],
      "sparse_topk_blocks": 16, "sparse_block_size": 64, "sparse_init_block": 0})";
  const ModelPositions m = model_positions_from_hf_json(base + "}");
  for (const LayerPlan& l : m.layers) {
    const bool sparse = l.layer == 1 || l.layer == 2;
    EXPECT_EQ(l.layer_type, sparse ? "minimax_m3_sparse" : "full_attention");
    EXPECT_EQ(l.rotary_hi, 64);
    EXPECT_EQ(l.rope->base, 5e6);
    ASSERT_EQ(l.indexer.has_value(), sparse);
    if (!sparse) continue;
    EXPECT_EQ(l.indexer->topk, 16);  // the legacy name wins
    EXPECT_EQ(l.indexer->block_size, 64);
    EXPECT_EQ(l.indexer->heads, 4);
    EXPECT_EQ(l.indexer->head_dim, 128);
    EXPECT_EQ(l.indexer->local_blocks, 1);
    EXPECT_EQ(l.indexer->rotary_hi, 64);
    EXPECT_EQ(l.indexer->rope.layout, RopeLayout::half);
  }
  EXPECT_TRUE(has_warning(m, "rotary_dim = 32 is not read by minimax_m3_vl_text: it rotates 64 dims"));
  EXPECT_TRUE(has_warning(m, "minimax_m3_sparse (MiniMax-M3's block indexer)"));
  // Without the legacy list: every layer full, no indexer.
  const ModelPositions d = model_positions_from_hf_json(R"({"model_type": "minimax_m3_vl_text"})");
  EXPECT_EQ(d.num_layers, 60);
  EXPECT_EQ(d.layers[59].rotary_hi, 128);
  EXPECT_FALSE(d.layers[59].indexer.has_value());
  expect_plan_error(R"({"model_type": "minimax_m3_vl_text", "num_hidden_layers": 2,
                        "sparse_attention_config": {"sparse_attention_freq": [1]}})",
                    "must give num_hidden_layers = 2 entries");
  expect_plan_error(R"({"model_type": "minimax_m3_vl_text", "num_hidden_layers": 2, "index_head_dim": 32,
                        "layer_types": ["full_attention", "minimax_m3_sparse"]})",
                    "index_head_dim = 32 is smaller than the 128 rotated dims");
  expect_plan_error(R"({"model_type": "minimax_m3_vl_text", "num_hidden_layers": 2,
                        "layer_types": ["full_attention", "sliding_attention"]})",
                    "which model_type 'minimax_m3_vl_text' does not build");
}

// configuration_glm5_next.py: indexed_attention on i % 4 == 3, KDA linear attention elsewhere
// ("full_attention" and the legacy "deepseek_sparse_attention" read as indexed); modeling_glm5_next.py: NoPE
// MLA (q / k heads of qk_nope_head_dim, scale its ^-0.5, no mscale), a k-pool indexer without RoPE; a flat
// config is the text model's.
TEST(ModelIndexer, Glm5NextIsNoPeMlaWithAKPoolIndexer) {
  const ModelPositions m = model_positions_from_hf_json(
      R"({"model_type": "glm5_next", "num_hidden_layers": 8, "rope_theta": 1e6, "head_dim": 64})");
  EXPECT_EQ(m.model_type, "glm5_next_text");
  for (const LayerPlan& l : m.layers) {
    const bool attends = l.layer % 4 == 3;
    EXPECT_EQ(l.layer_type, attends ? "indexed_attention" : "linear_attention");
    EXPECT_EQ(l.softmax_attention, attends);
    EXPECT_EQ(l.position, PositionMethod::none);
    EXPECT_FALSE(l.indexer.has_value());
    if (!attends) continue;
    EXPECT_EQ(l.qk_head_dim, 256);
    EXPECT_EQ(l.v_head_dim, 256);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / 16);
    EXPECT_TRUE(l.attention.causal);
  }
  EXPECT_TRUE(has_warning(m, "GLM-5-Next's k-pool indexer, without RoPE"));
  EXPECT_TRUE(has_warning(m, "head_dim = 64 is not read by glm5_next_text"));
  EXPECT_TRUE(has_warning(m, "rope_theta is not used"));
  const ModelPositions legacy =
      model_positions_from_hf_json(R"({"model_type": "glm5_next_text", "num_hidden_layers": 3,
      "layer_types": ["linear_attention", "full_attention", "deepseek_sparse_attention"],
      "indexer_types": ["full", "full", "shared"]})");
  EXPECT_EQ(legacy.layers[1].layer_type, "indexed_attention");
  EXPECT_EQ(legacy.layers[2].layer_type, "indexed_attention");
  expect_plan_error(R"({"model_type": "glm5_next_text", "num_hidden_layers": 3,
      "layer_types": ["indexed_attention", "linear_attention", "indexed_attention"],
      "indexer_types": ["full", "full", "shared"]})",
                    "make layer 2 \"shared\", but the layer before it runs no indexer of its own");
  // After another shared layer too (a shared layer passes no selection on); a linear layer 0 may be "shared".
  expect_plan_error(R"({"model_type": "glm5_next_text", "num_hidden_layers": 3,
      "layer_types": ["indexed_attention", "indexed_attention", "indexed_attention"],
      "indexer_types": ["full", "shared", "shared"]})",
                    "make layer 2 \"shared\"");
  EXPECT_EQ(model_positions_from_hf_json(R"({"model_type": "glm5_next_text", "num_hidden_layers": 8,
      "index_topk_pattern": "SSSFSSSF"})")
                .layers[3]
                .layer_type,
            "indexed_attention");
  expect_plan_error(R"({"model_type": "glm5_next_text", "num_hidden_layers": 2,
      "layer_types": ["linear_attention", "attention"]})",
                    "contains \"attention\", which glm5_next_text rejects");
  expect_plan_error(R"({"model_type": "glm5_next_text", "qk_rope_head_dim": 64})",
                    "qk_rope_head_dim = 64 is invalid");
  expect_plan_error(R"({"model_type": "glm5_next_text", "index_topk": 100, "index_kpool": 16})",
                    "index_topk must be a positive multiple of index_kpool");
  expect_plan_error(R"({"model_type": "glm5_next_text", "num_hidden_layers": 2,
      "layer_types": ["linear_attention", "sliding_attention"]})",
                    "which model_type 'glm5_next_text' does not build");
}

// configuration_glm5_next.py Glm5NextTextConfig: num_key_value_heads (64 when absent) must equal
// num_attention_heads (MLA: no grouped keys); validate_architecture raises otherwise.
TEST(ModelIndexer, Glm5NextKeyValueHeadsMustEqualTheHeads) {
  expect_plan_error(
      R"({"model_type": "glm5_next_text", "num_attention_heads": 4, "num_key_value_heads": 2})",
      "num_key_value_heads = 2 is invalid for glm5_next_text: it must equal num_attention_heads = 4 "
      "(transformers 5.23 raises)");
  expect_plan_error(
      R"({"model_type": "glm5_next_text", "num_attention_heads": 4})",
      "num_key_value_heads = 64 is invalid for glm5_next_text: it must equal num_attention_heads = 4 "
      "(64 when absent)");
  expect_plan_error(R"({"model_type": "glm5_next", "text_config": {"num_attention_heads": 4,
      "num_key_value_heads": null}})",
                    "num_key_value_heads = null is invalid for glm5_next_text");
  EXPECT_EQ(model_positions_from_hf_json(
                R"({"model_type": "glm5_next_text", "num_attention_heads": 4, "num_key_value_heads": 4})")
                .num_heads,
            4);
}

// Each layer reads indexer_types[layer_idx] (modeling_glm_moe_dsa.py GlmMoeDsaAttention.__init__,
// modeling_hy_v4.py HYV4Attention.__init__, modeling_glm5_next.py Glm5NextTextAttention.__init__): entries
// past the last layer are never read (ignored, warned); a pattern string is mapped whole
// (configuration_glm_moe_dsa.py GlmMoeDsaConfig.__post_init__: another letter raises KeyError); GLM-5-Next's
// linear layers never read theirs, so its list may end after the last indexed_attention layer.
TEST(ModelIndexer, IndexerTypesPastTheLastLayerAreIgnored) {
  for (const char* type : {"glm_moe_dsa", "hy_v4"}) {
    const ModelPositions m =
        plan(type, R"("indexer_types": ["full", "shared", "full", "full", "shared", "full", "shared", "x"])");
    const bool want[6] = {false, true, false, false, true, false};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(m.layers[i].indexer->shared, want[i]) << type << " " << i;
    EXPECT_TRUE(has_warning(m, "entries: the 2 past num_hidden_layers = 6 are ignored")) << type;
    EXPECT_NE(
        error_of(type, R"("indexer_types": ["full", "shared", "full", "full", "shared"])")
            .find(
                "must give an entry for each of num_hidden_layers = 6 (transformers 5.23 raises IndexError)"),
        std::string::npos)
        << type;
  }
  const ModelPositions pattern = plan("glm_moe_dsa", R"("index_topk_pattern": "FSFFSFSS")");
  EXPECT_TRUE(pattern.layers[4].indexer->shared);
  EXPECT_TRUE(has_warning(pattern, "the 2 past num_hidden_layers = 6 are ignored"));
  EXPECT_NE(error_of("glm_moe_dsa", R"("index_topk_pattern": "FSFFSFSX")").find("\"F\" / \"S\""),
            std::string::npos);
  // GLM-5-Next: layers 3 and 7 indexed (i % 4 == 3); the list may stop after layer 3 of 6.
  const std::string glm5 = R"({"model_type": "glm5_next_text", "num_hidden_layers": 6, "indexer_types": )";
  const ModelPositions shorter = model_positions_from_hf_json(glm5 + R"(["full", "full", "full", "full"]})");
  EXPECT_TRUE(shorter.layers[3].softmax_attention);
  expect_plan_error(glm5 + R"(["full", "full", "full"]})",
                    "must give an entry for each layer up to its last indexed_attention layer 3");
  EXPECT_TRUE(has_warning(model_positions_from_hf_json(glm5 + R"(["full", "full", "full", "full", "full",
      "full", "shared"]})"),
                          "the 1 past num_hidden_layers = 6 are ignored"));
}

// configuration_qwen4_exp.py: linear_attention, then indexed_attention every full_attention_interval (4)
// layers ("full_attention" read as indexed); the whole 256-dim head rotated unless partial_rotary_factor says
// otherwise (not qwen3_5's 0.25), interleaved M-RoPE [11, 11, 10]; the five indexer_* keys all or none
// (rotary dims <= indexer_head_dim, indexer_kv_heads 1, budget a multiple of the ratio).
TEST(ModelIndexer, Qwen4ExpQsaBlockIndexerOnEveryIndexedLayer) {
  const std::string qsa = R"("indexer_n_heads": 16, "indexer_kv_heads": 1, "indexer_head_dim": 128,
      "indexer_budget": 2048, "indexer_compress_ratio": 4)";
  const ModelPositions m =
      model_positions_from_hf_json(R"({"model_type": "qwen4_exp_text", "num_hidden_layers": 6,
      "full_attention_interval": 3, "rope_parameters": {"rope_type": "default", "rope_theta": 1e7,
      "partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10]}, )" +
                                   qsa + "}");
  for (const LayerPlan& l : m.layers) {
    const bool indexed = (l.layer + 1) % 3 == 0;
    EXPECT_EQ(l.layer_type, indexed ? "indexed_attention" : "linear_attention");
    ASSERT_EQ(l.indexer.has_value(), indexed);
    if (!indexed) continue;
    EXPECT_EQ(l.rope->base, 1e7);
    EXPECT_EQ(l.rotary_hi, 64);
    EXPECT_EQ(l.rope->multimodal, RopeMultimodal::mrope_interleaved);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / 16);
    EXPECT_EQ(l.indexer->topk, 512);
    EXPECT_EQ(l.indexer->block_size, 4);
    EXPECT_TRUE(l.indexer->pooled_keys);
    EXPECT_EQ(l.indexer->rotary_hi, 64);
  }
  auto config = [&](const std::string& extra) {
    return R"({"model_type": "qwen4_exp_text", "num_hidden_layers": 4,
        "rope_parameters": {"rope_type": "default",
        "partial_rotary_factor": 0.25}, )" +
           extra + "}";
  };
  expect_plan_error(config(R"("indexer_n_heads": 16)"), "must be given all five or none");
  expect_plan_error(
      R"({"model_type": "qwen4_exp_text", "num_hidden_layers": 4, "partial_rotary_factor": 0.25})",
      "indexer_compress_ratio are missing");
  std::string kv = qsa;
  kv.replace(kv.find(R"("indexer_kv_heads": 1)"), 21, R"("indexer_kv_heads": 2)");
  expect_plan_error(config(kv), "indexer_kv_heads = 2 is invalid");
  std::string budget = qsa;
  budget.replace(budget.find("2048"), 4, "2047");
  expect_plan_error(config(budget), "indexer_budget = 2047 is not a multiple");
  expect_plan_error(
      config(
          R"("layer_types": ["linear_attention", "attention", "linear_attention", "indexed_attention"], )" +
          qsa),
      "contains \"attention\", which qwen4_exp_text rejects");
}

// configuration_hy_v4.py / modeling_hy_v4.py: DeepSeek-V3.2's MLA (nope 192, rope 64, v 256) in halves on the
// last 64 of 256 dims, a sink per head, every layer indexed; the indexer rotates the LAST 64 of its 128 dims;
// indexer_types, else full on layer 0 and every (i - 1) % 4 == 0.
TEST(ModelIndexer, HyV4HalvesSinksAndAFlippedIndexerRope) {
  const ModelPositions m = plan("hy_v4", R"("rope_interleave": true)");
  for (const LayerPlan& l : m.layers) {
    EXPECT_EQ(l.layer_type, "indexed_attention");
    EXPECT_EQ(l.rotary_lo, 192);
    EXPECT_EQ(l.rotary_hi, 256);
    EXPECT_EQ(l.v_head_dim, 256);
    EXPECT_EQ(l.rope->layout, RopeLayout::half);
    EXPECT_TRUE(l.attention.sinks);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / 16);
    ASSERT_TRUE(l.indexer.has_value());
    EXPECT_EQ(l.indexer->heads, 16);
    EXPECT_EQ(l.indexer->rotary_lo, 64);
    EXPECT_EQ(l.indexer->rotary_hi, 128);
    EXPECT_EQ(l.indexer->rope.layout, RopeLayout::half);
    EXPECT_EQ(l.indexer->shared, !(l.layer == 0 || (l.layer - 1) % 4 == 0)) << l.layer;
  }
  EXPECT_TRUE(has_warning(m, "rope_interleave = true is ignored: transformers 5's hy_v4 rotates halves"));
  const ModelPositions given =
      plan("hy_v4", R"("indexer_types": ["full", "shared", "shared", "full", "full", "shared"])");
  EXPECT_TRUE(given.layers[2].indexer->shared);
  EXPECT_FALSE(given.layers[4].indexer->shared);
  EXPECT_NE(error_of("hy_v4", R"("layer_types": ["sparse_attention", "indexed_attention", "indexed_attention",
      "indexed_attention", "indexed_attention", "indexed_attention"])")
                .find("sparse_attention"),
            std::string::npos);
}

// modeling_hy_v4.py HYV4RotaryEmbedding.compute_default_rope_parameters: the default init rotates the whole
// 64-dim rope head whatever partial_rotary_factor says; every other rope type's init reads it
// (modeling_rope_utils.py _compute_linear_scaling_rope_parameters, _compute_dynamic_ntk_parameters,
// _compute_yarn_parameters, _compute_longrope_parameters, _compute_llama3_parameters): cos / sin narrower
// than the head apply_rotary_pos_emb multiplies (modeling_hy_v4.py): transformers 5.23 fails at the first
// forward.
TEST(ModelIndexer, HyV4ScaledRopeRotatesTheWholeRopeHead) {
  EXPECT_NE(
      error_of("hy_v4", R"("rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4,
      "original_max_position_embeddings": 4096, "partial_rotary_factor": 0.5})")
          .find("partial_rotary_factor = 0.5 with rope type 'yarn' is not supported for hy_v4: its rotary "
                "module then builds cos / sin of 32 dims, which its apply_rotary_pos_emb cannot apply to "
                "the 64-dim rotated head"),
      std::string::npos);
  const ModelPositions plain =
      plan("hy_v4", R"("rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5})");
  EXPECT_EQ(plain.layers[0].rotary_lo, 192);
  EXPECT_EQ(plain.layers[0].rotary_hi, 256);
}

// Dots 3 Note (configuration_dots3_note.py, modeling_dots3_note.py of transformers 5.23): its published
// checkpoints' flat "dots3_note" form (Dots3NoteConfig.__post_init__ builds text_config from the top-level
// keys), with use_dsa, the legacy full_attention name and the swa_* keys of its sliding layers.
const char* const kDots3Flat = R"({"model_type": "dots3_note", "num_hidden_layers": 6, "hidden_size": 5120,
    "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1024, "kv_lora_rank": 512,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "head_dim": 256,
    "use_dsa": true, "use_sliding_window": true, "sliding_window_size": 512,
    "layer_types": ["full_attention", "full_attention", "sliding_attention", "sliding_attention",
                    "sliding_attention", "full_attention"],
    "rope_theta": 80000000.0, "swa_rope_theta": 50000.0, "swa_num_attention_heads": 64,
    "swa_num_key_value_heads": 64, "swa_q_lora_rank": 1024, "swa_kv_lora_rank": 1024, "swa_head_dim": 256,
    "swa_qk_nope_head_dim": 192, "swa_v_head_dim": 128, "index_topk": 2048, "index_n_heads": 64,
    "index_head_dim": 128, "max_position_embeddings": 524288, "vision_config": {"hidden_size": 1536}})";

std::string dots3(const std::string& extra) { return test::model_json("dots3_note_text", six_layers(extra)); }

TEST(ModelIndexer, Dots3NoteReleasedFormIsMlaPerLayerTypeWithAPairedIndexer) {
  const ModelPositions m = model_positions_from_hf_json(kDots3Flat);
  EXPECT_EQ(m.model_type, "dots3_note_text");
  ASSERT_EQ(m.layers.size(), 6u);
  for (const LayerPlan& l : m.layers) {
    const bool sliding = l.layer >= 2 && l.layer <= 4;
    // use_dsa renames full_attention to indexed_attention (Dots3NoteTextConfig.__post_init__)
    EXPECT_EQ(l.layer_type, sliding ? "sliding_attention" : "indexed_attention") << l.layer;
    EXPECT_EQ(l.position, PositionMethod::rope);
    // each layer's MLA from its layer config (modeling_dots3_note.py Dots3NoteTextAttention.__init__, which
    // also sets the scaling, window and indexer checked below): swa_* on the sliding layers
    EXPECT_EQ(l.rotary_lo, sliding ? 192 : 128) << l.layer;
    EXPECT_EQ(l.rotary_hi, sliding ? 256 : 192) << l.layer;
    EXPECT_EQ(l.qk_head_dim, sliding ? 256 : 192);
    EXPECT_EQ(l.v_head_dim, 128);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / std::sqrt(sliding ? 256.0 : 192.0));  // self.scaling
    EXPECT_EQ(l.attention.window, sliding ? 512 : 0);  // self.sliding_window = sliding_window_size
    EXPECT_FALSE(l.attention.sinks);
    // The type's rope dict (Dots3NoteTextConfig.convert_rope_params_to_dict): int(head_dim *
    // qk_rope_head_dim / head_dim) dims, bases swa_rope_theta and rope_theta.
    EXPECT_EQ(l.rope->head_dim, 64);
    EXPECT_EQ(l.rope->effective_rotary_dim(), 64);
    EXPECT_EQ(l.rope->layout, RopeLayout::interleaved);  // apply_rotary_pos_emb_interleave
    EXPECT_EQ(l.rope->base, sliding ? 5e4 : 8e7);
    EXPECT_EQ(l.rope->scaling.type, RopeScalingType::none);
    ASSERT_EQ(l.indexer.has_value(), !sliding) << l.layer;  // self.indexer
    if (sliding) continue;
    EXPECT_EQ(l.indexer->topk, 2048);
    EXPECT_EQ(l.indexer->heads, 64);
    EXPECT_EQ(l.indexer->head_dim, 128);
    EXPECT_FALSE(l.indexer->shared);
    EXPECT_EQ(l.indexer->rotary_lo, 0);  // rope-first split, pairs (Dots3NoteTextIndexer.forward)
    EXPECT_EQ(l.indexer->rotary_hi, 64);
    EXPECT_EQ(l.indexer->rope.layout, RopeLayout::interleaved);
    EXPECT_EQ(l.indexer->rope.base, 8e7);
  }
  ASSERT_EQ(m.warnings.size(), 1u) << m.warnings[1];
  EXPECT_TRUE(has_warning(m, "index_topk = 2048"));
  // The class defaults (configuration_dots3_note.py Dots3NoteTextConfig's fields and the swa_* defaults of
  // its __post_init__) are the released values, and the nested wrapper form is read from its text_config.
  std::string text = kDots3Flat;
  text.replace(text.find("\"dots3_note\""), 12, "\"dots3_note_text\"");
  const std::string nested = R"({"model_type": "dots3_note", "text_config": )" + text + "}";
  const ModelPositions defaults = model_positions_from_hf_json(dots3(""));
  for (const ModelPositions& other : {model_positions_from_hf_json(nested), defaults})
    for (size_t i = 0; i < 6; ++i) {
      EXPECT_EQ(other.layers[i].layer_type, m.layers[i].layer_type);
      EXPECT_EQ(other.layers[i].rotary_lo, m.layers[i].rotary_lo);
      EXPECT_EQ(other.layers[i].rope->base, m.layers[i].rope->base);
      EXPECT_EQ(other.layers[i].attention.window, m.layers[i].attention.window);
      EXPECT_EQ(other.layers[i].indexer.has_value(), m.layers[i].indexer.has_value());
    }
  EXPECT_EQ(model_positions_from_hf_json(test::model_json("dots3_note_text")).layers.size(), 46u);
}

TEST(ModelIndexer, Dots3NoteUseDsaSavedPerLayerConfigAndUnreadKeys) {
  // use_dsa false: full_attention layers without an indexer (Dots3NoteTextConfig.__post_init__).
  const ModelPositions full = plan("dots3_note_text", R"("use_dsa": false)");
  EXPECT_EQ(full.layers[0].layer_type, "full_attention");
  EXPECT_FALSE(full.layers[0].indexer.has_value());
  EXPECT_EQ(full.layers[0].rotary_lo, 128);
  EXPECT_FALSE(has_warning(full, "index_topk"));
  // use_sliding_window false: every layer full (Dots3NoteTextConfig.__post_init__).
  for (const LayerPlan& l : plan("dots3_note_text", R"("use_sliding_window": false)").layers)
    EXPECT_EQ(l.layer_type, "indexed_attention");
  // The saved form (to_dict): per_layer_config with the overrides that differ from the global values, rope
  // dicts with partial_rotary_factor; a given per_layer_config leaves swa_* unread
  // (Dots3NoteTextConfig.__post_init__).
  const std::string sliding = R"({"num_attention_heads": 64, "num_key_value_heads": 64,
      "qk_nope_head_dim": 96, "v_head_dim": 64, "head_dim": 128, "qk_rope_head_dim": 32})";
  const std::string layers = R"({"2": )" + sliding + R"(, "3": )" + sliding + R"(, "04": )" + sliding + "}";
  const ModelPositions saved = plan("dots3_note_text", R"("layer_types": ["indexed_attention",
      "indexed_attention", "sliding_attention", "sliding_attention", "sliding_attention",
      "indexed_attention"], "per_layer_config": )" + layers +
                                                           R"(,
      "swa_head_dim": 512, "rope_parameters": {
      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
      "indexed_attention": {"rope_type": "default", "rope_theta": 8e7, "partial_rotary_factor": 0.25}})");
  EXPECT_EQ(saved.layers[3].rotary_lo, 96);
  EXPECT_EQ(saved.layers[3].rotary_hi, 128);
  EXPECT_EQ(saved.layers[3].v_head_dim, 64);
  EXPECT_EQ(saved.layers[3].rope->base, 1e4);
  EXPECT_DOUBLE_EQ(saved.layers[3].attention.softmax_scale, 1.0 / std::sqrt(128.0));
  EXPECT_EQ(saved.layers[5].rotary_lo, 128);
  EXPECT_TRUE(
      has_warning(saved, "swa_head_dim = 512 is not read by dots3_note_text: per_layer_config is given"));
  EXPECT_TRUE(
      has_warning(saved, "rope_parameters.sliding_attention.partial_rotary_factor = 0.5 is not read"));
  EXPECT_FALSE(has_warning(saved, "indexed_attention.partial_rotary_factor"));  // (0.25: what it sets)
  const ModelPositions odd =
      plan("dots3_note_text", R"("rope_interleave": false, "partial_rotary_factor": 0.5,
      "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6, "mscale_all_dim": 1.0,
      "original_max_position_embeddings": 4096}, "swa_rope_theta": 1e4)");
  EXPECT_TRUE(has_warning(odd, "rope_interleave = false is ignored"));
  EXPECT_TRUE(has_warning(odd, "partial_rotary_factor = 0.5 is not read by dots3_note_text"));
  EXPECT_TRUE(has_warning(odd, "swa_rope_theta = 10000.0 is not read"));
  // A flat rope dict goes to every layer type (Dots3NoteTextConfig.convert_rope_params_to_dict); no mscale in
  // the scale (Dots3NoteTextAttention.__init__).
  for (const LayerPlan& l : odd.layers) {
    EXPECT_EQ(l.rope->scaling.type, RopeScalingType::yarn);
    EXPECT_EQ(l.rope->base, 1e6);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / std::sqrt(static_cast<double>(l.qk_head_dim)));
  }
}

TEST(ModelIndexer, Dots3NoteConfigsTransformersRejectsOrPosencCannotExpressAreRefused) {
  const std::string types = R"("layer_types": ["attention", "attention", "sliding_attention",
      "sliding_attention", "sliding_attention", "attention"])";
  expect_plan_error(dots3(types), "layer_types contains \"attention\", which dots3_note_text cannot run");
  expect_plan_error(dots3(R"("layer_types": ["chunked_attention", "indexed_attention", "indexed_attention",
      "indexed_attention", "indexed_attention", "indexed_attention"])"),
                    "masks for full_attention, sliding_attention and indexed_attention only");
  // Dots3NoteTextConfig.validate_architecture
  expect_plan_error(dots3(R"("num_attention_heads": 64)"),
                    "num_key_value_heads = 128 (the indexed_attention "
                    "layers) is invalid for dots3_note_text");
  expect_plan_error(dots3(R"("swa_qk_rope_head_dim": 32)"),
                    "the sliding_attention layers' head_dim = 256 is invalid for dots3_note_text: it must "
                    "equal qk_nope_head_dim + qk_rope_head_dim = 224");
  expect_plan_error(dots3(R"("q_lora_rank": null)"), "q_lora_rank is null for the indexed_attention layers");
  expect_plan_error(dots3(R"("qk_rope_head_dim": 160, "qk_nope_head_dim": 32)"),
                    "qk_rope_head_dim = 160 exceeds index_head_dim = 128");
  expect_plan_error(dots3(R"("n_group": 3)"), "n_group = 3, topk_group = 1 and n_routed_experts = 256");
  // int(98 * (64 / 98)) = 63: frequencies base^(-2i / 63) for 64 dims
  expect_plan_error(dots3(R"("head_dim": 98)"), "builds int(head_dim * (qk_rope_head_dim / head_dim)) = 63");
  expect_plan_error(dots3(R"("rope_parameters": {"rope_type": "proportional"})"),
                    "rope_type = \"proportional\" is not supported for dots3_note_text");
  expect_plan_error(dots3(R"("rope_parameters": {"rope_type": "default"},
      "rope_scaling": {"rope_type": "linear", "factor": 2.0})"),
                    "beside rope_parameters is not supported");
  expect_plan_error(dots3(R"("rope_parameters": {"indexed_attention": {"rope_type": "default"}})"),
                    "rope_parameters.sliding_attention is missing");
  expect_plan_error(dots3(R"("sliding_window": null, "sliding_window_size": null)"),
                    "sliding_window = null is invalid for dots3_note_text");
  // per_layer_config: one layer config per type (integrations/heterogeneity: "not homogeneous"), layer keys,
  // per-layer values posenc does not vary
  expect_plan_error(dots3(R"("per_layer_config": {"2": {"qk_nope_head_dim": 64, "head_dim": 128},
      "3": {}, "4": {}})"),
                    "per_layer_config gives the sliding_attention layers different overrides");
  expect_plan_error(dots3(R"("per_layer_config": {"6": {}})"), "keys must be layer indices in [0, 6)");
  expect_plan_error(dots3(R"("per_layer_config": {"0": {"index_topk": 16}, "1": {"index_topk": 16},
      "5": {"index_topk": 16}}, "use_sliding_window": false)"),
                    "per_layer_config.0.index_topk = 16 is not modeled by posenc");
  expect_plan_error(dots3(R"("per_layer_config": {"0": {"rope_parameters": {}}})"),
                    "per_layer_config.0.rope_parameters: a per-layer override of this attribute");
}

}  // namespace
}  // namespace posenc
