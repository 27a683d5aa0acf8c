"""Rotary position embedding (RoPE; Su et al., RoFormer) with HuggingFace's configuration
vocabulary: `rope_scaling` dicts of every type (linear, dynamic, yarn, longrope, llama3, also the
legacy key "type"), partial rotary, GPT-NeoX ("half") and GPT-J ("interleaved") layouts, and
Qwen2-VL's multimodal sections."""
from __future__ import annotations

import json
import os
import warnings

import numpy as np

from . import _core
from ._checks import activation, bits, choice, fail, integer, positions, real, storage

RopeConfig = _core.RopeConfig
RopeScaling = _core.RopeScaling


def _from_hf(config) -> RopeConfig:
    """A RopeConfig from a model's config (a dict, or the path of a config.json). A model_type posenc's
    model table plans gives that model's RoPE as its family applies it (ModelPositions; refused where
    its layers rotate differently or not from dim 0); other configs are read by the generic rules
    (rope_theta, partial_rotary_factor, head_dim or hidden_size / num_attention_heads,
    max_position_embeddings, rope_scaling or rope_parameters, text_config), with a PositionWarning
    naming why when they have a model_type (remote code, a type outside posenc's table)."""
    if isinstance(config, (str, os.PathLike)):
        try:
            with open(config, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            fail(f"config: cannot read {os.fspath(config)!r}: {exc.strerror}")
    elif isinstance(config, dict):
        try:
            text = json.dumps(config)
        except (TypeError, ValueError) as exc:
            fail(f"config: not JSON-serialisable ({exc})")
    else:
        fail(f"config: expected a dict or the path of a config.json, got {type(config).__name__}")
    from .model import PositionWarning  # (model.py imports this module)

    config, messages = _core.rope_config_from_hf_json(text)
    for message in messages:  # the model plan's, or why the generic rules read it
        warnings.warn(message, PositionWarning, stacklevel=2)
    return config


RopeConfig.from_hf = staticmethod(_from_hf)


def rope_config(head_dim, *, base=10000.0, rotary_dim=None, layout="half", rope_scaling=None,
                max_position_embeddings=None, mrope_section=None) -> RopeConfig:
    """A validated RopeConfig from keyword arguments (the rope_scaling dict read as HF reads it)."""
    hf = {"head_dim": integer("head_dim", head_dim, 1), "rope_theta": real("base", base, positive=True)}
    if rope_scaling is not None:
        if not isinstance(rope_scaling, dict):
            fail(f"rope_scaling: expected a dict such as {{'rope_type': 'linear', 'factor': 2.0}}, "
                 f"got {type(rope_scaling).__name__}")
        hf["rope_scaling"] = rope_scaling
    if max_position_embeddings is not None:
        hf["max_position_embeddings"] = integer("max_position_embeddings", max_position_embeddings, 1)
    config = _from_hf(hf)
    if rotary_dim is not None:
        config.rotary_dim = integer("rotary_dim", rotary_dim, 1)
    config.layout = choice("layout", layout, ("half", "interleaved"))
    if mrope_section is not None:
        config.multimodal = "mrope"
        config.mrope_section = [integer("mrope_section[]", s, 0) for s in mrope_section]
    config.validate()
    return config


def _rope_of(config, head_dim, kwargs) -> _core.Rope:
    if config is not None:
        if kwargs:
            fail(f"config: given together with {', '.join(sorted(kwargs))}; pass one or the other")
        if not isinstance(config, RopeConfig):
            fail(f"config: expected a posenc.RopeConfig, got {type(config).__name__}")
        if config.head_dim != head_dim:
            fail(f"x: head_dim {head_dim} does not match config.head_dim = {config.head_dim}")
        return _core.Rope(config)
    return _core.Rope(rope_config(head_dim, **kwargs))


def rope_inv_freq(head_dim=None, *, base=10000.0, rotary_dim=None, rope_scaling=None,
                  max_position_embeddings=None, seq_len=None, config=None):
    """(inv_freq, attention_factor) as HF's ROPE_INIT_FUNCTIONS return them: inv_freq is float64
    [rotary_dim // 2]; seq_len matters for "dynamic" and "longrope" only. Either head_dim and the
    keyword arguments, or config (a RopeConfig, e.g. from RopeConfig.from_hf)."""
    if config is not None:
        if head_dim is not None and head_dim != config.head_dim:
            fail(f"head_dim = {head_dim} does not match config.head_dim = {config.head_dim}")
        rope = _rope_of(config, config.head_dim, {})
    else:
        if head_dim is None:
            fail("head_dim: required (or pass config)")
        rope = _core.Rope(rope_config(head_dim, base=base, rotary_dim=rotary_dim, rope_scaling=rope_scaling,
                                      max_position_embeddings=max_position_embeddings))
    inv_freq, _, attention_factor = rope.frequencies(0 if seq_len is None else integer("seq_len", seq_len, 0))
    return np.asarray(inv_freq), attention_factor


def _split_kwargs(kwargs):
    seq_len = kwargs.pop("seq_len", None)
    config = kwargs.pop("config", None)
    allowed = {"base", "rotary_dim", "layout", "rope_scaling", "max_position_embeddings", "mrope_section"}
    for key in kwargs:
        if key not in allowed:
            expected = ", ".join(sorted(allowed | {"config", "seq_len"}))
            fail(f"{key}: unknown argument of rope (expected {expected})")
    return config, None if seq_len is None else integer("seq_len", seq_len, 1), kwargs


def _prepare(name, x, positions_, kwargs):
    """(x as float32, float16 or bfloat16, int64 positions, the Rope, seq_len) for one call."""
    config, seq_len, kw = _split_kwargs(dict(kwargs))
    x = activation(name, x, (4,))
    r = _rope_of(config, x.shape[3], kw)
    streams = r.config.num_position_streams
    pos = positions("positions", positions_, (1, 2) if streams == 1 else (2, 3))
    return x, pos, r, seq_len


def rope(x, positions_, **kwargs) -> np.ndarray:
    """A rotated copy of x [batch, seq, heads, head_dim].

    positions: [seq] or [batch, seq] (int); [3, seq] or [3, batch, seq] with mrope_section.
    Keyword arguments: base, rotary_dim, layout ("half" = GPT-NeoX/Llama rotate_half,
    "interleaved" = GPT-J/RoFormer), rope_scaling (HF dict), max_position_embeddings,
    mrope_section, seq_len (dynamic/longrope; default max(position) + 1), or config (a RopeConfig).
    float16 and bfloat16 (ml_dtypes) arrays are rotated in fp32 and rounded once, and returned in their
    dtype; other types are computed and returned as float32.
    """
    x, pos, r, seq_len = _prepare("x", x, positions_, kwargs)
    out = np.empty(x.shape, dtype=x.dtype)
    r.forward(bits(x), bits(out), pos, seq_len, storage(x))
    return out


def rope_(x, positions_, **kwargs) -> np.ndarray:
    """rope, in place: x must be a writable float32, float16 or bfloat16 array with a unit last stride;
    returns x."""
    if not isinstance(x, np.ndarray) or x.dtype.name not in ("float32", "float16", "bfloat16") or \
            x.ndim != 4 or not x.flags.writeable or (x.shape[-1] > 1 and x.strides[-1] != x.itemsize):
        fail("x: rope_ needs a writable float32, float16 or bfloat16 numpy array "
             "[batch, seq, heads, head_dim] with a unit last stride")
    _, pos, r, seq_len = _prepare("x", x, positions_, kwargs)
    r.forward_(bits(x), pos, seq_len, storage(x))
    return x


def rope_backward(grad, positions_, **kwargs) -> np.ndarray:
    """d loss / d x of rope: the inverse rotation applied to grad (same arguments as rope)."""
    grad, pos, r, seq_len = _prepare("grad", grad, positions_, kwargs)
    out = np.empty(grad.shape, dtype=grad.dtype)
    r.backward(bits(grad), bits(out), pos, seq_len, storage(grad))
    return out
