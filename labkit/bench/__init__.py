"""Apparatus for the lab reports in ``bench/``: measurements a lesson's headline does not need."""
