"""Sessions against real Ray: a local instance, and joining an existing cluster via RAY_ADDRESS."""

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

import labkit
from labkit.runtime import logs, net, procs, session

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def local():
    logical = os.environ.pop(session.LOGICAL_GPUS, None)  # make test sets it for the notebooks
    s = session.start(num_cpus=2, num_gpus=2, resources={"FPGA": 4})
    yield s
    s.stop()
    if logical is not None:
        os.environ[session.LOGICAL_GPUS] = logical


@pytest.mark.parametrize("raw, gpus", [("", None), ("1", 1), (" 3 ", 3)])
def test_logical_gpus_come_from_the_environment(monkeypatch, raw, gpus):
    monkeypatch.setenv(session.LOGICAL_GPUS, raw)
    assert session.logical_gpus() == gpus


@pytest.mark.parametrize("raw", ["two", "0", "-1", "1.5"])
def test_a_bad_logical_gpu_count_names_the_valid_ones(monkeypatch, raw):
    from labkit.params import ParameterError

    monkeypatch.setenv(session.LOGICAL_GPUS, raw)
    with pytest.raises(ParameterError, match="whole number of GPUs >= 1"):
        session.logical_gpus()


def test_local_session_has_logical_gpus_and_custom_resources(local):
    import ray

    assert local.mode == "local" and ray.is_initialized()
    res = local.resources
    assert res["CPU"] == 2 and res["GPU"] == 2 and res["FPGA"] == 4
    assert local.gpus_are_logical
    text = local.describe()
    assert "logical" in text and local.dashboard_url in text and "FPGA" in text


def test_start_is_idempotent(local):
    assert session.start(num_cpus=2, num_gpus=2, resources={"FPGA": 4}) is local
    assert session.current() is local


def test_require_head_passes_on_the_head_and_names_both_nodes_elsewhere(local, monkeypatch):
    import ray

    local.require_head("Serve's proxy")  # a local session's only node is its head
    other = {"NodeID": "f" * 56, "Alive": True, "Resources": {session.HEAD: 1.0}}
    monkeypatch.setattr(ray, "nodes", lambda: [other])  # as seen from a worker machine
    with pytest.raises(RuntimeError, match=r"head node \(Serve's proxy\).*the head ffffffffffff"):
        local.require_head("Serve's proxy")


def test_a_rerun_frees_the_cpus_serve_apps_of_the_first_run_hold(local, capfd):
    """Run All again in one kernel: the setup cell's start() finds the same session, and
    the first run's Serve replicas must not keep the CPUs that the rerun's tasks need."""
    import ray
    from ray import serve

    @serve.deployment(ray_actor_options={"num_cpus": 1})
    class Hold:
        def __call__(self) -> str:
            return "held"

    serve.start(http_options={"host": "127.0.0.1", "port": local.serve_port})
    serve.run(Hold.bind(), name="held", route_prefix="/held")
    assert ray.available_resources().get("CPU", 0) <= 1  # the replica holds one of two
    assert session.start(num_cpus=2, num_gpus=2, resources={"FPGA": 4}) is local
    assert not local._serve_running()
    assert "earlier run left running (held)" in capfd.readouterr().err
    labkit.wait_until(lambda: ray.available_resources().get("CPU", 0) == 2, timeout=30)
    assert session.start(num_cpus=2, num_gpus=2, resources={"FPGA": 4}) is local  # no Serve: quiet
    assert "Serve" not in capfd.readouterr().err


def test_expected_teardown_noise_is_dropped_and_worker_prints_are_not(local, capfd):
    import ray

    assert logs.filter_worker_logs()  # idempotent: the session already wrapped the handler
    lines = [
        "before",
        "[2026 E 1] (gcs_server) gcs_actor_scheduler.cc:538: Failed to kill actor NIL_ID, return "
        "status: Invalid: KillActor RPC failed for actor NIL_ID: RpcError: Socket closed",
        "(gcs_server) Failed to kill actor 2b44f2873, return status: Invalid: KillActor RPC "
        "failed for actor 2b44f2873: RpcError: RPC error: Socket closed rpc_code: 14",
        "Exception in thread pool-1/completion-signaler:",
        "Traceback (most recent call last):",
        '  File "dynamic_work_queue.py", line 180, in _signal_completion',
        "InterruptedError",
        "after",
    ]
    assert logs.drop_noise(lines) == ["before", "after"]

    @ray.remote
    def shout():
        print("a line the learner should see")
        print("Failed to kill actor ab12, return status: Invalid: KillActor RPC failed: dropped")

    ray.get(shout.remote())
    deadline = time.time() + 10
    seen = ""
    while "should see" not in seen and time.time() < deadline:
        time.sleep(0.2)
        seen += capfd.readouterr().out
    assert "a line the learner should see" in seen and "ab12" not in seen


