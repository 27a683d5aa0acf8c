"""A real model's positional setup, per layer, from its HuggingFace config.json (transformers 5
semantics: config class defaults, aliases, legacy keys, per-layer types; posenc/model.h).

    m = posenc.ModelPositions.from_hf("config.json")   # or a dict
    for layer in m.layers:
        layer.position          # "rope", "none", "alibi", "t5", "learned", "sinusoidal"
        layer.rope              # a posenc.RopeConfig (position == "rope"), for posenc.rope / rope_inv_freq
        layer.rotary_dims       # (lo, hi): the rotated dims of the qk_head_dim-dim q/k head
        layer.attention         # causal, window, chunk, softmax_scale, softcap, sinks, temperature
        layer.inv_freq(seq_len) # (inv_freq float64 [rotary_dim // 2], attention_factor)
        posenc.attention(q, k, v, **layer.attention_config())   # or posenc.torch.attention

Every key that looks positional and that posenc does not understand is in m.warnings and is also
emitted with warnings.warn (one per warning, naming the key). Families whose positional code
lives outside transformers (e.g. chatglm) raise posenc.Error with the library's message.
"""
from __future__ import annotations

import json
import os
import warnings

import numpy as np

from . import _core
from ._checks import fail, integer

ModelPositions = _core.ModelPositions
LayerPlan = _core.LayerPlan
LayerAttention = _core.LayerAttention
QueryTemperature = _core.QueryTemperature


class PositionWarning(UserWarning):
    """A key of the config that looks positional and that posenc does not understand."""


def _json_text(config) -> str:
    if isinstance(config, (str, os.PathLike)):
        try:
            with open(config, encoding="utf-8") as f:
                return f.read()
        except OSError as exc:
            fail(f"config: cannot read {os.fspath(config)!r}: {exc.strerror}")
    if isinstance(config, dict):
        try:
            return json.dumps(config)
        except (TypeError, ValueError) as exc:
            fail(f"config: not JSON-serialisable ({exc})")
    fail(f"config: expected a dict or the path of a config.json, got {type(config).__name__}")


def _from_hf(config, *, warn=True) -> ModelPositions:
    """ModelPositions from a config.json (a dict, or its path). warn=False: warnings only in .warnings."""
    m = _core.model_positions_from_hf_json(_json_text(config))
    if warn:
        for message in m.warnings:
            warnings.warn(message, PositionWarning, stacklevel=2)
    return m


def _inv_freq(layer, seq_len=None):
    """(inv_freq, attention_factor) of a RoPE layer as the C++ library computes them (HF's
    ROPE_INIT_FUNCTIONS / compute_default_rope_parameters): inv_freq float64 [rotary_dim // 2];
    seq_len matters for "dynamic" and "longrope" only."""
    if layer.rope is None:
        fail(f"layer {layer.layer}: position = {layer.position!r} has no RoPE frequencies")
    seq_len = 0 if seq_len is None else integer("seq_len", seq_len, 0)
    inv_freq, _, factor = _core.Rope(layer.rope).frequencies(seq_len)
    return np.asarray(inv_freq), factor


def _attention_factor(layer, seq_len=None) -> float:
    return _inv_freq(layer, seq_len)[1]


def _attention_config(layer, rope=True) -> dict:
    """The keyword arguments of posenc.attention / posenc.torch.attention for this layer (as the C++
    LayerPlan::attention_config): causal, window, chunk, scale (with any mscale correction), softcap, the
    query temperature, and for RoPE layers encoding="rope" with the layer's RopeConfig on dims [lo, hi) of
    the q/k head (rope_offset = lo; q/k heads of qk_head_dim, v heads of v_head_dim). What the config alone
    cannot give stays with the caller: gpt-oss's learned sink logits (sinks=[H], when
    layer.attention.sinks), and the bias of alibi and t5 layers (add encoding="alibi"/"t5" with the model's
    slopes or relative_table).
    rope=False leaves RoPE out, for q and k the caller has rotated already; a multimodal RoPE (mrope, whose
    positions are 3 streams) needs that: posenc.rope(x, positions [3, ...], config=layer.rope) first."""
    if layer.compressed is not None:
        fail(f"layer {layer.layer} ({layer.layer_type}) attends to compressed entries (DeepSeek-V4), which "
             "posenc.attention does not hold: use layer.attention and layer.rope with rotate_values=True and "
             "the plan's compressed field")
    a = layer.attention
    kwargs = {"causal": a.causal, "window": a.window, "chunk": a.chunk, "scale": a.softmax_scale,
              "softcap": 0.0 if a.softcap is None else a.softcap}
    if a.temperature.kind != "none":
        kwargs["query_temperature"] = a.temperature
    if layer.position == "rope" and rope:
        if layer.rope.multimodal != "none":
            fail(f"layer {layer.layer}: its RoPE is multimodal ({layer.rope.multimodal}, "
                 "positions of 3 streams): rotate q and k with posenc.rope(x, positions, config=layer.rope) "
                 "first, then attention_config(rope=False)")
        kwargs.update(encoding="rope", rope_config=layer.rope, rope_offset=layer.rotary_dims[0])
    if layer.rotated_values:  # DeepSeek-V4: values rotated like the keys, the output rotated back
        if not (layer.position == "rope" and rope):
            fail(f"layer {layer.layer}: its values are rotated with its RoPE: attention_config(rope=False) "
                 "cannot express it")
        kwargs["rotate_values"] = True
    return kwargs


def _layer_repr(layer):
    lo, hi = layer.rotary_dims
    a = layer.attention
    extra = f" rope[{lo},{hi})" if layer.position == "rope" else ""
    ix = layer.indexer
    if ix is not None:
        extra += f" indexer(topk={ix.topk}, {ix.rope.layout}{', shared' if ix.shared else ''})"
    return (f"LayerPlan(layer={layer.layer}, type={layer.layer_type!r}, position={layer.position!r}{extra}, "
            f"qk_head_dim={layer.qk_head_dim}, v_head_dim={layer.v_head_dim}, window={a.window}, "
            f"chunk={a.chunk}, scale={a.softmax_scale:.6g})")


def _model_repr(m):
    return (f"ModelPositions(model_type={m.model_type!r}, num_layers={m.num_layers}, "
            f"max_position_embeddings={m.max_position_embeddings}, warnings={len(m.warnings)})")


def _to_json(m, seq_len=None) -> dict:
    """The plan as `posenc inspect --format json` prints it (posenc/model_report.h): every layer with its
    rope (inv_freq and attention_factor at seq_len, default max_position_embeddings) and attention."""
    return json.loads(m.report_json(0 if seq_len is None else integer("seq_len", seq_len, 0)))


def _table(m, seq_len=None) -> str:
    """The plan as `posenc inspect` prints it: identical layers grouped on one line (warnings not
    included)."""
    return m.report_table(0 if seq_len is None else integer("seq_len", seq_len, 0))


ModelPositions.from_hf = staticmethod(_from_hf)
ModelPositions.to_json = _to_json
ModelPositions.table = _table
LayerPlan.inv_freq = _inv_freq
LayerPlan.attention_factor = _attention_factor
LayerPlan.attention_config = _attention_config
LayerPlan.__repr__ = _layer_repr
ModelPositions.__repr__ = _model_repr
