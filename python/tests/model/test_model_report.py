"""ModelPositions.to_json / .table and `python -m posenc inspect` (posenc/model_report.h): the same text as
the C++ CLI's `posenc inspect`, from real config.json files (tests/data/hf_configs), its values those of
the plan's own layers, errors on stderr with exit status 2."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import posenc
from hf_oracle import HF_CONFIGS

DATA = HF_CONFIGS


def path(name):
    return os.path.join(DATA, name + ".json")


def run(*args):
    return subprocess.run([sys.executable, "-m", "posenc", *args], capture_output=True, text=True)


@pytest.mark.parametrize("name", ["gemma3__gemma-3-27b-it", "deepseek-v3__DeepSeek-V3",
                                  "phi3__Phi-3-mini-128k-instruct", "llama4__Llama-4-Scout-17B-16E-Instruct",
                                  "t5__t5-small"])
@pytest.mark.parametrize("seq_len", [None, 4096])
def test_to_json_carries_every_layer_with_the_plans_values(name, seq_len):
    m = posenc.ModelPositions.from_hf(path(name), warn=False)
    doc = m.to_json(seq_len)
    assert doc["model_type"] == m.model_type and doc["num_layers"] == m.num_layers == len(doc["layers"])
    assert doc["seq_len"] == (seq_len or m.max_position_embeddings)
    assert doc["warnings"] == list(m.warnings)
    for layer, entry in zip(m.layers, doc["layers"]):
        assert entry["layer"] == layer.layer and entry["position"] == layer.position
        if layer.position == "rope":
            inv_freq, factor = layer.inv_freq(doc["seq_len"])
            np.testing.assert_array_equal(entry["rope"]["inv_freq"], inv_freq)
            assert entry["rope"]["attention_factor"] == factor
            assert tuple(entry["rope"]["rotary_dims"]) == tuple(layer.rotary_dims)
            assert entry["rope"]["layout"] == layer.rope.layout
        else:
            assert entry["rope"] is None
        attn = layer.attention_config()
        assert entry["attention"]["causal"] == attn["causal"]
        assert entry["attention"]["window"] == (attn["window"] or None)
        assert entry["attention"]["chunk"] == (attn["chunk"] or None)
        assert entry["attention"]["softmax_scale"] == pytest.approx(attn["scale"], rel=1e-12)


def test_python_m_posenc_inspect_prints_the_reports():
    name = "gemma3__gemma-3-27b-it"
    m = posenc.ModelPositions.from_hf(path(name), warn=False)
    table = run("inspect", path(name), "--seq-len", "4096")
    assert table.returncode == 0, table.stderr
    assert table.stdout == m.table(4096)
    assert "layers 5, 11, 17, 23, 29, 35, 41, 47, 53, 59: full_attention, rope linear" in table.stdout
    assert all(f"posenc: warning: {w}" in table.stderr for w in m.warnings)
    doc = run("inspect", path(name), "--format", "json")
    assert doc.returncode == 0, doc.stderr
    assert json.loads(doc.stdout) == m.to_json()


def test_python_m_posenc_inspect_errors(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "no_such_model"}')
    out = run("inspect", str(bad))
    assert out.returncode == 2 and out.stdout == ""
    assert "posenc: error:" in out.stderr and "'no_such_model'" in out.stderr
    out = run("inspect", path("t5__t5-small"), "--seq-len", "-3")
    assert out.returncode == 2 and "--seq-len = -3 is invalid" in out.stderr
    with pytest.raises(posenc.Error, match="seq_len"):
        posenc.ModelPositions.from_hf(path("t5__t5-small"), warn=False).to_json(-1)
