#!/usr/bin/env python3
"""scripts/benchmarks_md.py: BENCHMARKS.md from the recorded runs in bench/results/.

    python3 scripts/benchmarks_md.py            writes BENCHMARKS.md
    python3 scripts/benchmarks_md.py --check    exits 1 if BENCHMARKS.md differs from what it would write
    python3 scripts/benchmarks_md.py import-gpu OUT --id ID --date YYYY-MM-DD --machine NAME
                                                writes bench/results/ID.json from a scripts/gpu_check.sh
                                                output folder (device.txt, bench_posenc.jsonl,
                                                bench_torch.jsonl); the machine (its "gpu" and "cpu")
                                                goes into bench/results/machines.json first

One JSON file per recorded run (bench/results/<date>-<n>-<name>.json; machines in machines.json):
  date, machine (a key of machines.json), title, command (list of command lines), method,
  optional build, threads, conditions, limits (same-run limits: name, value, unit), notes (list of
  strings), and results: one object per figure with
    kernel   the section it belongs to (KERNELS below)
    case     what was measured (shape, dtype, threads)
    variant  optional: which of two implementations compared in the same run
    value + unit, or figure (a recorded figure as written: a range, "a vs b"); value may be a list, one
             entry per repeated run; time and rate optional
    limit    optional: the same run's limit (name, value, unit); ratio: figure / limit as recorded
    anchors  optional: other implementations timed in the same run (name, value, unit)
    note     optional
Each kernel's table lists its figures newest run first. Edit the JSON, never BENCHMARKS.md.
"""
import json
import pathlib
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
OUTPUT = ROOT / "BENCHMARKS.md"

# (key, heading, what the figures are and what they are held against), in the order of the document.
KERNELS = [
    ("gpu", "CUDA kernels",
     "`bench/cuda` on one GPU (`scripts/gpu_check.sh`, table by `scripts/gpu_table.py`): TB/s of the bytes "
     "read and written, against a device-to-device copy of the same bytes and PyTorch's eager and "
     "`torch.compile` versions of the same operation, all timed in the same run."),
    ("attention_forward", "Attention prefill (forward)",
     "`bench_attention` (and `posenc attention`): the fused forward, GFLOP/s of 4·S²·D·heads (halved when "
     "causal), against the same run's fp32 FMA peak (`BM_compute_peak`), its `vdpbf16ps` peak for bf16, or "
     "an OpenBLAS sgemm of the QKᵀ shape on the same threads."),
    ("decode", "Decode against a KV cache",
     "`bench_kv_cache` and `bench_attention`: one new token against a long cache. A step reads every cached "
     "key and value once: its limit is a same-run memcpy of the same bytes or, fairer, a same-run read of "
     "them (`vs_read`); a 16-bit cache is also held against the fp32 cache of the same run."),
    ("attention_backward", "Attention backward",
     "`bench_attention` (and `posenc attention --backward`): GFLOP/s of 2.5× the forward's FLOP (the five "
     "products of FlashAttention-2), against the same run's sgemm or FMA peak."),
    ("rope", "RoPE",
     "`bench_rope`: q and k rotated in place, against a same-run memcpy of the same bytes (or an in-place "
     "pass over them, `vs_in_place`)."),
    ("mla", "Multi-head latent attention",
     "`bench_attention`'s DeepSeek MLA shapes (FLOP = Q·K·H·(D + Dv)), against the same run's sgemm, FMA "
     "peak or memcpy."),
    ("bias", "Bias blocks",
     "`bench_bias`: one head's S×S bias block written out, against a same-run memcpy of the same bytes."),
    ("absolute", "Absolute tables", "`bench_absolute`: the table written out, against a same-run memcpy."),
    ("lab", "The lab's training step",
     "`bench_lab`: one forward, backward and AdamW step of `posenc lab`'s model (the default small scale "
     "and `--scale medium`), its matrix products against the same run's sgemm and FMA peak, its attention "
     "against posenc's; `bench/lab_vs_torch.py` times PyTorch's step on the same model and threads as the "
     "anchor."),
    ("shared", "A shared machine",
     "`scripts/bench_shared.sh`: each workload beside one busy process, against the same workload alone in "
     "the same run."),
    ("ggml", "Against ggml",
     "`scripts/bench_ggml.sh`: the same operation in ggml, on the same input bits, layout and threads, in "
     "the same run."),
    ("attention_memory", "Attention peak memory",
     "`bench_attention`: the process's peak RSS after one forward, against the bytes of q, k, v and out."),
]
KERNEL_KEYS = {k for k, _, _ in KERNELS}
INTRO = ("Every figure stands beside a limit measured in the same run on the same machine: a `memcpy` or a "
         "read of the same bytes for the bandwidth-bound kernels, the FMA peak (`BM_compute_peak`, 12 "
         "independent accumulators per thread) or an sgemm of the same shape for the compute-bound ones, "
         "another implementation (ggml, PyTorch) as an anchor. Compare the ratios, not the raw rates: the "
         "rates of the virtual machines below drift by ±30% from one minute to the next. Each table lists "
         "the newest run first; a run's build, method, conditions and findings are under [Runs](#runs).")
