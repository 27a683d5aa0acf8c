"""The numpy API against double-precision references (reference.py): values, layouts, odd sizes,
batch 1, length 1, gradients by finite differences, and zero-copy/in-place behaviour."""
import math

import numpy as np
import pytest

import posenc
import reference as ref

F32 = dict(rtol=1e-5, atol=2e-6)  # one fp32 rounding of O(1) values


@pytest.mark.parametrize("layout", ["interleaved", "split"])
@pytest.mark.parametrize("dim", [2, 6, 64])
def test_sinusoidal_matches_the_formula(layout, dim):
    pos = [0, 1, 7, 300, 4095]
    np.testing.assert_allclose(posenc.sinusoidal(pos, dim, layout=layout),
                               ref.sinusoidal(pos, dim, layout=layout), **F32)


def test_sinusoidal_stays_accurate_at_2_pow_20():
    pos = [2**20, 2**20 + 1]
    np.testing.assert_allclose(posenc.sinusoidal(pos, 16), ref.sinusoidal(pos, 16), atol=2e-6)


def test_binary_learned_and_its_backward(rng):
    np.testing.assert_array_equal(posenc.binary([0, 7, 8], 4), [[0, 0, 0, 0], [0, 1, 1, 1], [1, 0, 0, 0]])
    np.testing.assert_array_equal(posenc.binary([7], 4, signed=True), [[-1, 1, 1, 1]])
    table = rng.standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_array_equal(posenc.learned(table, [4, 0, 4]), table[[4, 0, 4]])
    grad = rng.standard_normal((3, 3)).astype(np.float32)
    expected = np.zeros((5, 3))
    np.add.at(expected, [4, 0, 4], grad)
    np.testing.assert_allclose(posenc.learned_backward(grad, [4, 0, 4], 5), expected, **F32)
    with pytest.raises(ValueError, match="position 5"):
        posenc.learned(table, [5])


ROPE_CASES = [
    # (B, T, H, D, rotary_dim, layout)
    (1, 1, 1, 2, None, "half"),
    (2, 5, 3, 10, None, "half"),
    (2, 5, 3, 10, None, "interleaved"),
    (1, 7, 2, 66, 32, "half"),  # partial rotary, head_dim not a multiple of any SIMD width
    (3, 4, 1, 128, 64, "interleaved"),
]


