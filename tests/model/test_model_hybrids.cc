// tests/model/test_model_hybrids.cc: model plans of the hybrid families (softmax attention on some
// layers; Mamba, linear attention, recurrences or convolutions on the others), of the
// attention-free state-space models, and of other per-layer setups (Granite SWA's bases, Cohere2-MoE's
// dense prefix, MiMo-V2-Flash's per-type RoPE; Hunyuan's NTK alpha), from small
// fixtures of each config form and the real Nemotron-H configs (tests/data/hf_configs, sources in
// SOURCES.md). Expected values are derived from transformers 5.23.0's configuration_<type>.py /
// modeling_<type>.py, cited per case; python/tests/model/test_model_families.py checks the same families
// against the running modules.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "model_plan.h"
#include "posenc/error.h"
#include "posenc/model.h"
#include "posenc/rope.h"

namespace posenc {
namespace {

using test::expect_plan_error;

const std::string kDir = std::string(POSENC_TEST_DATA_DIR) + "/hf_configs/";

std::string cfg(const std::string& type, int64_t layers, const std::string& extra) {
  return R"({"model_type": ")" + type + R"(", "hidden_size": 256, "num_attention_heads": 4,
             "num_hidden_layers": )" +
         std::to_string(layers) + (extra.empty() ? "" : ", " + extra) + "}";
}

ModelPositions plan(const std::string& type, int64_t layers, const std::string& extra = "") {
  return model_positions_from_hf_json(cfg(type, layers, extra));
}

using test::has_warning;

// The layers that run softmax attention.
std::vector<int64_t> attending(const ModelPositions& m) {
  std::vector<int64_t> out;
  for (const LayerPlan& l : m.layers) {
    if (l.softmax_attention) out.push_back(l.layer);
    if (!l.softmax_attention) {
      EXPECT_EQ(l.position, PositionMethod::none) << l.layer;
    }
  }
  return out;
}

using Layers = std::vector<int64_t>;

TEST(ModelHybrids, StateSpaceModelsHaveNoAttention) {
  for (const char* type : {"mamba", "mamba2", "falcon_mamba"}) {
    const ModelPositions m = model_positions_from_hf_json(std::string(R"({"model_type": ")") + type +
                                                          R"(", "num_hidden_layers": 3})");
    EXPECT_EQ(m.num_layers, 3);
    EXPECT_EQ(m.num_heads, 0) << type;  // (Mamba-2's num_heads are SSM heads)
    EXPECT_TRUE(attending(m).empty()) << type;
    EXPECT_EQ(m.layers[1].layer_type, "linear_attention");
  }
  // RWKV's time mixing and xLSTM's blocks are recurrences too; xLSTM builds num_blocks blocks.
  EXPECT_TRUE(attending(model_positions_from_hf_json(R"({"model_type": "rwkv", "num_hidden_layers": 2,
                                                         "context_length": 4096})"))
                  .empty());
  const ModelPositions x = model_positions_from_hf_json(R"({"model_type": "xlstm", "num_blocks": 4})");
  EXPECT_EQ(x.num_layers, 4);
  EXPECT_TRUE(attending(x).empty());
  EXPECT_TRUE(has_warning(
      model_positions_from_hf_json(R"({"model_type": "xlstm", "num_blocks": 4, "num_hidden_layers": 32})"),
      "num_hidden_layers = 32 is not the 4 blocks xlstm builds"));
  // Class defaults: MambaConfig 32 layers, Mamba2Config 64.
  EXPECT_EQ(model_positions_from_hf_json(R"({"model_type": "mamba"})").num_layers, 32);
  EXPECT_EQ(model_positions_from_hf_json(R"({"model_type": "mamba2", "num_heads": 128})").num_layers, 64);
}

// configuration_jamba.py JambaConfig (layers_block_type, layer_types, validate_architecture): attention iff
// i % attn_layer_period == attn_layer_offset; no RoPE.
TEST(ModelHybrids, Jamba) {
  const ModelPositions d = plan("jamba", 32);
  EXPECT_EQ(attending(d), (Layers{4, 12, 20, 28}));
  EXPECT_EQ(d.layers[4].layer_type, "full_attention");
  EXPECT_EQ(d.layers[4].position, PositionMethod::none);
  EXPECT_DOUBLE_EQ(d.layers[4].attention.softmax_scale, 1.0 / 8.0);  // head_dim 64
  const ModelPositions p = plan("jamba", 6, R"("attn_layer_period": 3, "attn_layer_offset": 1,
                                              "rope_theta": 10000)");
  EXPECT_EQ(attending(p), (Layers{1, 4}));
  EXPECT_TRUE(has_warning(p, "rope_theta is not used: model_type 'jamba' applies no RoPE"));
  expect_plan_error(cfg("jamba", 8, R"("attn_layer_period": 4, "attn_layer_offset": 4)"),
                    "attn_layer_offset = 4 is invalid: must be in [0, attn_layer_period = 4)");
  // layers_block_type is a read-only property: transformers 5 cannot load a config that sets it.
  expect_plan_error(cfg("jamba", 2, R"("layers_block_type": ["mamba", "attention"])"),
                    "layers_block_type is given, but jamba derives its layer list");
}

// configuration_bamba.py BambaConfig.__post_init__, layers_block_type: attention at attn_layer_indices;
// partial_rotary_factor forced 0.5.
TEST(ModelHybrids, Bamba) {
  EXPECT_TRUE(attending(plan("bamba", 4)).empty());  // the class default: Mamba only
  const ModelPositions m =
      plan("bamba", 4, R"("attn_layer_indices": [1, 3, 9], "partial_rotary_factor": 1.0)");
  EXPECT_EQ(attending(m), (Layers{1, 3}));  // 9 is out of range: ignored, as transformers does
  EXPECT_EQ(m.layers[1].position, PositionMethod::rope);
  EXPECT_EQ(m.layers[1].rotary_hi, 32);  // 0.5 of head_dim 64
  EXPECT_TRUE(has_warning(m, "partial_rotary_factor = 1.0 is ignored by bamba"));
  // A factor inside rope_parameters wins over the forced 0.5.
  const ModelPositions r = plan("bamba", 2, R"("attn_layer_indices": [0],
                                             "rope_parameters": {"rope_type": "default", "rope_theta": 1e4,
                                                                 "partial_rotary_factor": 1.0})");
  EXPECT_EQ(r.layers[0].rotary_hi, 64);
}

// configuration_granitemoehybrid.py, modeling_granitemoehybrid.py GraniteMoeHybridAttention.__init__,
// GraniteMoeHybridModel.__init__: RoPE iff position_embedding_type == "rope"; scale attention_multiplier;
// legacy mamba / attention names.
TEST(ModelHybrids, GraniteMoeHybrid) {
  const std::string types = R"("layer_types": ["mamba", "attention", "mamba", "attention"])";
  const ModelPositions nope = plan("granitemoehybrid", 4, types + R"(, "position_embedding_type": "nope",
                                   "rope_parameters": {"rope_type": "default", "rope_theta": 1e4})");
  EXPECT_EQ(attending(nope), (Layers{1, 3}));
  EXPECT_EQ(nope.layers[1].layer_type, "full_attention");
  EXPECT_EQ(nope.layers[0].layer_type, "linear_attention");
  EXPECT_EQ(nope.layers[1].position, PositionMethod::none);
  EXPECT_TRUE(
      has_warning(nope, "rope_parameters is not used: model_type 'granitemoehybrid' applies no RoPE"));
  EXPECT_DOUBLE_EQ(nope.layers[1].attention.softmax_scale, 1.0);
  const ModelPositions rope = plan("granitemoehybrid", 4, types + R"(, "position_embedding_type": "rope",
                                   "attention_multiplier": 0.015625, "rope_theta": 5e5)");
  EXPECT_EQ(rope.layers[3].position, PositionMethod::rope);
  EXPECT_EQ(rope.layers[3].rope->base, 5e5);
  EXPECT_DOUBLE_EQ(rope.layers[3].attention.softmax_scale, 0.015625);
  EXPECT_TRUE(attending(plan("granitemoehybrid", 3)).empty());  // the class default: Mamba only
  // The model builds masks for full_attention and linear_attention only (KeyError otherwise).
  expect_plan_error(cfg("granitemoehybrid", 2, R"("layer_types": ["mamba", "sliding_attention"])"),
                    "\"sliding_attention\", which model_type 'granitemoehybrid' does not build");
}

