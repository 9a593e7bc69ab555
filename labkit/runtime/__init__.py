"""The runtime that keeps Ray safe: sessions, processes, logs, ports, network namespaces.

A cell that must reach one of these modules names it here (``labkit.runtime.procs``); what
lessons build with lives on the top floor (``labkit.cluster``, ``labkit.expected_errors``). Every
import of Ray's private modules is in :mod:`labkit.runtime.rayprivate`. Nothing here imports
``labkit.tools`` or the face (``labkit/__init__.py``).
"""


def __getattr__(name: str):
    """``labkit.<room>.<module>`` as a cell writes it: the module, imported when first used."""
    import importlib

    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as missing:
        if missing.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
