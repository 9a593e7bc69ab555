"""The tools behind the ``labkit`` command: the CLI, the notebook runner, learner copies, doctor,
the GPU and cluster checks, the API guard, the workshop cluster and the rerun plan.

``python -m labkit`` runs :func:`labkit.tools.cli.main`.
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