// configuration_nemotron_h.py NemotronHConfig.__post_init__ and _pattern_to_list: the pattern's characters;
// the layer count is the pattern's length; no RoPE; head_dim 128 whatever hidden / heads.
TEST(ModelHybrids, NemotronH) {
  const ModelPositions m = model_positions_from_hf_json(
      R"({"model_type": "nemotron_h", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 9,
          "hybrid_override_pattern": "M-M*-ME*-", "attention_head_dim": 96})");
  EXPECT_EQ(m.num_layers, 9);
  EXPECT_TRUE(has_warning(m, "num_hidden_layers = 9 is replaced by the 9") == false);
  EXPECT_EQ(attending(m), (Layers{3, 7}));
  EXPECT_EQ(m.layers[1].layer_type, "mlp");
  EXPECT_EQ(m.layers[6].layer_type, "moe");
  EXPECT_EQ(m.layers[3].qk_head_dim, 128);
  EXPECT_TRUE(has_warning(m, "attention_head_dim = 96 is not read by transformers 5's nemotron_h"));
  const ModelPositions l = model_positions_from_hf_json(
      R"({"model_type": "nemotron_h", "num_hidden_layers": 2,
          "layers_block_type": ["linear_attention", "full_attention", "moe"]})");
  EXPECT_EQ(l.num_layers, 3);
  EXPECT_TRUE(has_warning(l, "num_hidden_layers = 2 is replaced by the 3 layers"));
  EXPECT_EQ(model_positions_from_hf_json(R"({"model_type": "nemotron_h"})").num_layers, 4);
  expect_plan_error(R"({"model_type": "nemotron_h", "hybrid_override_pattern": "M*X"})",
                    "hybrid_override_pattern contains 'X'");
}

// The two real Nemotron-H configs: every '*' of the pattern is an attention layer without RoPE.
TEST(ModelHybrids, NemotronHRealConfigs) {
  const ModelPositions nano =
      model_positions_from_hf_file(kDir + "nemotron-h__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json");
  EXPECT_EQ(nano.num_layers, 52);
  EXPECT_EQ(attending(nano).size(), 6u);
  const ModelPositions big = model_positions_from_hf_file(kDir + "nemotron-h__Nemotron-H-56B-Base-8K.json");
  EXPECT_EQ(big.num_layers, 118);  // time_step_limit [0.0, Infinity]: Python's json.dumps, read
  EXPECT_EQ(attending(big).size(), 10u);
  for (const ModelPositions* m : {&nano, &big})
    for (int64_t i : attending(*m)) {
      EXPECT_EQ(m->layers[i].position, PositionMethod::none);
      EXPECT_EQ(m->layers[i].qk_head_dim, 128);
      EXPECT_DOUBLE_EQ(m->layers[i].attention.softmax_scale, 1.0 / std::sqrt(128.0));
      EXPECT_TRUE(m->layers[i].attention.causal);
    }
}

// configuration_falcon_h1.py FalconH1Config.layers_block_type: Mamba and attention side by side in every
// layer, full RoPE.
TEST(ModelHybrids, FalconH1) {
  const ModelPositions m = plan("falcon_h1", 3, R"("rope_theta": 1e11, "partial_rotary_factor": 0.5)");
  EXPECT_EQ(attending(m), (Layers{0, 1, 2}));
  EXPECT_EQ(m.layers[0].layer_type, "hybrid");
  EXPECT_EQ(m.layers[0].rope->base, 1e11);
  EXPECT_EQ(m.layers[0].rotary_hi, 64);  // the default init ignores partial_rotary_factor
  // modeling_falcon_h1.py FalconH1Attention.forward: keys times key_multiplier before RoPE, so the logits'
  // scale carries it.
  const ModelPositions k =
      plan("falcon_h1", 1, R"("key_multiplier": 0.390625, "attention_in_multiplier": 1.0)");
  EXPECT_DOUBLE_EQ(k.layers[0].attention.softmax_scale, 0.390625 / std::sqrt(64.0));
  EXPECT_TRUE(k.warnings.empty()) << ::testing::PrintToString(k.warnings);
  expect_plan_error(cfg("falcon_h1", 1, R"("key_multiplier": 0)"), "key_multiplier = 0 is invalid");
}

// configuration_zamba.py ZambaConfig.__post_init__, modeling_zamba.py ZambaAttention.__init__: shared
// attention at layer 2 and every attn_layer_period-th layer after it; no RoPE; head_dim 2 * hidden / heads;
// scale (head_dim / 2)^-0.5.
TEST(ModelHybrids, Zamba) {
  const ModelPositions m = plan("zamba", 14);
  EXPECT_EQ(attending(m), (Layers{2, 7, 13}));
  EXPECT_EQ(m.layers[7].layer_type, "hybrid");
  EXPECT_EQ(m.layers[7].qk_head_dim, 128);
  EXPECT_DOUBLE_EQ(m.layers[7].attention.softmax_scale, 1.0 / 8.0);
  const ModelPositions given = plan("zamba", 3, R"("layers_block_type": ["mamba", "hybrid", "mamba"])");
  EXPECT_EQ(attending(given), (Layers{1}));
  // A "full_attention" entry builds a Mamba-only layer in transformers 5 (only "hybrid" attends).
  expect_plan_error(cfg("zamba", 2, R"("layers_block_type": ["mamba", "full_attention"])"),
                    "\"full_attention\", which model_type 'zamba' does not build");
}

// configuration_zamba2.py Zamba2Config, modeling_zamba2.py Zamba2RotaryEmbedding, Zamba2Attention.__init__,
// Zamba2Model.__init__: RoPE iff use_mem_rope, over the whole attention_head_dim; a 54-layer default list.
TEST(ModelHybrids, Zamba2) {
  const std::string types = R"("layers_block_type": ["mamba", "hybrid", "mamba", "hybrid"])";
  const ModelPositions off = plan("zamba2", 4, types);
  EXPECT_EQ(attending(off), (Layers{1, 3}));
  EXPECT_EQ(off.layers[1].position, PositionMethod::none);
  const ModelPositions on = plan("zamba2", 4, types + R"(, "use_mem_rope": true, "attention_head_dim": 100)");
  EXPECT_EQ(on.layers[3].position, PositionMethod::rope);
  EXPECT_EQ(on.layers[3].rotary_hi, 100);
  EXPECT_DOUBLE_EQ(on.layers[3].attention.softmax_scale, 1.0 / std::sqrt(50.0));
  EXPECT_EQ(attending(plan("zamba2", 54)), (Layers{6, 12, 18, 24, 30, 36, 42, 47, 51}));
  expect_plan_error(cfg("zamba2", 8, ""), "zamba2's default pattern has 54 layers");
  expect_plan_error(cfg("zamba2", 4, types + R"(, "use_mem_rope": true, "use_long_context": true)"),
                    "use_long_context = true with use_mem_rope is not supported");
}

// configuration_recurrent_gemma.py RecurrentGemmaConfig: block_types repeated; attention blocks are local
// (attention_window_size, 2048 by default); RoPE on half of each head; no maximum length.
TEST(ModelHybrids, RecurrentGemma) {
  const ModelPositions m = plan("recurrent_gemma", 7);
  EXPECT_EQ(attending(m), (Layers{2, 5}));
  EXPECT_EQ(m.max_position_embeddings, 0);
  const LayerPlan& a = m.layers[2];
  EXPECT_EQ(a.layer_type, "sliding_attention");
  EXPECT_EQ(a.attention.window, 2048);
  EXPECT_EQ(a.rotary_hi, 32);  // partial_rotary_factor 0.5 of head_dim 64
  const ModelPositions b = plan("recurrent_gemma", 4, R"("block_types": ["attention", "recurrent"],
                                                       "attention_window_size": 16)");
  EXPECT_EQ(attending(b), (Layers{0, 2}));
  EXPECT_EQ(b.layers[0].attention.window, 16);
  expect_plan_error(cfg("recurrent_gemma", 3, R"("rope_parameters": {"rope_type": "linear", "factor": 2.0})"),
                    "rope_type = \"linear\" is not supported by recurrent_gemma");
  expect_plan_error(cfg("recurrent_gemma", 1, R"("layer_types": ["sliding_attention"])"),
                    "layer_types is given, but recurrent_gemma derives its layer list");
}

// configuration_minimax.py MiniMaxConfig.__post_init__, modeling_minimax.py MiniMaxModel.forward: full
// attention on even layers, and a set sliding_window masks all of them.
TEST(ModelHybrids, MiniMax) {
  const ModelPositions m = plan("minimax", 4);
  EXPECT_EQ(attending(m), (Layers{0, 2}));
  EXPECT_EQ(m.layers[0].rope->base, 1e6);
  EXPECT_EQ(m.layers[0].attention.window, 0);
  EXPECT_EQ(plan("minimax", 4, R"("sliding_window": 64)").layers[2].attention.window, 64);
}

