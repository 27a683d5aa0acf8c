"""MiniCPM and Baichuan (remote code: modeling files in the models' repositories, forks of transformers 4's
Llama; src/model/remote_llama_forks.cc) against transcriptions of the authors' code written out here, in
float64, with the file and function each follows: MiniCPM's rotary modules (plain, linear, dynamic NTK,
MiniCPM4's MiniCPMLongRoPE), Baichuan's RoPE and its 13B models' ALiBi (_get_interleave, slope times the
key index under a causal mask) in a whole attention. The real configs are tests/data/hf_configs."""
import math

import numpy as np
import pytest

import posenc

torch = pytest.importorskip("torch")
from transformers import AutoConfig  # noqa: E402

from test_model_remote import load, plan  # noqa: E402  (a file name under tests/data/hf_configs, or a dict)


def rotate_halves(x, angles, scale=1.0):
    """x [T, H, D] rotated in halves (rotate_half) by angles [T, D / 2], cos and sin times scale."""
    c, s = np.cos(angles)[:, None, :] * scale, np.sin(angles)[:, None, :] * scale
    h = angles.shape[1]
    x0, x1 = x[..., :h], x[..., h:]
    return np.concatenate([x0 * c - x1 * s, x1 * c + x0 * s], axis=-1)


@pytest.mark.parametrize("name", ["minicpm__MiniCPM-2B-sft-bf16", "minicpm__MiniCPM-2B-128k",
                                  "baichuan__Baichuan2-13B-Chat"])
def test_not_in_transformers(name):
    d = load(name)
    with pytest.raises((ValueError, KeyError)):
        AutoConfig.for_model(**d) if "model_type" in d else AutoConfig.for_model("minicpm", **d)
    m = plan(name)
    assert m.model_type in ("minicpm", "baichuan") and m.remote_code


# ---------------------------------------------------------------- MiniCPM

def minicpm_inv_freq(base, dim):
    # modeling_minicpm.py MiniCPMRotaryEmbedding.__init__
    return 1.0 / base ** (np.arange(0, dim, 2) / dim)


def test_minicpm_dynamic_ntk_against_the_authors_code():
    """MiniCPMDynamicNTKScalingRotaryEmbedding._set_cos_sin_cache(seq_len): past max_position_embeddings
    M, base = rope_theta * ((factor * seq_len / M) - (factor - 1)) ** (dim / (dim - 2)) (MiniCPM-2B-128k)."""
    d = load("minicpm__MiniCPM-2B-128k")
    layer = plan("minicpm__MiniCPM-2B-128k").layers[0]
    factor, M, dim = d["rope_scaling"]["factor"], d["max_position_embeddings"], 64
    for L in (1, M, M + 1, 2 * M, 4 * M):
        base = d["rope_theta"]
        if L > M:
            base = base * ((factor * L / M) - (factor - 1)) ** (dim / (dim - 2))
        np.testing.assert_allclose(layer.inv_freq(L)[0], minicpm_inv_freq(base, dim), rtol=1e-13)


def test_minicpm_linear_rotation_against_the_authors_code():
    """MiniCPMLinearScalingRotaryEmbedding: t = t / scaling_factor; apply_rotary_pos_emb (rotate_half) on
    the whole head of hidden_size / num_attention_heads."""
    d = dict(load("minicpm__MiniCPM-2B-sft-bf16"), rope_scaling={"type": "linear", "factor": 3.0})
    layer = plan(d).layers[0]
    pos = np.array([0, 1, 5, 1000, 4095, 12000])
    x = np.random.default_rng(0).standard_normal((1, pos.size, 2, 64))
    want = rotate_halves(x[0], np.outer(pos / 3.0, minicpm_inv_freq(1e4, 64)))
    np.testing.assert_allclose(posenc.rope(x.astype(np.float32), pos, config=layer.rope)[0], want, atol=3e-6)


