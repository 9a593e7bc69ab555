"""A sweep's ``results.csv`` as statistics, plots and ``report.md``; two runs compared.

Each figure is identified by its notebook, metric, series (the record's context: ``shard=kept``)
and point (the swept values); its repeats give the median, min, max and spread. ``compare``
flags only a change for the worse beyond ``max(10%, 2 x the larger coefficient of variation of
the two runs' repeats)``, in the direction the record says is better.

Used by: ``labkit bench`` and ``labkit bench compare`` (labkit/tools/cli_bench.py).

Used in: no lesson or lab report.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

KEY = ["notebook", "metric", "unit", "series", "point"]
#: The smallest change ``compare`` flags, whatever the noise.
MIN_CHANGE = 0.10


def load(path: str | Path) -> pd.DataFrame:
    """A run's records: ``results.csv`` or a run folder holding one."""
    path = Path(path)
    csv = path / "results.csv" if path.is_dir() else path
    if not csv.is_file():
        raise FileNotFoundError(f"no results.csv in {path}")
    df = pd.read_csv(csv, keep_default_na=False, na_values=[""])
    for col in ("series", "better", "point"):
        if col in df:
            df[col] = df[col].fillna("")
    return df


def _cv(values: list[float]) -> float:
    """Coefficient of variation of the repeats (stdev / |mean|); 0 for one repeat."""
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    return statistics.stdev(values) / abs(mean) if mean else math.inf


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """One row per figure (notebook, metric, unit, series, point): repeats, median, min, max,
    spread ((max - min) / |median|) and cv, with the direction that is better. Records of a run
    that failed are left out."""
    rows = []
    params = [c for c in df.columns if c.startswith("param.")]
    if "status" in df:  # what a failed run recorded before it failed is not a repeat
        df = df[df["status"].fillna("ok") == "ok"]
    for key, group in df.groupby(KEY, sort=False, dropna=False):
        values = [float(v) for v in group["value"]]
        median = statistics.median(values)
        better = next((b for b in group.get("better", []) if b), "")
        rows.append(
            dict(zip(KEY, key))
            | {p: group[p].iloc[0] for p in params}
            | {
                "better": better,
                "repeats": len(values),
                "median": median,
                "min": min(values),
                "max": max(values),
                "spread": (max(values) - min(values)) / abs(median) if median else 0.0,
                "cv": _cv(values),
            }
        )
    return pd.DataFrame(rows)


def _fmt(x: float) -> str:
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    return f"{x:,.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def plot_metrics(summary: pd.DataFrame, folder: Path) -> list[tuple[str, str, Path]]:
    """A plot of each metric against its swept parameter (median, min-max bars, one line per
    series), for each notebook whose sweep varied one: ``(notebook, metric, png)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    params = [c for c in summary.columns if c.startswith("param.")]
    for (notebook, metric, unit), group in summary.groupby(["notebook", "metric", "unit"]):
        swept = [p for p in params if group[p].notna().any() and group[p].nunique() > 1]
        if not swept:
            continue
        x = swept[0]
        name = x.removeprefix("param.").lower()
        # a context entry named as the swept knob (workers=2 for WORKERS) is the x, not a line
        series_of = group["series"].map(
            lambda s, name=name: ", ".join(
                t for t in s.split(", ") if t.split("=")[0].lower() != name
            )
        )
        fig, ax = plt.subplots(figsize=(6, 3.6))
        for series, lines in group.assign(series=series_of).groupby("series"):
            lines = lines.sort_values(x, key=_sort_key)
            xs = [_label(v) for v in lines[x]]
            med = lines["median"].to_numpy()
            err = [med - lines["min"].to_numpy(), lines["max"].to_numpy() - med]
            ax.errorbar(xs, med, yerr=err, marker="o", capsize=3, label=series or metric)
        ax.set_title(f"{notebook}: {metric}", fontsize=9)
        ax.set_xlabel(x.removeprefix("param."))
        ax.set_ylabel(f"{metric.split('.', 1)[1]} ({unit})", fontsize=8)
        if series_of.nunique() > 1:
            ax.legend(fontsize=6)
        png = folder / f"{notebook}--{metric}.png"
        fig.tight_layout()
        fig.savefig(png, dpi=100)
        plt.close(fig)
        out.append((notebook, metric, png))
    return out


def _label(v: Any) -> str:
    """A swept value as the axis shows it: 2.0 read back from the CSV as 2."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _sort_key(col: pd.Series) -> pd.Series:
    """Numbers in numeric order, anything else as text."""
    return col.map(lambda v: (0, float(v), "") if _is_number(v) else (1, 0.0, str(v)))


