"""Measure, compare and record: timing with warm-up, ratios against a baseline, JSON-line records.

Every performance statement in a lesson is a ratio against a baseline measured in the same run,
and every figure is recorded with :func:`record` so papermill runs can be collected.
This module imports no Ray, so it can time anything.

Used in: 00-13, lab_amp, lab_data, lab_lm, lab_objects, lab_serve, lab_tasks, lab_train,
lab_yardsticks.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import platform
import re
import socket
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from labkit import params

METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*\.[a-z0-9_.]+$")


@dataclass(frozen=True)
class Timing:
    """Wall-clock seconds of repeated runs of one callable, after warm-up."""

    label: str
    runs: tuple[float, ...]
    warmup: int

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def min(self) -> float:
        return min(self.runs)

    @property
    def max(self) -> float:
        return max(self.runs)

    def rate(self, items: float) -> float:
        """Items per second at the median time (e.g. tasks/s for ``items`` tasks)."""
        return items / self.median if self.median > 0 else math.inf

    def __str__(self) -> str:
        return (
            f"{self.label}: median {self.median * 1e3:.1f} ms "
            f"(min {self.min * 1e3:.1f}, max {self.max * 1e3:.1f}, {len(self.runs)} runs)"
        )


def timeit(
    fn: Callable[[], Any], *, repeats: int = 5, warmup: int = 1, label: str | None = None
) -> Timing:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times timed; return the timings."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    for _ in range(warmup):
        fn()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return Timing(label or getattr(fn, "__name__", "fn"), tuple(runs), warmup)


@dataclass(frozen=True)
class Stream:
    """One pass over a stream of batches: when the first batch came, and how fast the rest did."""

    label: str
    first_s: float  # from asking for the iterator to holding the first batch
    total_s: float
    rows: int
    first_rows: int

    @property
    def steady_s(self) -> float:
        return self.total_s - self.first_s

    @property
    def steady_rate(self) -> float:
        """Rows per second after the first batch: the stream's steady state."""
        rest = self.rows - self.first_rows
        return rest / self.steady_s if self.steady_s > 0 else math.inf

    @property
    def rate(self) -> float:
        """Rows per second over the whole pass, first batch included."""
        return self.rows / self.total_s if self.total_s > 0 else math.inf


def stream_pass(
    make_batches: Callable[[], Any], rows_of: Callable[[Any], int], label: str = "stream"
) -> Stream:
    """Drain ``make_batches()`` once, timing the first batch apart from the rest."""
    start = time.perf_counter()
    first_s, rows, first_rows = None, 0, 0
    for batch in make_batches():
        n = rows_of(batch)
        if first_s is None:
            first_s, first_rows = time.perf_counter() - start, n
        rows += n
    total = time.perf_counter() - start
    return Stream(label, total if first_s is None else first_s, total, rows, first_rows)


def stream_passes(
    make_batches: Callable[[], Any],
    rows_of: Callable[[Any], int],
    *,
    repeats: int = 3,
    warmup: int = 1,
    label: str = "stream",
) -> list[Stream]:
    """``warmup`` untimed passes, then ``repeats`` timed ones (see :func:`median_stream`)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        stream_pass(make_batches, rows_of, label)
    return [stream_pass(make_batches, rows_of, label) for _ in range(repeats)]


def ingest(
    readers: Mapping[str, Callable[[], Any]],
    rows_of: Callable[[Any], int],
    *,
    repeats: int,
    n_rows: int,
) -> dict[str, dict[str, float]]:
    """Lesson 06's reader race: each reader (label -> a callable that starts one full pass)
    timed by :func:`stream_passes`, one warm-up pass and ``repeats`` timed ones; every pass must
    deliver ``n_rows`` rows. Returns each label's :func:`median_stream`."""
    medians = {}
    for label, make in readers.items():
        passes = stream_passes(make, rows_of, repeats=repeats, label=label)
        short = [s.rows for s in passes if s.rows != n_rows]
        if short:
            raise AssertionError(f"{label}: expected {n_rows} rows a pass, got {short}")
        medians[label] = median_stream(passes)
    return medians


