"""Property-based tests (hypothesis) of the bindings' validation: whatever the shapes, positions
and configurations, a call either succeeds with a well-formed result or raises posenc.Error (a
ValueError) whose message names the argument; nothing crashes and no other exception escapes."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import posenc

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
numbers = st.one_of(st.integers(-5, 300), st.floats(allow_nan=True, allow_infinity=True), st.none(),
                    st.text(max_size=3), st.booleans())


def raises_named(fn, *names):
    """Run fn; an error must be a posenc.Error naming one of `names`. Returns the result or None."""
    try:
        return fn()
    except posenc.Error as exc:
        assert isinstance(exc, ValueError)
        assert any(n in str(exc) for n in names), f"{exc!s} names none of {names}"
        return None


@SETTINGS
@given(dim=numbers, base=numbers, layout=st.sampled_from(["interleaved", "split", "spiral"]),
       positions=st.lists(st.integers(-2**40, 2**40), max_size=5))
def test_sinusoidal(dim, base, layout, positions):
    out = raises_named(lambda: posenc.sinusoidal(positions, dim, base, layout), "dim", "base", "layout",
                       "positions")
    if out is not None:
        assert out.shape == (len(positions), dim) and out.dtype == np.float32 and np.all(np.abs(out) <= 1.0)


ROPE_TYPES = ["linear", "dynamic", "yarn", "llama3", "longrope", "xpos"]


@SETTINGS
@given(B=st.integers(0, 2), T=st.integers(0, 4), H=st.integers(0, 2), D=st.integers(0, 9),
       rank=st.integers(2, 5), rotary_dim=st.one_of(st.none(), st.integers(-2, 12)),
       layout=st.sampled_from(["half", "interleaved", "neox"]),
       pos_shape=st.sampled_from(["T", "BT", "1", "scalar", "T+1"]),
       scaling=st.one_of(st.none(),
                         st.fixed_dictionaries({"rope_type": st.sampled_from(ROPE_TYPES), "factor": numbers}),
                         st.fixed_dictionaries({"type": st.sampled_from(["yarn", "linear"]),
                                                "factor": numbers,
                                                "original_max_position_embeddings": numbers})))
def test_rope(B, T, H, D, rank, rotary_dim, layout, pos_shape, scaling):
    x = np.zeros((B, T, H, D, 1)[:rank] if rank <= 5 else (B,), dtype=np.float32)
    positions = {"T": np.arange(T), "BT": np.zeros((B, T), int), "1": np.arange(1), "scalar": 3,
                 "T+1": np.arange(T + 1)}[pos_shape]
    out = raises_named(lambda: posenc.rope(x, positions, rotary_dim=rotary_dim, layout=layout,
                                           rope_scaling=scaling, max_position_embeddings=64),
                       "x", "positions", "rotary_dim", "layout", "rope_scaling", "factor", "head_dim",
                       "original_max_position_embeddings", "max_position_embeddings")
    if out is not None:
        assert out.shape == x.shape and np.all(np.isfinite(out))


@SETTINGS
@given(n_heads=numbers, alibi_bias_max=numbers, slopes=st.sampled_from(["bloom", "mpt", "gpt"]))
def test_alibi(n_heads, alibi_bias_max, slopes):
    out = raises_named(lambda: posenc.alibi_slopes(n_heads, slopes=slopes, alibi_bias_max=alibi_bias_max),
                       "n_heads", "alibi_bias_max", "slopes")
    if out is not None:
        assert out.shape == (n_heads,) and np.all((out > 0) & (out <= 1))


@SETTINGS
@given(num_buckets=numbers, max_distance=numbers, bidirectional=st.booleans(),
       rel=st.lists(st.integers(-2**40, 2**40), max_size=6))
def test_t5_buckets(num_buckets, max_distance, bidirectional, rel):
    out = raises_named(lambda: posenc.t5_buckets(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                                                 max_distance=max_distance),
                       "num_buckets", "max_distance", "relative_positions")
    if out is not None:
        assert out.shape == (len(rel),) and np.all((out >= 0) & (out < num_buckets))


@SETTINGS
@given(shapes=st.lists(st.tuples(st.integers(1, 2), st.integers(1, 5), st.integers(1, 4), st.integers(1, 9)),
                       min_size=3, max_size=3),
       encoding=st.sampled_from([None, "rope", "alibi", "t5", "relative", "shaw", "rope+alibi", "alibi+t5",
                                 "rope+rope", "sinusoidal"]),
       causal=st.booleans(), table_rows=st.integers(0, 40), scale=st.one_of(st.none(), numbers),
       window=st.integers(-1, 3), softcap=st.one_of(st.just(0.0), numbers), chunk=st.integers(-1, 4),
       sinks=st.one_of(st.none(), st.integers(0, 5)))
def test_attention(shapes, encoding, causal, table_rows, scale, window, softcap, chunk, sinks):
    q, k, v = (np.ones(s, dtype=np.float32) for s in shapes)
    params = {}
    if encoding in ("t5", "relative"):
        params["relative_table"] = np.zeros((table_rows, shapes[0][2]), dtype=np.float32)
    if encoding == "shaw":
        params["shaw_a_k"] = np.zeros((table_rows, shapes[0][3]), dtype=np.float32)
    if sinks is not None:
        params["sinks"] = np.zeros(sinks, dtype=np.float32)
    out = raises_named(lambda: posenc.attention(q, k, v, causal=causal, encoding=encoding, scale=scale,
                                                window=window, softcap=softcap, chunk=chunk, **params),
                       "q", "k", "v", "encoding", "relative_table", "shaw", "scale", "window", "max_distance",
                       "num_buckets", "heads", "head_dim", "rotary_dim", "softcap", "chunk", "sinks")
    if out is not None:
        assert out.shape == shapes[0][:3] + (shapes[2][3],) and np.all(np.isfinite(out))


@SETTINGS
@given(config=st.dictionaries(st.sampled_from(["head_dim", "hidden_size", "num_attention_heads", "rope_theta",
                                               "partial_rotary_factor", "max_position_embeddings",
                                               "rope_scaling"]), numbers, max_size=6))
def test_rope_config_from_hf(config):
    rc = raises_named(lambda: posenc.RopeConfig.from_hf(config), "config", "head_dim", "hidden_size",
                      "num_attention_heads", "rope_theta", "partial_rotary_factor", "max_position_embeddings",
                      "rope_scaling")
    if rc is not None:
        assert rc.head_dim > 0 and 0 < rc.effective_rotary_dim <= rc.head_dim and math.isfinite(rc.base)


def test_named_errors():
    x = np.zeros((1, 2, 1, 8), dtype=np.float32)
    for kwargs, name in [({"rotary_dim": 3}, "rotary_dim = 3"), ({"layout": "neox"}, "layout = 'neox'"),
                         ({"base": -1.0}, "base = -1.0"),
                         ({"rope_scaling": {"rope_type": "yarn"}}, "'factor'"),
                         ({"scaling": 2}, "scaling: unknown argument")]:
        with pytest.raises(ValueError, match=name):
            posenc.rope(x, [0, 1], **kwargs)
    with pytest.raises(ValueError, match="positions: rank 3"):
        posenc.rope(x, np.zeros((1, 1, 2), int))
    with pytest.raises(ValueError, match="table: contains non-finite"):
        posenc.learned(np.array([[np.nan]]), [0])
    with pytest.raises(ValueError, match="positions: dtype float64"):
        posenc.sinusoidal([0.5], 4)
    with pytest.raises(ValueError, match="config: cannot read"):
        posenc.RopeConfig.from_hf("/nonexistent/config.json")
    with pytest.raises(ValueError, match="relative_table: required"):
        posenc.attention(x, x, x, encoding="t5")
    # nothing is half-written: rope_ leaves x untouched when it rejects the call
    y = np.ones((1, 2, 1, 8), dtype=np.float32)
    with pytest.raises(ValueError):
        posenc.rope_(y, [0, 1], rotary_dim=3)
    assert np.all(y == 1)


def test_hypothesis_found_cases_are_errors_naming_the_argument():
    """Two cases hypothesis found: sinusoidal(base=5e-324) returned inf (1 / base overflows) and
    MPT slopes with alibi_bias_max = 1075 underflowed to 0 (2^-1075). Both are now errors naming
    the argument and its bound; the bounds themselves still work."""
    with pytest.raises(posenc.Error, match=r"base.*2\^-16"):
        posenc.sinusoidal([0, 1, 2], 8, base=5e-324)
    positions = np.random.default_rng(0).integers(-2**53, 2**53, 1000)
    for base in (2.0 ** -16, 2.0 ** 126):  # the bounds: every value in [-1, 1] up to position 2^53
        for frequencies in ("model_dim", "half_dim_minus_one"):
            table = posenc.sinusoidal(positions, 8, base=base, frequencies=frequencies)
            assert (np.abs(table) <= 1 + 1e-6).all()
    with pytest.raises(posenc.Error, match=r"alibi_bias_max.*126"):
        posenc.alibi_slopes(1, slopes="mpt", alibi_bias_max=1075)
    assert (posenc.alibi_slopes(4, slopes="mpt", alibi_bias_max=126) > 0).all()


def test_a_named_choice_given_an_array_is_an_error_naming_it():
    """encoding="alibi" takes slopes="bloom" | "mpt"; an array of slopes (a common guess) was compared
    element-wise and raised numpy's "truth value of an array is ambiguous" instead of naming slopes."""
    x = np.zeros((1, 2, 2, 4), np.float32)
    with pytest.raises(posenc.Error, match=r"slopes = array.*'bloom', 'mpt'"):
        posenc.attention(x, x, x, encoding="alibi", slopes=np.ones(2))
