"""Measuring the scheduling lesson: latency percentiles, task timelines, utilisation.

(The lesson's priority dispatcher is written in its cells: it is what lesson 04 teaches.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
    """Give overlapping spans on one node separate lanes (``node/0``, ``node/1``...) for a Gantt."""
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
