"""Local multi-node Ray clusters that stop only what they started.

* :class:`LocalCluster`: a head plus N worker nodes in this process's control
  (``ray.cluster_utils.Cluster``: real separate raylets on one machine), in a temp directory of its
  own, as a context manager whose teardown always runs. For lessons on placement and failures.
* :func:`up` / :func:`down` / :func:`status`: a workshop cluster that outlives the command
  (``ray start`` head and worker nodes with their own temp directory and ports, token auth on),
  its PIDs and address kept in a state file; ``down`` stops exactly those processes.

Never ``ray stop`` and never ``AutoscalingCluster``: both kill every Ray process on the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from labkit import procs
from labkit.session import LOCALHOST, enable_token_auth, free_port


def _short_tempdir(prefix: str) -> str:
    """A short temp directory (Ray puts Unix sockets under it; their paths must stay short)."""
    return tempfile.mkdtemp(prefix=prefix, dir="/tmp")


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


# ---------------------------------------------------------------- in-process cluster


@dataclass
class LocalCluster:
    """Head + worker nodes on this machine, each a real raylet; connect, use, always tear down.

    ``nodes`` lists each worker node's settings, e.g. ``[{"num_cpus": 1, "resources": {"FPGA": 2}}]``.
    """

    head: dict[str, Any] = field(default_factory=lambda: {"num_cpus": 1})
    nodes: list[dict[str, Any]] = field(default_factory=list)
    object_store_mb: int = 100
    connect: bool = True
    temp_dir: str = ""
    _cluster: Any = None
    _owner: str = ""
    _added: list = field(default_factory=list)

    def start(self) -> LocalCluster:
        """Start the head and the worker nodes, then connect this driver to the head."""
        import ray
        from ray.cluster_utils import Cluster

        if ray.is_initialized():
            raise RuntimeError("stop the current Ray session first (session.stop())")
        if "RAY_AUTH_MODE" not in os.environ:
            enable_token_auth()
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        self.temp_dir = self.temp_dir or _short_tempdir("lkn-")
        self._owner = f"cluster:{self.temp_dir}"
        common = {"object_store_memory": self.object_store_mb * 2**20, "temp_dir": self.temp_dir}
        head_args = {
            **common,
            "include_dashboard": True,
            "dashboard_host": LOCALHOST,
            "dashboard_port": free_port(),
            **self.head,
        }
        # cluster_utils records the head's address in Ray's default temp dir: make sure it exists.
        from ray._common.utils import get_ray_address_file

        Path(get_ray_address_file(None)).parent.mkdir(parents=True, exist_ok=True)
        self._cluster = Cluster(initialize_head=True, head_node_args=head_args)
        for spec in self.nodes:
            self.add_node(**spec)
        if self.connect:
            ray.init(address=self._cluster.address, logging_level="ERROR")
        self._remember()
        return self

    def _remember(self) -> None:
        pids: dict[str, list[int]] = {}
        for node in [self._cluster.head_node, *self._cluster.worker_nodes]:
            for name, infos in node.all_processes.items():
                pids.setdefault(name, []).extend(i.process.pid for i in infos if i.process)
        procs.forget(self._owner)
        procs.remember(pids, self._owner)

    @property
    def address(self) -> str:
        return self._cluster.address

    @property
    def worker_nodes(self) -> list:
        """The live worker nodes' handles, in the order they were added."""
        return [n for n in self._added if n in self._cluster.worker_nodes]

    def node_names(self) -> dict[str, str]:
        """Node id (hex) -> a short name: ``head``, then ``node1``, ``node2``... in order added."""
        names = {self._cluster.head_node.node_id: "head"}
        for i, node in enumerate(self._added, start=1):
            names[node.node_id] = f"node{i}"
        return names

    def add_node(self, wait: bool = True, **spec: Any):
        """Add a worker node (``num_cpus``, ``num_gpus``, ``resources``...); returns its handle."""
        args = {"object_store_memory": self.object_store_mb * 2**20, "num_cpus": 1, **spec}
        node = self._cluster.add_node(wait=wait, **args)
        self._added.append(node)
        self._remember()
        return node

    def remove_node(self, node, allow_graceful: bool = False) -> None:
        """Kill a worker node's processes (as if the machine died, unless graceful)."""
        self._cluster.remove_node(node, allow_graceful=allow_graceful)
        self._remember()

    def wait_for_nodes(self, timeout: float = 60) -> None:
        """Block until every added node is registered with the GCS."""
        self._cluster.wait_for_nodes(timeout=timeout)

    def stop(self) -> None:
        """Disconnect, stop every node this cluster started, and check nothing is left."""
        import ray

        if self._cluster is None:
            return
        try:
            if ray.is_initialized():
                ray.shutdown()
        finally:
            try:
                self._cluster.shutdown()
            finally:
                left = processes_under(self.temp_dir)
                if left:
                    procs.terminate(left)
                procs.stop(self._owner)
                self._cluster = None
                shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------- workshop cluster (outlives the command)


