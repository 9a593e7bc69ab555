"""Ray LabKit: the helpers behind the notebooks.

Import is cheap and starts nothing: ``params``, ``measure`` and ``checks`` load no Ray or torch,
so a bad notebook parameter fails before Ray starts. The other modules (``_LAZY_MODULES``) load
when first used, as ``labkit.<module>``.
"""

from __future__ import annotations

import importlib
from typing import Any

from labkit.checks import expect_error, wait_until
from labkit.measure import compare, record, speedup, timeit, verdict
from labkit.params import ParameterError, Params, setup

__version__ = "0.1.0"
__all__ = [
    "ParameterError",
    "Params",
    "compare",
    "expect_error",
    "record",
    "setup",
    "speedup",
    "start_session",
    "stop_session",
    "timeit",
    "verdict",
    "wait_until",
]

_LAZY_MODULES = {
    "amp",
    "apiguard",
    "blog",
    "cli",
    "cluster",
    "clustercheck",
    "cpuuse",
    "data",
    "deploy",
    "device",
    "doctor",
    "exercises",
    "gpucheck",
    "hostile",
    "lifecycle",
    "loaders",
    "loadgen",
    "logs",
    "models",
    "nbrun",
    "net",
    "netcut",
    "netns",
    "plainhttp",
    "plots",
    "procs",
    "prom",
    "raystart",
    "recsys",
    "scheduling",
    "session",
    "trace",
    "touched",
    "train",
    "workloads",
    "workshop",
}


def start_session(*args: Any, **kwargs: Any):
    """Start (or join) Ray for this notebook: see :func:`labkit.session.start`."""
    from labkit.session import start

    return start(*args, **kwargs)


def stop_session() -> None:
    """Stop the notebook's Ray session (Serve first, then Ray)."""
    from labkit.session import stop

    stop()


def __getattr__(name: str) -> Any:
    if name in _LAZY_MODULES:
        return importlib.import_module(f"labkit.{name}")
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")
