"""Where the CPU went while something ran: CPU seconds per kind of process on this machine.

``with cpu_by_kind() as use: ...`` snapshots every process's CPU time (user + system) before
and after; ``use.seconds`` maps a kind (this driver, Ray's workers, the raylet, the GCS, Ray's
other processes, everything else) to the CPU seconds it used in between, and ``use.wall_s`` is
the wall time. Processes that start or end in between count from zero or until their last
snapshot; a process that both starts and ends in between is missed (say so when it matters).

On a cluster, each node's processes run on its own machine: :class:`NodeCpu`, one 0-CPU actor
per node, counts the processes under that node's raylet where they run.

Used in: 07, lab_tasks, lab_train.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psutil

KINDS = ("driver", "Ray workers", "raylet", "GCS", "other Ray", "other")


def kind_of(pid: int, name: str, cmdline: list[str]) -> str:
    """The kind of a process, from its PID, name and command line."""
    line = " ".join(cmdline)
    if pid == os.getpid():
        return "driver"
    if name == "raylet":
        return "raylet"
    if name == "gcs_server":
        return "GCS"
    title = name if name.startswith("ray::") else line.split(" ")[0]
    if title.startswith("ray::"):  # a worker's title: ray::IDLE, ray::spin, ray::Actor.method
        return "other Ray" if title.endswith("Agent") else "Ray workers"
    if "default_worker.py" in line:
        return "Ray workers"
    if "/ray/" in line or name.startswith("ray-"):
        return "other Ray"  # dashboard, its heads, monitor, log monitor
    return "other"


_ATTRS = ["pid", "name", "cmdline", "create_time", "cpu_times"]


def _readings(root: int | None) -> Iterator[dict]:
    """Each process's name, command line and CPU times: every process on the machine, or, with
    ``root``, only those under that PID (its children, theirs, and so on)."""
    if root is None:
        for proc in psutil.process_iter(_ATTRS):
            yield proc.info
        return
    try:
        below = psutil.Process(root).children(recursive=True)
    except psutil.Error:
        return
    for proc in below:
        try:
            yield proc.as_dict(_ATTRS)
        except psutil.Error:
            continue


def _snapshot(root: int | None = None) -> dict[tuple[int, float], tuple[str, float]]:
    out = {}
    for info in _readings(root):
        times = info.get("cpu_times")
        if times is None:
            continue
        kind = kind_of(info["pid"], info.get("name") or "", info.get("cmdline") or [])
        out[(info["pid"], info.get("create_time") or 0.0)] = (kind, times.user + times.system)
    return out


def raylet_pid(pid: int | None = None) -> int | None:
    """The raylet that a process (default: this one) runs under: its nearest ancestor named
    ``raylet``, which started it. None outside a Ray worker."""
    try:
        for parent in psutil.Process(pid).parents():
            if parent.name() == "raylet":
                return parent.pid
    except psutil.Error:
        return None
    return None


@dataclass
class CpuUse:
    """CPU seconds per kind of process over a stretch of wall time."""

    seconds: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0
    cpus: int = field(default_factory=lambda: os.cpu_count() or 1)
    stolen_s: float = 0.0  # CPU time the hypervisor gave to other machines (Linux "steal")

    @property
    def idle_s(self) -> float:
        """CPU seconds nobody here used: the capacity less every process's use and the steal."""
        used = sum(self.seconds.values()) + self.stolen_s
        return max(0.0, self.wall_s * self.cpus - used)

    def shares(self) -> dict[str, float]:
        """Each kind's share of the machine's capacity (``wall_s * cpus``), steal and idle too."""
        capacity = self.wall_s * self.cpus
        if capacity <= 0:
            return {}
        out = {k: v / capacity for k, v in self.seconds.items()}
        out["stolen"] = self.stolen_s / capacity
        out["idle"] = self.idle_s / capacity
        return out


def _steal() -> float:
    return float(getattr(psutil.cpu_times(), "steal", 0.0))


