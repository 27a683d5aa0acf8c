"""Parity with the code people run: HuggingFace transformers 5.23.0 (pinned in
python/requirements.txt, on torch 2.15), its own modules built from tiny random configs, no weights.
Values and gradients.

Written first against transformers 4.47.1; what changed with transformers 5:
* yarn's correction range now reads rope_parameters' original_max_position_embeddings, as posenc
  does (4.47 read max_position_embeddings). The yarn configs still set both to 64, so the comparison
  is the same one; the two readings now agree whatever the configs say.
* longrope's short/long switch is now per forward call in every model's rotary class (by
  max(position_ids) + 1 > original_max_position_embeddings), and its attention factor no longer
  depends on seq_len: both are what posenc does by default, so the workarounds for 4.47 (Llama's
  class fixed at the long factors; the factor taken from the init call) are gone.
* "default" is no longer in ROPE_INIT_FUNCTIONS: each model class computes it
  (compute_default_rope_parameters), and Llama's ignores partial_rotary_factor (Llama-family
  checkpoints rotate the whole head). The partial-rotary cases therefore run through Phi's classes
  (PhiConfig / PhiRotaryEmbedding / its apply_rotary_pos_emb on the first R dims, as PhiAttention
  does), a family whose default is partial-aware; Phi-3's config accepts only default and longrope.
* Qwen2-VL's rotary class now returns cos/sin already recomposed by mrope_section (4.47 did it in
  apply_multimodal_rotary_pos_emb); the same values, applied with the plain apply_rotary_pos_emb.
* Configs carry rope_parameters (rope_theta inside) in place of rope_scaling + rope_theta; posenc's
  RopeConfig.from_hf reads the dict a 5.x config serializes to.
"""
import numpy as np
import pytest
import torch
from transformers import BloomConfig, GPT2Config, LlamaConfig, PhiConfig, Qwen2VLConfig, T5Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.bloom.modeling_bloom import build_alibi_tensor
from transformers.models.gpt2.modeling_gpt2 import GPT2Model
from transformers.models.llama.modeling_llama import (
    LlamaAttention,
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
)
from transformers.models.phi.modeling_phi import (
    PhiRotaryEmbedding,
    apply_rotary_pos_emb as phi_apply_rotary_pos_emb,
)
from transformers.models.qwen2_vl.modeling_qwen2_vl import (
    Qwen2VLRotaryEmbedding,
    apply_rotary_pos_emb as qwen2_vl_apply_rotary_pos_emb,
)
from transformers.models.t5.modeling_t5 import T5Attention

import posenc
import posenc.torch as pt

SCALINGS = {
    "default": None,
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
    "yarn_legacy_type_key": {"type": "yarn", "factor": 8.0, "beta_fast": 16,
                             "original_max_position_embeddings": 64},
    # Phi-3's form: original_max_position_embeddings at the top level (llama_config puts it there)
    "longrope": {"rope_type": "longrope", "short_factor": [1.0, 1.1, 1.3, 1.7, 2.0, 2.5, 3.0, 4.0],
                 "long_factor": [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 9.0]},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 32},
}


def rope_parameters(scaling, partial=1.0):
    """transformers 5's rope_parameters dict: the scaling keys, rope_theta and partial_rotary_factor."""
    params = {"rope_type": "default"} if scaling is None else dict(scaling)
    if params.get("rope_type", params.get("type")) == "longrope":
        pairs = int(16 * partial) // 2  # one factor per rotated pair
        params["short_factor"] = params["short_factor"][:pairs]
        params["long_factor"] = params["long_factor"][:pairs]
    return {**params, "rope_theta": 5000.0, "partial_rotary_factor": partial}


def llama_config(scaling, partial=1.0, **extra):
    if scaling is not None and scaling.get("rope_type") == "longrope":
        extra["original_max_position_embeddings"] = 32
    return LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                       max_position_embeddings=64, rope_parameters=rope_parameters(scaling, partial),
                       attn_implementation="eager", **extra)


def phi_config(scaling, partial):
    """Phi (-1, -1.5, -2): partial rotary in HF's own code (default factor 0.5), every rope type allowed
    (Phi-3's config accepts only default and longrope). head_dim = 64 / 4 = 16, as in llama_config."""
    longrope = scaling is not None and scaling.get("rope_type") == "longrope"
    extra = {"original_max_position_embeddings": 32} if longrope else {}
    return PhiConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                     rope_parameters=rope_parameters(scaling, partial), attn_implementation="eager", **extra)