RECORDING = ("A new run is recorded as one JSON file in `bench/results/` (its fields: "
             "`scripts/benchmarks_md.py`); `python3 scripts/benchmarks_md.py import-gpu OUT --id ID --date "
             "DATE --machine NAME` records a `scripts/gpu_check.sh` run.")
RUN_KEYS = {"date", "machine", "title", "command", "method", "build", "threads", "conditions", "limits",
            "notes", "results"}
RESULT_KEYS = {"kernel", "case", "variant", "value", "unit", "figure", "time", "rate", "limit", "ratio",
               "anchors", "note"}
MACHINE_KEYS = {"cpu", "gpu", "memory", "os"}


class Invalid(Exception):
    pass


def fmt(x):
    if isinstance(x, list):
        return " / ".join(fmt(v) for v in x)
    return str(x)


def check_quantity(where, q, need_value):
    if not isinstance(q, dict) or "name" not in q:
        raise Invalid(f"{where}: {q!r} is invalid: expected an object with a name")
    extra = set(q) - {"name", "value", "unit"}
    if extra:
        raise Invalid(f"{where}: unknown field(s) {sorted(extra)}")
    if need_value and "value" not in q:
        raise Invalid(f"{where}: {q!r} has no value")


def load(results=RESULTS):
    """(machines, runs): runs as (id, run) sorted newest first; raises Invalid naming the file and field."""
    machines_file = results / "machines.json"
    machines = json.loads(machines_file.read_text())
    for name, m in machines.items():
        extra = set(m) - MACHINE_KEYS
        if extra or not ("cpu" in m or "gpu" in m):
            raise Invalid(f"{machines_file}: machine {name!r} is invalid: fields {sorted(m)} "
                          f"(expected cpu or gpu, and only {sorted(MACHINE_KEYS)})")
    runs = []
    for path in sorted(results.glob("*.json")):
        if path.name == "machines.json":
            continue
        run = json.loads(path.read_text())
        where = path.name
        extra = set(run) - RUN_KEYS
        if extra:
            raise Invalid(f"{where}: unknown field(s) {sorted(extra)}")
        for key in ("date", "machine", "title", "command", "method", "results"):
            if key not in run:
                raise Invalid(f"{where}: field {key!r} is missing")
        if not path.stem.startswith(run["date"]):
            raise Invalid(f"{where}: date = {run['date']!r} is invalid: the file name starts with another "
                          "date")
        if run["machine"] not in machines:
            raise Invalid(f"{where}: machine = {run['machine']!r} is not in machines.json")
        if not isinstance(run["command"], list) or not run["command"]:
            raise Invalid(f"{where}: command = {run['command']!r} is invalid: expected a list of command "
                          "lines")
        for i, limit in enumerate(run.get("limits", [])):
            check_quantity(f"{where}: limits[{i}]", limit, True)
        for i, res in enumerate(run["results"]):
            at = f"{where}: results[{i}]"
            extra = set(res) - RESULT_KEYS
            if extra:
                raise Invalid(f"{at}: unknown field(s) {sorted(extra)}")
            if res.get("kernel") not in KERNEL_KEYS:
                raise Invalid(f"{at}: kernel = {res.get('kernel')!r} is invalid: expected one of "
                              f"{sorted(KERNEL_KEYS)}")
            if "case" not in res:
                raise Invalid(f"{at}: field 'case' is missing")
            if "value" in res and "unit" not in res:
                raise Invalid(f"{at}: value {res['value']!r} has no unit")
            if not ({"value", "figure", "time", "ratio"} & set(res)):
                raise Invalid(f"{at}: no figure (value, figure, time or ratio)")
            if "limit" in res:
                check_quantity(f"{at}: limit", res["limit"], False)
            for j, anchor in enumerate(res.get("anchors", [])):
                check_quantity(f"{at}: anchors[{j}]", anchor, True)
        runs.append((path.stem, run))
    runs.sort(key=lambda item: item[0], reverse=True)
    return machines, runs