def test_tasks_run_and_pids_are_recorded(local):
    import ray

    @ray.remote
    def square(x):
        return x * x

    assert ray.get([square.remote(i) for i in range(5)]) == [0, 1, 4, 9, 16]
    recorded = {e["pid"] for e in procs.alive(local.owner)}
    assert set(local.pids["raylet"]) <= recorded and set(local.pids["gcs_server"]) <= recorded


def test_dashboard_is_on_loopback_and_needs_the_token(local):
    assert local.dashboard_url.startswith("http://127.0.0.1:")
    assert local.dashboard_get("/api/version")["ray_version"].startswith("2.60")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(local.dashboard_url + "/api/version", timeout=10)
    assert err.value.code == 401
    port = int(local.dashboard_url.rsplit(":", 1)[1])
    listeners = [
        c.laddr.ip
        for pid in local.pids["dashboard"]
        for c in psutil.Process(pid).net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    ]
    assert listeners == ["127.0.0.1"]


def test_store_stats_see_a_put(local):
    import numpy as np
    import ray

    before = session.store_stats()
    ref = ray.put(np.zeros(2**20))  # 8 MiB
    after = session.store_stats()
    assert after["used_bytes"] >= before["used_bytes"] + 8 * 2**20
    assert after["objects"] >= 1 and after["spilled_bytes"] == 0
    del ref


def test_ports_are_free_and_distinct(local):
    ports = {local.serve_port, local.metrics_port, int(local.dashboard_url.rsplit(":", 1)[1])}
    assert len(ports) == 3


def test_stop_tears_down_serve_then_ray_and_leaves_nothing():
    import ray
    from ray import serve

    s = session.start(num_cpus=2)  # different settings: the module session restarts
    assert s.mode == "local"

    @serve.deployment(ray_actor_options={"num_cpus": 0.1})
    def hello(request):
        return "hi"

    serve.start(http_options={"host": "127.0.0.1", "port": s.serve_port})
    serve.run(hello.bind(), name="hello", route_prefix="/hello")
    body = urllib.request.urlopen(f"http://127.0.0.1:{s.serve_port}/hello", timeout=30).read()
    assert body == b"hi"
    pids = [p for plist in s.pids.values() for p in plist]
    s.stop()
    s.stop()  # twice is fine
    assert not ray.is_initialized()
    assert procs.wait_gone(pids, timeout=15) == []
    assert procs.alive(s.owner) == []
    assert session.current() is None


def test_a_local_lesson_points_ray_address_at_itself_while_it_runs(monkeypatch):
    """local=True with RAY_ADDRESS set: calls that read RAY_ADDRESS (State API, CLI, Jobs)
    reach the local session, and the old value comes back at stop."""
    from ray.util.state import list_nodes

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # a cluster that must not be asked
    monkeypatch.setenv("RAY_API_SERVER_ADDRESS", "http://127.0.0.1:1")  # nor its dashboard
    s = session.start(num_cpus=1, local=True)
    try:
        assert s.mode == "local"
        assert os.environ["RAY_ADDRESS"] == s.address != "127.0.0.1:1"
        assert "RAY_API_SERVER_ADDRESS" not in os.environ
        assert len(list_nodes()) == 1  # no address: RAY_ADDRESS, i.e. the local session
        code = "from ray.util.state import list_nodes; print('NODES', len(list_nodes()))"
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        assert "NODES 1" in out.stdout, out.stderr[-2000:]  # a subprocess inherits it
    finally:
        s.stop()
    assert os.environ["RAY_ADDRESS"] == "127.0.0.1:1"
    assert os.environ["RAY_API_SERVER_ADDRESS"] == "http://127.0.0.1:1"  # both put back


