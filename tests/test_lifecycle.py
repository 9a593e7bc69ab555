"""One Ray per kernel: a new start replaces the previous one, and stops what dead kernels left."""

import os
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest

from labkit import cluster
from labkit.runtime import lifecycle, procs, raystart, session


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def _sleeper(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *args])


def _driver_that_records_and_exits(pid: int, owner: str) -> None:
    """A short-lived 'kernel' that records ``pid`` as its own, then is gone."""
    code = f"from labkit.runtime import procs; procs.remember({{'raylet': [{pid}]}}, {owner!r})"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, env=dict(os.environ))


def test_processes_of_a_gone_kernel_are_orphans_and_are_stopped(state_dir, tmp_path, capsys):
    live_owner = _sleeper()
    orphan = _sleeper()
    cluster_dir = tmp_path / "lke-dead"
    cluster_dir.mkdir()
    late_node = _sleeper(str(cluster_dir))  # a node the autoscaler added: not in the registry
    try:
        procs.remember({"raylet": [live_owner.pid]}, "session:mine")  # this process is alive
        _driver_that_records_and_exits(orphan.pid, f"cluster:{cluster_dir}")
        assert list(procs.orphans()) == [f"cluster:{cluster_dir}"]

        assert lifecycle.stop_orphans() == [f"cluster:{cluster_dir}"]
        assert orphan.wait(timeout=15) is not None and late_node.wait(timeout=15) is not None
        assert not cluster_dir.exists()
        assert live_owner.poll() is None  # a live kernel's processes are not touched
        assert "left running by a kernel that is gone" in capsys.readouterr().err
        assert procs.orphans() == {}
    finally:
        for proc in (live_owner, orphan, late_node):
            proc.kill()
            proc.wait()


def test_records_without_a_driver_are_never_orphans(state_dir):
    proc = _sleeper()
    try:
        procs._save(
            [
                {
                    "pid": proc.pid,
                    "create_time": psutil.Process(proc.pid).create_time(),
                    "name": "x",
                    "owner": "session:old",
                }
            ]
        )
        assert procs.orphans() == {}
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.ray
def test_ray_started_outside_the_kit_is_not_the_kits_to_stop(monkeypatch):
    import ray

    monkeypatch.setattr(lifecycle, "_active", None)
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    with pytest.raises(RuntimeError, match=r"not started by labkit; call ray.shutdown\(\) first"):
        lifecycle.take_over(reap=False)


def _gone(pids: list[int]) -> bool:
    return procs.wait_gone(pids, timeout=15) == []


@pytest.mark.ray
def test_each_start_replaces_what_this_kernel_started_before(state_dir):
    import ray

    first = session.start(num_cpus=1)
    first_pids = [p for plist in first.pids.values() for p in plist]
    local = cluster.LocalCluster(head={"num_cpus": 1}, nodes=[{"num_cpus": 1}]).start()
    try:
        assert first._stopped and _gone(first_pids)
        assert lifecycle.active() is local and len(ray.nodes()) == 2
        elastic = cluster.ElasticCluster(max_workers=1).start()
        try:
            assert raystart.processes_under(local.temp_dir) == []
            assert lifecycle.active() is elastic and ray.is_initialized()
            again = session.start(num_cpus=1)
            assert raystart.processes_under(elastic.temp_dir) == []
            assert lifecycle.active() is again
            assert ray.get(ray.put(41)) + 1 == 42
            again.stop()
            assert lifecycle.active() is None and not ray.is_initialized()
        finally:
            elastic.stop()
    finally:
        local.stop()
        session.stop()


KILLED_KERNEL = """
import os, signal, sys
from labkit import cluster
from labkit.runtime import session
kind = sys.argv[1]
if kind == "session":
    thing = session.start(num_cpus=1)
    print(thing.session_dir, flush=True)
else:
    thing = getattr(cluster, kind)().start()
    print(thing.temp_dir, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.ray
@pytest.mark.parametrize("kind", ["session", "LocalCluster", "ElasticCluster"])
def test_a_killed_kernels_session_or_cluster_is_stopped_by_the_next_start(state_dir, kind):
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(KILLED_KERNEL), kind],
        capture_output=True,
        text=True,
        timeout=180,
        env=dict(os.environ, LABKIT_STATE_DIR=str(state_dir)),
    )
    assert out.returncode == -signal.SIGKILL, out.stderr[-2000:]
    where = out.stdout.strip().splitlines()[-1]
    owner = ("session:" if kind == "session" else "cluster:") + where
    left = procs.alive(owner)
    # A local session's GCS and raylet share the driver's fate. A LocalCluster's processes are
    # the kernel's children: Ray's reaper may or may not have stopped them by now (seen both on
    # a clean machine). `ray start` daemons (ElasticCluster) never share it: they must be left.
    if kind == "ElasticCluster":
        assert left, "the killed kernel left nothing to stop: the test shows nothing"
    # The next lesson's start in another kernel: it reaps the orphans, then starts its own.
    fresh = session.start(num_cpus=1)
    try:
        assert _gone([e["pid"] for e in left])
        assert procs.alive(owner) == []
        if kind != "session":
            assert raystart.processes_under(where) == []
    finally:
        fresh.stop()


@pytest.mark.ray
def test_a_lesson_can_ask_for_a_local_session_while_ray_address_is_set(
    state_dir, monkeypatch, capsys
):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # nothing listens there
    s = session.start(num_cpus=1, local=True)
    try:
        assert s.mode == "local" and s.address != "127.0.0.1:1"
        assert "RAY_ADDRESS=127.0.0.1:1 is not used here" in capsys.readouterr().err
    finally:
        s.stop()