// configuration_olmo_hybrid.py OlmoHybridConfig.__post_init__, modeling_olmo_hybrid.py
// OlmoHybridModel.__init__: full attention iff i % 4 == 3 (else the last layer); no rotary module when
// rope_theta is None, as released.
TEST(ModelHybrids, OlmoHybrid) {
  const ModelPositions m = plan("olmo_hybrid", 8);
  EXPECT_EQ(attending(m), (Layers{3, 7}));
  EXPECT_EQ(m.layers[3].position, PositionMethod::rope);
  EXPECT_EQ(attending(plan("olmo_hybrid", 2)), (Layers{1}));
  for (const char* nope : {R"("rope_theta": null)", R"("rope_parameters": {"rope_type": "default",
                                                                            "rope_theta": null})"}) {
    const ModelPositions n = plan("olmo_hybrid", 4, nope);
    EXPECT_EQ(n.layers[3].position, PositionMethod::none) << nope;
    EXPECT_TRUE(n.layers[3].softmax_attention);
  }
  // The dict's own rope_theta wins over a null top-level one.
  EXPECT_EQ(plan("olmo_hybrid", 4, R"("rope_theta": null, "rope_parameters": {"rope_theta": 5e5})")
                .layers[3]
                .rope->base,
            5e5);
}

// configuration_bailing_hybrid.py BailingHybridConfig, modeling_bailing_hybrid.py yarn_apply_mscale,
// BailingHybridAttention: DeepSeek-V3's MLA (interleaved RoPE on the last qk_rope_head_dim dims, yarn
// mscale^2 in the scale) on every layer_group_size-th layer; base 6e6; head_dim is rewritten to
// qk_rope_head_dim; model_max_length.
TEST(ModelHybrids, BailingHybrid) {
  const ModelPositions m = plan("bailing_hybrid", 12, R"("head_dim": 128, "model_max_length": 131072,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
                       "mscale_all_dim": 1.0}, "rope_interleave": false)");
  EXPECT_EQ(attending(m), (Layers{5, 11}));
  EXPECT_EQ(m.max_position_embeddings, 131072);
  const LayerPlan& l = m.layers[5];
  EXPECT_EQ(l.rope->base, 6e6);
  EXPECT_EQ(l.rope->layout, RopeLayout::interleaved);  // always (no rope_interleave switch)
  EXPECT_EQ(l.rotary_lo, 128);
  EXPECT_EQ(l.rotary_hi, 192);
  EXPECT_EQ(l.v_head_dim, 128);
  const double mscale = 0.1 * std::log(4.0) + 1.0;
  EXPECT_NEAR(l.attention.softmax_scale, mscale * mscale / std::sqrt(192.0), 1e-15);
}

// configuration_mistral4.py Mistral4Config.__post_init__, modeling_mistral4.py yarn_apply_mscale,
// get_llama_4_attn_scale, Mistral4Attention.forward: MLA with the qk_rope_head_dim last dims rotated
// (interleaved unless rope_interleave is false), yarn by default with mscale^2 in the scale, and ministral3's
// query scale from llama_4_scaling_beta.
TEST(ModelHybrids, Mistral4) {
  const ModelPositions m = plan("mistral4", 2);
  const LayerPlan& l = m.layers[1];
  EXPECT_EQ(l.rotary_lo, 64);
  EXPECT_EQ(l.rotary_hi, 128);
  EXPECT_EQ(l.qk_head_dim, 128);
  EXPECT_EQ(l.rope->head_dim, 64);
  EXPECT_EQ(l.rope->layout, RopeLayout::interleaved);
  EXPECT_EQ(l.rope->scaling.type, RopeScalingType::yarn);
  EXPECT_EQ(l.attention.temperature.kind, QueryTemperature::Kind::ministral3);
  EXPECT_DOUBLE_EQ(l.attention.temperature.scale, 0.1);
  EXPECT_DOUBLE_EQ(l.attention.temperature.floor_scale, 8192.0);
  const double mscale = 0.1 * std::log(128.0) + 1.0;
  EXPECT_NEAR(l.attention.softmax_scale, mscale * mscale / std::sqrt(128.0), 1e-15);
  EXPECT_EQ(plan("mistral4", 1, R"("rope_interleave": false)").layers[0].rope->layout, RopeLayout::half);
  expect_plan_error(cfg("mistral4", 1, R"("rope_parameters": {"rope_type": "default", "rope_theta": 1e4})"),
                    "rope_type = \"default\" is not supported for mistral4");
  expect_plan_error(cfg("mistral4", 1, R"("rope_parameters": {"rope_type": "yarn", "factor": 4.0,
      "original_max_position_embeddings": 4096, "llama_4_scaling_beta": 0.1, "partial_rotary_factor": 1.0})"),
                    "partial_rotary_factor = 1 rotates 128 of 128 dims");
  expect_plan_error(cfg("mistral4", 1, R"("rope_parameters": {"rope_type": "yarn", "factor": 4.0,
      "original_max_position_embeddings": 4096})"),
                    "llama_4_scaling_beta is missing");
}

// configuration_gpt_neox_japanese.py GPTNeoXJapaneseConfig.convert_rope_params_to_dict: rotary_emb_base and
// rotary_pct (1.0 by default) win over rope_theta / partial_rotary_factor, as in gpt_neox.
TEST(ModelHybrids, GptNeoXJapanese) {
  const ModelPositions d = plan("gpt_neox_japanese", 1);
  EXPECT_EQ(d.layers[0].rotary_hi, 64);  // the whole head
  const ModelPositions m = plan("gpt_neox_japanese", 1, R"("rotary_emb_base": 2e4, "rotary_pct": 0.5,
                                                         "rope_theta": 5e5)");
  EXPECT_EQ(m.layers[0].rope->base, 2e4);
  EXPECT_EQ(m.layers[0].rotary_hi, 32);
  EXPECT_TRUE(has_warning(m, "rope_theta is ignored by gpt_neox_japanese"));
}

// DBRX: the base is attn_config.rope_theta, as its own code, transformers 4.x and vLLM read it;
// transformers 5.23 applies the top-level rope_theta (a warning says so); head_dim = d_model / n_heads.
TEST(ModelHybrids, DbrxBaseFromAttnConfig) {
  const ModelPositions m = model_positions_from_hf_json(
      R"({"model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 2, "max_seq_len": 32768,
          "head_dim": 64, "attn_config": {"kv_n_heads": 8, "clip_qkv": 8, "rope_theta": 500000}})");
  EXPECT_EQ(m.layers[1].rope->base, 5e5);
  EXPECT_EQ(m.layers[1].rotary_hi, 128);
  EXPECT_EQ(m.max_position_embeddings, 32768);
  EXPECT_TRUE(has_warning(m, "attn_config.rope_theta = 500000 is the base"));
  EXPECT_TRUE(has_warning(m, "head_dim = 64 is ignored by dbrx"));
  const ModelPositions same = model_positions_from_hf_json(
      R"({"model_type": "dbrx", "n_layers": 1, "rope_theta": 5e5, "attn_config": {"rope_theta": 5e5}})");
  EXPECT_FALSE(has_warning(same, "transformers 5.23 applies"));
}

// configuration_lfm2.py Lfm2Config.__post_init__: without layer_types, full_attn_idxs (null: every layer)
// picks the attention layers and the others are convolutions; an index past the last layer selects nothing
// (warned).
TEST(ModelHybrids, Lfm2FullAttentionIndices) {
  const ModelPositions m = plan("lfm2", 6, R"("full_attn_idxs": [2, 5, 9])");
  EXPECT_EQ(attending(m), (Layers{2, 5}));
  EXPECT_EQ(m.layers[0].layer_type, "conv");
  EXPECT_EQ(m.layers[2].rope->base, 1e6);
  EXPECT_TRUE(has_warning(m, "full_attn_idxs entry 9 is not a layer of the model"));
  EXPECT_EQ(attending(plan("lfm2", 3, R"("full_attn_idxs": null)")), (Layers{0, 1, 2}));
  EXPECT_EQ(attending(plan("lfm2", 3, R"("full_attn_idxs": [0], "layer_types": ["conv", "full_attention",
                                                                                    "conv"])")),
            (Layers{1}));  // layer_types wins
  expect_plan_error(cfg("lfm2", 3, R"("full_attn_idxs": 2)"), "full_attn_idxs = 2 is invalid");
  expect_plan_error(cfg("lfm2", 3, R"("full_attn_idxs": [1.5])"), "full_attn_idxs contains 1.5");
}

