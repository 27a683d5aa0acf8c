"""posenc.attention on float16 and ml_dtypes bfloat16 arrays: read without a conversion copy, widened a tile
at a time inside the kernel and computed in fp32, so the result is bit for bit the float32 attention of the
same values rounded once to q's dtype (the C++ tests bound both against double precision,
tests/test_attention_half.cc). One exception: on CPUs with AVX512_BF16, bf16 queries and keys without RoPE
take q.k from vdpbf16ps (exact products, fp32 sums in another order), so there the sums may differ from the
float32 kernel's in their last bits: compared within fp32 summation error (D terms: D 2^-24 relative). With
posenc.set_bf16_dot_products(False) every case is bit for bit; both settings run here."""
import ml_dtypes
import numpy as np
import pytest

import posenc

DTYPES = [np.float16, ml_dtypes.bfloat16]


def randn(shape, dtype, seed):
    return np.random.default_rng(seed).uniform(-1.5, 1.5, shape).astype(np.float32).astype(dtype)


@pytest.fixture(params=[True, False], ids=["bf16_dot", "widening"])
def dot_products(request):
    """The bf16 dot-product path enabled (the default) or not, restored afterwards."""
    before = posenc.bf16_dot_products()
    posenc.set_bf16_dot_products(request.param)
    yield posenc.bf16_dot_products()
    posenc.set_bf16_dot_products(before)  # off on CPUs without it: the same as before


def test_the_dot_product_switch():
    before = posenc.bf16_dot_products()
    posenc.set_bf16_dot_products(False)
    assert not posenc.bf16_dot_products()
    try:
        with open("/proc/cpuinfo") as f:
            has_bf16 = " avx512_bf16" in f.read()
        posenc.set_bf16_dot_products(True)
        assert posenc.bf16_dot_products() == has_bf16
    except OSError:
        pytest.skip("no /proc/cpuinfo to tell whether the CPU has AVX512_BF16")
    finally:
        posenc.set_bf16_dot_products(before)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,options", [
    ((1, 70, 70, 4, 2, 32), {"causal": True, "encoding": "rope+alibi"}),          # prefill
    ((2, 1, 300, 8, 1, 32), {"causal": True, "encoding": "rope"}),                 # decode, multi-query
    ((1, 1, 4500, 8, 2, 16), {"causal": True, "softcap": 2.0, "window": 4000}),   # split decode
    ((1, 40, 40, 2, 1, 24), {"causal": True, "encoding": "rope", "rope_offset": 8, "layout": "interleaved"}),
])
def test_bit_for_bit_the_float32_attention_rounded_once(dtype, shape, options, dot_products):
    B, Q, K, H, Hkv, D = shape
    q, k, v = randn((B, Q, H, D), dtype, 1), randn((B, K, Hkv, D), dtype, 2), randn((B, K, Hkv, D), dtype, 3)
    out, lse = posenc.attention(q, k, v, return_lse=True, **options)
    assert out.dtype == q.dtype and lse.dtype == np.float32
    q32, k32, v32 = (x.astype(np.float32) for x in (q, k, v))
    ref, ref_lse = posenc.attention(q32, k32, v32, return_lse=True,
                                    **options)
    # float32 queries against a 16-bit cache: float32 out, the same numbers unrounded
    mixed = posenc.attention(q.astype(np.float32), k, v, **options)
    assert mixed.dtype == np.float32
    # bf16 q and k without RoPE: q.k by vdpbf16ps
    if dot_products and dtype is ml_dtypes.bfloat16 and "rope" not in options.get("encoding", ""):
        tol = dict(rtol=D * 2.0**-24 * 8, atol=1e-6)  # fp32 sums of D terms in another order, through softmax
        ref16 = ref.astype(dtype).astype(np.float32)
        assert np.allclose(out.astype(np.float32), ref16, rtol=2.0**-8, atol=1e-6)  # at most one bf16 step
        assert np.allclose(lse, ref_lse, **tol) and np.allclose(mixed, ref, **tol)
        return
    assert np.array_equal(out.view(np.uint16), ref.astype(dtype).view(np.uint16))
    assert np.array_equal(lse, ref_lse)
    assert np.array_equal(mixed, ref)


