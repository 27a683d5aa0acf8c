"""Shared pytest setup: the tests import the installed package (pip install .), never the source
tree, so they test what users get."""
import os
import sys

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