def median_stream(passes: list[Stream]) -> dict[str, float]:
    """Medians over passes: first-batch seconds, steady rows/s, whole-pass rows/s, and the share
    of a pass spent waiting for its first batch."""
    return {
        "first_s": statistics.median(s.first_s for s in passes),
        "steady_rate": statistics.median(s.steady_rate for s in passes),
        "rate": statistics.median(s.rate for s in passes),
        "first_share": statistics.median(s.first_s / s.total_s for s in passes if s.total_s > 0),
    }


def windowed_rate(
    fn: Callable[[], Any],
    items_per_call: int,
    *,
    warmup_s: float = 1.0,
    window_s: float = 2.0,
    windows: int = 4,
) -> float:
    """Items per second the way ``ray microbenchmark`` counts them (``ray_microbenchmark_helpers
    .timeit``): call ``fn`` for ``warmup_s``, then count calls in ``windows`` windows of
    ``window_s``; the median window's rate (Ray prints the mean)."""
    if windows < 1 or window_s <= 0:
        raise ValueError(f"need windows >= 1 and window_s > 0, got {windows}, {window_s}")
    start = time.perf_counter()
    while time.perf_counter() - start < warmup_s:
        fn()
    rates = []
    for _ in range(windows):
        start, calls = time.perf_counter(), 0
        while time.perf_counter() - start < window_s:
            fn()
            calls += 1
        rates.append(items_per_call * calls / (time.perf_counter() - start))
    return statistics.median(rates)


def speedup(baseline: Timing, candidate: Timing) -> float:
    """How many times faster ``candidate`` is than ``baseline`` (median over median; >1: faster)."""
    if candidate.median <= 0:
        raise ValueError(f"{candidate.label} took no measurable time; time more work per run")
    return baseline.median / candidate.median


def compare(baseline: Timing, *candidates: Timing) -> dict[str, float]:
    """Speed-up of each candidate over the baseline, keyed by label (the baseline is 1.0)."""
    out = {baseline.label: 1.0}
    for c in candidates:
        out[c.label] = speedup(baseline, c)
    return out


