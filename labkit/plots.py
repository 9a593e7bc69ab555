"""The few chart types the lessons use, in one style: bars, curves and Gantt charts.

Every chart has a title and labelled axes with units; :func:`save` also writes it as a PNG next
to the notebook's records so a papermill run keeps its figures.

Used in: 00-13, lab_amp, lab_data, lab_lm, lab_objects, lab_serve, lab_tasks, lab_train,
lab_yardsticks.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt

from labkit import params

STYLE = {
    "figure.figsize": (7, 3.6),
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 10,
}
BASELINE_COLOR = "#999999"
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def _axes(ax=None):
    plt.rcParams.update(STYLE)
    if ax is None:
        _fig, ax = plt.subplots()
    return ax


def _mark(ax, vlines: Mapping[str, float] | None) -> None:
    """Dotted vertical lines at labelled moments on the x axis, labels stacked at the top."""
    for j, (label, at) in enumerate((vlines or {}).items()):
        ax.axvline(at, color=BASELINE_COLOR, linestyle=":", linewidth=1)
        ax.annotate(
            label,
            (at, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(3, -12 - 12 * j),
            textcoords="offset points",
            fontsize=8,
            color=BASELINE_COLOR,
        )


def _need(title: str, ylabel: str) -> None:
    if not title or not ylabel:
        raise ValueError("every chart needs a title and a y label with its unit")


def bar(
    values: Mapping[str, float],
    *,
    title: str,
    ylabel: str,
    baseline: str | None = None,
    annotate: str = "{:.3g}",
    ax=None,
):
    """Bars for a few labelled values; the baseline bar (if named) is drawn grey."""
    _need(title, ylabel)
    if not values:
        raise ValueError("nothing to plot")
    ax = _axes(ax)
    labels = list(values)
    colors = [
        BASELINE_COLOR if k == baseline else COLORS[i % len(COLORS)] for i, k in enumerate(labels)
    ]
    bars = ax.bar(labels, [values[k] for k in labels], color=colors)
    if annotate:
        ax.bar_label(bars, labels=[annotate.format(values[k]) for k in labels], padding=2)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    return ax


def stacked(
    parts: Mapping[str, Mapping[str, float]],
    *,
    title: str,
    ylabel: str,
    markers: Mapping[str, float] | None = None,
    marker_label: str = "measured peak",
    ax=None,
):
    """One stacked bar per label (``{bar: {part: value}}``), parts in a shared legend.

    ``markers`` draws a black tick per bar (for example the measured peak memory over a
    computed breakdown).
    """
    _need(title, ylabel)
    if not parts:
        raise ValueError("nothing to plot")
    ax = _axes(ax)
    labels = list(parts)
    kinds = list(dict.fromkeys(k for v in parts.values() for k in v))
    bottom = [0.0] * len(labels)
    for i, kind in enumerate(kinds):
        heights = [parts[label].get(kind, 0.0) for label in labels]
        ax.bar(labels, heights, bottom=bottom, color=COLORS[i % len(COLORS)], label=kind)
        bottom = [b + h for b, h in zip(bottom, heights)]
    if markers:
        xs = [i for i, label in enumerate(labels) if label in markers]
        ax.scatter(
            xs,
            [markers[labels[i]] for i in xs],
            marker="_",
            s=900,
            color="black",
            label=marker_label,
            zorder=3,
        )
    ax.legend(fontsize=8)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    return ax


def curves(
    x: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    logx: bool = False,
    logy: bool = False,
    hline: float | None = None,
    step: bool = False,
    vlines: Mapping[str, float] | None = None,
    ax=None,
):
    """One line per series over a shared x; ``hline`` draws a reference level (e.g. 1.0x).

    ``step`` draws counts that change in jumps (nodes, queued tasks) as steps without markers;
    ``vlines`` marks labelled moments on the x axis (e.g. ``{"wave 2": 31.0}``).
    """
    _need(title, ylabel)
    if not xlabel:
        raise ValueError("label the x axis with its unit")
    ax = _axes(ax)
    for i, (name, ys) in enumerate(series.items()):
        if len(ys) != len(x):
            raise ValueError(f"series {name!r} has {len(ys)} points, x has {len(x)}")
        color = COLORS[i % len(COLORS)]
        if step:
            ax.step(x, ys, where="post", label=name, color=color, linewidth=2)
        else:
            ax.plot(x, ys, marker="o", label=name, color=color)
    _mark(ax, vlines)
    if hline is not None:
        ax.axhline(hline, color=BASELINE_COLOR, linestyle="--", linewidth=1)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if len(series) > 1:
        ax.legend()
    return ax


def gantt(
    spans: Sequence[tuple[str, float, float, str]],
    *,
    title: str,
    xlabel: str = "time since start (s)",
    ax=None,
):
    """Horizontal bars ``(lane, start, end, kind)``: one row per lane, one colour per kind."""
    if not spans:
        raise ValueError("nothing to plot")
    ax = _axes(ax)
    lanes = sorted({s[0] for s in spans})
    kinds = list(dict.fromkeys(s[3] for s in spans))
    t0 = min(s[1] for s in spans)
    for lane, start, end, kind in spans:
        if end < start:
            raise ValueError(f"span on {lane!r} ends before it starts")
        ax.barh(
            lanes.index(lane),
            end - start,
            left=start - t0,
            height=0.8,
            color=COLORS[kinds.index(kind) % len(COLORS)],
            edgecolor="white",
            linewidth=0.3,
        )
    ax.set_yticks(range(len(lanes)), lanes)
    handles = [
        plt.Rectangle((0, 0), 1, 1, color=COLORS[i % len(COLORS)]) for i in range(len(kinds))
    ]
    ax.legend(handles, kinds, loc="upper right", fontsize=8)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.grid(axis="y", visible=False)
    return ax


class SavedPath(type(Path())):
    """The saved chart's path; a notebook cell that ends with :func:`save` echoes nothing."""

    def _ipython_display_(self) -> None:
        return None


