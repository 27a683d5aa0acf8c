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
    print("| op | shape | dtype | posenc TB/s | of copy | torch eager | torch.compile | posenc / compile |")
    print("|---|---|---|---|---|---|---|---|")
    for r in posenc_rows:
        eager = anchors.get((r["op"], "torch_eager", r["shape"])) if r["dtype"] == "bf16" else None
        comp = anchors.get((r["op"], "torch_compile", r["shape"])) if r["dtype"] == "bf16" else None
        fmt = lambda a: f"{a['tb_per_s']:.2f}" if a else "-"  # noqa: E731
        ratio = f"{r['tb_per_s'] / comp['tb_per_s']:.2f}" if comp else "-"
        print(f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['tb_per_s']:.2f} | {r['vs_copy']:.2f} | "
              f"{fmt(eager)} | {fmt(comp)} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