// configuration_lfm2_moe.py Lfm2MoeConfig: layer_types has no default (transformers cannot build the model).
TEST(ModelHybrids, Lfm2Moe) {
  const ModelPositions m = plan("lfm2_moe", 3, R"("layer_types": ["conv", "full_attention", "conv"])");
  EXPECT_EQ(attending(m), (Layers{1}));
  EXPECT_EQ(m.layers[1].rope->base, 1e6);
  EXPECT_EQ(m.layers[0].layer_type, "conv");
  expect_plan_error(cfg("lfm2_moe", 3, ""), "layer_types is missing: required for lfm2_moe");
}

// configuration_kimi_linear.py KimiLinearConfig: MLA heads of qk_nope + qk_rope dims without RoPE; the
// 1-based full_attn_layers / kda_layers; model_max_length is max_position_embeddings.
TEST(ModelHybrids, KimiLinear) {
  const ModelPositions d = plan("kimi_linear", 9);
  EXPECT_EQ(attending(d), (Layers{4, 8}));
  EXPECT_EQ(d.max_position_embeddings, 1048576);
  const LayerPlan& l = d.layers[4];
  EXPECT_EQ(l.position, PositionMethod::none);
  EXPECT_EQ(l.qk_head_dim, 192);
  EXPECT_EQ(l.v_head_dim, 128);
  EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1.0 / std::sqrt(192.0));
  const ModelPositions g = plan("kimi_linear", 4, R"("model_max_length": 65536, "rope_theta": 1e4,
      "linear_attn_config": {"full_attn_layers": [2, 4], "kda_layers": [1, 3]})");
  EXPECT_EQ(attending(g), (Layers{1, 3}));
  EXPECT_EQ(g.max_position_embeddings, 65536);
  EXPECT_TRUE(has_warning(g, "rope_theta is not used: model_type 'kimi_linear' applies no RoPE"));
  expect_plan_error(
      cfg("kimi_linear", 3, R"("linear_attn_config": {"full_attn_layers": [2], "kda_layers": [1]})"),
      "linear_attn_config names no type for layer 3");
}

// configuration_granite_swa.py GraniteSWAConfig, modeling_granite_swa.py GraniteSWAAttention.__init__,
// GraniteSWAModel: full attention on layers 0, 4, ...; windows of 128 keys; a sink per head; scale
// attention_multiplier; a base per layer (layer_rope_theta; 0 = no RoPE) with the rope dict's scaling kept.
TEST(ModelHybrids, GraniteSwaPerLayerBases) {
  for (const char* type : {"granite_swa", "granitemoe_swa"}) {
    const ModelPositions m = plan(type, 5, R"("layer_rope_theta": [0, 1e4, 5e5, 1e4, 0],
        "attention_multiplier": 0.0078125, "rope_parameters": {"rope_type": "linear", "factor": 2.0})");
    EXPECT_EQ(attending(m).size(), 5u);
    EXPECT_EQ(m.layers[0].layer_type, "full_attention");
    EXPECT_EQ(m.layers[0].position, PositionMethod::none);
    EXPECT_EQ(m.layers[0].attention.window, 0);
    EXPECT_EQ(m.layers[1].attention.window, 128);
    EXPECT_EQ(m.layers[2].rope->base, 5e5);
    EXPECT_EQ(m.layers[2].rope->scaling.type, RopeScalingType::linear);
    EXPECT_EQ(m.layers[3].rope->base, 1e4);
    EXPECT_EQ(m.layers[4].position, PositionMethod::none);
    EXPECT_TRUE(m.layers[1].attention.sinks);
    EXPECT_DOUBLE_EQ(m.layers[1].attention.softmax_scale, 0.0078125);
    EXPECT_EQ(plan(type, 2).layers[1].rope->base, 1e4);  // the class default: rope_theta on every layer
    expect_plan_error(cfg(type, 2, R"("layer_rope_theta": [1e4])"), "layer_rope_theta has 1 entries");
    expect_plan_error(cfg(type, 1, R"("layer_rope_theta": [-1])"), "layer_rope_theta contains -1");
  }
}

// modeling_hunyuan_v1_dense.py HunYuanDenseV1Attention.__init__, HunYuanDenseV1RotaryEmbedding: head_dim
// required; "dynamic" with an alpha is a fixed base theta * alpha^(d / (d - 2)).
TEST(ModelHybrids, HunyuanNtkAlpha) {
  const ModelPositions m = plan("hunyuan_v1_dense", 2, R"("head_dim": 128,
      "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}, "rope_theta": 10000)");
  EXPECT_DOUBLE_EQ(m.layers[1].rope->base, 1e4 * std::pow(1000.0, 128.0 / 126.0));
  EXPECT_EQ(m.layers[1].rope->scaling.type, RopeScalingType::none);
  const ModelPositions d = plan("hunyuan_v1_moe", 2, R"("head_dim": 64,
      "rope_scaling": {"type": "dynamic", "factor": 2.0})");  // no alpha: dynamic NTK
  EXPECT_EQ(d.layers[0].rope->scaling.type, RopeScalingType::dynamic);
  expect_plan_error(cfg("hunyuan_v1_dense", 2, ""), "head_dim is missing: required for hunyuan_v1_dense");
}

// configuration_cohere2_moe.py, modeling_cohere2_moe.py Cohere2MoeAttention: a dense prefix of
// first_k_dense_replace full layers with RoPE (force_rope), then S S S F with RoPE on the sliding layers
// only; interleaved; the class's rope_scaling field shadows a legacy dict.
TEST(ModelHybrids, Cohere2MoeDensePrefix) {
  const ModelPositions m = plan("cohere2_moe", 6, R"("first_k_dense_replace": 2, "rope_theta": 5e4,
      "rope_scaling": {"rope_type": "linear", "factor": 4.0})");
  const std::vector<std::string> types = {"full_attention",    "full_attention",    "sliding_attention",
                                          "sliding_attention", "sliding_attention", "full_attention"};
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(m.layers[i].layer_type, types[i]) << i;
  for (int64_t i : {0, 1, 2, 3, 4}) EXPECT_EQ(m.layers[i].position, PositionMethod::rope) << i;
  EXPECT_EQ(m.layers[5].position, PositionMethod::none);
  EXPECT_EQ(m.layers[0].attention.window, 0);
  EXPECT_EQ(m.layers[2].attention.window, 4096);
  EXPECT_EQ(m.layers[0].rope->base, 5e4);
  EXPECT_EQ(m.layers[0].rope->scaling.type, RopeScalingType::none);
  EXPECT_EQ(m.layers[0].rope->layout, RopeLayout::interleaved);
  EXPECT_EQ(m.layers[0].rotary_hi, 128);  // head_dim 128 (the class's), not hidden / heads
  EXPECT_TRUE(has_warning(m, "rope_scaling is ignored by cohere2_moe"));
  // A saved config: layer_types and mlp_layer_types; the prefix pattern 2 leaves the prefix NoPE.
  const ModelPositions saved =
      plan("cohere2_moe", 3, R"("layer_types": ["full_attention", "sliding_attention",
      "full_attention"], "mlp_layer_types": ["dense", "sparse", "sparse"],
      "prefix_dense_sliding_window_pattern": 2)");
  EXPECT_EQ(saved.layers[0].position, PositionMethod::none);
  EXPECT_EQ(saved.layers[1].position, PositionMethod::rope);
  EXPECT_EQ(
      plan("cohere2_moe", 3, R"("layer_types": ["full_attention", "sliding_attention", "full_attention"],
      "mlp_layer_types": ["dense", "sparse", "sparse"])")
          .layers[0]
          .position,
      PositionMethod::rope);
  expect_plan_error(cfg("cohere2_moe", 2, R"("sliding_window": 0)"), "sliding_window = 0 is invalid");
}

