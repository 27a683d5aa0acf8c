"""posenc.mrope_positions / mrope_decode_positions against transformers 5.23's own code: the
get_rope_index and compute_3d_position_ids methods of Qwen2VLModel, Qwen2_5_VLModel and Qwen3VLModel
(models/qwen2_vl/modeling_qwen2_vl.py, qwen2_5_vl/modeling_qwen2_5_vl.py, qwen3_vl/modeling_qwen3_vl.py),
on random batches of text, several images and multi-frame videos, with padding (left, right and
masked tokens inside a row), every second_per_grid_ts dtype, and compared exactly.

The models are built from the REAL configs in tests/data/hf_configs (Qwen2-VL 2B, Qwen2.5-VL 7B,
olmOCR-2 7B, a Qwen2.5-VL fine-tune) and, for Qwen3-VL (no config file here), from the config class
defaults; on the meta device (no weights, no memory): get_rope_index reads only the vision config's
spatial_merge_size / tokens_per_second and makes its tensors on input_ids' device (the CPU).
"""
import json
import math
import os
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
from transformers import AutoConfig, AutoModel, Qwen3VLConfig

import posenc

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "hf_configs")
CONFIGS = {
    "qwen2-vl__Qwen2-VL-2B-Instruct-AWQ": "qwen2_vl",
    "qwen2.5-vl__Qwen2.5-VL-7B-Instruct": "qwen2_5_vl",
    "qwen2.5-vl__olmOCR-2-7B-1025": "qwen2_5_vl",
    "qwen3-vl (class defaults)": "qwen3_vl",
}
_MODELS = {}


def model_for(name):
    """(meta-device model, family) of transformers 5 for a config file (or Qwen3-VL's defaults)."""
    if name not in _MODELS:
        if name.startswith("qwen3-vl"):
            config = Qwen3VLConfig()
        else:
            with open(os.path.join(DATA, name + ".json"), encoding="utf-8") as f:
                config = AutoConfig.for_model(**json.load(f))
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = AutoModel.from_config(config)
        assert type(model).__name__ in ("Qwen2VLModel", "Qwen2_5_VLModel", "Qwen3VLModel")
        _MODELS[name] = (model, CONFIGS[name])
    return _MODELS[name]


