"""``labkit cluster up|down|status``: a workshop cluster on this machine that outlives the command.

``ray start`` head and worker nodes with their own temp directory and ports, token auth on; the
address and PIDs are kept in a state file, and ``down`` stops exactly those processes (never
``ray stop``, which kills every Ray process on the machine).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import psutil

from labkit import procs
from labkit.net import LOCALHOST, free_port
from labkit.raystart import (
    clear,
    node_args,
    processes_under,
    ray_env,
    run_ray,
    short_tempdir,
    start_head,
)


def state_path() -> Path:
    """Where ``labkit cluster up`` keeps the cluster's address and PIDs."""
    return procs.registry_path().parent / "cluster.json"


def up(
    workers: int = 2,
    cpus_per_worker: int = 1,
    head_cpus: int = 1,
    gpus_per_worker: float = 0,
    object_store_mb: int = 200,
) -> dict[str, Any]:
    """Start a head and ``workers`` worker nodes (``ray start``, token auth on); save the state."""
    if state_path().is_file() and status()["alive"]:
        raise RuntimeError(
            f"a kit cluster is already up ({state_path()}); run `labkit cluster down`"
        )
    from ray._private.services import get_node_ip_address

    temp_dir = short_tempdir("lkc-")
    env = ray_env()
    port, dash = free_port(), free_port()
    try:
        start_head(
            temp_dir,
            port=port,
            dashboard_port=dash,
            num_cpus=head_cpus,
            object_store_mb=object_store_mb,
            env=env,
        )
        address = f"{get_node_ip_address()}:{port}"
        for _ in range(workers):
            run_ray(
                [
                    "start",
                    f"--address={address}",
                    f"--num-cpus={cpus_per_worker}",
                    f"--num-gpus={gpus_per_worker:g}",
                    *node_args(temp_dir, object_store_mb),
                ],
                env,
            )
    except Exception:
        clear(temp_dir)
        raise
    time.sleep(1.0)
    procs_now = processes_under(temp_dir)
    state = {
        "address": address,
        "dashboard": f"http://{LOCALHOST}:{dash}",
        "temp_dir": temp_dir,
        "nodes": 1 + workers,
        "pids": [{"pid": p.pid, "create_time": p.create_time()} for p in procs_now],
        "started": time.time(),
    }
    path = state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=1))
    return state


def _alive(state: dict[str, Any]) -> list[psutil.Process]:
    return [proc for proc in map(procs.live, state.get("pids", [])) if proc is not None]


def status() -> dict[str, Any]:
    """The saved state plus how many of its processes are alive (0 when no cluster is up)."""
    path = state_path()
    if not path.is_file():
        return {"up": False, "alive": 0}
    state = json.loads(path.read_text())
    alive = _alive(state)
    extra = [p for p in processes_under(state["temp_dir"]) if p.pid not in {a.pid for a in alive}]
    return {**state, "up": bool(alive), "alive": len(alive) + len(extra)}


def down() -> int:
    """Stop exactly the processes of the kit's workshop cluster; returns how many were stopped."""
    path = state_path()
    if not path.is_file():
        return 0
    state = json.loads(path.read_text())
    victims = procs.with_children(_alive(state) + processes_under(state["temp_dir"]))
    procs.terminate(victims)
    shutil.rmtree(state["temp_dir"], ignore_errors=True)
    path.unlink()
    return len(victims)


def exports(state: dict[str, Any]) -> str:
    """The shell lines that point notebooks and ``labkit run`` at the cluster."""
    return f"export RAY_ADDRESS={state['address']}\nexport RAY_AUTH_MODE=token"
