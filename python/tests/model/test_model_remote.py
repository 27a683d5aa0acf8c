"""Remote-code families (their modeling file lives in the model's repository, loaded with
trust_remote_code; not in transformers 5.23) that posenc plans from the authors' files
(src/model/remote.cc): each rotation and rule is checked against a transcription of the authors' code
written out here, in float64, with the file and function it follows. The real configs are
tests/data/hf_configs (SOURCES.md)."""
import json
import math
import os
import warnings

import numpy as np
import pytest

import posenc
from hf_oracle import HF_CONFIGS

torch = pytest.importorskip("torch")
from transformers import AutoConfig  # noqa: E402

DATA = HF_CONFIGS
REMOTE_FILES = ["qwen__Qwen-7B-Chat", "chatglm__chatglm2-6b", "internlm2__internlm2-chat-1_8b",
                "internlm2__internlm2-chat-7b-rev-2292b86", "internlm2__internlm2-chat-7b-rev-03da3f2",
                "stablelm__stable-code-3b", "falcon__falcon-40b-RefinedWeb",
                "falcon__falcon-7b-RefinedWeb-early", "minicpmv__MiniCPM-V-4"]


def load(name):
    with open(os.path.join(DATA, name + ".json"), encoding="utf-8") as f:
        return json.load(f)


def plan(config):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", posenc.PositionWarning)
        path = config if isinstance(config, dict) else os.path.join(DATA, config + ".json")
        return posenc.ModelPositions.from_hf(path)


@pytest.mark.parametrize("name", REMOTE_FILES)
def test_not_in_transformers_and_planned_from_the_authors_file(name):
    d = load(name)
    with pytest.raises(ValueError, match="Unrecognized model identifier"):
        AutoConfig.for_model(**d)
    m = plan(name)
    assert m.model_type == d["model_type"] and m.remote_code, m
    assert all(layer.position in ("rope", "alibi") for layer in m.layers)


def rotate_pairs(x, pos, inv_freq):
    """x [T, H, 2 * len(inv_freq)] rotated in adjacent pairs (x[2i], x[2i + 1]) by pos * inv_freq."""
    ang = pos[:, None, None] * inv_freq[None, None, :]
    c, s = np.cos(ang), np.sin(ang)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = x0 * c - x1 * s, x1 * c + x0 * s
    return out


def rotate_halves(x, pos, inv_freq):
    """x [T, H, 2 * len(inv_freq)] rotated in halves (rotate_half: x[i], x[i + R/2])."""
    ang = pos[:, None, None] * inv_freq[None, None, :]
    c, s = np.cos(ang), np.sin(ang)
    h = inv_freq.size
    x0, x1 = x[..., :h], x[..., h:]
    return np.concatenate([x0 * c - x1 * s, x1 * c + x0 * s], axis=-1)


# ---------------------------------------------------------------- Qwen (1)

def qwen_ntk_alpha(true_seq_len, seq_length):
    # modeling_qwen.py QWenModel.get_ntk_alpha
    context_value = math.log(true_seq_len / seq_length, 2) + 1
    ntk_alpha = 2 ** math.ceil(context_value) - 1
    return max(ntk_alpha, 1)


def qwen_inv_freq(base, dim, alpha):
    # modeling_qwen.py RotaryEmbedding.update_rotary_pos_emb_cache: base * ntk_alpha ** (dim / (dim - 2)),
    # inv_freq = 1 / base ** (arange(0, dim, 2) / dim)
    base = base * alpha ** (dim / (dim - 2))
    return 1.0 / base ** (np.arange(0, dim, 2) / dim)