def test_round_probabilities_is_a_bf16_p_v_within_its_bound():
    """round_probabilities=True: each probability rounded once to bfloat16 before P V (AttentionConfig's
    bound: out within 2.02 * 2^-8 max|v| of the exact attention, before the out's own bf16 rounding);
    visible against the unrounded call; float16 k and v are refused by name."""
    B, T, H, Hkv, D = 1, 70, 4, 2, 32
    q, k, v = (randn(s, ml_dtypes.bfloat16, i) for i, s in ((1, (B, T, H, D)), (2, (B, T, Hkv, D)),
                                                            (3, (B, T, Hkv, D))))
    exact = posenc.attention(*(x.astype(np.float32) for x in (q, k, v)), causal=True, encoding="alibi")
    rounded = posenc.attention(q.astype(np.float32), k, v, causal=True, encoding="alibi",
                               round_probabilities=True)
    assert rounded.dtype == np.float32
    bound = 2.02 * 2.0**-8 * np.abs(v.astype(np.float32)).max() + 1e-5
    assert np.abs(rounded - exact).max() <= bound
    assert np.abs(rounded - exact).max() > 1e-5  # the rounding is there
    with pytest.raises(posenc.Error, match="round_probabilities = true needs bf16 keys and values"):
        posenc.attention(q.astype(np.float16), k.astype(np.float16), v.astype(np.float16),
                         round_probabilities=True)


def test_keys_and_values_share_a_dtype():
    q = randn((1, 4, 2, 8), np.float16, 4)
    with pytest.raises(posenc.Error, match="keys and values share one storage"):
        posenc.attention(q, q.astype(ml_dtypes.bfloat16), q, causal=True)
    out, lse = posenc.attention(q, q, q, causal=True, return_lse=True)
    with pytest.raises(posenc.Error, match="keys and values share one storage"):
        posenc.attention_backward(q, q, q.astype(ml_dtypes.bfloat16), out, lse, out, causal=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("options", [{"causal": True, "encoding": "rope+alibi"},
                                     {"causal": True, "softcap": 2.0, "encoding": "t5",
                                      "relative_table": np.linspace(-1, 1, 64,
                                                                    dtype=np.float32).reshape(32, 2)}])
def test_backward_gradients_are_the_float32_ones_rounded_once(dtype, options):
    """16-bit q, k, v, out, grad_out: the gradients come back in the inputs' dtypes, bit for bit the float32
    backward's on the same values rounded once; the tables' gradients stay float32, unrounded."""
    B, T, H, Hkv, D = 1, 37, 2, 1, 16
    q, k, v = randn((B, T, H, D), dtype, 5), randn((B, T, Hkv, D), dtype, 6), randn((B, T, Hkv, D), dtype, 7)
    out, lse = posenc.attention(q, k, v, return_lse=True, **options)
    grad_out = randn(out.shape, dtype, 8)
    grads = posenc.attention_backward(q, k, v, out, lse, grad_out, **options)
    wide = [x.astype(np.float32) for x in (q, k, v, out, grad_out)]
    ref = posenc.attention_backward(*wide[:4], lse, wide[4], **options)
    for name in ("q", "k", "v"):
        assert grads[name].dtype == dtype
        assert np.array_equal(grads[name].view(np.uint16), ref[name].astype(dtype).view(np.uint16)), name
    for name in set(grads) - {"q", "k", "v"}:
        assert grads[name].dtype == np.float32 and np.array_equal(grads[name], ref[name]), name


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_torch_16bit_attention_and_its_gradients(dtype):
    """posenc.torch.attention on float16 / bfloat16 tensors: out and the gradients of q, k, v in the tensors'
    dtype, bit for bit posenc.attention / attention_backward on the same 16-bit numpy arrays."""
    torch = pytest.importorskip("torch")
    import posenc.torch as pt
    tdtype = getattr(torch, dtype)
    np_dtype = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    g = torch.Generator().manual_seed(9)
    q, k, v = ((torch.rand(shape, generator=g) * 3 - 1.5).to(tdtype).requires_grad_()
               for shape in ((1, 21, 4, 16), (1, 21, 2, 16), (1, 21, 2, 16)))
    out = pt.attention(q, k, v, causal=True, encoding="alibi")
    assert out.dtype == tdtype
    grad = (torch.rand(out.shape, generator=g) - 0.5).to(tdtype)
    out.backward(grad)

    def as_np(t):
        t = t.detach()
        return t.numpy() if t.dtype == torch.float16 else t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)

    ref_out, lse = posenc.attention(as_np(q), as_np(k), as_np(v), causal=True, encoding="alibi",
                                    return_lse=True)
    assert np.array_equal(as_np(out).view(np.uint16), ref_out.view(np.uint16))
    ref = posenc.attention_backward(as_np(q), as_np(k), as_np(v), ref_out, lse, as_np(grad), causal=True,
                                    encoding="alibi")
    for name, t in (("q", q), ("k", k), ("v", v)):
        assert t.grad.dtype == tdtype
        assert np.array_equal(as_np(t.grad).view(np.uint16), ref[name].astype(np_dtype).view(np.uint16)), name