// configuration_mimo_v2_flash.py MiMoV2FlashConfig, modeling_mimo_v2_flash.py
// MiMoV2FlashRotaryEmbedding.compute_default_rope_parameters, MiMoV2FlashAttention.__init__: rope per layer
// type only (5e6 full, 1e4 sliding, 0.334 of the 192-dim head), windows of sliding_window_size + 1, sinks on
// the sliding layers; the checkpoints' SGLang keys must agree with what transformers uses.
TEST(ModelHybrids, MiMoV2Flash) {
  const ModelPositions m = plan("mimo_v2_flash", 7, R"("sliding_window_size": 127)");
  EXPECT_EQ(m.layers[0].layer_type, "full_attention");
  EXPECT_EQ(m.layers[5].layer_type, "full_attention");
  EXPECT_EQ(m.layers[1].layer_type, "sliding_attention");
  EXPECT_EQ(m.layers[0].rope->base, 5e6);
  EXPECT_EQ(m.layers[1].rope->base, 1e4);
  EXPECT_EQ(m.layers[1].rotary_hi, 64);  // int(192 * 0.334)
  EXPECT_EQ(m.layers[1].v_head_dim, 128);
  EXPECT_EQ(m.layers[1].attention.window, 128);
  EXPECT_TRUE(m.layers[1].attention.sinks);
  EXPECT_FALSE(m.layers[0].attention.sinks);
  EXPECT_DOUBLE_EQ(m.layers[0].attention.softmax_scale, 1.0 / std::sqrt(192.0));
  EXPECT_EQ(
      plan("mimo_v2_flash", 2, R"("rope_theta": 5e6, "swa_rope_theta": 1e4, "partial_rotary_factor": 0.334)")
          .layers[1]
          .attention.window,
      129);
  expect_plan_error(cfg("mimo_v2_flash", 2, R"("rope_theta": 1e6)"), "rope_theta = 1000000 differs");
  expect_plan_error(cfg("mimo_v2_flash", 2, R"("partial_rotary_factor": 0.5)"),
                    "partial_rotary_factor = 0.5 differs");
  expect_plan_error(cfg("mimo_v2_flash", 2, R"("hybrid_layer_pattern": [1, 1])"),
                    "hybrid_layer_pattern disagrees");
  expect_plan_error(
      cfg("mimo_v2_flash", 2, R"("rope_parameters": {"rope_type": "default", "rope_theta": 1e4})"),
      "rope_parameters must be a dict per layer type for mimo_v2_flash");
  expect_plan_error(cfg("mimo_v2_flash", 2, R"("add_full_attention_sink_bias": true)"), "ambiguous");
}

TEST(ModelHybrids, LongcatFlashPlansTwoMlaSublayersPerLayer) {
  // configuration_longcat_flash.py: num_hidden_layers = 2 * num_layers (a saved num_hidden_layers sets
  // num_layers = value // 2); modeling_longcat_flash.py LongcatFlashDecoderLayer.__init__: attention
  // sublayers 2i and 2i + 1, each DeepSeek-V3's MLA (nope 128 + rope 64, interleaved, written back
  // de-interleaved).
  const ModelPositions m =
      model_positions_from_hf_json(R"({"model_type": "longcat_flash", "num_layers": 3})");
  ASSERT_EQ(m.num_layers, 6);
  for (const LayerPlan& l : m.layers) {
    EXPECT_EQ(l.rotary_lo, 128);
    EXPECT_EQ(l.rotary_hi, 192);
    EXPECT_EQ(l.rope->layout, RopeLayout::interleaved);
    EXPECT_NEAR(l.attention.softmax_scale, 1 / std::sqrt(192.0), 1e-15);
  }
  EXPECT_EQ(
      model_positions_from_hf_json(R"({"model_type": "longcat_flash", "num_hidden_layers": 7})").num_layers,
      6);
  // Its rotary module sizes the frequency ladder by head_dim: another value cannot rotate 64 dims.
  try {
    model_positions_from_hf_json(R"({"model_type": "longcat_flash", "num_layers": 2, "head_dim": 32})");
    ADD_FAILURE() << "head_dim 32 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim = 32"), std::string::npos) << e.what();
  }
}

// configuration_step3p7.py Step3p7TextConfig.__post_init__: lists padded with the MTP layers' entries lose
// them; one rope dict per layer type from its first layer's rope_theta / partial_rotary_factors; rope_scaling
// merged into full_attention only. modeling_step3p7.py: rotate_half on the first int(head_dim * prf) dims
// (apply_rotary_pos_emb), scale query_pre_attn_scalar^-0.5 (Step3p7Attention.__init__).
TEST(ModelHybrids, Step3p5PerTypeRopeFromPerLayerLists) {
  const ModelPositions m = plan("step3p5", 4, R"("head_dim": 128, "num_nextn_predict_layers": 1,
      "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "full_attention",
                      "full_attention"],
      "rope_theta": [5e6, 1e4, 2e4, 5e6, 7e6], "partial_rotary_factors": [0.5, 1.0, 0.25, 0.5, 0.5],
      "rope_scaling": {"rope_type": "llama3", "factor": 2.0, "original_max_position_embeddings": 65536,
                       "low_freq_factor": 1.0, "high_freq_factor": 32.0},
      "sliding_window": 512, "query_pre_attn_scalar": 64,
      "attention_other_setting": {"num_attention_heads": 6},
      "use_rope_layers": [true, true, true, true, true],
      "yarn_only_types": ["full_attention"])");
  ASSERT_EQ(m.num_layers, 4);
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
  for (const LayerPlan& l : m.layers) {
    const bool full = l.layer_type == "full_attention";
    EXPECT_EQ(l.rope->base, full ? 5e6 : 1e4) << l.layer;  // the type's first layer wins
    EXPECT_EQ(l.rotary_lo, 0);
    EXPECT_EQ(l.rotary_hi, full ? 64 : 128) << l.layer;
    EXPECT_EQ(l.rope->layout, RopeLayout::half);
    EXPECT_EQ(l.rope->scaling.type, full ? RopeScalingType::llama3 : RopeScalingType::none) << l.layer;
    EXPECT_EQ(l.attention.window, full ? 0 : 512) << l.layer;
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 0.125);
    EXPECT_TRUE(l.attention.causal);
  }
  // The class defaults (sliding_window null: transformers cannot run them) and a window: every layer full,
  // base 1e4 on the whole 128-dim head, scale head_dim^-0.5.
  expect_plan_error(R"({"model_type": "step3p5"})", "sliding_window is not set");
  const ModelPositions d =
      model_positions_from_hf_json(R"({"model_type": "step3p5", "sliding_window": 512})");
  EXPECT_EQ(d.num_layers, 45);
  EXPECT_EQ(d.layers[44].rope->base, 1e4);
  EXPECT_EQ(d.layers[44].rotary_hi, 128);
  EXPECT_DOUBLE_EQ(d.layers[0].attention.softmax_scale, 1 / std::sqrt(128.0));
  // Step3p7Config (step3p7) drops text_config.model_type: the text model is step3p5's.
  const ModelPositions w = model_positions_from_hf_json(
      R"({"model_type": "step3p7", "text_config": {"num_hidden_layers": 2, "rope_theta": 3e5,
          "sliding_window": 8,
          "use_bidirectional_attention": true}})");
  EXPECT_EQ(w.model_type, "step3p5");
  EXPECT_EQ(w.layers[1].rope->base, 3e5);
  // use_bidirectional_attention: every key (Step3p7TextModel.forward)
  EXPECT_FALSE(w.layers[1].attention.causal);
  // A legacy "type" is merged unconverted: rope_type stays "default" and the scaling unused.
  const ModelPositions t =
      plan("step3p5", 2, R"("sliding_window": 8, "rope_scaling": {"type": "linear", "factor": 2.0})");
  EXPECT_EQ(t.layers[0].rope->scaling.type, RopeScalingType::none);
  EXPECT_TRUE(has_warning(t, "rope_scaling.type = \"linear\" is not read by step3p5"));
  // A flat rope_parameters is not read (the class builds the per-type dicts from rope_theta).
  const ModelPositions f = plan(
      "step3p5", 2, R"("sliding_window": 8, "rope_parameters": {"rope_type": "default", "rope_theta": 3e5})");
  EXPECT_EQ(f.layers[0].rope->base, 1e4);
  EXPECT_TRUE(has_warning(f, "rope_parameters = "));
  EXPECT_TRUE(has_warning(plan("step3p5", 2, R"("sliding_window": 8, "use_rope_layers": [true, false])"),
                          "use_rope_layers"));
  expect_plan_error(
      cfg("step3p5", 2, R"("sliding_window": 8, "rope_scaling": {"rope_type": "yarn", "factor": 4.0})"),
      "rope_scaling.original_max_position_embeddings is missing");
  expect_plan_error(cfg("step3p5", 2, R"("layer_types": ["full_attention", "sliding_attention"])"),
                    "sliding_window is not set");
  expect_plan_error(cfg("step3p5", 2, R"("layer_types": ["full_attention", "minimax_m3_sparse"])"),
                    "layer_types contains 'minimax_m3_sparse'");
  expect_plan_error(cfg("step3p5", 2, R"("layer_types": ["full_attention"])"), "must list the 2 layers");
  expect_plan_error(
      cfg("step3p5", 3, R"("layer_types": ["full_attention", "full_attention", "sliding_attention"],
                                      "sliding_window": 8, "rope_theta": [1e4, 1e4])"),
      "layer 2 (the first of its type) has no entry");
  expect_plan_error(cfg("step3p5", 2, R"("sliding_window": 8, "per_layer_config": {"1": {"head_dim": 64}})"),
                    "per_layer_config.1.head_dim = 64 is not modeled");
}