def _is_number(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def write_report(run: Path, extra: list[str] | None = None) -> Path:
    """``report.md`` for a run folder: the machine, the points run and failed, each figure's
    median, min, max and spread over repeats, and a plot of each swept metric."""
    df = load(run)
    summary = summarize(df)
    summary.to_csv(run / "summary.csv", index=False)
    meta = json.loads((run / "sweep.json").read_text()) if (run / "sweep.json").is_file() else {}
    points = pd.read_csv(run / "points.csv") if (run / "points.csv").is_file() else None
    lines = [f"# Bench run `{run.name}`", ""]
    if meta:
        m = meta.get("machine", {})
        lines += [
            f"Sweep `{meta.get('sweep')}` at `SIZE={meta.get('size')}`, commit "
            f"`{meta.get('commit')}`, started {meta.get('started')}.",
            "",
            "| machine | |",
            "|---|---|",
            *[f"| {k} | {v} |" for k, v in m.items()],
            "",
        ]
    if points is not None:
        failed = points[points["status"] != "ok"]
        lines += [
            f"{len(points)} runs, {len(failed)} failed, "
            f"{points['seconds'].sum():.0f} s of notebook time.",
            "",
        ]
        if len(failed):
            lines += ["| failed run | error |", "|---|---|"]
            for r in failed.itertuples():
                lines.append(f"| {r.run} | {str(r.error).replace('|', '/')} |")
            lines.append("")
    lines += extra or []
    lines += yardstick_lines(summary)
    params = [c for c in summary.columns if c.startswith("param.")]
    for notebook, group in summary.groupby("notebook", sort=False):
        group = group.sort_values(["metric", "series"], kind="stable")
        lines += [f"## {notebook}", ""]
        lines += [
            "| metric | series | point | better | n | median | min | max | spread |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in group.itertuples():
            lines.append(
                f"| {r.metric} ({r.unit}) | {r.series} | {r.point} | {r.better} | {r.repeats} "
                f"| {_fmt(r.median)} | {_fmt(r.min)} | {_fmt(r.max)} | {r.spread:.0%} |"
            )
        lines.append("")
        columns = [*KEY, *params, "median", "min", "max"]
        for _nb, metric, png in plot_metrics(group[columns], run / "plots"):
            lines += [f"![{metric} against the swept parameter]({png.relative_to(run)})", ""]
    path = run / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


#: The figures of lab_yardsticks that hold the kit against Ray and the machine, and what each is.
YARDSTICKS = {
    "yardstick.kit_vs_ray": "the kit's pattern / ray microbenchmark's",
    "yardstick.kit_serve_vs_ray_p50": "the kit's Serve app / Serve's no-op benchmark, p50",
    "yardstick.put_vs_memcpy": "the kit's ray.put / a copy into touched memory",
}


def yardstick_lines(summary: pd.DataFrame) -> list[str]:
    """The report's first section, where the run has them: each ratio of the kit to Ray's own
    benchmarks and to the machine's copy, with its spread."""
    rows = summary[summary["metric"].isin(list(YARDSTICKS))]
    if rows.empty:
        return []
    lines = [
        "## Against Ray's yardsticks and the machine's",
        "",
        "| ratio | test | median | min | max | n |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows.itertuples():
        lines.append(
            f"| {YARDSTICKS[r.metric]} | {r.series} | {r.median:.2f} | {r.min:.2f} "
            f"| {r.max:.2f} | {r.repeats} |"
        )
    return [*lines, ""]


@dataclass(frozen=True)
class Change:
    """One figure in two runs: B's median over A's, the threshold, and whether it is worse.
    ``a`` or ``b`` is None where the figure is missing from that run."""

    key: tuple
    better: str
    a: float | None
    b: float | None
    ratio: float | None
    threshold: float
    worse: bool

    @property
    def note(self) -> str:
        if self.b is None:
            return "**missing in B**"
        if self.a is None:
            return "new in B"
        if self.ratio is None:
            return "at or below zero: not compared"
        return "**worse**" if self.worse else ""


def compare(a: pd.DataFrame, b: pd.DataFrame) -> list[Change]:
    """Every figure of either run: B / A, flagged worse only past the noise band, in the
    direction its record says is better. A figure without a direction, or at or below zero in
    either run (a ratio says nothing there), is listed and never flagged; a figure of A that B
    lacks is flagged (a notebook or a metric that stopped recording is a regression too)."""
    sa, sb = summarize(a), summarize(b)
    joined = sa.merge(sb, on=KEY, how="outer", suffixes=("_a", "_b"), indicator=True)
    out = []
    for r in joined.to_dict("records"):
        key = tuple(r[k] for k in KEY)
        better = (r.get("better_a") if isinstance(r.get("better_a"), str) else "") or (
            r.get("better_b") if isinstance(r.get("better_b"), str) else ""
        )
        if r["_merge"] != "both":
            in_a = r["_merge"] == "left_only"
            ma, mb = (r["median_a"], None) if in_a else (None, r["median_b"])
            out.append(Change(key, better, ma, mb, None, MIN_CHANGE, in_a))
            continue
        ma, mb = r["median_a"], r["median_b"]
        threshold = max(MIN_CHANGE, 2 * max(r["cv_a"], r["cv_b"]))
        if ma <= 0 or mb <= 0 or not math.isfinite(threshold):
            out.append(Change(key, better, ma, mb, None, threshold, False))
            continue
        ratio = mb / ma
        worse = (better == "higher" and ratio < 1 - threshold) or (
            better == "lower" and ratio > 1 + threshold
        )
        out.append(Change(key, better, ma, mb, ratio, threshold, worse))
    return out


def compare_table(changes: list[Change]) -> list[str]:
    """The comparison as markdown lines, regressions first."""
    lines = [
        "| notebook | metric | series | point | better | A | B | B/A | band | |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in sorted(changes, key=lambda c: (not c.worse, c.ratio is None, c.key)):
        notebook, metric, unit, series, point = c.key
        a = _fmt(c.a) if c.a is not None else "-"
        b = _fmt(c.b) if c.b is not None else "-"
        ratio = f"{c.ratio:.2f}" if c.ratio is not None else "-"
        lines.append(
            f"| {notebook} | {metric} ({unit}) | {series} | {point} | {c.better or '?'} "
            f"| {a} | {b} | {ratio} | ±{c.threshold:.0%} | {c.note} |"
        )
    return lines
