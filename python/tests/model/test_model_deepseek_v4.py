"""DeepSeek-V4's per-layer plan (src/model/deepseek_v4.cc) against transformers 5.23's own code, built from
the real config tests/data/hf_configs/deepseek-v4__DeepSeek-V4-Flash-NVFP4.json: the config class's layer
types and rates, the rotary module's two frequency sets, the attention modules (scale, window, sinks,
compressors, indexers), and apply_rotary_pos_emb on the last 64 of 512 dims, forward and with -sin on the
output (the rotation back that makes the rotated values relative)."""
import json
import os
import warnings

import numpy as np
import pytest

import posenc
from hf_oracle import HF_CONFIGS

torch = pytest.importorskip("torch")
from transformers import AutoConfig  # noqa: E402

NAME = os.path.join(HF_CONFIGS, "deepseek-v4__DeepSeek-V4-Flash-NVFP4.json")


def real():
    with open(NAME, encoding="utf-8") as f:
        return json.load(f)


def hf_config(**changes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoConfig.for_model(**{**real(), **changes})


def test_layer_types_rates_and_frequencies_against_transformers():
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4RotaryEmbedding

    config = hf_config()
    m = posenc.ModelPositions.from_hf(NAME)
    assert [layer.layer_type for layer in m.layers] == config.layer_types
    rotary = DeepseekV4RotaryEmbedding(config)
    for layer in m.layers:
        label = "main" if layer.layer_type == "sliding_attention" else "compress"
        want = getattr(rotary, f"{label}_inv_freq").double().numpy()
        for seq_len in (1, 65536, 2 * 65536, config.max_position_embeddings):  # yarn here is static
            got, factor = layer.inv_freq(seq_len)
            np.testing.assert_allclose(got, want, rtol=2e-6, err_msg=f"layer {layer.layer} {label}")
            assert factor == pytest.approx(getattr(rotary, f"{label}_attention_scaling"), rel=1e-12)
        if layer.compressed is not None:
            assert layer.compressed["rate"] == config.compress_rates[layer.layer_type]
            assert layer.compressed["overlapping"] == (layer.layer_type == "compressed_sparse_attention")
        assert layer.rotary_dims == (config.head_dim - config.qk_rope_head_dim, config.head_dim)


def test_attention_modules_against_transformers():
    """Four layers of the real config (the layer types of layers 0-3: sliding, sliding, CSA, HCA), on meta."""
    from transformers import AutoModel

    config = hf_config(num_hidden_layers=4, n_routed_experts=4, num_experts_per_tok=2)
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModel.from_config(config)
    d = real()
    m = posenc.ModelPositions.from_hf({**d, "num_hidden_layers": 4})
    for layer, block in zip(m.layers, model.layers):
        attn = block.self_attn
        a = layer.attention
        assert a.softmax_scale == pytest.approx(attn.scaling, rel=1e-15)
        assert a.window == attn.sliding_window and a.causal == attn.is_causal
        assert a.sinks and tuple(attn.sinks.shape) == (config.num_attention_heads,)
        assert attn.rope_layer_type == ("main" if layer.layer_type == "sliding_attention" else "compress")
        assert layer.rotated_values and attn.config.num_key_value_heads == 1
        if layer.compressed is None:
            assert attn.compressor is None
            continue
        assert attn.compressor.compress_rate == layer.compressed["rate"]
        has_indexer = hasattr(attn.compressor, "indexer")
        assert has_indexer == (layer.indexer is not None)
        if has_indexer:
            ix = attn.compressor.indexer
            assert layer.indexer.over_compressed and layer.indexer.topk == config.index_topk
            assert (layer.indexer.heads, layer.indexer.head_dim) == (config.index_n_heads,
                                                                     config.index_head_dim)
            assert ix.rope_layer_type == "compress"
    assert m.layers[0].attention_config()["rotate_values"]  # a sliding layer: rotate_values
    with pytest.raises(posenc.Error, match="attends to compressed entries"):
        m.layers[2].attention_config()


def test_rotation_and_rotation_back_against_apply_rotary_pos_emb():
    """modeling_deepseek_v4.py apply_rotary_pos_emb: pairs on x[..., -64:], the rest passed; with -sin
    (the output's rotation back at the query's position) it is the transposed rotation,
    posenc.rope_backward."""
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import (
        DeepseekV4RotaryEmbedding,
        apply_rotary_pos_emb,
    )

    config = hf_config()
    rotary = DeepseekV4RotaryEmbedding(config)
    m = posenc.ModelPositions.from_hf(NAME)
    rng = np.random.default_rng(4)
    pos = np.array([0, 1, 127, 128, 2049, 4096, 8191])  # transformers' angles are fp32 products: kept < 8192
    x = rng.standard_normal((1, 2, pos.size, 512)).astype(np.float32)  # [B, H, T, D] as the module
    for layer in (m.layers[0], m.layers[2]):
        label = "main" if layer.layer_type == "sliding_attention" else "compress"
        cos, sin = rotary(torch.from_numpy(x), torch.from_numpy(pos)[None], layer_type=label)
        lo, hi = layer.rotary_dims
        rope_in = np.ascontiguousarray(x.transpose(0, 2, 1, 3)[..., lo:hi])  # [B, T, H, 64]
        for sign, posenc_op in ((1, posenc.rope), (-1, posenc.rope_backward)):
            want = apply_rotary_pos_emb(torch.from_numpy(x).double(), cos.double(),
                                        sign * sin.double()).numpy()
            got = posenc_op(rope_in, pos, config=layer.rope).transpose(0, 2, 1, 3)
            np.testing.assert_allclose(got, want[..., lo:hi], atol=2e-3, rtol=1e-4,
                                       err_msg=f"{label} sign {sign}")
            np.testing.assert_array_equal(want[..., :lo], x[..., :lo])


def test_sliding_layer_attention_against_transformers():
    """A shrunk DeepSeek-V4 (two sliding layers of the real config's form, random weights): each layer's
    DeepseekV4Attention output against posenc.attention(q, kv, kv, sinks, **layer.attention_config())
    (window, sinks, RoPE on the last dims, rotate_values) through the module's own projections."""
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

    d = real()
    small = dict(vocab_size=64, hidden_size=64, moe_intermediate_size=32, num_hidden_layers=2,
                 num_attention_heads=4, head_dim=32, q_lora_rank=16, qk_rope_head_dim=8, o_groups=2,
                 o_lora_rank=16, sliding_window=8, compress_ratios=[0, 0], index_n_heads=2, index_head_dim=16,
                 n_routed_experts=4, num_experts_per_tok=2, rope_theta=d["rope_theta"],
                 compress_rope_theta=d["compress_rope_theta"], rope_scaling=d["rope_scaling"],
                 max_position_embeddings=d["max_position_embeddings"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = DeepseekV4Config(**small)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = DeepseekV4ForCausalLM(config).float().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    captured = {}
    for i, block in enumerate(model.model.layers):
        block.self_attn.register_forward_hook(
            lambda mod, args, kwargs, out, i=i: captured.__setitem__(
                i, (kwargs.get("hidden_states", args[0] if args else None), out[0])),
            with_kwargs=True)
    T = 20  # > the window of 8
    with torch.no_grad():
        model(torch.randint(0, 64, (1, T)))
    m = posenc.ModelPositions.from_hf({**small, "model_type": "deepseek_v4"})
    for i, attn in enumerate(model.model.layers):
        attn = attn.self_attn
        layer = m.layers[i]
        x, want = captured[i]
        with torch.no_grad():
            q = attn.q_b_norm(attn.q_b_proj(attn.q_a_norm(attn.q_a_proj(x))).view(1, T, 4, 32))
            kv = attn.kv_norm(attn.kv_proj(x)).view(1, T, 1, 32)
            out = posenc.attention(q.numpy(), kv.numpy(), kv.numpy(), sinks=attn.sinks.detach().numpy(),
                                   **layer.attention_config())
            got = attn.o_b_proj(attn.o_a_proj(torch.from_numpy(out).reshape(1, T, 2, -1)).flatten(2))
        torch.testing.assert_close(got, want, atol=2e-4, rtol=1e-4)
    # without the values' rotation the outputs differ: the test is not vacuous
    kwargs = m.layers[0].attention_config()
    kwargs["rotate_values"] = False
    with torch.no_grad():
        plain = posenc.attention(q.numpy(), kv.numpy(), kv.numpy(), sinks=attn.sinks.detach().numpy(),
                                 **kwargs)
    assert np.abs(plain - out).max() > 1e-2
