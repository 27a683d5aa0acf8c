"""Biases added to attention logits: T5's bucketed relative bias (Raffel et al.), a learned bias
per clipped distance, and ALiBi (Press et al.) with BLOOM's or MPT's slopes. Bias blocks are
[heads, queries, keys] for distances k_pos - q_pos."""
from __future__ import annotations

import numpy as np

from . import _core
from ._checks import choice, fail, float32, integer, positions, real


def t5_buckets(relative_positions, *, bidirectional=True, num_buckets=32, max_distance=128) -> np.ndarray:
    """T5's _relative_position_bucket of relative_position = key - query (any shape, int64 out)."""
    rel = positions("relative_positions", relative_positions, (0, 1, 2, 3, 4))
    out = np.empty(rel.shape, dtype=np.int64)
    _core.t5_buckets(rel.reshape(-1), out.reshape(-1), bool(bidirectional),
                     integer("num_buckets", num_buckets, 1), integer("max_distance", max_distance, 1))
    return out


def _relative(table, q_positions, k_positions, bucketing, num_buckets, max_distance,
              bidirectional) -> np.ndarray:
    table = float32("table", table, (2,), finite=True)
    q = positions("q_positions", q_positions)
    k = positions("k_positions", k_positions)
    heads = table.shape[1]
    rows = _core.relative_bias_rows(heads, bucketing, num_buckets, max_distance, bidirectional)
    if table.shape[0] != rows:
        fail(f"table: shape {list(table.shape)} is invalid: expected [{rows}, heads] rows for this bucketing")
    out = np.empty((heads, q.shape[0], k.shape[0]), dtype=np.float32)
    _core.relative_bias(heads, bucketing, num_buckets, max_distance, bidirectional, table, q, k, out)
    return out


def t5_bias(table, q_positions, k_positions, *, bidirectional=True, num_buckets=32,
            max_distance=128) -> np.ndarray:
    """table[t5_bucket(k - q), h] as [heads, Q, K]; table is [num_buckets, heads] like HF T5's
    relative_attention_bias.weight (compute_bias returns the same values as [1, heads, Q, K])."""
    return _relative(table, q_positions, k_positions, "t5", integer("num_buckets", num_buckets, 1),
                     integer("max_distance", max_distance, 1), bool(bidirectional))


def relative_bias(table, q_positions, k_positions, *, max_distance) -> np.ndarray:
    """table[clip(k - q, -max_distance, max_distance) + max_distance, h] as [heads, Q, K]; table is
    [2 * max_distance + 1, heads]."""
    return _relative(table, q_positions, k_positions, "clipped", 32,
                     integer("max_distance", max_distance, 0), True)


def relative_bias_backward(grad, q_positions, k_positions, *, bucketing="t5", num_buckets=32,
                           max_distance=128, bidirectional=True) -> np.ndarray:
    """d loss / d table of t5_bias (bucketing "t5") or relative_bias ("clipped"); grad [heads, Q, K]."""
    bucketing = choice("bucketing", bucketing, ("t5", "clipped"))
    grad = float32("grad", grad, (3,))
    q = positions("q_positions", q_positions)
    k = positions("k_positions", k_positions)
    heads = grad.shape[0]
    rows = _core.relative_bias_rows(heads, bucketing, integer("num_buckets", num_buckets, 1),
                                    integer("max_distance", max_distance, 0), bool(bidirectional))
    out = np.zeros((rows, heads), dtype=np.float32)
    _core.relative_bias_backward(heads, bucketing, num_buckets, max_distance, bool(bidirectional),
                                 grad, q, k, out)
    return out


def alibi_slopes(n_heads, *, slopes="bloom", alibi_bias_max=8.0) -> np.ndarray:
    """ALiBi's per-head slopes (float64): BLOOM's / Press et al.'s geometric sequence, also for head
    counts that are not powers of two; slopes="mpt" is MPT's gen_slopes with alibi_bias_max."""
    return np.asarray(_core.alibi_slopes(integer("n_heads", n_heads, 1),
                                         choice("slopes", slopes, ("bloom", "mpt")),
                                         real("alibi_bias_max", alibi_bias_max, positive=True)))


def alibi_bias(n_heads, q_positions, k_positions, causal=True, *, slopes="bloom",
               alibi_bias_max=8.0) -> np.ndarray:
    """-m_h (q - k) as [heads, Q, K] (causal; future keys are for the attention mask to hide), or
    -m_h |q - k| with causal=False (bidirectional encoders)."""
    q = positions("q_positions", q_positions)
    k = positions("k_positions", k_positions)
    n_heads = integer("n_heads", n_heads, 1)
    out = np.empty((n_heads, q.shape[0], k.shape[0]), dtype=np.float32)
    _core.alibi_bias(n_heads, choice("slopes", slopes, ("bloom", "mpt")),
                     real("alibi_bias_max", alibi_bias_max, positive=True), not causal, q, k, out)
    return out
