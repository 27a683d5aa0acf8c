"""Encoders and encoder-decoders against transformers: UltraBERT's checkpoint keys, the seq2seq
decoders alone, fairseq's sinusoidal tables, the T5 variants, EmbeddingGemma and MobileBERT."""
import copy
import warnings

import pytest
import torch
import transformers
from transformers.models.auto import configuration_auto, modeling_auto

import posenc
from family_harness import (
    build,
    check_family,
    check_mobilebert,
    check_seq2seq,
    family_config,
    one_thread,  # noqa: F401  (an autouse fixture: one torch thread)
    plan,
    seq2seq_inputs,
    shrunk_kwargs,
)
from family_tables import FAMILIES, HEADS, SEQ2SEQ

_ULTRABERT = dict(num_hidden_layers=6, hidden_size=256, num_attention_heads=4, intermediate_size=32,
                  vocab_size=256, pad_token_id=0, bos_token_id=0, eos_token_id=0)


@pytest.mark.parametrize("keys", [
    dict(attention_windows=[64, 64, 0, 32, 64, 0]),                    # types and the first window
    dict(attention_windows=[0, 16, 0, 0, 8, 0], sliding_window=512),   # the windows' first one wins
    dict(rope_theta=[1e4, 2e4, 5e5, 3e4, 4e4, 6e5]),                   # the last base of a type wins
    dict(attention_windows=[0, 8, 8, 0, 8, 8], rope_theta=[7e5, 1e4, 2e4, 8e5, 3e4, 4e4]),
    dict(rope_theta=[1e4] * 6, rope_parameters={"sliding_attention": {"rope_type": "default",
                                                                      "rope_theta": 5e3},
                                                 "full_attention": {"rope_type": "default",
                                                                    "rope_theta": 5e6}}),
])
def test_ultrabert_checkpoint_keys_as_its_config_class_reads_them(keys):
    """UltraBERT's checkpoints save attention_windows and a base per layer (configuration_ultrabert.py
    UltrabertConfig.__post_init__): posenc reads them as the config class does, then the whole plan is checked
    on the model."""
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


@pytest.mark.parametrize("model_type", sorted(SEQ2SEQ & set(FAMILIES)))
def test_seq2seq_decoder_alone_as_its_causal_lm_saves_it(model_type):
    """BartForCausalLM & co. (the decoder alone, e.g. Whisper's assistant decoders) save
    is_encoder_decoder false: the plan is the decoder's layers, causal, with the decoder's table."""
    config = family_config(model_type, "default")
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(transformers,
                        modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])(config).eval()
    m = plan(model.config.to_dict())
    assert m.num_layers == config.decoder_layers and m.encoder_max_position_embeddings == 0
    assert all(layer.layer_type == "decoder" and layer.attention.causal for layer in m.layers)
    check_seq2seq(model_type, model, m, seq2seq_inputs(config, decoder=False))


@pytest.mark.parametrize("model_type", ["m2m_100", "nllb-moe"])
def test_fairseq_sinusoidal_seq2seq_against_transformers(model_type):
    """M2M100 (NLLB-200's model_type) and NLLB-MoE have no causal-LM head (not in FAMILIES): their
    class defaults, shrunk, against their own models; position p at row p + pad_token_id + 1."""
    cls = type(configuration_auto.CONFIG_MAPPING[model_type]())
    kw = {**shrunk_kwargs(cls), "decoder_attention_heads": HEADS, "decoder_layers": 2}
    config = cls(**kw)
    m = plan(config.to_dict())
    assert m.sinusoidal["offset"] == config.pad_token_id + 1 and m.model_type == model_type
    check_seq2seq(model_type, build(config), m, seq2seq_inputs(config))


@pytest.mark.parametrize("model_type", ["t5", "mt5", "umt5", "switch_transformers"])
def test_t5_variants_against_their_modules(model_type):
    """T5's family (no causal-LM or masked-LM head: not in FAMILIES), class defaults shrunk, against each
    stack's self-attention modules: which ones own a bucket table (T5, mT5, Switch: the first of each stack;
    UMT5: every one, modeling_umt5.py UMT5LayerSelfAttention), the bucket count and distance they read,
    bidirectional buckets in the encoder (not is_decoder) and the unscaled head of d_kv; the decoder's causal
    mask."""
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


def test_embeddinggemma_bidirectional_against_transformers():
    """Gemma 3 text models with use_bidirectional_attention (EmbeddingGemma): Gemma3TextConfig halves the
    saved window (sliding_window // 2 + 1) and Gemma3TextModel's masks see every key on full layers, the
    keys |q - k| < that window on sliding layers (modeling_gemma3.py _bidirectional_window_overlay)."""
    text_cls, _ = FAMILIES["gemma3_text"]
    kw = {**shrunk_kwargs(text_cls), "use_bidirectional_attention": True, "sliding_window": 6}
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


@pytest.mark.parametrize("extra", [{}, {"use_bottleneck": False}, {"use_bottleneck_attention": True},
                                   {"intra_bottleneck_size": 96, "num_attention_heads": 8},
                                   {"key_query_shared_bottleneck": False, "use_bottleneck_attention": True},
                                   {"key_query_shared_bottleneck": False, "use_bottleneck": False},
                                   {"is_decoder": True}])
def test_mobilebert_bottleneck_heads_against_transformers(extra):
    """true_hidden_size is intra_bottleneck_size with use_bottleneck (the default), hidden_size without
    (configuration_mobilebert.py MobileBertConfig.__post_init__); use_bottleneck_attention and
    key_query_shared_bottleneck only choose the projections' inputs; is_decoder leaves the mask bidirectional
    (modeling_mobilebert.py MobileBertSelfAttention.__init__, MobileBertModel.forward)."""
    text_cls, _ = FAMILIES["mobilebert"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**{**shrunk_kwargs(text_cls), **extra})
    width = config.intra_bottleneck_size if config.use_bottleneck else config.hidden_size
    assert config.true_hidden_size == width
    m = plan(config.to_dict())
    assert {layer.qk_head_dim for layer in m.layers} == {width // config.num_attention_heads}
    assert not any(layer.attention.causal for layer in m.layers)
    check_mobilebert(config, f"mobilebert {extra}")


def test_mobilebert_configs_transformers_cannot_run_are_refused():
    """A saved true_hidden_size is set after MobileBertConfig.__post_init__ derives it (configuration_utils.py
    PreTrainedConfig.__post_init__): another width than the bottleneck's cannot run in transformers; neither
    can key_query_shared_bottleneck false without use_bottleneck_attention (q and k read the hidden_size-wide
    input, modeling_mobilebert.py Bottleneck.forward, through projections of true_hidden_size inputs). posenc
    refuses both by name; the equal true_hidden_size of the released configs plans as without it."""
    text_cls, _ = FAMILIES["mobilebert"]
    kw = {**shrunk_kwargs(text_cls), "intra_bottleneck_size": 64}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        saved = text_cls(**kw, true_hidden_size=128)
        unshared = text_cls(**kw, key_query_shared_bottleneck=False)
    assert saved.true_hidden_size == 128  # the saved value, not intra_bottleneck_size
    for config, message in ((saved, "true_hidden_size = 128 is invalid for mobilebert"),
                            (unshared,
                             "key_query_shared_bottleneck = false is not supported for mobilebert")):
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