def as_dict(config):
    """The config as a dict for posenc's RopeConfig.from_hf. transformers 5 serializes
    partial_rotary_factor inside rope_parameters only, which posenc's parser now reads
    (src/model/rope_config.cc); it is also copied to the top level here, as transformers 4 wrote it,
    and the value inside the dict wins as in transformers."""
    d = config.to_dict()
    d["partial_rotary_factor"] = config.rope_parameters.get("partial_rotary_factor", 1.0)
    return d


@pytest.mark.parametrize("name", list(SCALINGS))
@pytest.mark.parametrize("seq_len", [16, 200])
def test_inv_freq_and_attention_factor(name, seq_len):
    config = llama_config(SCALINGS[name])
    scaling = SCALINGS[name]
    rope_type = "default" if scaling is None else scaling.get("rope_type", scaling.get("type"))
    init = (LlamaRotaryEmbedding.compute_default_rope_parameters if rope_type == "default"
            else ROPE_INIT_FUNCTIONS[rope_type])
    inv_freq, factor = init(config, device="cpu", seq_len=seq_len)
    rc = posenc.RopeConfig.from_hf(as_dict(config))
    got, got_factor = posenc.rope_inv_freq(config=rc,
                                           seq_len=seq_len if rope_type in ("dynamic", "longrope") else None)
    if rope_type not in ("longrope",):  # the keyword form reads the same dict the same way
        kw_freq, kw_factor = posenc.rope_inv_freq(16, base=5000.0, rope_scaling=SCALINGS[name],
                                                  max_position_embeddings=64,
                                                  seq_len=seq_len if rope_type == "dynamic" else None)
        np.testing.assert_array_equal(kw_freq, got)
        assert kw_factor == got_factor
    np.testing.assert_allclose(got, inv_freq.double().numpy(), rtol=1e-6)  # HF computes inv_freq in float32
    # longrope: sqrt(1 + ln(max / original) / ln(original)) at every seq_len, in transformers 5 as in posenc
    assert got_factor == pytest.approx(factor, rel=1e-6)
    assert rc.head_dim == 16 and rc.base == 5000.0


@pytest.mark.parametrize("name", ["default", "linear", "dynamic", "yarn", "longrope", "llama3"])
@pytest.mark.parametrize("partial", [1.0, 0.5])
def test_llama_rotary_embedding_and_apply(name, partial):
    # Llama's classes for the full head; Phi's for partial rotary (Llama's default ignores the factor).
    config = llama_config(SCALINGS[name]) if partial == 1.0 else phi_config(SCALINGS[name], partial)
    rotary_class, apply = ((LlamaRotaryEmbedding, apply_rotary_pos_emb) if partial == 1.0
                           else (PhiRotaryEmbedding, phi_apply_rotary_pos_emb))
    torch.manual_seed(0)
    # T past max_position_embeddings: dynamic grows its base.
    B, T, H, D = 2, 100, 4, 16
    q, k = torch.randn(B, H, T, D), torch.randn(B, H, T, D)
    positions = torch.arange(T)[None].repeat(B, 1)
    rotary = rotary_class(config=config)
    cos, sin = rotary(q, positions)  # longrope: T > 32 = original, the long factors in both
    R = int(D * partial)
    assert cos.shape[-1] == R
    q_hf, k_hf = apply(q[..., :R], k[..., :R], cos, sin)  # HF's partial models rotate the first R dims
    module = pt.RotaryEmbedding.from_hf(as_dict(config))
    q_pe, k_pe = module(q.transpose(1, 2), k.transpose(1, 2), positions)
    np.testing.assert_allclose(q_pe.transpose(1, 2)[..., :R].numpy(), q_hf.numpy(), atol=2e-5, rtol=1e-4)
    np.testing.assert_allclose(k_pe.transpose(1, 2)[..., :R].numpy(), k_hf.numpy(), atol=2e-5, rtol=1e-4)
    np.testing.assert_array_equal(q_pe.transpose(1, 2)[..., R:].numpy(), q[..., R:].numpy())
    # gradients through both
    g = torch.randn(B, H, T, R)
    qq = q[..., :R].clone().requires_grad_()
    (apply(qq, qq, cos, sin)[0] * g).sum().backward()
    qp = q.transpose(1, 2).clone().requires_grad_()
    (module(qp, qp, positions)[0].transpose(1, 2)[..., :R] * g).sum().backward()
    np.testing.assert_allclose(qp.grad.transpose(1, 2)[..., :R].numpy(), qq.grad.numpy(), atol=2e-5,
                               rtol=1e-4)


