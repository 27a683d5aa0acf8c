"""A key/value cache for incremental decoding (posenc/kv_cache.h): keys are stored rotated by the cache's
RoPE once, at append; attend runs the fused attention of new queries against every cached token, with
any bias, mask or score option of posenc.attention, and splits a long cache across threads
(flash-decoding). Decoding token by token equals one full forward.

    cache = posenc.KVCache(batch=1, kv_heads=8, head_dim=128, rope=layer.rope)   # rope: a RopeConfig or None
    cache = posenc.KVCache(1, 8, 128, rope=layer.rope, dtype="bfloat16")           # bf16 / fp16 storage
    cache.append(k, v)                        # k, v [B, T, Hkv, D] float32 or the cache's dtype
    out = cache.attend(q, causal=True)        # q [B, T, H, D]: the last T appended tokens' queries
    cache.shift_positions(-n)                 # context shift: positions += delta, keys re-rotated in place
    cache.erase_front(n)                      # drop the oldest n tokens
    cache.rerotate(from_seq_len, to_seq_len)  # LongRoPE's short -> long switch without recomputing keys
"""
from __future__ import annotations

import numpy as np

from . import _core
from ._checks import activation, bits, fail, integer, positions as checked_positions, storage, storage_dtype
from .attention import AttentionCall, canonical_params, parse_encoding
from .rope import RopeConfig

_ROPE_PARAMS = {"base", "rotary_dim", "layout", "rope_scaling", "max_position_embeddings", "rope_config",
                "rope_offset"}


def cache_attention_call(rope, q_shape, *, encoding=None, **kwargs) -> AttentionCall:
    """The AttentionCall of a cache's attend: RoPE is the cache's (its keys are stored rotated), so "rope" in
    encoding is accepted only with the cache's own rope_config, and adds nothing."""
    params = canonical_params({k: v for k, v in kwargs.items()
                               if k not in ("causal", "scale", "window", "softcap", "sinks", "chunk",
                                            "query_temperature")})
    parts = parse_encoding(encoding)
    if "rope" in parts:
        given = params.get("rope_config")
        if given is None or given is not rope or params.get("rope_offset", 0) != 0 or \
                len(params.keys() & (_ROPE_PARAMS - {"rope_config", "rope_offset"})):
            fail("encoding: 'rope' is the cache's own (keys are stored rotated by the rope given to "
                 "KVCache); leave it out, or pass the cache's rope_config unchanged")
        parts.remove("rope")
        params = {k: v for k, v in params.items() if k not in _ROPE_PARAMS}
    return AttentionCall(q_shape, causal=kwargs.get("causal", False), scale=kwargs.get("scale"),
                         encoding="+".join(parts) or None, window=kwargs.get("window", 0),
                         softcap=kwargs.get("softcap", 0.0), sinks=kwargs.get("sinks"),
                         chunk=kwargs.get("chunk", 0), query_temperature=kwargs.get("query_temperature"),
                         **params)


