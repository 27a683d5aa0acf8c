"""python3 -m posenc.plot: every figure renders to a valid, non-empty PNG and SVG; the lab chart
reads results.json of the text comparison and of a task; bad input exits 2 with a message."""
import json

import matplotlib.image
import pytest

from posenc import plot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def lab_results(path, task=None):
    metric = "exact_match" if task else "bits_per_char"
    rows = [{"label": label, metric: [{"length": 64, "mean": a, "std": 0, "n": 1},
                                      {"length": 128, "mean": b, "std": 0, "n": 1},
                                      {"length": 256, "n": 0}]}
            for label, a, b in [("alibi", 0.5, 0.5), ("rope", 0.9, 0.2)]]
    results = {"date": "2026-11-22", "model": {"train_len": 64}, "summary": rows}
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
    assert ax.get_xlabel() and ax.get_ylabel(), "axis labels"
    assert ax.get_legend() is not None or len(fig.axes) > 1, "a legend or a colour bar"
    png = plot.save(fig, str(tmp_path / f"{name}.png"))
    data = open(png, "rb").read()
    assert data.startswith(PNG_MAGIC) and len(data) > 5000
    height, width = matplotlib.image.imread(png).shape[:2]
    assert height > 200 and width > 300


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