// configuration_muse_glimmer.py / configuration_muse_spark.py __post_init__: full attention on every fourth
// layer counted back from the last, layer_rope_theta 0 there (RoPE off), the global base elsewhere;
// Muse Spark presets rope_parameters {default, 5e5} (a top-level rope_theta is not read).
// modeling_muse_glimmer.py: RoPE iff layer_rope_theta[i], the whole head, windows of 2048.
TEST(ModelHybrids, MuseRopeOnTheSlidingLayersCountedFromTheLast) {
  const ModelPositions spark = plan("muse_spark_text", 6, R"("head_dim": 64, "rope_theta": 1e6)");
  EXPECT_TRUE(has_warning(spark, "rope_theta = 1000000.0 is not read by muse_spark_text"));
  for (const LayerPlan& l : spark.layers) {
    const bool full = (6 - 1 - l.layer) % 4 == 0;  // layers 1 and 5
    EXPECT_EQ(l.layer_type, full ? "full_attention" : "sliding_attention") << l.layer;
    EXPECT_EQ(l.position, full ? PositionMethod::none : PositionMethod::rope) << l.layer;
    EXPECT_EQ(l.attention.window, full ? 0 : 2048) << l.layer;
    if (!full) {
      EXPECT_EQ(l.rope->base, 5e5);
      EXPECT_EQ(l.rotary_hi, 64);
    }
    // head_dim^-0.5 times qk_scale_factor, by which Muse multiplies the normed query before RoPE
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 0.125 * 5.4730064863875);
  }
  const ModelPositions glimmer = plan("muse_glimmer_text", 4, R"("rope_theta": 5e5,
      "layer_rope_theta": [5e5, 0, 7, 0], "partial_rotary_factor": 0.5)");
  EXPECT_EQ(glimmer.layers[0].rope->base, 5e5);
  EXPECT_EQ(glimmer.layers[1].position, PositionMethod::none);  // a sliding layer switched off
  EXPECT_EQ(glimmer.layers[2].rope->base, 5e5);                 // 7: on, at the global base
  EXPECT_EQ(glimmer.layers[0].rotary_hi, 128);                  // the whole head
  EXPECT_TRUE(has_warning(glimmer, "layer_rope_theta contains 7.0, read as 'RoPE on'"));
  EXPECT_TRUE(has_warning(glimmer, "partial_rotary_factor = 0.500000 is ignored by muse_glimmer_text"));
  expect_plan_error(cfg("muse_glimmer_text", 4, R"("sliding_window": null)"), "sliding_window is missing");
  expect_plan_error(cfg("muse_glimmer_text", 4, R"("layer_rope_theta": [1, 0])"), "layer_rope_theta has 2");
  expect_plan_error(cfg("muse_glimmer_text", 4, R"("partial_rotary_factor": 0.5,
      "rope_parameters": {"rope_type": "linear", "factor": 2.0})"),
                    "partial_rotary_factor = 0.5 with rope_type 'linear' is not supported for model_type "
                    "'muse_glimmer_text': its rotation covers all 128 head dims, the frequencies 64");
}

// configuration_hunyuan_vl.py (HunyuanOCR's flat form: the wrapper folds the top-level keys into
// text_config): rope type "xdrope" read as "dynamic", whose alpha is HunYuan's fixed NTK base theta *
// alpha^(d / (d - 2)) (factor still required); head_dim alias attention_head_dim, no default;
// xdrope_section sums to head_dim / 2; text tokens: 1-D RoPE (a warning names what image tokens do).
TEST(ModelHybrids, HunyuanVlTextXdRope) {
  const std::string ocr =
      R"("attention_head_dim": 128, "rope_theta": 10000.0, "max_position_embeddings": 32768,
      "rope_scaling": {"type": "xdrope", "factor": 1.0, "alpha": 1000.0, "beta_fast": 32, "beta_slow": 1,
                       "mscale": 1.0, "mscale_all_dim": 1.0, "xdrope_section": [16, 16, 16, 16]})";
  const ModelPositions m = plan("hunyuan_vl", 3, ocr);
  EXPECT_EQ(m.model_type, "hunyuan_vl_text");
  ASSERT_TRUE(m.layers[0].rope);
  EXPECT_NEAR(m.layers[0].rope->base, 1e4 * std::pow(1000.0, 128.0 / 126.0), 1e-6);
  EXPECT_EQ(m.layers[0].rope->scaling.type, RopeScalingType::none);
  EXPECT_EQ(m.layers[0].rope->multimodal, RopeMultimodal::none);
  EXPECT_EQ(m.layers[0].rotary_hi, 128);
  EXPECT_TRUE(has_warning(m, "rope_scaling.xdrope_section = [16,16,16,16]: hunyuan_vl_text's image tokens"));
  EXPECT_EQ(m.warnings.size(), 1u) << m.warnings.back();
  auto changed = [&](const std::string& from, const std::string& to) {
    std::string c = ocr;
    c.replace(c.find(from), from.size(), to);
    return cfg("hunyuan_vl", 2, c);
  };
  expect_plan_error(changed(R"("factor": 1.0, )", ""), "factor is missing");
  expect_plan_error(changed("[16, 16, 16, 16]", "[16, 16, 16]"), "sums to 48, not head_dim / 2 = 64");
  expect_plan_error(changed(R"(, "xdrope_section": [16, 16, 16, 16])", ""),
                    "xdrope_section (mrope_section) is missing");
  expect_plan_error(changed(R"("attention_head_dim": 128, )", ""), "head_dim is missing");
}

// configuration_cohere_compass.py: rope_parameters per layer type only (null: no RoPE on that type; the
// legacy rope_theta / rope_scaling stay inert), head_dim = hidden / heads always, layer_types all full
// by default, windows of sliding_window (4096); modeling_cohere_compass.py: Qwen3-VL's interleaved M-RoPE
// (sections [24, 20, 20] by default: python/tests/model/test_model_families.py) in halves.
TEST(ModelHybrids, CohereCompassPerTypeRopeWithNullForNoPe) {
  const ModelPositions m = plan("cohere_compass", 4, R"("head_dim": 32, "rope_theta": 1e6,
      "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
      "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 5e4,
                                                "mrope_section": [8, 4, 4]},
                          "full_attention": null, "rope_theta": 5e4})");
  EXPECT_EQ(m.model_type, "cohere_compass_text");
  for (const LayerPlan& l : m.layers) {
    const bool full = l.layer == 3;
    EXPECT_EQ(l.position, full ? PositionMethod::none : PositionMethod::rope) << l.layer;
    EXPECT_EQ(l.attention.window, full ? 0 : 4096) << l.layer;
    if (!full) {
      EXPECT_EQ(l.rope->base, 5e4);
      EXPECT_EQ(l.rope->head_dim, 32);  // the head_dim key, set over hidden / heads
      EXPECT_EQ(l.rope->layout, RopeLayout::half);
      EXPECT_EQ(l.rope->multimodal, RopeMultimodal::mrope_interleaved);
      EXPECT_EQ(l.rope->mrope_section, (std::vector<int64_t>{8, 4, 4}));
    }
  }
  const ModelPositions s =
      plan("cohere_compass_text", 2, R"("rope_scaling": {"full_attention": {"rope_type": "default",
      "rope_theta": 2e5, "mrope_section": [16, 8, 8]}}, "rope_parameters": {"full_attention": null})");
  EXPECT_EQ(s.layers[0].rope->base, 2e5);  // rope_scaling replaces rope_parameters
  EXPECT_TRUE(has_warning(s, "rope_parameters is replaced by rope_scaling"));
  expect_plan_error(cfg("cohere_compass_text", 2, R"("rope_scaling": null)"),
                    "rope_scaling = null is not supported");
  EXPECT_TRUE(has_warning(m, "rope_theta = 1000000.0 is not read by cohere_compass_text"));
  expect_plan_error(cfg("cohere_compass_text", 2, ""), "rope_parameters is missing");
  expect_plan_error(cfg("cohere_compass_text", 2, R"("rope_parameters": {"rope_type": "default"})"),
                    "must be a dict per layer type");
}

