"""The absolute encodings from Python in float16 / bfloat16 (ml_dtypes) storage."""
import ml_dtypes
import numpy as np
import pytest

import posenc


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_absolute_encodings_in_16bit_are_the_float32_ones_rounded_once(dtype):
    """posenc.sinusoidal / posenc.learned with dtype=float16 or bfloat16: the float32 result rounded once;
    learned_backward of a 16-bit grad: the float32 gradient of its values (tests/test_absolute_half.cc)."""
    pos = np.array([0, 1, 7, 1 << 20, 12345], np.int64)
    for layout, dim in (("interleaved", 16), ("split", 9)):
        got = posenc.sinusoidal(pos, dim, layout=layout, dtype=dtype)
        assert got.dtype == np.dtype(dtype)
        want = posenc.sinusoidal(pos, dim, layout=layout).astype(dtype)
        assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
    table = np.random.default_rng(2).standard_normal((20, 8)).astype(np.float32)
    rows = np.array([3, 0, 19, 3], np.int64)
    got = posenc.learned(table, rows, dtype=dtype)
    assert np.array_equal(got.view(np.uint16), table[rows].astype(dtype).view(np.uint16))
    grad = np.random.default_rng(3).standard_normal((4, 8)).astype(dtype)
    assert np.array_equal(posenc.learned_backward(grad, rows, 20),
                          posenc.learned_backward(grad.astype(np.float32), rows, 20))
    with pytest.raises(posenc.Error, match="dtype = 'int8' is invalid"):
        posenc.sinusoidal(pos, 8, dtype="int8")
