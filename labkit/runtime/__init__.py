"""The runtime that keeps Ray safe: sessions, clusters, processes, logs, ports, network namespaces.

Cells reach these modules by their old names too (``labkit.session``, ``from labkit.cluster
import LocalCluster``): see ``labkit.MOVED``. Every import of Ray's private modules is in
:mod:`labkit.runtime.rayprivate`.
"""
