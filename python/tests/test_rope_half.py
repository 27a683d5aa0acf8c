"""RoPE on 16-bit storage from Python: numpy float16 and ml_dtypes' bfloat16 arrays, torch float16 and
bfloat16 tensors, kept in their dtype (no conversion copy) and rounded once: bit for bit the float32
rotation of the same values rounded to the dtype (the C++ tests bound that against double precision,
tests/test_rope_half.cc); autograd's gradients come back in the input's dtype."""
import ml_dtypes
import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt

DTYPES = [np.float16, ml_dtypes.bfloat16]
SCALING = [{}, {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
                "max_position_embeddings": 256},
           {"layout": "interleaved", "rotary_dim": 24}]


def inputs(dtype, shape=(2, 7, 3, 32), seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kwargs", SCALING)
def test_rounded_once_bit_for_bit(dtype, kwargs):
    x = inputs(dtype)
    pos = np.array([[0, 1, 2, 3, 4, 5, 6], [1000, 1001, 1002, 1003, 1004, 1005, 1 << 20]])
    out = posenc.rope(x, pos, **kwargs)
    assert out.dtype == x.dtype and out.shape == x.shape
    # numpy and ml_dtypes round to nearest even
    expected = posenc.rope(x.astype(np.float32), pos, **kwargs).astype(dtype)
    assert np.array_equal(out.view(np.uint16), expected.view(np.uint16))
    back = posenc.rope_backward(out, pos, **kwargs)
    assert back.dtype == x.dtype
    expected_back = posenc.rope_backward(out.astype(np.float32), pos, **kwargs).astype(dtype)
    assert np.array_equal(back.view(np.uint16), expected_back.view(np.uint16))
    y = x.copy()
    assert posenc.rope_(y, pos, **kwargs) is y
    assert np.array_equal(y.view(np.uint16), out.view(np.uint16))


def test_strided_16_bit_views_are_used_in_place():
    fused = inputs(ml_dtypes.bfloat16, (1, 5, 3, 2, 16))  # (B, T, qkv, H, D)
    q = fused[:, :, 0]
    before = fused.copy()
    posenc.rope_(q, np.arange(5))
    expected = posenc.rope(before[:, :, 0], np.arange(5))
    assert np.array_equal(fused[:, :, 0].view(np.uint16), expected.view(np.uint16))
    assert np.array_equal(fused[:, :, 1:].view(np.uint16), before[:, :, 1:].view(np.uint16))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_torch_16_bit_tensors_and_gradients(dtype):
    g = torch.Generator().manual_seed(3)
    x = (torch.rand(2, 6, 2, 16, generator=g) * 4 - 2).to(dtype).requires_grad_()
    pos = torch.arange(6)
    out = pt.rope(x, pos, base=500.0)
    assert out.dtype == dtype
    np_dtype = np.float16 if dtype == torch.float16 else ml_dtypes.bfloat16
    x_np = x.detach().float().numpy().astype(np_dtype)
    expected = posenc.rope(x_np, pos.numpy(), base=500.0).astype(np.float32)
    assert torch.equal(out.detach().float(), torch.from_numpy(expected))
    grad_out = (torch.rand(out.shape, generator=g) - 0.5).to(dtype)
    (gx,) = torch.autograd.grad(out, x, grad_out)
    assert gx.dtype == dtype
    expected = posenc.rope_backward(grad_out.float().numpy().astype(np_dtype), pos.numpy(), base=500.0)
    assert torch.equal(gx.float(), torch.from_numpy(expected.astype(np.float32)))


def test_other_dtypes_still_compute_in_float32():
    x = inputs(np.float64)
    assert posenc.rope(x, np.arange(7)).dtype == np.float32
    with pytest.raises(posenc.Error, match="rope_ needs a writable float32, float16 or bfloat16"):
        posenc.rope_(x, np.arange(7))

