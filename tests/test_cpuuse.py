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