def minicpm4_longrope(x, pos, max_pos, original, short, long, seq_len_seen):
    """MiniCPMLongRoPE: the table built for max(max_pos, the longest call) rows; ext = long_factor when
    that exceeds original; freqs = outer(t, 1 / ext) * inv_freq; cos, sin times
    sqrt(1 + log(max_pos / original) / log(original))."""
    dim = x.shape[-1]
    scaling = math.sqrt(1 + math.log(max_pos / original) / math.log(original))
    cached = max(max_pos, seq_len_seen)
    ext = np.asarray(long if cached > original else short)
    angles = np.outer(pos, 1.0 / ext) * minicpm_inv_freq(1e4, dim)[None, :]
    return rotate_halves(x, angles, scaling)


@pytest.mark.parametrize("max_pos", [4096, 16384])
def test_minicpm4_longrope_against_the_authors_code(max_pos):
    rng = np.random.default_rng(1)
    short, long = list(rng.uniform(1, 1.5, 32)), list(rng.uniform(1.5, 8, 32))
    d = {"model_type": "minicpm", "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 1,
         "max_position_embeddings": max_pos,
         "rope_scaling": {"rope_type": "longrope", "original_max_position_embeddings": 4096,
                          "short_factor": short, "long_factor": long}}
    layer = plan(d).layers[0]
    for seq_len in (16, 4096, 4097, 20000):  # one call of seq_len tokens from a fresh model
        pos = np.array([0, 1, 7, seq_len // 2, seq_len - 1])
        x = rng.standard_normal((1, pos.size, 2, 64))
        want = minicpm4_longrope(x[0], pos, max_pos, 4096, short, long, seq_len)
        got = posenc.rope(x.astype(np.float32), pos, config=layer.rope, seq_len=seq_len)[0]
        np.testing.assert_allclose(got, want, atol=2e-5, err_msg=f"max_pos {max_pos} seq_len {seq_len}")


# ---------------------------------------------------------------- Baichuan

def baichuan_interleave(n):
    # Baichuan-13B / Baichuan2-13B modeling_baichuan.py _get_interleave
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + baichuan_interleave(2 * closest)[0::2][:n - closest]


def test_baichuan_alibi_attention_against_the_authors_code():
    """Baichuan2-13B's real config, shrunk to head 16: _gen_alibi_mask's bias slope_h * key index
    (0 .. L - 1) on a causal mask (triu -inf), scores q k^T / sqrt(head_dim) + mask, softmax, times v
    (BaichuanAttention); against posenc.attention with the plan's layer and BLOOM's slopes."""
    m = plan("baichuan__Baichuan2-13B-Chat")
    layer = m.layers[0]
    assert layer.position == "alibi" and m.num_heads == 40
    slopes = np.array(baichuan_interleave(40))
    np.testing.assert_allclose(posenc.alibi_slopes(40), slopes, rtol=1e-7)
    T, H, D = 24, 40, 16
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, T, H, D)) for _ in range(3))
    bias = slopes[:, None, None] * np.arange(T)[None, None, :]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    scores = np.einsum("qhd,khd->hqk", q[0], k[0]) / math.sqrt(D) + bias + mask[None]
    p = np.exp(scores - scores.max(-1, keepdims=True))
    want = np.einsum("hqk,khd->qhd", p / p.sum(-1, keepdims=True), v[0])
    config = dict(layer.attention_config(), scale=1 / math.sqrt(D))  # the shrunk head's scale
    got = posenc.attention(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), encoding="alibi",
                           slopes="bloom", **config)
    np.testing.assert_allclose(got[0], want, atol=2e-5)


def test_baichuan2_7b_rotation_against_the_authors_code():
    """Baichuan2-7B modeling_baichuan.py RotaryEmbedding(head_dim) (base 10000, no key; fp32 angles) and
    apply_rotary_pos_emb (rotate_half) on the whole 128-dim head."""
    d = {"model_type": "baichuan", "architectures": ["BaichuanForCausalLM"], "hidden_size": 4096,
         "num_attention_heads": 32, "num_hidden_layers": 32, "max_position_embeddings": 4096}
    layer = plan(d).layers[0]
    pos = np.array([0, 3, 4095, 9000])
    x = np.random.default_rng(3).standard_normal((1, pos.size, 2, 128))
    want = rotate_halves(x[0], np.outer(pos, minicpm_inv_freq(1e4, 128)))
    np.testing.assert_allclose(posenc.rope(x.astype(np.float32), pos, config=layer.rope)[0], want, atol=3e-6)
