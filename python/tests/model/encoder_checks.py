"""Checks of posenc's plan against the encoders whose attention the families harness cannot capture
generically (family_harness.check_family hands them here; test_model_parity runs them on the real
configs): RoFormer (its own attention and static rotation), ALBERT (one attention module run by every
layer of its group), MPNet (its own attention with one bucket bias for all layers). Each runs the
transformers model on T tokens at positions 0 .. T - 1 (RoFormer and MPNet's bias take no position_ids)
and compares, per attention call in order: the mask, the softmax scale, the rotation (RoFormer) or the
bias (MPNet) and the learned table (ALBERT, MPNet)."""
import sys
import warnings

import numpy as np
import pytest
import torch

import posenc

T = 8


def allowed(mask, t):
    """HF's additive (or bool) 4-D mask -> (t, t) bool, True = attends; None = every key."""
    if mask is None:
        return torch.ones(t, t, dtype=torch.bool)
    m = mask[0, 0, -t:, -t:]
    if m.shape[0] == 1:  # a (1, K) padding mask broadcast over the queries
        m = m.expand(t, t)
    return m if m.dtype == torch.bool else m > torch.finfo(m.dtype).min / 2


def planned(attention, t):
    i, j = torch.arange(t)[:, None], torch.arange(t)[None, :]
    ok = torch.ones(t, t, dtype=torch.bool)
    if attention.causal:
        ok &= j <= i
    return ok


class Patch:
    """Replaces obj.name by wrap(original) until close()."""

    def __init__(self, obj, name, wrap):
        self.obj, self.name, self.orig = obj, name, obj.__dict__[name]
        setattr(obj, name, wrap(self.orig))

    def close(self):
        setattr(self.obj, self.name, self.orig)


def forward(model, ids):
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model(input_ids=ids)


def check_learned_table(model, m, where):
    table = model.embeddings.position_embeddings
    assert table.num_embeddings == m.max_position_embeddings + m.learned_position_offset, where
    padding = table.padding_idx
    assert (0 if padding is None else padding + 1) == m.learned_position_offset, where


def check_roformer(model, m, where):
    """modeling_roformer.py: RoFormerSelfAttention.apply_rotary_position_embeddings (a staticmethod)
    rotates q and k; scores / sqrt(head), the extended mask added."""
    cls = sys.modules[type(model).__module__].RoFormerSelfAttention
    rotations, masks = [], []

    def wrap_rotation(orig):
        def rotate(sinusoidal_pos, q, k, v=None):
            out = orig.__func__(sinusoidal_pos, q, k, v)
            rotations.append((q.clone(), k.clone(), out[0].clone(), out[1].clone()))
            return out
        return staticmethod(rotate)

    def wrap_forward(orig):
        def fwd(self, hidden_states, attention_mask=None, *args, **kwargs):
            masks.append((self, attention_mask))
            return orig(self, hidden_states, attention_mask, *args, **kwargs)
        return fwd

    patches = [Patch(cls, "apply_rotary_position_embeddings", wrap_rotation),
               Patch(cls, "forward", wrap_forward)]
    try:
        torch.manual_seed(1)
        forward(model, torch.randint(1, model.config.vocab_size, (1, T)))
    finally:
        for p in patches:
            p.close()
    assert len(rotations) == len(masks) == m.num_layers, where
    for layer, (q, k, q_hf, k_hf), (attn, mask) in zip(m.layers, rotations, masks):
        w = f"{where} layer {layer.layer}"
        assert layer.position == "rope" and layer.rotary_dims == (0, q.shape[-1]), w
        assert layer.attention.softmax_scale == pytest.approx(attn.attention_head_size ** -0.5, rel=1e-12), w
        assert torch.equal(allowed(mask, T), planned(layer.attention, T)), f"{w}: mask"
        for x, want in ((q, q_hf), (k, k_hf)):  # (B, H, T, D) -> posenc's (B, T, H, D)
            got = posenc.rope(x.transpose(1, 2).numpy(), np.arange(T), config=layer.rope, seq_len=T)
            torch.testing.assert_close(torch.from_numpy(got).transpose(1, 2), want, atol=1e-5, rtol=1e-5,
                                       msg=lambda msg, w=w: f"{w}: {msg}")


def check_albert(model, m, where):
    """modeling_albert.py: every layer run calls eager_attention_forward with its group's module."""
    module = sys.modules[type(model).__module__]
    calls = []

    def wrap(orig):
        def attend(mod, query, key, value, attention_mask, *args, **kwargs):
            calls.append((kwargs.get("scaling"), attention_mask))
            return orig(mod, query, key, value, attention_mask, *args, **kwargs)
        return attend

    patch = Patch(module, "eager_attention_forward", wrap)
    try:
        torch.manual_seed(1)
        forward(model, torch.randint(1, model.config.vocab_size, (1, T)))
    finally:
        patch.close()
    assert len(calls) == m.num_layers, where
    for layer, (scaling, mask) in zip(m.layers, calls):
        w = f"{where} layer {layer.layer}"
        assert layer.position == "learned", w
        assert layer.attention.softmax_scale == pytest.approx(scaling, rel=1e-12), w
        assert torch.equal(allowed(mask, T), planned(layer.attention, T)), f"{w}: mask"
    check_learned_table(model, m, where)


def check_mpnet(model, m, where):
    """modeling_mpnet.py: MPNetEncoder.compute_position_bias once, handed to every MPNetSelfAttention
    (scores / sqrt(head) + bias + mask); the learned table with padding_idx 1."""
    cls = sys.modules[type(model).__module__].MPNetSelfAttention
    calls = []

    def wrap(orig):
        def fwd(self, hidden_states, attention_mask=None, position_bias=None, *args, **kwargs):
            calls.append((self, attention_mask, position_bias))
            return orig(self, hidden_states, attention_mask, position_bias, *args, **kwargs)
        return fwd

    patch = Patch(cls, "forward", wrap)
    try:
        torch.manual_seed(1)
        forward(model, torch.randint(2, model.config.vocab_size, (1, T)))  # (no padding token 1)
    finally:
        patch.close()
    assert len(calls) == m.num_layers, where
    table = model.encoder.relative_attention_bias.weight.detach().numpy()
    for layer, (attn, mask, bias) in zip(m.layers, calls):
        w = f"{where} layer {layer.layer}"
        a = layer.attention
        assert layer.position == "t5" and not m.t5_bias_per_layer, w
        assert a.softmax_scale == pytest.approx(attn.attention_head_size ** -0.5, rel=1e-12), w
        assert torch.equal(allowed(mask, T), planned(a, T)), f"{w}: mask"
        want = posenc.t5_bias(table, np.arange(T), np.arange(T), bidirectional=not a.causal,
                              num_buckets=m.t5_num_buckets, max_distance=m.t5_max_distance)
        np.testing.assert_array_equal(bias[0].numpy(), want, err_msg=w)
    check_learned_table(model, m, where)


ENCODER_CHECKS = {"roformer": check_roformer, "albert": check_albert, "mpnet": check_mpnet}
