"""A package whose modules load when first named: ``labkit.runtime.procs`` in a cell imports
``procs`` then, so importing the face or a room stays light.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType


def submodules(package: str) -> Callable[[str], ModuleType]:
    """The ``__getattr__`` of ``package``'s ``__init__``: ``package.<name>`` is its module
    ``<name>``, imported when first used; a name that is not a module is an AttributeError (a
    module that fails to import raises its own error)."""

    def __getattr__(name: str) -> ModuleType:
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as missing:
            if missing.name != f"{package}.{name}":
                raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return __getattr__
