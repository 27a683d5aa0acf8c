"""Real families' attention layers, end to end: transformers 5's own attention module of a family (tiny
random weights, eager attention) against posenc's fused attention configured by the layer plan that
posenc.ModelPositions reads from the same config (**layer.attention_config()): outputs, and the
gradients of the input and of every weight.

- DeepSeek-V3 (modeling_deepseek_v3.py DeepseekV3Attention): multi-head latent attention, q/k heads of
  qk_nope + qk_rope dims with RoPE on the last qk_rope (interleaved, rope_interleave), v heads of
  v_head_dim, yarn with mscale_all_dim (softmax scale times mscale^2, yarn_apply_mscale).
- Llama 4 (modeling_llama4.py Llama4TextAttention): RoPE layers with chunked attention
  (masking_utils.chunked_causal_mask_function) and NoPE layers with attn_temperature_tuning.
"""
import warnings

import pytest
import torch

import posenc
import posenc.torch as pt
from hf_oracle import HF_CONFIGS


def _layer_plan(config, layer):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", posenc.PositionWarning)
        return posenc.ModelPositions.from_hf(config.to_dict()).layers[layer]


def _randomize(module, seed):
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * (0.5 if p.ndim > 1 else 1.0))
    return module.eval()


def _additive(mask_fn, T):
    allowed = mask_fn(torch.tensor(0), torch.tensor(0), torch.arange(T)[:, None], torch.arange(T)[None, :])
    return torch.zeros(T, T).masked_fill(~allowed, float("-inf"))[None, None]


def _compare(ours, theirs, x, module, atol=5e-5, grad_atol=2e-4):
    torch.testing.assert_close(ours, theirs, atol=atol, rtol=atol)
    params = [x] + list(module.parameters())
    names = ["x"] + [n for n, _ in module.named_parameters()]
    g = torch.randn_like(ours)
    ga, gb = torch.autograd.grad(ours, params, g), torch.autograd.grad(theirs, params, g)
    for name, a, b in zip(names, ga, gb):
        torch.testing.assert_close(a, b, atol=grad_atol, rtol=grad_atol,
                                   msg=lambda m, name=name: f"{name}: {m}")


# --------------------------------------------------------------------------------------- DeepSeek-V3

@pytest.mark.parametrize("mscale", [1.0, 0.707])  # DeepSeek-V3 (1.0) and DeepSeek-V2-Lite (0.707)
def test_deepseek_v3_mla_attention_layer(mscale):
    from transformers import masking_utils as mu
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as mod
    from transformers.models.deepseek_v3.configuration_deepseek_v3 import DeepseekV3Config
    H, nope, rope, v_dim, T, B = 4, 8, 4, 6, 11, 2
    config = DeepseekV3Config(
        hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_attention_heads=H,
        num_key_value_heads=H,
        num_hidden_layers=1, q_lora_rank=None, kv_lora_rank=16, qk_nope_head_dim=nope, qk_rope_head_dim=rope,
        v_head_dim=v_dim, vocab_size=64, max_position_embeddings=64,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 16,
                         "beta_fast": 32, "beta_slow": 1, "mscale": mscale, "mscale_all_dim": mscale})
    config._attn_implementation = "eager"
    layer = _randomize(mod.DeepseekV3Attention(config, layer_idx=0), 3)
    rotary = mod.DeepseekV3RotaryEmbedding(config)
    x = torch.randn(B, T, 32, requires_grad=True)
    positions = torch.arange(5, 5 + T)[None].expand(B, T)  # a chunk of a longer sequence
    theirs, _ = layer(x, rotary(x, positions), _additive(mu.causal_mask_function, T))

    plan = _layer_plan(config, 0)
    assert plan.rotary_dims == (nope, nope + rope)
    assert plan.qk_head_dim == nope + rope and plan.v_head_dim == v_dim
    assert plan.attention.softmax_scale == pytest.approx(layer.scaling, rel=1e-12)

    def ours_fn(x):  # the module's projections, then posenc's attention with RoPE on [nope, nope + rope)
        q = layer.q_proj(x).view(B, T, H, nope + rope)
        kv_nope, k_rot = torch.split(layer.kv_a_proj_with_mqa(x), [config.kv_lora_rank, rope], dim=-1)
        kv = layer.kv_b_proj(layer.kv_a_layernorm(kv_nope)).view(B, T, H, nope + v_dim)
        k_nope, v = torch.split(kv, [nope, v_dim], dim=-1)
        k = torch.cat([k_nope, k_rot[:, :, None, :].expand(B, T, H, rope)], dim=-1)
        out = pt.attention(q, k, v.contiguous(), q_positions=positions, k_positions=positions,
                           **plan.attention_config())
        return layer.o_proj(out.reshape(B, T, H * v_dim))

    _compare(ours_fn(x), theirs, x, layer)


# ------------------------------------------------------------------------------------------- Llama 4

