"""Ray LabKit: the helpers behind the notebooks.

Import is cheap and starts nothing: ``params``, ``measure`` and ``checks`` load no Ray or torch,
so a bad notebook parameter fails before Ray starts. The other modules (``_LAZY_MODULES``) load
when first used, as ``labkit.<module>``.

The package has rooms by who reads it: the top level (this face and its modules) holds what a
learner meets in cells; ``labkit.runtime`` the runtime that keeps Ray safe; ``labkit.tools`` the
``labkit`` command; ``labkit.bench`` the lab reports' apparatus. Each module has one name, its
path: a cell that must reach a room names it there (``labkit.runtime.procs``), and
``tests/test_layout.py`` keeps cells to the top floor but for the exceptions it lists.
"""

from __future__ import annotations

import importlib
from typing import Any

from labkit.checks import expect_error, wait_until
from labkit.measure import compare, record, speedup, timeit, verdict, versus
from labkit.params import ParameterError, Params, setup
from labkit.runtime.logs import expected_errors

__version__ = "0.1.0"
__all__ = [
    "ParameterError",
    "Params",
    "compare",
    "expect_error",
    "expected_errors",
    "record",
    "setup",
    "speedup",
    "start_session",
    "stop_session",
    "timeit",
    "verdict",
    "versus",
    "wait_until",
]

_LAZY_MODULES = {
    "amp",
    "lang",
    "blog",
    "contract",
    "data",
    "deploy",
    "device",
    "hostile",
    "learner",
    "loaders",
    "loadgen",
    "models",
    "plainhttp",
    "plots",
    "prom",
    "recsys",
    "scheduling",
    "trace",
    "train",
    "workloads",
    "cluster",
    "cpuuse",
    "runtime",
    "tools",
    "bench",
}


def start_session(*args: Any, **kwargs: Any):
    """Start (or join) Ray for this notebook: see :func:`labkit.runtime.session.start`."""
    from labkit.runtime.session import start

    return start(*args, **kwargs)


def stop_session() -> None:
    """Stop the notebook's Ray session (Serve first, then Ray)."""
    from labkit.runtime.session import stop

    stop()


def __getattr__(name: str) -> Any:
    if name in _LAZY_MODULES:
        return importlib.import_module(f"labkit.{name}")
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")
