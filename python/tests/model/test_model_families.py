"""posenc.ModelPositions for EVERY decoder text family of transformers 5.23, from each config
class's defaults: posenc's per-layer plan must equal what transformers' own model does, or posenc
must refuse the model_type by name (posenc.Error). A wrong number is worse than an error.

The families: every model_type of MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES and MODEL_FOR_MASKED_LM_MAPPING_NAMES (the encoders) and OTHER_HEADS, by the
model_type of its text config (multimodal
wrappers: get_text_config(); each wrapper's own dict must then give the plan of its text config).
Each family's config is its class default with the sizes shrunk (6 layers, 4 heads, 2 kv heads,
small MLP / experts / vocabulary; head_dim and every positional field left at the default), and a
second variant with rope_type "yarn" (factor 4) where the config has rope_parameters, and a third with
a sliding window short enough to show in the mask (3 keys; use_sliding_window on, max_window_layers 3)
where the config has sliding_window; a "shape" variant (another base, partial_rotary_factor 0.5,
head_dim 32) and a "heads" variant (twice the heads: hidden / heads is no longer the class's head_dim,
so a family that derives head_dim and one that fixes it are told apart).

What is compared, per layer, with a tiny CPU model built from that config (eager attention):
- inv_freq and attention_scaling of the family's own rotary module (per layer type, or per layer
  where the attention owns it) after calls whose largest position is 0, original - 1, 2 original - 1;
- the applied rotation: the q/k the family's attention hands to its attention function, against
  posenc.rope applied to the same layer's q/k without rotation (the layer run again with cos = 1,
  sin = 0), on posenc's rotated range [lo, hi) with its layout; NoPE layers must be unrotated;
- the attention function's arguments: scaling, sliding_window, softcap; the attention mask
  (causal / bidirectional); layer_types; sinks.
"""
import copy
import importlib
import math
import re
import sys
import warnings

import numpy as np
import pytest
import torch
import transformers
from transformers.models.auto import configuration_auto, modeling_auto

import posenc
from encoder_checks import ENCODER_CHECKS
from hf_oracle import hf_frequencies

transformers.utils.logging.set_verbosity_error()


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models: one intra-op thread is fastest (and fair on a shared 2-core machine)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)

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


# Text model_types posenc models (checked in full below), as the library's table says; every other family
# must be refused by name.
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
    "kimi_linear": dict(linear_head_dim=16, linear_num_heads=4),
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
                           topk_group=1),
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
    "rope_type": "xdrope", "rope_theta": 1e4, "factor": 1.0, "alpha": 1000.0, "xdrope_section": [16, 16, 16, 16]})
# Cohere's North form (the class default {} has no dict per type, which transformers cannot run): sliding
# layers with interleaved M-RoPE in halves, full layers without RoPE.
FAMILY_KWARGS["cohere_compass_text"] = dict(
    layer_types=["sliding_attention", "sliding_attention", "full_attention"] * (LAYERS // 3),
    rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 5e4, "mrope_section": [24, 20, 20],
                                           "mrope_interleaved": True}, "full_attention": None})
