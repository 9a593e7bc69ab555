"""Local multi-node clusters (real raylets on one machine), and a workshop cluster."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from labkit import cluster
from labkit.runtime import netns, procs, raystart
from labkit.tools import workshop

pytestmark = pytest.mark.ray


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_local_cluster_places_tasks_on_separate_nodes_and_cleans_up(state_dir):
    from ray._common.utils import get_ray_address_file

    # Ray's "current cluster" file, where the State API and `ray status` look for a cluster: it
    # names another one (the suite's own temp dir, so nothing outside the suite is touched).
    pointer = Path(get_ray_address_file(None))
    assert str(pointer).startswith(os.environ["RAY_TMPDIR"])
    pointer.parent.mkdir(parents=True, exist_ok=True)
    saved = pointer.read_text() if pointer.exists() else None
    with socket.create_server(("127.0.0.1", 0)) as other:  # "another cluster" that answers
        elsewhere = f"127.0.0.1:{other.getsockname()[1]}"
        pointer.write_text(elsewhere)
        try:
            _places_tasks_on_separate_nodes_and_cleans_up(pointer, elsewhere)
        finally:
            _put(pointer, saved)


def _put(pointer: Path, text: str | None) -> None:
    if text is None:
        pointer.unlink(missing_ok=True)
    else:
        pointer.write_text(text)


def test_the_current_cluster_file_gets_back_a_live_address_and_loses_a_dead_one(tmp_path):
    pointer = tmp_path / "ray_current_cluster"
    with socket.create_server(("127.0.0.1", 0)) as live:
        alive = f"127.0.0.1:{live.getsockname()[1]}"
        for before, expected in [(alive, alive), ("127.0.0.1:1", None), (None, None)]:
            _put(pointer, before)
            saved = cluster._AddressPointer(pointer, before)
            pointer.write_text("127.0.0.1:2")  # what cluster_utils writes: ours
            saved.restore("127.0.0.1:2")
            assert (pointer.read_text() if pointer.exists() else None) == expected, before
        pointer.write_text("10.0.0.9:6379")  # somebody else's since: left alone
        cluster._AddressPointer(pointer, alive).restore("127.0.0.1:2")
        assert pointer.read_text() == "10.0.0.9:6379"


def _places_tasks_on_separate_nodes_and_cleans_up(pointer, elsewhere):
    import ray

    with cluster.LocalCluster(
        head={"num_cpus": 1}, nodes=[{"num_cpus": 1, "resources": {"FPGA": 2}}, {"num_cpus": 1}]
    ) as c:
        assert len([n for n in ray.nodes() if n["Alive"]]) == 3
        assert ray.cluster_resources()["FPGA"] == 2

        @ray.remote(num_cpus=1)
        def where():
            import time

            time.sleep(0.5)
            return ray.get_runtime_context().get_node_id()

        spread = ray.get([where.options(scheduling_strategy="SPREAD").remote() for _ in range(3)])
        assert len(set(spread)) == 3
        temp_dir = c.temp_dir
        victim = c.worker_nodes[0]
        c.remove_node(victim)
        deadline = (
            time.monotonic() + 90
        )  # the GCS notices a dead node after a few missed health checks
        while len([n for n in ray.nodes() if n["Alive"]]) != 2 and time.monotonic() < deadline:
            time.sleep(1)
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        assert procs.alive(f"cluster:{temp_dir}")
        assert pointer.read_text().strip() == c.address  # cluster_utils points there while it runs
    assert not ray.is_initialized()
    # ... and once it is gone, the file names the cluster it named before, not a dead one
    assert pointer.read_text() == elsewhere
    assert raystart.processes_under(temp_dir) == []
    assert procs.alive(f"cluster:{temp_dir}") == []


def test_workshop_cluster_up_join_down(state_dir):
    env = dict(os.environ, LABKIT_STATE_DIR=str(state_dir))
    cli = [sys.executable, "-m", "labkit", "cluster"]
    up = subprocess.run(
        cli + ["up", "--workers", "1"], env=env, capture_output=True, text=True, timeout=240
    )
    assert up.returncode == 0, up.stderr[-2000:]
    state = workshop.status()
    try:
        assert state["up"] and state["nodes"] == 2 and "RAY_AUTH_MODE=token" in up.stdout
        code = (
            "import ray, labkit\n"
            "s = labkit.start_session()\n"
            "assert s.mode == 'cluster'\n"
            "print('NODES', len([n for n in ray.nodes() if n['Alive']]))\n"
            "square = ray.remote(lambda i: i * i)\n"
            "print('SUM', sum(ray.get([square.remote(i) for i in range(4)])))\n"
            "s.stop()\n"
        )
        joined = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=180,
            env=dict(env, RAY_ADDRESS=state["address"], RAY_AUTH_MODE="token"),
        )
        assert joined.returncode == 0, joined.stderr[-2000:]
        assert "NODES 2" in joined.stdout and "SUM 14" in joined.stdout
        st = subprocess.run(cli + ["status"], env=env, capture_output=True, text=True, timeout=60)
        assert st.returncode == 0 and state["address"] in st.stdout
        assert all(node_ip in st.stdout for node_ip in state["node_ips"])  # each node's address
        if netns.unavailable() is None:  # as root: the worker node in a namespace of its own
            assert state["net"] and state["node_ips"][1].startswith("198.18.")
            assert "netns" in st.stdout and state["node_ips"][1] != state["node_ips"][0]
        else:
            assert "every node is on" in up.stdout  # the fallback says so in one line
    finally:
        pids = [e["pid"] for e in state.get("pids", [])]
        down = subprocess.run(cli + ["down"], env=env, capture_output=True, text=True, timeout=120)
    assert down.returncode == 0 and "stopped" in down.stdout
    assert not any(
        psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids
    )
    assert raystart.processes_under(state["temp_dir"]) == []
    assert not workshop.state_path().exists()
    if state.get("net"):
        tag = state["net"]["tag"]
        assert not [n for n in netns.namespaces() + netns.links() if netns.tag_of(n) == tag]


def test_down_without_a_cluster_is_a_no_op(state_dir):
    assert workshop.down() is None
    assert workshop.status() == {"up": False, "alive": 0}


def test_elastic_config_passes_rays_validator_and_checks_its_bounds():
    from ray.autoscaler._private.util import validate_config

    cfg = cluster.elastic_config("127.0.0.1:1234", max_workers=2, idle_timeout_s=6)
    validate_config(cfg)
    assert cfg["idle_timeout_minutes"] == pytest.approx(0.1)
    worker = cfg["available_node_types"][cluster.WORKER_NODE_TYPE]
    assert (worker["min_workers"], worker["max_workers"]) == (0, 2)
    assert cfg["available_node_types"]["ray.head.default"]["resources"] == {"CPU": 0}
    assert cfg["provider"]["use_node_id_as_ip"] is True  # without it idle nodes never go away
    assert cfg["provider"]["foreground_node_launch"] is True  # without it it can overshoot
    with pytest.raises(ValueError, match="min_workers"):
        cluster.elastic_config("127.0.0.1:1234", min_workers=3, max_workers=2)


def test_elastic_cluster_scales_up_for_pending_work_then_down_when_idle(state_dir):
    import ray

    with cluster.ElasticCluster(max_workers=2, idle_timeout_s=5) as c:
        temp_dir = c.temp_dir
        assert c.workers() == 0  # nothing pending, nothing added

        @ray.remote(num_cpus=1)
        def work():
            time.sleep(3)
            return ray.get_runtime_context().get_node_id()

        refs = [work.remote() for _ in range(4)]
        trace = c.trace(refs, timeout=150)
        peak = max(s["workers"] for s in trace)
        assert peak == 2, trace  # up to max_workers, never past it
        assert trace[0]["queued"] == 4 and trace[-1]["done"] == 4
        assert trace[-1]["workers"] == 0, trace  # the idle nodes were removed
        assert cluster.FAKE_HEAD_NODE_ID not in ray.get(refs)  # the 0-CPU head ran nothing
        assert procs.alive(f"cluster:{temp_dir}")
    assert not ray.is_initialized()
    assert raystart.processes_under(temp_dir) == []
    assert procs.alive(f"cluster:{temp_dir}") == []


def test_node_types_that_fit():
    cfg = cluster.elastic_config("127.0.0.1:1", cpus_per_node=2)
    assert cluster.node_types_that_fit(cfg, {"CPU": 1}) == [cluster.WORKER_NODE_TYPE]
    assert cluster.node_types_that_fit(cfg, {"CPU": 2}) == [cluster.WORKER_NODE_TYPE]
    assert cluster.node_types_that_fit(cfg, {"CPU": 3}) == []
    assert cluster.node_types_that_fit(cfg, {"CPU": 1, "GPU": 1}) == []
    assert cluster.node_types_that_fit(cfg, {"CPU": 1, "GPU": 0}) == [cluster.WORKER_NODE_TYPE]


def test_scaling_events_reads_a_trace():
    trace = [
        {"t": 0, "workers": 0, "done": 0},
        {"t": 5, "workers": 2, "done": 0},
        {"t": 6, "workers": 3, "done": 1},
        {"t": 9, "workers": 3, "done": 4},
        {"t": 15, "workers": 1, "done": 4},
        {"t": 20, "workers": 0, "done": 4},
        {"t": 21, "workers": 0, "done": 4},
    ]
    ev = cluster.scaling_events(trace)
    assert ev == {
        "peak_workers": 3,
        "t_peak": 6,
        "t_done": 9,
        "final_workers": 0,
        "t_final": 20,
        "idle_down_s": 11,
    }
    with pytest.raises(ValueError):
        cluster.scaling_events([])
