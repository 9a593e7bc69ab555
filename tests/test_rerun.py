"""Run All twice in one kernel, the first time without the teardown cell: what a learner does.

Lesson 04 starts its own 3-node cluster; the second pass must replace the first pass's cluster
rather than stop with "Ray is already running". (07 and the lesson of the
day run the same way in ``make test-rerun``, which ``.ci/run`` calls.)
"""

from pathlib import Path

import psutil
import pytest

from labkit import nbrun

ROOT = Path(__file__).resolve().parents[1]
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
    monkeypatch.setenv("LABKIT_SIZE", "smoke")
    monkeypatch.setenv("LABKIT_RESULTS_DIR", str(tmp_path / "results"))
    before = _lesson_clusters()
    nbrun.run_all_twice(ROOT / "notebooks" / "04_scheduling_and_resources.ipynb", timeout=600)
    assert _lesson_clusters() <= before, "the second pass's teardown left a cluster running"