def random_batch(rng, family, merge, batch, padding):
    """mm_token_type_ids [B, S], attention_mask [B, S] or None, image and video grids [n, 3]."""
    rows, images, videos = [], [], []
    for _ in range(batch):
        row, last = [], None
        for _ in range(int(rng.integers(1, 7))):
            kind = int(rng.integers(0, 3))
            if kind and kind == last:  # vision_start / vision_end text between two images or videos
                row += [0] * int(rng.integers(1, 3))
            if kind == 0:
                row += [0] * int(rng.integers(1, 7))
            else:
                t = int(rng.integers(1, 3)) if kind == 1 else int(rng.integers(1, 6))
                h, w = merge * int(rng.integers(1, 4)), merge * int(rng.integers(1, 4))
                frame = (h // merge) * (w // merge)
                if kind == 2 and family == "qwen3_vl":  # <t1> <frame1> <t2> <frame2> ...
                    for f in range(t):
                        row += [0] * int(rng.integers(1, 3)) if f else []
                        row += [2] * frame
                else:
                    row += [kind] * (t * frame)
                (images if kind == 1 else videos).append([t, h, w])
            last = kind
        rows.append(row)
    masks = []
    for i, row in enumerate(rows):
        types, mask = [], []
        for t in row:
            if padding and rng.integers(0, 10) == 0:  # a masked token of any type inside the row
                types.append(int(rng.integers(0, 3)))
                mask.append(0)
            types.append(t)
            mask.append(1)
        rows[i], masks = types, masks + [mask]
    length = max(map(len, rows)) + (int(rng.integers(0, 4)) if padding else 0)
    types_out = np.zeros((batch, length), dtype=np.int64)
    mask_out = np.zeros((batch, length), dtype=np.int64)
    for i, (row, mask) in enumerate(zip(rows, masks)):
        pad = length - len(row)
        left = padding and bool(rng.integers(0, 2))
        fill = list(rng.integers(0, 3, size=pad)) if padding else [0] * pad  # no mask: pad with text
        row, mask = (fill + row, [0] * pad + mask) if left else (row + fill, mask + [0] * pad)
        types_out[i], mask_out[i] = row, mask
    as_grid = lambda g: np.array(g, dtype=np.int64).reshape(-1, 3) if g else None  # noqa: E731
    return types_out, (mask_out if padding else None), as_grid(images), as_grid(videos)


def hf_rope_index(model, types, mask, images, videos, seconds):
    kwargs = {}
    if seconds is not None:
        kwargs["second_per_grid_ts"] = seconds
    pos, deltas = model.get_rope_index(
        torch.zeros(types.shape, dtype=torch.long),
        mm_token_type_ids=torch.from_numpy(types),
        image_grid_thw=None if images is None else torch.from_numpy(images),
        video_grid_thw=None if videos is None else torch.from_numpy(videos.copy()),
        attention_mask=None if mask is None else torch.from_numpy(mask),
        **kwargs,
    )
    return pos.numpy(), deltas.numpy()


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("batch", [1, 3])
def test_positions_equal_transformers(name, padding, batch):
    model, family = model_for(name)
    vision = model.config.vision_config
    merge = vision.spatial_merge_size
    rng = np.random.default_rng([batch, int(padding), len(name)])
    for trial in range(25):
        types, mask, images, videos = random_batch(rng, family, merge, batch, padding)
        seconds_options = [None]
        if family == "qwen2_5_vl" and videos is not None:
            n = len(videos)
            # the processors' float32 tensor (temporal_patch_size / fps), and a float64 one
            fps = rng.choice([1.0, 2.0, 3.0, 24.0, 29.97], size=n).astype(np.float32)
            seconds_options += [torch.tensor(2.0 / fps),
                                torch.tensor(rng.uniform(0.05, 3.0, size=n), dtype=torch.float64),
                                torch.tensor(rng.uniform(0.05, 3.0, size=n), dtype=torch.float32)]
        for seconds in seconds_options:
            expected_pos, expected_deltas = hf_rope_index(model, types, mask, images, videos, seconds)
            kwargs = {}
            if seconds is not None:
                kwargs = dict(second_per_grid_ts=seconds.numpy().astype(np.float64),
                              time_dtype="float64" if seconds.dtype == torch.float64 else "float32")
            pos, deltas = posenc.mrope_positions(
                types, images, videos, mask, family=family, spatial_merge_size=merge,
                tokens_per_second=getattr(vision, "tokens_per_second", 4), **kwargs)
            where = f"{name} trial {trial} seconds {None if seconds is None else seconds.dtype}"
            np.testing.assert_array_equal(pos, expected_pos, err_msg=where)
            np.testing.assert_array_equal(deltas, expected_deltas[:, 0], err_msg=where)
            assert pos.dtype == np.int64 and pos.shape == (3,) + types.shape


def test_qwen2_5_vl_temporal_rounding_equals_transformers():
    """Long videos (64 frames of one merged patch) where float32 and float64 truncations differ;
    tokens_per_second 1..4 and, bypassing the config's int check, fractional values (float32 in
    transformers: a Python float times an int64 arange)."""
    model, _ = model_for("qwen2.5-vl__Qwen2.5-VL-7B-Instruct")
    vision = model.config.vision_config
    saved = vision.tokens_per_second
    types = np.full((1, 64), 2, dtype=np.int64)
    videos = np.array([[64, 2, 2]], dtype=np.int64)
    differ = 0
    try:
        for tps in (1, 2, 3, 4, 1.3, 2.5, 0.7):
            object.__setattr__(vision, "tokens_per_second", tps)  # the strict config takes ints only
            for s in [None] + [round(0.01 * i, 2) for i in range(1, 301, 7)]:
                for dtype in (torch.float32, torch.float64):
                    seconds = None if s is None else torch.tensor([s], dtype=dtype)
                    expected, expected_deltas = hf_rope_index(model, types, None, None, videos, seconds)
                    kwargs = {} if s is None else dict(
                        second_per_grid_ts=[float(seconds[0])],
                        time_dtype="float32" if dtype == torch.float32 else "float64")
                    pos, deltas = posenc.mrope_positions(types, None, videos, family="qwen2_5_vl",
                                                         tokens_per_second=tps, **kwargs)
                    np.testing.assert_array_equal(pos, expected, err_msg=f"tps {tps} s {s} {dtype}")
                    np.testing.assert_array_equal(deltas, expected_deltas[:, 0])
                    if s is not None and dtype == torch.float64:
                        f32, _ = posenc.mrope_positions(types, None, videos, family="qwen2_5_vl",
                                                        tokens_per_second=tps, second_per_grid_ts=[s])
                        differ += int((f32 != pos).any())
    finally:
        object.__setattr__(vision, "tokens_per_second", saved)
    assert differ > 0  # the dtype matters, so the test sees the rounding


class _Cache:
    def __init__(self, length):
        self.length = length

    def get_seq_length(self):
        return self.length


@pytest.mark.parametrize("name", list(CONFIGS))
def test_decode_positions_equal_transformers(name):
    """compute_3d_position_ids once rope_deltas are cached (generation steps): without a mask,
    arange(past, past + S) + delta; with one, cumsum(mask) - 1 + delta; deltas repeated per beam."""
    model, _ = model_for(name)
    rng = np.random.default_rng(7)
    deltas = np.array([-3, 5], dtype=np.int64)
    for batch in (2, 4, 6):
        for past, seq in ((0, 5), (17, 1), (9, 3)):
            model.rope_deltas = torch.from_numpy(deltas)[:, None]
            expected = model.compute_3d_position_ids(
                input_ids=None, inputs_embeds=torch.zeros(batch, seq, 1), image_grid_thw=None,
                video_grid_thw=None, attention_mask=None, past_key_values=_Cache(past))
            got = posenc.mrope_decode_positions(deltas, seq, past_length=past, batch=batch)
            np.testing.assert_array_equal(got, expected.numpy())
            mask = (rng.random((batch, past + seq)) > 0.3).astype(np.int64)
            expected = model.compute_3d_position_ids(
                input_ids=None, inputs_embeds=torch.zeros(batch, seq, 1), image_grid_thw=None,
                video_grid_thw=None, attention_mask=torch.from_numpy(mask), past_key_values=_Cache(past))
            got = posenc.mrope_decode_positions(deltas, attention_mask=mask)
            np.testing.assert_array_equal(got, expected.numpy())
    model.rope_deltas = None


def test_prompt_then_decode_continues_the_text_positions():
    """The deltas of a prompt give the next token the position max + 1 on every row."""
    types = np.array([[0, 0, 1, 1, 1, 1, 1, 1, 0, 0]])
    pos, deltas = posenc.mrope_positions(types, [[1, 4, 6]])
    nxt = posenc.mrope_decode_positions(deltas, 1, past_length=types.shape[1])
    assert (nxt[:, 0, 0] == pos.max() + 1).all()


def test_bad_input_raises_posenc_error():
    types = np.array([[0, 1, 1, 1, 1, 0]])
    message = r"image_grid_thw\[0\] = \[1, 4, 6\] gives 1 \* \(4/2\) \* \(6/2\) = 6"
    with pytest.raises(posenc.Error, match=message):
        posenc.mrope_positions(types, [[1, 4, 6]])
    with pytest.raises(posenc.Error, match="image_grid_thw has shape"):
        posenc.mrope_positions(types, [[1, 4]])
    with pytest.raises(posenc.Error, match="family = 'qwen4_vl'"):
        posenc.mrope_positions(types, [[1, 4, 4]], family="qwen4_vl")
    with pytest.raises(posenc.Error, match="second_per_grid_ts is given, but family qwen2_vl"):
        posenc.mrope_positions(types, [[1, 4, 4]], second_per_grid_ts=[1.0])
    with pytest.raises(posenc.Error, match="mm_token_type_ids: dtype float64 is not an integer type"):
        posenc.mrope_positions(types.astype(np.float64), [[1, 4, 4]])
    with pytest.raises(posenc.Error, match=r"attention_mask\[0, 2\] = 2"):
        posenc.mrope_positions(types, [[1, 4, 4]], attention_mask=[[1, 1, 2, 1, 1, 1]])
    with pytest.raises(posenc.Error, match="seq_len is required"):
        posenc.mrope_decode_positions([1])
    pos, deltas = posenc.mrope_positions(types, [[1, 4, 4]], attention_mask=np.ones((1, 6), dtype=bool))
    assert deltas.tolist() == [4 - 6]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(list(CONFIGS)), seed=st.integers(0, 2**32 - 1), batch=st.integers(1, 3),
       padding=st.booleans(), seconds=st.booleans(),
       change=st.sampled_from(["none", "type", "mask", "image", "video", "drop", "add", "seconds", "empty"]),
       value=st.integers(-2, 5))