def save(ax_or_fig, name: str, *, alt: str | None = None) -> Path:
    """Save a chart as ``RESULTS_DIR/<notebook>-<name>.png`` and return the path.

    In a notebook the chart is shown here, once, with ``alt`` in the output's metadata
    (``{"image/png": {"alt": ...}}``), which the site (``labkit site``) renders as the image's
    alt text; without ``alt``, the text is built from the chart's titles and axis labels."""
    fig = getattr(ax_or_fig, "figure", ax_or_fig)
    p = params.current()
    p.results_dir.mkdir(parents=True, exist_ok=True)
    path = p.results_dir / f"{p.notebook}-{name}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    if "inline" in matplotlib.get_backend():  # a Jupyter kernel: show it with its alt text
        from IPython.display import display

        png = base64.b64encode(path.read_bytes()).decode("ascii")
        display({"image/png": png}, raw=True, metadata={"image/png": {"alt": alt or describe(fig)}})
        plt.close(fig)  # the inline backend would show it a second time, without alt
    return SavedPath(path)


def describe(fig) -> str:
    """A chart's alt text from what it says of itself: its titles and axis labels."""
    parts = [fig._suptitle.get_text()] if getattr(fig, "_suptitle", None) else []
    for ax in fig.axes:
        y, x = ax.get_ylabel(), ax.get_xlabel()
        ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        if y and x:
            what = f"{y} against {x}"
        elif y and ticks and not any(t.lstrip("−-").replace(".", "").isdigit() for t in ticks):
            what = f"{y} for {', '.join(ticks)}"  # a bar chart's categories
        else:
            what = y or x
        parts.append(": ".join(b for b in (ax.get_title(), what) if b))
    text = "; ".join(p for p in parts if p)
    return f"Chart: {text}" if text else "Chart"


