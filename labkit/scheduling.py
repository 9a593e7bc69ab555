"""Measuring the scheduling lesson: latency percentiles, task timelines, utilisation.

(The lesson's priority dispatcher is written in its cells: it is what lesson 04 teaches.)

Used in: 03, 04, 09.
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


def link_kind(address_a: str, address_b: str) -> str:
    """What joins two nodes, from their addresses: ``"loopback"`` (one address: nodes on one
    machine, as lesson 04's cluster), ``"veth"`` (both in the 198.18.0.0/15 range that
    ``labkit cluster up`` gives its namespaced nodes: a virtual link on one machine) or
    ``"network"`` (anything else: on two machines, a real link)."""
    import ipaddress

    if address_a == address_b:
        return "loopback"
    kit = ipaddress.ip_network("198.18.0.0/15")
    try:
        both = all(ipaddress.ip_address(a) in kit for a in (address_a, address_b))
    except ValueError:
        both = False
    return "veth" if both else "network"


def cross_node_read(source: str, reader: str, mb: int, *, repeats: int) -> dict:
    """Read a block made on node ``source`` from a task on node ``reader`` (node ids), and the
    same block from a task on ``source`` itself: the measurement lesson 04 writes out in its
    cells, for lesson 03 on a cluster. Each read gets a fresh block, after one warm-up round;
    ``ray.get`` is timed inside the reading task (the ref travels in a list, so Ray does not
    resolve it first), and ``np.copy`` of the same bytes on the reader is one memory copy's
    baseline. Returns the three medians in GB/s and what joins the two nodes (:func:`link_kind`).
    """
    import time

    import numpy as np
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    def on(node_id: str):
        return NodeAffinitySchedulingStrategy(node_id, soft=False)

    @ray.remote(num_cpus=0)
    def make_block(size_mb: int, fill: int):
        return np.full(size_mb * 2**20 // 8, float(fill))

    @ray.remote(num_cpus=0)
    def timed_read(boxed):
        start = time.perf_counter()
        block = ray.get(boxed[0])
        read_s = time.perf_counter() - start
        start = time.perf_counter()
        np.copy(block)
        return read_s, time.perf_counter() - start, block.nbytes

    same_s, cross_s, copy_s = [], [], []
    nbytes = 0
    for i in range(1 + repeats):  # round 0 warms up the workers and the connections
        for node, times in ((source, same_s), (reader, cross_s)):
            block = make_block.options(scheduling_strategy=on(source)).remote(mb, i)
            ray.wait([block], fetch_local=False)  # made, and left on the source node
            read, copied, nbytes = ray.get(
                timed_read.options(scheduling_strategy=on(node)).remote([block])
            )
            if i:
                times.append(read)
                if node == reader:
                    copy_s.append(copied)
            del block
    address = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
    return {
        "same_gbps": nbytes / float(np.median(same_s)) / 1e9,
        "cross_gbps": nbytes / float(np.median(cross_s)) / 1e9,
        "copy_gbps": nbytes / float(np.median(copy_s)) / 1e9,
        "link": link_kind(address[source], address[reader]),
        "mb": mb,
        "repeats": repeats,
    }


def shares_on(options: dict, node: dict) -> dict:
    """Ray actor ``options`` cut to what ``node`` (an entry of ``ray.nodes()``) offers, for an
    actor pinned there: a CPU or GPU request the node cannot meet becomes 0 CPUs or no GPU (a
    0-CPU head, as production heads often are, still takes an actor that asks for nothing).
    Other options pass through. The pin itself is the caller's:
    ``{"label_selector": {"ray.io/node-id": node["NodeID"]}}``."""
    have = node.get("Resources", {})
    out = dict(options)
    if out.get("num_cpus", 0) > have.get("CPU", 0):
        out["num_cpus"] = 0
    if out.get("num_gpus", 0) > have.get("GPU", 0):
        out.pop("num_gpus")
    return out
