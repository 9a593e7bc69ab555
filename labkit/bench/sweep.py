"""Sweeps as files: ``bench/sweeps/*.yaml`` names notebooks and a grid of their parameters;
:func:`load` validates it before anything runs, :func:`run` executes each point through
papermill (going on past a failed one) and collects every record into ``results.csv``.

A sweep file::

    size: smoke                      # optional: the SIZE of every point (else LABKIT_SIZE)
    notebooks:
      - notebook: lab_tasks          # a lab report in bench/ or a lesson in notebooks/
        grid: {TASK_MS: [1, 10]}     # the notebook's own parameter names, each with its values
        repeats: 3                   # runs of each point (default 1)
        params: {N_ROUNDS: 2}        # fixed parameters for every point (optional)

Used by: ``labkit bench`` (labkit/tools/cli_bench.py).

Used in: no lesson or lab report.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import itertools
import json
import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from labkit import params
from labkit.checks import error_line


class SweepError(ValueError):
    """A sweep file that cannot run: names what is wrong and what would be valid."""


@dataclass(frozen=True)
class Entry:
    """One notebook of a sweep: its path, the grid of its parameters, repeats, fixed params."""

    notebook: Path
    grid: dict[str, list[Any]]
    repeats: int = 1
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.notebook.stem


@dataclass(frozen=True)
class Sweep:
    """A validated sweep file."""

    path: Path
    size: str | None
    entries: tuple[Entry, ...]

    @property
    def run_size(self) -> str:
        """The SIZE every point runs at: the file's ``size:``, else ``LABKIT_SIZE``, else smoke."""
        return self.size or os.environ.get("LABKIT_SIZE") or "smoke"


@dataclass(frozen=True)
class Point:
    """One run: a notebook with one value of each swept parameter, and which repeat it is."""

    entry: Entry
    values: dict[str, Any]
    repeat: int

    @property
    def label(self) -> str:
        """``TASK_MS=10,N_TASKS=100``: the point without its repeat, the entry's fixed
        parameters after its swept ones (two entries of one notebook stay apart)."""
        both = {**self.values, **self.entry.params}
        return ",".join(f"{k}={_short(v)}" for k, v in both.items()) or "default"

    @property
    def run_id(self) -> str:
        """A folder name for this run: the notebook, the point and the repeat; a long point
        is cut and a hash of the whole keeps it apart from others."""
        label = self.label
        if len(label) > 80:
            digest = hashlib.sha1(label.encode()).hexdigest()[:10]
            label = f"{label[:60]}-{digest}"
        return f"{self.entry.name}--{label}--r{self.repeat}"


def _short(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":")) if not isinstance(value, str) else value
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)


