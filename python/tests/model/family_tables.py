"""The families of transformers 5.23 that the family tests cover, and what each needs: the text
model_types posenc models, the wrappers, the sizes a shrunk model can run and the class defaults
posenc refuses (test_families.py and the family_harness module read them)."""
import re
import warnings

import transformers
from transformers.models.auto import configuration_auto, modeling_auto

import posenc

transformers.utils.logging.set_verbosity_error()

LAYERS, HEADS, KV_HEADS, T = 6, 4, 2, 8


# Text models of other heads (embeddings, token classification) that posenc plans.
OTHER_HEADS = {"embedding_gemma2", "openai_privacy_filter", "glm_image", "voxtral_realtime",
               "qwen3_omni_moe_talker_text", "csm", "higgs_audio_v2"}


# Text-to-speech models: their backbone alone (the full model adds a depth decoder or an audio tokenizer).
BACKBONES = {"csm": "CsmBackboneModel", "higgs_audio_v2": "HiggsAudioV2Model"}


def _families():
    """text model_type -> (text config class, the model_types whose text config it is)."""
    types = sorted(set(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
                   | set(modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)
                   | set(modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES) | OTHER_HEADS)
    out, skipped = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mt in types:
            try:
                text = configuration_auto.CONFIG_MAPPING[mt]().get_text_config()
            except Exception as exc:  # e.g. musicgen: two text configs (text_encoder, decoder)
                skipped[mt] = repr(exc)
                continue
            out.setdefault(text.model_type, (type(text), []))[1].append(mt)
    return out, skipped


FAMILIES, NO_TEXT_CONFIG = _families()


WRAPPERS = sorted((mt, text) for text, (_, wrappers) in FAMILIES.items() for mt in wrappers if mt != text)



# The reader's refusals by name: a model_type outside posenc's table (src/model/families.cc), one it refuses
# with a reason, or a wrapper's flat config it does not read. It names them before reading any other key.
_REFUSED_BY_NAME = re.compile(
    r"model_type '[^']*' (is not supported:|is not in posenc's model table|without text_config is not read)")


def _planned_by_posenc(model_type):
    """Whether the C++ library's model table plans the type: its bare config is not refused by name."""
    try:
        posenc.ModelPositions.from_hf({"model_type": model_type}, warn=False)
    except posenc.Error as exc:
        return not _REFUSED_BY_NAME.search(str(exc))
    return True


# Text model_types posenc models (checked in full), as the library's table says; every other family must be
# refused by name.
SUPPORTED = {model_type for model_type in FAMILIES if _planned_by_posenc(model_type)}


# Encoder-decoder families with absolute tables (src/model/seq2seq.cc), checked by check_seq2seq.
SEQ2SEQ = {"bart", "mbart", "plbart", "mvp", "blenderbot", "blenderbot-small", "marian", "pegasus", "whisper",
           "m2m_100", "nllb-moe"}


# Families whose class defaults have no attention layer (hybrids), no layer list at all, or sizes the
# shrunk model cannot run: the choice a released checkpoint makes (checked like any other key).
FAMILY_KWARGS = {
    "lfm2_moe": dict(layer_types=["conv", "conv", "full_attention", "conv", "full_attention", "conv"]),
    "bamba": dict(attn_layer_indices=[1, 4], mamba_n_heads=8, mamba_d_state=16, mamba_chunk_size=16),
    "granitemoehybrid": dict(layer_types=["mamba", "attention", "mamba", "mamba", "attention", "mamba"],
                             position_embedding_type="rope", mamba_n_heads=8, mamba_d_state=16,
                             mamba_chunk_size=16),
    "jamba": dict(attn_layer_period=3, attn_layer_offset=1, mamba_d_state=8),
    "nemotron_h": dict(layers_block_type=["linear_attention", "full_attention", "moe", "linear_attention",
                                          "mlp", "full_attention"],
                       mamba_num_heads=8, mamba_head_dim=16, n_groups=2, ssm_state_size=16, chunk_size=16),
    "falcon_h1": dict(mamba_d_ssm=128, mamba_n_heads=8, mamba_d_state=16, mamba_chunk_size=16),
    "zamba": dict(n_mamba_heads=2, mamba_d_state=8, attn_layer_period=2, attn_layer_offset=0),
    "zamba2": dict(layers_block_type=["mamba", "hybrid", "mamba", "mamba", "hybrid", "mamba"],
                   n_mamba_heads=8, mamba_d_state=16, chunk_size=16, use_mem_rope=True),
    "mamba2": dict(num_heads=8, head_dim=64, n_groups=1, state_size=16, chunk_size=8),  # 8 * 64 = 2 * 256
    # linear-attention layers (no positions; their class sizes, e.g. 64 heads of 128, made the chunked CPU
    # fallback most of a family's test time): 4 heads of 16; Gated DeltaNet's: 2 key and 4 value heads of 16
    "kimi_linear": dict(linear_head_dim=16, linear_num_heads=4),
    "glm5_next_text": dict(linear_head_dim=16, linear_num_heads=4),
    **{t: dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
               linear_value_head_dim=16) for t in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")},
    "hunyuan_v1_moe": dict(num_experts=4, moe_topk=2),
    # encoder-decoders: the shrunk d_model must split into the decoder's heads too; Whisper's encoder
    # takes exactly 2 max_source_positions input frames
    "plbart": dict(decoder_attention_heads=4),
    "whisper": dict(decoder_attention_heads=4, max_source_positions=16),
    # ESM-2's rotary positions (the class default, "absolute", needs a pad_token_id, which EsmConfig
    # leaves None: test_model_encoders.py checks that form with ESM-1b's pad 1)
    "esm": dict(position_embedding_type="rotary", vocab_size=256),  # (vocab_size: None in EsmConfig)
    # SqueezeBERT asserts embedding_size == hidden_size (4 heads of 64)
    "squeezebert": dict(embedding_size=256),
    # Pix2StructTextConfig lacks the initializer_range its model's _init_weights reads (5.23)
    "pix2struct_text_model": dict(initializer_range=0.02),
    # DbrxAttentionConfig has no rope_theta, which DbrxAttention reads (AttributeError): the base both
    # readings agree on (test_dbrx_base_against_transformers_and_the_authors_code has the difference)
    # no kv sharing: a shared layer attends with the keys an earlier layer of its type rotated (the same
    # plan), which the q/k capture cannot pair with its own projections
    "gemma3n_text": dict(num_kv_shared_layers=0, altup_num_inputs=2, laurel_rank=4,
                         hidden_size_per_layer_input=8),
    # the text model builds its vision and audio encoders too: small ones (the class's take ~20 s a model)
    "phi4_multimodal": dict(
        vision_config={"hidden_size": 32, "intermediate_size": 32, "num_hidden_layers": 1,
                       "num_attention_heads": 2},
        audio_config={"hidden_size": 32, "intermediate_size": 32, "num_blocks": 1, "num_attention_heads": 2,
                      "ext_pw_out_channel": 32, "depthwise_separable_out_channel": 32,
                      "nemo_conv_channels": 32}),
    # (the talker's config sets it on its text config: Qwen3OmniMoeTalkerConfig)
    "qwen3_omni_moe_talker_text": dict(shared_expert_intermediate_size=32),
    "ernie4_5_vl_moe_text": dict(moe_intermediate_size=[32, 32]),  # (text and vision experts)
    "deepseek_ocr2_text": dict(mlp_layer_types=["dense"] * LAYERS),  # (None in the class: set by its wrapper)
    "dbrx": dict(d_model=HEADS * 128, attn_config={"kv_n_heads": 2, "rope_theta": 1e4, "clip_qkv": 8.0},
                 ffn_config={"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2}),
    "bailing_hybrid": dict(layer_group_size=3, num_experts=4, num_experts_per_tok=2, num_expert_group=1,
                           topk_group=1, linear_head_dim=16, linear_num_heads=4),
    # a dense prefix of 2 layers: full attention with RoPE (force_rope), then S S S F
    "cohere2_moe": dict(first_k_dense_replace=2, prefix_dense_intermediate_size=32),
    # recurrent models without attention heads (the shrinker keys its sizes on them)
    "xlstm": dict(hidden_size=64, num_blocks=LAYERS, num_heads=4, chunk_size=4),
    "rwkv": dict(hidden_size=64, attention_hidden_size=64, intermediate_size=128),
    "mamba": dict(hidden_size=64, state_size=8), "falcon_mamba": dict(hidden_size=64, state_size=8),
}


# Step 3.5's own config form (its hub configs): per-layer lists padded with the MTP layer's entry, full
# layers with base 5e6 on half the head and llama3 scaling, sliding layers with base 1e4 on the whole head.
_STEP_TYPES = (["full_attention"] + ["sliding_attention"] * 3) * LAYERS


FAMILY_KWARGS["step3p5"] = dict(
    num_nextn_predict_layers=1, layer_types=_STEP_TYPES[:LAYERS + 1], sliding_window=4,
    rope_theta=[5e6 if t == "full_attention" else 1e4 for t in _STEP_TYPES[:LAYERS + 1]],
    partial_rotary_factors=[0.5 if t == "full_attention" else 1.0 for t in _STEP_TYPES[:LAYERS + 1]],
    rope_scaling={"rope_type": "llama3", "factor": 2.0, "original_max_position_embeddings": 16,
                  "low_freq_factor": 1.0, "high_freq_factor": 32.0},
    n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, share_expert_dim=16)


# HunyuanOCR's form (its rotary module needs the sections; text tokens: every axis equal).
FAMILY_KWARGS["hunyuan_vl_text"] = dict(rope_parameters={
    "rope_type": "xdrope", "rope_theta": 1e4, "factor": 1.0, "alpha": 1000.0,
    "xdrope_section": [16, 16, 16, 16]})


# Cohere's North form (the class default {} has no dict per type, which transformers cannot run): sliding
# layers with interleaved M-RoPE in halves, full layers without RoPE.
FAMILY_KWARGS["cohere_compass_text"] = dict(
    layer_types=["sliding_attention", "sliding_attention", "full_attention"] * (LAYERS // 3),
    rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 5e4,
                                           "mrope_section": [24, 20, 20],
                                           "mrope_interleaved": True}, "full_attention": None})


# Qwen4-Exp's QSA sizes (None in the class: its model cannot be built without them) and the released
# checkpoint's rotation (a quarter of the 256-dim head, base 1e7: its rotated dims must fit the index head).
FAMILY_KWARGS["qwen4_exp_text"] = dict(
    indexer_n_heads=4, indexer_kv_heads=1, indexer_head_dim=128, indexer_budget=16, indexer_compress_ratio=4,
    **FAMILY_KWARGS["qwen3_next"],
    rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                     "mrope_section": [11, 11, 10]})


# ZAYA accepts one expert per token only; hybrid (full) and hybrid_sliding layers alternating, as its
# reference code declares them.
FAMILY_KWARGS["zaya"] = dict(num_experts_per_tok=1, layer_types=["hybrid", "hybrid_sliding"] * (LAYERS // 2),
                             sliding_window=4)


# Dots 3 Note's sliding layers take their head counts and latent ranks from swa_* (64 heads, ranks 1024 by
# default: shrunk as the global ones; their head dims, base and window stay the class's).
FAMILY_KWARGS["dots3_note_text"] = dict(
    swa_num_attention_heads=HEADS, swa_num_key_value_heads=HEADS, swa_q_lora_rank=32, swa_kv_lora_rank=32,
    index_n_heads=4, shared_experts_intermediate_size=32)


# Per-layer bases (0: no RoPE), as Granite's SWA checkpoints set them.
FAMILY_KWARGS["granite_swa"] = FAMILY_KWARGS["granitemoe_swa"] = dict(
    layer_rope_theta=[0, 1e4, 5e5, 1e4, 0, 5e5])


# Supported families whose class defaults posenc refuses (an error, not a wrong number): glm4_moe's
# head_dim is 4096 // 96 = 42, int(42 * 0.5) = 21 rotary dims; transformers then rotates 22 dims with
# 11 frequencies of exponent 2i / 21 (modeling_glm4_moe.py
# Glm4MoeRotaryEmbedding.compute_default_rope_parameters). Real GLM-4.5 configs give head_dim 128
# (test_model_parity.py).
# At its full default size, hidden 4096 / 96 heads does not divide (transformers floors it to 42):
# refused as well.
# glm4v_moe_text as glm4_moe; glm4v_text's class has no partial_rotary_factor: 64 pairs, which its default
# mrope_section [8, 12, 12] cannot split (transformers fails); qwen3_omni_moe_text's head is 2048 // 28 = 73
# (getattr(config, "head_dim", hidden // heads)), an odd rotary width (transformers fails). A tuple: any of
# the messages (the heads variant's hidden size no longer divides).
# cohere_compass_text's class default rope_parameters is {} (its rotary module raises KeyError).
ILL_FORMED_DEFAULTS = {"glm4_moe": "rotary_dim = 21 is invalid",
                       "cohere_compass_text": "must be a dict per layer type",
                       "glm4v_moe_text": "rotary_dim = 21 is invalid",
                       "glm4v_text": "mrope_section = [8, 12, 12] sums to 32",
                       "glm_image_text": "mrope_section = [8, 12, 12] sums to 32",  # (as glm4v_text)
                       # the heads variant's head of 32 dims: 16 pairs, narrower than the default
                       # sections [24, 20, 20], which transformers' interleaving slices cut silently
                       # (refused, not wrong)
                       "qwen3_omni_moe_talker_text": ("values must be in [0, 16] (rotary_dim/2)",),
                       "qwen3_omni_moe_text": ("rotary_dim = 73 is invalid", "is not divisible by"),
                       # (its rotary module raises for the yarn variant, as posenc refuses it)
                       "ernie4_5_vl_moe_text": ('transformers 5 requires "default"',)}


# lfm2_moe's class has no layer_types default: transformers cannot build the model either.
# hunyuan_v1's head_dim is None by default, which its attention cannot use (None ** -0.5).
ILL_FORMED_FULL_SIZE = {"glm4_moe": "hidden_size = 4096 is not divisible by num_attention_heads = 96",
                        "lfm2_moe": "layer_types is missing", "hunyuan_v1_dense": "head_dim is missing",
                        "hunyuan_v1_moe": "head_dim is missing", "hunyuan_vl_text": "head_dim is missing",
                        "cohere_compass_text": "must be a dict per layer type",
                        "step3p5": "sliding_window is not set",
                        # (the default sections [11, 11, 10] against the whole 256-dim head are fine:
                        # pairs 33 .. 127 stay on t)
                        "qwen4_exp_text": "indexer_budget and indexer_compress_ratio are missing",
                        "esm": "pad_token_id is missing",
                        "glm4v_moe_text": "hidden_size = 4096 is not divisible by num_attention_heads = 96",
                        "glm4v_text": "mrope_section = [8, 12, 12] sums to 32",
                        "glm_image_text": "mrope_section = [8, 12, 12] sums to 32",
                        "qwen3_omni_moe_text":
                            "hidden_size = 2048 is not divisible by num_attention_heads = 28"}