def machine_idle_s() -> float:
    """CPU seconds the whole machine has been idle so far (all CPUs, idle + I/O wait)."""
    times = psutil.cpu_times()
    return times.idle + getattr(times, "iowait", 0.0)


@contextmanager
def cpu_by_kind(sample_s: float | None = None, root: int | None = None) -> Iterator[CpuUse]:
    """Measure CPU seconds per kind of process while the ``with`` body runs: every process on
    this machine, or with ``root`` only the processes under that PID (a raylet's: one node's).

    With ``sample_s``, a thread also snapshots every ``sample_s`` seconds and keeps each
    process's last reading, so that a process that ends inside the window (a Tune trial, Train's
    worker group, Ray Data's actor pool) counts up to its last sample instead of not at all.
    """
    import threading

    use = CpuUse()
    before, steal = _snapshot(root), _steal()
    seen = dict(before)  # each process's latest reading
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(sample_s):
            seen.update(_snapshot(root))

    sampler = threading.Thread(target=sample, daemon=True) if sample_s else None
    if sampler:
        sampler.start()
    start = time.perf_counter()
    try:
        yield use
    finally:
        use.wall_s = time.perf_counter() - start
        use.stolen_s = max(0.0, _steal() - steal)
        if sampler:
            stop.set()
            sampler.join()
        seen.update(_snapshot(root))
        totals = dict.fromkeys(KINDS, 0.0)
        for key, (kind, cpu) in seen.items():
            totals[kind] += max(0.0, cpu - before.get(key, (kind, 0.0))[1])
        use.seconds = totals


class NodeCpu:
    """CPU seconds per kind of process under one raylet (one node's Ray processes), counted over
    named windows: ``begin(name)``, then ``end(name)`` returns the seconds per kind.

    Run as a 0-CPU Ray actor on each node (:func:`on_every_node`), it reads a cluster's counters
    where its processes run, and only that node's: nodes that share a machine (the kit's own
    clusters) each count their own. ``root`` defaults to the raylet this process runs under.
    The counter counts itself as the ``driver`` kind, not as a worker."""

    def __init__(self, sample_s: float = 0.5, root: int | None = None) -> None:
        self.root = root if root is not None else raylet_pid()
        if self.root is None:
            raise RuntimeError("NodeCpu counts a raylet's processes: run it as a Ray actor")
        self.sample_s = sample_s
        self._open: dict[str, tuple] = {}

    def node_id(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def begin(self, name: str) -> None:
        window = cpu_by_kind(self.sample_s, root=self.root)
        self._open[name] = (window, window.__enter__())

    def end(self, name: str) -> dict[str, float]:
        window, use = self._open.pop(name)
        window.__exit__(None, None, None)
        return use.seconds


def on_every_node(sample_s: float = 0.5) -> list:
    """One :class:`NodeCpu` actor per alive node (0 CPUs, pinned to its node), started and ready."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    counter = ray.remote(num_cpus=0)(NodeCpu)
    actors = [
        counter.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        ).remote(sample_s)
        for node in ray.nodes()
        if node["Alive"]
    ]
    ray.get([a.node_id.remote() for a in actors])  # started, so that no window waits for it
    return actors


def wait_quiet(
    kinds: tuple[str, ...] = ("Ray workers",),
    below: float = 0.03,
    window_s: float = 0.5,
    *,
    timeout_s: float = 20.0,
) -> tuple[float, float]:
    """Wait until the processes of ``kinds`` together use less than ``below`` of the machine's
    CPU over a ``window_s`` window: before a baseline is timed, so that what Ray is still doing
    after the last job (a worker group torn down, its pool of idle workers refilled) does not
    slow the baseline down. Returns (seconds waited, their share in the last window); after
    ``timeout_s`` it stops waiting and returns what it saw, so a caller can say so."""
    start = time.perf_counter()
    while True:
        with cpu_by_kind() as use:
            time.sleep(window_s)
        share = sum(use.shares().get(k, 0.0) for k in kinds)
        waited = time.perf_counter() - start
        if share < below or waited >= timeout_s:
            return waited, share