// configuration_zaya.py: layer types "hybrid" (full) / "hybrid_sliding" (windows of sliding_window,
// required), rope_parameters per those types (class default: 5e6 / 1e4, half the head each), its convert only
// dropping a top-level rope_type (legacy keys inert); modeling_zaya.py: rotate_half on the first int(128 *
// prf) dims.
TEST(ModelHybrids, ZayaRopePerHybridType) {
  const ModelPositions m = plan("zaya", 4, R"("head_dim": 128, "sliding_window": 1024, "rope_theta": 1e6,
      "layer_types": ["hybrid", "hybrid_sliding", "hybrid", "hybrid_sliding"])");
  for (const LayerPlan& l : m.layers) {
    const bool sliding = l.layer % 2 == 1;
    EXPECT_EQ(l.layer_type, sliding ? "hybrid_sliding" : "hybrid");
    EXPECT_EQ(l.rope->base, sliding ? 1e4 : 5e6);
    EXPECT_EQ(l.rotary_hi, 64);
    EXPECT_EQ(l.attention.window, sliding ? 1024 : 0);
    EXPECT_DOUBLE_EQ(l.attention.softmax_scale, 1 / std::sqrt(128.0));
  }
  EXPECT_TRUE(has_warning(m, "rope_theta = 1000000.0 is not read by zaya"));
  const ModelPositions given = plan("zaya", 2, R"("head_dim": 64, "rope_parameters": {"rope_type": "default",
      "hybrid": {"rope_type": "default", "rope_theta": 2e6}})");
  EXPECT_EQ(given.layers[1].layer_type, "hybrid");
  EXPECT_EQ(given.layers[1].rope->base, 2e6);
  EXPECT_EQ(given.layers[1].rotary_hi, 64);  // no partial_rotary_factor: the whole head
  expect_plan_error(cfg("zaya", 2, R"("rope_parameters": {"rope_type": "default", "rope_theta": 1e6})"),
                    "must be a dict per layer type for model_type 'zaya'");
  expect_plan_error(cfg("zaya", 2, R"("layer_types": ["hybrid", "hybrid_sliding"])"),
                    "sliding_window is missing");
  // rope_scaling replaces rope_parameters (PreTrainedConfig's setter: ZAYA's convert leaves it), as for
  // laguna, mimo_v2_flash and cohere_compass_text; false (tiny-random/zaya1's) fails in transformers 5.23.
  const ModelPositions s =
      plan("zaya", 2, R"("rope_scaling": {"hybrid": {"rope_type": "default", "rope_theta": 7e5}})");
  EXPECT_EQ(s.layers[0].rope->base, 7e5);
  expect_plan_error(cfg("zaya", 2, R"("rope_scaling": false)"), "rope_scaling = false is not supported");
  const ModelPositions l = plan("laguna", 2, R"("rope_scaling": {"full_attention": {"rope_type": "default",
      "rope_theta": 3e5}, "sliding_attention": {"rope_type": "default", "rope_theta": 2e4}})");
  EXPECT_EQ(l.layers[0].rope->base, 3e5);
  expect_plan_error(cfg("mimo_v2_flash", 2, R"("rope_scaling": null)"),
                    "rope_scaling = null is not supported");
  expect_plan_error(cfg("zaya", 2, R"("layer_types": ["hybrid", "full_attention"])"),
                    "zaya builds \"hybrid\"");
}

// configuration_zaya.py: its convert_rope_params_to_dict skips standardize_rope_params, so a yarn / llama3 /
// longrope dict is never given original_max_position_embeddings (modeling_rope_utils.py
// standardize_rope_params for other families) and the validation raises KeyError (_check_received_keys); a
// dict of a layer type the model does not build is not validated (nested_rope_parameter_keys: the declared
// layer types only).
TEST(ModelHybrids, ZayaScaledRopeNeedsItsOriginalContext) {
  const std::string yarn = R"({"rope_type": "yarn", "rope_theta": 5e6, "factor": 4.0)";
  expect_plan_error(cfg("zaya", 2, R"("rope_parameters": {"hybrid": )" + yarn + "}}"),
                    "rope_parameters.hybrid.original_max_position_embeddings is missing: rope type \"yarn\"");
  expect_plan_error(cfg("zaya", 2,
                        R"("original_max_position_embeddings": 4096,
      "rope_parameters": {"hybrid": )" +
                            yarn + "}}"),
                    "transformers 5.23 raises KeyError");  // (the top-level key is not read)
  expect_plan_error(cfg("zaya", 2, R"("rope_scaling": {"hybrid": {"type": "llama3", "rope_theta": 5e6,
      "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}})"),
                    "rope_scaling.hybrid.original_max_position_embeddings is missing: rope type \"llama3\"");
  expect_plan_error(cfg("zaya", 2, R"("sliding_window": 8, "layer_types": ["hybrid", "hybrid_sliding"],
      "rope_parameters": {"hybrid": {"rope_type": "default", "rope_theta": 5e6},
      "hybrid_sliding": )" + yarn + R"(, "original_max_position_embeddings": null}})"),
                    "rope_parameters.hybrid_sliding.original_max_position_embeddings = null is invalid");
  // Given: planned; on a layer type no layer has: not read.
  const ModelPositions m =
      plan("zaya", 2,
           R"("rope_parameters": {"hybrid": )" + yarn + R"(, "original_max_position_embeddings": 4096}})");
  EXPECT_EQ(m.layers[0].rope->scaling.type, RopeScalingType::yarn);
  EXPECT_EQ(m.layers[0].rope->scaling.original_max_position_embeddings, 4096);
  const ModelPositions unused = plan("zaya", 2,
                                     R"("rope_parameters": {"hybrid": {"rope_type": "default",
      "rope_theta": 5e6}, "hybrid_sliding": )" +
                                         yarn + "}}");
  EXPECT_EQ(unused.layers[1].rope->scaling.type, RopeScalingType::none);
}

// configuration_molmo2.py / modeling_molmo2.py: the rope dict on rope_scaling_layers (null: every layer), the
// default rope of the same base on the others; qk_norm_type qwen3 | olmo; the wrapper's image blocks warned.
TEST(ModelHybrids, Molmo2ScaledAndUnscaledLayers) {
  const ModelPositions m = plan("molmo2_text", 4, R"("rope_scaling_layers": [1, 3],
      "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6})");
  EXPECT_EQ(m.model_type, "molmo2_text");
  for (const LayerPlan& l : m.layers) {
    EXPECT_EQ(l.rope->base, 1e6);
    EXPECT_EQ(l.rope->scaling.type, l.layer % 2 ? RopeScalingType::linear : RopeScalingType::none) << l.layer;
  }
  const ModelPositions all =
      plan("molmo2_text", 2, R"("rope_scaling": {"rope_type": "linear", "factor": 2.0})");
  EXPECT_EQ(all.layers[0].rope->scaling.type, RopeScalingType::linear);
  EXPECT_EQ(all.layers[1].rope->scaling.type, RopeScalingType::linear);
  const ModelPositions wrapped = model_positions_from_hf_json(
      R"({"model_type": "molmo2", "text_config": {"model_type": "molmo2_text", "num_hidden_layers": 2}})");
  EXPECT_TRUE(has_warning(wrapped, "molmo2: in prefill its image and frame tokens"));
  expect_plan_error(cfg("molmo2_text", 2, R"("qk_norm_type": "gemma")"),
                    "qk_norm_type = \"gemma\" is invalid");
  // Molmo2Config builds a text_config without model_type as Molmo2TextConfig (its sub_configs_defaults).
  const ModelPositions untyped = model_positions_from_hf_json(
      R"({"model_type": "molmo2", "text_config": {"num_hidden_layers": 3, "rope_scaling_layers": [1],
      "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6}}})");
  EXPECT_EQ(untyped.model_type, "molmo2_text");
  EXPECT_EQ(untyped.layers[1].rope->scaling.type, RopeScalingType::linear);
  EXPECT_EQ(untyped.layers[2].rope->scaling.type, RopeScalingType::none);
}

