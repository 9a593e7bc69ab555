import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from labkit import plots  # noqa: E402
from labkit.params import setup  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_bar_marks_the_baseline():
    ax = plots.bar({"serial": 1.0, "ray": 3.0}, title="Speed-up", ylabel="x", baseline="serial")
    assert ax.get_title() == "Speed-up" and ax.get_ylabel() == "x"
    assert len(ax.patches) == 2
    assert ax.patches[0].get_facecolor() != ax.patches[1].get_facecolor()


def test_curves_and_gantt():
    ax = plots.curves(
        [1, 2, 3],
        {"a": [1, 2, 3], "b": [3, 2, 1]},
        title="t",
        xlabel="ms",
        ylabel="x",
        logx=True,
        hline=1.0,
    )
    assert ax.get_xscale() == "log" and len(ax.get_lines()) == 3
    ax = plots.curves(
        [0, 1, 2],
        {"nodes": [0, 2, 1], "queued": [4, 1, 0]},
        title="t",
        xlabel="s",
        ylabel="count",
        step=True,
        vlines={"wave 2": 1.5},
    )
    assert len(ax.get_lines()) == 3 and ax.get_lines()[0].get_drawstyle() == "steps-post"
    assert [t.get_text() for t in ax.texts] == ["wave 2"]
    ax = plots.gantt([("node1", 0.0, 1.0, "train"), ("node2", 0.5, 2.0, "infer")], title="g")
    assert len(ax.patches) >= 2 and ax.get_xlabel().startswith("time")


@pytest.mark.parametrize(
    "call",
    [
        lambda: plots.bar({"a": 1.0}, title="", ylabel="x"),
        lambda: plots.bar({}, title="t", ylabel="x"),
        lambda: plots.curves([1, 2], {"a": [1]}, title="t", xlabel="s", ylabel="x"),
        lambda: plots.curves([1], {"a": [1]}, title="t", xlabel="", ylabel="x"),
        lambda: plots.gantt([], title="t"),
        lambda: plots.gantt([("n", 2.0, 1.0, "k")], title="t"),
    ],
)
def test_bad_input(call):
    with pytest.raises(ValueError):
        call()


def test_save_writes_png_next_to_records(fresh_params, results_dir):
    setup("00_welcome_and_setup")
    path = plots.save(plots.bar({"a": 1.0}, title="t", ylabel="x"), "demo")
    assert path == results_dir / "00_welcome_and_setup-demo.png"
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_stacked_bars_and_markers():
    parts = {"fp32": {"state": 2.0, "activations": 4.0}, "bf16": {"state": 2.0, "copies": 1.0}}
    ax = plots.stacked(parts, title="Memory", ylabel="GiB", markers={"fp32": 6.5})
    assert len(ax.patches) == 6  # 3 kinds x 2 bars (missing parts drawn as zero height)
    tops = {}
    for patch in ax.patches:
        x = round(patch.get_x() + patch.get_width() / 2)
        tops[x] = max(tops.get(x, 0), patch.get_y() + patch.get_height())
    assert tops == {0: 6.0, 1: 3.0}
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sorted(legend) == ["activations", "copies", "measured peak", "state"]
    with pytest.raises(ValueError):
        plots.stacked({}, title="t", ylabel="y")


def test_resource_table_shows_gib_and_custom_resources_without_ray_markers():
    table = plots.resource_table(
        {
            "head": {"CPU": 1.0, "memory": 3 * 2**30, "object_store_memory": 2**29, "node:1.2": 1},
            "node1": {"CPU": 2.0, "GPU": 2.0, "FPGA": 4.0, "accelerator_type:H200": 1.0},
        }
    )
    assert list(table.index) == ["head", "node1"]
    assert table.loc["head", "memory GiB"] == 3.0 and table.loc["head", "object store GiB"] == 0.5
    assert table.loc["node1", "FPGA"] == 4 and table.loc["head", "FPGA"] == 0
    assert not [c for c in table.columns if c.startswith(("node:", "accelerator_type"))]


def test_learning_curves_mark_where_a_trial_stopped():
    ax = plots.learning_curves(
        {"a": [0.1, 0.5, 0.7, 0.8], "b": [0.2]},
        full_length=4,
        title="t",
        xlabel="epoch",
        ylabel="accuracy",
    )
    assert len(ax.lines) == 3  # two curves and one stop marker
    assert [t.get_text() for t in ax.texts] == ["stopped at 1"]
    plt.close("all")


def test_scatter_checks_lengths():
    ax = plots.scatter([1e-3, 1e-2], [0.5, 0.9], title="t", xlabel="lr", ylabel="acc", logx=True)
    assert ax.get_xscale() == "log"
    with pytest.raises(ValueError):
        plots.scatter([1], [1, 2], title="t", xlabel="x", ylabel="y")
    plt.close("all")


def test_timeline_colours_by_version_and_marks_failures():
    import pandas as pd

    frame = pd.DataFrame(
        {
            "start_s": [0.0, 0.1, 0.2, 0.3],
            "latency_ms": [5.0, 6.0, 0.0, 7.0],
            "ok": [True, True, False, True],
            "version": ["v1", "v1", None, "v2"],
        }
    )
    ax = plots.timeline(frame, by="version", title="update", vlines={"v2 deployed": 0.15})
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["v1", "v2", "failed (1)"]
    assert ax.get_yscale() == "log" and "latency" in ax.get_ylabel()


def test_alt_text_is_built_from_the_chart():
    ax = plots.bar({"serial": 1.0, "Ray": 2.0}, title="Speed-up", ylabel="x over serial")
    assert plots.describe(ax.figure) == "Chart: Speed-up: x over serial for serial, Ray"
    ax.set_xlabel("task length")
    assert plots.describe(ax.figure) == "Chart: Speed-up: x over serial against task length"
    assert plots.describe(plt.figure()) == "Chart"