def _llama4(chunk, floor_scale):
    from transformers.models.llama4.configuration_llama4 import Llama4TextConfig
    config = Llama4TextConfig(
        hidden_size=32, intermediate_size=64, intermediate_size_mlp=64, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, num_hidden_layers=2, no_rope_layers=[1, 0],
        attention_chunk_size=chunk, floor_scale=floor_scale, attn_scale=0.1, attn_temperature_tuning=True,
        use_qk_norm=True, vocab_size=64, max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 500.0})
    config._attn_implementation = "eager"
    return config


@pytest.mark.parametrize("layer_idx", [0, 1])  # 0: RoPE + chunked attention, 1: NoPE + query temperature
def test_llama4_attention_layer(layer_idx):
    from transformers import masking_utils as mu
    from transformers.models.llama4 import modeling_llama4 as mod
    B, T, H, D = 2, 13, 4, 8
    config = _llama4(chunk=4, floor_scale=3)
    layer = _randomize(mod.Llama4TextAttention(config, layer_idx=layer_idx), 5 + layer_idx)
    x = torch.randn(B, T, 32, requires_grad=True)
    freqs = mod.Llama4TextRotaryEmbedding(config)(x, torch.arange(T)[None].expand(B, T))
    use_rope = bool(config.no_rope_layers[layer_idx])
    chunked = mu.chunked_causal_mask_function(4, torch.zeros(1, dtype=torch.int64))
    mask_fn = chunked if use_rope else mu.causal_mask_function
    theirs, _ = layer(x, freqs, _additive(mask_fn, T))

    plan = _layer_plan(config, layer_idx)
    assert plan.position == ("rope" if use_rope else "none")
    kwargs = plan.attention_config()
    assert kwargs["chunk"] == (4 if use_rope else 0)
    assert ("query_temperature" in kwargs) == (not use_rope)

    def ours_fn(x):
        q = layer.q_proj(x).view(B, T, H, D)
        k = layer.k_proj(x).view(B, T, -1, D)
        v = layer.v_proj(x).view(B, T, -1, D)
        if hasattr(layer, "qk_norm"):  # an L2 norm over the head: it commutes with the rotation
            q, k = layer.qk_norm(q), layer.qk_norm(k)
        out = pt.attention(q, k, v, **kwargs)
        return layer.o_proj(out.reshape(B, T, H * D))

    _compare(ours_fn(x), theirs, x, layer)


def test_llama4_temperature_reaches_the_scores():
    """Not vacuous: without the query temperature the NoPE layer's output differs."""
    from transformers.models.llama4 import modeling_llama4 as mod
    config = _llama4(chunk=4, floor_scale=3)
    layer = _randomize(mod.Llama4TextAttention(config, layer_idx=1), 6)
    x = torch.randn(1, 13, 32)
    kwargs = _layer_plan(config, 1).attention_config()
    q, k, v = (p(x).view(1, 13, -1, 8) for p in (layer.q_proj, layer.k_proj, layer.v_proj))
    with_t = pt.attention(q, k, v, **kwargs)
    kwargs.pop("query_temperature")
    assert not torch.allclose(with_t, pt.attention(q, k, v, **kwargs), atol=1e-3)


def test_attention_config_of_every_real_config_runs():
    """Every collected config's layer plans hand posenc.attention valid arguments (shapes from the plan)."""
    import glob
    import os

    import numpy as np
    data = HF_CONFIGS
    ran = 0
    for path in sorted(glob.glob(os.path.join(data, "*.json"))):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", posenc.PositionWarning)
                m = posenc.ModelPositions.from_hf(path)
        except posenc.Error:
            continue  # refused families (tested elsewhere)
        for layer in {each.layer_type: each for each in m.layers}.values():
            if layer.qk_head_dim == 0 or layer.position in ("alibi", "t5"):
                continue
            rng = np.random.default_rng(0)
            q = rng.standard_normal((1, 3, 2, layer.qk_head_dim), dtype=np.float32)
            k = rng.standard_normal((1, 3, 1, layer.qk_head_dim), dtype=np.float32)
            v = rng.standard_normal((1, 3, 1, layer.v_head_dim), dtype=np.float32)
            if layer.compressed is not None:  # DeepSeek-V4's compressed entries (test_model_deepseek_v4.py)
                with pytest.raises(posenc.Error, match="attends to compressed entries"):
                    layer.attention_config()
                continue
            if layer.rope is not None and layer.rope.multimodal != "none":
                with pytest.raises(posenc.Error, match="multimodal"):
                    layer.attention_config()
                kwargs = layer.attention_config(rope=False)
            else:
                kwargs = layer.attention_config()
            if layer.attention.sinks:
                kwargs["sinks"] = np.zeros(2, np.float32)
            out = posenc.attention(q, k, v, **kwargs)
            assert out.shape == (1, 3, 2, layer.v_head_dim) and np.isfinite(out).all(), os.path.basename(path)
            ran += 1
    assert ran >= 40
