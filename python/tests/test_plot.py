"""python3 -m posenc.plot: every figure renders to a valid, non-empty PNG and SVG; the lab chart
reads results.json of the text comparison and of a task; bad input exits 2 with a message."""
import json

import matplotlib.image
import pytest

from posenc import plot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def lab_results(path, task=None, labels=("alibi", "rope")):
    """A results.json of three seeds: mean, std and the 95% interval per length (n/a at 256), and the
    positions past the training length for the text."""
    metric = "exact_match" if task else "bits_per_char"

    def stats(a, b):
        return [{"length": 64, "mean": a, "std": 0.01, "ci95": 0.025, "n": 3},
                {"length": 128, "mean": b, "std": 0.02, "ci95": 0.05, "n": 3}, {"length": 256, "n": 0}]

    rows = []
    for i, label in enumerate(labels):
        row = {"label": label, metric: stats(0.5 + 0.01 * i, 0.6 + 0.02 * i)}
        if not task:
            row["unseen_bits_per_char"] = [{"length": 64, "n": 0}] + stats(0, 0.7 + 0.02 * i)[1:]
        rows.append(row)
    results = {"date": "2026-11-22", "model": {"train_len": 64}, "seeds": 3, "summary": rows}
    if task:
        results["task"] = {"name": task}
    path.write_text(json.dumps(results))
    return path


@pytest.mark.parametrize("name", list(plot.FIGURES) + ["lab", "lab_task"])
def test_every_figure_renders(tmp_path, name):
    if name.startswith("lab"):
        fig = plot.lab_chart(lab_results(tmp_path / "r.json", "copy" if name == "lab_task" else None))
    else:
        fig = plot.FIGURES[name]()
    ax = fig.axes[0]
    assert fig._suptitle is not None or ax.get_title(), "a title"
    assert any(a.get_xlabel() for a in fig.axes) and any(a.get_ylabel() for a in fig.axes), "axis labels"
    assert ax.get_legend() is not None or len(fig.axes) > 1, "a legend or a colour bar"
    png = plot.save(fig, str(tmp_path / f"{name}.png"))
    data = open(png, "rb").read()
    assert data.startswith(PNG_MAGIC) and len(data) > 5000
    height, width = matplotlib.image.imread(png).shape[:2]
    assert height > 200 and width > 300


LAB_LABELS = ("none", "learned", "sinusoidal", "binary", "relative", "t5", "shaw", "transformer_xl", "rope",
              "rope (linear)", "rope (ntk)", "rope (yarn)", "alibi", "rope+alibi", "rope+alibi (linear)",
              "rope+alibi (ntk)", "rope+alibi (yarn)", "learned+t5")


def test_lab_chart_groups_families_with_distinct_colours_and_bands(tmp_path):
    fig = plot.lab_chart(lab_results(tmp_path / "r.json", labels=LAB_LABELS))
    # Four families, each as whole windows beside the positions past the training length.
    assert len(fig.axes) == 8
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[0].startswith("absolute") and titles[1].endswith("positions >= 64 only")
    assert titles[6].startswith("ALiBi and hybrids")
    panel = {line.get_label(): i for i, ax in enumerate(fig.axes[::2]) for line in ax.lines
             if line.get_label() in LAB_LABELS}
    assert panel["learned"] == 0 and panel["t5"] == 1 and panel["rope (yarn)"] == 2
    assert panel["rope+alibi (ntk)"] == 3 and panel["learned+t5"] == 3
    # No colour shared by two rows, and a line style and marker of their own within each panel.
    colours = {line.get_label(): line.get_color() for ax in fig.axes for line in ax.lines
               if line.get_label() in LAB_LABELS}
    assert len(colours) == len(LAB_LABELS) and len(set(colours.values())) == len(LAB_LABELS)
    for ax in fig.axes:
        styles = [(line.get_linestyle(), line.get_marker())
                  for line in ax.lines if line.get_label() in LAB_LABELS]
        assert len(styles) == len(set(styles)), ax.get_title()
    # Intervals as bands, and the training length marked in every panel.
    assert all(len(ax.collections) > 0 for ax in fig.axes)
    for ax in fig.axes:
        assert any(line.get_xdata()[0] == 64 and line.get_linestyle() == ":" for line in ax.lines)


def test_command_line(tmp_path, capsys):
    results = lab_results(tmp_path / "r.json")
    assert plot.main(["sinusoidal_heatmap", "lab", "--out", str(tmp_path / "out"), "--format", "svg",
                      "--results", str(results)]) == 0
    for name in ("sinusoidal_heatmap", "lab"):
        text = (tmp_path / "out" / f"{name}.svg").read_text()
        assert "<svg" in text and len(text) > 5000
    assert plot.main(["--list"]) == 0
    assert "neighbour_distances" in capsys.readouterr().out


def test_bad_input_exits_2(tmp_path, capsys):
    assert plot.main(["nonsense", "--out", str(tmp_path)]) == 2
    assert "figure 'nonsense' is unknown" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert plot.main(["lab", "--results", str(bad), "--out", str(tmp_path)]) == 2
    assert "is not valid JSON" in capsys.readouterr().err
    bad.write_text("{}")
    assert plot.main(["lab", "--results", str(bad), "--out", str(tmp_path)]) == 2
    assert "not a posenc lab results.json" in capsys.readouterr().err
    assert plot.main(["lab", "--results", str(tmp_path / "missing.json"), "--out", str(tmp_path)]) == 2
    assert "cannot read" in capsys.readouterr().err
