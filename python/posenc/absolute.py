"""Absolute encodings added to token embeddings: sinusoidal (Vaswani et al. 2017), binary codes
(the seeds' counter-example) and learned tables (BERT, GPT-2, ViT)."""
from __future__ import annotations

import numpy as np

from . import _core
from ._checks import activation, bits, choice, float32, integer, positions, real, storage, storage_dtype


def sinusoidal(positions_, dim, base=10000.0, layout="interleaved", *, frequencies="model_dim", offset=0,
               dtype="float32") -> np.ndarray:
    """PE(positions) as a [N, dim] array of dtype float32, float16 or bfloat16 (computed in fp32, rounded
    once).

    layout "interleaved" is the paper's [sin w0, cos w0, sin w1, ...]; "split" is [sin ... | cos ...]
    (tensor2tensor, fairseq). frequencies "model_dim" is w_i = base^(-2i/dim); "half_dim_minus_one"
    is fairseq's base^(-i/(dim/2 - 1)). Angles are computed in double, so large positions keep
    their accuracy.
    """
    pos = positions("positions", positions_)
    dim = integer("dim", dim, 1)
    layout = choice("layout", layout, ("interleaved", "split"))
    frequencies = choice("frequencies", frequencies, ("model_dim", "half_dim_minus_one"))
    out = np.empty((pos.shape[0], dim), dtype=storage_dtype("dtype", dtype))
    _core.sinusoidal_table(pos, bits(out), dim, real("base", base, positive=True), layout, frequencies,
                           integer("offset", offset), storage(out))
    return out


def sinusoidal_frequencies(dim, base=10000.0, *, frequencies="model_dim") -> np.ndarray:
    """The angular frequencies w_i (dim // 2 values, float64)."""
    frequencies = choice("frequencies", frequencies, ("model_dim", "half_dim_minus_one"))
    # The frequencies do not depend on the layout; "split" is the one that also admits an odd dim.
    return np.asarray(_core.sinusoidal_frequencies(integer("dim", dim, 1), real("base", base, positive=True),
                                                   "split", frequencies))


def binary(positions_, bits, *, signed=False) -> np.ndarray:
    """Each position as its `bits` binary digits, most significant first: [N, bits] float32 of
    {0, 1} (or {-1, +1} with signed=True). A position outside [0, 2^bits) is an error."""
    pos = positions("positions", positions_)
    bits = integer("bits", bits, 1)
    out = np.empty((pos.shape[0], bits), dtype=np.float32)
    _core.binary_table(pos, out, bits, bool(signed))
    return out


def learned(table, positions_, *, dtype="float32") -> np.ndarray:
    """table[positions]: [N, dim], in dtype float32, float16 or bfloat16 (the float32 table's rows rounded
    once). A position outside [0, max_len) is an error, never a clamp."""
    table = float32("table", table, (2,), finite=True)
    pos = positions("positions", positions_)
    out = np.empty((pos.shape[0], table.shape[1]), dtype=storage_dtype("dtype", dtype))
    _core.learned_lookup(table, pos, bits(out), storage(out))
    return out


def learned_backward(grad, positions_, max_len) -> np.ndarray:
    """d loss / d table for `learned`: grad [N, dim] (float32, float16 or bfloat16) scattered into
    [max_len, dim] float32 rows."""
    grad = activation("grad", grad, (2,))
    pos = positions("positions", positions_)
    out = np.zeros((integer("max_len", max_len, 1), grad.shape[1]), dtype=np.float32)
    _core.learned_backward(bits(grad), pos, out, storage(grad))
    return out
