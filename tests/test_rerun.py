"""Run All twice in one kernel, the first time without the teardown cell: what a learner does.

Lesson 04 starts its own 3-node cluster; the second pass must replace the first pass's cluster
rather than stop with "Ray is already running". (The lesson of the day and
the lessons a submission touches run the same way in ``make test-rerun``, which ``.ci/run``
calls.)
"""

import os
from pathlib import Path

import psutil
import pytest

from labkit.tools import nbrun
from labkit.tools.cli_runs import notebooks_to_run

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "04_scheduling_and_resources.ipynb"
pytestmark = [pytest.mark.notebook, pytest.mark.ray]


def _lesson_clusters() -> set[int]:
    """PIDs of raylets of in-kernel clusters (their temp dirs are named lkn-...)."""
    found = set()
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "raylet" in cmd and "/lkn-" in cmd:
            found.add(proc.pid)
    return found


def test_lesson_04_runs_twice_in_one_kernel(tmp_path, monkeypatch):
    """Also where ``make test`` runs 04 (its executed notebook goes to ``runs/test/``), with
    its exercises' learner cells checked in the kernel afterwards."""
    monkeypatch.setenv("LABKIT_SIZE", "smoke")
    if NOTEBOOK not in notebooks_to_run(os.environ.get("LABKIT_NB", "").split()):
        pytest.skip("LABKIT_NB leaves lesson 04 out")
    before = _lesson_clusters()
    out = Path(os.environ.get("LABKIT_RESULTS_DIR") or tmp_path) / NOTEBOOK.name
    run = nbrun.run_lesson(NOTEBOOK, out=out, twice=True)
    assert all(ok for _, ok, _ in run["exercises"])  # run_lesson raises otherwise
    assert not run["outside_paths"], f"paths of this machine in the outputs: {run['outside_paths']}"
    assert _lesson_clusters() <= before, "the second pass's teardown left a cluster running"
