"""Shared pytest setup: the tests import the installed package (pip install .), never the source
tree, so they test what users get."""
import os
import sys

# PyTorch's OpenMP workers spin for a while after each parallel region before they sleep. pytest runs on
# both cores (-n 2), each worker with its own OpenMP threads, so the spinning took the cores the other
# worker needed: a third of the CPU time of the tests that run torch at its default thread count. Read
# when torch loads libgomp, after this file; posenc's own pool has no OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))  # reference.py

import posenc  # noqa: E402

_SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "posenc"))
if os.path.dirname(os.path.abspath(posenc.__file__)).startswith(_SOURCE):
    raise RuntimeError("tests must run against the installed posenc (pip install .), not python/posenc")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