def test_any_input_is_an_error_naming_the_argument_or_equals_transformers(name, seed, batch, padding, seconds,
                                                                          change, value):
    """Hypothesis: a valid random batch with one thing changed (a token type, a mask value, a grid
    entry, a grid dropped or added, a second_per_grid_ts value, an empty row). posenc either raises
    posenc.Error naming an argument, or returns exactly what transformers returns."""
    model, family = model_for(name)
    vision = model.config.vision_config
    rng = np.random.default_rng(seed)
    types, mask, images, videos = random_batch(rng, family, vision.spatial_merge_size, batch, padding)
    sec = None
    if seconds and family == "qwen2_5_vl" and videos is not None:
        sec = [float(x) for x in rng.uniform(0.1, 2.0, size=len(videos)).astype(np.float32)]
    b, s = int(rng.integers(0, types.shape[0])), int(rng.integers(0, types.shape[1]))
    if change == "type":
        types[b, s] = value
    elif change == "mask":
        mask = np.ones_like(types) if mask is None else mask
        mask[b, s] = value
    elif change == "empty":
        mask = np.ones_like(types) if mask is None else mask
        mask[b] = 0
    elif change in ("image", "video"):
        grids = images if change == "image" else videos
        if grids is not None:
            grids[int(rng.integers(0, len(grids))), int(rng.integers(0, 3))] = value
    elif change == "drop":
        images = None if images is None or len(images) == 1 else images[:-1]
    elif change == "add":
        videos = np.concatenate([videos if videos is not None else np.zeros((0, 3), np.int64), [[1, 2, 2]]])
    elif change == "seconds" and sec is not None:
        sec[int(rng.integers(0, len(sec)))] = [-1.0, math.inf, math.nan, 0.0][value % 4]
        sec = sec[:-1] if value > 3 else sec
    try:
        pos, deltas = posenc.mrope_positions(types, images, videos, mask, family=family,
                                             spatial_merge_size=vision.spatial_merge_size,
                                             tokens_per_second=getattr(vision, "tokens_per_second", 4),
                                             second_per_grid_ts=sec)
    except posenc.Error as exc:
        names = ("mm_token_type_ids", "attention_mask", "image_grid_thw", "video_grid_thw",
                 "second_per_grid_ts")
        assert any(n in str(exc) for n in names), str(exc)
        return
    expected, expected_deltas = hf_rope_index(model, types, mask, images, videos,
                                              None if sec is None else torch.tensor(sec, dtype=torch.float32))
    np.testing.assert_array_equal(pos, expected)
    np.testing.assert_array_equal(deltas, expected_deltas.reshape(-1))
