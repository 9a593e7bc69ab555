"""Where the CPU went while something ran: CPU seconds per kind of process on this machine.

``with cpu_by_kind() as use: ...`` snapshots every process's CPU time (user + system) before
and after; ``use.seconds`` maps a kind (this driver, Ray's workers, the raylet, the GCS, Ray's
other processes, everything else) to the CPU seconds it used in between, and ``use.wall_s`` is
the wall time. Processes that start or end in between count from zero or until their last
snapshot; a process that both starts and ends in between is missed (say so when it matters).
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


def _snapshot() -> dict[tuple[int, float], tuple[str, float]]:
    out = {}
    for proc in psutil.process_iter(["pid", "name", "cmdline", "create_time", "cpu_times"]):
        info = proc.info
        times = info.get("cpu_times")
        if times is None:
            continue
        kind = kind_of(info["pid"], info.get("name") or "", info.get("cmdline") or [])
        out[(info["pid"], info.get("create_time") or 0.0)] = (kind, times.user + times.system)
    return out


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
def cpu_by_kind(sample_s: float | None = None) -> Iterator[CpuUse]:
    """Measure CPU seconds per kind of process while the ``with`` body runs.

    With ``sample_s``, a thread also snapshots every ``sample_s`` seconds and keeps each
    process's last reading, so that a process that ends inside the window (a Tune trial, Train's
    worker group, Ray Data's actor pool) counts up to its last sample instead of not at all.
    """
    import threading

    use = CpuUse()
    before, steal = _snapshot(), _steal()
    seen = dict(before)  # each process's latest reading
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(sample_s):
            seen.update(_snapshot())

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
        seen.update(_snapshot())
        totals = dict.fromkeys(KINDS, 0.0)
        for key, (kind, cpu) in seen.items():
            totals[kind] += max(0.0, cpu - before.get(key, (kind, 0.0))[1])
        use.seconds = totals


def wait_quiet(
    kinds: tuple[str, ...] = ("Ray workers",),
    below: float = 0.03,
    window_s: float = 0.5,
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