_BYTES = {"memory": "memory GiB", "object_store_memory": "object store GiB"}


def resource_table(by_name: Mapping[str, Mapping[str, float]]):
    """Ray resources (``ray.cluster_resources()``, or each node's ``"Resources"``) as a small
    table, one row per name: CPU and GPU counts, memory and object store in GiB (Ray gives
    bytes), custom resources in their own columns; Ray's ``node:...`` and accelerator-type
    markers left out."""
    import pandas as pd

    rows = {}
    for name, res in by_name.items():
        row: dict[str, float] = {"CPU": res.get("CPU", 0.0), "GPU": res.get("GPU", 0.0)}
        for key, label in _BYTES.items():
            row[label] = round(res.get(key, 0.0) / 2**30, 2)
        for key, value in sorted(res.items()):
            hidden = key.startswith(("node:", "accelerator_type"))
            if key not in row and key not in _BYTES and not hidden:
                row[key] = value
        rows[name] = row
    return pd.DataFrame.from_dict(rows, orient="index").fillna(0).rename_axis("node")


def learning_curves(
    curves: Mapping[str, Sequence[float]],
    *,
    full_length: int,
    title: str,
    xlabel: str,
    ylabel: str,
    ax=None,
):
    """One line per trial over its own epochs (1, 2, ...); a trial that stopped before
    ``full_length`` ends in a cross, labelled with the epoch (the rung) where it stopped."""
    _need(title, ylabel)
    ax = _axes(ax)
    for i, (name, ys) in enumerate(curves.items()):
        if not ys:
            continue
        color = COLORS[i % len(COLORS)]
        xs = list(range(1, len(ys) + 1))
        ax.plot(xs, ys, color=color, linewidth=1.5, label=name)
        if len(ys) < full_length:
            ax.plot(xs[-1], ys[-1], marker="x", color=color, markersize=9, mew=2)
            ax.annotate(
                f"stopped at {xs[-1]}",
                (xs[-1], ys[-1]),
                xytext=(4, -10),
                textcoords="offset points",
                fontsize=7,
                color=color,
            )
    ax.set_xlim(0.8, full_length + 0.2)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if len(curves) <= 8:
        ax.legend(fontsize=7)
    return ax


def scatter(
    x: Sequence[float],
    y: Sequence[float],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    logx: bool = False,
    ax=None,
):
    """Points of ``y`` against ``x`` (a score against one hyperparameter, say)."""
    _need(title, ylabel)
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} points, y has {len(y)}")
    ax = _axes(ax)
    ax.scatter(x, y, color=COLORS[0])
    if logx:
        ax.set_xscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return ax


def timeline(
    frame,
    *,
    by: str,
    title: str,
    vlines: Mapping[str, float] | None = None,
    ax=None,
):
    """Each request's latency (log scale) at the moment it was sent, coloured by ``by`` (the
    version or replica that answered); a failed request is a red cross at its latency.

    ``frame`` has one row per request (``labkit.loadgen.LoadResult.frame()``); ``vlines`` marks
    moments such as ``{"v2 deployed": 3.1}``."""
    ax = _axes(ax)
    answered = frame[frame["ok"]]
    for i, (name, group) in enumerate(answered.groupby(by, sort=True)):
        ax.scatter(
            group["start_s"], group["latency_ms"], s=6, color=COLORS[i % len(COLORS)], label=name
        )
    failed = frame[~frame["ok"]]
    if len(failed):
        ax.scatter(
            failed["start_s"],
            failed["latency_ms"].clip(lower=0.1),
            marker="x",
            s=30,
            color="#d62728",
            label=f"failed ({len(failed)})",
        )
    _mark(ax, vlines)
    ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel("time since the load started (s)")
    ax.set_ylabel("latency (ms, log)")
    ax.legend(fontsize=7, markerscale=2, title=by, title_fontsize=7)
    return ax
