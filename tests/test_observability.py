"""Lesson 10 leaves nothing running: its Prometheus and its Ray are gone when it ends.

The lesson runs at ``smoke`` in a kernel of its own (the kit's runner); every process that appeared
meanwhile and belongs to it (Prometheus, Ray's daemons and workers, the jobs' drivers) must be
gone afterwards. Where a Prometheus binary exists (CI runs ``make prometheus``), the run must
have taken the real path: its records hold the PromQL results. This is where `make test` runs
notebook 10: tests/test_notebooks.py leaves it to this module.
"""

import json
import os
import time
from pathlib import Path

import psutil
import pytest

from labkit import prom
from labkit.params import repo_root
from labkit.tools import nbrun
from labkit.tools.cli_runs import notebooks_to_run

pytestmark = [pytest.mark.notebook, pytest.mark.ray, pytest.mark.network]

NOTEBOOK = repo_root() / "notebooks" / "10_observability_and_security.ipynb"


def _lesson_processes(before: set[int]) -> list[str]:
    found = []
    for proc in psutil.process_iter(["pid", "name", "cmdline"]):
        if proc.pid in before:
            continue
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            ours = proc.info["name"] in ("prometheus", "gcs_server", "raylet")
            ours = ours or "labkit-prom-" in cmd or proc.info["name"].startswith("ray::")
            ours = ours or "ray/dashboard" in cmd or "count_primes.py" in cmd
            if ours and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(f"{proc.pid} {proc.info['name']}: {cmd[:120]}")
        except psutil.Error:
            continue
    return found


def test_lesson_10_stops_its_prometheus_and_its_ray(tmp_path, monkeypatch):
    """Also where ``make test`` runs 10 (to ``runs/test/``), with its exercises' learner cells."""
    if NOTEBOOK not in notebooks_to_run(os.environ.get("LABKIT_NB", "").split()):
        pytest.skip("LABKIT_NB leaves lesson 10 out")
    before = set(psutil.pids())
    results = tmp_path / "results"
    executed = Path(os.environ.get("LABKIT_RESULTS_DIR") or tmp_path) / NOTEBOOK.name
    monkeypatch.setenv("LABKIT_SIZE", "smoke")
    monkeypatch.setenv("LABKIT_RESULTS_DIR", str(results))
    run = nbrun.run_lesson(NOTEBOOK, out=executed)
    assert not run["outside_paths"], f"paths of this machine in the outputs: {run['outside_paths']}"
    deadline = time.monotonic() + 15  # the kernel's exit handlers may still be stopping Ray
    while _lesson_processes(before) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _lesson_processes(before) == []
    records = [
        json.loads(line)
        for line in (results / "10_observability_and_security.jsonl").read_text().splitlines()
    ]
    metrics = {r["metric"] for r in records}
    assert {"obs.custom_metric_value", "security.listeners_all_interfaces"} <= metrics
    if prom.binary() is not None:
        assert "obs.promql_series" in metrics  # the real Prometheus path ran


def test_the_check_sees_a_prometheus_left_running():
    if prom.binary() is None:
        pytest.skip("no prometheus binary (`make prometheus`; CI runs it)")
    before = set(psutil.pids())
    server = prom.Prometheus("global: {scrape_interval: 1s}\n")
    try:
        assert any(line.startswith(f"{server.pid} ") for line in _lesson_processes(before))
    finally:
        server.stop()
    assert _lesson_processes(before) == []
