"""Read ``ray.timeline()``: which worker ran which task, when, and how busy the workers were.

``ray.timeline()`` returns Chrome-trace events (``ts`` and ``dur`` in microseconds). The events
whose category is ``task::<name>`` span a whole task on one worker (``tid`` is
``worker:<id>``, ``pid`` the node's IP); the others (``task:execute``, ``submit_task``, ...)
are its phases. :func:`task_spans` keeps the whole-task spans as a table, one row per task,
with times in seconds from the first task's start.

Used in: 10, 11, lab_data.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

TASK_PREFIX = "task::"


def task_spans(
    events: Iterable[Mapping[str, Any]],
    *,
    names: Iterable[str] | None = None,
    origin: float | None = None,
    job: str | None = None,
):
    """One row per task run: ``worker`` (a short lane name), ``node``, ``task`` (its function
    or ``Class.method``), ``task_id``, ``start_s``, ``end_s``, ``dur_s``, sorted by start.

    ``names`` keeps only those tasks (by their ``task::`` name), and ``job`` only one job's
    (``ray.get_runtime_context().get_job_id()``: a task's id ends with its job's, and the
    timeline lists every job the cluster ran, other drivers' too); the worker lanes are named
    ``w0, w1, ...`` in order of their first task, with the worker id's first 8 characters.
    Times count from the first task's start, or from ``origin`` (a ``time.time()`` value: the
    timeline's clock is the wall clock).
    """
    import pandas as pd

    keep = set(names) if names is not None else None
    rows = []
    for ev in events:
        cat = str(ev.get("cat", ""))
        if ev.get("ph") != "X" or not cat.startswith(TASK_PREFIX):
            continue
        task = cat[len(TASK_PREFIX) :]
        if keep is not None and task not in keep:
            continue
        task_id = (ev.get("args") or {}).get("task_id")
        if job is not None and not str(task_id).endswith(job):
            continue
        start = float(ev["ts"]) / 1e6
        rows.append(
            {
                "worker_id": str(ev.get("tid", "")).removeprefix("worker:"),
                "node": str(ev.get("pid", "")),
                "task": task,
                "task_id": task_id,
                "start_s": start,
                "end_s": start + float(ev.get("dur", 0.0)) / 1e6,
            }
        )
    columns = ["worker", "node", "task", "task_id", "start_s", "end_s", "dur_s"]
    if not rows:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(rows).sort_values("start_s", kind="stable").reset_index(drop=True)
    t0 = frame["start_s"].min() if origin is None else origin
    frame["start_s"] -= t0
    frame["end_s"] -= t0
    frame["dur_s"] = frame["end_s"] - frame["start_s"]
    order = list(dict.fromkeys(frame["worker_id"]))
    frame["worker"] = [f"w{order.index(w)} {w[:8]}" for w in frame["worker_id"]]
    return frame[columns]


def busy_fraction(spans, n_slots: int, *, start_s: float | None = None, end_s: float | None = None):
    """The share of ``n_slots`` worker slots (CPUs, say) that ran tasks between ``start_s`` and
    ``end_s`` (default: the first start to the last end): 1.0 means every slot was busy."""
    if n_slots < 1:
        raise ValueError("n_slots must be at least 1")
    if len(spans) == 0:
        return 0.0
    lo = spans["start_s"].min() if start_s is None else start_s
    hi = spans["end_s"].max() if end_s is None else end_s
    if hi <= lo:
        raise ValueError("the window is empty")
    busy = (spans["end_s"].clip(upper=hi) - spans["start_s"].clip(lower=lo)).clip(lower=0).sum()
    return float(busy / (n_slots * (hi - lo)))


def gantt_rows(spans) -> list[tuple[str, float, float, str]]:
    """``spans`` as ``labkit.plots.gantt`` rows: ``(worker, start_s, end_s, task)``."""
    return list(zip(spans["worker"], spans["start_s"], spans["end_s"], spans["task"], strict=True))


class Stages:
    """Wall-clock windows of a pipeline's stages: ``with stages("train"): ...``.

    :meth:`table` adds what ``ray.timeline()`` says about each window: the seconds Ray's tasks
    and actor calls ran in it (on a CPU or waiting), and the share of ``n_slots`` CPUs they
    occupied. It also adds what the operating system counted for Ray's worker processes in the
    window (:func:`labkit.cpuuse.cpu_by_kind`): that includes work the timeline does not list,
    such as Serve's replicas answering HTTP requests. By default it counts this machine's
    workers; with ``per_node=True`` (Ray connected), one :class:`labkit.cpuuse.NodeCpu` actor
    per node counts those under that node's raylet, where they run: on a cluster, elsewhere.
    """

    def __init__(self, per_node: bool = False) -> None:
        import time

        from labkit import cpuuse

        self._clock = time.time
        self.nodes = cpuuse.on_every_node() if per_node else []  # the counters, one per node
        self.origin = self._clock()
        self.windows: dict[str, tuple[float, float]] = {}
        self.worker_cpu_s: dict[str, float] = {}  # Ray workers' CPU seconds, from the OS

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        import contextlib

        from labkit.cpuuse import cpu_by_kind

        if self.nodes:
            import ray

            ray.get([node.begin.remote(name) for node in self.nodes])
        start = self._clock()
        # Sampled: workers that end in the stage (a trial, a worker group) count too.
        here = contextlib.nullcontext() if self.nodes else cpu_by_kind(sample_s=0.5)
        try:
            with here as use:
                yield
        finally:
            self.windows[name] = (start - self.origin, self._clock() - self.origin)
            if self.nodes:
                counted = ray.get([node.end.remote(name) for node in self.nodes])
            else:
                counted = [use.seconds]
            self.worker_cpu_s[name] = sum(c.get("Ray workers", 0.0) for c in counted)

    def seconds(self) -> dict[str, float]:
        """Each stage's wall time."""
        return {name: end - start for name, (start, end) in self.windows.items()}

    def table(self, spans, n_slots: int):
        """One row per stage: ``wall_s``; ``task_s``, the seconds tasks ran inside the window
        (on a CPU or waiting), and ``busy``, that over ``n_slots`` x the window; ``worker_cpu_s``,
        the CPU seconds the OS counted for Ray's worker processes in the window, and
        ``worker_busy``, that over ``n_slots`` x the window. ``spans`` must count from
        :attr:`origin` (``task_spans(..., origin=stages.origin)``)."""
        import pandas as pd

        rows = []
        for name, (start, end) in self.windows.items():
            wall = end - start
            busy = busy_fraction(spans, n_slots, start_s=start, end_s=end) if end > start else 0.0
            worker = self.worker_cpu_s.get(name, 0.0)
            rows.append(
                {
                    "stage": name,
                    "wall_s": wall,
                    "task_s": busy * n_slots * wall,
                    "busy": busy,
                    "worker_cpu_s": worker,
                    "worker_busy": worker / (n_slots * wall) if wall > 0 else 0.0,
                }
            )
        return pd.DataFrame(rows).set_index("stage")


_OP = re.compile(
    r"^Operator \d+ (?P<name>[^:]+): (?P<tasks>\d+) tasks executed.* in (?P<wall>[\d.]+)s"
)
_TOTAL = re.compile(r"Remote (?P<kind>wall|cpu) time: .*, (?P<value>[\d.]+)(?P<unit>us|ms|s) total")
_UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def data_ops(stats: str) -> dict[str, dict[str, float]]:
    """Per-operator figures from ``Dataset.stats()``'s text: tasks, wall and CPU seconds.

    ``wall_s`` is the operator's span ("... produced in 1.03s"); ``task_wall_s`` and ``cpu_s`` sum
    its tasks' remote wall and CPU time. A large wall with a small CPU is waiting, not work.
    """
    ops: dict[str, dict[str, float]] = {}
    current = None
    for line in stats.splitlines():
        line = line.strip()
        if m := _OP.match(line):
            current = ops.setdefault(m["name"], {"tasks": 0, "wall_s": 0.0})
            current["tasks"] += int(m["tasks"])
            current["wall_s"] += float(m["wall"])
        elif current is not None and (m := _TOTAL.search(line)):
            key = "task_wall_s" if m["kind"] == "wall" else "cpu_s"
            current[key] = current.get(key, 0.0) + float(m["value"]) * _UNIT[m["unit"]]
        elif line.startswith("Dataset throughput"):
            current = None
    return ops
