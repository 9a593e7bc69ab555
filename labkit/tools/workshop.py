"""``labkit cluster up|down|status``: a workshop cluster on this machine that outlives the command.

``ray start`` head and worker nodes, each with its own temp directory, ports, CPUs, memory and
object store, token auth on. As root on Linux each worker node runs in a network namespace of its
own with a 198.18.x.x address (:mod:`labkit.runtime.netns`); the head stays in the machine's
namespace, on the bridge's address, so drivers join as usual. Elsewhere every node shares one
address, and the state says why. The addresses, PIDs, namespaces and links are kept in a state file,
and ``down`` stops exactly those processes and removes exactly those namespaces and links (never
``ray stop``, which kills every Ray process on the machine).

Used in: no lesson or lab report.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import psutil

from labkit.runtime import netns, procs
from labkit.runtime.net import LOCALHOST, free_port
from labkit.runtime.raystart import (
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


def _save(state: dict[str, Any]) -> None:
    procs.write_json(state_path(), state)


def shm_free_mb() -> int | None:
    """Free space in ``/dev/shm`` (every node's object store lives there), in MiB; None where
    there is no ``/dev/shm`` (macOS: Ray puts the stores elsewhere)."""
    try:
        return shutil.disk_usage("/dev/shm").free // 2**20
    except OSError:
        return None


def up(
    workers: int = 2,
    cpus_per_worker: int = 1,
    head_cpus: int = 1,
    *,
    gpus_per_worker: float = 0,
    object_store_mb: int = 200,
    memory_mb: int = 1024,
    namespaced: bool | None = None,
) -> dict[str, Any]:
    """Start a head and ``workers`` worker nodes (``ray start``, token auth on); save the state.

    ``namespaced=None`` gives each worker node a network namespace and a 198.18.x.x address of its
    own where the machine allows it (:mod:`labkit.runtime.netns`) and else puts every node on one
    address, saying why in ``state["fallback"]``; ``True`` requires namespaces, ``False`` refuses
    them. Each node gets its own temp dir and explicit CPUs, memory and object store.
    """
    # Long: one ordered start (the state saved first, the namespaces, the head, each worker)
    # inside the one try whose except tears all of it down; split, each piece would need its own.
    why = _make_room(workers, object_store_mb, namespaced)
    from labkit.runtime.rayprivate import get

    get_node_ip_address = get("get_node_ip_address")

    temp_dir = short_tempdir("lkc-")
    tag = Path(temp_dir).name[-4:].lower().replace("_", "x")
    env = ray_env()
    port, dash = free_port(), free_port()
    state: dict[str, Any] = {
        "address": None,
        "dashboard": f"http://{LOCALHOST}:{dash}",
        "temp_dir": temp_dir,
        "nodes": 1 + workers,
        "node_ips": [],
        "net": None,
        "fallback": why,
        "pids": [],
        "started": time.time(),
    }
    _save(state)
    try:
        if not why:
            state["net"] = _make_net(state, tag, workers)
        head_ip = state["net"]["head_ip"] if state["net"] else get_node_ip_address()
        start_head(
            f"{temp_dir}/head",
            port=port,
            dashboard_port=dash,
            num_cpus=head_cpus,
            object_store_mb=object_store_mb,
            env=env,
            extra=(f"--node-ip-address={head_ip}", f"--memory={memory_mb * 2**20}"),
        )
        state["address"] = f"{head_ip}:{port}"
        state["node_ips"] = [head_ip]
        _save(state)
        for i in range(workers):
            node = state["net"]["nodes"][i] if state["net"] else {"ip": head_ip, "ns": None}
            args = [
                "start",
                f"--address={state['address']}",
                f"--node-ip-address={node['ip']}",
                f"--num-cpus={cpus_per_worker}",
                f"--num-gpus={gpus_per_worker:g}",
                f"--memory={memory_mb * 2**20}",
                *node_args(f"{temp_dir}/w{i}", object_store_mb),
            ]
            run_ray(args, env, ns=node["ns"])
            state["node_ips"].append(node["ip"])
    except Exception:
        down()
        raise
    time.sleep(1.0)
    state["pids"] = [{"pid": p.pid, "create_time": p.create_time()} for p in _processes(state)]
    _save(state)
    return state


def _make_net(state: dict[str, Any], tag: str, workers: int) -> dict[str, Any]:
    """The worker nodes' namespaces, each step saved in ``state`` as it is made, so that
    ``down`` undoes a partial one."""

    def record(net: dict[str, Any]) -> None:
        state["net"] = net
        _save(state)

    return netns.create(tag, workers, record=record, owner=str(state_path()))


def _make_room(workers: int, object_store_mb: int, namespaced: bool | None) -> str | None:
    """Before :func:`up`: refuse a second live cluster, clean what a killed run left, and check
    that namespaces (when required) and ``/dev/shm`` allow this one. Returns why the nodes
    share one address (None where each worker node gets a namespace)."""
    if state_path().is_file():
        if status()["alive"]:
            raise RuntimeError(
                f"a kit cluster is already up ({state_path()}); run `labkit cluster down`"
            )
        down()  # what a killed run left: its processes, namespaces and links
    netns.remove_stale()
    why = netns.unavailable() if namespaced is not False else "asked for one address"
    if namespaced and why:
        raise RuntimeError(f"namespaced nodes are not possible here: {why}")
    stores, shm = (1 + workers) * object_store_mb, shm_free_mb()
    if shm is not None and stores > 0.8 * shm:
        raise RuntimeError(
            f"{1 + workers} object stores of {object_store_mb} MiB need {stores} MiB of /dev/shm; "
            f"{shm} MiB are free (pass a smaller object_store_mb)"
        )
    return why


def _processes(state: dict[str, Any]) -> list[psutil.Process]:
    """Every process of the cluster: under its temp dir, or inside one of its namespaces."""
    found = {p.pid: p for p in processes_under(state["temp_dir"])}
    if state.get("address"):  # Ray's client server names the GCS address, not the temp dir
        found.update({p.pid: p for p in processes_under(f"--address={state['address']}")})
    for node in (state.get("net") or {}).get("nodes", []):
        for pid in netns.pids_in(node["ns"]):
            try:
                found.setdefault(pid, psutil.Process(pid))
            except psutil.Error:
                continue
    return list(found.values())


def fallback_line(state: dict[str, Any]) -> str | None:
    """One line saying the nodes share one address, why, and what root would add."""
    if not state.get("fallback"):
        return None
    return (
        f"labkit: every node is on {state['node_ips'][0] if state.get('node_ips') else 'one'} "
        f"address ({state['fallback']}); as root on Linux each worker node gets a network "
        "namespace and a 198.18.x.x address of its own, so traffic between nodes crosses a link"
    )


def nodes_line(state: dict[str, Any]) -> str:
    """Each node's address, head first (with its namespace where it has one)."""
    parts = [f"head {state['node_ips'][0]}" if state.get("node_ips") else "head ?"]
    nodes = (state.get("net") or {}).get("nodes", [])
    for i, node_ip in enumerate(state.get("node_ips", [])[1:]):
        where = f" (netns {nodes[i]['ns']})" if i < len(nodes) else ""
        parts.append(f"worker {i} {node_ip}{where}")
    return "nodes: " + ", ".join(parts)


def _alive(state: dict[str, Any]) -> list[psutil.Process]:
    return [proc for proc in map(procs.live, state.get("pids", [])) if proc is not None]


def status() -> dict[str, Any]:
    """The saved state plus how many of its processes are alive (0 when no cluster is up)."""
    path = state_path()
    if not path.is_file():
        return {"up": False, "alive": 0}
    state = json.loads(path.read_text())
    alive = _alive(state)
    extra = [p for p in _processes(state) if p.pid not in {a.pid for a in alive}]
    return {**state, "up": bool(alive), "alive": len(alive) + len(extra)}


def down() -> dict[str, Any] | None:
    """Stop exactly the processes of the kit's workshop cluster (by PID), then remove exactly the
    namespaces, links and bridge it made. Returns ``{"processes": n, "removed": [names]}``, or
    None when no kit cluster was up."""
    path = state_path()
    if not path.is_file():
        return None
    state = json.loads(path.read_text())
    stopped: set[int] = set()
    for _ in range(3):  # a raylet may start a worker between the listing and the signal
        victims = procs.with_children(_alive(state) + _processes(state))
        if not victims:
            break
        procs.terminate(victims)
        stopped |= {p.pid for p in victims}
    removed = []
    if state.get("net"):
        removed = netns.remove(state["net"])  # after the processes: deleting one stops nothing
    shutil.rmtree(state["temp_dir"], ignore_errors=True)
    path.unlink()
    return {"processes": len(stopped), "removed": removed}


def down_line(gone: dict[str, Any] | None) -> str:
    """What ``down`` did, in one line."""
    if gone is None:
        return "no kit cluster was up"
    extra = f"; removed {', '.join(gone['removed'])}" if gone["removed"] else ""
    return f"cluster down: stopped {gone['processes']} processes{extra}"


def cut(i: int, up: bool = False) -> None:
    """Cut (or restore) worker node ``i``'s link: only for namespaced nodes."""
    state = status()
    if not state.get("net"):
        raise RuntimeError("only a cluster with namespaced nodes has links to cut")
    netns.set_link(state["net"], i, up)


def exports(state: dict[str, Any]) -> str:
    """The shell lines that point notebooks and ``labkit run`` at the cluster."""
    return f"export RAY_ADDRESS={state['address']}\nexport RAY_AUTH_MODE=token"
