"""The tools behind the ``labkit`` command: the CLI, the notebook runner, learner copies, doctor,
the GPU and cluster checks, the API guard, the workshop cluster and the rerun plan.

``python -m labkit`` runs :func:`labkit.tools.cli.main`.
"""

from labkit._lazy import submodules

__getattr__ = submodules(__name__)
