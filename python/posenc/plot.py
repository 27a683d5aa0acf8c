"""The seeds' figures, computed by posenc, and the lab's chart: `python3 -m posenc.plot`.

    python3 -m posenc.plot all --out plots                # every figure of the seeds, PNG
    python3 -m posenc.plot lab --results results/lab/results.json --format svg
    python3 -m posenc.plot --list

Each figure is a function returning a matplotlib Figure (title, axis labels, legend or colour bar),
so notebooks can use them too; the command writes <out>/<name>.<format>.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from . import absolute, bias
from ._checks import Error, fail
from .rope import rope_inv_freq


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt

    return plt


def sinusoidal_heatmap(positions=128, dim=64):
    """The sinusoidal matrix PE[p, i] (seed 000/002's heat map)."""
    plt = _pyplot()
    pe = absolute.sinusoidal(np.arange(positions), dim)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    im = ax.imshow(pe, aspect="auto", cmap="RdBu", vmin=-1, vmax=1, interpolation="nearest")
    ax.set(title=f"Sinusoidal encoding, {positions} positions x {dim} dimensions (interleaved sin/cos)",
           xlabel="dimension i", ylabel="position p")
    fig.colorbar(im, ax=ax, label="PE[p, i]")
    return fig


def sinusoidal_dimensions(positions=128, dim=64, dims=(2, 6, 12)):
    """Chosen dimensions over positions: low dimensions oscillate fast, high ones slowly."""
    plt = _pyplot()
    pe = absolute.sinusoidal(np.arange(positions), dim)
    fig, ax = plt.subplots(figsize=(8, 4))
    for i in dims:
        ax.plot(np.arange(positions), pe[:, i], label=f"dimension {i}")
    ax.set(title=f"Sinusoidal encoding: chosen dimensions (d_model = {dim})", xlabel="position p", ylabel="PE[p, i]")
    ax.legend()
    return fig


def sincos_circle(positions=64, bases=(10.0, 100.0, 10000.0), dim=64, pair=1):
    """Seed 004: (sin, cos) of one frequency pair traces a circle; the base sets how far apart
    neighbouring positions land on it."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(bases), figsize=(4 * len(bases), 4), constrained_layout=True)
    for ax, base in zip(np.atleast_1d(axes), bases):
        pe = absolute.sinusoidal(np.arange(positions), dim, base=base)
        sc = ax.scatter(pe[:, 2 * pair], pe[:, 2 * pair + 1], c=np.arange(positions), cmap="viridis", s=14, label="positions")
        ax.set(title=f"base {base:g}, pair {pair}", xlabel="sin(p w)", ylabel="cos(p w)", aspect="equal")
        ax.legend(loc="lower right")
    fig.colorbar(sc, ax=list(np.atleast_1d(axes)), label="position p")
    fig.suptitle("Positions on the (sin, cos) circle of one frequency, for several bases")
    return fig


def dot_product_vs_distance(dim=64, reference_positions=(0, 50, 100), span=100):
    """PE(p) . PE(q) depends on p - q only (and is symmetric): one curve per reference position."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    for p in reference_positions:
        q = np.arange(p - span, p + span + 1)
        q = q[q >= 0]
        pe = absolute.sinusoidal(np.concatenate([[p], q]), dim).astype(np.float64)
        ax.plot(q - p, pe[1:] @ pe[0], label=f"p = {p}")
    ax.set(title=f"Sinusoidal PE(p) . PE(q) against q - p (d_model = {dim})", xlabel="relative distance q - p",
           ylabel="PE(p) . PE(q)")
    ax.legend()
    return fig


def rope_decay(head_dim=128, max_distance=256, bases=(10000.0,)):
    """RoFormer's long-term decay bound: (1 / (d/2)) sum_j |S_j|, S_j = sum_{k<j} e^{i r theta_k}."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    r = np.arange(max_distance + 1)
    for base in bases:
        inv_freq, _ = rope_inv_freq(head_dim, base=base)
        partial = np.cumsum(np.exp(1j * r[:, None] * inv_freq[None, :]), axis=1)
        ax.plot(r, np.abs(partial).mean(axis=1), label=f"base {base:g}")
    ax.set(title=f"RoPE: RoFormer's upper bound of |q . k| against distance (head_dim {head_dim})", xlabel="relative distance",
           ylabel="relative upper bound")
    ax.legend()
    return fig


def bias_matrices(kind="alibi", heads=4, length=32, num_buckets=32, max_distance=128, seed=0):
    """ALiBi's bias or T5's bucketed bias per head (causal ALiBi; T5 with a random table)."""
    plt = _pyplot()
    pos = np.arange(length)
    if kind == "alibi":
        b = bias.alibi_bias(heads, pos, pos, causal=False)
        title = "ALiBi bias -m_h |q - k| per head (BLOOM slopes)"
    elif kind == "t5":
        table = np.random.default_rng(seed).standard_normal((num_buckets, heads)).astype(np.float32)
        b = bias.t5_bias(table, pos, pos, num_buckets=num_buckets, max_distance=max_distance)
        title = f"T5 bias table[bucket(k - q), h] per head ({num_buckets} buckets, random table)"
    else:
        fail(f"kind = {kind!r} is invalid: expected 'alibi' or 't5'")
    fig, axes = plt.subplots(1, heads, figsize=(3.2 * heads, 3.4), constrained_layout=True)
    for h, ax in enumerate(np.atleast_1d(axes)):
        im = ax.imshow(b[h], cmap="viridis", interpolation="nearest")
        ax.set(title=f"head {h}", xlabel="key position", ylabel="query position")
    fig.colorbar(im, ax=list(np.atleast_1d(axes)), label="bias")
    fig.suptitle(title)
    return fig


def neighbour_distances(positions=64, bits=8, dim=8):
    """Seed 004's counter-example: binary codes jump between neighbours (7 -> 8 flips four bits),
    the sinusoidal code moves by the same distance at every step."""
    plt = _pyplot()
    p = np.arange(positions + 1)
    b = absolute.binary(p, bits).astype(np.float64)
    s = absolute.sinusoidal(p, dim).astype(np.float64)
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.step(p[:-1], np.linalg.norm(np.diff(b, axis=0), axis=1), where="post", label=f"binary ({bits} bits)")
    ax.plot(p[:-1], np.linalg.norm(np.diff(s, axis=0), axis=1), label=f"sinusoidal (d = {dim})")
    ax.set(title="Distance between neighbouring positions ||PE(p + 1) - PE(p)||", xlabel="position p", ylabel="euclidean distance")
    ax.legend()
    return fig


def lab_chart(results_path):
    """The lab's result: bits/char (text) or exact match (tasks) against the evaluation length."""
    plt = _pyplot()
    try:
        with open(results_path, encoding="utf-8") as f:
            results = json.load(f)
    except OSError as exc:
        fail(f"results: cannot read {results_path!r}: {exc.strerror}")
    except json.JSONDecodeError as exc:
        fail(f"results: {results_path!r} is not valid JSON ({exc})")
    try:
        task = results.get("task", {}).get("name")
        metric = "exact_match" if task else "bits_per_char"
        rows = results["summary"]
        train_len = results["model"]["train_len"]
        fig, ax = plt.subplots(figsize=(8, 5))
        for row in rows:
            points = [(e["length"], e["mean"] * (100 if task else 1)) for e in row[metric] if e.get("n", 0) > 0]
            if points:
                x, y = zip(*points)
                ax.plot(x, y, marker="o", label=row["label"])
    except (KeyError, TypeError, AttributeError) as exc:
        fail(f"results: {results_path!r} is not a posenc lab results.json (missing {exc})")
    ax.set_xscale("log", base=2)
    ax.axvline(train_len, color="grey", linestyle=":", label=f"train length {train_len}")
    what = f"exact match on {task} (%)" if task else "bits per character (test text)"
    ax.set(title=f"posenc lab, {results.get('date', '')}: {what} against evaluation length", xlabel="evaluation length (tokens)",
           ylabel=what)
    ax.legend(fontsize=8, ncol=2)
    return fig


FIGURES = {
    "sinusoidal_heatmap": sinusoidal_heatmap,
    "sinusoidal_dimensions": sinusoidal_dimensions,
    "sincos_circle": sincos_circle,
    "dot_product": dot_product_vs_distance,
    "rope_decay": rope_decay,
    "alibi_bias": lambda: bias_matrices("alibi"),
    "t5_bias": lambda: bias_matrices("t5"),
    "neighbour_distances": neighbour_distances,
}


def save(fig, path):
    fig.savefig(path, dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m posenc.plot", description=__doc__.split("\n")[0])
    parser.add_argument("figures", nargs="*", default=["all"], help="figure names, 'all' (the seeds' figures) or 'lab'")
    parser.add_argument("--out", default="plots", help="output directory (default: plots)")
    parser.add_argument("--format", default="png", choices=["png", "svg"])
    parser.add_argument("--results", default="results/lab/results.json", help="the lab's results.json, for 'lab'")
    parser.add_argument("--list", action="store_true", help="list the figures and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join([*FIGURES, "lab"]))
        return 0
    names = []
    for name in args.figures:
        names += list(FIGURES) if name == "all" else [name]
    try:
        for name in names:
            if name != "lab" and name not in FIGURES:
                fail(f"figure {name!r} is unknown: expected one of {', '.join([*FIGURES, 'lab', 'all'])}")
        os.makedirs(args.out, exist_ok=True)
        for name in names:
            fig = lab_chart(args.results) if name == "lab" else FIGURES[name]()
            print(save(fig, os.path.join(args.out, f"{name}.{args.format}")))
    except Error as exc:
        print(f"posenc.plot: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