def test_qwen_ntk_base_and_logn_against_the_authors_code():
    d = load("qwen__Qwen-7B-Chat")
    m = plan("qwen__Qwen-7B-Chat")
    layer = m.layers[0]
    S = d["seq_length"]
    for L in (1, 100, S, S + 1, 2 * S, 2 * S + 1, 3 * S, 4 * S, 4 * S + 1, 12345678):
        want = qwen_inv_freq(d["rotary_emb_base"], d["kv_channels"], qwen_ntk_alpha(L, S))
        np.testing.assert_allclose(layer.inv_freq(L)[0], want, rtol=1e-13, err_msg=f"L {L}")
    # QWenAttention.__init__: logn_list = [math.log(i, seq_length) if i > seq_length else 1 for i in
    # range(1, 32768)]; forward: query *= logn_tensor[:, key_len - q_len:key_len] (row p = cache index p).
    logn = [math.log(i, S) if i > S else 1 for i in range(1, 32768)]
    t = layer.attention.temperature
    for p in (0, 1, S - 2, S - 1, S, S + 1, 2 * S - 1, 20000, 32766):
        assert t.factor(p) == pytest.approx(logn[p], rel=1e-15), p


def test_qwen_attention_past_seq_length_against_the_authors_code():
    """A prompt of 40 tokens at cache indices S - 20 .. S + 19 of a shrunken Qwen (seq_length S = 16):
    QWenModel.forward (alpha from kv_seq_len), QWenAttention: RoPE (apply_rotary_pos_emb, rotate_half),
    query *= logn, softmax(q k^T / sqrt(head_dim)) v causal; against posenc.attention with the layer's
    attention_config()."""
    cfg = {"model_type": "qwen", "hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 1,
           "kv_channels": 32, "seq_length": 16, "rotary_emb_base": 10000}
    layer = plan(cfg).layers[0]
    S, D, H, T = 16, 32, 2, 40
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, T, H, D)) for _ in range(3))
    pos = np.arange(T)  # Qwen's positions: cache indices (position_ids are not read)
    inv_freq = qwen_inv_freq(10000, D, qwen_ntk_alpha(T, S))  # the prefill's length: kv_seq_len = T
    qr, kr = rotate_halves(q[0], pos, inv_freq), rotate_halves(k[0], pos, inv_freq)
    logn = np.array([math.log(i, S) if i > S else 1 for i in range(1, T + 1)])
    qr = qr * logn[:, None, None]
    scores = np.einsum("qhd,khd->hqk", qr, kr) / math.sqrt(D)
    scores = np.where(np.tril(np.ones((T, T), bool))[None], scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    want = np.einsum("hqk,khd->qhd", p / p.sum(-1, keepdims=True), v[0])
    got = posenc.attention(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32),
                           **layer.attention_config())
    np.testing.assert_allclose(got[0], want, atol=2e-5)


# ---------------------------------------------------------------- ChatGLM

def test_chatglm_rotation_against_the_authors_code():
    """modeling_chatglm.py (ChatGLM3 / GLM-4's float32 path): RotaryEmbedding.forward_impl(seq_len,
    n_elem = kv_channels // 2, base = 10000 * rope_ratio): theta = 1 / base ** (arange(0, n_elem, 2) /
    n_elem), idx_theta = outer(seq_idx, theta); apply_rotary_pos_emb rotates x[..., :rot_dim] in
    adjacent pairs (x.reshape(..., rot_dim // 2, 2)) and passes x[..., rot_dim:]."""
    rng = np.random.default_rng(1)
    for name, ratio in (("chatglm__chatglm2-6b", 1), (None, 500)):
        cfg = load(name) if name else {"model_type": "chatglm", "hidden_size": 4096,
                                       "num_attention_heads": 32, "kv_channels": 128, "num_layers": 2,
                                       "rope_ratio": ratio, "seq_length": 131072}
        layer = plan(cfg).layers[0]
        n_elem = 128 // 2
        theta = 1.0 / (10000.0 * ratio) ** (np.arange(0, n_elem, 2) / n_elem)
        pos = np.array([0, 1, 2, 1000, 4095, 20000, 32767, cfg["seq_length"] - 1])
        x = rng.standard_normal((1, pos.size, 3, 128))
        want = np.concatenate([rotate_pairs(x[0, ..., :n_elem], pos, theta), x[0, ..., n_elem:]], axis=-1)
        got = posenc.rope(x.astype(np.float32), pos, config=layer.rope)
        np.testing.assert_allclose(got[0], want, atol=3e-6, err_msg=f"rope_ratio {ratio}")


# ---------------------------------------------------------------- InternLM2