def package_version(dist: str) -> str | None:
    """The installed version of a distribution, or None (nothing is imported)."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """What a record needs to be compared across machines: host, CPUs, memory, versions, GPU."""
    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "ray": package_version("ray"),
        "torch": package_version("torch"),
    }
    try:
        import psutil

        info["memory_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:  # pragma: no cover
        pass
    torch = sys.modules.get("torch")  # only if the notebook already imported it
    if torch is not None and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_count"] = torch.cuda.device_count()
    return info


class Record(dict):
    """A recorded figure: a plain dict that a notebook does not echo when a cell ends with it."""

    def _ipython_display_(self) -> None:  # IPython calls this instead of printing the dict
        return None


#: Units whose direction is plain: a rate is better higher, a time or a size lower.
_LOWER_UNITS = {"s", "ms", "us", "µs", "ns", "min", "bytes", "mb", "gb", "mib", "gib"}


def better_for(unit: str) -> str | None:
    """Which way a figure of ``unit`` is better when :func:`record` is not told: ``"higher"``
    for a rate (``tasks/s``, ``GB/s``), ``"lower"`` for a time or a size, else None (a ratio,
    a fraction or a count says nothing by its unit; pass ``better=`` for those)."""
    u = unit.strip().lower()
    if u.endswith("/s"):
        return "higher"
    return "lower" if u in _LOWER_UNITS else None


def record(
    metric: str, value: float, unit: str, *, better: str | None = None, **context: Any
) -> Record:
    """Append one measured figure to ``RESULTS_DIR/<notebook>.jsonl`` and return the record.

    ``better`` (``"higher"`` or ``"lower"``) says which way is an improvement, so that
    ``labkit bench compare`` can flag a regression; without it, :func:`better_for` reads it
    from the unit where the unit says (a rate, a time, a size), and it stays unknown otherwise.
    """
    if better not in (None, "higher", "lower"):
        raise ValueError(f"{metric}: better={better!r}; use 'higher', 'lower' or leave it out")
    if not isinstance(metric, str) or not METRIC_NAME.match(metric):
        raise ValueError(f"metric {metric!r} must look like 'topic.measure', e.g. tasks.sync_per_s")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{metric}: value must be a finite number, got {value!r}")
    if not isinstance(unit, str) or not unit.strip():
        raise ValueError(f"{metric}: give a unit, e.g. 'tasks/s', 'x', 'ms' or 'bytes'")
    p = params.current()
    rec = Record(
        metric=metric,
        value=float(value),
        unit=unit,
        better=better or better_for(unit),
        notebook=p.notebook,
        size=p.size,
        device=p.device,
        seed=p.seed,
        time=datetime.now(UTC).isoformat(timespec="seconds"),
        context=_jsonable(context),
        machine=machine_info(),
    )
    p.results_dir.mkdir(parents=True, exist_ok=True)
    with open(records_path(), "a", encoding="utf-8") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")
    return rec


def records_path() -> Path:
    """Where this notebook's records go."""
    p = params.current()
    return p.results_dir / f"{p.notebook}.jsonl"


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a ``.jsonl`` records file (or every one in a folder)."""
    path = Path(path)
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    out = []
    for file in files:
        with open(file, encoding="utf-8") as f:
            out.extend(json.loads(line) for line in f if line.strip())
    return out


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, Timing):
        return _jsonable(asdict(obj) | {"median": obj.median})
    if isinstance(obj, str | int | float | bool) or obj is None:
        return obj
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    return str(obj)


@dataclass(frozen=True)
class Versus:
    """Repeated samples of a candidate against repeated samples of its baseline (or one fixed
    figure): their medians, their ranges, and whether the ranges overlap (then neither is shown
    to differ: "within
    noise"). What :func:`verdict` takes as ``noise=``."""

    a: tuple[float, ...]
    b: tuple[float, ...]
    unit: str = ""

    @property
    def ratio(self) -> float:
        """Median of the candidate over median of the baseline."""
        below = statistics.median(self.b)
        return statistics.median(self.a) / below if below else math.inf

    @property
    def overlap(self) -> bool:
        """Whether the two ranges share a value: the difference is within the run's noise."""
        return max(min(self.a), min(self.b)) <= min(max(self.a), max(self.b))

    def fields(self) -> dict[str, Any]:
        """Fields for a verdict's templates: ``a`` and ``b`` (medians), ``a_range`` and
        ``b_range`` ("lo-hi unit", or the one figure), ``n`` (the fewer of the two sample counts;
        against a fixed figure, the candidate's), ``ratio``."""

        def span(xs: tuple[float, ...]) -> str:
            unit = f" {self.unit}" if self.unit else ""
            if len(set(xs)) == 1:  # one fixed figure
                return f"{xs[0]:.3g}{unit}"
            return f"{min(xs):.3g}-{max(xs):.3g}{unit}"

        return {
            "a": statistics.median(self.a),
            "b": statistics.median(self.b),
            "a_range": span(self.a),
            "b_range": span(self.b),
            "n": min(len(self.a), len(self.b)) if len(self.b) > 1 else len(self.a),
            "ratio": self.ratio,
        }


def versus(candidate: Any, baseline: Any, unit: str = "") -> Versus:
    """Compare two sets of repeated samples (at least 2 each; a :class:`Timing` gives its runs):
    a verdict on one number against another cannot tell a difference from the run's noise.

    ``baseline`` may also be one fixed figure, such as a claim's bound (``versus(repeats, 2.0)``):
    the ranges then overlap when the candidate's repeats fall on both sides of it."""
    a = tuple(candidate.runs if isinstance(candidate, Timing) else candidate)
    if isinstance(baseline, numbers.Real) and not isinstance(baseline, bool):
        if len(a) < 2:
            raise ValueError(f"a comparison needs repeated samples (got {len(a)}): repeat it")
        return Versus(tuple(float(x) for x in a), (float(baseline),), unit)
    b = tuple(baseline.runs if isinstance(baseline, Timing) else baseline)
    if min(len(a), len(b)) < 2:
        raise ValueError(
            f"a comparison needs repeated samples on both sides (got {len(a)} and {len(b)}): "
            "repeat the measurement"
        )
    return Versus(tuple(float(x) for x in a), tuple(float(x) for x in b), unit)


#: Sentences that replace a verdict's English template, by message key (``"<metric>:<side>"``).
#: With ``LABKIT_LANG=zh`` the Chinese comes from ``zh/verdicts.md`` (:mod:`labkit.lang`); the
#: run's numbers and records stay the same.
MESSAGES: dict[str, str] = {}
_SIDES = {True: "yes", False: "no"}


class Held:
    """What :func:`verdict` returns: true when the verdict held, and silent as a cell's last
    value (a bare ``labkit.verdict(...)`` printed its sentence, then echoed ``True``)."""

    __slots__ = ("holds",)

    def __init__(self, holds: bool) -> None:
        self.holds = bool(holds)

    def __bool__(self) -> bool:
        return self.holds

    def __eq__(self, other: object) -> bool:
        return self.holds == other

    def __hash__(self) -> int:
        return hash(self.holds)

    def __repr__(self) -> str:
        return repr(self.holds)

    def _ipython_display_(self) -> None:  # IPython shows nothing for it
        return None


def verdict(
    metric: str,
    holds: object,
    *,
    yes: str,
    no: str,
    within_noise: str | None = None,
    samples: Versus | None = None,
    unit: str = "bool",
    **values: Any,
) -> Held:
    """Print one sentence about this run, chosen by the run's numbers, and record it.

    ``metric`` names the verdict like a figure (``"tasks.verdict_faster_100ms"``: the part after
    the topic starts with ``verdict_``); ``holds`` is the condition read from the run; ``yes`` and
    ``no`` are templates with named fields filled from ``values``, and exactly one of them is
    printed. The record is 1.0 when the verdict holds and 0.0 when not, with the message key
    (``"<metric>:yes"`` or ``":no"``) and the values in its context, so a sweep shows how often a
    verdict flips between runs and machines. Returns whether it held, as a :class:`Held`
    (true or false, and silent as a cell's last value).

    A verdict that compares two measurements passes their repeated samples as ``samples=``
    (:func:`versus`) and a third template, ``within_noise``: when the samples' ranges overlap, it
    is printed (with the spread), the record is 0.5 with the key ``<metric>:within_noise``, and
    the verdict does not hold. The comparison's fields (:meth:`Versus.fields`) are added to
    ``values``.
    """
    topic, _, name = metric.partition(".")
    if not name.startswith("verdict_"):
        raise ValueError(f"{metric!r}: name a verdict 'topic.verdict_<what>'")
    if taken := {"key", "sentence", "metric", "value"} & set(values):
        raise ValueError(f"{metric}: {sorted(taken)} name the record's own fields; rename them")
    if samples is not None:
        if within_noise is None:
            raise ValueError(f"{metric}: samples= needs a within_noise= template")
        values = {**samples.fields(), **values}
    within = samples is not None and samples.overlap
    holds = bool(holds) and not within
    side = "within_noise" if within else _SIDES[holds]
    key = f"{metric}:{side}"
    from labkit import lang

    english = within_noise if within else (yes if holds else no)
    template = MESSAGES.get(key) or lang.verdict_template(key, english)
    sides = (yes, no, template) + ((within_noise,) if within_noise is not None else ())
    for other in sides:  # a typo in the side not taken must not wait for a run
        try:
            other.format(**values)
        except (KeyError, IndexError) as missing:
            raise ValueError(
                f"{metric}: the template {other!r} names {missing}, which was not given (use "
                "named fields)"
            ) from None
    said = {k: lang.phrase(v) for k, v in values.items()}  # spliced words, in the language
    line = template.format(**said)
    record(metric, 0.5 if within else float(holds), unit, key=key, sentence=line, **values)
    print(line)
    return Held(bool(holds))
