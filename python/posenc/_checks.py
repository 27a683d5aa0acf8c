"""Argument checks and conversions shared by the numpy API.

Every public function converts its inputs here: floats to float32 (a view, no copy, when the
array already is float32 with a unit last stride), positions to int64. A bad argument raises
posenc.Error (a ValueError) naming the argument and its value, before any output is written.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import _core

Error = _core.Error


def fail(message: str):
    raise Error(message)


def positions(name: str, value, ndims=(1,)) -> np.ndarray:
    """int64 positions of one of the allowed ranks (a Python int counts as rank 0)."""
    try:
        arr = np.asarray(value)
    except Exception as exc:  # ragged lists and the like
        fail(f"{name}: cannot be read as an array of integers ({exc})")
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        fail(f"{name}: dtype {arr.dtype} is not an integer type")
    if arr.ndim not in ndims:
        fail(f"{name}: rank {arr.ndim} (shape {list(arr.shape)}) is invalid: "
             f"expected rank {' or '.join(map(str, ndims))}")
    return np.ascontiguousarray(arr, dtype=np.int64)


def float32(name: str, value, ndims=None, finite=False) -> np.ndarray:
    """float32 data with a unit stride on the last axis (a copy only when needed). finite=True
    for parameters (tables): nan or inf there is an error; activations are not scanned."""
    try:
        arr = np.asarray(value)
    except Exception as exc:
        fail(f"{name}: cannot be read as an array of numbers ({exc})")
    if arr.dtype.kind not in "fiu" or arr.dtype == np.bool_:
        fail(f"{name}: dtype {arr.dtype} is not a real number type")
    if ndims is not None and arr.ndim not in ndims:
        fail(f"{name}: rank {arr.ndim} (shape {list(arr.shape)}) is invalid: "
             f"expected rank {' or '.join(map(str, ndims))}")
    arr = arr.astype(np.float32, copy=False)
    if arr.ndim and arr.shape[-1] > 1 and arr.strides[-1] != arr.itemsize:
        arr = np.ascontiguousarray(arr)
    if finite and arr.size and not np.all(np.isfinite(arr)):
        fail(f"{name}: contains non-finite values (nan or inf)")
    return arr


# 16-bit storage kept as is by the activation ops (RoPE): numpy float16 and ml_dtypes' bfloat16.
_STORAGE = {"float16": "f16", "bfloat16": "bf16"}


def activation(name: str, value, ndims=None) -> np.ndarray:
    """Activation data in its own storage when posenc computes on it directly (float32, float16, and
    bfloat16 from the ml_dtypes package), else converted to float32; a unit stride on the last axis
    (a copy only when needed). Results come back in the same dtype."""
    arr = np.asarray(value) if not isinstance(value, np.ndarray) else value
    if arr.dtype.name in _STORAGE:
        if ndims is not None and arr.ndim not in ndims:
            fail(f"{name}: rank {arr.ndim} (shape {list(arr.shape)}) is invalid: "
                 f"expected rank {' or '.join(map(str, ndims))}")
        if arr.ndim and arr.shape[-1] > 1 and arr.strides[-1] != arr.itemsize:
            arr = np.ascontiguousarray(arr)
        return arr
    return float32(name, value, ndims)


def storage_dtype(name: str, dtype) -> np.dtype:
    """float32, float16 or bfloat16 (ml_dtypes) from a name or a numpy dtype; anything else is an error
    naming the argument."""
    try:
        key = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    except TypeError:
        key = None
    if key not in ("float32", "float16", "bfloat16"):
        fail(f"{name} = {dtype!r} is invalid: expected float32, float16 or bfloat16")
    if key == "bfloat16":
        try:
            import ml_dtypes  # numpy's bfloat16, as JAX uses it
        except ImportError:
            fail(f"{name} = 'bfloat16' needs the ml_dtypes package (pip install ml_dtypes)")
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(key)


def storage(arr: np.ndarray) -> str:
    """The storage name the C++ binding takes with bits(arr): "f32", "bf16" or "f16"."""
    return _STORAGE.get(arr.dtype.name, "f32")


def bits(arr: np.ndarray) -> np.ndarray:
    """A 16-bit float array as its uint16 bits (a view), for the binding; other arrays unchanged."""
    return arr.view(np.uint16) if arr.dtype.name in _STORAGE else arr


def integer(name: str, value, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        fail(f"{name} = {value!r} is invalid: expected an integer")
    if minimum is not None and value < minimum:
        fail(f"{name} = {value} is invalid: must be >= {minimum}")
    return int(value)


def real(name: str, value, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        fail(f"{name} = {value!r} is invalid: expected a number")
    value = float(value)
    if not math.isfinite(value) or (positive and value <= 0):
        fail(f"{name} = {value} is invalid: must be {'a positive' if positive else 'a finite'} number")
    return value


def choice(name: str, value, options) -> str:
    # (an array or other non-string is named too, not compared element-wise)
    if not isinstance(value, str) or value not in options:
        fail(f"{name} = {value!r} is invalid: expected one of {', '.join(map(repr, options))}")
    return value
