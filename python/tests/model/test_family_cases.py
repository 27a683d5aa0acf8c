"""Families whose own config forms or modules need a test of their own, against transformers (and the
authors' code where it differs): scaled keys, legacy forms, multimodal positions, sparse-attention
indexers, Kimi K2, Molmo2, Dots 3 Note and the configs transformers cannot run."""
import copy
import importlib
import re
import sys
import warnings

import numpy as np
import pytest
import torch
import transformers
from transformers.models.auto import configuration_auto

import posenc
from family_harness import (
    build,
    check_family,
    one_thread,  # noqa: F401  (an autouse fixture: one torch thread)
    plan,
    rotary_modules,
    shrunk_kwargs,
)
from family_tables import FAMILIES, FAMILY_KWARGS, HEADS, KV_HEADS, LAYERS


def test_falcon_h1_key_multiplier_scales_the_logits_as_transformers():
    """Falcon-H1 multiplies k_proj(x) by key_multiplier before RoPE (modeling_falcon_h1.py
    FalconH1Attention.forward): the logits of the model's attention, from q and k_proj's keys, are those of
    posenc's plan (scale times the factor).
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
    k_model = attn.k_proj(x).view(1, 5, 2, 64).transpose(1, 2) * attn.key_multiplier  # as its forward
    k_proj = attn.k_proj(x).view(1, 5, 2, 64).transpose(1, 2)
    torch.testing.assert_close(q @ k_model.transpose(-1, -2) * attn.scaling,
                               q @ k_proj.transpose(-1, -2) * m.layers[0].attention.softmax_scale)


@pytest.mark.parametrize("idxs", [[2, 5], [0], [], None, [1, 7], "absent"])
def test_lfm2_full_attn_idxs_pick_the_attention_layers_as_transformers(idxs):
    """LFM2 without layer_types: full_attn_idxs picks the attention layers, the others are convolutions
    (configuration_lfm2.py Lfm2Config.__post_init__); posenc's attention layers must be transformers'
    full_attention ones."""
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


def test_hunyuan_ntk_alpha_against_transformers():
    """Hunyuan's checkpoints save rope_type "dynamic" with an alpha: a fixed base theta * alpha^(d / (d - 2))
    (modeling_hunyuan_v1_dense.py compute_ntk_alpha_rope_parameters), not a length-dependent rescale."""
    text_cls, _ = FAMILIES["hunyuan_v1_dense"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**{**shrunk_kwargs(text_cls), "rope_parameters": {
            "rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0, "rope_theta": 1e4}})
    d = config.head_dim
    layer = plan(config.to_dict()).layers[0]
    assert layer.rope.base == pytest.approx(1e4 * 1000.0 ** (d / (d - 2)), rel=1e-12)
    assert layer.rope.scaling.rope_type == "default"
    check_family("hunyuan_v1_dense", config)


def test_hunyuan_vl_flat_legacy_form_against_transformers():
    """HunyuanOCR's flat config (model_type hunyuan_vl, text keys at the top, rope_scaling type "xdrope" with
    xdrope_section and the attention_head_dim alias): HunYuanVLConfig folds it into text_config
    (configuration_hunyuan_vl.py HunYuanVLConfig.__post_init__); the whole text model checked (text tokens:
    every axis equal)."""
    from transformers import AutoConfig

    flat = {"model_type": "hunyuan_vl", "hidden_size": 4 * 128, "num_attention_heads": 4,
            "num_key_value_heads": 2, "num_hidden_layers": LAYERS, "intermediate_size": 32,
            "attention_head_dim": 128, "vocab_size": 128, "max_position_embeddings": 32768, "rope_theta": 1e4,
            "rope_scaling": {"type": "xdrope", "factor": 1.0, "alpha": 1000.0, "beta_fast": 32,
                             "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0,
                             "xdrope_section": [16, 16, 16, 16]}}
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
    from transformers.models.cohere_compass.modeling_cohere_compass import (
        CohereCompassRotaryEmbedding,
        apply_rotary_pos_emb,
    )
    text_cls, _ = FAMILIES["cohere_compass_text"]
    kw = {**shrunk_kwargs(text_cls), **FAMILY_KWARGS["cohere_compass_text"]}
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
    kw = shrunk_kwargs(text_cls)
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
    np.testing.assert_allclose(got, 5e5 ** -exponents,
                               rtol=1e-12)  # the authors': base attn_config.rope_theta
    assert any("transformers 5.23 applies" in w for w in m.warnings), m.warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same = text_cls(**kw, rope_parameters={"rope_type": "default", "rope_theta": 5e5})
    assert not any("transformers 5.23 applies" in w for w in plan(same.to_dict()).warnings)
    check_family("dbrx", same)


@pytest.mark.parametrize("model_type", ["deepseek_v32", "glm_moe_dsa", "axk2", "hy_v4"])
def test_sparse_attention_indexer_against_transformers(model_type):
    """DeepSeek sparse attention's lightning indexer: its q and k rotate the first qk_rope_head_dim dims of
    the index head with the layer's cos / sin, in halves for DeepSeek-V3.2 (modeling_deepseek_v32.py
    DeepseekV32Indexer.forward, as DeepSeek's inference/model.py) and in pairs for GLM-5
    (modeling_glm_moe_dsa.py GlmMoeDsaIndexer.forward, written back de-interleaved as V3's attention: the same
    q.k). posenc's TopkIndexer.rope against the module's own apply function, at positions up to the maximum;
    its top-k, heads and head size; GLM-5's shared layers."""
    text_cls, _ = FAMILIES[model_type]
    kw = {**shrunk_kwargs(text_cls), "index_topk": 5,
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
        assert ix.shared == (model_type in ("glm_moe_dsa",
                                            "hy_v4") and config.indexer_types[layer.layer] == "shared")
    rc = m.layers[0].indexer.rope
    R = config.qk_rope_head_dim
    torch.manual_seed(0)
    B, T = 2, 16
    q, k = torch.randn(B, T, 3, R), torch.randn(B, T, 1, R)
    # (below 8192: transformers' fp32 angles err by ~position * 2^-24 rad, as in test_model_parity.py)
    pos = torch.sort(torch.randint(0, 8192, (B, T)), dim=1).values
    cos, sin = model.rotary_emb(torch.zeros(1, 1, 8), pos)
    halves = model_type in ("deepseek_v32", "axk2",
                            "hy_v4")  # (axk2: DeepSeek-V3.2's indexer, modular_axk2.py)
    if halves:
        assert rc.layout == "half"
        q_hf, k_hf = family.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=2)
    else:
        assert rc.layout == "interleaved"
        q_hf, k_hf = family.apply_rotary_pos_emb_interleave(q, k, cos, sin, unsqueeze_dim=2)
    rotate = lambda x, ix=ix: torch.from_numpy(  # noqa: E731
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
    kw = {**shrunk_kwargs(text_cls), "partial_rotary_factor": 0.5, "rotary_dim": 64,
          "sparse_attention_config": {"sparse_attention_freq": freq, "sparse_num_index_heads": 2,
                                      "sparse_index_dim": 64, "sparse_block_size": 4096,
                                      "sparse_topk_blocks": 3, "sparse_local_block": 1}}
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
        config = text_cls(**{**shrunk_kwargs(text_cls), **FAMILY_KWARGS["qwen4_exp_text"]})
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
    got = np.stack([posenc.rope(q[b:b + 1].numpy(), np.stack([pos[b].numpy()] * 3),
                                config=rc)[0] for b in range(B)])
    torch.testing.assert_close(torch.from_numpy(got), q_hf, atol=2e-3, rtol=1e-4)


def test_qwen4_exp_whole_head_with_default_sections_against_transformers():
    """The class default sections [11, 11, 10] with the whole head rotated (no partial_rotary_factor; the
    index head as wide, which Qwen4-Exp's validation requires): Qwen3-VL's interleave overwrites only the h
    and w pairs below 33, every other pair stays on t. At three distinct position rows, against the model's
    rotary module and apply_rotary_pos_emb."""
    text_cls, _ = FAMILIES["qwen4_exp_text"]
    kw = {**shrunk_kwargs(text_cls), **FAMILY_KWARGS["qwen4_exp_text"], "indexer_head_dim": 256,
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


# Kimi K2's released rope (moonshotai/Kimi-K2-Instruct config.json): DeepSeek-V3's yarn with
# beta_fast = beta_slow.
KIMI_K2_ROPE = {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                "original_max_position_embeddings": 4096, "type": "yarn"}


def test_kimi_k2_is_deepseek_v3_against_transformers():
    """Kimi K2's model_type kimi_k2 is not in transformers 5.23's table: its remote code (auto_map.AutoConfig
    = configuration_deepseek.DeepseekV3Config) is DeepSeek-V3's, and transformers' kimi_k25 reads a kimi_k2
    text_config as deepseek_v3 (configuration_kimi_k25.py Kimi_K25Config.__post_init__). posenc plans both
    forms as deepseek_v3 (with a warning), checked against transformers' DeepseekV3 modules with Kimi's rope
    and against the wrapper."""
    text_cls, _ = FAMILIES["deepseek_v3"]
    kw = {**shrunk_kwargs(text_cls), "rope_theta": 5e4, "rope_scaling": KIMI_K2_ROPE,
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
    got = posenc.ModelPositions.from_hf({"model_type": "kimi_k25",
                                         "text_config": {**d, "model_type": "kimi_k2"}},
                                        warn=False)
    want = plan(wrapper.get_text_config().to_dict())
    assert [repr(a) for a in got.layers] == [repr(a) for a in want.layers]
    assert "kimi_k2" in got.warnings[0]


def test_molmo2_scaled_and_unscaled_layers_against_transformers():
    """Molmo 2 with yarn on rope_scaling_layers [0, 2, 3] only: those layers take rotary_emb (yarn), the
    others rotary_emb_unscaled (default, the same base) (modeling_molmo2.py Molmo2TextModel); the whole
    model."""
    text_cls, _ = FAMILIES["molmo2_text"]
    kw = {**shrunk_kwargs(text_cls), "rope_scaling_layers": [0, 2, 3],
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
    says (modeling_molmo2.py Molmo2RotaryEmbedding.compute_default_rope_parameters); a scaled type's init
    reads it (modeling_rope_utils.py _compute_yarn_parameters: yarn), and its cos / sin of int(head_dim * prf)
    dims cannot multiply the whole head (modeling_molmo2.py apply_rotary_pos_emb): the model builds, its first
    forward fails, and posenc refuses by name. Without a scaled layer (rope_scaling_layers []) transformers
    runs every layer on the unscaled module: the whole head."""
    text_cls, _ = FAMILIES["molmo2_text"]
    yarn = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6, "original_max_position_embeddings": 1024,
            "partial_rotary_factor": 0.5}
    for layers in (None, [1]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = text_cls(**{**shrunk_kwargs(text_cls), "rope_parameters": dict(yarn),
                                 "rope_scaling_layers": layers})
        with pytest.raises(RuntimeError, match="must match the size of tensor"), torch.no_grad():
            build(config)(input_ids=torch.ones(1, 2, dtype=torch.long))
        with pytest.raises(posenc.Error, match="partial_rotary_factor = 0.5 with rope type 'yarn' is not "
                                               "supported for molmo2_text: its rotary module then builds "
                                               "cos / sin of 64 dims"):
            plan(config.to_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**{**shrunk_kwargs(text_cls), "rope_parameters": dict(yarn),
                             "rope_scaling_layers": []})
    m = plan(config.to_dict())
    assert all(lay.rotary_dims == (0, config.head_dim) and lay.rope.scaling.rope_type == "default"
               for lay in m.layers)
    check_family("molmo2_text", config)


def test_molmo2_wrapper_and_scaling_layers_against_transformers():
    """Molmo2Config builds a text_config without model_type as Molmo2TextConfig (its sub_configs_defaults,
    configuration_utils.py SubConfigSpec.create_subconfig): the same plan as with model_type.
    rope_scaling_layers indices outside the model scale no layer (modeling_molmo2.py Molmo2TextModel.__init__:
    `layer_idx in config.rope_scaling_layers`): planned without them, with a warning naming them; the whole
    model against transformers."""
    text_cls, _ = FAMILIES["molmo2_text"]
    kw = {**shrunk_kwargs(text_cls), "rope_scaling_layers": [0, 2, 7, -1],
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
    """Hunyuan 4's default init rotates the whole 64-dim rope head (modeling_hy_v4.py
    HYV4RotaryEmbedding.compute_default_rope_parameters); yarn's init reads partial_rotary_factor
    (modeling_rope_utils.py _compute_yarn_parameters) and its narrower cos / sin cannot multiply the head
    (modeling_hy_v4.py apply_rotary_pos_emb): transformers' first forward fails, posenc refuses by name."""
    text_cls, _ = FAMILIES["hy_v4"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**{**shrunk_kwargs(text_cls), "rope_parameters": {
            "rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4, "original_max_position_embeddings": 1024,
            "partial_rotary_factor": 0.5}})
    with pytest.raises(RuntimeError, match="must match the size of tensor"), torch.no_grad():
        build(config)(input_ids=torch.ones(1, 2, dtype=torch.long), use_cache=False)
    with pytest.raises(posenc.Error, match="partial_rotary_factor = 0.5 with rope type 'yarn' is not "
                                           "supported for hy_v4: its rotary module then builds cos / sin "
                                           "of 32 dims"):
        plan(config.to_dict())


def test_zaya_scaled_rope_needs_original_max_position_embeddings():
    """ZAYA's convert_rope_params_to_dict skips standardize_rope_params (configuration_zaya.py), which gives
    other families' yarn dicts original_max_position_embeddings (modeling_rope_utils.py
    standardize_rope_params): its validation raises KeyError without it (_check_received_keys), as posenc
    refuses by name; with it, the whole model against transformers (yarn on the hybrid layers' half head)."""
    text_cls, _ = FAMILIES["zaya"]
    yarn = {"rope_type": "yarn", "rope_theta": 5e6, "factor": 4.0, "partial_rotary_factor": 0.5}
    rp = {"hybrid": yarn,
          "hybrid_sliding": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}}
    kw = {**shrunk_kwargs(text_cls), "rope_parameters": rp}
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
    num_attention_heads (configuration_glm5_next.py Glm5NextTextConfig): posenc refuses by name."""
    text_cls, _ = FAMILIES["glm5_next_text"]
    kw = shrunk_kwargs(text_cls)
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
    """Each layer reads indexer_types[layer_idx] (modeling_glm_moe_dsa.py GlmMoeDsaAttention.__init__,
    modeling_hy_v4.py HYV4Attention.__init__, modeling_glm5_next.py Glm5NextTextAttention.__init__): entries
    past the last layer are never read, so transformers runs; posenc ignores them too, with a warning.
    GLM-5-Next's linear layers never read theirs: a list ending after its last indexed layer runs as well. The
    shared layers against the attention modules' skip_topk; the whole model through check_family."""
    text_cls, _ = FAMILIES[model_type]
    kw = shrunk_kwargs(text_cls)
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
    kw = {**shrunk_kwargs(text_cls), "global_rope_theta": 5e4, "local_rope_theta": 3e3,
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
        config = text_cls(**shrunk_kwargs(text_cls))
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
        yarn = text_cls(**shrunk_kwargs(text_cls)).to_dict()
    yarn["rope_parameters"] = {**yarn["rope_parameters"], "rope_type": "linear", "factor": 2.0}
    with pytest.raises(posenc.Error, match='requires "default"'):
        plan(yarn)


# ------------------------------------------------------------------ Dots 3 Note


def _dots3_config(**extra):
    text_cls, _ = FAMILIES["dots3_note_text"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return text_cls(**{**shrunk_kwargs(text_cls), **extra})


def check_dots3_layers(config, m):
    """Each layer's MLA against its Dots3NoteTextAttention (modeling_dots3_note.py, its __init__ building it
    from the layer's own config): the q / k head, the value head, the rotated range
    [qk_nope, qk_nope + qk_rope), the scale, the window; the type's base and frequencies against the rotary
    module's buffers; the indexer on indexed_attention layers (index_n_heads heads of index_head_dim, the
    first qk_rope_head_dim dims rotated in pairs with the same cos / sin, Dots3NoteTextIndexer.forward)
    against the module's own apply function."""
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
        rotate = lambda x, ix=ix: torch.from_numpy(  # noqa: E731
            posenc.rope(x.numpy(), pos.numpy(), config=ix.rope, seq_len=config.max_position_embeddings))
        scores = lambda a, b: torch.einsum("bshd,btd->bhst", a, b[:, :, 0])  # noqa: E731
        torch.testing.assert_close(scores(rotate(q), rotate(k)), scores(q_hf, k_hf), atol=2e-3, rtol=1e-4)


@pytest.mark.parametrize("extra", [
    {},
    # other sliding dims and base (swa_* of the released form), a window the mask shows
    {"swa_head_dim": 128, "swa_qk_nope_head_dim": 96, "swa_qk_rope_head_dim": 32, "swa_v_head_dim": 64,
     "swa_rope_theta": 1e4, "sliding_window": 4},
    # per-type rope dicts: yarn (mscale only in cos / sin: the scale stays qk_head_dim^-0.5,
    # Dots3NoteTextAttention.__init__) and dynamic
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
    v 128 by default, base swa_rope_theta 5e4, windows of 512; configuration_dots3_note.py
    Dots3NoteTextConfig.__post_init__, convert_rope_params_to_dict) beside the indexed layers' (nope 128, base
    8e7): per layer against the running modules, then the whole model."""
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
    """The published checkpoints' form: a flat "dots3_note" config (Dots3NoteConfig.__post_init__ builds
    text_config from the top-level keys, configuration_dots3_note.py) with use_dsa, the legacy full_attention
    name, sliding_window_size and the swa_* keys. Its plan equals the text config's (and the saved wrapper's),
    and the text model matches transformers'; with use_dsa false the full layers run without an indexer."""
    from transformers import AutoConfig

    text_cls, _ = FAMILIES["dots3_note_text"]
    kw = shrunk_kwargs(text_cls)
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
    # with per_layer_config given, the swa_* keys are popped unread (Dots3NoteTextConfig.__post_init__):
    # named in warnings
    d = {**text.to_dict(), "swa_head_dim": 128}
    assert any("swa_head_dim = 128 is not read" in w for w in plan(d).warnings)


def test_dots3_note_configs_transformers_cannot_run_are_refused():
    """Legacy layer names (its rope dicts are keyed before configuration_utils.py's remap: KeyError in the
    rotary module), a proportional rope (cos / sin of head_dim, not the rotated dims: a shape mismatch), and
    rope_scaling beside rope_parameters (it replaces them without a dict per type: KeyError) fail in
    transformers; a head_dim whose int(head_dim * qk_rope / head_dim) falls one short (98: 63 dims) runs there
    with frequencies base^(-2i / 63), which posenc's RoPE does not express. posenc refuses each by name."""
    text_cls, _ = FAMILIES["dots3_note_text"]
    kw = shrunk_kwargs(text_cls)
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