def test_joining_an_existing_cluster_ships_labkit(tmp_path):
    """RAY_ADDRESS set: connect with token auth, no resource args, labkit importable on workers."""
    gcs_port, dash_port = net.free_port(), net.free_port()
    env = dict(os.environ, RAY_AUTH_MODE="token")
    head = subprocess.Popen(
        [
            os.path.join(os.path.dirname(sys.executable), "ray"),
            "start",
            "--head",
            "--block",
            f"--port={gcs_port}",
            "--num-cpus=1",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dash_port}",
            "--disable-usage-stats",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    try:
        code = (
            "import ray, labkit\n"
            "s = labkit.start_session(num_cpus=4, num_gpus=2)\n"
            "assert s.mode == 'cluster', s.mode\n"
            "@ray.remote\n"
            "def where():\n"
            "    import labkit\n"
            "    return labkit.__file__\n"
            "print('REMOTE', ray.get(where.remote()))\n"
            "print('CPUS', ray.cluster_resources()['CPU'])\n"
            "s.require_head('this test')  # a driver on the head's machine is on the head node\n"
            "s.stop()\n"
        )
        client_env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
        client_env["RAY_ADDRESS"] = f"127.0.0.1:{gcs_port}"
        out = None
        for _attempt in range(3):  # the head may still be starting
            out = subprocess.run(
                [sys.executable, "-c", code],
                env=client_env,
                capture_output=True,
                text=True,
                timeout=180,
                cwd=tmp_path,
            )
            if out.returncode == 0:
                break
            time.sleep(5)
        assert out.returncode == 0, out.stderr[-3000:]
        assert "CPUS 1.0" in out.stdout  # the cluster's resources, not the requested 4
        remote_path = out.stdout.split("REMOTE ", 1)[1].splitlines()[0]
        assert "runtime_resources" in remote_path  # shipped by runtime_env, not the repo copy
        assert "ignored" in out.stderr
    finally:
        procs.terminate(procs.with_children([psutil.Process(head.pid)]), timeout=20)
        head.wait(timeout=10)


def test_a_missing_token_file_is_created_once_and_kept(tmp_path, monkeypatch):
    from labkit.runtime import net

    path = tmp_path / "ray" / "auth_token"
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(path))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    token = net.ensure_token()
    assert len(token) == 64 and int(token, 16) >= 0
    assert path.read_text() == token and oct(path.stat().st_mode & 0o777) == "0o600"
    assert net.ensure_token() == token  # never replaced
    assert [p.name for p in path.parent.iterdir()] == ["auth_token"]  # no temp file left


def test_timeline_spans_name_the_tasks_that_ran():
    import ray

    from labkit import trace

    @ray.remote
    def nap(ms: float) -> float:
        time.sleep(ms / 1000)
        return ms

    with session.start(num_cpus=2):  # a session of its own: earlier tests stopped `local`
        refs = [nap.remote(ms) for ms in (50, 300, 50)]
        ray.get(refs)
        events = ray.timeline()
    spans = trace.task_spans(events, names=["nap"])
    spans = spans[spans["task_id"].isin({r.task_id().hex() for r in refs})]
    assert len(spans) == 3
    longest = spans.loc[spans["dur_s"].idxmax()]
    assert longest.task_id == refs[1].task_id().hex() and longest.dur_s >= 0.3


def test_tls_settings_lesson_10_names_exist_in_this_ray():
    """Lesson 10 names Ray's gRPC TLS variables: they must still be the ones Ray reads."""
    import ray

    blob = (Path(ray.__file__).parent / "_raylet.so").read_bytes()
    for name in (b"RAY_USE_TLS", b"RAY_TLS_SERVER_CERT", b"RAY_TLS_SERVER_KEY", b"RAY_TLS_CA_CERT"):
        assert name in blob, name


def test_a_second_ray_on_the_machine_still_gets_a_job_agent(tmp_path):
    """Another Ray that is not the kit's holds the agent port every ray.init takes (52365);
    a kit session gets a free one, so its Jobs API still works."""
    from ray.job_submission import JobStatus, JobSubmissionClient

    from labkit.checks import wait_until

    ready = tmp_path / "ready"
    other = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import pathlib, time, ray; ray.init(address='local', num_cpus=1, "
            "include_dashboard=True, dashboard_host='127.0.0.1', logging_level='ERROR'); "
            f"pathlib.Path({str(ready)!r}).touch(); time.sleep(300)",
        ],
        env=os.environ | {"RAY_AUTH_MODE": "token"},
    )
    try:
        assert wait_until(ready.exists, 120), "the other Ray did not start"
        with session.start(num_cpus=2) as mine:
            import ray

            assert ray.nodes()[0]["DashboardAgentListenPort"] != 52365
            client = JobSubmissionClient(mine.dashboard_url)
            job = client.submit_job(entrypoint="echo agent ok")
            assert wait_until(lambda: client.get_job_status(job).is_terminal(), 120)
            assert client.get_job_status(job) == JobStatus.SUCCEEDED
    finally:
        other.terminate()  # its ray.init registered a shutdown at exit
        other.wait(60)
