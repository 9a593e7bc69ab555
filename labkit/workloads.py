"""Small, honest CPU workloads for the Ray Core lessons: busy loops of a calibrated length.

A lesson that measures parallel speed-up needs work that really uses a core (not ``sleep``) and
whose length it controls: :func:`spin` is a pure-Python loop, :func:`calibrate` finds how many
iterations take a given time on this machine. They import no Ray, so tasks, process pools and the
serial baseline all run the very same function.

Used in: 01, lab_tasks.
"""

from __future__ import annotations

import time


def spin(iterations: int) -> int:
    """Burn one core for ``iterations`` loop steps; return a checksum (nothing is optimised out)."""
    if iterations < 0:
        raise ValueError(f"iterations must be >= 0, got {iterations}")
    acc = 0
    for i in range(iterations):
        acc = (acc + i * i) % 1_000_003
    return acc


def calibrate(target_ms: float, probe_iterations: int = 200_000) -> int:
    """Iterations of :func:`spin` that take about ``target_ms`` here (best of 3 probes)."""
    if target_ms <= 0:
        raise ValueError(f"target_ms must be > 0, got {target_ms}")
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        spin(probe_iterations)
        best = min(best, time.perf_counter() - start)
    per_ms = probe_iterations / (best * 1e3)
    return max(1, round(per_ms * target_ms))


def split(total: int, parts: int) -> list[tuple[int, int]]:
    """Split ``range(total)`` into ``parts`` contiguous ``(start, stop)`` chunks, near-equal."""
    if parts < 1 or total < 0:
        raise ValueError(f"need parts >= 1 and total >= 0, got {parts}, {total}")
    edges = [total * k // parts for k in range(parts + 1)]
    return [(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]
