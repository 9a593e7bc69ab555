"""Starting and stopping Ray nodes the kit's way: ``ray start`` in a short temp directory of the
kit's own, token auth on, free ports, and stopping by that directory (never ``ray stop``).

Shared by the in-kernel clusters (:mod:`labkit.cluster`) and the workshop cluster
(:mod:`labkit.tools.workshop`).

Used in: no lesson or lab report.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

from labkit.runtime import procs
from labkit.runtime.net import LOCALHOST, ensure_token, free_port


def short_tempdir(prefix: str) -> str:
    """A short temp directory (Ray puts Unix sockets under it; their paths must stay short).

    Made under ``RAY_TMPDIR`` when that is set and short, so whoever set it (the test suite, for
    one) finds the cluster's processes there; else under ``/tmp``.
    """
    parent = os.environ.get("RAY_TMPDIR", "")
    if not (parent and len(parent) <= 40 and os.path.isdir(parent)):
        parent = "/tmp"
    return tempfile.mkdtemp(prefix=prefix, dir=parent)


def processes_under(temp_dir: str) -> list[psutil.Process]:
    """Processes whose command line names ``temp_dir`` (Ray's daemons do), plus their children."""
    named = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if temp_dir in " ".join(proc.info["cmdline"] or []) and proc.pid != os.getpid():
                named.append(proc)
        except psutil.Error:
            continue
    return [p for p in procs.with_children(named) if p.pid != os.getpid()]


CLEAR_GRACE_S = 3.0


def clear(temp_dir: str, owner: str | None = None) -> int:
    """Stop every process under ``temp_dir`` (and ``owner``'s recorded ones), remove the dir."""
    left = processes_under(temp_dir)
    if left:
        # A short grace: the cluster and its temp dir are thrown away, and on SIGTERM Ray's GCS,
        # autoscaler and runtime-env agents can take 10 s or more to exit.
        procs.terminate(left, timeout=CLEAR_GRACE_S)
    if owner:
        procs.stop(owner)
    shutil.rmtree(temp_dir, ignore_errors=True)
    return len(left)


def ray_exe() -> str:
    exe = Path(sys.executable).with_name("ray")
    return str(exe) if exe.exists() else "ray"


def node_args(temp_dir: str, object_store_mb: int) -> list[str]:
    """``ray start`` arguments every node of a kit cluster shares."""
    return [
        f"--temp-dir={temp_dir}",
        f"--object-store-memory={object_store_mb * 2**20}",
        "--disable-usage-stats",
        f"--dashboard-agent-listen-port={free_port()}",
    ]


def start_head(
    temp_dir: str,
    *,
    port: int,
    dashboard_port: int,
    num_cpus: int,
    object_store_mb: int,
    env: dict[str, str],
    extra: tuple[str, ...] = (),
) -> None:
    """``ray start --head`` on ``port``, the dashboard on 127.0.0.1:``dashboard_port``."""
    run_ray(
        [
            "start",
            "--head",
            f"--port={port}",
            f"--num-cpus={num_cpus}",
            "--num-gpus=0",
            f"--dashboard-host={LOCALHOST}",
            f"--dashboard-port={dashboard_port}",
            # a free port where Ray has a fixed default, so a learner's own Ray does not collide
            f"--ray-client-server-port={free_port()}",
            *node_args(temp_dir, object_store_mb),
            *extra,
        ],
        env,
    )


def ray_env(**extra: str) -> dict[str, str]:
    """The environment for a kit cluster's ``ray start``: token auth on, no usage stats, and no
    ``RAY_ADDRESS`` (a new head must not try to join whatever cluster the shell points at)."""
    ensure_token()  # `ray start` with token auth and no token file fails on a fresh machine
    env = dict(os.environ, RAY_AUTH_MODE="token", RAY_USAGE_STATS_ENABLED="0", **extra)
    env.pop("RAY_ADDRESS", None)
    return env


def run_ray(args: list[str], env: dict[str, str], ns: str | None = None) -> None:
    """``ray ARGS``, inside network namespace ``ns`` when given (see
    :mod:`labkit.runtime.netns`)."""
    argv = [ray_exe(), *args]
    if ns:
        from labkit.runtime.netns import in_ns

        argv = in_ns(ns, argv)
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
    if out.returncode != 0:
        raise RuntimeError(
            f"ray {' '.join(args[:2])} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
        )