def quantity(q):
    text = q["name"]
    if "value" in q:
        text += f": {fmt(q['value'])}" + (f" {q['unit']}" if "unit" in q else "")
    return text


def prose(text, first="", rest=""):
    """text wrapped at 110 columns (Markdown prose; tables stay one line a row)."""
    return textwrap.wrap(text, 110, initial_indent=first, subsequent_indent=rest, break_long_words=False,
                         break_on_hyphens=False)


def cell(text):
    return str(text).replace("|", "\\|")


def figure(res):
    parts = []
    if "figure" in res:
        parts.append(res["figure"])
    elif "value" in res:
        parts.append(f"{fmt(res['value'])} {res['unit']}")
    for key in ("time", "rate"):
        if key in res:
            parts.append(res[key])
    return "; ".join(parts) if parts else "–"


def run_label(rid):
    date, n = rid.split("-")[:3], rid.split("-")[3]
    return f"[{'-'.join(date)} #{n}](#{rid})"


def render(machines, runs):
    out = [
        "# Benchmarks",
        "",
        "<!-- Generated by scripts/benchmarks_md.py from bench/results/*.json: edit those and run",
        "     `python3 scripts/benchmarks_md.py`; python/tests/test_benchmarks_md.py checks this file. -->",
        "",
    ] + prose(INTRO) + [
        "",
        "## How to rerun",
        "",
        "```sh",
        "cmake --preset release -DPOSENC_BUILD_BENCH=ON && cmake --build --preset release",
        "five='--benchmark_repetitions=5 --benchmark_report_aggregates_only=true'",
        "for b in rope absolute bias shaw transformer_xl kv_cache; do",
        "  ./build/release/bench/bench_$b $five",
        "done",
        "three='--benchmark_repetitions=3 --benchmark_report_aggregates_only=true'",
        "./build/release/bench/bench_attention $three",
        "./build/release/bench/bench_lab $three",
        "scripts/bench_shared.sh   # alone vs beside a busy process",
        "scripts/bench_ggml.sh     # side by side with ggml",
        "scripts/gpu_check.sh      # the CUDA kernels, on a GPU machine (table: scripts/gpu_table.py OUT)",
        "```",
        "",
    ] + prose(RECORDING) + [
        "",
        "## Machines",
        "",
        "| machine | CPU / GPU | memory | OS |",
        "|---|---|---|---|",
    ]
    for name in sorted(machines):
        m = machines[name]
        hw = "; ".join(x for x in (m.get("gpu"), m.get("cpu")) if x)
        out.append(f"| `{name}` | {cell(hw)} | {cell(m.get('memory', '–'))} | {cell(m.get('os', '–'))} |")
    out.append("")
    for key, heading, about in KERNELS:
        rows = [(rid, run, res) for rid, run in runs for res in run["results"] if res["kernel"] == key]
        if not rows:
            continue
        out += [f"## {heading}", ""] + prose(about) + ["",
                "| run | machine | case | figure | same-run limit | ratio | note |",
                "|---|---|---|---|---|---|---|"]
        for rid, run, res in rows:
            case = res["case"] + (f" · *{res['variant']}*" if "variant" in res else "")
            limit = quantity(res["limit"]) if "limit" in res else "–"
            if "anchors" in res:
                limit += "; " + ", ".join(quantity(a) for a in res["anchors"])
            ratio = fmt(res["ratio"]) if "ratio" in res else "–"
            out.append(f"| {run_label(rid)} | `{run['machine']}` | {cell(case)} | {cell(figure(res))} | "
                       f"{cell(limit)} | {cell(ratio)} | {cell(res.get('note', ''))} |")
        out.append("")
    limit_rows = [(rid, run, q) for rid, run in runs for q in run.get("limits", [])]
    if limit_rows:
        out += ["## Same-run limits", "",
                "The arithmetic limits measured in each run (`BM_compute_peak`: no memory traffic).", "",
                "| run | machine | limit | value |", "|---|---|---|---|"]
        for rid, run, q in limit_rows:
            out.append(f"| {run_label(rid)} | `{run['machine']}` | {cell(q['name'])} | "
                       f"{cell(fmt(q['value']) + (' ' + q['unit'] if 'unit' in q else ''))} |")
        out.append("")
    out += ["## Runs", ""]
    for rid, run in runs:
        out += [f'<a id="{rid}"></a>', "", f"### {run['date']} #{rid.split('-')[3]}: {run['title']}", ""]
        facts = [f"Machine: `{run['machine']}`"]
        if "build" in run:
            facts.append(f"build: {run['build']}")
        if "threads" in run:
            facts.append(f"{run['threads']} threads")
        out += prose("; ".join(facts) + ".")
        out += prose(f"Method: {run['method']}.")
        if "conditions" in run:
            out += prose(f"Conditions: {run['conditions']}.")
        out += ["", "```sh"] + run["command"] + ["```", ""]
        for note in run.get("notes", []):
            out += prose(note, "- ", "  ")
        if run.get("notes"):
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