// Qwen3_5MoeConfig names Qwen3_5MoeTextConfig for text_config (configuration_qwen3_5_moe.py
// sub_configs_defaults), a concrete class: transformers builds text_config as that class whether the dict has
// no model_type or another one (configuration_utils.py SubConfigSpec.create_subconfig), so posenc plans
// qwen3_5_moe_text either way and warns of an ignored model_type. A wrapper whose text class posenc does not
// model is refused by that class's model_type.
TEST(ModelHybrids, WrapperTextClassDecidesTheTextModel) {
  // The class's defaults: 3 linear-attention layers per full one, 64 of the 256 head dims rotated
  // (qwen3_moe's class would give 4 full-attention layers rotating whole 64-dim heads).
  const std::string text = R"("num_hidden_layers": 4)";
  const ModelPositions want =
      model_positions_from_hf_json(R"({"model_type": "qwen3_5_moe_text", )" + text + "}");
  EXPECT_EQ(attending(want), (Layers{3}));
  for (const std::string& type : {std::string(), std::string(R"("model_type": "qwen3_moe", )")}) {
    const ModelPositions got = model_positions_from_hf_json(
        R"({"model_type": "qwen3_5_moe", "text_config": {)" + type + text + "}}");
    EXPECT_EQ(got.model_type, want.model_type) << type;
    ASSERT_EQ(got.layers.size(), want.layers.size()) << type;
    for (size_t i = 0; i < got.layers.size(); ++i) {
      EXPECT_EQ(got.layers[i].softmax_attention, want.layers[i].softmax_attention) << type << i;
      if (!got.layers[i].rope) continue;
      ASSERT_TRUE(want.layers[i].rope.has_value()) << i;
      EXPECT_EQ(got.layers[i].rope->base, want.layers[i].rope->base);
      EXPECT_EQ(got.layers[i].rope->effective_rotary_dim(), 64);
      EXPECT_EQ(got.layers[i].rope->head_dim, 256);
    }
    EXPECT_EQ(has_warning(got,
                          "text_config.model_type = \"qwen3_moe\" is ignored: qwen3_5_moe's config class "
                          "builds text_config as its text class, model_type 'qwen3_5_moe_text'"),
              !type.empty());
  }
  // CLIPConfig builds CLIPTextConfig (configuration_clip.py sub_configs_defaults): refused as
  // clip_text_model, not planned as the llama the dict names.
  for (const char* type : {"", R"("model_type": "llama", )"})
    expect_plan_error(R"({"model_type": "clip", "text_config": {)" + std::string(type) + text + "}}",
                      "model_type 'clip_text_model' is not in posenc's model table");
}

// LlavaConfig's text_config spec is AutoConfig with default model_type llama (configuration_llava.py
// sub_configs_defaults): a dict without model_type is built as LlamaConfig, one with a model_type as that
// family's class. VoxtralConfig also fills the dict's absent keys from the spec's init_kwargs
// (configuration_voxtral.py VoxtralConfig.__post_init__): its base is 1e8, not LlamaConfig's 1e4.
// Sam3Config's default, clip_text_model, is refused by name.
TEST(ModelHybrids, WrapperDefaultTextTypeFillsAMissingModelType) {
  const std::string text = R"("num_hidden_layers": 2, "rope_theta": 5e5, "max_position_embeddings": 4096)";
  const ModelPositions want = model_positions_from_hf_json(R"({"model_type": "llama", )" + text + "}");
  const ModelPositions got =
      model_positions_from_hf_json(R"({"model_type": "llava", "text_config": {)" + text + "}}");
  EXPECT_EQ(got.model_type, "llama");
  ASSERT_EQ(got.layers.size(), 2u);
  for (size_t i = 0; i < got.layers.size(); ++i) {
    ASSERT_TRUE(got.layers[i].rope.has_value()) << i;
    EXPECT_EQ(got.layers[i].rope->base, want.layers[i].rope->base);
    EXPECT_EQ(got.layers[i].rope->head_dim, want.layers[i].rope->head_dim);
  }
  EXPECT_EQ(got.layers[0].rope->base, 5e5);
  const ModelPositions typed = model_positions_from_hf_json(
      R"({"model_type": "llava", "text_config": {"model_type": "mistral", )" + text + "}}");
  EXPECT_EQ(typed.model_type, "mistral");
  for (const char* type : {"", R"("model_type": "llama", )"}) {
    const ModelPositions voxtral = model_positions_from_hf_json(
        R"({"model_type": "voxtral", "text_config": {)" + std::string(type) + R"("num_hidden_layers": 2}})");
    EXPECT_EQ(voxtral.model_type, "llama") << type;
    ASSERT_EQ(voxtral.layers.size(), 2u) << type;
    EXPECT_EQ(voxtral.layers[0].rope->base, 1e8) << type;
    EXPECT_EQ(voxtral.layers[0].rope->head_dim, 128) << type;
  }
  expect_plan_error(R"({"model_type": "sam3", "text_config": {"num_hidden_layers": 2}})",
                    "model_type 'clip_text_model' is not in posenc's model table");
}

// modeling_molmo2.py Molmo2TextModel.__init__: a layer is scaled iff `layer_idx in
// config.rope_scaling_layers`: other indices scale no layer (ignored, warned); the strict list[int] field
// refuses anything else.
TEST(ModelHybrids, Molmo2ScalingLayersOutsideTheModelAreIgnored) {
  const ModelPositions m = plan("molmo2_text", 4, R"("rope_scaling_layers": [0, 2, 7, -1, 7],
      "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6})");
  for (const LayerPlan& l : m.layers)
    EXPECT_EQ(l.rope->scaling.type, l.layer % 2 ? RopeScalingType::none : RopeScalingType::linear) << l.layer;
  EXPECT_TRUE(has_warning(m, "rope_scaling_layers contains 7, -1, not a layer of the num_hidden_layers = 4"));
  const ModelPositions none = plan("molmo2_text", 2, R"("rope_scaling_layers": [2],
      "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6})");
  EXPECT_EQ(none.layers[0].rope->scaling.type, RopeScalingType::none);
  EXPECT_EQ(none.layers[1].rope->scaling.type, RopeScalingType::none);
  expect_plan_error(cfg("molmo2_text", 2, R"("rope_scaling_layers": [1.0])"),
                    "rope_scaling_layers contains 1.0: must be integers");
  expect_plan_error(cfg("molmo2_text", 2, R"("rope_scaling_layers": 1)"),
                    "rope_scaling_layers = 1 is invalid");
}

// modeling_molmo2.py Molmo2RotaryEmbedding.compute_default_rope_parameters: the default init (and
// rotary_emb_unscaled) rotates the whole head whatever partial_rotary_factor says; every other rope type's
// init reads it (modeling_rope_utils.py _compute_linear_scaling_rope_parameters,
// _compute_dynamic_ntk_parameters, _compute_yarn_parameters, _compute_longrope_parameters,
// _compute_llama3_parameters): cos / sin of int(head_dim * prf) dims, which apply_rotary_pos_emb multiplies
// with the whole head (modeling_molmo2.py): transformers 5.23 fails at the first forward on a scaled layer.
TEST(ModelHybrids, Molmo2PartialRotationOnlyWhereTheDefaultInitRuns) {
  expect_plan_error(cfg("molmo2_text", 2, R"("rope_parameters": {"rope_type": "yarn", "factor": 4.0,
      "rope_theta": 1e6, "original_max_position_embeddings": 1024, "partial_rotary_factor": 0.5})"),
                    "partial_rotary_factor = 0.5 with rope type 'yarn' is not supported for molmo2_text: its "
                    "rotary module then builds cos / sin of 64 dims");
  expect_plan_error(cfg("molmo2_text", 2, R"("partial_rotary_factor": 0.25, "rope_scaling_layers": [1],
      "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6})"),
                    "partial_rotary_factor = 0.25 with rope type 'linear'");
  // No scaled layer: every layer takes rotary_emb_unscaled, the whole head.
  const ModelPositions unscaled = plan("molmo2_text", 2, R"("rope_scaling_layers": [],
      "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6,
      "original_max_position_embeddings": 1024, "partial_rotary_factor": 0.5})");
  for (const LayerPlan& l : unscaled.layers) {
    EXPECT_EQ(l.rope->scaling.type, RopeScalingType::none);
    EXPECT_EQ(l.rotary_hi, 128);  // (molmo2's head_dim: 128)
  }
  const ModelPositions plain = plan("molmo2_text", 2, R"("rope_parameters": {"rope_type": "default",
      "rope_theta": 1e6, "partial_rotary_factor": 0.5})");
  EXPECT_EQ(plain.layers[0].rotary_hi, 128);
}

}  // namespace
}  // namespace posenc
