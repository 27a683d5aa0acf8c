"""M-RoPE position ids for text with images and videos, as Qwen2-VL, Qwen2.5-VL and Qwen3-VL compute
them (transformers 5.23: get_rope_index in models/qwen2_vl/modeling_qwen2_vl.py,
qwen2_5_vl/modeling_qwen2_5_vl.py, qwen3_vl/modeling_qwen3_vl.py), and the decode positions that
follow from their deltas (compute_3d_position_ids). The rules, with a worked example, are in
include/posenc/mrope_positions.h.
"""
from __future__ import annotations

import numpy as np

from . import _core
from ._checks import choice, fail, integer, positions, real

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")


def _mask(name, value):
    """An attention mask of 0/1 as int64 (bool masks accepted)."""
    arr = np.asarray(value)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.int64)
    return positions(name, arr, (2,))


def _grids(name, value):
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.size == 0:
        arr = arr.reshape(0, 3).astype(np.int64)
    return positions(name, arr, (2,))


def mrope_positions(mm_token_type_ids, image_grid_thw=None, video_grid_thw=None, attention_mask=None, *,
                    family="qwen2_vl", spatial_merge_size=2, tokens_per_second=4, second_per_grid_ts=None,
                    time_dtype="float32") -> tuple[np.ndarray, np.ndarray]:
    """(positions [3, B, S] int64, deltas [B] int64) of transformers' get_rope_index.

    mm_token_type_ids [B, S]: 0 text, 1 image, 2 video (what the Qwen-VL processors return);
    image_grid_thw / video_grid_thw [n, 3]: the (t, h, w) patch grids, consumed in order over the
    batch, one per run of image / video tokens (Qwen3-VL: one per frame of each video);
    attention_mask [B, S] of 0/1: padding is skipped and gets position 0. family "qwen2_vl",
    "qwen2_5_vl" or "qwen3_vl"; spatial_merge_size and (Qwen2.5-VL) tokens_per_second from the
    config's vision_config; second_per_grid_ts [num_videos] (Qwen2.5-VL, optional): the temporal
    index is truncated from products in time_dtype, "float32" as the processors' tensors (default)
    or "float64". deltas is transformers' rope_deltas[:, 0]: what decoding adds to text positions.
    """
    types = positions("mm_token_type_ids", mm_token_type_ids, (2,))
    mask = None if attention_mask is None else _mask("attention_mask", attention_mask)
    images = _grids("image_grid_thw", image_grid_thw)
    videos = _grids("video_grid_thw", video_grid_thw)
    family = choice("family", family, FAMILIES)
    seconds = None
    if second_per_grid_ts is not None:
        try:
            seconds = np.ascontiguousarray(np.asarray(second_per_grid_ts, dtype=np.float64).reshape(-1))
        except (TypeError, ValueError) as exc:
            fail(f"second_per_grid_ts: cannot be read as an array of numbers ({exc})")
    out = np.empty((3,) + types.shape, dtype=np.int64)
    deltas = np.empty(types.shape[0], dtype=np.int64)
    _core.mrope_positions(types, mask, images, videos, seconds, out, deltas, family,
                          integer("spatial_merge_size", spatial_merge_size, 1),
                          real("tokens_per_second", tokens_per_second, positive=True),
                          choice("time_dtype", time_dtype, ("float32", "float64")))
    return out, deltas


def mrope_decode_positions(deltas, seq_len=None, *, past_length=0, batch=None,
                           attention_mask=None) -> np.ndarray:
    """Positions [3, B, S] of tokens after a prompt whose deltas mrope_positions gave:
    past_length + s + deltas[b] (B = batch, a multiple of len(deltas), default len(deltas)); or, with
    attention_mask [B, L] over the past and new tokens, cumsum(mask) - 1 (0 where masked) + delta,
    [3, B, L] (transformers' compute_3d_position_ids once rope_deltas are cached)."""
    d = positions("deltas", deltas, (1, 2))
    if attention_mask is not None:
        mask = _mask("attention_mask", attention_mask)
        out = np.empty((3,) + mask.shape, dtype=np.int64)
        _core.mrope_decode_positions(d, 0, mask, out)
        return out
    if seq_len is None:
        fail("mrope_decode_positions: seq_len is required without an attention_mask")
    b = d.shape[0] if batch is None else integer("batch", batch, 0)
    out = np.empty((3, b, integer("seq_len", seq_len, 0)), dtype=np.int64)
    _core.mrope_decode_positions(d, integer("past_length", past_length), None, out)
    return out
