#!/usr/bin/env python3
"""scripts/gpu_table.py OUT: the table of a scripts/gpu_check.sh run (Markdown), from its JSON lines.

Every posenc figure beside the copy bandwidth of the same run and the PyTorch anchors of the same shape.
"""
import json
import pathlib
import sys


def read(path):
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("{"):
            rows.append(json.loads(line))
    return rows


def main(out):
    out = pathlib.Path(out)
    device_file = out / "device.txt"
    lines = device_file.read_text().strip().splitlines() if device_file.exists() else []
    device = lines[-1] if lines else "?"
    posenc_rows = read(out / "bench_posenc.jsonl")
    torch_rows = read(out / "bench_torch.jsonl")
    anchors = {(r["op"], r.get("impl"), r["shape"]): r for r in torch_rows if "op" in r}
    print(f"device: {device}")
    print()
    print("| op | shape | dtype | posenc TB/s | of copy | torch eager | torch.compile | posenc / compile "
          "| posenc.torch / C++ |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in posenc_rows:
        if "tb_per_s" not in r or r["op"] == "attention_decode":
            continue
        bf16 = r["dtype"] == "bf16"
        eager, comp, from_python = (anchors.get((r["op"], impl, r["shape"])) if bf16 else None
                                    for impl in ("torch_eager", "torch_compile", "posenc_torch"))
        fmt = lambda a: f"{a['tb_per_s']:.2f}" if a else "-"  # noqa: E731
        ratio = f"{r['tb_per_s'] / comp['tb_per_s']:.2f}" if comp else "-"
        python_ratio = f"{from_python['tb_per_s'] / r['tb_per_s']:.2f}" if from_python else "-"
        print(f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['tb_per_s']:.2f} | {r['vs_copy']:.2f} | "
              f"{fmt(eager)} | {fmt(comp)} | {ratio} | {python_ratio} |")
    attention_table(posenc_rows, torch_rows)
    forward_backward_table(posenc_rows, torch_rows)
    return 0


def attention_table(posenc_rows, torch_rows):
    """posenc's attention forward beside the same run's matmul limit, its no-bias rate and the anchors."""
    rows = [r for r in posenc_rows if r.get("op") == "attention_forward"]
    if not rows:
        return
    matmul = next((r["tflops"] for r in torch_rows if r.get("op") == "matmul"), None)
    forward = [r for r in torch_rows if r.get("op") == "attention_forward" and "tflops" in r]
    flex = {(r["variant"], r["shape"]): r for r in forward if r.get("impl") == "flex"}
    print()
    print(f"matmul bf16 8192^3: {matmul:.0f} TFLOP/s" if matmul else "matmul: -")
    for shape in dict.fromkeys(r["shape"] for r in forward):
        sdpa = [f"{r['impl']}: {r['tflops']:.0f}" for r in forward
                if r["shape"] == shape and r.get("impl", "").startswith("sdpa")]
        if sdpa:
            print(f"{shape}: " + ", ".join(sdpa) + " TFLOP/s")
    print()
    print("| attention forward | shape | posenc TFLOP/s | of matmul | of posenc none | Flex TFLOP/s "
          "| posenc / Flex |")
    print("|---|---|---|---|---|---|---|")
    none = {r["shape"]: r["tflops"] for r in rows if r["variant"] == "none"}
    for r in rows:
        f = flex.get((r["variant"], r["shape"]))
        of_mm = f"{r['tflops'] / matmul:.2f}" if matmul else "-"
        of_none = f"{r['tflops'] / none[r['shape']]:.2f}" if r["shape"] in none else "-"
        flex_cell = f"{f['tflops']:.0f}" if f else "-"
        ratio = f"{r['tflops'] / f['tflops']:.2f}" if f else "-"
        print(f"| {r['variant']} | {r['shape']} | {r['tflops']:.0f} | {of_mm} | {of_none} | {flex_cell} "
              f"| {ratio} |")
    decode = [r for r in posenc_rows if r.get("op") == "attention_decode"]
    sdpa_decode = {r["shape"]: r for r in torch_rows if r.get("op") == "attention_decode" and "tb_per_s" in r}
    if decode:
        print()
        print("| decode | shape | posenc TB/s | SDPA TB/s | posenc / SDPA |")
        print("|---|---|---|---|---|")
        for r in decode:
            a = sdpa_decode.get(r["shape"])
            cells = (f"{a['tb_per_s']:.2f}", f"{r['tb_per_s'] / a['tb_per_s']:.2f}") if a else ("-", "-")
            print(f"| {r['variant']} | {r['shape']} | {r['tb_per_s']:.2f} | {cells[0]} | {cells[1]} |")


def forward_backward_table(posenc_rows, torch_rows):
    """A training step's attention (forward and backward) beside the same run's matmul and anchors."""
    rows = [r for r in posenc_rows if r.get("op") == "attention_forward_backward"]
    if not rows:
        return
    matmul = next((r["tflops"] for r in torch_rows if r.get("op") == "matmul"), None)
    anchors = [r for r in torch_rows if r.get("op") == "attention_forward_backward" and "tflops" in r]
    print()
    print("| attention forward + backward | shape | posenc TFLOP/s | of matmul | anchors, TFLOP/s |")
    print("|---|---|---|---|---|")
    for r in rows:
        same = [a for a in anchors if a["variant"] == r["variant"] and a["shape"] == r["shape"]]
        cells = ", ".join(f"{a['impl']} {a['tflops']:.0f}" for a in same) or "-"
        of_mm = f"{r['tflops'] / matmul:.2f}" if matmul else "-"
        print(f"| {r['variant']} | {r['shape']} | {r['tflops']:.0f} | {of_mm} | {cells} |")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