@pytest.mark.parametrize("B,T,H,D,rotary_dim,layout", ROPE_CASES)
def test_rope_matches_the_rotation(rng, B, T, H, D, rotary_dim, layout):
    x = rng.standard_normal((B, T, H, D)).astype(np.float32)
    pos = rng.integers(0, 5000, size=(B, T))
    R = rotary_dim or D
    inv_freq = [10000.0 ** (-2 * j / R) for j in range(R // 2)]
    out = posenc.rope(x, pos, rotary_dim=rotary_dim, layout=layout)
    np.testing.assert_allclose(out, ref.rope(x, pos, inv_freq, layout), rtol=1e-5, atol=1e-5)
    inv, factor = posenc.rope_inv_freq(D, rotary_dim=rotary_dim)
    np.testing.assert_allclose(inv, inv_freq, rtol=1e-15)
    assert factor == 1.0
    # in place: same values, same array
    y = x.copy()
    assert posenc.rope_(y, pos, rotary_dim=rotary_dim, layout=layout) is y
    np.testing.assert_array_equal(y, out)
    # backward is the adjoint: <rope(x), g> = <x, rope_backward(g)>
    g = rng.standard_normal(x.shape).astype(np.float32)
    gx = posenc.rope_backward(g, pos, rotary_dim=rotary_dim, layout=layout)
    assert math.isclose(np.sum(out.astype(np.float64) * g), np.sum(x.astype(np.float64) * gx), rel_tol=1e-4,
                        abs_tol=1e-3)


def test_rope_shared_positions_and_strided_input(rng):
    x = rng.standard_normal((2, 6, 4, 16)).astype(np.float32)
    pos = np.arange(3, 9)
    np.testing.assert_array_equal(posenc.rope(x, pos), posenc.rope(x, np.stack([pos, pos])))
    # a strided view (every other head) is read without a copy and gives the same result
    view = x[:, :, ::2, :]
    np.testing.assert_array_equal(posenc.rope(view, pos), posenc.rope(np.ascontiguousarray(view), pos))


def test_alibi_and_t5_and_relative_bias(rng):
    slopes = posenc.alibi_slopes(6)
    # 4 heads' ladder, then every other of 8's
    np.testing.assert_allclose(slopes[:4], [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8])
    np.testing.assert_allclose(slopes[4:], [2 ** -1, 2 ** -3])
    qp, kp = np.arange(3, 6), np.arange(6)
    bias = posenc.alibi_bias(6, qp, kp)
    np.testing.assert_allclose(bias, -slopes[:, None, None] * (qp[None, :, None] - kp[None, None, :]), **F32)
    sym = posenc.alibi_bias(6, qp, kp, causal=False)
    np.testing.assert_allclose(sym, -slopes[:, None, None] * np.abs(qp[None, :, None] - kp[None, None, :]),
                               **F32)
    table = rng.standard_normal((32, 3)).astype(np.float32)
    buckets = posenc.t5_buckets(kp[None, :] - qp[:, None])
    np.testing.assert_array_equal(posenc.t5_bias(table, qp, kp), table[buckets].transpose(2, 0, 1))
    clipped = rng.standard_normal((5, 3)).astype(np.float32)
    rows = np.clip(kp[None, :] - qp[:, None], -2, 2) + 2
    np.testing.assert_array_equal(posenc.relative_bias(clipped, qp, kp, max_distance=2),
                                  clipped[rows].transpose(2, 0, 1))
    grad = rng.standard_normal((3, 3, 6)).astype(np.float32)
    expected = np.zeros((32, 3))
    for h in range(3):
        np.add.at(expected[:, h], buckets, grad[h])
    np.testing.assert_allclose(posenc.relative_bias_backward(grad, qp, kp), expected, **F32)


def _attention_case(rng, encoding, B, Q, K, H, Hkv, D, causal):
    q = rng.standard_normal((B, Q, H, D)).astype(np.float32)
    k = rng.standard_normal((B, K, Hkv, D)).astype(np.float32)
    v = rng.standard_normal((B, K, Hkv, D)).astype(np.float32)
    params = {}
    if "t5" in encoding:
        params["relative_table"] = rng.standard_normal((32, H)).astype(np.float32)
    if "relative" in encoding:
        params["relative_table"] = rng.standard_normal((9, H)).astype(np.float32)
    if "shaw" in encoding:
        params["shaw_a_k"] = (0.3 * rng.standard_normal((7, D))).astype(np.float32)
        params["shaw_a_v"] = (0.3 * rng.standard_normal((7, D))).astype(np.float32)
    if "xl" in encoding:
        params["transformer_xl_u"] = (0.3 * rng.standard_normal((H, D))).astype(np.float32)
        params["transformer_xl_v"] = (0.3 * rng.standard_normal((H, D))).astype(np.float32)
        params["transformer_xl_w_r"] = (0.3 * rng.standard_normal((H * D, 12))).astype(np.float32)
    return q, k, v, params


def _xl_terms(q, k, qp, kp, u, v, w_r, base=10000.0):
    """Transformer-XL's (b) + (c) + (d) terms [B, H, Q, K] in double (Dai et al. 2019, eq. 4):
    (q_i + v_h) . W_R,h R_{q-k} + u_h . k_j, with R the split [sin | cos] sinusoid of q_pos - k_pos."""
    q, k, u, v, w_r = (np.asarray(a, dtype=np.float64) for a in (q, k, u, v, w_r))
    H, D, d_model = u.shape[0], u.shape[1], w_r.shape[1]
    delta = (qp[:, None] - kp[None, :]).astype(np.float64)
    w = base ** (-2.0 * np.arange(d_model // 2) / d_model)
    # [Q, K, d_model]
    R = np.concatenate([np.sin(delta[..., None] * w), np.cos(delta[..., None] * w)], axis=-1)
    W = w_r.reshape(H, D, d_model)
    k = np.repeat(k, H // k.shape[2], axis=2)  # grouped-query: head h reads key head h // (H / Hkv)
    return (np.einsum("bihd,hde,ije->bhij", q + v[None, None], W, R)
            + np.einsum("hd,bjhd->bhj", u, k)[:, :, None, :])


def _attention_reference(q, k, v, encoding, causal, params):
    B, Q, H, D = q.shape
    K = k.shape[1]
    qp, kp = np.arange(K - Q, K), np.arange(K)
    if "rope" in encoding:
        inv = [10000.0 ** (-2 * j / D) for j in range(D // 2)]
        q, k = ref.rope(q, qp, inv), ref.rope(k, kp, inv)
    bias = None
    if "alibi" in encoding:
        bias = posenc.alibi_bias(H, qp, kp, causal=causal).astype(np.float64)
    distance = kp[None, :] - qp[:, None]
    if "t5" in encoding:  # gathered in double (finite differences perturb the table by 1e-6)
        table = np.asarray(params["relative_table"], dtype=np.float64)
        bias = table[posenc.t5_buckets(distance, bidirectional=not causal)].transpose(2, 0, 1)
    if "relative" in encoding:
        table = np.asarray(params["relative_table"], dtype=np.float64)
        bias = table[np.clip(distance, -4, 4) + 4].transpose(2, 0, 1)
    extra = None
    if "xl" in encoding:
        extra = _xl_terms(q, k, qp, kp, params["transformer_xl_u"], params["transformer_xl_v"],
                          params["transformer_xl_w_r"])
    return ref.attention(q, k, v, causal, 1 / math.sqrt(D), bias, qp, kp, params.get("shaw_a_k"),
                         params.get("shaw_a_v"), extra)


ENCODINGS = [None, "rope", "alibi", "t5", "relative", "shaw", "transformer_xl", "rope+alibi", "rope+t5",
             "rope+shaw", "alibi+transformer_xl", "alibi+xl"]


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("B,Q,K,H,Hkv,D,causal",
                         [(1, 1, 1, 1, 1, 8, True), (2, 9, 9, 4, 2, 10, True), (1, 3, 70, 2, 2, 66, False)])
def test_attention_matches_materialised_softmax(rng, encoding, B, Q, K, H, Hkv, D, causal):
    q, k, v, params = _attention_case(rng, encoding or "", B, Q, K, H, Hkv, D, causal)
    out = posenc.attention(q, k, v, causal=causal, encoding=encoding, **params)
    expected = _attention_reference(q, k, v, encoding or "", causal, params)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_attention_accepts_the_earlier_transformer_xl_names(rng):
    q, k, v, params = _attention_case(rng, "transformer_xl", 1, 5, 5, 2, 2, 8, True)
    expected = posenc.attention(q, k, v, causal=True, encoding="transformer_xl", **params)
    old = {name.replace("transformer_xl_", "xl_"): value for name, value in params.items()}
    np.testing.assert_array_equal(posenc.attention(q, k, v, causal=True, encoding="xl", **old), expected)
    with pytest.raises(posenc.Error, match="given twice"):
        posenc.attention(q, k, v, causal=True, encoding="xl", xl_u=old["xl_u"], **params)


@pytest.mark.parametrize("encoding", ["rope+t5", "shaw", "alibi", "transformer_xl"])
def test_attention_backward_matches_finite_differences(rng, encoding):
    B, Q, K, H, Hkv, D, causal = 1, 4, 4, 2, 1, 6, True
    q, k, v, params = _attention_case(rng, encoding, B, Q, K, H, Hkv, D, causal)
    out, lse = posenc.attention(q, k, v, causal=causal, encoding=encoding, return_lse=True, **params)
    g = rng.standard_normal(out.shape)
    grads = posenc.attention_backward(q, k, v, out, lse, g.astype(np.float32), causal=causal,
                                      encoding=encoding, **params)
    inputs = {"q": q, "k": k, "v": v, **params}
    for name, value in inputs.items():
        def f(x, name=name):
            args = {**inputs, name: x}
            p = {key: args[key] for key in params}
            return _attention_reference(args["q"], args["k"], args["v"], encoding, causal, p)
        fd = ref.finite_difference(f, value, g)
        np.testing.assert_allclose(grads[name], fd, rtol=1e-3, atol=1e-4, err_msg=name)


def test_rotated_values_forward_and_backward_match_the_reference(rng):
    """rotate_values (DeepSeek-V4's K = V): values rotated like the keys, the output rotated back at the
    query's position, o_t = R(-t) sum_s p_ts R(s) v_s; the reference rotates in double with ref.rope, and
    attention_backward's gradients match central differences of it (GQA, causal, a partial rotation)."""
    B, Q, K, H, Hkv, D, R = 1, 5, 5, 2, 1, 8, 4
    q, k, v = (rng.standard_normal((B, n, h, D)).astype(np.float32) for n, h in ((Q, H), (K, Hkv), (K, Hkv)))
    inv_freq = 10000.0 ** (-np.arange(0, R, 2) / R)
    pos = np.arange(K)
    params = dict(causal=True, encoding="rope", base=10000.0, rotary_dim=R, rotate_values=True)

    def f(q_, k_, v_):
        rot = lambda x, p: ref.rope(x, p, inv_freq)  # noqa: E731
        out = ref.attention(rot(q_, pos), rot(k_, pos), rot(v_, pos), True, D ** -0.5)
        return rot(out, -pos)
    out, lse = posenc.attention(q, k, v, return_lse=True, **params)
    np.testing.assert_allclose(out, f(q, k, v), atol=2e-5)
    g = rng.standard_normal(out.shape)
    grads = posenc.attention_backward(q, k, v, out, lse, g.astype(np.float32), **params)
    fds = {"q": ref.finite_difference(lambda x: f(x, k, v), q, g),
           "k": ref.finite_difference(lambda x: f(q, x, v), k, g),
           "v": ref.finite_difference(lambda x: f(q, k, x), v, g)}
    for name, fd in fds.items():
        np.testing.assert_allclose(grads[name], fd, rtol=1e-3, atol=1e-4, err_msg=name)


def test_packed_sequences_do_not_attend_to_each_other(rng):
    # two sequences of 3 and 5 tokens packed in one batch row: each equals its own attention
    q, k, v = (rng.standard_normal((1, 8, 2, 8)).astype(np.float32) for _ in range(3))
    cu = np.array([0, 3, 8])
    packed = posenc.attention(q, k, v, causal=True, encoding="rope+alibi", cu_seqlens_q=cu, cu_seqlens_k=cu)
    for a, b in zip(cu[:-1], cu[1:]):
        alone = posenc.attention(q[:, a:b], k[:, a:b], v[:, a:b], causal=True, encoding="rope+alibi")
        np.testing.assert_allclose(packed[:, a:b], alone, rtol=1e-5, atol=1e-6)


SOFTCAP_SINKS_CHUNK = [
    # (B, Q, K, H, Hkv, D, causal, options)
    (1, 5, 5, 2, 1, 8, True, {"softcap": 1.5}),
    (2, 6, 6, 4, 2, 6, False, {"softcap": 0.7}),
    (1, 7, 7, 2, 2, 8, True, {"sinks": True}),
    (2, 3, 9, 4, 1, 8, True, {"sinks": True, "window": 4}),  # a decode-like tail of a KV cache
    (1, 9, 9, 2, 1, 8, True, {"chunk": 4}),
    (1, 9, 9, 2, 1, 8, False, {"chunk": 3}),
    (2, 8, 8, 2, 1, 4, True, {"softcap": 2.0, "sinks": True, "chunk": 3}),
]


@pytest.mark.parametrize("B,Q,K,H,Hkv,D,causal,options", SOFTCAP_SINKS_CHUNK)
def test_attention_softcap_sinks_chunk_match_the_reference(rng, B, Q, K, H, Hkv, D, causal, options):
    q, k, v = (rng.standard_normal((B, n, h,
                                    D)).astype(np.float32) * 2 for n, h in ((Q, H), (K, Hkv), (K, Hkv)))
    options = dict(options)
    if options.pop("sinks", False):
        options["sinks"] = rng.standard_normal(H).astype(np.float32)
    out = posenc.attention(q, k, v, causal=causal, **options)
    np.testing.assert_allclose(out, ref.attention(q, k, v, causal, 1 / math.sqrt(D), **options), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("options", [{"softcap": 1.2, "sinks": True}, {"sinks": True, "chunk": 2}])
def test_sink_and_softcap_gradients_match_finite_differences(rng, options):
    B, Q, K, H, Hkv, D = 1, 4, 5, 2, 1, 6
    q, k, v = (rng.standard_normal((B, n, h, D)).astype(np.float32) for n, h in ((Q, H), (K, Hkv), (K, Hkv)))
    sinks = rng.standard_normal(H).astype(np.float32)
    options = {key: value for key, value in options.items() if key != "sinks"}
    out, lse = posenc.attention(q, k, v, causal=True, sinks=sinks, return_lse=True, **options)
    g = rng.standard_normal(out.shape)
    grads = posenc.attention_backward(q, k, v, out, lse, g.astype(np.float32), causal=True, sinks=sinks,
                                      **options)
    inputs = {"q": q, "k": k, "v": v, "sinks": sinks}
    for name, value in inputs.items():
        def f(x, name=name):
            args = {**inputs, name: x}
            return ref.attention(args["q"], args["k"], args["v"], True, 1 / math.sqrt(D), sinks=args["sinks"],
                                 **options)
        np.testing.assert_allclose(grads[name], ref.finite_difference(f, value, g), rtol=1e-3, atol=1e-4,
                                   err_msg=name)


def test_softcap_sinks_chunk_bad_values_are_named(rng):
    q = rng.standard_normal((1, 3, 2, 4)).astype(np.float32)
    for kwargs, name in (({"softcap": -1.0}, "softcap"), ({"softcap": float("nan")}, "softcap"),
                         ({"chunk": -2}, "chunk"), ({"chunk": 1.5}, "chunk"),
                         ({"sinks": np.zeros(3)}, "sinks"), ({"sinks": np.zeros((2, 1))}, "sinks"),
                         ({"sinks": np.array([0.0, np.inf])}, "sinks")):
        with pytest.raises(ValueError, match=name):
            posenc.attention(q, q, q, **kwargs)
