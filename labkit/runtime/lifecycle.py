"""One Ray per kernel: what a lesson starts replaces what it started before, and a new start
stops what a dead kernel left behind.

A learner re-runs a lesson without restarting the kernel, or restarts it mid-lesson. So each
start of a kit session or local cluster first

1. stops the session or cluster this kernel started before (:func:`take_over`), and
2. stops the processes the kit's registry records for kernels that are gone
   (:func:`stop_orphans`), saying what it stopped.

Ray started in this kernel by anything else than the kit is not the kit's to stop: that is an
error, with the call that fixes it.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol

from labkit.runtime import procs


class Stoppable(Protocol):
    def stop(self) -> None: ...


_active: Stoppable | None = None


def active() -> Stoppable | None:
    """The session or cluster this kernel started and has not stopped, if any."""
    return _active


def take_over(*, reap: bool = True) -> None:
    """Make room for a new session or cluster in this kernel (see the module docstring)."""
    global _active
    import ray

    if _active is not None:
        previous, _active = _active, None
        what = getattr(previous, "short", None) or repr(previous)  # no temp folder in outputs
        print(f"labkit: stopping {what}, which this kernel started earlier", file=sys.stderr)
        previous.stop()
    elif ray.is_initialized():
        raise RuntimeError(
            "Ray is already running in this kernel but was not started by labkit; "
            "call ray.shutdown() first"
        )
    if reap:
        stop_orphans()


def claim(thing: Stoppable) -> None:
    """Record ``thing`` as this kernel's running session or cluster."""
    global _active
    _active = thing


def release(thing: Any) -> None:
    """Forget ``thing`` once it has stopped (only if it is the one recorded)."""
    global _active
    if _active is thing:
        _active = None


def stop_orphans() -> list[str]:
    """Stop what the registry records for kernels that are gone; return the owners stopped.

    A cluster's owner is ``cluster:<its temp dir>``: every process under that directory (worker
    nodes the autoscaler added later included) is stopped and the directory removed.
    """
    found = procs.orphans()
    for owner, entries in found.items():
        names = sorted({e["name"] for e in entries})
        print(
            f"labkit: stopping {len(entries)} process(es) ({', '.join(names)}) of {owner}, "
            "left running by a kernel that is gone",
            file=sys.stderr,
        )
        kind, _, where = owner.partition(":")
        if kind == "cluster" and where:
            from labkit.runtime.raystart import clear

            clear(where, owner)  # what is under its temp dir, the recorded PIDs, the dir
        else:
            procs.stop(owner)
    return list(found)
