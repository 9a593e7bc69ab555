"""Helpers for the scheduling lesson: latency percentiles, task timelines, utilisation, priorities.

Ray has no task priority. :func:`priority_dispatcher` builds one honest emulation: an async actor
that holds submitted work in a priority queue and starts at most ``slots`` Ray tasks at a time,
highest priority first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

Span = tuple[str, float, float, str]  # (node, start, end, kind)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between the closest ranks."""
    if not values:
        raise ValueError("no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within 0..100, got {q}")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p99 and max of latencies given in seconds, returned in milliseconds."""
    return {
        "p50_ms": 1e3 * percentile(seconds, 50),
        "p99_ms": 1e3 * percentile(seconds, 99),
        "max_ms": 1e3 * max(seconds),
    }


def assign_lanes(spans: Sequence[Span]) -> list[Span]:
    """Give overlapping spans on one node separate lanes (``node/0``, ``node/1``...) for a Gantt chart."""
    out: list[Span] = []
    lane_ends: dict[str, list[float]] = {}
    for node, start, end, kind in sorted(spans, key=lambda s: (s[0], s[1])):
        ends = lane_ends.setdefault(node, [])
        for i, lane_end in enumerate(ends):
            if lane_end <= start + 1e-9:
                ends[i] = end
                lane = i
                break
        else:
            ends.append(end)
            lane = len(ends) - 1
        out.append((f"{node}/{lane}", start, end, kind))
    return out


def makespan(spans: Sequence[Span]) -> float:
    """Seconds from the first start to the last end."""
    if not spans:
        raise ValueError("no spans")
    return max(s[2] for s in spans) - min(s[1] for s in spans)


def utilization(spans: Sequence[Span], capacity: float) -> float:
    """Busy slot-seconds over available slot-seconds (``capacity`` slots for the makespan)."""
    if capacity <= 0:
        raise ValueError(f"capacity must be > 0, got {capacity}")
    busy = sum(end - start for _node, start, end, _kind in spans)
    return busy / (capacity * makespan(spans))


def priority_dispatcher(slots: int):
    """An actor handle: ``run.remote(priority, fn, *args)`` runs ``fn`` as a Ray task, higher first.

    At most ``slots`` tasks run at once; queued work is started in priority order (then FIFO).
    ``fn`` is a remote function. The call's result is ``fn``'s result.
    """
    import asyncio
    import heapq
    import itertools

    import ray

    @ray.remote(num_cpus=0, max_concurrency=10_000)
    class PriorityDispatcher:
        def __init__(self, slots: int):
            self.free = slots
            self.queue: list[Any] = []
            self.counter = itertools.count()
            self.started: list[int] = []

        async def run(self, priority: int, fn, *args):
            ready = asyncio.Event()
            heapq.heappush(self.queue, (-priority, next(self.counter), ready))
            self._dispatch()
            await ready.wait()
            self.started.append(priority)
            try:
                return await fn.remote(*args)
            finally:
                self.free += 1
                self._dispatch()

        def _dispatch(self):
            while self.free > 0 and self.queue:
                self.free -= 1
                _prio, _n, ready = heapq.heappop(self.queue)
                ready.set()

        def start_order(self) -> list[int]:
            return list(self.started)

    return PriorityDispatcher.remote(slots)
