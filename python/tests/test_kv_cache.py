"""posenc.KVCache (posenc/kv_cache.h) from Python: decoding token by token equals one full forward of
posenc.attention (with RoPE, a bias, GQA, softcap, sinks, chunks; a long multi-query cache that
flash-decoding splits across threads), the context shift and the re-rotation equal caches filled
from scratch, and bad use is an error naming the argument."""
import numpy as np
import pytest

import posenc


def randn(*shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("options", [{}, {"encoding": "alibi"}, {"softcap": 2.0, "chunk": 5},
                                     {"sinks": True, "window": 4, "encoding": "t5"}])
def test_decode_token_by_token_equals_the_full_forward(options):
    options = dict(options)
    B, T, H, Hkv, D = 2, 17, 4, 2, 16
    rope = posenc.rope_config(D, base=500.0)
    q, k, v = randn(B, T, H, D, seed=1), randn(B, T, Hkv, D, seed=2), randn(B, T, Hkv, D, seed=3)
    if options.pop("sinks", False):
        options["sinks"] = randn(H, seed=4)
    if options.get("encoding") == "t5":
        options["relative_table"] = randn(32, H, seed=5)
    enc = options.pop("encoding", None)
    encoding = "rope" + (f"+{enc}" if enc else "")
    full = posenc.attention(q, k, v, causal=True, encoding=encoding, rope_config=rope, **options)
    cache = posenc.KVCache(B, Hkv, D, rope=rope)
    for t in range(T):
        cache.append(k[:, t:t + 1], v[:, t:t + 1])
        out = cache.attend(q[:, t:t + 1], causal=True, encoding=enc, **options)
        np.testing.assert_allclose(out, full[:, t:t + 1], atol=2e-5, rtol=2e-5, err_msg=f"token {t}")
    assert cache.size == T


def test_long_multi_query_decode_is_split_and_equal():
    """One token against 5000 keys of one kv head: the cache is split across threads (flash-decoding)."""
    K, H, D = 5000, 8, 32
    rope = posenc.rope_config(D)
    q, k, v = randn(1, 1, H, D, seed=6), randn(1, K, 1, D, seed=7), randn(1, K, 1, D, seed=8)
    cache = posenc.KVCache(1, 1, D, rope=rope)
    cache.append(k, v)
    out, lse = cache.attend(q, causal=True, return_lse=True)
    ref, ref_lse = posenc.attention(q, k, v, causal=True, encoding="rope", rope_config=rope, return_lse=True)
    np.testing.assert_allclose(out, ref, atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(lse, ref_lse, atol=2e-5, rtol=2e-5)


def test_layer_attention_config_splats_into_attend():
    """A real layer plan's kwargs (encoding "rope" with the layer's own RopeConfig) work on a cache built
    with it."""
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "hf_configs",
                        "gemma3__gemma-3-4b-it.json")
    layer = posenc.ModelPositions.from_hf(path).layers[0]
    D = layer.qk_head_dim
    cache = posenc.KVCache(1, 1, D, rope=layer.rope)
    k, v, q = randn(1, 6, 1, D, seed=9), randn(1, 6, 1, D, seed=10), randn(1, 6, 2, D, seed=11)
    cache.append(k, v)
    ours = cache.attend(q, **layer.attention_config())
    expected = posenc.attention(q, k, v, **layer.attention_config())
    np.testing.assert_allclose(ours, expected, atol=2e-5, rtol=2e-5)


def test_context_shift_equals_a_cache_filled_at_the_new_positions():
    B, T, Hkv, D, n = 1, 12, 2, 16, 5
    rope = posenc.rope_config(D, base=100.0)
    k, v = randn(B, T, Hkv, D, seed=12), randn(B, T, Hkv, D, seed=13)
    shifted = posenc.KVCache(B, Hkv, D, rope=rope)
    shifted.append(k, v)
    shifted.erase_front(n)
    shifted.shift_positions(-n)  # llama.cpp's context shift: the rest re-numbered from 0
    fresh = posenc.KVCache(B, Hkv, D, rope=rope)
    fresh.append(k[:, n:], v[:, n:])
    for a, b in zip(shifted.state(), fresh.state()):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)
    assert shifted.state()[2].tolist() == [list(range(T - n))]
    q = randn(B, 1, 4, D, seed=14)
    np.testing.assert_allclose(shifted.attend(q), fresh.attend(q), atol=2e-5, rtol=2e-5)


def test_rerotate_to_the_long_factors_of_longrope():
    D, orig = 16, 32
    scaling = {"rope_type": "longrope", "factor": 4.0, "original_max_position_embeddings": orig,
               "short_factor": [1.0 + 0.1 * j for j in range(D // 2)],
               "long_factor": [2.0 + 0.5 * j for j in range(D // 2)]}
    rope = posenc.rope_config(D, rope_scaling=scaling, max_position_embeddings=4 * orig)
    k, v = randn(1, 20, 1, D, seed=15), randn(1, 20, 1, D, seed=16)
    cache = posenc.KVCache(1, 1, D, rope=rope)
    cache.append(k, v)  # 20 < 32: rotated with the short factors
    short_keys = cache.state()[0]
    np.testing.assert_allclose(short_keys, posenc.rope(k, np.arange(20), config=rope, seq_len=20), atol=1e-5)
    cache.rerotate(20, 100)
    long_keys = posenc.rope(k, np.arange(20), config=rope, seq_len=100)
    np.testing.assert_allclose(cache.state()[0], long_keys, atol=1e-5, rtol=1e-5)
    assert not np.allclose(short_keys, long_keys, atol=1e-3)  # the switch changes the keys


def test_bad_use_is_named():
    rope = posenc.rope_config(8)
    cache = posenc.KVCache(1, 1, 8, rope=rope)
    q = randn(1, 1, 2, 8, seed=17)
    with pytest.raises(posenc.Error, match="empty cache"):
        cache.attend(q)
    cache.append(randn(1, 3, 1, 8, seed=18), randn(1, 3, 1, 8, seed=19))
    with pytest.raises(posenc.Error, match="cache's own"):
        cache.attend(q, encoding="rope", base=500.0)
    with pytest.raises(posenc.Error, match="cache's own"):
        cache.attend(q, encoding="rope", rope_config=posenc.rope_config(8))
    with pytest.raises(posenc.Error, match="k has shape"):
        cache.append(randn(1, 3, 2, 8, seed=20), randn(1, 3, 2, 8, seed=21))
    with pytest.raises(posenc.Error, match="rope"):
        posenc.KVCache(1, 1, 8, rope="rope")
    with pytest.raises(ValueError, match="batch"):
        posenc.KVCache(0, 1, 8)
    assert cache.size == 3  # nothing half-written
