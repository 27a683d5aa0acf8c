"""posenc.set_num_threads / num_threads: the pool of the CPU kernels (include/posenc/threads.h).
Results are bitwise the same for any thread count; bad counts are refused by name."""

import numpy as np
import pytest

import posenc


@pytest.fixture
def restore_threads():
    yield
    posenc.set_num_threads(0)


def test_results_do_not_depend_on_the_thread_count(restore_threads):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 300, 4, 32), dtype=np.float32)
    k = rng.standard_normal((2, 300, 2, 32), dtype=np.float32)
    v = rng.standard_normal((2, 300, 2, 32), dtype=np.float32)
    runs = []
    for threads in (1, 3):
        posenc.set_num_threads(threads)
        assert posenc.num_threads() == threads
        out, lse = posenc.attention(q, k, v, causal=True, encoding="rope", return_lse=True)
        runs.append((out, lse, posenc.rope(q, np.arange(300))))
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n", [-1, 1025])
def test_bad_thread_counts_are_refused(n, restore_threads):
    with pytest.raises(posenc.Error, match=f"set_num_threads: n = {n} is invalid"):
        posenc.set_num_threads(n)
