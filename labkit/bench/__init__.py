"""Apparatus for the lab reports in ``bench/``: measurements a lesson's headline does not need."""

from labkit._lazy import submodules

__getattr__ = submodules(__name__)
