import os
import time

from labkit import cpuuse

RAY = "/venv/lib/python3.11/site-packages/ray"


def test_kind_of_sorts_rays_processes():
    cases = [
        (
            (
                1,
                "raylet",
                [
                    f"{RAY}/core/src/ray/raylet/raylet",
                    "--python_worker_command=x default_worker.py",
                ],
            ),
            "raylet",
        ),
        ((2, "gcs_server", [f"{RAY}/core/src/ray/gcs/gcs_server", "--log_dir=/tmp"]), "GCS"),
        ((3, "ray::IDLE", ["ray::IDLE"]), "Ray workers"),
        ((4, "python", ["ray::spin", ""]), "Ray workers"),
        ((5, "ray::DashboardAgent", ["ray::DashboardAgent"]), "other Ray"),
        (
            (6, "python", ["python", f"{RAY}/dashboard/dashboard.py", "--host=127.0.0.1"]),
            "other Ray",
        ),
        (
            (
                7,
                "ray-dashboard-StateHead-0",
                ["ray-dashboard-StateHead-0 (python -B -c ...)"],
            ),
            "other Ray",
        ),
        ((8, "python", ["python", f"{RAY}/_private/workers/default_worker.py"]), "Ray workers"),
        ((9, "bash", ["bash", "-c", "make test"]), "other"),
        ((os.getpid(), "python", ["python"]), "driver"),
    ]
    for (pid, name, cmdline), kind in cases:
        assert cpuuse.kind_of(pid, name, cmdline) == kind, (name, cmdline)


def test_cpu_by_kind_sees_this_process_busy():
    with cpuuse.cpu_by_kind() as use:
        end = time.process_time() + 0.2
        while time.process_time() < end:
            pass
    assert set(use.seconds) == set(cpuuse.KINDS)
    assert use.seconds["driver"] >= 0.15 and use.wall_s >= 0.15
    shares = use.shares()
    assert {"stolen", "idle"} <= set(shares) and use.stolen_s >= 0
    assert abs(sum(shares.values()) - 1) < 0.05 or use.idle_s == 0


def _busy_worker(seconds: float):
    """A process that kind_of reads as a Ray worker (its command line names default_worker.py)
    and spins for ``seconds``."""
    import subprocess
    import sys

    spin = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass"
    return subprocess.Popen([sys.executable, "-c", spin, "default_worker.py"])


def test_wait_quiet_waits_for_busy_workers_to_finish():
    proc = _busy_worker(1.5)
    try:
        time.sleep(0.2)  # it is running
        waited, share = cpuuse.wait_quiet(below=0.03, window_s=0.3, timeout_s=20)
        assert proc.poll() is not None  # it only returned once the spinner was done
        assert waited >= 1.0 and share < 0.03
    finally:
        proc.kill()
        proc.wait()


def test_wait_quiet_gives_up_after_its_timeout_and_says_what_it_saw():
    proc = _busy_worker(10)
    try:
        time.sleep(0.2)
        waited, share = cpuuse.wait_quiet(below=0.03, window_s=0.3, timeout_s=1.0)
        assert proc.poll() is None  # still spinning
        assert 1.0 <= waited < 5 and share >= 0.03
    finally:
        proc.kill()
        proc.wait()


def test_a_root_counts_only_the_processes_under_it():
    """cpu_by_kind(root=...) and NodeCpu count a process tree (a raylet's: one node's), not the
    machine: a spinner under the root counts, one beside it does not."""
    import subprocess
    import sys

    spin = "import time\nwhile time.process_time() < 0.6: pass\ntime.sleep(30)"
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys; subprocess.run([sys.executable, '-c', {spin!r}])",
        ]
    )
    beside = subprocess.Popen([sys.executable, "-c", spin])
    try:
        counter = cpuuse.NodeCpu(sample_s=0.2, root=parent.pid)
        counter.begin("w")
        with cpuuse.cpu_by_kind(root=parent.pid) as use:
            time.sleep(2.0)
        seconds = counter.end("w")
        under = sum(use.seconds.values())
        assert 0.3 <= under <= 1.0  # the grandchild's spin (and its start-up), not the other's
        assert 0.3 <= sum(seconds.values()) <= 1.0
    finally:
        for proc in (parent, beside):
            proc.kill()
            proc.wait()


def test_raylet_pid_is_none_outside_ray():
    assert cpuuse.raylet_pid() is None
    try:
        cpuuse.NodeCpu()
    except RuntimeError as exc:
        assert "Ray actor" in str(exc)
    else:
        raise AssertionError("NodeCpu outside Ray must refuse")