# The attention rows of a gpu_check run (TFLOP/s) and how their cases read.
ATTENTION_OPS = {"attention_forward": "attention forward",
                 "attention_forward_backward": "attention forward + backward"}


def import_gpu(argv):
    """bench/results/ID.json from a scripts/gpu_check.sh output folder."""
    import argparse

    parser = argparse.ArgumentParser(prog="benchmarks_md.py import-gpu")
    parser.add_argument("out", type=pathlib.Path, help="the folder scripts/gpu_check.sh wrote")
    parser.add_argument("--id", required=True, help="the run's file name: DATE-N-name")
    parser.add_argument("--date", required=True)
    parser.add_argument("--machine", required=True, help="a key of bench/results/machines.json")
    parser.add_argument("--results", type=pathlib.Path, default=RESULTS, help="default: bench/results")
    args = parser.parse_args(argv)

    def lines(name):
        path = args.out / name
        if not path.exists():
            raise Invalid(f"{path}: missing (expected scripts/gpu_check.sh output)")
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip().startswith("{")]

    machines = json.loads((args.results / "machines.json").read_text())
    if args.machine not in machines:
        raise Invalid(f"--machine {args.machine!r} is not in {args.results / 'machines.json'}")
    device_file = args.out / "device.txt"
    device = device_file.read_text().strip().splitlines() if device_file.exists() else []
    torch_rows = lines("bench_torch.jsonl")
    anchors = {(t["op"], t.get("impl"), t["shape"]): t for t in torch_rows if "op" in t}
    results = []
    matmul = next((t for t in torch_rows if t.get("op") == "matmul"), None)
    for row in lines("bench_posenc.jsonl"):
        if row.get("op") in ATTENTION_OPS:  # TFLOP/s beside the same run's matmul and anchors
            case = f"{ATTENTION_OPS[row['op']]} {row['variant']}, {row['shape']}, {row['dtype']}"
            res = {"kernel": "gpu", "case": case, "value": round(row["tflops"], 1), "unit": "TFLOP/s"}
            if matmul:
                res["limit"] = {"name": "bf16 matmul 8192^3", "value": round(matmul["tflops"], 1),
                                "unit": "TFLOP/s"}
                res["ratio"] = round(row["tflops"] / matmul["tflops"], 3)
            found = [(t["impl"], t) for t in torch_rows
                     if t.get("op") == row["op"] and "tflops" in t
                     and t["shape"] == row["shape"] and t["variant"] == row["variant"]]
            if found:
                res["anchors"] = [{"name": name, "value": round(a["tflops"], 1), "unit": "TFLOP/s"}
                                  for name, a in found]
            results.append(res)
            continue
        if row.get("op") == "attention_decode":  # cache bytes read, beside SDPA's
            res = {"kernel": "gpu", "case": f"attention decode, {row['shape']}, {row['dtype']}",
                   "value": round(row["tb_per_s"], 3), "unit": "TB/s"}
            a = anchors.get((row["op"], "sdpa", row["shape"]))
            if a:
                res["anchors"] = [{"name": "SDPA", "value": round(a["tb_per_s"], 3), "unit": "TB/s"}]
            results.append(res)
            continue
        res = {"kernel": "gpu", "case": f"{row['op']}, {row['shape']}, {row['dtype']}",
               "value": round(row["tb_per_s"], 3), "unit": "TB/s",
               "limit": {"name": "device copy of the same bytes"}, "ratio": round(row["vs_copy"], 3)}
        found = [(label, anchors.get((row["op"], impl, row["shape"]))) for label, impl in
                 (("torch eager", "torch_eager"), ("torch.compile", "torch_compile"))]
        if row["dtype"] == "bf16" and any(a for _, a in found):
            res["anchors"] = [{"name": label, "value": round(a["tb_per_s"], 3), "unit": "TB/s"}
                              for label, a in found if a]
        results.append(res)
    if not results:
        raise Invalid(f"{args.out / 'bench_posenc.jsonl'}: no result rows")
    run = {"date": args.date, "machine": args.machine,
           "title": "CUDA kernels against the device copy and PyTorch", "command": ["scripts/gpu_check.sh"],
           "method": "medians of timed repetitions (scripts/gpu_check.sh)",
           "notes": [f"Device: {device[-1]}"] if device else [], "results": results}
    path = args.results / f"{args.id}.json"
    path.write_text(json.dumps(run, indent=2, ensure_ascii=False) + "\n")
    print(f"benchmarks_md: wrote {path}")
    return 0


def main(argv):
    try:
        if argv[:1] == ["import-gpu"]:
            return import_gpu(argv[1:])
        if argv not in ([], ["--check"]):
            print(__doc__, file=sys.stderr)
            return 2
        text = render(*load())
        if argv == ["--check"]:
            if OUTPUT.read_text() != text:
                print(f"benchmarks_md: {OUTPUT.name} differs from bench/results/*.json; "
                      "run python3 scripts/benchmarks_md.py", file=sys.stderr)
                return 1
            return 0
        OUTPUT.write_text(text)
        print(f"benchmarks_md: wrote {OUTPUT.name}")
        return 0
    except (Invalid, json.JSONDecodeError) as exc:
        print(f"benchmarks_md: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