def test_qwen2_vl_multimodal_rotary():
    config = Qwen2VLConfig(hidden_size=128, num_attention_heads=4, num_key_value_heads=4,
                           max_position_embeddings=256,
                           rope_parameters={"rope_type": "mrope", "mrope_section": [4, 6, 6],
                                            "rope_theta": 10000.0}).text_config
    torch.manual_seed(1)
    B, T, H, D = 1, 20, 4, 32
    q, k = torch.randn(B, H, T, D), torch.randn(B, H, T, D)
    position_ids = torch.stack([torch.arange(T), torch.arange(T) // 4,
                                torch.arange(T) % 4])[:, None, :]  # (3, B, T)
    cos, sin = Qwen2VLRotaryEmbedding(config=config)(q, position_ids)
    q_hf, _ = qwen2_vl_apply_rotary_pos_emb(q, k, cos, sin)  # cos/sin already recomposed by mrope_section
    got = posenc.rope(q.transpose(1, 2).numpy(), position_ids.numpy(), mrope_section=[4, 6, 6])
    np.testing.assert_allclose(got.transpose(0, 2, 1, 3), q_hf.numpy(), atol=2e-5, rtol=1e-4)
    rc = posenc.RopeConfig.from_hf(config.to_dict())
    assert rc.multimodal == "mrope" and list(rc.mrope_section) == [4, 6, 6]


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_buckets_and_compute_bias(bidirectional):
    rel = torch.arange(-600, 600)
    for num_buckets, max_distance in [(32, 128), (16, 32), (8, 20)]:
        expected = T5Attention._relative_position_bucket(rel, bidirectional, num_buckets, max_distance)
        got = posenc.t5_buckets(rel.numpy(), bidirectional=bidirectional, num_buckets=num_buckets,
                                max_distance=max_distance)
        np.testing.assert_array_equal(got, expected.numpy())
    config = T5Config(d_model=32, d_kv=8, num_heads=4, relative_attention_num_buckets=32,
                      relative_attention_max_distance=128, is_decoder=not bidirectional)
    attn = T5Attention(config, has_relative_attention_bias=True)
    expected = attn.compute_bias(40, 300)[0]  # queries 0..39, keys 0..299
    got = pt.t5_bias(attn.relative_attention_bias.weight, torch.arange(40), torch.arange(300),
                     bidirectional=bidirectional)
    np.testing.assert_array_equal(got.detach().numpy(), expected.detach().numpy())


def test_t5_attention_layer():
    torch.manual_seed(2)
    config = T5Config(d_model=32, d_kv=8, num_heads=4, relative_attention_num_buckets=32,
                      relative_attention_max_distance=128, dropout_rate=0.0)
    attn = T5Attention(config, has_relative_attention_bias=True).eval()
    h = torch.randn(2, 30, 32, requires_grad=True)
    expected = attn(h)[0]
    q, k, v = (w(h).view(2, 30, 4, 8) for w in (attn.q, attn.k, attn.v))
    table = attn.relative_attention_bias.weight
    out = pt.attention(q, k, v, encoding="t5", relative_table=table, scale=1.0, max_distance=128,
                       bidirectional=True)
    got = attn.o(out.reshape(2, 30, 32))
    np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), atol=2e-5, rtol=1e-4)
    g = torch.randn_like(got)
    grads_hf = torch.autograd.grad((expected * g).sum(), (h, table))
    grads_pe = torch.autograd.grad((got * g).sum(), (h, table))
    for a, b in zip(grads_pe, grads_hf):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-4, rtol=1e-3)


