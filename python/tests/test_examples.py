"""The examples of docs/python.md run as written (python/examples/)."""
import os
import runpy

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


@pytest.mark.parametrize("name", ["numpy_example.py", "torch_example.py"])
def test_example_runs(name, capsys):
    runpy.run_path(os.path.join(EXAMPLES, name), run_name="__main__")
    assert capsys.readouterr().out.strip()