class KVCache:
    """Keys, values and positions of past tokens, per batch row: [B, size, Hkv, D]."""

    def __init__(self, batch: int, kv_heads: int, head_dim: int, *, rope: RopeConfig | None = None,
                 dtype="float32"):
        """dtype: the storage of keys and values, float32, float16 or bfloat16 (a name, a numpy dtype, or
        ml_dtypes.bfloat16): 16-bit caches hold half the bytes a decode step reads; keys are rotated in
        fp32 and rounded once."""
        if rope is not None and not isinstance(rope, RopeConfig):
            fail(f"rope: expected a posenc.RopeConfig or None, got {type(rope).__name__}")
        self._dtype = storage_dtype("dtype", dtype)
        self._rope = rope
        self._shape = (integer("batch", batch, 1), integer("kv_heads", kv_heads, 1),
                       integer("head_dim", head_dim, 1))
        self._core = _core.KVCache(*self._shape, rope, storage(np.empty(0, self._dtype)))

    @property
    def dtype(self) -> np.dtype:
        """The storage of keys and values."""
        return self._dtype

    @property
    def size(self) -> int:
        """Tokens per batch row."""
        return self._core.size

    def append(self, k, v, positions=None) -> None:
        """k, v [B, T, Hkv, D], both float32 (rounded once into a 16-bit cache) or both the cache's dtype;
        positions [T] or [B, T] int64 (default: each row continues after its last position, 0, 1, 2, ...
        from empty)."""
        k, v = activation("k", k, (4,)), activation("v", v, (4,))
        for name, a in (("k", k), ("v", v)):
            if a.dtype != np.float32 and a.dtype != self._dtype:
                fail(f"{name}: dtype {a.dtype} is invalid for a {self._dtype} cache: "
                     f"give float32 or {self._dtype}")
        if k.dtype != v.dtype:
            fail(f"v: dtype {v.dtype} differs from k's {k.dtype}: give both in one dtype")
        p = None if positions is None else checked_positions("positions", positions, (1, 2))
        self._core.append(bits(k), bits(v), p, storage(k))

    def attend(self, q, *, q_positions=None, return_lse=False, causal=False, scale=None, encoding=None,
               window=0, softcap=0.0, sinks=None, chunk=0, query_temperature=None, **params):
        """Attention of q [B, T, H, D] over every cached token, as posenc.attention (causal, scale, window,
        chunk, softcap, sinks, query_temperature, a bias encoding "alibi", "t5", "relative" with its
        parameters). RoPE is the cache's: "rope" in encoding is accepted only with the cache's own
        rope_config (as layer.attention_config() gives it), and adds nothing. q_positions default to the
        positions of the last T appended tokens. q float32, float16 or bfloat16 (whatever the cache's
        dtype); with a rope, a 16-bit q is rotated in fp32 and rounded once to its dtype, as posenc.rope
        returns it. Returns out [B, T, H, D] in q's dtype (and lse [B, H, T] float32)."""
        q = activation("q", q, (4,))
        call = cache_attention_call(self._rope, q.shape, causal=causal, scale=scale, encoding=encoding,
                                    window=window, softcap=softcap, sinks=sinks, chunk=chunk,
                                    query_temperature=query_temperature, **params)
        B, T, H = q.shape[:3]
        out = np.empty((B, T, H, self._shape[2]), q.dtype)
        lse = np.empty((B, H, T), np.float32)
        qp = None if q_positions is None else checked_positions("q_positions", q_positions, (1, 2))
        self._core.attend(call.core, call.tables, bits(q), bits(out), qp, lse, storage(q))
        return (out, lse) if return_lse else out

    def shift_positions(self, delta: int) -> None:
        """Every cached position += delta; keys re-rotated in place by R(delta) (a context shift)."""
        self._core.shift_positions(integer("delta", delta))

    def erase_front(self, n: int) -> None:
        """Drops the oldest n tokens of every batch row (positions of the rest kept)."""
        self._core.erase_front(integer("n", n, 0))

    def rerotate(self, from_seq_len: int, to_seq_len: int) -> None:
        """Re-rotates every cached key from the frequencies at from_seq_len to those at to_seq_len
        (LongRoPE)."""
        self._core.rerotate(integer("from_seq_len", from_seq_len, 1), integer("to_seq_len", to_seq_len, 1))

    def clear(self) -> None:
        self._core.clear()

    def state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Copies of the stored keys (rotated) and values [B, size, Hkv, D] in the cache's dtype, and
        positions [B, size]."""
        B, Hkv, D = self._shape
        keys = np.empty((B, self.size, Hkv, D), self._dtype)
        values = np.empty_like(keys)
        pos = np.empty((B, self.size), np.int64)
        self._core.copy_state(bits(keys), bits(values), pos)
        return keys, values, pos


__all__ = ["KVCache"]