def test_llama_attention_layer_with_yarn():
    torch.manual_seed(3)
    config = llama_config({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64})
    attn = LlamaAttention(config, layer_idx=0).eval()
    B, T = 2, 90
    h = torch.randn(B, T, 64, requires_grad=True)
    positions = torch.arange(T)[None].repeat(B, 1)
    cos, sin = LlamaRotaryEmbedding(config=config)(h, positions)
    mask = torch.full((T, T), float("-inf")).triu(1)[None, None]
    expected = attn(h, position_embeddings=(cos, sin), attention_mask=mask)[0]
    q = attn.q_proj(h).view(B, T, 4, 16)
    k = attn.k_proj(h).view(B, T, 2, 16)  # grouped-query: 2 key/value heads
    v = attn.v_proj(h).view(B, T, 2, 16)
    out = pt.attention(q, k, v, causal=True, encoding="rope",
                       rope_config=posenc.RopeConfig.from_hf(as_dict(config)))
    got = attn.o_proj(out.reshape(B, T, 64))
    np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), atol=2e-5, rtol=1e-4)
    g = torch.randn_like(got)
    (gh_hf,) = torch.autograd.grad((expected * g).sum(), h)
    (gh_pe,) = torch.autograd.grad((got * g).sum(), h)
    np.testing.assert_allclose(gh_pe.numpy(), gh_hf.numpy(), atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("heads", [1, 4, 6, 12, 16])
def test_bloom_alibi(heads):
    mask = torch.ones(1, 9)
    alibi = build_alibi_tensor(mask, heads, torch.float32).view(heads, 9)  # slope_h * k_pos
    np.testing.assert_allclose(posenc.alibi_slopes(heads), alibi[:, 1].numpy(), rtol=1e-6)
    # BLOOM adds slope * k_pos; posenc -slope * (q_pos - k_pos): equal up to a constant per row
    bias = posenc.alibi_bias(heads, np.arange(9), np.arange(9))
    np.testing.assert_allclose(bias - bias[:, :, :1], (alibi - alibi[:, :1])[:, None, :].numpy().repeat(9, 1),
                               atol=1e-5)
    assert BloomConfig(n_head=heads).n_head == heads


def test_gpt2_learned_positions():
    model = GPT2Model(GPT2Config(n_embd=16, n_layer=1, n_head=2, n_positions=32))
    positions = torch.tensor([0, 5, 31])
    np.testing.assert_array_equal(pt.LearnedPositional(32, 16).__class__.__name__, "LearnedPositional")
    got = pt.learned(model.wpe.weight, positions)
    np.testing.assert_array_equal(got.detach().numpy(), model.wpe(positions).detach().numpy())
    with pytest.raises(ValueError, match="max_len = 32"):
        pt.learned(model.wpe.weight, torch.tensor([32]))


def test_nanochat_reversed_rotation_through_from_hf():
    """NanoChat's rotate_half returns [x2, -x1] (modeling_nanochat.py): RotaryEmbedding.from_hf of
    its config rotates by -p theta, as transformers' own apply_rotary_pos_emb with its rotary module's
    cos / sin; values and gradients."""
    from transformers import NanoChatConfig
    from transformers.models.nanochat.modeling_nanochat import (
        NanoChatRotaryEmbedding,
        apply_rotary_pos_emb as nanochat_apply,
    )

    config = NanoChatConfig(hidden_size=128, num_attention_heads=4, num_hidden_layers=2,
                            max_position_embeddings=512)
    rc = posenc.RopeConfig.from_hf(config.to_dict())
    assert rc.reversed and rc.head_dim == 32 and rc.layout == "half"
    torch.manual_seed(0)
    B, T, H, D = 2, 50, 4, 32
    q, k = torch.randn(B, H, T, D), torch.randn(B, H, T, D)
    positions = (300 + torch.arange(T))[None].repeat(B, 1)
    cos, sin = NanoChatRotaryEmbedding(config=config)(q, positions)
    qq = q.clone().requires_grad_()
    q_hf, k_hf = nanochat_apply(qq, k, cos, sin)
    module = pt.RotaryEmbedding.from_hf(config.to_dict())
    qp = q.transpose(1, 2).clone().requires_grad_()
    q_pe, k_pe = module(qp, k.transpose(1, 2), positions)
    np.testing.assert_allclose(q_pe.transpose(1, 2).detach().numpy(), q_hf.detach().numpy(), atol=2e-5,
                               rtol=1e-4)
    np.testing.assert_allclose(k_pe.transpose(1, 2).detach().numpy(), k_hf.numpy(), atol=2e-5, rtol=1e-4)
    g = torch.randn(B, H, T, D)
    (q_hf * g).sum().backward()
    (q_pe.transpose(1, 2) * g).sum().backward()
    np.testing.assert_allclose(qp.grad.transpose(1, 2).numpy(), qq.grad.numpy(), atol=2e-5, rtol=1e-4)


def test_from_hf_refuses_what_one_rope_cannot_describe_and_warns_on_generic_rules():
    """Gemma 3's local / global bases are not one RopeConfig (ModelPositions is named); a remote-code
    type is read by the generic rules with a PositionWarning naming why."""
    with pytest.raises(posenc.Error, match="rotate differently, which one RopeConfig cannot describe"):
        posenc.RopeConfig.from_hf({"model_type": "gemma3_text"})
    with pytest.warns(posenc.PositionWarning, match="model_type 'internlm' is not supported: "
                                                    "InternLM \\(1\\)'s rotary code is remote"):
        rc = posenc.RopeConfig.from_hf({"model_type": "internlm", "hidden_size": 4096,
                                        "num_attention_heads": 32})
    assert rc.head_dim == 128 and not rc.reversed
    # ChatGLM's remote code, which posenc follows: pairs on the first half of the head, no warning.
    rc = posenc.RopeConfig.from_hf({"model_type": "chatglm", "hidden_size": 4096, "num_attention_heads": 32})
    assert (rc.head_dim, rc.rotary_dim, rc.layout) == (128, 64, "interleaved")
