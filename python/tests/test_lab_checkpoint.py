"""The lab's safetensors checkpoints read by the ecosystem's own reader (the safetensors package):
names, shapes, dtypes and the metadata (configuration, vocabulary). Needs the posenc CLI, whose
path scripts/test.sh passes in POSENC_CLI after building it."""
import json
import os
import subprocess

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file

CLI = os.environ.get("POSENC_CLI")


@pytest.mark.skipif(not CLI,
                    reason="POSENC_CLI (the built posenc binary) is not set; scripts/test.sh sets it")
def test_checkpoints_load_with_the_safetensors_package(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"one two three four {i}\n" for i in range(300)))
    subprocess.run([CLI, "lab", "--corpus", str(corpus), "--steps", "2", "--batch", "2", "--train-len", "8",
                    "--eval-lengths", "8,16", "--eval-tokens", "64", "--layers", "1", "--heads", "2", "--mlp",
                    "16", "--d-model", "16", "--progress", "none", "--encodings", "learned,t5", "--rope-eval",
                    "none", "--out", str(tmp_path / "lab"), "--save-checkpoints"],
                   check=True, capture_output=True)
    for name in ("learned", "t5"):
        path = str(tmp_path / "lab" / "checkpoints" / f"{name}-seed1.safetensors")
        with safe_open(path, framework="numpy") as f:
            meta = f.metadata()
        config = json.loads(meta["config"])
        tensors = load_file(path)
        V, C = len(meta["vocabulary"]), config["d_model"]
        assert config["vocab_size"] == V and tensors["wte.weight"].shape == (V, C)
        assert all(t.dtype == np.float32 and np.all(np.isfinite(t)) for t in tensors.values())
        if name == "learned":
            assert tensors["wpe.weight"].shape == (8, C)  # train_len rows
        else:
            assert tensors["layers.0.attn.relative_bias"].shape == (16, 2)  # 16 buckets x 2 heads
