import subprocess
import sys
import time

import psutil
import pytest

from labkit.runtime import procs


@pytest.fixture
def registry(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))
    return tmp_path / "pids.json"


def _sleeper():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_remember_alive_stop(registry):
    proc = _sleeper()
    try:
        procs.remember({"sleeper": [proc.pid]}, "test:a")
        assert registry.is_file()
        assert [e["pid"] for e in procs.alive("test:a")] == [proc.pid]
        stopped = procs.stop("test:a")
        assert [e["pid"] for e in stopped] == [proc.pid]
        assert proc.wait(timeout=10) is not None
        assert procs.alive() == []
    finally:
        proc.kill()


def test_a_reused_pid_is_never_killed(registry):
    proc = _sleeper()
    try:
        procs.remember({"sleeper": [proc.pid]}, "test:b")
        entries = procs._load()
        entries[0]["create_time"] -= 1000  # as if the PID now belonged to another process
        procs._save(entries)
        assert procs.alive() == []
        procs.stop()
        assert psutil.pid_exists(proc.pid) and proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_forget_and_wait_gone(registry):
    proc = _sleeper()
    procs.remember({"sleeper": [proc.pid]}, "test:c")
    procs.forget("test:c")
    assert procs.alive() == []
    assert procs.wait_gone([proc.pid], timeout=0.2) == [proc.pid]
    proc.kill()
    proc.wait()
    assert procs.wait_gone([proc.pid], timeout=2) == []


def test_corrupt_registry_is_treated_as_empty(registry):
    registry.write_text("{not json")
    assert procs.alive() == []


def _parent_of_one(child_code: str, ready, timeout: float = 20):
    """A Python process that starts one child running ``child_code`` and sleeps without reaping
    it; returns once ``ready(children)`` holds (or ``timeout`` passes)."""
    code = (
        "import subprocess, sys, time; "
        f"child = subprocess.Popen([sys.executable, '-c', {child_code!r}]); time.sleep(120)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not ready(psutil.Process(parent.pid).children()):
        time.sleep(0.1)
    return parent


def test_with_children_finds_the_whole_tree_once():
    parent = _parent_of_one("import time; time.sleep(60)", ready=bool, timeout=10)
    try:
        tree = procs.with_children([psutil.Process(parent.pid), psutil.Process(parent.pid)])
        assert len(tree) == 2 and tree[-1].pid == parent.pid
        procs.terminate(tree, timeout=5)
        assert parent.wait(timeout=5) is not None
        assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in tree)
    finally:
        parent.kill()


def test_terminate_does_not_wait_for_a_zombie_another_process_must_reap():
    # The child exits at once; its parent never reaps it (as Ray's autoscaler does not reap the
    # nodes it launched until it exits itself): a zombie, which only its parent can clear.
    parent = _parent_of_one(
        "pass", ready=lambda kids: bool(kids) and kids[0].status() == psutil.STATUS_ZOMBIE
    )
    try:
        (zombie,) = psutil.Process(parent.pid).children()
        assert zombie.status() == psutil.STATUS_ZOMBIE
        t0 = time.monotonic()
        procs.terminate([zombie], timeout=90)
        # it returns once the zombie is seen, not after the 90 s it would otherwise wait out
        assert time.monotonic() - t0 < 45
        assert psutil.Process(parent.pid).is_running()  # the parent was not touched
    finally:
        parent.kill()
        parent.wait(timeout=10)
