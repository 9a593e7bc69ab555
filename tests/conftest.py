"""Shared test set-up: Ray runs under a temp directory of the suite's own, and a leak check.

``RAY_TMPDIR`` is set to a short ``mkdtemp`` (Unix socket paths must stay under ~107 bytes), and
every Ray process started by the suite (unit tests, and the kernels that run the lessons) runs
under it or inherits it. When the session ends, any such process still alive is a leak: it is
listed, stopped by PID, and the run fails.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITE_TMP = tempfile.mkdtemp(prefix="lk-", dir="/tmp")
os.environ["RAY_TMPDIR"] = SUITE_TMP
os.environ["LABKIT_STATE_DIR"] = str(Path(SUITE_TMP) / "state")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.pop("RAY_ADDRESS", None)  # the suite starts its own Ray, never joins another
# Outside `make test` too (plain `pytest tests`): lessons at smoke, their results under runs/test.
os.environ.setdefault("LABKIT_SIZE", "smoke")
os.environ.setdefault("LABKIT_RESULTS_DIR", str(ROOT / "runs" / "test"))


def suite_processes() -> list[psutil.Process]:
    """Processes started under the suite's Ray temp directory (by command line or environment)."""
    me = os.getpid()
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.pid == me:
            continue
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            is_ray = "ray" in cmd.lower() and "multiprocessing" not in cmd
            is_ray = is_ray or "labkit.plainhttp" in cmd  # the Serve lesson's baseline server
            is_ray = is_ray or "labkit-prom-" in cmd  # lesson 10's Prometheus
            if SUITE_TMP in cmd or (is_ray and proc.environ().get("RAY_TMPDIR") == SUITE_TMP):
                if proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc)
        except psutil.Error:
            continue
    return found


def _ray_descendants() -> list[psutil.Process]:
    """Ray processes among this process's descendants (the suite's own, not kernels or servers)."""
    out = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if SUITE_TMP in " ".join(proc.cmdline()) or proc.name().startswith("ray::"):
                out.append(proc)
        except psutil.Error:
            continue
    return out


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if UNIT_TIER and _ray_sessions():
        print(
            "\nUNIT TIER FAILED: a test started Ray in a subprocess (mark it ray or notebook): "
            + ", ".join(str(p) for p in _ray_sessions()[:3])
        )
        session.exitstatus = 1
    deadline = time.monotonic() + 15
    left = suite_processes()
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = suite_processes()
    left += [p for p in _ray_descendants() if p not in left]
    if left:
        lines = []
        for proc in left:
            try:
                lines.append(f"  pid {proc.pid}: {' '.join(proc.cmdline())[:160]}")
                proc.kill()
            except psutil.Error:
                pass
        print(
            "\nLEAK CHECK FAILED: Ray processes started by the suite outlived it:\n"
            + "\n".join(lines)
        )
        session.exitstatus = 1
    else:
        print(f"\nleak check: no Ray process from the suite is alive ({SUITE_TMP})")
        shutil.rmtree(SUITE_TMP, ignore_errors=True)


@pytest.fixture
def results_dir(tmp_path, monkeypatch):
    """A fresh RESULTS_DIR for a test."""
    monkeypatch.setenv("LABKIT_RESULTS_DIR", str(tmp_path / "results"))
    return tmp_path / "results"


@pytest.fixture
def fresh_params(monkeypatch):
    """Forget the module-level 'current' parameters and any LABKIT_* environment."""
    from labkit import params

    monkeypatch.setattr(params, "_current", None)
    for name in ("SIZE", "DEVICE", "SEED", "RESULTS_DIR"):
        monkeypatch.delenv(f"LABKIT_{name}", raising=False)
    return params


# ---------------------------------------------------------------- tiers: markers, kept honest

#: ``make test-unit`` sets it: any test that starts Ray there fails, naming the marker it lacks.
UNIT_TIER = os.environ.get("LABKIT_TEST_TIER") == "unit"


def _unit_tier_refuses(what: str):
    def refuse(*args, **kwargs):
        raise AssertionError(f"{what}: this test starts Ray; mark it @pytest.mark.ray")

    return refuse


@pytest.fixture(autouse=True)
def _no_ray_in_the_unit_tier(request, monkeypatch):
    """In ``make test-unit``, starting Ray in this process fails the test that does it."""
    if UNIT_TIER and request.node.get_closest_marker("ray") is None:
        import ray
        import ray.cluster_utils

        monkeypatch.setattr(ray, "init", _unit_tier_refuses("ray.init"))
        monkeypatch.setattr(ray.cluster_utils, "Cluster", _unit_tier_refuses("Cluster"))
    yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """In the unit tier, a test that leaves this process connected to Ray fails (and Ray is
    shut down, so that the next test is not blamed)."""
    try:
        return (yield)
    finally:
        if UNIT_TIER and "ray" in sys.modules:
            import ray

            if ray.is_initialized():
                ray.shutdown()
                raise AssertionError(
                    f"{item.nodeid} starts Ray: mark it @pytest.mark.ray (make test-unit runs none)"
                )


def _ray_sessions() -> list[Path]:
    """Ray session folders under the suite's temp dir: each is a Ray that something started."""
    return sorted(Path(SUITE_TMP).glob("**/session_2*"))