# Qwen4-Exp's QSA sizes (None in the class: its model cannot be built without them) and the released
# checkpoint's rotation (a quarter of the 256-dim head, base 1e7: its rotated dims must fit the index head).
FAMILY_KWARGS["qwen4_exp_text"] = dict(
    indexer_n_heads=4, indexer_kv_heads=1, indexer_head_dim=128, indexer_budget=16, indexer_compress_ratio=4,
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
# 11 frequencies of exponent 2i / 21 (modeling_glm4_moe.py L74-76). Real GLM-4.5 configs give head_dim
# 128 (test_model_parity.py).
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
                       # the heads variant's head of 32 dims: 16 pairs, narrower than the default sections
                       # [24, 20, 20], which transformers' interleaving slices cut silently (refused, not wrong)
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

# ------------------------------------------------------------------ configs and models


def attr(c, name, default=None):
    """getattr, reading the global value of a per-layer attribute (gemma4's head_dim: transformers
    raises AmbiguousGlobalPerLayerAttributeError on a plain read)."""
    read = getattr(c, "_getattr_without_heterogeneous_validation", None)
    return read(name, default) if read else getattr(c, name, default)


def has_attr(c, name):
    missing = object()
    return attr(c, name, missing) is not missing


def _shrunk_kwargs(text_cls):
    """Class defaults with the sizes shrunk; head_dim and the positional fields untouched."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = text_cls()
    hidden = attr(c, "hidden_size", None)
    heads = attr(c, "num_attention_heads", None)
    head_dim = attr(c, "head_dim", None) or (hidden // heads if hidden and heads else None)
    kw = {}

    def put(name, value):
        if has_attr(c, name) and attr(c, name) is not None:
            kw[name] = value

    put("num_hidden_layers", LAYERS)
    if attr(c, "attention_types", None):  # gpt_neo: the layer list is expanded from it
        kw["attention_types"] = [[["global", "local"], LAYERS // 2]]
    put("num_attention_heads", HEADS)
    if has_attr(c, "num_key_value_heads"):  # (None in Nemotron's class defaults: the model needs it)
        kv = attr(c, "num_key_value_heads", None)
        kw["num_key_value_heads"] = HEADS if kv is None or kv == heads else KV_HEADS
    if head_dim:
        put("hidden_size", HEADS * head_dim)
        if attr(c, "head_dim", None) is None and has_attr(c, "head_dim"):
            kw["head_dim"] = head_dim  # derived before: keep it as the class had it
    for name in ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size",
                 "ffn_hidden_size", "n_inner", "expert_intermediate_size"):
        put(name, 32)
    for name in ("q_lora_rank", "kv_lora_rank"):
        put(name, 32)
    for name, value in vars(c).items():
        if isinstance(value, int) and not isinstance(value, bool) and value > 4 and \
                ("expert" in name and "per_tok" not in name or name in ("n_group", "topk_group")):
            kw[name] = 4 if "expert" in name else 1
    if has_attr(c, "num_experts_per_tok"):
        kw["num_experts_per_tok"] = 2
    for name in ("n_routed_experts", "n_shared_experts"):  # dots1: None by default, needed by the model
        if has_attr(c, name) and attr(c, name) is None:
            kw[name] = 4 if name == "n_routed_experts" else 1
    if has_attr(c, "vocabulary_map") and attr(c, "vocabulary_map") is None:  # chameleon's image token
        kw["vocabulary_map"] = {"<image>": 255}
    kw.update(FAMILY_KWARGS.get(c.model_type, {}))
    put("n_group", 1)
    put("topk_group", 1)
    put("vocab_size", 256)
    put("vocab_size_per_layer_input", 256)  # gemma4: per-layer embeddings (vocab x layers x 256)
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        put(name, 0)
    return kw


def _yarn(rope_parameters, max_pos):
    """The default rope dict(s) with rope_type yarn, factor 4, original context max / 4 (per layer
    type: the full-attention one)."""
    if not isinstance(rope_parameters, dict) or not max_pos:
        return None
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": max_pos // 4}
    if "rope_type" in rope_parameters:
        return {**rope_parameters, **yarn}
    if isinstance(rope_parameters.get("full_attention"), dict):
        return {**rope_parameters, "full_attention": {**rope_parameters["full_attention"], **yarn}}
    return None


_CONFIGS = {}
VARIANTS = ("default", "yarn", "window", "shape", "heads")


def family_config(model_type, variant):
    key = (model_type, variant)
    if key not in _CONFIGS:
        text_cls, _ = FAMILIES[model_type]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                kw = _shrunk_kwargs(text_cls)
                config = text_cls(**kw)
            except Exception:  # the class rejects the shrunk sizes: its defaults (a refused family)
                if model_type in SUPPORTED:  # (a full-size model of a supported family would be built)
                    raise
                kw, config = {}, text_cls()
            if variant == "window":
                window = {k: v for k, v in (("sliding_window", 3), ("use_sliding_window", True),
                                            ("max_window_layers", 3), ("window_size", 3)) if has_attr(config, k)}
                try:  # (gpt_neo: window_size)
                    config = text_cls(**kw, **window) if {"sliding_window", "window_size"} & set(window) else None
                except Exception as exc:
                    config = f"transformers rejects the window variant: {exc!r:.200}"
            if variant == "shape":  # head_dim not hidden / heads, partial rotation, another base
                try:
                    rp = getattr(config, "rope_parameters", None)
                    rp = {**rp, "rope_theta": 12345.0, "partial_rotary_factor": 0.5} \
                        if isinstance(rp, dict) and "rope_type" in rp else None
                    shape = {"head_dim": 32} if attr(config, "head_dim") else {}
                    if model_type == "dbrx":  # the authors' base (attn_config), which 5.23 ignores: the same
                        shape["attn_config"] = {**kw["attn_config"], "rope_theta": 12345.0}
                    config = text_cls(**{**kw, **shape}, rope_parameters=rp) if rp else None
                    # Some families cannot run it (head_dim or the factor ignored): a 2-token trial, only
                    # for the families posenc supports (the others are refused by name whatever the
                    # config, and some, e.g. blt, do not shrink and would exhaust the memory).
                    if config is not None and model_type in SUPPORTED:
                        model = build(config)
                        model(**model_inputs(model, torch.ones(1, 2, dtype=torch.long)), use_cache=False)
                except Exception as exc:
                    config = f"transformers rejects the shape variant: {exc!r:.200}"
            if variant == "heads":  # hidden / heads halves; an explicit head_dim stays (posenc must tell)
                heads = {"num_attention_heads": 2 * HEADS} if "num_attention_heads" in kw else {}
                if heads and "num_key_value_heads" in kw:
                    same = kw["num_key_value_heads"] == HEADS
                    heads["num_key_value_heads"] = 2 * HEADS if same else KV_HEADS
                try:
                    config = text_cls(**{**kw, **heads}) if heads and model_type in SUPPORTED else None
                    if config is not None:  # (a 2-token trial, as the shape variant)
                        model = build(config)
                        model(**model_inputs(model, torch.ones(1, 2, dtype=torch.long)), use_cache=False)
                except Exception as exc:
                    config = f"transformers rejects the heads variant: {exc!r:.200}"
            if variant == "yarn":
                rp = _yarn(getattr(config, "rope_parameters", None), getattr(config, "max_position_embeddings", None))
                try:
                    config = None if rp is None else text_cls(**kw, rope_parameters=rp)
                except Exception as exc:  # e.g. phi3: yarn becomes longrope, which needs factor lists
                    config = f"transformers rejects the yarn variant: {exc!r:.200}"
        _CONFIGS[key] = config
    return _CONFIGS[key]


def _model_class(config):
    name = BACKBONES.get(config.model_type) or modeling_auto.MODEL_MAPPING_NAMES.get(config.model_type)
    if name and hasattr(transformers, name):  # (VoxtralRealtimeTextModel: mapped, not exported)
        return getattr(transformers, name)
    module = importlib.import_module(type(config).__module__.replace(".configuration_", ".modeling_"))
    for obj in vars(module).values():  # e.g. MllamaTextModel: a text model without an auto mapping
        if isinstance(obj, type) and issubclass(obj, transformers.PreTrainedModel) and \
                getattr(obj, "config_class", None) is type(config) and obj.__name__.endswith("Model") and \
                not obj.__name__.endswith("PreTrainedModel"):  # (the base class: no forward)
            return obj
    raise LookupError(f"{config.model_type}: no model class")


def build(config):
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = _model_class(config)(config)
    if hasattr(model, "set_default_language"):  # xmod: one adapter per language, none chosen by default
        model.set_default_language(config.languages[0])
    return model.eval()


def plan(d):
    return posenc.ModelPositions.from_hf(d, warn=False)


def layer_index(name):
    parts = name.split(".")
    for i, (a, b) in enumerate(zip(parts, parts[1:])):
        if a in ("layers", "layer", "h", "blocks") and b.isdigit():
            # longcat_flash: two attention sublayers per decoder layer, self_attn.0 / .1 (layers 2i, 2i + 1)
            sub = parts[i + 2:i + 4]
            if len(sub) == 2 and sub[0] == "self_attn" and sub[1].isdigit():
                return 2 * int(b) + int(sub[1])
            return int(b)
    return None


# ------------------------------------------------------------------ capturing the attention calls


class Capture:
    """Wraps every attention module's eager_attention_forward: records, per layer, the q and k it
    receives (after RoPE), the mask and its keyword arguments."""

    def __init__(self, model):
        self.model = model
        self.names = {mod: name for name, mod in model.named_modules()}
        self.calls = {}
        self.modules = {}
        for name, mod in model.named_modules():
            cls = type(mod).__name__
            vision_tower = "Vision" in cls and "VisionText" not in cls  # (Granite4VisionTextAttention: text)
            attention = cls.endswith(("Attention", "MLA"))  # (LongcatFlashMLA)
            if attention and not vision_tower and layer_index(name) is not None:
                self.modules.setdefault(layer_index(name), mod)
        self.patched = []
        for mod in {sys.modules[type(m).__module__] for m in self.modules.values()}:
            orig = getattr(mod, "eager_attention_forward", None)
            if orig is not None:
                self.patched.append((mod, orig))
                mod.eager_attention_forward = self._wrap(orig)

    def _wrap(self, orig):
        def wrapper(module, query, key, value, attention_mask, *args, **kwargs):
            i = layer_index(self.names.get(module, ""))
            self.calls[i] = dict(query=query.detach().clone(), key=key.detach().clone(),
                                 mask=None if attention_mask is None else attention_mask.detach().clone(),
                                 kwargs={k: v for k, v in kwargs.items() if not torch.is_tensor(v)})
            return orig(module, query, key, value, attention_mask, *args, **kwargs)
        return wrapper

    def close(self):
        for mod, orig in self.patched:
            mod.eager_attention_forward = orig


class ApplyCapture:
    """For families whose attention has no eager_attention_forward (gptj, falcon, bloom, mpt): the
    inputs and outputs of the family's apply_rotary_pos_emb, per layer."""

    def __init__(self, modules):
        self.layer, self.calls, self.patched, self.hooks = None, {}, [], []
        for i, mod in modules.items():
            self.hooks.append(mod.register_forward_pre_hook(lambda *_, i=i: setattr(self, "layer", i)))
        for mod in {sys.modules[type(m).__module__] for m in modules.values()}:
            orig = getattr(mod, "apply_rotary_pos_emb", None)
            if orig is not None:
                self.patched.append((mod, orig))
                mod.apply_rotary_pos_emb = self._wrap(orig)

    def _wrap(self, orig):
        def wrapper(*args, **kwargs):
            out = orig(*args, **kwargs)
            pairs = zip(args[:2], out) if isinstance(out, tuple) else [(args[0], out)]
            self.calls.setdefault(self.layer, []).extend((a.detach().clone(), b.detach().clone()) for a, b in pairs)
            return out
        return wrapper

    def close(self):
        for mod, orig in self.patched:
            mod.apply_rotary_pos_emb = orig
        for h in self.hooks:
            h.remove()


def learned_offset(table):
    """The row of position 0: OPT / BioGPT add `offset` (2); the RoBERTa family's table has
    padding_idx = pad_token_id and position 0 reads row pad + 1 (create_position_ids_from_input_ids)."""
    if hasattr(table, "offset"):
        return table.offset
    padding = getattr(table, "padding_idx", None)
    return 0 if padding is None else padding + 1


def check_sinusoidal_table(m, model, where):
    """The fixed table the model adds to its embeddings against posenc.sinusoidal with the plan's
    ModelPositions.sinusoidal: CTRL's pos_encoding (position p at row p), XGLM's and Kosmos-2's
    embed_positions.weights (row p + 2; Kosmos-2: p + pad_token_id + 1). transformers builds both with fp32 angles: ~position * 2^-24 rad (the first 1024 rows)."""
    s = m.sinusoidal
    assert s is not None and s["dim"] == model.config.hidden_size, where
    table = getattr(model, "pos_encoding", None)
    if table is None:  # (Kosmos2TextModel: model.embed_positions)
        table = next(mod for n, mod in model.named_modules() if n.split(".")[-1] == "embed_positions").weights
    n = min(table.shape[0] - s["offset"], 1024)
    want = table[s["offset"]:s["offset"] + n].double().numpy()
    got = posenc.sinusoidal(np.arange(n), s["dim"], s["base"], s["layout"], frequencies=s["frequencies"],
                            offset=s["offset"])
    np.testing.assert_allclose(got, want, atol=2e-4, err_msg=where)


def check_legacy(model_type, m, model, ids, pos, modules):
    """Scale from the attention module's attribute; the rotation from apply_rotary_pos_emb's
    inputs and outputs (its input is the rotated slice [0, R) the attention cut: checked to be
    posenc's width)."""
    cap = ApplyCapture(modules)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model(input_ids=ids, position_ids=pos, use_cache=False)
    finally:
        cap.close()
    for layer in m.layers:
        where = f"{model_type} layer {layer.layer}"
        attn = modules[layer.layer]
        attn = getattr(attn, "attention", attn)  # gpt_neo: GPTNeoAttention wraps GPTNeoSelfAttention
        attn = getattr(attn, "self", attn)  # megatron-bert, rembert: *Attention wraps *SelfAttention
        scale = next((float(getattr(attn, n)) for n in ("scaling", "inv_norm_factor", "softmax_scale")
                      if getattr(attn, n, None) is not None), None)
        if scale is None and hasattr(attn, "scale_attn"):
            scale = 1 / float(attn.scale_attn)  # gptj: _attn divides by sqrt(head_dim)
        if scale is None and hasattr(attn, "attention_head_size"):
            # megatron-bert, rembert: scores / sqrt(head) (modeling_megatron_bert.py L172, rembert L181)
            scale = attn.attention_head_size ** -0.5
        if scale is None and model_type == "openai-gpt":  # modeling_openai.py _attn: w / sqrt(head) if scale
            scale = (attn.split_size // attn.n_head) ** -0.5 if attn.scale else 1.0
        if scale is None and hasattr(attn, "norm_factor"):  # gpt_neox_japanese: baddbmm alpha 1 / norm_factor
            scale = 1 / float(attn.norm_factor)
        if scale is None and model_type == "gpt_neo":
            scale = 1.0  # modeling_gpt_neo.py _attn: q k^T, no scaling attribute
        assert layer.attention.softmax_scale == pytest.approx(scale, rel=1e-6), where
        bias = getattr(attn, "bias", None)  # a (1, 1, P, P) bool mask buffer (gpt_neo's local window)
        if torch.is_tensor(bias) and bias.dtype == torch.bool and bias.dim() == 4:
            assert torch.equal(bias[0, 0, :T, :T], posenc_mask(layer.attention, T)), f"{where}: mask"
        if layer.position == "sinusoidal":
            check_sinusoidal_table(m, model, where)
        calls = cap.calls.get(layer.layer, [])
        if layer.position != "rope":
            assert not calls, f"{where}: rotated in transformers"
            continue
        assert calls, f"{where}: no apply_rotary_pos_emb call"
        lo, hi = layer.rotary_dims
        for x, y in calls:
            if model_type in ("gptj", "codegen"):  # (B, T, H, R): _split_heads keeps heads third
                x, y = x.transpose(1, 2), y.transpose(1, 2)
            assert lo == 0 and x.shape[-1] == hi - lo, where
            full = torch.zeros(*x.shape[:-1], layer.rope.head_dim)
            full[..., :x.shape[-1]] = x
            want = expected_rotation(full, layer, pos.numpy(), int(pos.max()) + 1)[..., :x.shape[-1]]
            torch.testing.assert_close(y.float(), want.float(), atol=2e-3 * max(1.0, float(x.abs().max())), rtol=1e-4,
                                       msg=lambda msg: f"{where}: {msg}")


def identity_rope_hook(module, args, kwargs):
    """Forward pre-hook: this layer's position_embeddings become cos = 1, sin = 0 (no rotation)."""
    if kwargs.get("position_embeddings", False) is None:  # a NoPE layer (granite_swa's base 0)
        return args, kwargs
    pe = kwargs.get("position_embeddings")
    positional = args[1] if len(args) > 1 else None  # (qwen4_exp's decoder passes it second, by position)
    if pe is None and isinstance(positional, tuple) and len(positional) == 2 and all(map(torch.is_tensor, positional)):
        cos, sin = positional
        return (args[0], (torch.ones_like(cos), torch.zeros_like(sin)), *args[2:]), kwargs
    if pe is None:
        raise AssertionError(f"{type(module).__name__}: no position_embeddings keyword to neutralize")
    if torch.is_tensor(pe):  # complex freqs_cis (llama4): e^(i angle) -> 1
        kwargs["position_embeddings"] = torch.ones_like(pe)
    else:
        cos, sin = pe
        kwargs["position_embeddings"] = (torch.ones_like(cos), torch.zeros_like(sin))
    return args, kwargs


def identity_rotary_output(module, args, out):
    """Forward hook on a layer's own rotary module (recurrent_gemma): cos = 1, sin = 0."""
    cos, sin = out
    return torch.ones_like(cos), torch.zeros_like(sin)


def model_inputs(model, ids):
    """input_ids, or what a text model that cannot start from them takes instead (the same every call)."""
    c = model.config
    # no token embedding: the thinker's states come in (the talker); CSM sums its codebooks' embeddings
    if c.model_type in ("qwen3_omni_moe_talker_text", "csm"):
        return dict(inputs_embeds=torch.randn(*ids.shape, c.hidden_size, generator=torch.Generator().manual_seed(0)))
    if c.model_type == "voxtral_realtime_text":  # each layer's ada_rms_norm of the delay tokens' time embedding
        return dict(input_ids=ids, t_cond=torch.zeros(1, 1, c.hidden_size))  # (VoxtralRealtimeModel.forward)
    return dict(input_ids=ids)


def run(model, ids, pos, identity_layer=None, capture=None):
    handle = None
    if identity_layer is not None:
        attn = capture.modules[identity_layer]
        own = getattr(attn, "rotary_emb", None)  # a rotary module per attention layer
        handle = own.register_forward_hook(identity_rotary_output) if own is not None else \
            attn.register_forward_pre_hook(identity_rope_hook, with_kwargs=True)
    try:
        capture.calls = {}
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model(**model_inputs(model, ids), position_ids=pos, use_cache=False)
        return capture.calls
    finally:
        if handle is not None:
            handle.remove()


# ------------------------------------------------------------------ transformers' rotary modules


def rotary_modules(model):
    out = {}
    own = type(model).__name__.removesuffix("Model")  # (HiggsAudioV2RotaryEmbedding: the model's own)
    for name, mod in model.named_modules():
        cls = type(mod).__name__
        rest = cls.removeprefix(own)
        tower = any(s in rest for s in ("Vision", "Audio", "Vit")) and "VisionText" not in rest
        if cls.endswith("RotaryEmbedding") and not tower:
            out[name] = mod
    return out


def rotary_for_layer(rotaries, i, base=None):
    own = [m for n, m in rotaries.items() if layer_index(n) == i]
    shared = [m for n, m in rotaries.items() if layer_index(n) is None]
    # granite_swa: one shared module per distinct base (rotary_embs.k): the layer's base picks it
    by_base = [m for m in shared if base is not None and
               (getattr(getattr(m, "config", None), "rope_parameters", None) or {}).get("rope_theta") == base]
    return (own or by_base or shared or [None])[0]


# ------------------------------------------------------------------ the checks


def expected_rotation(x, layer, pos, seq_len):
    """x: (B, H, T, D) torch, unrotated -> posenc's rotation of the layer's range, (B, H, T, D)."""
    rc = layer.rope
    lo = layer.rotary_dims[0]
    width = rc.head_dim  # the RopeConfig's head: the rotated range (and pass-through dims after it)
    xs = x.transpose(1, 2).double().numpy().astype(np.float32)
    out = xs.copy()
    positions = np.stack([pos] * 3) if rc.num_position_streams == 3 else pos
    out[..., lo:lo + width] = posenc.rope(np.ascontiguousarray(xs[..., lo:lo + width]), positions, config=rc, seq_len=seq_len)
    return torch.from_numpy(out).transpose(1, 2)


def assert_rotation(name, got, pre, layer, pos, seq_len, permuted, after):
    if layer.position != "rope":
        torch.testing.assert_close(got, pre, atol=1e-6, rtol=1e-6, msg=f"{name}: no RoPE in posenc, rotated in transformers")
        return
    lo, hi = layer.rotary_dims
    if permuted:
        # DeepSeek-V3's apply_rotary_pos_emb_interleave reads pairs (2j, 2j + 1) and writes
        # [x_even' | x_odd'] (include/posenc/model.h): with cos = 1, sin = 0 it still permutes, so
        # the unrotated run gave [x_even | x_odd]; posenc's interleaved rotation, then that permutation.
        r = pre[..., lo:hi]
        half = (hi - lo) // 2
        pre = torch.cat([pre[..., :lo], torch.stack([r[..., :half], r[..., half:]], -1).flatten(-2), pre[..., hi:]], -1)
    want = expected_rotation(pre, layer, pos, seq_len)
    if permuted:
        r = want[..., lo:hi]
        want = torch.cat([want[..., :lo], r[..., 0::2], r[..., 1::2], want[..., hi:]], -1)
    if after is not None:  # a norm the family applies after RoPE (llama4's L2, hunyuan's RMS norms)
        with torch.no_grad():
            want = after(want.float())
    tol = dict(atol=2e-3 * max(1.0, float(pre.abs().max())), rtol=1e-4)
    torch.testing.assert_close(got.float(), want.float(), **tol, msg=lambda m: f"{name}: {m}")


def allowed_mask(mask, t):
    """HF's 4-D attention mask (float, -inf/min where masked; or bool) -> (t, t) bool, True = attends."""
    if mask is None:
        return None
    m = mask[0, 0, -t:, -t:]
    return m if m.dtype == torch.bool else m > torch.finfo(m.dtype).min / 2


def posenc_mask(a, t):
    i = np.arange(t)[:, None]
    j = np.arange(t)[None, :]
    ok = np.ones((t, t), bool)
    if a.causal:
        ok &= j <= i
    if a.window:  # |q - k| < window (causal: the window keys up to the query)
        ok &= np.abs(i - j) < a.window
    if a.chunk:
        ok &= i // a.chunk == j // a.chunk
    return torch.from_numpy(ok)


PERMUTED_WRITE_BACK = {"deepseek_v3", "youtu", "axk1", "axk2", "glm4_moe_lite", "bailing_hybrid", "mistral4",
                       "deepseek_v32", "glm_moe_dsa", "longcat_flash", "dots3_note_text"}


def seq2seq_stacks(model):
    """{"encoder" | "decoder": the stack module} of an encoder-decoder model or of its decoder alone."""
    return {name.split(".")[-1]: mod for name, mod in model.named_modules()
            if name.split(".")[-1] in ("encoder", "decoder") and hasattr(mod, "embed_positions")}


def check_seq2seq(model_type, model, m, inputs):
    """Each stack's self-attention layer by layer (scale, causal or bidirectional mask) and the rows
    its position module hands to the embeddings, against the plan (src/model/seq2seq.cc)."""
    stacks = seq2seq_stacks(model)
    planned = sorted({layer.layer_type for layer in m.layers})
    assert sorted(stacks) == planned, f"{model_type}: stacks {sorted(stacks)}, planned {planned}"
    layers = {}  # plan layer index -> transformers' self-attention module
    first = {t: min(layer.layer for layer in m.layers if layer.layer_type == t) for t in planned}
    for t, stack in stacks.items():
        for i, block in enumerate(stack.layers):
            layers[first[t] + i] = block.self_attn
    assert len(layers) == m.num_layers, f"{model_type}: {len(layers)} attention layers in transformers"
    calls, positions, patched = {}, {}, []
    names = {mod: i for i, mod in layers.items()}

    # whisper, mvp: q_proj(x) * self.scaling, then an unscaled product (whisper's function gets 1.0)
    prescaled = model_type in ("whisper", "mvp")

    def wrap(orig):  # the scaling the attention function receives (where the family has one: not mvp)
        def wrapper(module, query, key, value, attention_mask, *args, **kwargs):
            if module in names:
                scaling = kwargs.get("scaling", module.scaling)
                if prescaled:
                    assert scaling == 1.0, f"{model_type}: the query was scaled already"
                    scaling = module.scaling
                calls[names[module]]["scaling"] = scaling
            return orig(module, query, key, value, attention_mask, *args, **kwargs)
        return wrapper

    def record(module, args, kwargs):  # the mask the self-attention receives; mvp: q * self.scaling
        calls[names[module]] = dict(mask=kwargs.get("attention_mask"), scaling=module.scaling)

    for mod in {sys.modules[type(a).__module__] for a in layers.values()}:
        if hasattr(mod, "eager_attention_forward"):
            patched.append((mod, mod.eager_attention_forward))
            mod.eager_attention_forward = wrap(mod.eager_attention_forward)
    hooks = [stack.embed_positions.register_forward_hook(
        lambda mod, args, out, t=t: positions.__setitem__(t, out.detach().clone())) for t, stack in stacks.items()]
    hooks += [a.register_forward_pre_hook(record, with_kwargs=True) for a in layers.values()]
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model(**inputs, use_cache=False)
    finally:
        for mod, orig in patched:
            mod.eager_attention_forward = orig
        for h in hooks:
            h.remove()
    for layer in m.layers:
        where = f"{model_type} layer {layer.layer} ({layer.layer_type})"
        call, a = calls[layer.layer], layer.attention
        assert a.softmax_scale == pytest.approx(call["scaling"], rel=1e-12), where
        assert layer.qk_head_dim == layers[layer.layer].head_dim, where
        hf_mask = allowed_mask(call["mask"], T)
        if hf_mask is None:  # no mask: every key (the encoder without padding)
            assert not a.causal and not a.window, f"{where}: no mask in transformers"
        else:
            assert torch.equal(hf_mask, posenc_mask(a, T)), f"{where}: mask"
    for t, stack in stacks.items():
        where = f"{model_type} {t}"
        method = next(layer.position for layer in m.layers if layer.layer_type == t)
        got = positions[t].reshape(-1, positions[t].shape[-1]).double()
        n = got.shape[0]  # positions 0 .. n - 1 (whisper's encoder: every row of its table)
        rows = m.encoder_max_position_embeddings if t == "encoder" else m.max_position_embeddings
        table = stack.embed_positions
        if method == "learned":
            off = m.learned_position_offset
            assert table.num_embeddings == rows + off, where
            torch.testing.assert_close(got, table.weight[off:off + n].double(), msg=lambda msg: f"{where}: {msg}")
            continue
        assert method == "sinusoidal", where
        if hasattr(table, "num_embeddings") and model_type != "m2m_100" and model_type != "nllb-moe":
            assert table.num_embeddings == rows, f"{where}: a fixed table of {rows} rows"
        s = m.sinusoidal
        want = posenc.sinusoidal(np.arange(n), s["dim"], s["base"], s["layout"], frequencies=s["frequencies"],
                                 offset=s["offset"])
        np.testing.assert_allclose(got.numpy(), want, atol=2e-4, err_msg=where)


def seq2seq_inputs(config, decoder=True):
    torch.manual_seed(1)
    ids = torch.randint(1, config.vocab_size, (1, T))
    if not decoder:  # the decoder alone (*ForCausalLM)
        return dict(input_ids=ids)
    if config.model_type == "whisper":
        inputs = dict(input_features=torch.randn(1, config.num_mel_bins, 2 * config.max_source_positions))
    else:
        inputs = dict(input_ids=ids)
    return {**inputs, "decoder_input_ids": ids}


def check_deepseek_v4(config, m, variant):
    """The plan against the config class and rotary module (their attention: test_model_deepseek_v4.py)."""
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4RotaryEmbedding

    assert [layer.layer_type for layer in m.layers] == list(config.layer_types), variant
    rotary = DeepseekV4RotaryEmbedding(config)
    for layer in m.layers:
        label = "main" if layer.layer_type == "sliding_attention" else "compress"
        np.testing.assert_allclose(layer.inv_freq(1 << 20)[0], getattr(rotary, f"{label}_inv_freq").double().numpy(),
                                   rtol=2e-6, err_msg=f"deepseek_v4 ({variant}) layer {layer.layer}")
        assert layer.inv_freq()[1] == pytest.approx(getattr(rotary, f"{label}_attention_scaling"))
        assert layer.attention.window == config.sliding_window and layer.attention.sinks
        assert layer.rotary_dims[1] == config.head_dim
        assert layer.rotary_dims[1] - layer.rotary_dims[0] == getattr(rotary, f"{label}_inv_freq").numel() * 2
        assert layer.attention.softmax_scale == pytest.approx(config.head_dim ** -0.5)
        if layer.compressed is not None:
            assert layer.compressed["rate"] == config.compress_rates[layer.layer_type]


def check_family(model_type, config, variant="default"):
    d = config.to_dict()
    m = plan(d)
    if model_type in SEQ2SEQ:
        return check_seq2seq(model_type, build(config), m, seq2seq_inputs(config))
    if model_type in ENCODER_CHECKS:  # their own attention code (python/tests/model/encoder_checks.py)
        return ENCODER_CHECKS[model_type](build(config), m, f"{model_type} ({variant})")
    if model_type == "deepseek_v4":  # compressed keys and rotated values: no eager_attention_forward to capture
        return check_deepseek_v4(config, m, variant)
    text = config
    model = build(config)
    capture = Capture(model)
    try:
        torch.manual_seed(1)
        ids = torch.randint(1, config.vocab_size, (1, T))
        # positions: consecutive (gaps would read as packed sequences in transformers' masks), from a
        # few thousand (fp32 angles stay exact to ~1e-4)
        # (recurrent_gemma states no maximum; its RG-LRU resets where a position is 0)
        pos = min((m.max_position_embeddings or 1 << 20) - T, 3001) + torch.arange(T)[None]
        seq_len = int(pos.max()) + 1
        try:
            rotated = run(model, ids, pos, capture=capture)
        except (RuntimeError, TypeError) as exc:  # transformers' own forward fails (gemma4 + yarn)
            if variant == "default":
                raise
            pytest.skip(f"transformers cannot run the {variant} variant: {exc!r:.200}")
        # xlstm builds num_blocks blocks whatever num_hidden_layers says
        assert m.num_layers == (text.num_blocks if model_type == "xlstm" else text.num_hidden_layers)
        if not any(layer.softmax_attention for layer in m.layers):  # mamba, rwkv: no attention at all
            assert not rotated and not rotary_modules(model), f"{model_type}: transformers attends"
            assert all(layer.position == "none" for layer in m.layers), model_type
            return
        if not rotated:  # no eager_attention_forward in this family's modeling file
            return check_legacy(model_type, m, model, ids, pos, capture.modules)
        layer_types = getattr(text, "layer_types", None)
        rotaries = rotary_modules(model)
        seen = set()  # the rotation and frequencies: once per distinct plan (layers of a type share code)
        for layer in m.layers:
            i = layer.layer
            where = f"{model_type} layer {i} ({layer.layer_type})"
            if layer_types is not None:
                assert layer.layer_type == layer_types[i], where
            call = rotated.get(i)
            if call is None:  # linear attention, convolution: no softmax attention in transformers
                assert layer.position == "none", f"{where}: transformers calls no attention here"
                if layer.layer_type != "cross_attention":  # (mllama: no image in this run)
                    assert not layer.softmax_attention, f"{where}: transformers calls no attention here"
                continue
            assert layer.softmax_attention, f"{where}: transformers attends here"
            a = layer.attention
            kw = call["kwargs"]
            attn = capture.modules[i]
            scaling = kw.get("scaling", getattr(attn, "scaling", None))
            if model_type == "esm":  # q is multiplied by head^-0.5 before RoPE, the kernel uses 1.0
                assert scaling == 1.0, where  # (modeling_esm.py L366, L383: the same scores)
                scaling = attn.self.attention_head_size ** -0.5
            if model_type in ("opt", "kosmos_2_5_text_model"):  # q times self.scaling first, the kernel 1.0
                scaling = attn.scaling  # (modeling_opt.py L151, L174; modeling_kosmos2_5.py L810-827)
            if model_type == "openai_privacy_filter":  # q and k each times head_dim^-0.25 after RoPE, the
                assert scaling == 1.0, where           # kernel then 1.0 (modeling_openai_privacy_filter.py)
                scaling = attn.scaling ** 2
            if model_type.startswith("muse_"):  # the normed q times qk_scale_factor before RoPE (linear in q)
                scaling = scaling * config.qk_scale_factor  # (modeling_muse_glimmer.py MuseGlimmerAttention)
            assert a.softmax_scale == pytest.approx(scaling, rel=1e-12), where
            assert (a.softcap or None) == kw.get("softcap"), where
            if "sliding_window" in kw:
                assert a.window == (kw["sliding_window"] or 0), where
            assert a.sinks == (getattr(attn, "sinks", None) is not None), where  # (mimo: None on full layers)
            hf_mask = allowed_mask(call["mask"], T)
            if hf_mask is not None:
                assert torch.equal(hf_mask, posenc_mask(a, T)), f"{where}: mask"
            else:  # no mask tensor: eager attention attends to every key (bert without is_decoder; a window
                # wider than the T keys: modernbert's sliding layers)
                assert posenc_mask(a, T).all(), f"{where}: no mask in transformers"
            if layer.position == "learned":  # the table: max_position_embeddings + offset rows
                table = next(mod for n, mod in model.named_modules() if n.endswith(("wpe", "embed_positions", "position_embeddings")))
                assert table.num_embeddings == m.max_position_embeddings + m.learned_position_offset, where
                assert learned_offset(table) == m.learned_position_offset, where
            if layer.position == "sinusoidal":
                check_sinusoidal_table(m, model, where)
            if layer.position in ("learned", "alibi", "t5", "sinusoidal"):
                continue  # no rotation
            key = (layer.layer_type, layer.position, repr(layer.rope), layer.rotary_dims)
            if key in seen:
                continue
            if layer.position == "none" and not rotaries:  # no rotary module: nothing can rotate
                continue
            seen.add(key)
            # the rotation: this layer once more, without RoPE
            plain = run(model, ids, pos, identity_layer=i, capture=capture)[i]
            permuted = model_type in PERMUTED_WRITE_BACK and getattr(text, "rope_interleave", True)
            after = dict.fromkeys(("query", "key"))
            if model_type == "llama4_text" and text.use_qk_norm:  # an L2 norm (cancels any attention factor)
                after = dict.fromkeys(("query", "key"),
                                      lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
            if model_type == "nanochat":  # weightless RMS norms after RoPE (modeling_nanochat.py L224-226)
                eps = text.rms_norm_eps
                after = dict.fromkeys(("query", "key"),
                                      lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))
            if model_type.startswith("hunyuan_v1"):  # RMS norms after RoPE (modeling_hunyuan_v1_dense.py L197)
                after = {"query": attn.query_layernorm, "key": attn.key_layernorm}
            for t in ("query", "key"):
                assert_rotation(f"{where} {t}", call[t], plain[t], layer, pos.numpy(), seq_len, permuted,
                                after[t])
            # the frequencies of the family's rotary module at several lengths
            if layer.position == "rope":
                rotary = rotary_for_layer(rotaries, i, layer.rope.base)
                scaled = getattr(text, "rope_scaling_layers", None)  # molmo2: the others take the unscaled module
                if model_type == "molmo2_text" and scaled is not None and i not in scaled:
                    rotary = next(r for n, r in rotaries.items() if n.endswith("rotary_emb_unscaled"))
                assert rotary is not None, f"{where}: no rotary module in transformers"
                s = layer.rope.scaling
                original = s.original_max_position_embeddings or m.max_position_embeddings or 4096
                for n in sorted({1, original, 2 * original}):
                    want, want_factor = hf_frequencies(rotary, layer.layer_type, n, layer.rope.num_position_streams)
                    if layer.rope.multimodal == "mrope_alternating_hw":  # ERNIE's buffer: the first 2h
                        hw = 2 * layer.rope.mrope_section[0]  # frequencies even then odd (pre-permuted)
                        natural = want.clone()
                        natural[:hw][0::2], natural[:hw][1::2] = want[:hw // 2], want[hw // 2:hw]
                        want = natural
                    got, got_factor = layer.inv_freq(n)
                    assert got.shape == tuple(want.shape), f"{where} seq_len {n}"
                    np.testing.assert_allclose(got, want.double().numpy(), rtol=2e-6, err_msg=f"{where} seq_len {n}")
                    assert got_factor == pytest.approx(float(want_factor), rel=1e-6), f"{where} seq_len {n}"
    finally:
        capture.close()


@pytest.mark.parametrize("model_type", sorted(set(FAMILIES) & SUPPORTED))
def test_partial_rotation_of_a_scaled_rope_runs_in_transformers_or_is_refused(model_type):
    """The yarn variant with partial_rotary_factor 0.5 in its dict: every scaling init reads the factor
    (modeling_rope_utils.py), and a family whose apply_rotary_pos_emb rotates the whole head then fails at
    the first forward. posenc must plan it exactly where transformers runs it (the plan is then checked by
    the variants above), and refuse it where transformers fails."""
    config = family_config(model_type, "yarn")
    rp = getattr(config, "rope_parameters", None) if config is not None and not isinstance(config, str) else None
    if not isinstance(rp, dict) or "rope_type" not in rp:
        pytest.skip(f"{model_type}: no yarn variant with a flat rope dict")
    text_cls, _ = FAMILIES[model_type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**_shrunk_kwargs(text_cls), rope_parameters={**rp, "partial_rotary_factor": 0.5})
    try:
        model = build(config)
        with torch.no_grad():
            model(**model_inputs(model, torch.ones(1, 2, dtype=torch.long)), use_cache=False)
        error = None
    except (RuntimeError, ValueError) as exc:
        error = exc
    if error is None:
        plan(config.to_dict())
    else:
        with pytest.raises(posenc.Error, match="partial_rotary_factor|rope_type|mrope_section|rotary_dim"):
            plan(config.to_dict())


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_family_matches_transformers_or_is_refused(model_type, variant):
    config = family_config(model_type, variant)
    if config is None:
        pytest.skip(f"{model_type}: no {variant} variant (no rope_parameters, window or heads to change)")
    if isinstance(config, str):
        pytest.skip(f"{model_type}: {config}")
    try:
        plan(config.to_dict())
    except posenc.Error as exc:
        assert f"'{model_type}'" in str(exc), str(exc)
        if model_type in SUPPORTED and "its rotation covers all" in str(exc):
            # a scaled rope type's partial rotation on a whole-head family (gemma4_text's yarn variant keeps
            # the proportional dict's factor): refused where transformers fails too
            with pytest.raises((RuntimeError, ValueError)), torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = build(config)
                model(**model_inputs(model, torch.ones(1, 2, dtype=torch.long)), use_cache=False)
            return
        if model_type in SUPPORTED:
            expected = ILL_FORMED_DEFAULTS.get(model_type, ())
            assert any(e in str(exc) for e in (expected if isinstance(expected, tuple) else (expected,))), \
                f"{model_type} ({variant}) refused: {exc}"
        return
    assert model_type in SUPPORTED, f"{model_type} is planned, yet its bare config is refused by name"
    check_family(model_type, config, variant)


@pytest.mark.parametrize("wrapper,text_type", WRAPPERS)
def test_wrapper_gives_its_text_config_plan(wrapper, text_type):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = configuration_auto.CONFIG_MAPPING[wrapper]()
    outer, inner = config.to_dict(), config.get_text_config().to_dict()
    try:
        want = plan(inner)
    except posenc.Error:
        with pytest.raises(posenc.Error, match=f"'?({text_type}|{wrapper})('|'s )"):
            plan(outer)
        return
    try:
        got = plan(outer)
    except posenc.Error as exc:  # a wrapper without text_config (vision-encoder-decoder): refused by name
        assert f"'{wrapper}'" in str(exc), str(exc)
        return
    assert got.model_type == want.model_type and got.num_layers == want.num_layers
    assert [repr(a) for a in got.layers] == [repr(b) for b in want.layers]


def _text_class_wrappers():
    """(wrapper, text model_type) for every config class whose sub_configs_defaults names a concrete class
    for text_config (not AutoConfig): SubConfigSpec.create_subconfig (configuration_utils.py L248-256) builds
    text_config with that class whatever model_type the dict has or lacks."""
    out = []
    for mt, cls in configuration_auto.CONFIG_MAPPING.items():
        spec = (getattr(cls, "sub_configs_defaults", None) or {}).get("text_config")
        if spec is not None and isinstance(spec.config_class, type) and \
                issubclass(spec.config_class, transformers.PreTrainedConfig):
            out.append((mt, spec.config_class.model_type))
    return sorted(out)


TEXT_CLASS_WRAPPERS = _text_class_wrappers()


def _outcome(d):
    """posenc's plan of d as comparable values, or its error message without the text_config. prefix."""
    try:
        m = plan(d)
    except posenc.Error as exc:
        return "error", str(exc).replace("text_config.", "")
    return m.model_type, m.num_layers, [repr(a) for a in m.layers]


def test_text_class_wrappers_are_found():
    found = dict(TEXT_CLASS_WRAPPERS)
    for wrapper, text_type in [("aria", "aria_text"), ("deepseek_ocr2", "deepseek_ocr2_text"),
                               ("emu3", "emu3_text_model"), ("granite_docling", "granite_docling_text"),
                               ("pix2struct", "pix2struct_text_model"), ("molmo2", "molmo2_text"),
                               ("qwen2_5_omni_thinker", "qwen2_5_omni_text"),
                               ("qwen3_5_moe", "qwen3_5_moe_text"), ("qwen3_vl_moe", "qwen3_vl_moe_text"),
                               ("gemma3", "gemma3_text")]:
        assert found.get(wrapper) == text_type, (wrapper, found.get(wrapper))


@pytest.mark.parametrize("wrapper,text_type", TEXT_CLASS_WRAPPERS)
def test_wrapper_text_class_wins_over_text_config_model_type(wrapper, text_type):
    """A wrapper with a concrete text class builds a text_config without model_type, and one whose
    model_type names another family, as that class (configuration_utils.py L248-256; to_dict writes the
    class's model_type): posenc's plan of the wrapper's dict must be the plan of get_text_config().to_dict()
    (or the same refusal), with a warning naming an ignored model_type (Step3p7Config pops it silently,
    configuration_step3p7.py L331-332)."""
    cls = configuration_auto.CONFIG_MAPPING[wrapper]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        untyped = {k: v for k, v in cls().text_config.to_dict().items() if k != "model_type"}
    for given in (None, "llama"):
        text = {**copy.deepcopy(untyped), **({"model_type": given} if given else {})}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = cls(text_config=copy.deepcopy(text))
        inner = config.get_text_config().to_dict()
        assert type(config.get_text_config()).model_type == inner["model_type"] == text_type
        want = _outcome(inner)
        got = _outcome({**config.to_dict(), "text_config": text})
        assert got == want, (given, got, want)
        if want[0] == "error":
            assert re.search(rf"'?({re.escape(text_type)}|{re.escape(wrapper)})('|'s )", got[1]), got[1]
            continue
        warned = [w for w in plan({**config.to_dict(), "text_config": text}).warnings if "is ignored" in w]
        if given and wrapper != "step3p7":
            assert any(f'text_config.model_type = "{given}" is ignored' in w and f"'{text_type}'" in w
                       for w in warned), warned
        else:
            assert not any("model_type" in w for w in warned), warned


def _default_text_wrappers():
    """(wrapper, default text model_type) for every config class whose sub_configs_defaults gives text_config
    an AutoConfig spec: SubConfigSpec.create_subconfig (configuration_utils.py L248-256) builds a text_config
    dict as the class of its own model_type, or of the spec's default model_type where it has none."""
    out = []
    for mt, cls in configuration_auto.CONFIG_MAPPING.items():
        spec = (getattr(cls, "sub_configs_defaults", None) or {}).get("text_config")
        if spec is not None and not (isinstance(spec.config_class, type) and
                                     issubclass(spec.config_class, transformers.PreTrainedConfig)):
            out.append((mt, spec.model_type))
    return sorted(out)


DEFAULT_TEXT_WRAPPERS = _default_text_wrappers()
# Text config keys a wrapper's validate_architecture needs (the default text class's values fail it).
WRAPPER_TEXT_KEYS = {"gemma4_assistant": {"hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 0}}


def test_default_text_wrappers_are_found():
    found = dict(DEFAULT_TEXT_WRAPPERS)
    for wrapper, text_type in [("llava", "llama"), ("mistral3", "mistral"), ("paligemma", "gemma"),
                               ("internvl", "qwen2"), ("voxtral", "llama"), ("idefics2", "mistral"),
                               ("blip-2", "opt"), ("shieldgemma2", "gemma3_text"),
                               ("sam3", "clip_text_model"),
                               ("exaone4_5", "exaone4")]:
        assert found.get(wrapper) == text_type, (wrapper, found.get(wrapper))
    assert not set(found) & {w for w, _ in TEXT_CLASS_WRAPPERS}


@pytest.mark.parametrize("wrapper,default_type", DEFAULT_TEXT_WRAPPERS)
def test_wrapper_default_text_type_fills_a_missing_model_type(wrapper, default_type):
    """A wrapper with an AutoConfig text spec builds a text_config without model_type as its default type
    (LlavaConfig: llama): posenc's plan of {"model_type": wrapper, "text_config": dict without model_type}
    must be the plan of get_text_config().to_dict() (or the same refusal, naming the text family). A present
    model_type keeps winning. Exaone4_5_Config fails without one (configuration_exaone4_5.py L80): refused."""
    cls = configuration_auto.CONFIG_MAPPING[wrapper]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = cls(text_config=copy.deepcopy(WRAPPER_TEXT_KEYS[wrapper])) if wrapper in WRAPPER_TEXT_KEYS \
            else cls()
    untyped = {k: v for k, v in base.get_text_config().to_dict().items() if k != "model_type"}
    got = _outcome({"model_type": wrapper, "text_config": copy.deepcopy(untyped)})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = cls(text_config=copy.deepcopy(untyped))
    except KeyError:
        assert wrapper == "exaone4_5"
        assert got[0] == "error" and f"'{wrapper}'" in got[1], got
        return
    inner = config.get_text_config().to_dict()
    assert type(config.get_text_config()).model_type == inner["model_type"] == default_type
    want = _outcome(inner)
    assert got == want, (got[:2], want[:2])
    if want[0] == "error":
        assert re.search(rf"'{re.escape(default_type)}'|'{re.escape(want[1].split(chr(39))[1])}'", got[1])
        assert f"'{wrapper}'" not in got[1], got[1]
    # Sparse dicts, untyped and of another family: the keys the class fills back (voxtral, glmasr, pe_audio
    # fill theirs from the spec's init_kwargs, kWrapperTextKwargs) must be the ones posenc plans with.
    other = "mistral" if default_type == "llama" else "llama"
    for sparse in ({"num_hidden_layers": 2}, {"model_type": other, "num_hidden_layers": 2}):
        text = {**WRAPPER_TEXT_KEYS.get(wrapper, {}), **sparse}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                inner = cls(text_config=copy.deepcopy(text)).get_text_config().to_dict()
        except Exception:  # the wrapper validates its text model (gemma4_assistant): no other family
            continue
        assert inner["model_type"] == sparse.get("model_type", default_type)
        assert _outcome({"model_type": wrapper, "text_config": text}) == _outcome(inner), sparse

_ULTRABERT = dict(num_hidden_layers=6, hidden_size=256, num_attention_heads=4, intermediate_size=32,
                  vocab_size=256, pad_token_id=0, bos_token_id=0, eos_token_id=0)


@pytest.mark.parametrize("keys", [
    dict(attention_windows=[64, 64, 0, 32, 64, 0]),                    # types and the first window
    dict(attention_windows=[0, 16, 0, 0, 8, 0], sliding_window=512),   # the windows' first one wins
    dict(rope_theta=[1e4, 2e4, 5e5, 3e4, 4e4, 6e5]),                   # the last base of a type wins
    dict(attention_windows=[0, 8, 8, 0, 8, 8], rope_theta=[7e5, 1e4, 2e4, 8e5, 3e4, 4e4]),
    dict(rope_theta=[1e4] * 6, rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 5e3},
                                                 "full_attention": {"rope_type": "default", "rope_theta": 5e6}}),
])
def test_ultrabert_checkpoint_keys_as_its_config_class_reads_them(keys):
    """UltraBERT's checkpoints save attention_windows and a base per layer (configuration_ultrabert.py
    L83-104): posenc reads them as the config class does, then the whole plan is checked on the model."""
    config = transformers.UltrabertConfig(**_ULTRABERT, **copy.deepcopy(keys))
    m = posenc.ModelPositions.from_hf({"model_type": "ultrabert", **_ULTRABERT, **keys}, warn=False)
    assert [layer.layer_type for layer in m.layers] == config.layer_types
    for layer in m.layers:
        assert layer.rope.base == config.rope_parameters[layer.layer_type]["rope_theta"]
        sliding = layer.layer_type == "sliding_attention"
        assert layer.attention.window == (config.sliding_window + 1 if sliding else 0)
    check_family("ultrabert", config)


@pytest.mark.parametrize("keys", [dict(rope_theta=1e4), dict(rope_theta=[1e4, 2e4])])
def test_ultrabert_checkpoint_keys_transformers_cannot_run_are_refused(keys):
    """A number for rope_theta (zip fails) or a list too short for every layer type (KeyError)."""
    with pytest.raises((TypeError, KeyError)), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build(transformers.UltrabertConfig(**_ULTRABERT, **keys))
    with pytest.raises(posenc.Error, match="rope_theta|no dict for layer type 'full_attention'"):
        plan({"model_type": "ultrabert", **_ULTRABERT, **keys})


def test_falcon_h1_key_multiplier_scales_the_logits_as_transformers():
    """Falcon-H1 multiplies k_proj(x) by key_multiplier before RoPE (modeling_falcon_h1.py L208): the logits
    of the model's attention, from q and k_proj's keys, are those of posenc's plan (scale times the factor).
    Checked on transformers' own attention module with the real Falcon-H1-0.5B factor."""
    import torch
    from transformers.models.falcon_h1 import modeling_falcon_h1 as fh
    d = dict(hidden_size=128, num_attention_heads=2, num_key_value_heads=2, head_dim=64, num_hidden_layers=1,
             key_multiplier=0.39062499999999994, mamba_d_ssm=128, mamba_n_heads=2, mamba_d_head=64,
             mamba_d_state=16, mamba_chunk_size=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.AutoConfig.for_model("falcon_h1", **d)
    attn = fh.FalconH1Attention(config, layer_idx=0)
    m = plan({"model_type": "falcon_h1", **d})
    assert m.layers[0].attention.softmax_scale == pytest.approx(attn.scaling * attn.key_multiplier, rel=1e-15)
    x = torch.randn(1, 5, 128)
    q = attn.q_proj(x).view(1, 5, 2, 64).transpose(1, 2)
    k_model = attn.k_proj(x).view(1, 5, 2, 64).transpose(1, 2) * attn.key_multiplier  # L208
    k_proj = attn.k_proj(x).view(1, 5, 2, 64).transpose(1, 2)
    torch.testing.assert_close(q @ k_model.transpose(-1, -2) * attn.scaling,
                               q @ k_proj.transpose(-1, -2) * m.layers[0].attention.softmax_scale)


@pytest.mark.parametrize("idxs", [[2, 5], [0], [], None, [1, 7], "absent"])
def test_lfm2_full_attn_idxs_pick_the_attention_layers_as_transformers(idxs):
    """LFM2 without layer_types: full_attn_idxs picks the attention layers, the others are convolutions
    (configuration_lfm2.py L82-89); posenc's attention layers must be transformers' full_attention ones."""
    d = dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=6)
    if idxs != "absent":
        d["full_attn_idxs"] = idxs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = transformers.AutoConfig.for_model("lfm2", **copy.deepcopy(d)).layer_types
    m = plan({"model_type": "lfm2", **d})
    assert [layer.layer_type for layer in m.layers] == want
    want_positions = ["rope" if t == "full_attention" else "none" for t in want]
    assert [layer.position for layer in m.layers] == want_positions
    assert any("entry 7 is not a layer" in w for w in m.warnings) == (idxs == [1, 7])


@pytest.mark.parametrize("wrapper,text_type", sorted(set(TEXT_CLASS_WRAPPERS) | set(DEFAULT_TEXT_WRAPPERS)))
def test_flat_wrapper_config_is_read_as_its_class_reads_it_or_warned(wrapper, text_type):
    """A wrapper's config saved flat (the text model's keys at the top level, no text_config). Qwen2-VL's
    class and a few others build text_config from those keys (wrapper_reads_flat_keys): posenc's plan must be
    the plan of get_text_config().to_dict(), without a warning. The others ignore them and build their text
    class's defaults (a Llama 4 config flattened for another engine): where the wrapper's own type names a
    text model in posenc's table, posenc reads the keys as the file means them and must say that transformers
    would not; other wrappers (llava, blip-2: keys of their own at the top level) are refused by name.
    RopeConfig.from_hf reads the flat form by the same rules (never by the generic ones where it is
    planned)."""
    cls = configuration_auto.CONFIG_MAPPING[wrapper]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            base = cls(text_config=copy.deepcopy(WRAPPER_TEXT_KEYS.get(wrapper))) \
                if wrapper in WRAPPER_TEXT_KEYS else cls()
        except Exception:  # exaone4_5: needs a typed text_config
            pytest.skip(f"{wrapper}'s class cannot be built from its defaults")
    text = {k: v for k, v in base.get_text_config().to_dict().items() if k != "model_type"}
    if not isinstance(text.get("max_position_embeddings"), int):
        pytest.skip(f"{text_type} has no max_position_embeddings to mark the flat keys by")
    text["max_position_embeddings"] *= 2  # read from the flat keys, or the class default
    flat = {**text, "model_type": wrapper}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            inner = cls(**copy.deepcopy(flat)).get_text_config()
    except Exception:  # the class cannot take its own text keys flat (fuyu): posenc refuses or warns below
        inner = None
    reads = inner is not None and inner.max_position_embeddings == text["max_position_embeddings"]
    got = _outcome(flat)
    if wrapper == "fuyu":  # FuyuConfig forwards some keys only: refused flat, by name
        assert got[0] == "error" and "'fuyu' without text_config" in got[1], got
        return
    # refused by name (exaone4_5: a typed text_config only)
    if got[0] == "error" and f"'{wrapper}'" in got[1]:
        assert not reads or wrapper == "fuyu", got[1]
        return
    with warnings.catch_warnings(record=True) as rope_warnings:
        warnings.simplefilter("always")
        try:
            posenc.RopeConfig.from_hf(copy.deepcopy(flat))
        except posenc.Error:
            pass
    messages = [str(w.message) for w in rope_warnings]
    assert not any("generic rules" in w for w in messages), messages
    # The same plan, or the same refusal, as the text model's own dict.
    assert got == _outcome(inner.to_dict() if reads else {**text, "model_type": text_type}), got[:2]
    if got[0] == "error":
        return
    warned = [w for w in plan(flat).warnings if "without text_config" in w]
    if reads:
        assert not warned, warned
    else:
        assert any(f"model_type '{wrapper}' without text_config" in w
                   and "transformers 5 reads text_config only" in w for w in warned), warned


def _without_each_key(config):
    """(key, dict without key) for every key whose absence the config class fills back with the same
    value (config.json files omit class defaults: save_pretrained writes the non-default keys)."""
    cls, d = type(config), config.to_dict()
    same = {k: v for k, v in d.items() if k != "transformers_version"}
    for k in d:
        if k in ("model_type", "transformers_version"):
            continue
        rest = {x: v for x, v in d.items() if x != k}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                again = cls(**{x: v for x, v in rest.items() if x not in ("model_type", "transformers_version")})
        except Exception:
            continue
        if {x: v for x, v in again.to_dict().items() if x != "transformers_version"} == same:
            yield k, rest


@pytest.mark.parametrize("model_type", sorted(SUPPORTED & set(FAMILIES)))
def test_omitted_keys_take_the_class_defaults(model_type):
    """A key the config class would fill back with the same value may be absent from config.json:
    posenc's plan must not change (gptj's rotary_dim 64, mllama's cross_attention_layers, ...)."""
    for variant in VARIANTS:
        config = family_config(model_type, variant)
        if config is None or isinstance(config, str):
            continue
        try:
            want = [repr(a) for a in plan(config.to_dict()).layers]
        except posenc.Error:
            continue  # refused (ILL_FORMED_DEFAULTS): checked above
        for key, rest in _without_each_key(config):
            got = [repr(a) for a in plan(rest).layers]
            assert got == want, f"{model_type} ({variant}) without {key}"


@pytest.mark.parametrize("model_type", sorted(SUPPORTED & set(FAMILIES)))
def test_model_type_alone_is_the_class_default_config(model_type):
    """{"model_type": t} alone is the config class's default config (every size, head_dim, base and
    window from the class): posenc's plan must equal the plan of the class's full to_dict()."""
    text_cls, _ = FAMILIES[model_type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = text_cls().to_dict()
    try:
        want = [repr(a) for a in plan(full).layers]
    except posenc.Error as exc:
        assert model_type in ILL_FORMED_FULL_SIZE and ILL_FORMED_FULL_SIZE[model_type] in str(exc), str(exc)
        with pytest.raises(posenc.Error, match=re.escape(ILL_FORMED_FULL_SIZE[model_type])):
            plan({"model_type": model_type})
        return
    alone = plan({"model_type": model_type})
    assert [repr(a) for a in alone.layers] == want
    assert alone.num_heads == plan(full).num_heads


@pytest.mark.parametrize("model_type", sorted(SEQ2SEQ & set(FAMILIES)))
def test_seq2seq_decoder_alone_as_its_causal_lm_saves_it(model_type):
    """BartForCausalLM & co. (the decoder alone, e.g. Whisper's assistant decoders) save
    is_encoder_decoder false: the plan is the decoder's layers, causal, with the decoder's table."""
    config = family_config(model_type, "default")
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(transformers, modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])(config).eval()
    m = plan(model.config.to_dict())
    assert m.num_layers == config.decoder_layers and m.encoder_max_position_embeddings == 0
    assert all(layer.layer_type == "decoder" and layer.attention.causal for layer in m.layers)
    check_seq2seq(model_type, model, m, seq2seq_inputs(config, decoder=False))


@pytest.mark.parametrize("model_type", ["m2m_100", "nllb-moe"])
def test_fairseq_sinusoidal_seq2seq_against_transformers(model_type):
    """M2M100 (NLLB-200's model_type) and NLLB-MoE have no causal-LM head (not in FAMILIES): their
    class defaults, shrunk, against their own models; position p at row p + pad_token_id + 1."""
    cls = type(configuration_auto.CONFIG_MAPPING[model_type]())
    kw = {**_shrunk_kwargs(cls), "decoder_attention_heads": HEADS, "decoder_layers": 2}
    config = cls(**kw)
    m = plan(config.to_dict())
    assert m.sinusoidal["offset"] == config.pad_token_id + 1 and m.model_type == model_type
    check_seq2seq(model_type, build(config), m, seq2seq_inputs(config))


@pytest.mark.parametrize("model_type", ["t5", "mt5", "umt5", "switch_transformers"])
def test_t5_variants_against_their_modules(model_type):
    """T5's family (no causal-LM or masked-LM head: not in FAMILIES), class defaults shrunk, against each
    stack's self-attention modules: which ones own a bucket table (T5, mT5, Switch: the first of each stack;
    UMT5: every one, modeling_umt5.py L371-378), the bucket count and distance they read, bidirectional
    buckets in the encoder (not is_decoder) and the unscaled head of d_kv; the decoder's causal mask."""
    cls = type(configuration_auto.CONFIG_MAPPING[model_type]())
    kw = dict(d_model=64, d_kv=16, num_heads=4, num_layers=2, num_decoder_layers=3, d_ff=32, vocab_size=256,
              relative_attention_num_buckets=16, relative_attention_max_distance=40)
    if model_type == "switch_transformers":
        kw.update(num_experts=2, expert_capacity=4, num_sparse_encoder_layers=1, num_sparse_decoder_layers=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = cls(**kw)
    model = build(config)
    m = plan(config.to_dict())
    assert m.num_layers == 5 and m.t5_num_buckets == 16 and m.t5_max_distance == 40
    assert m.t5_bias_per_layer == (model_type == "umt5")
    stacks = [("encoder", model.encoder), ("decoder", model.decoder)]
    attns = [(t, block.layer[0].SelfAttention) for t, stack in stacks for block in stack.block]
    for layer, (stack, attn) in zip(m.layers, attns):
        where = f"{model_type} layer {layer.layer}"
        assert layer.layer_type == stack and layer.position == "t5", where
        first = layer.layer in (0, 2)
        assert attn.has_relative_attention_bias == (first or m.t5_bias_per_layer), where
        if attn.has_relative_attention_bias:
            assert attn.relative_attention_num_buckets == m.t5_num_buckets, where
            assert attn.relative_attention_max_distance == m.t5_max_distance, where
        assert attn.is_decoder == layer.attention.causal == (stack == "decoder"), where
        assert layer.qk_head_dim == attn.key_value_proj_dim and layer.attention.softmax_scale == 1.0, where


def test_hunyuan_ntk_alpha_against_transformers():
    """Hunyuan's checkpoints save rope_type "dynamic" with an alpha: a fixed base theta * alpha^(d / (d - 2))
    (modeling_hunyuan_v1_dense.py compute_ntk_alpha_rope_parameters), not a length-dependent rescale."""
    text_cls, _ = FAMILIES["hunyuan_v1_dense"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**{**_shrunk_kwargs(text_cls), "rope_parameters": {
            "rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0, "rope_theta": 1e4}})
    d = config.head_dim
    layer = plan(config.to_dict()).layers[0]
    assert layer.rope.base == pytest.approx(1e4 * 1000.0 ** (d / (d - 2)), rel=1e-12)
    assert layer.rope.scaling.rope_type == "default"
    check_family("hunyuan_v1_dense", config)


def test_hunyuan_vl_flat_legacy_form_against_transformers():
    """HunyuanOCR's flat config (model_type hunyuan_vl, text keys at the top, rope_scaling type "xdrope" with
    xdrope_section and the attention_head_dim alias): HunYuanVLConfig folds it into text_config
    (configuration_hunyuan_vl.py L276-289); the whole text model checked (text tokens: every axis equal)."""
    from transformers import AutoConfig

    flat = {"model_type": "hunyuan_vl", "hidden_size": 4 * 128, "num_attention_heads": 4, "num_key_value_heads": 2,
            "num_hidden_layers": LAYERS, "intermediate_size": 32, "attention_head_dim": 128, "vocab_size": 128,
            "max_position_embeddings": 32768, "rope_theta": 1e4,
            "rope_scaling": {"type": "xdrope", "factor": 1.0, "alpha": 1000.0, "beta_fast": 32, "beta_slow": 1,
                             "mscale": 1.0, "mscale_all_dim": 1.0, "xdrope_section": [16, 16, 16, 16]}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = AutoConfig.for_model(**flat).get_text_config()
    flat_plan = plan(flat)
    assert flat_plan.model_type == "hunyuan_vl_text"
    assert flat_plan.layers[0].rope.base == pytest.approx(1e4 * 1000.0 ** (128 / 126), rel=1e-12)
    check_family("hunyuan_vl_text", text)


@pytest.mark.parametrize("head_dim", [None, 64])
def test_cohere_compass_multimodal_positions_against_transformers(head_dim):
    """Cohere's North form: the sliding layers' rotary module (CohereCompassRotaryEmbedding, Qwen3-VL's
    interleaved M-RoPE of sections [24, 20, 20], rotate_half) at three distinct position rows (t, h, w), as
    image tokens get them; the full layers have none (rope_parameters["full_attention"] = null). Also with a
    64-dim head, whose 32 pairs the sections overrun: Qwen3-VL's slices stop at the last pair."""
    from transformers.models.cohere_compass.modeling_cohere_compass import (CohereCompassRotaryEmbedding,
                                                                            apply_rotary_pos_emb)
    text_cls, _ = FAMILIES["cohere_compass_text"]
    kw = {**_shrunk_kwargs(text_cls), **FAMILY_KWARGS["cohere_compass_text"]}
    if head_dim:
        kw["head_dim"] = head_dim
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**kw)
    assert config.head_dim == (head_dim or config.head_dim)
    m = plan(config.to_dict())
    layer = next(lay for lay in m.layers if lay.layer_type == "sliding_attention")
    assert all(lay.position == "none" for lay in m.layers if lay.layer_type == "full_attention")
    rotary = CohereCompassRotaryEmbedding(config)
    rng = np.random.default_rng(5)
    T, D = 12, config.head_dim
    pos = rng.integers(0, 256, (3, T))  # (transformers' fp32 angles: p * inv_freq exact to ~2e-5 here)
    x = torch.from_numpy(rng.standard_normal((1, 2, T, D)).astype(np.float32))
    cos, sin = rotary(x, torch.from_numpy(pos)[:, None, :], "sliding_attention")
    want, _ = apply_rotary_pos_emb(x.double(), x.double(), cos.double(), sin.double())
    got = posenc.rope(x.transpose(1, 2).numpy(), pos, config=layer.rope)
    np.testing.assert_allclose(got, want.transpose(1, 2).numpy(), atol=3e-5)


def test_dbrx_base_against_transformers_and_the_authors_code():
    """DBRX states its base as attn_config.rope_theta (500000 in the released configs). Its own code,
    transformers 4.x and vLLM (model_executor/models/dbrx.py: rope_theta = config.attn_config.rope_theta)
    rotate with it; transformers 5.23's DbrxRotaryEmbedding reads the top-level rope_parameters
    (10000). posenc follows the authors, with a warning; with both bases equal, 5.23 agrees."""
    text_cls, _ = FAMILIES["dbrx"]
    kw = _shrunk_kwargs(text_cls)
    kw["attn_config"] = {**kw["attn_config"], "rope_theta": 5e5}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**kw)
    d = config.d_model // config.n_heads
    exponents = np.arange(0, d, 2) / d
    rotary = next(iter(rotary_modules(build(config)).values()))
    np.testing.assert_allclose(rotary.inv_freq.double().numpy(), 1e4 ** -exponents, rtol=1e-6)  # 5.23
    m = posenc.ModelPositions.from_hf(config.to_dict(), warn=False)
    got, _ = m.layers[0].inv_freq(1)
    np.testing.assert_allclose(got, 5e5 ** -exponents, rtol=1e-12)  # the authors': base attn_config.rope_theta
    assert any("transformers 5.23 applies" in w for w in m.warnings), m.warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same = text_cls(**kw, rope_parameters={"rope_type": "default", "rope_theta": 5e5})
    assert not any("transformers 5.23 applies" in w for w in plan(same.to_dict()).warnings)
    check_family("dbrx", same)


@pytest.mark.parametrize("model_type", ["deepseek_v32", "glm_moe_dsa", "axk2", "hy_v4"])
def test_sparse_attention_indexer_against_transformers(model_type):
    """DeepSeek sparse attention's lightning indexer: its q and k rotate the first qk_rope_head_dim dims of
    the index head with the layer's cos / sin, in halves for DeepSeek-V3.2 (modeling_deepseek_v32.py L219-220,
    as DeepSeek's inference/model.py) and in pairs for GLM-5 (modeling_glm_moe_dsa.py L220-221, written back
    de-interleaved as V3's attention: the same q.k). posenc's TopkIndexer.rope against the module's own
    apply function, at positions up to the maximum; its top-k, heads and head size; GLM-5's shared layers."""
    text_cls, _ = FAMILIES[model_type]
    kw = {**_shrunk_kwargs(text_cls), "index_topk": 5,
          "rope_parameters": {"rope_type": "yarn", "factor": 40.0, "rope_theta": 1e4, "beta_fast": 32.0,
                              "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                              "original_max_position_embeddings": 4096}}
    if model_type in ("glm_moe_dsa", "hy_v4"):
        kw["indexer_types"] = ["full", "full", "shared", "shared", "full", "shared"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**kw)
    model = build(config)
    family = sys.modules[type(model).__module__]
    m = posenc.ModelPositions.from_hf(config.to_dict(), warn=False)
    assert any("index_topk = 5" in w for w in m.warnings), m.warnings
    for layer in m.layers:
        ix = layer.indexer
        assert ix.topk == 5 and ix.heads == config.index_n_heads and ix.head_dim == config.index_head_dim
        # hy_v4: "Flipped RoPE position (later portion instead of the first)" (modeling_hy_v4.py HYV4Indexer)
        lo = config.index_head_dim - config.qk_rope_head_dim if model_type == "hy_v4" else 0
        assert ix.rotary_dims == (lo, lo + config.qk_rope_head_dim)
        assert ix.shared == (model_type in ("glm_moe_dsa", "hy_v4") and config.indexer_types[layer.layer] == "shared")
    rc = m.layers[0].indexer.rope
    R = config.qk_rope_head_dim
    torch.manual_seed(0)
    B, T = 2, 16
    q, k = torch.randn(B, T, 3, R), torch.randn(B, T, 1, R)
    # (below 8192: transformers' fp32 angles err by ~position * 2^-24 rad, as in test_model_parity.py)
    pos = torch.sort(torch.randint(0, 8192, (B, T)), dim=1).values
    cos, sin = model.rotary_emb(torch.zeros(1, 1, 8), pos)
    halves = model_type in ("deepseek_v32", "axk2", "hy_v4")  # (axk2: DeepSeek-V3.2's indexer, modular_axk2.py)
    if halves:
        assert rc.layout == "half"
        q_hf, k_hf = family.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=2)
    else:
        assert rc.layout == "interleaved"
        q_hf, k_hf = family.apply_rotary_pos_emb_interleave(q, k, cos, sin, unsqueeze_dim=2)
    rotate = lambda x: torch.from_numpy(  # noqa: E731
        posenc.rope(x.numpy(), pos.numpy(), config=rc, seq_len=config.max_position_embeddings))
    q_pe, k_pe = rotate(q), rotate(k)
    # The indexer's scores q.k, for every query head and key
    scores = lambda a, b: torch.einsum("bshd,btd->bhst", a, b[:, :, 0])  # noqa: E731
    torch.testing.assert_close(scores(q_pe, k_pe), scores(q_hf, k_hf), atol=2e-3, rtol=1e-4)
    if halves:  # no write-back permutation: the tensors themselves
        torch.testing.assert_close(q_pe, q_hf, atol=2e-3, rtol=1e-4)


def test_minimax_m3_block_indexer_against_transformers():
    """MiniMax-M3's checkpoint form (partial_rotary_factor 0.5, the legacy sparse_attention_config with
    sparse_attention_freq and its renamed indexer sizes): the layer types, the indexer's sizes, and its
    q / k rotated on the first rotated dims of the index head as MiniMaxM3VLIndexer does
    (apply_rotary_pos_emb with cos[..., :index_head_dim]); the whole model through check_family."""
    text_cls, _ = FAMILIES["minimax_m3_vl_text"]
    freq = [0, 1, 1, 0, 1, 1][:LAYERS]
    kw = {**_shrunk_kwargs(text_cls), "partial_rotary_factor": 0.5, "rotary_dim": 64,
          "sparse_attention_config": {"sparse_attention_freq": freq, "sparse_num_index_heads": 2,
                                      "sparse_index_dim": 64, "sparse_block_size": 4096, "sparse_topk_blocks": 3,
                                      "sparse_local_block": 1}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**kw)
    assert config.layer_types == ["minimax_m3_sparse" if f else "full_attention" for f in freq]
    m = posenc.ModelPositions.from_hf(kw | {"model_type": "minimax_m3_vl_text"}, warn=False)
    assert [lay.layer_type for lay in m.layers] == config.layer_types
    rotated = int(config.head_dim * 0.5)
    for layer in m.layers:
        assert layer.rotary_dims == (0, rotated)
        ix = layer.indexer
        if layer.layer_type == "full_attention":
            assert ix is None
            continue
        assert (ix.topk, ix.heads, ix.head_dim, ix.block_size, ix.local_blocks) == (3, 2, 64, 4096, 1)
        assert ix.rotary_dims == (0, rotated) and ix.rope.layout == "half"
    model = build(config)
    family = sys.modules[type(model).__module__]
    rc = next(lay for lay in m.layers if lay.indexer is not None).indexer.rope
    torch.manual_seed(0)
    B, T = 2, 16
    q, k = torch.randn(B, T, 2, 64), torch.randn(B, T, 1, 64)
    pos = torch.sort(torch.randint(0, 8192, (B, T)), dim=1).values
    cos, sin = model.rotary_emb(torch.zeros(1, 1, 8), pos)
    q_hf, k_hf = family.apply_rotary_pos_emb(q, k, cos[..., :64], sin[..., :64], unsqueeze_dim=2)
    rotate = lambda x: torch.from_numpy(posenc.rope(x.numpy(), pos.numpy(), config=rc))  # noqa: E731
    torch.testing.assert_close(rotate(q), q_hf, atol=2e-3, rtol=1e-4)
    torch.testing.assert_close(rotate(k), k_hf, atol=2e-3, rtol=1e-4)
    # The whole model: 8 tokens at positions ~3000 in one block of 4096 (the indexer numbers blocks by
    # absolute position but counts them from the call's keys: smaller blocks fail in transformers), dense.
    check_family("minimax_m3_vl_text", config)


def test_qwen4_exp_qsa_indexer_against_transformers():
    """Qwen4-Exp's QSA indexer: the query rotated at its position with the model's cos / sin on the first
    rotated dims of the index head (Qwen4ExpTextQSAIndexer: apply_rotary_pos_emb(q, cos, sin)); pooled block
    keys get the same rotation at the block's first position. Its sizes from the indexer_* keys."""
    text_cls, _ = FAMILIES["qwen4_exp_text"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**{**_shrunk_kwargs(text_cls), **FAMILY_KWARGS["qwen4_exp_text"]})
    m = posenc.ModelPositions.from_hf(config.to_dict(), warn=False)
    model = build(config)
    family = sys.modules[type(model).__module__]
    indexed = [lay for lay in m.layers if lay.layer_type == "indexed_attention"]
    assert indexed and all(lay.layer_type == "linear_attention" and lay.position == "none"
                           for lay in m.layers if lay not in indexed)
    for layer in indexed:
        ix = layer.indexer
        assert (ix.topk, ix.heads, ix.head_dim, ix.block_size, ix.pooled_keys) == (4, 4, 128, 4, True)
        assert ix.rotary_dims == (0, 64) and ix.rope.layout == "half" and layer.rotary_dims == (0, 64)
    rc = indexed[0].indexer.rope
    torch.manual_seed(0)
    B, T = 2, 16
    q = torch.randn(B, T, 4, 128)
    pos = torch.sort(torch.randint(0, 8192, (B, T)), dim=1).values
    cos, sin = model.rotary_emb(torch.zeros(1, 1, 8), pos)
    q_hf = family.apply_rotary_pos_emb(q, cos=cos, sin=sin, unsqueeze_dim=2)
    got = np.stack([posenc.rope(q[b:b + 1].numpy(), np.stack([pos[b].numpy()] * 3), config=rc)[0] for b in range(B)])
    torch.testing.assert_close(torch.from_numpy(got), q_hf, atol=2e-3, rtol=1e-4)


def test_qwen4_exp_whole_head_with_default_sections_against_transformers():
    """The class default sections [11, 11, 10] with the whole head rotated (no partial_rotary_factor; the
    index head as wide, which Qwen4-Exp's validation requires): Qwen3-VL's interleave overwrites only the h
    and w pairs below 33, every other pair stays on t. At three distinct position rows, against the model's
    rotary module and apply_rotary_pos_emb."""
    text_cls, _ = FAMILIES["qwen4_exp_text"]
    kw = {**_shrunk_kwargs(text_cls), **FAMILY_KWARGS["qwen4_exp_text"], "indexer_head_dim": 256,
          "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "mrope_section": [11, 11, 10]}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**kw)
    m = plan(config.to_dict())
    layer = next(lay for lay in m.layers if lay.layer_type == "indexed_attention")
    assert layer.rotary_dims == (0, config.head_dim) == (0, 256)
    model = build(config)
    family = sys.modules[type(model).__module__]
    rng = np.random.default_rng(6)
    T = 12
    # transformers' fp32 angles are off by up to p 2^-24 rad: below 128 that is < 1e-5 of every output
    pos = rng.integers(0, 128, (3, 1, T))
    x = torch.from_numpy(rng.standard_normal((1, 2, T, config.head_dim)).astype(np.float32))
    cos, sin = model.rotary_emb(x, torch.from_numpy(pos))
    want, _ = family.apply_rotary_pos_emb(x.double(), x.double(), cos.double(), sin.double())
    got = posenc.rope(x.transpose(1, 2).numpy(), pos[:, 0], config=layer.rope)
    np.testing.assert_allclose(got, want.transpose(1, 2).numpy(), atol=3e-5)


# Kimi K2's released rope (moonshotai/Kimi-K2-Instruct config.json): DeepSeek-V3's yarn with beta_fast = beta_slow.
KIMI_K2_ROPE = {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                "original_max_position_embeddings": 4096, "type": "yarn"}


def test_kimi_k2_is_deepseek_v3_against_transformers():
    """Kimi K2's model_type kimi_k2 is not in transformers 5.23's table: its remote code (auto_map.AutoConfig =
    configuration_deepseek.DeepseekV3Config) is DeepSeek-V3's, and transformers' kimi_k25 reads a kimi_k2
    text_config as deepseek_v3 (configuration_kimi_k25.py L85-86). posenc plans both forms as deepseek_v3 (with
    a warning), checked against transformers' DeepseekV3 modules with Kimi's rope and against the wrapper."""
    text_cls, _ = FAMILIES["deepseek_v3"]
    kw = {**_shrunk_kwargs(text_cls), "rope_theta": 5e4, "rope_scaling": KIMI_K2_ROPE,
          "max_position_embeddings": 131072}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**kw)
    check_family("deepseek_v3", config)
    d = config.to_dict()
    want = [repr(a) for a in plan(d).layers]
    kimi = {**d, "model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"],
            "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV3Config"}}
    got = posenc.ModelPositions.from_hf(kimi, warn=False)
    assert [repr(a) for a in got.layers] == want and "kimi_k2" in got.warnings[0]
    with pytest.raises(posenc.Error, match="'kimi_k2'"):  # not DeepSeek-V3's remote config class
        posenc.ModelPositions.from_hf({**kimi, "auto_map": {}}, warn=False)
    wrapper_cls = configuration_auto.CONFIG_MAPPING["kimi_k25"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrapper = wrapper_cls(text_config={**d, "model_type": "kimi_k2"})
    assert wrapper.get_text_config().model_type == "deepseek_v3"
    got = posenc.ModelPositions.from_hf({"model_type": "kimi_k25", "text_config": {**d, "model_type": "kimi_k2"}},
                                        warn=False)
    assert [repr(a) for a in got.layers] == [repr(a) for a in plan(wrapper.get_text_config().to_dict()).layers]
    assert "kimi_k2" in got.warnings[0]


def test_molmo2_scaled_and_unscaled_layers_against_transformers():
    """Molmo 2 with yarn on rope_scaling_layers [0, 2, 3] only: those layers take rotary_emb (yarn), the others
    rotary_emb_unscaled (default, the same base) (modeling_molmo2.py Molmo2TextModel); the whole model."""
    text_cls, _ = FAMILIES["molmo2_text"]
    kw = {**_shrunk_kwargs(text_cls), "rope_scaling_layers": [0, 2, 3],
          "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6,
                              "original_max_position_embeddings": 1024}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**kw)
    m = plan(config.to_dict())
    assert [lay.rope.scaling.rope_type for lay in m.layers] == \
        ["yarn" if i in (0, 2, 3) else "default" for i in range(LAYERS)]
    assert all(lay.rope.base == 1e6 for lay in m.layers)
    check_family("molmo2_text", config)  # (layer 1's frequencies against rotary_emb_unscaled)


def test_molmo2_partial_rotation_against_transformers():
    """Molmo 2's default init (and rotary_emb_unscaled) rotates the whole head whatever partial_rotary_factor
    says (modeling_molmo2.py L121-138); a scaled type's init reads it (modeling_rope_utils.py L416: yarn), and
    its cos / sin of int(head_dim * prf) dims cannot multiply the whole head (modeling_molmo2.py L230): the
    model builds, its first forward fails, and posenc refuses by name. Without a scaled layer
    (rope_scaling_layers []) transformers runs every layer on the unscaled module: the whole head."""
    text_cls, _ = FAMILIES["molmo2_text"]
    yarn = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6, "original_max_position_embeddings": 1024,
            "partial_rotary_factor": 0.5}
    for layers in (None, [1]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = text_cls(**{**_shrunk_kwargs(text_cls), "rope_parameters": dict(yarn),
                                 "rope_scaling_layers": layers})
        with pytest.raises(RuntimeError, match="must match the size of tensor"), torch.no_grad():
            build(config)(input_ids=torch.ones(1, 2, dtype=torch.long))
        with pytest.raises(posenc.Error, match="partial_rotary_factor = 0.5 with rope type 'yarn' is not "
                                               "supported for molmo2_text: its rotary module then builds "
                                               "cos / sin of 64 dims"):
            plan(config.to_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**{**_shrunk_kwargs(text_cls), "rope_parameters": dict(yarn),
                             "rope_scaling_layers": []})
    m = plan(config.to_dict())
    assert all(lay.rotary_dims == (0, config.head_dim) and lay.rope.scaling.rope_type == "default"
               for lay in m.layers)
    check_family("molmo2_text", config)


def test_molmo2_wrapper_and_scaling_layers_against_transformers():
    """Molmo2Config builds a text_config without model_type as Molmo2TextConfig (its sub_configs_defaults,
    configuration_utils.py L248-267): the same plan as with model_type. rope_scaling_layers indices outside
    the model scale no layer (modeling_molmo2.py L661-664: `layer_idx in config.rope_scaling_layers`): planned
    without them, with a warning naming them; the whole model against transformers."""
    text_cls, _ = FAMILIES["molmo2_text"]
    kw = {**_shrunk_kwargs(text_cls), "rope_scaling_layers": [0, 2, 7, -1],
          "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6,
                              "original_max_position_embeddings": 1024}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrapper = configuration_auto.CONFIG_MAPPING["molmo2"](text_config=dict(kw))
        config = text_cls(**kw)
    assert type(wrapper.text_config) is text_cls
    untyped = {**wrapper.to_dict(), "text_config": {k: v for k, v in wrapper.text_config.to_dict().items()
                                                     if k != "model_type"}}
    m = plan(config.to_dict())
    got = plan(untyped)
    assert got.model_type == "molmo2_text" and [repr(a) for a in got.layers] == [repr(a) for a in m.layers]
    assert any("rope_scaling_layers contains 7, -1, not a layer" in w for w in m.warnings), m.warnings
    model = build(config)
    assert [lay.rope.scaling.rope_type for lay in m.layers] == \
        ["yarn" if t == "scaled" else "default" for t in model.rope_types] == \
        ["yarn" if i in (0, 2) else "default" for i in range(LAYERS)]
    check_family("molmo2_text", config)


def test_hy_v4_partial_rotation_with_yarn_is_refused_as_transformers_fails():
    """Hunyuan 4's default init rotates the whole 64-dim rope head (modeling_hy_v4.py L93-110); yarn's init
    reads partial_rotary_factor (modeling_rope_utils.py L416) and its narrower cos / sin cannot multiply the
    head (modeling_hy_v4.py L151): transformers' first forward fails, posenc refuses by name."""
    text_cls, _ = FAMILIES["hy_v4"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**{**_shrunk_kwargs(text_cls), "rope_parameters": {
            "rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4, "original_max_position_embeddings": 1024,
            "partial_rotary_factor": 0.5}})
    with pytest.raises(RuntimeError, match="must match the size of tensor"), torch.no_grad():
        build(config)(input_ids=torch.ones(1, 2, dtype=torch.long), use_cache=False)
    with pytest.raises(posenc.Error, match="partial_rotary_factor = 0.5 with rope type 'yarn' is not "
                                           "supported for hy_v4: its rotary module then builds cos / sin "
                                           "of 32 dims"):
        plan(config.to_dict())


def test_zaya_scaled_rope_needs_original_max_position_embeddings():
    """ZAYA's convert_rope_params_to_dict skips standardize_rope_params (configuration_zaya.py L114-120),
    which gives other families' yarn dicts original_max_position_embeddings (modeling_rope_utils.py
    L856-859): its validation raises KeyError without it (L1151-1153), as posenc refuses by name; with it,
    the whole model against transformers (yarn on the hybrid layers' half head)."""
    text_cls, _ = FAMILIES["zaya"]
    yarn = {"rope_type": "yarn", "rope_theta": 5e6, "factor": 4.0, "partial_rotary_factor": 0.5}
    rp = {"hybrid": yarn,
          "hybrid_sliding": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}}
    kw = {**_shrunk_kwargs(text_cls), "rope_parameters": rp}
    with pytest.raises(KeyError, match="original_max_position_embeddings"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text_cls(**copy.deepcopy(kw))
    with pytest.raises(posenc.Error, match=r"rope_parameters\.hybrid\.original_max_position_embeddings is "
                                           "missing: rope type \"yarn\" requires it"):
        plan({**copy.deepcopy(kw), "model_type": "zaya"})
    kw["rope_parameters"] = {**rp, "hybrid": {**yarn, "original_max_position_embeddings": 1024}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**kw)
    m = plan(config.to_dict())
    assert [lay.rope.scaling.rope_type for lay in m.layers] == \
        ["yarn" if t == "hybrid" else "default" for t in config.layer_types]
    check_family("zaya", config)


def test_glm5_next_key_value_heads_must_equal_the_heads():
    """GLM-5-Next's validate_architecture raises unless num_key_value_heads (64 when absent) equals
    num_attention_heads (configuration_glm5_next.py L106-107, L206-212): posenc refuses by name."""
    text_cls, _ = FAMILIES["glm5_next_text"]
    kw = _shrunk_kwargs(text_cls)
    assert kw["num_attention_heads"] == HEADS
    for kv, message in ((KV_HEADS, f"num_key_value_heads = {KV_HEADS} is invalid for glm5_next_text: it must "
                                   f"equal num_attention_heads = {HEADS}"), (None, "(64 when absent)")):
        given = {k: v for k, v in kw.items() if k != "num_key_value_heads"}
        if kv:
            given["num_key_value_heads"] = kv
        with pytest.raises(Exception, match="must be the same as num_key_value_heads"), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            text_cls(**given)
        with pytest.raises(posenc.Error, match=re.escape(message)):
            plan({**given, "model_type": "glm5_next_text"})


@pytest.mark.parametrize("model_type", ["glm_moe_dsa", "hy_v4", "glm5_next_text"])
def test_indexer_types_past_the_last_layer_against_transformers(model_type):
    """Each layer reads indexer_types[layer_idx] (modeling_glm_moe_dsa.py L347, modeling_hy_v4.py L369,
    modeling_glm5_next.py L1150-1153): entries past the last layer are never read, so transformers runs;
    posenc ignores them too, with a warning. GLM-5-Next's linear layers never read theirs: a list ending
    after its last indexed layer runs as well. The shared layers against the attention modules'
    skip_topk; the whole model through check_family."""
    text_cls, _ = FAMILIES[model_type]
    kw = _shrunk_kwargs(text_cls)
    lists = [["full", "shared", "full", "full", "shared", "full", "shared", "other"]]
    if model_type == "glm5_next_text":  # (indexed: layer 3 of 6)
        lists = [["full", "full", "full", "full", "full", "full", "shared"], ["full", "full", "full", "full"]]
    for indexer_types in lists:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = text_cls(**kw, indexer_types=indexer_types)
        m = plan(config.to_dict())
        if len(indexer_types) > LAYERS:
            assert any(f"the {len(indexer_types) - LAYERS} past num_hidden_layers = {LAYERS} are ignored" in w
                       for w in m.warnings), m.warnings
        model = build(config)
        for layer in m.layers:
            attn = model.layers[layer.layer].self_attn
            if hasattr(attn, "skip_topk"):
                assert layer.indexer is None or layer.indexer.shared == attn.skip_topk, layer.layer
        check_family(model_type, config)


def test_modernbert_decoder_legacy_keys_against_transformers():
    """ModernBERT decoders on the hub (Ettin) save global_rope_theta / local_rope_theta and may carry a
    legacy rope_scaling, which configuration_modernbert_decoder.py's convert_rope_params_to_dict applies to
    both layer types (Gemma 3 applies it to the full layers only); their windows are local_attention // 2."""
    text_cls, _ = FAMILIES["modernbert-decoder"]
    kw = {**_shrunk_kwargs(text_cls), "global_rope_theta": 5e4, "local_rope_theta": 3e3,
          "local_attention": 10, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**kw)
    m = plan({k: v for k, v in kw.items() if k != "sliding_window"} | {"model_type": "modernbert-decoder"})
    for layer in m.layers:
        full = layer.layer_type == "full_attention"
        assert layer.rope.base == (5e4 if full else 3e3) and layer.rope.scaling.rope_type == "linear"
        assert layer.attention.window == (0 if full else 5)
    assert [layer.layer_type for layer in m.layers] == config.layer_types
    check_family("modernbert-decoder", config)


def test_ernie_vl_alternating_mrope_against_transformers():
    """ERNIE 4.5 VL's M-RoPE (modeling_ernie4_5_vl_moe.py): inv_freq pre-permuted to the even then the odd
    frequencies of the first h + w pairs, split {h, w, t} = {22, 22, 20} over the (t, h, w) position rows,
    h and w stacked pairwise, then repeat_interleave into (2j, 2j + 1) pairs: pair j takes h (j even) or w
    (j odd) below 44, t above, at its own frequency (posenc's mrope_alternating_hw), on three distinct
    position streams; text positions (all equal) reduce it to plain interleaved RoPE."""
    text_cls, _ = FAMILIES["ernie4_5_vl_moe_text"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**_shrunk_kwargs(text_cls))
    family = importlib.import_module("transformers.models.ernie4_5_vl_moe.modeling_ernie4_5_vl_moe")
    rotary = family.Ernie4_5_VLMoeTextRotaryEmbedding(config)
    rc = plan(config.to_dict()).layers[0].rope
    assert rc.multimodal == "mrope_alternating_hw" and list(rc.mrope_section) == [22, 22, 20]
    assert rc.layout == "interleaved"
    torch.manual_seed(0)
    B, H, T, D = 2, 3, 24, rc.head_dim
    q, k = torch.randn(B, H, T, D), torch.randn(B, H, T, D)
    pos = torch.sort(torch.randint(0, 8192, (B, T)), dim=1).values
    for pos3 in (torch.stack([pos, pos // 2, pos // 3]), torch.stack([pos, pos, pos])):
        cos, sin = rotary(torch.zeros(1, 1, 8), pos3)
        q_hf, k_hf = family.apply_rotary_pos_emb(q, k, cos, sin)
        for x, want in ((q, q_hf), (k, k_hf)):
            got = posenc.rope(x.transpose(1, 2).numpy(), pos3.numpy(), config=rc, seq_len=int(pos.max()) + 1)
            # HF: fp32 angles position * inv_freq (errors ~ position * 2^-24 rad at position 8192)
            torch.testing.assert_close(torch.from_numpy(got).transpose(1, 2), want, atol=2e-3, rtol=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yarn = text_cls(**_shrunk_kwargs(text_cls)).to_dict()
    yarn["rope_parameters"] = {**yarn["rope_parameters"], "rope_type": "linear", "factor": 2.0}
    with pytest.raises(posenc.Error, match='requires "default"'):
        plan(yarn)


def test_embeddinggemma_bidirectional_against_transformers():
    """Gemma 3 text models with use_bidirectional_attention (EmbeddingGemma): Gemma3TextConfig halves the
    saved window (sliding_window // 2 + 1) and Gemma3TextModel's masks see every key on full layers, the
    keys |q - k| < that window on sliding layers (modeling_gemma3.py _bidirectional_window_overlay)."""
    text_cls, _ = FAMILIES["gemma3_text"]
    kw = {**_shrunk_kwargs(text_cls), "use_bidirectional_attention": True, "sliding_window": 6}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**kw)
    saved = config.to_dict()
    assert saved["sliding_window"] == 6 and config.sliding_window == 4
    m = plan(saved)
    assert not m.warnings
    for layer in m.layers:
        assert not layer.attention.causal
        assert layer.attention.window == (4 if layer.layer_type == "sliding_attention" else 0)
    check_family("gemma3_text", config)


def check_mobilebert(config, where):
    """MobileBERT's heads split true_hidden_size (modeling_mobilebert.py L176-178): the q and k its
    attention function receives, per layer, against the plan's head; then the family's checks (scale,
    mask, the learned table)."""
    m = plan(config.to_dict())
    model = build(config)
    capture = Capture(model)
    try:
        torch.manual_seed(1)
        ids = torch.randint(1, config.vocab_size, (1, T))
        calls = run(model, ids, torch.arange(T)[None], capture=capture)
    finally:
        capture.close()
    assert sorted(calls) == list(range(m.num_layers)), where
    for layer in m.layers:
        q, k = calls[layer.layer]["query"], calls[layer.layer]["key"]
        assert q.shape[1] == k.shape[1] == m.num_heads, f"{where} layer {layer.layer}"
        assert q.shape[-1] == k.shape[-1] == layer.qk_head_dim == layer.v_head_dim, \
            f"{where} layer {layer.layer}"
    check_family("mobilebert", config)


@pytest.mark.parametrize("extra", [{}, {"use_bottleneck": False}, {"use_bottleneck_attention": True},
                                   {"intra_bottleneck_size": 96, "num_attention_heads": 8},
                                   {"key_query_shared_bottleneck": False, "use_bottleneck_attention": True},
                                   {"key_query_shared_bottleneck": False, "use_bottleneck": False},
                                   {"is_decoder": True}])
def test_mobilebert_bottleneck_heads_against_transformers(extra):
    """true_hidden_size is intra_bottleneck_size with use_bottleneck (the default), hidden_size without
    (configuration_mobilebert.py L86-91); use_bottleneck_attention and key_query_shared_bottleneck only
    choose the projections' inputs; is_decoder leaves the mask bidirectional (L187, L635-639)."""
    text_cls, _ = FAMILIES["mobilebert"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**{**_shrunk_kwargs(text_cls), **extra})
    width = config.intra_bottleneck_size if config.use_bottleneck else config.hidden_size
    assert config.true_hidden_size == width
    m = plan(config.to_dict())
    assert {layer.qk_head_dim for layer in m.layers} == {width // config.num_attention_heads}
    assert not any(layer.attention.causal for layer in m.layers)
    check_mobilebert(config, f"mobilebert {extra}")


def test_mobilebert_configs_transformers_cannot_run_are_refused():
    """A saved true_hidden_size is set after MobileBertConfig.__post_init__ derives it
    (configuration_utils.py L500-504): another width than the bottleneck's cannot run in transformers;
    neither can key_query_shared_bottleneck false without use_bottleneck_attention (q and k read the
    hidden_size-wide input, modeling_mobilebert.py L365-366, through projections of true_hidden_size
    inputs). posenc refuses both by name; the equal true_hidden_size of the released configs plans as
    without it."""
    text_cls, _ = FAMILIES["mobilebert"]
    kw = {**_shrunk_kwargs(text_cls), "intra_bottleneck_size": 64}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        saved = text_cls(**kw, true_hidden_size=128)
        unshared = text_cls(**kw, key_query_shared_bottleneck=False)
    assert saved.true_hidden_size == 128  # the saved value, not intra_bottleneck_size
    for config, message in ((saved, "true_hidden_size = 128 is invalid for mobilebert"),
                            (unshared, "key_query_shared_bottleneck = false is not supported for mobilebert")):
        with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                build(config)(input_ids=torch.ones(1, 2, dtype=torch.long))
        with pytest.raises(posenc.Error, match=message):
            plan(config.to_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same = text_cls(**kw, true_hidden_size=64)
    assert [repr(a) for a in plan(same.to_dict()).layers] == \
        [repr(a) for a in plan({k: v for k, v in same.to_dict().items() if k != "true_hidden_size"}).layers]


# ------------------------------------------------------------------ Dots 3 Note


def _dots3_config(**extra):
    text_cls, _ = FAMILIES["dots3_note_text"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return text_cls(**{**_shrunk_kwargs(text_cls), **extra})


def check_dots3_layers(config, m):
    """Each layer's MLA against its Dots3NoteTextAttention (modeling_dots3_note.py L439-503: built from the
    layer's own config): the q / k head, the value head, the rotated range [qk_nope, qk_nope + qk_rope), the
    scale, the window; the type's base and frequencies against the rotary module's buffers; the indexer on
    indexed_attention layers (index_n_heads heads of index_head_dim, the first qk_rope_head_dim dims rotated
    in pairs with the same cos / sin, L248-254) against the module's own apply function."""
    model = build(config)
    family = sys.modules[type(model).__module__]
    assert [lay.layer_type for lay in m.layers] == list(config.layer_types)
    torch.manual_seed(0)
    B, T = 2, 16
    pos = torch.sort(torch.randint(0, 8192, (B, T)), dim=1).values
    for layer in m.layers:
        attn = model.layers[layer.layer].self_attn
        where = f"dots3_note_text layer {layer.layer} ({layer.layer_type})"
        assert (layer.qk_head_dim, layer.v_head_dim) == (attn.qk_head_dim, attn.v_head_dim), where
        assert layer.rotary_dims == (attn.qk_nope_head_dim, attn.qk_head_dim), where
        assert layer.rope.head_dim == attn.qk_rope_head_dim and layer.rope.layout == "interleaved", where
        assert layer.attention.softmax_scale == pytest.approx(attn.scaling, rel=1e-12), where
        assert layer.attention.window == (attn.sliding_window or 0), where
        t = layer.layer_type
        assert layer.rope.base == config.rope_parameters[t]["rope_theta"], where
        want = getattr(model.rotary_emb, f"{t}_inv_freq").double().numpy()
        np.testing.assert_allclose(layer.inv_freq(1)[0], want, rtol=2e-6, err_msg=where)
        assert (layer.indexer is None) == (attn.indexer is None), where
        if attn.indexer is None:
            continue
        ix, hf = layer.indexer, attn.indexer
        assert (ix.topk, ix.heads, ix.head_dim) == (hf.index_topk, hf.n_heads, hf.head_dim), where
        assert not ix.shared, where
        assert ix.rotary_dims == (0, hf.qk_rope_head_dim) and ix.rope.layout == "interleaved", where
        R = hf.qk_rope_head_dim
        q, k = torch.randn(B, T, 3, R), torch.randn(B, T, 1, R)
        cos, sin = model.rotary_emb(torch.zeros(1, 1, 8), pos, t)
        q_hf, k_hf = family.apply_rotary_pos_emb_interleave(q, k, cos, sin, unsqueeze_dim=2)
        rotate = lambda x: torch.from_numpy(  # noqa: E731
            posenc.rope(x.numpy(), pos.numpy(), config=ix.rope, seq_len=config.max_position_embeddings))
        scores = lambda a, b: torch.einsum("bshd,btd->bhst", a, b[:, :, 0])  # noqa: E731
        torch.testing.assert_close(scores(rotate(q), rotate(k)), scores(q_hf, k_hf), atol=2e-3, rtol=1e-4)


@pytest.mark.parametrize("extra", [
    {},
    # other sliding dims and base (swa_* of the released form), a window the mask shows
    {"swa_head_dim": 128, "swa_qk_nope_head_dim": 96, "swa_qk_rope_head_dim": 32, "swa_v_head_dim": 64,
     "swa_rope_theta": 1e4, "sliding_window": 4},
    # per-type rope dicts: yarn (mscale only in cos / sin: the scale stays qk_head_dim^-0.5, L494) and dynamic
    {"rope_parameters": {"indexed_attention": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6,
                                               "mscale": 1.0, "mscale_all_dim": 0.5,
                                               "original_max_position_embeddings": 2048},
                         "sliding_attention": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 3e4}},
     "max_position_embeddings": 8192},
    # use_dsa false: full_attention layers, no indexer; the indexed layers' own qk_rope_head_dim 32
    {"use_dsa": False, "qk_rope_head_dim": 32, "qk_nope_head_dim": 64},
])
def test_dots3_note_layer_types_mla_dims_and_bases_against_transformers(extra):
    """Dots 3 Note's sliding layers are MLA of their own dims (per_layer_config from swa_*: nope 192, rope 64,
    v 128 by default, base swa_rope_theta 5e4, windows of 512; configuration_dots3_note.py L321-353) beside
    the indexed layers' (nope 128, base 8e7): per layer against the running modules, then the whole model."""
    config = _dots3_config(**extra)
    m = plan(config.to_dict())
    if "use_dsa" in extra:
        assert set(config.layer_types) == {"full_attention", "sliding_attention"}
    sliding = next(lay for lay in m.layers if lay.layer_type == "sliding_attention")
    assert sliding.rotary_dims == ((96, 128) if extra.get("swa_head_dim") else (192, 256))
    assert sliding.rope.base == extra.get("swa_rope_theta", 3e4 if "rope_parameters" in extra else 5e4)
    check_dots3_layers(config, m)
    check_family("dots3_note_text", config)


def test_dots3_note_checkpoint_flat_form_against_transformers():
    """The published checkpoints' form: a flat "dots3_note" config (Dots3NoteConfig builds text_config from
    the top-level keys, configuration_dots3_note.py L406-412) with use_dsa, the legacy full_attention name,
    sliding_window_size and the swa_* keys. Its plan equals the text config's (and the saved wrapper's), and
    the text model matches transformers'; with use_dsa false the full layers run without an indexer."""
    from transformers import AutoConfig

    text_cls, _ = FAMILIES["dots3_note_text"]
    kw = _shrunk_kwargs(text_cls)
    flat = {**{k: v for k, v in kw.items() if not k.startswith("swa_")}, "model_type": "dots3_note",
            "use_dsa": True, "use_sliding_window": True, "sliding_window_size": 4, "rope_theta": 8e7,
            "layer_types": ["full_attention", "full_attention", "sliding_attention", "sliding_attention",
                            "full_attention", "full_attention"],
            "swa_num_attention_heads": HEADS, "swa_num_key_value_heads": HEADS, "swa_q_lora_rank": 32,
            "swa_kv_lora_rank": 32, "swa_head_dim": 192, "swa_qk_nope_head_dim": 128, "swa_v_head_dim": 96,
            "swa_rope_theta": 1e4, "vision_config": {"adapter_out_dim": kw["hidden_size"]},
            "audio_config": {"adapter_out_dim": kw["hidden_size"]}}
    for use_dsa, full in ((True, "indexed_attention"), (False, "full_attention")):
        flat["use_dsa"] = use_dsa
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            wrapper = AutoConfig.for_model(**copy.deepcopy(flat))
        text = wrapper.get_text_config()
        assert text.layer_types == [full, full, "sliding_attention", "sliding_attention", full, full]
        m = posenc.ModelPositions.from_hf(flat, warn=False)
        assert m.model_type == "dots3_note_text" and not m.warnings[1:], m.warnings
        for other in (text.to_dict(), wrapper.to_dict()):
            assert [repr(a) for a in plan(other).layers] == [repr(a) for a in m.layers]
        sliding = m.layers[2]
        assert (sliding.rotary_dims, sliding.v_head_dim, sliding.attention.window) == ((128, 192), 96, 4)
        assert sliding.rope.base == 1e4 and m.layers[0].rope.base == 8e7
        assert all((lay.indexer is not None) == (lay.layer_type == "indexed_attention") for lay in m.layers)
        check_dots3_layers(text, m)
        check_family("dots3_note_text", text)
    # with per_layer_config given, the swa_* keys are popped unread (L321-341): named in warnings
    d = {**text.to_dict(), "swa_head_dim": 128}
    assert any("swa_head_dim = 128 is not read" in w for w in plan(d).warnings)


def test_dots3_note_configs_transformers_cannot_run_are_refused():
    """Legacy layer names (its rope dicts are keyed before configuration_utils.py's remap: KeyError in the
    rotary module), a proportional rope (cos / sin of head_dim, not the rotated dims: a shape mismatch), and
    rope_scaling beside rope_parameters (it replaces them without a dict per type: KeyError) fail in
    transformers; a head_dim whose int(head_dim * qk_rope / head_dim) falls one short (98: 63 dims) runs there
    with frequencies base^(-2i / 63), which posenc's RoPE does not express. posenc refuses each by name."""
    text_cls, _ = FAMILIES["dots3_note_text"]
    kw = _shrunk_kwargs(text_cls)
    cases = [
        (dict(layer_types=["attention", "sliding_attention"] * 3), KeyError,
         'layer_types contains "attention"'),
        (dict(rope_parameters={"rope_type": "proportional", "rope_theta": 1e4}), RuntimeError,
         'rope_type = "proportional" is not supported'),
        (dict(rope_parameters={"rope_type": "default", "rope_theta": 1e6},
              rope_scaling={"rope_type": "linear", "factor": 2.0}), KeyError, "beside rope_parameters"),
    ]
    for extra, error, message in cases:
        with pytest.raises(error), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = text_cls(**{**kw, **copy.deepcopy(extra)})
            build(config)(input_ids=torch.ones(1, 2, dtype=torch.long), use_cache=False)
        with pytest.raises(posenc.Error, match=re.escape(message)):
            plan({**kw, **extra, "model_type": "dots3_note_text"})
    config = _dots3_config(head_dim=98)
    rotary = build(config).rotary_emb
    want = 8e7 ** -(np.arange(0, 63, 2) / 63)
    np.testing.assert_allclose(rotary.indexed_attention_inv_freq.double().numpy(), want, rtol=1e-6)
    with pytest.raises(posenc.Error, match=re.escape("int(head_dim * (qk_rope_head_dim / head_dim)) = 63")):
        plan(config.to_dict())
