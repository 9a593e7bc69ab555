"""Ray LabKit: the helpers behind the notebooks.

Import is cheap and starts nothing: ``params``, ``measure`` and ``checks`` load no Ray or torch,
so a bad notebook parameter fails before Ray starts. The other modules (``_LAZY_MODULES``) load
when first used, as ``labkit.<module>``.

The package has rooms by who reads it: the top level holds what a learner meets in cells;
``labkit.runtime`` the runtime that keeps Ray safe; ``labkit.tools`` the ``labkit`` command;
``labkit.bench`` the lab reports' apparatus. A moved module keeps its old name (:data:`MOVED`):
``labkit.session``, ``import labkit.cluster`` and ``from labkit.net import free_port`` give the
same module object as its new name, loaded only when first used.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import Any

from labkit.checks import expect_error, wait_until
from labkit.measure import compare, record, speedup, timeit, verdict, versus
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
    "versus",
    "wait_until",
]

_ROOMS = {
    "runtime": (
        "cluster",
        "lifecycle",
        "logs",
        "net",
        "netcut",
        "netns",
        "procs",
        "raystart",
        "rayprivate",
        "session",
    ),
    "tools": (
        "apiguard",
        "cli",
        "clustercheck",
        "doctor",
        "exercises",
        "gpucheck",
        "nbrun",
        "readme",
        "site",
        "touched",
        "workshop",
        "zh",
    ),
    "bench": ("cpuuse", "report", "store", "sweep", "yardsticks"),
}
#: Old name -> where the module lives now (``labkit.session`` -> ``labkit.runtime.session``).
MOVED = {
    f"labkit.{name}": f"labkit.{room}.{name}" for room, names in _ROOMS.items() for name in names
}

_LAZY_MODULES = {
    "amp",
    "lang",
    "blog",
    "contract",
    "data",
    "deploy",
    "device",
    "hostile",
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
    *_ROOMS,
    *(old.removeprefix("labkit.") for old in MOVED),
}


class _OldNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import a moved module by its old name: the module object is the new one, not a copy."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module):
        pass  # the new name's import ran the module already


if not any(isinstance(f, _OldNames) for f in sys.meta_path):
    sys.meta_path.insert(0, _OldNames())


def start_session(*args: Any, **kwargs: Any):
    """Start (or join) Ray for this notebook: see :func:`labkit.session.start`."""
    from labkit.runtime.session import start

    return start(*args, **kwargs)


def stop_session() -> None:
    """Stop the notebook's Ray session (Serve first, then Ray)."""
    from labkit.runtime.session import stop

    stop()


def __getattr__(name: str) -> Any:
    if name in _LAZY_MODULES:
        return importlib.import_module(MOVED.get(f"labkit.{name}", f"labkit.{name}"))
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")