def state_path() -> Path:
    """Where ``labkit cluster up`` keeps the cluster's address and PIDs."""
    return procs.registry_path().parent / "cluster.json"


def _ray_exe() -> str:
    exe = Path(sys.executable).with_name("ray")
    return str(exe) if exe.exists() else "ray"


def _run_ray(args: list[str], env: dict[str, str]) -> None:
    out = subprocess.run([_ray_exe(), *args], env=env, capture_output=True, text=True, timeout=180)
    if out.returncode != 0:
        raise RuntimeError(
            f"ray {' '.join(args[:2])} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
        )


def up(
    workers: int = 2,
    cpus_per_worker: int = 1,
    head_cpus: int = 1,
    gpus_per_worker: float = 0,
    object_store_mb: int = 200,
) -> dict[str, Any]:
    """Start a head and ``workers`` worker nodes with ``ray start``, token auth on; save the state."""
    if state_path().is_file() and status()["alive"]:
        raise RuntimeError(
            f"a kit cluster is already up ({state_path()}); run `labkit cluster down`"
        )
    from ray._private.services import get_node_ip_address

    temp_dir = _short_tempdir("lkc-")
    env = dict(os.environ, RAY_AUTH_MODE="token", RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)
    port, dash = free_port(), free_port()
    common = [
        "--temp-dir",
        temp_dir,
        "--object-store-memory",
        str(object_store_mb * 2**20),
        "--disable-usage-stats",
    ]
    try:
        _run_ray(
            [
                "start",
                "--head",
                f"--port={port}",
                f"--num-cpus={head_cpus}",
                "--num-gpus=0",
                f"--dashboard-host={LOCALHOST}",
                f"--dashboard-port={dash}",
                # free ports where Ray has fixed defaults, so a learner's own Ray does not collide
                f"--ray-client-server-port={free_port()}",
                f"--dashboard-agent-listen-port={free_port()}",
                *common,
            ],
            env,
        )
        address = f"{get_node_ip_address()}:{port}"
        for _ in range(workers):
            _run_ray(
                [
                    "start",
                    f"--address={address}",
                    f"--num-cpus={cpus_per_worker}",
                    f"--num-gpus={gpus_per_worker:g}",
                    f"--dashboard-agent-listen-port={free_port()}",
                    *common,
                ],
                env,
            )
    except Exception:
        procs.terminate(processes_under(temp_dir))
        shutil.rmtree(temp_dir, ignore_errors=True)
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
    out = []
    for entry in state.get("pids", []):
        try:
            proc = psutil.Process(entry["pid"])
            if (
                abs(proc.create_time() - entry["create_time"]) < 1.0
                and proc.status() != psutil.STATUS_ZOMBIE
            ):
                out.append(proc)
        except psutil.Error:
            continue
    return out


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
