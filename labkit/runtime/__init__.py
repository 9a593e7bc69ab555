"""The runtime that keeps Ray safe: sessions, processes, logs, ports, network namespaces.

A cell that must reach one of these modules names it here (``labkit.runtime.procs``); what
lessons build with lives on the top floor (``labkit.cluster``, ``labkit.expected_errors``). Every
import of Ray's private modules is in :mod:`labkit.runtime.rayprivate`. Nothing here imports
``labkit.tools`` or the face (``labkit/__init__.py``).
"""

from labkit._lazy import submodules

__getattr__ = submodules(__name__)
