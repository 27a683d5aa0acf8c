"""BENCHMARKS.md is generated from the recorded runs in bench/results/ by scripts/benchmarks_md.py: the
committed file is exactly the generator's output, the records are checked, and a GPU run (the output of
scripts/gpu_check.sh) is recorded with its device, its copy limit and its PyTorch anchors."""
import importlib.util
import json
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def generator():
    spec = importlib.util.spec_from_file_location("benchmarks_md", ROOT / "scripts" / "benchmarks_md.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmarks_md_is_the_generators_output():
    gen = generator()
    want = gen.render(*gen.load())
    assert (ROOT / "BENCHMARKS.md").read_text() == want, \
        "BENCHMARKS.md differs from bench/results/*.json: run python3 scripts/benchmarks_md.py"


def test_every_recorded_figure_is_in_its_kernels_table():
    gen = generator()
    machines, runs = gen.load()
    text = gen.render(machines, runs)
    assert runs and all(run["results"] for _, run in runs)
    for rid, run in runs:
        assert f'<a id="{rid}"></a>' in text
        for res in run["results"]:
            assert gen.cell(gen.figure(res)) in text, (rid, res["case"])


def test_a_record_with_an_unknown_kernel_is_refused_by_file_and_field(tmp_path):
    gen = generator()
    shutil.copy(ROOT / "bench" / "results" / "machines.json", tmp_path)
    run = {"date": "2026-01-01", "machine": "epyc-zen4-2", "title": "t", "command": ["c"], "method": "m",
           "results": [{"kernel": "rope_typo", "case": "x", "value": 1.0, "unit": "GB/s"}]}
    (tmp_path / "2026-01-01-1-bad.json").write_text(json.dumps(run))
    with pytest.raises(gen.Invalid, match=r"2026-01-01-1-bad.json: results\[0\]: kernel = 'rope_typo'"):
        gen.load(tmp_path)


def test_a_gpu_check_run_is_recorded_with_device_copy_and_anchors(tmp_path):
    gen = generator()
    results = tmp_path / "results"
    results.mkdir()
    (results / "machines.json").write_text(json.dumps(
        {"h200": {"gpu": "NVIDIA H200 (141 GB HBM3e)", "cpu": "16 vCPUs"}}))
    out = tmp_path / "gpu_out"
    out.mkdir()
    (out / "device.txt").write_text("NVIDIA H200, 590.48, 143771 MiB\n")
    (out / "bench_posenc.jsonl").write_text(json.dumps(
        {"op": "rope_qk_forward", "shape": "B1 T32768 H32/8 D128", "dtype": "bf16", "tb_per_s": 3.5,
         "vs_copy": 0.81}) + "\n")
    (out / "bench_torch.jsonl").write_text("\n".join(json.dumps(r) for r in (
        {"device": "NVIDIA H200", "torch": "2.11"},
        {"op": "rope_qk_forward", "impl": "torch_eager", "shape": "B1 T32768 H32/8 D128", "tb_per_s": 1.25},
        {"op": "rope_qk_forward", "impl": "torch_compile", "shape": "B1 T32768 H32/8 D128", "tb_per_s": 2.5},
    )) + "\n")
    assert gen.main(["import-gpu", str(out), "--id", "2026-01-02-1-h200", "--date", "2026-01-02",
                     "--machine", "h200", "--results", str(results)]) == 0
    text = gen.render(*gen.load(results))
    assert "## CUDA kernels" in text and "NVIDIA H200 (141 GB HBM3e)" in text
    row = next(line for line in text.splitlines() if line.startswith("| [2026-01-02 #1]"))
    assert "3.5 TB/s" in row and "| 0.81 |" in row
    assert "torch eager: 1.25 TB/s" in row and "torch.compile: 2.5 TB/s" in row


def test_a_gpu_attention_run_is_recorded_with_the_matmul_limit_and_anchors(tmp_path):
    gen = generator()
    results = tmp_path / "results"
    results.mkdir()
    (results / "machines.json").write_text(json.dumps({"h200": {"gpu": "NVIDIA H200", "cpu": "16 vCPUs"}}))
    out = tmp_path / "gpu_out"
    out.mkdir()
    shape = "B4 H32 S4096 D128 causal"
    (out / "bench_posenc.jsonl").write_text("\n".join(json.dumps(r) for r in (
        {"op": "attention_forward", "variant": "t5", "shape": shape, "dtype": "bf16", "ms": 2.0,
         "tflops": 300.0},
        {"op": "attention_decode", "variant": "none", "shape": "B1 K32768 H32/8 D128", "dtype": "bf16",
         "ms": 0.05, "tb_per_s": 3.1},
        {"op": "attention_forward_backward", "variant": "t5", "shape": shape, "dtype": "bf16", "ms": 9.0,
         "tflops": 250.0},
    )) + "\n")
    (out / "bench_torch.jsonl").write_text("\n".join(json.dumps(r) for r in (
        {"op": "matmul", "impl": "torch", "shape": "8192^3", "dtype": "bf16", "tflops": 700.0},
        {"op": "attention_forward", "impl": "flex", "variant": "t5", "shape": shape, "tflops": 63.0},
        {"op": "attention_forward_backward", "impl": "flex", "variant": "t5", "shape": shape, "tflops": 67.0},
        {"op": "attention_forward", "impl": "flex", "variant": "t5",
         "shape": "B4 H32 S4096 D256 Dv256 causal", "error": "out of resource"},
        {"op": "attention_decode", "impl": "sdpa", "variant": "none", "shape": "B1 K32768 H32/8 D128",
         "tb_per_s": 2.7},
    )) + "\n")
    assert gen.main(["import-gpu", str(out), "--id", "2026-01-03-1-h200", "--date", "2026-01-03",
                     "--machine", "h200", "--results", str(results)]) == 0
    text = gen.render(*gen.load(results))
    row = next(line for line in text.splitlines() if "attention forward t5" in line)
    assert "300.0 TFLOP/s" in row and "bf16 matmul 8192^3: 700.0 TFLOP/s" in row
    assert "flex: 63.0 TFLOP/s" in row and "67.0" not in row
    assert "| 0.429 |" in row
    step = next(line for line in text.splitlines() if "attention forward + backward t5" in line)
    assert "250.0 TFLOP/s" in step and "flex: 67.0 TFLOP/s" in step and "63.0" not in step
    decode = next(line for line in text.splitlines() if "attention decode" in line)
    assert "3.1 TB/s" in decode and "SDPA: 2.7 TB/s" in decode