def find_notebook(name: str, root: Path | None = None) -> Path:
    """A lab report (``lab_*`` in ``bench/``) or a lesson (``NN_topic`` or ``NN`` in
    ``notebooks/``); a path to a notebook also works. Raises :class:`SweepError` naming it."""
    root = root or params.repo_root()
    direct = Path(name)
    if direct.suffix == ".ipynb" and (direct.is_file() or (root / direct).is_file()):
        return direct if direct.is_file() else root / direct
    where = root / ("bench" if name.startswith("lab_") else "notebooks")
    matches = sorted(where.glob(f"{name}*.ipynb"))
    if len(matches) != 1:
        known = sorted(p.stem for p in (root / "bench").glob("lab_*.ipynb"))
        known += sorted(p.stem for p in (root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
        raise SweepError(
            f"notebook {name!r} is {'ambiguous' if matches else 'not found'}; "
            f"known: {', '.join(known)}"
        )
    return matches[0]


def notebook_parameters(path: Path) -> dict[str, Any]:
    """The names (and default values, as written) in a notebook's ``parameters`` cell."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            out = {}
            for node in ast.parse(cell.source).body:
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            out[target.id] = ast.literal_eval(node.value)
            return out
    raise SweepError(f"{path.name} has no cell tagged 'parameters'")


def load(path: str | Path, root: Path | None = None) -> Sweep:
    """Read and validate a sweep file; every problem is found before anything runs."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise SweepError(f"no sweep file {path}")
    spec = yaml.safe_load(path.read_text()) or {}
    if not isinstance(spec, dict) or not isinstance(spec.get("notebooks"), list):
        raise SweepError(f"{path}: expected 'notebooks: [{{notebook: ..., grid: {{...}}}}, ...]'")
    unknown = set(spec) - {"notebooks", "size"}
    if unknown:
        raise SweepError(f"{path}: unknown key(s) {sorted(unknown)}; use 'notebooks' and 'size'")
    size = spec.get("size")
    if size is not None and size not in params.SIZES:
        raise SweepError(f"{path}: size {size!r} is not one of {', '.join(params.SIZES)}")
    entries = []
    for i, item in enumerate(spec["notebooks"]):
        where = f"{path.name}: notebooks[{i}]"
        if not isinstance(item, dict) or "notebook" not in item:
            raise SweepError(f"{where}: give 'notebook: <name>' (and 'grid', 'repeats', 'params')")
        extra = set(item) - {"notebook", "grid", "repeats", "params"}
        if extra:
            raise SweepError(f"{where}: unknown key(s) {sorted(extra)}")
        name = item["notebook"]
        if isinstance(name, int):  # `notebook: 07` reads as the number 7
            name = f"{name:02d}"
        nb = find_notebook(str(name), root)
        known = notebook_parameters(nb)
        grid = item.get("grid") or {}
        fixed = item.get("params") or {}
        if not isinstance(grid, dict) or not isinstance(fixed, dict):
            raise SweepError(f"{where}: 'grid' and 'params' map parameter names to values")
        for name in [*grid, *fixed]:
            if name not in known:
                raise SweepError(
                    f"{where}: {nb.stem} has no parameter {name!r}; its parameters: "
                    f"{', '.join(known)}"
                )
            if name in ("SIZE", "RESULTS_DIR"):
                raise SweepError(f"{where}: {name} is set by the sweep ('size:' at the top)")
        for name, values in grid.items():
            if not isinstance(values, list) or not values:
                raise SweepError(f"{where}: grid {name} needs a non-empty list of values")
        repeats = item.get("repeats", 1)
        if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
            raise SweepError(f"{where}: repeats must be a whole number >= 1, got {repeats!r}")
        entries.append(Entry(nb, dict(grid), repeats, dict(fixed)))
    if not entries:
        raise SweepError(f"{path}: 'notebooks' is empty")
    return Sweep(path, size, tuple(entries))


def points(sweep: Sweep) -> list[Point]:
    """Every run of the sweep: each entry's grid product, each point ``repeats`` times, the
    repeats of one point interleaved with the others (so a slow minute does not hit one point)."""
    out = []
    for entry in sweep.entries:
        names = list(entry.grid)
        combos = [dict(zip(names, vals)) for vals in itertools.product(*entry.grid.values())]
        for repeat in range(entry.repeats):
            out.extend(Point(entry, combo, repeat) for combo in combos)
    return out


def _execute(notebook: Path, output: Path, parameters: dict[str, Any], *, timeout: int) -> None:
    """Run one point (:func:`labkit.runtime.nbexec.execute`: papermill, or nbclient alone)."""
    from labkit.runtime.nbexec import execute

    execute(notebook, output, parameters=parameters, timeout=timeout)


class Executor(Protocol):
    """What :func:`run` calls for each point (:func:`_execute`; a test may pass its own)."""

    def __call__(
        self, notebook: Path, output: Path, parameters: dict[str, Any], *, timeout: int
    ) -> None: ...


def run(
    sweep: Sweep,
    out: Path,
    *,
    execute: Executor = _execute,
    cell_timeout: int = 600,
    progress: bool = True,
) -> dict[str, Any]:
    """Run every point into ``out`` (executed notebooks under ``notebooks/``, each run's records
    under ``points/<run>/``), go on past a failure, and write ``points.csv`` (one line a run:
    status, seconds, error) and ``results.csv`` (one line a record, with the point's values, the
    repeat and the machine's fingerprint). Returns what was run and what failed."""
    from labkit.bench import store

    if (out / "points").exists():
        raise SweepError(f"{out} holds a sweep's runs already: give a new --out")
    out.mkdir(parents=True, exist_ok=True)
    size = sweep.run_size
    machine = store.fingerprint()
    started = datetime.now().isoformat(timespec="seconds")
    todo = points(sweep)
    runs: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    bar = _progress(todo, progress)
    for point in bar:
        bar.set_description(f"{point.entry.name} {point.label} r{point.repeat}")
        results_dir = out / "points" / point.run_id
        executed = out / "notebooks" / f"{point.run_id}.ipynb"
        executed.parent.mkdir(parents=True, exist_ok=True)
        parameters = {**point.entry.params, **point.values}
        parameters |= {"SIZE": size, "RESULTS_DIR": str(results_dir.resolve())}
        start = time.monotonic()
        status, error = "ok", ""
        try:
            execute(point.entry.notebook, executed, parameters, timeout=cell_timeout)
        except Exception as exc:  # noqa: BLE001 - report it and go on with the next point
            status, error = "FAILED", error_line(exc, 300)
            bar.write(f"labkit bench: {point.run_id} FAILED: {error}")
        seconds = time.monotonic() - start
        runs.append(
            {"run": point.run_id, "notebook": point.entry.name, "point": point.label}
            | {"repeat": point.repeat, "status": status, "seconds": round(seconds, 2)}
            | {"error": error}
        )
        for rec in _records(results_dir):  # a failed run's records are kept, marked failed
            row = _row(rec, point, size) | {"status": status}
            rows.append(row | {f"machine.{k}": v for k, v in machine.items()})
    bar.close()
    _write_csv(out / "points.csv", runs, list(runs[0]) if runs else ["run", "status"])
    _write_csv(out / "results.csv", rows, RESULT_COLUMNS)
    (out / "sweep.json").write_text(
        json.dumps(
            {
                "sweep": str(sweep.path),
                "size": size,
                "started": started,
                "commit": store.commit(),
                "machine": machine,
            },
            indent=2,
        )
    )
    return {"runs": runs, "records": len(rows), "failed": [r for r in runs if r["status"] != "ok"]}


class _Lines:
    """Progress as plain lines, where tqdm is not installed."""

    def __init__(self, items: list[Point]) -> None:
        self.items, self.label = items, ""

    def __iter__(self):
        for i, item in enumerate(self.items, 1):
            yield item
            print(f"labkit bench: {i}/{len(self.items)} done ({self.label})", flush=True)

    def set_description(self, label: str) -> None:
        self.label = label

    def write(self, line: str) -> None:
        print(line, flush=True)

    def close(self) -> None:
        pass


def _progress(todo: list[Point], show: bool):
    """tqdm's bar (points done, time left), or plain lines without tqdm."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _Lines(todo)
    return tqdm(todo, unit="run", disable=not show, dynamic_ncols=True)


def _records(folder: Path) -> list[dict[str, Any]]:
    from labkit.measure import read_records

    return read_records(folder) if folder.is_dir() else []


#: The columns every results.csv has, whatever its notebooks recorded.
RESULT_COLUMNS = [
    "notebook",
    "point",
    "repeat",
    "size",
    "metric",
    "value",
    "unit",
    "better",
    "series",
    "context",
    "time",
    "status",
]


def _row(rec: dict[str, Any], point: Point, size: str) -> dict[str, Any]:
    context = rec.get("context") or {}
    return {
        "notebook": point.entry.name,
        "point": point.label,
        "repeat": point.repeat,
        "size": size,
        **{f"param.{k}": _cell(v) for k, v in point.values.items()},
        "metric": rec["metric"],
        "value": rec["value"],
        "unit": rec["unit"],
        "better": rec.get("better") or "",
        "series": series_key(context),
        "context": json.dumps(context, sort_keys=True),
        "time": rec.get("time", ""),
    }


def _cell(value: Any) -> Any:
    """A parameter's value as one CSV cell: a list as its JSON text."""
    return json.dumps(value) if isinstance(value, (list, dict)) else value


#: Context entries that differ between repeats of the same figure: not part of its identity.
_NOT_IDENTITY = {"sentence", "key"}


def series_key(context: dict[str, Any]) -> str:
    """What tells apart two figures of one metric in one run (``shard=kept, workers=2``,
    ``task_ms=10.0``): the context's scalar entries. A verdict's context also holds the numbers
    its sentence quotes (measured, so different in every run): for a verdict (a context with a
    ``sentence``) only its text and yes/no entries count."""
    verdict = "sentence" in context
    parts = []
    for k in sorted(context):
        v = context[k]
        if k in _NOT_IDENTITY or isinstance(v, (dict, list)) or v is None:
            continue
        if verdict and isinstance(v, (int, float)) and not isinstance(v, bool):
            continue
        parts.append(f"{k}={v}")
    return ", ".join(parts)


def _write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str] | None = None) -> None:
    """Rows as CSV, the union of their keys as columns (``columns`` first: a run where every
    point failed still writes a header)."""
    columns = list(columns or [])
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
