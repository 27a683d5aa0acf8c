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
    ax.set(title=f"Sinusoidal encoding: chosen dimensions (d_model = {dim})", xlabel="position p",
           ylabel="PE[p, i]")
    ax.legend()
    return fig


def sincos_circle(positions=64, bases=(10.0, 100.0, 10000.0), dim=64, pair=1):
    """Seed 004: (sin, cos) of one frequency pair traces a circle; the base sets how far apart
    neighbouring positions land on it."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(bases), figsize=(4 * len(bases), 4), constrained_layout=True)
    for ax, base in zip(np.atleast_1d(axes), bases):
        pe = absolute.sinusoidal(np.arange(positions), dim, base=base)
        sc = ax.scatter(pe[:, 2 * pair], pe[:, 2 * pair + 1], c=np.arange(positions), cmap="viridis", s=14,
                        label="positions")
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
    ax.set(title=f"Sinusoidal PE(p) . PE(q) against q - p (d_model = {dim})",
           xlabel="relative distance q - p",
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
    ax.set(title=f"RoPE: RoFormer's upper bound of |q . k| against distance (head_dim {head_dim})",
           xlabel="relative distance",
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
    ax.set(title="Distance between neighbouring positions ||PE(p + 1) - PE(p)||", xlabel="position p",
           ylabel="euclidean distance")
    ax.legend()
    return fig


# The lab chart's families, in panel order: which rows share a panel (lab_family).
LAB_FAMILIES = (
    "absolute (added to the embeddings)",
    "relative: bias and vector terms",
    "rotary, and its evaluation-time scalings",
    "ALiBi and hybrids",
)
# One colour per row of a chart, none shared, dark enough on white and far apart in order (neighbours
# in this list land in one panel): after Kelly's colours of maximum contrast.
LAB_COLOURS = (
    "#0067A5", "#BE0032", "#008856", "#F38400", "#875692", "#882D17", "#2B3D26",
    "#E25822", "#604E97", "#8DB600", "#B3446C", "#848482", "#F6A600", "#654522",
    "#17BECF", "#E68FAC", "#1A1A6E", "#A6761D", "#66A61E", "#F3C300",
)
# Within a panel, each row has a line style and a marker of its own (seven rows before one repeats).
LAB_STYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (8, 2)), (0, (1, 3)))
LAB_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def lab_family(label):
    """The panel of a lab row: 'rope (ntk)' -> rotary; 'rope+alibi', any '+' hybrid -> ALiBi and hybrids."""
    parts = label.split(" (")[0].split("+")
    if len(parts) > 1 or "alibi" in parts:
        return LAB_FAMILIES[3]
    if "rope" in parts:
        return LAB_FAMILIES[2]
    if parts[0] in ("relative", "t5", "shaw", "transformer_xl", "xl"):
        return LAB_FAMILIES[1]
    return LAB_FAMILIES[0]


def _lab_points(entries, scale):
    """(lengths, means, interval half-widths) of a summary row's metric where it ran."""
    points = [(e["length"], e["mean"] * scale, e.get("ci95", 0.0) * scale)
              for e in entries if e.get("n", 0) > 0]
    return tuple(zip(*points)) if points else ((), (), ())


def lab_chart(results_path):
    """The lab's result: bits/char (text) or exact match (tasks) against the evaluation length, one row of
    panels per family of encodings, the whole windows beside the positions past the training length
    (text), with the 95% interval over seeds as a band and the training length marked."""
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
        rows = results["summary"]
        train_len = results["model"]["train_len"]
        seeds = results.get("seeds", 1)
        scale = 100 if task else 1
        columns = [("exact_match", f"exact match on {task} (%)")] if task else [
            ("bits_per_char", "whole windows"), ("unseen_bits_per_char", f"positions >= {train_len} only")]
        columns = [(key, title) for key, title in columns if any(key in row for row in rows)]
        families = [f for f in LAB_FAMILIES if any(lab_family(row["label"]) == f for row in rows)]
        lengths = sorted({e["length"] for row in rows for e in row[columns[0][0]]})
        fig, axes = plt.subplots(len(families), len(columns), sharey=True, sharex=True, squeeze=False,
                                 figsize=(6.4 * len(columns), 3.4 * len(families)), constrained_layout=True)
        colour = {row["label"]: LAB_COLOURS[i % len(LAB_COLOURS)] for i, row in enumerate(rows)}
        for r, family in enumerate(families):
            members = [row for row in rows if lab_family(row["label"]) == family]
            for c, (key, title) in enumerate(columns):
                ax = axes[r][c]
                drawn = 0
                for k, row in enumerate(members):
                    x, y, half = _lab_points(row.get(key, []), scale)
                    if not x:
                        continue
                    drawn += 1
                    style = dict(color=colour[row["label"]], linestyle=LAB_STYLES[k % len(LAB_STYLES)],
                                 marker=LAB_MARKERS[k % len(LAB_MARKERS)], markersize=4, linewidth=1.6)
                    ax.plot(x, y, label=row["label"], **style)
                    if any(half):
                        ax.fill_between(x, np.subtract(y, half), np.add(y, half), color=colour[row["label"]],
                                        alpha=0.18, linewidth=0)
                ax.axvline(train_len, color="grey", linestyle=":", linewidth=1.2)
                ax.text(train_len, 0.98, " training length", transform=ax.get_xaxis_transform(), fontsize=7,
                        color="grey", va="top")
                ax.set_xscale("log", base=2)
                ax.set_xticks(lengths, [str(v) for v in lengths])
                ax.grid(True, which="major", alpha=0.3)
                ax.set_title(f"{family}: {title}" if len(columns) > 1 else family, fontsize=10)
                if c == 0:
                    ax.set_ylabel(columns[0][1] if task else "bits per character")
                if r == len(families) - 1:
                    ax.set_xlabel(f"evaluation length (tokens); dotted: training length {train_len}")
                if drawn:
                    ax.legend(fontsize=8, loc="best")
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        fail(f"results: {results_path!r} is not a posenc lab results.json (missing {exc})")
    what = f"exact match on {task}" if task else "bits per character on the test text (lower is better)"
    bands = f"bands: 95% interval of the mean over {seeds} seeds" if seeds > 1 else "one seed: no interval"
    fig.suptitle(f"posenc lab, {results.get('date', '')}: {what} against evaluation length; {bands}")
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
    parser.add_argument("figures", nargs="*", default=["all"],
                        help="figure names, 'all' (the seeds' figures) or 'lab'")
    parser.add_argument("--out", default="plots", help="output directory (default: plots)")
    parser.add_argument("--format", default="png", choices=["png", "svg"])
    parser.add_argument("--results", default="results/lab/results.json",
                        help="the lab's results.json, for 'lab'")
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
