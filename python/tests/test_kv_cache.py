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


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("inputs_16bit", [False, True])
def test_a_16bit_cache_stores_the_rounded_fp32_cache_and_reads_it(dtype, inputs_16bit):
    """A float16 / bfloat16 cache holds the fp32 cache's rotated keys and values rounded once, and attends
    as posenc.attention over exactly those numbers; out comes back in q's dtype."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    storage = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(np.float16)
    B, T, H, Hkv, D = 2, 19, 4, 2, 16
    rope = posenc.rope_config(D, base=500.0)
    q, k, v = randn(B, T, H, D, seed=11), randn(B, T, Hkv, D, seed=12), randn(B, T, Hkv, D, seed=13)
    if inputs_16bit:
        k, v = k.astype(storage), v.astype(storage)
    half = posenc.KVCache(B, Hkv, D, rope=rope, dtype=dtype)
    full = posenc.KVCache(B, Hkv, D, rope=rope)
    assert half.dtype == storage
    for t0, n in ((0, 5), (5, 1), (6, 13)):
        half.append(k[:, t0:t0 + n], v[:, t0:t0 + n])
        full.append(k[:, t0:t0 + n].astype(np.float32), v[:, t0:t0 + n].astype(np.float32))
        keys16, values16, pos = half.state()
        keys32, values32, _ = full.state()
        assert keys16.dtype == storage and values16.dtype == storage
        np.testing.assert_array_equal(keys16.view(np.uint16), keys32.astype(storage).view(np.uint16))
        np.testing.assert_array_equal(values16.view(np.uint16), values32.astype(storage).view(np.uint16))
        out = half.attend(q[:, t0:t0 + n], causal=True, encoding="alibi")
        assert out.dtype == np.float32
        # the same attention over the stored numbers: q rotated by the same rope, keys already rotated
        q_rot = posenc.rope(q[:, t0:t0 + n], pos[:, -n:], config=rope)
        expected = posenc.attention(q_rot, keys16.astype(np.float32), values16.astype(np.float32),
                                    causal=True, encoding="alibi", q_positions=pos[:, -n:], k_positions=pos)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
        out16 = half.attend(q[:, t0:t0 + n].astype(storage), causal=True)
        assert out16.dtype == storage


def test_16bit_cache_bad_dtypes_are_named():
    pytest.importorskip("ml_dtypes")
    with pytest.raises(posenc.Error,
                       match="dtype = 'int8' is invalid: expected float32, float16 or bfloat16"):
        posenc.KVCache(1, 1, 8, dtype="int8")
    cache = posenc.KVCache(1, 1, 8, dtype=np.float16)
    x = np.zeros((1, 2, 1, 8), np.float32)
    with pytest.raises(posenc.Error, match="k: dtype bfloat16 is invalid for a float16 cache"):
        import ml_dtypes
        cache.append(x.astype(ml_dtypes.bfloat16), x.astype(ml_dtypes.bfloat16))
    with pytest.raises(posenc.Error, match="v: dtype float16 differs from k's float32"):
        cache.append(x, x.astype(np.float16))
    assert cache.size == 0