def test_internlm2_dynamic_ntk_against_the_authors_code():
    """modeling_internlm2.py InternLM2DynamicNTKScalingRotaryEmbedding._set_cos_sin_cache: past
    max_position_embeddings M, base = rope_theta * ((factor * L / M) - (factor - 1)) ** (dim / (dim - 2));
    inv_freq = 1 / base ** (arange(0, dim, 2) / dim); rotate_half on the whole head."""
    for name in ("internlm2__internlm2-chat-7b-rev-2292b86", "internlm2__internlm2-chat-7b-rev-03da3f2"):
        d = load(name)
        layer = plan(name).layers[0]
        factor, M, dim = d["rope_scaling"]["factor"], d["max_position_embeddings"], 128
        for L in (1, M, M + 1, 2 * M, 5 * M):
            base = d["rope_theta"]
            if L > M:
                base = base * ((factor * L / M) - (factor - 1)) ** (dim / (dim - 2))
            np.testing.assert_allclose(layer.inv_freq(L)[0], 1.0 / base ** (np.arange(0, dim, 2) / dim),
                                       rtol=1e-13)


# ---------------------------------------------------------------- transformers' equivalents

def test_stablelm_epoch_is_transformers_stablelm_with_rope_pct():
    """modeling_stablelm_epoch.py rotates int(head_dim * rope_pct) dims in halves, base rope_theta: the
    rotation of transformers' StableLm with partial_rotary_factor = rope_pct, which StableLmConfig does
    not read from rope_pct itself (it stays at 0.25, the value stable-code-3b happens to use)."""
    from transformers import StableLmConfig
    from transformers.models.stablelm.modeling_stablelm import StableLmRotaryEmbedding

    d = load("stablelm__stable-code-3b")
    for pct in (d["rope_pct"], 0.5):
        layer = plan({**d, "rope_pct": pct}).layers[0]
        ref = StableLmConfig(hidden_size=d["hidden_size"], num_attention_heads=d["num_attention_heads"],
                             rope_parameters={"rope_type": "default", "rope_theta": d["rope_theta"],
                                              "partial_rotary_factor": pct})
        rotary = StableLmRotaryEmbedding(ref)
        np.testing.assert_allclose(layer.inv_freq()[0], rotary.inv_freq.double().numpy(), rtol=2e-6)
        assert layer.rotary_dims == (0, int(80 * pct))
    assert StableLmConfig(hidden_size=2560, num_attention_heads=32, rope_pct=0.5).rope_parameters[
        "partial_rotary_factor"] == 0.25


def test_refined_web_is_transformers_falcon_rotary():
    """modelling_RW.py RotaryEmbedding(head_dim): base 10000, rotate_half, the whole head: transformers'
    Falcon rotary with num_attention_heads = n_head (FalconConfig does not map n_head: it would keep 71)."""
    from transformers import FalconConfig
    from transformers.models.falcon.modeling_falcon import FalconRotaryEmbedding

    for name in ("falcon__falcon-40b-RefinedWeb", "falcon__falcon-7b-RefinedWeb-early"):
        d = load(name)
        m = plan(name)
        ref = FalconConfig(hidden_size=d["hidden_size"], num_attention_heads=d["n_head"])
        rotary = FalconRotaryEmbedding(ref)
        np.testing.assert_allclose(m.layers[0].inv_freq()[0], rotary.inv_freq.double().numpy(), rtol=2e-6)
        assert m.num_heads == d["n_head"] and m.num_layers == d["n_layer"]


def test_minicpmv_is_transformers_llama():
    """modeling_minicpmv.py: self.llm = LlamaForCausalLM(config); its longrope from transformers 5's llama."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    d = load("minicpmv__MiniCPM-V-4")
    m = plan("minicpmv__MiniCPM-V-4")
    keys = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "max_position_embeddings", "rope_theta", "rope_scaling")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = LlamaConfig(**{k: d[k] for k in keys})
    rotary = LlamaRotaryEmbedding(ref)
    for L in (1, 32768):
        rotary(torch.zeros(1, 1, 8), torch.tensor([[L - 1]]))
        got, factor = m.layers[0].inv_freq(L)
        np.testing.assert_allclose(got, rotary.inv_freq.double().numpy(), rtol=2e-6)
        assert factor == pytest.approx(float(rotary.attention_scaling))
