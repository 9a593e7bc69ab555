"""Apparatus for the lab reports in ``bench/``: measurements a lesson's headline does not need."""


def __getattr__(name: str):
    """``labkit.<room>.<module>`` as a cell writes it: the module, imported when first used."""
    import importlib

    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as missing:
        if missing.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
