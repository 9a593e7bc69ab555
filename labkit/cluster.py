"""Local multi-node Ray clusters that stop only what they started.

* :class:`LocalCluster`: a head plus N worker nodes in this process's control
  (``ray.cluster_utils.Cluster``: real separate raylets on one machine), in a temp directory of its
  own, as a context manager whose teardown always runs. For lessons on placement and failures.
* :class:`ElasticCluster`: an autoscaling cluster on this machine (Ray's fake multi-node
  provider: ``RAY_FAKE_CLUSTER=1 ray start --head --autoscaling-config=...``); the autoscaler
  adds worker nodes for pending work up to ``max_workers`` and removes idle ones after the idle
  timeout. Stopped by its own temp directory, never ``ray stop``.
(The workshop cluster that outlives the command, ``labkit cluster up``, is in
:mod:`labkit.tools.workshop`.)

Never ``ray stop`` and never ``AutoscalingCluster``: both kill every Ray process on the machine.

Used in: 04, 05.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from labkit.runtime import lifecycle, logs, procs, rayprivate, raystart
from labkit.runtime.net import LOCALHOST, enable_token_auth, free_port

# ---------------------------------------------------------------- in-process cluster


@dataclass
class LocalCluster:
    """Head + worker nodes on this machine, each a real raylet; connect, use, always tear down.

    ``nodes`` lists each worker node's settings, e.g.
    ``[{"num_cpus": 1, "resources": {"FPGA": 2}}]``.
    """

    head: dict[str, Any] = field(default_factory=lambda: {"num_cpus": 1})
    nodes: list[dict[str, Any]] = field(default_factory=list)
    object_store_mb: int = 100
    connect: bool = True
    temp_dir: str = ""
    _cluster: Any = None
    _owner: str = ""
    _added: list = field(default_factory=list)
    _pointer: Any = None

    def start(self) -> LocalCluster:
        """Start the head and the worker nodes, then connect this driver to the head."""
        import ray
        from ray.cluster_utils import Cluster

        lifecycle.take_over()
        if "RAY_AUTH_MODE" not in os.environ:
            enable_token_auth()
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        self.temp_dir = self.temp_dir or raystart.short_tempdir("lkn-")
        self._owner = f"cluster:{self.temp_dir}"
        common = {"object_store_memory": self.object_store_mb * 2**20, "temp_dir": self.temp_dir}
        head_args = {
            **common,
            "include_dashboard": True,
            "dashboard_host": LOCALHOST,
            "dashboard_port": free_port(),
            **self.head,
        }
        # cluster_utils records the head's address in Ray's default temp dir, where the State API,
        # `ray status` and a bare ray.init() look for "the" cluster: keep what was there, and put
        # it back at stop, so that no later call is sent to this cluster once it is gone.
        self._pointer = _AddressPointer.save()
        try:
            self._cluster = Cluster(initialize_head=True, head_node_args=head_args)
            lifecycle.claim(self)
            atexit.register(self.stop)
            for spec in self.nodes:
                self.add_node(**spec)
            if self.connect:
                ray.init(address=self._cluster.address, logging_level="ERROR")
                logs.quiet_ray()
                logs.filter_worker_logs()
            self._remember()
        except BaseException:
            self.stop()
            raise
        return self

    def __repr__(self) -> str:
        return f"LocalCluster({1 + len(self.nodes)} nodes in {self.temp_dir})"

    @property
    def short(self) -> str:
        """What a lesson's output names it by: no temporary folder of this machine."""
        return f"LocalCluster({1 + len(self.nodes)} nodes)"

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

        atexit.unregister(self.stop)
        if self._cluster is None:
            if self._pointer is not None:  # Cluster() failed: whatever it wrote is not a cluster
                self._pointer.put_back()
                self._pointer = None
            lifecycle.release(self)
            return
        ours = self._cluster.address
        try:
            if ray.is_initialized():
                ray.shutdown()
        finally:
            try:
                self._cluster.shutdown()
            finally:
                raystart.clear(self.temp_dir, self._owner)
                if self._pointer is not None:
                    self._pointer.restore(ours)
                    self._pointer = None
                self._cluster = None
                lifecycle.release(self)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class _AddressPointer:
    """Ray's "current cluster" file (``/tmp/ray/ray_current_cluster``), saved and put back."""

    path: Path
    before: str | None

    @classmethod
    def save(cls, temp_dir: str | None = None) -> _AddressPointer:
        """The file under ``temp_dir`` (Ray's default temp dir when None), as it is now."""
        path = Path(rayprivate.get("get_ray_address_file")(temp_dir))
        path.parent.mkdir(parents=True, exist_ok=True)
        return cls(path, path.read_text() if path.exists() else None)

    def claim(self, ours: str) -> None:
        """Name ``ours`` in the file (``restore`` puts back what was there)."""
        try:
            self.path.write_text(ours)
        except OSError:
            pass

    def restore(self, ours: str) -> None:
        """Put back what was there if that cluster still answers, else leave no file; unless
        someone else has written the file since we did (``ray.shutdown()`` in the driver may
        have removed it: that is ours too)."""
        try:
            now = self.path.read_text().strip() if self.path.exists() else None
            if now in (None, ours):
                self.put_back()
        except OSError:
            pass

    def put_back(self) -> None:
        """The saved address if its cluster still answers; else no file (no dead pointer)."""
        try:
            if self.before is not None and _answers(self.before.strip()):
                self.path.write_text(self.before)
            else:
                self.path.unlink(missing_ok=True)
        except OSError:
            pass


def _answers(address: str, timeout: float = 0.5) -> bool:
    """Whether ``host:port`` accepts a TCP connection (a GCS that is still running)."""
    import socket

    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


# ---------------------------------------------------------------- elastic (autoscaling) cluster

#: The node id Ray's fake provider gives the head (its ``FAKE_HEAD_NODE_ID``).
FAKE_HEAD_NODE_ID = "f" * 51 + "00000"
WORKER_NODE_TYPE = "cpu_worker"


def elastic_config(
    gcs_address: str,
    *,
    max_workers: int = 3,
    min_workers: int = 0,
    cpus_per_node: int = 1,
    object_store_mb: int = 100,
    idle_timeout_s: float = 15.0,
    upscaling_speed: float = 1.0,
) -> dict[str, Any]:
    """The autoscaling config for a fake-provider cluster: a 0-CPU head and one worker node type.

    ``min_workers``/``max_workers`` bound the worker nodes; ``idle_timeout_s`` is how long a node
    must sit idle before the autoscaler removes it (the YAML takes minutes). The provider keys
    after ``type`` make the fake provider work on one machine: no SSH updaters, no launch-config
    check, and node ids in place of IPs (every fake node has the same IP); nodes are launched in
    the autoscaler's own loop, because launching them in the background let it count a batch
    that had just finished as neither running nor pending, and launch it twice (we saw 4 nodes
    with ``max_workers=3`` before it removed one).
    """
    if not 0 <= min_workers <= max_workers:
        raise ValueError(f"need 0 <= min_workers <= max_workers, got {min_workers}, {max_workers}")
    if idle_timeout_s <= 0 or cpus_per_node <= 0:
        raise ValueError("idle_timeout_s and cpus_per_node must be positive")
    empty_lists = (
        "cluster_synced_files rsync_exclude rsync_filter initialization_commands setup_commands "
        "head_setup_commands worker_setup_commands head_start_ray_commands "
        "worker_start_ray_commands"
    ).split()
    return {
        "cluster_name": "labkit-elastic",
        "max_workers": max_workers,
        "upscaling_speed": upscaling_speed,
        "idle_timeout_minutes": idle_timeout_s / 60.0,
        "provider": {
            "type": "fake_multinode",
            "gcs_address": gcs_address,
            "launch_multiple": True,
            "disable_node_updaters": True,
            "disable_launch_config_check": True,
            "use_node_id_as_ip": True,
            "foreground_node_launch": True,
        },
        "head_node_type": "ray.head.default",
        "available_node_types": {
            "ray.head.default": {"resources": {"CPU": 0}, "node_config": {}, "max_workers": 0},
            WORKER_NODE_TYPE: {
                "resources": {
                    "CPU": cpus_per_node,
                    "object_store_memory": object_store_mb * 2**20,
                },
                "node_config": {},
                "min_workers": min_workers,
                "max_workers": max_workers,
            },
        },
        "auth": {"ssh_user": "labkit"},
        "file_mounts": {},
        "file_mounts_sync_continuously": False,
        **{key: [] for key in empty_lists},
    }


def node_types_that_fit(config: dict[str, Any], demand: dict[str, float]) -> list[str]:
    """The worker node types of an autoscaling ``config`` that could run a task needing
    ``demand`` (e.g. ``{"CPU": 2}``). Empty means the autoscaler can never help: the task stays
    pending, and Ray warns that no node type can fulfil the request.
    """
    fits = []
    for name, spec in config["available_node_types"].items():
        if name == config.get("head_node_type") or spec.get("max_workers", 0) == 0:
            continue
        have = spec.get("resources", {})
        if all(have.get(k, 0) >= v for k, v in demand.items() if v > 0):
            fits.append(name)
    return fits


def scaling_events(samples: list[dict[str, float]]) -> dict[str, float]:
    """Read an :meth:`ElasticCluster.trace`: when the peak worker count was first reached, when
    the work was all done, and when the cluster was back at its final size (seconds).
    """
    if not samples:
        raise ValueError("no samples")
    peak = max(s["workers"] for s in samples)
    total = samples[-1]["done"]
    t_peak = next(s["t"] for s in samples if s["workers"] == peak)
    t_done = next((s["t"] for s in samples if s["done"] >= total), samples[-1]["t"])
    final = samples[-1]["workers"]
    t_final = samples[-1]["t"]
    for s in reversed(samples):
        if s["workers"] != final:
            break
        t_final = s["t"]
    return {
        "peak_workers": peak,
        "t_peak": t_peak,
        "t_done": t_done,
        "final_workers": final,
        "t_final": t_final,
        "idle_down_s": max(0.0, t_final - t_done),
    }


@dataclass
class ElasticCluster:
    """An autoscaling cluster on this machine: a 0-CPU head whose autoscaler adds and removes
    worker nodes (``cpus_per_node`` CPUs each, each its own raylet) between ``min_workers`` and
    ``max_workers``, reacting to pending resource demand. Connect, use, always tear down.
    """

    max_workers: int = 3
    min_workers: int = 0
    cpus_per_node: int = 1
    object_store_mb: int = 100
    idle_timeout_s: float = 15.0
    upscaling_speed: float = 1.0
    # Ray system settings for the head (its GCS), e.g. faster node-death detection:
    # {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}
    system_config: dict[str, Any] = field(default_factory=dict)
    connect: bool = True
    temp_dir: str = ""
    address: str = ""
    dashboard_url: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    _owner: str = ""

    def start(self) -> ElasticCluster:
        """Start the head with its autoscaler (``ray start``), then connect this driver to it."""
        import ray
        import yaml

        get_node_ip_address = rayprivate.get("get_node_ip_address")

        lifecycle.take_over()
        enable_token_auth()
        self.temp_dir = self.temp_dir or raystart.short_tempdir("lke-")
        self._owner = f"cluster:{self.temp_dir}"
        port, dash = free_port(), free_port()
        self.address = f"{get_node_ip_address()}:{port}"
        self.dashboard_url = f"http://{LOCALHOST}:{dash}"
        self.config = elastic_config(
            self.address,
            max_workers=self.max_workers,
            min_workers=self.min_workers,
            cpus_per_node=self.cpus_per_node,
            object_store_mb=self.object_store_mb,
            idle_timeout_s=self.idle_timeout_s,
            upscaling_speed=self.upscaling_speed,
        )
        config_file = Path(self.temp_dir) / "autoscaling.yaml"
        config_file.write_text(yaml.safe_dump(self.config))
        env = raystart.ray_env(
            RAY_FAKE_CLUSTER="1",
            RAY_TMPDIR=self.temp_dir,
            RAY_enable_autoscaler_v2="0",
            RAY_OVERRIDE_NODE_ID_FOR_TESTING=FAKE_HEAD_NODE_ID,
        )
        try:
            raystart.start_head(
                self.temp_dir,
                port=port,
                dashboard_port=dash,
                num_cpus=0,  # the head runs no work: the autoscaler adds nodes for it
                object_store_mb=self.object_store_mb,
                env=env,
                extra=(
                    f"--autoscaling-config={config_file}",
                    *(
                        (f"--system-config={json.dumps(self.system_config)}",)
                        if self.system_config
                        else ()
                    ),
                ),
            )
            self._remember()
            lifecycle.claim(self)
            # `ray start` daemons outlive this process: stop them when it exits (a kernel shut
            # down after a failed cell, say), not only through stop() or the `with` block.
            atexit.register(self.stop)
            if self.connect:
                ray.init(address=self.address, logging_level="ERROR")
                logs.quiet_ray()
                logs.filter_worker_logs()
        except BaseException:
            self.stop()
            raise
        return self

    def __repr__(self) -> str:
        return f"ElasticCluster(up to {self.max_workers} workers, in {self.temp_dir})"

    @property
    def short(self) -> str:
        """What a lesson's output names it by: no temporary folder of this machine."""
        return f"ElasticCluster(up to {self.max_workers} workers)"

    def _remember(self) -> None:
        procs.forget(self._owner)
        procs.remember(
            {"elastic": [p.pid for p in raystart.processes_under(self.temp_dir)]}, self._owner
        )

    def workers(self) -> int:
        """How many worker nodes are alive now (the head not counted)."""
        import ray

        return sum(1 for n in ray.nodes() if n["Alive"] and n["NodeID"] != FAKE_HEAD_NODE_ID)

    @contextmanager
    def sampling(self, interval: float = 0.5) -> Iterator[list[tuple[float, int]]]:
        """Count the alive worker nodes every ``interval`` s in a background thread while the
        block runs. Yields a list that fills with ``(time.time(), workers)`` pairs (wall-clock
        times, so they line up with times other processes on this machine record).
        """
        samples: list[tuple[float, int]] = []
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                try:
                    samples.append((time.time(), self.workers()))
                except Exception:  # noqa: BLE001 (a sample lost while the GCS is busy)
                    pass
                done.wait(interval)

        thread = threading.Thread(target=sample, name="labkit-node-sampler", daemon=True)
        thread.start()
        try:
            yield samples
        finally:
            done.set()
            thread.join(timeout=5)

    def kill_node(self, node_id: str | None = None) -> str:
        """Lose a worker node as a crashed machine would: SIGKILL its raylet (the fake provider
        gives each node's raylet its node ID in ``RAY_OVERRIDE_NODE_ID_FOR_TESTING``). Kills
        ``node_id``, or the newest alive worker node; returns the ID of the node it killed.
        """
        import ray

        alive = [
            n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeID"] != FAKE_HEAD_NODE_ID
        ]
        if node_id is None:
            if not alive:
                raise RuntimeError("no alive worker node to kill")
            node_id = max(alive)  # the fake provider numbers its nodes in launch order
        elif node_id not in alive:
            raise ValueError(f"{node_id[-8:]} is not an alive worker node of this cluster")
        for proc in raystart.processes_under(self.temp_dir):
            try:
                if proc.name() == "raylet" and (
                    proc.environ().get("RAY_OVERRIDE_NODE_ID_FOR_TESTING") == node_id
                ):
                    proc.kill()
                    return node_id
            except psutil.Error:
                continue
        raise RuntimeError(f"no raylet found for node {node_id[-8:]} under {self.temp_dir}")

    def trace(
        self,
        refs: list,
        *,
        until_workers: int | None = None,
        timeout: float = 180.0,
        interval: float = 1.0,
    ) -> list[dict[str, float]]:
        """Sample the cluster while ``refs`` run, until they are all done and the worker count
        is back down to ``until_workers`` (default ``min_workers``), or ``timeout`` seconds.

        Each sample: ``t`` (s since the call), ``workers`` (alive worker nodes), ``running`` (CPUs
        in use), ``queued`` (tasks not finished and not running: the demand the autoscaler sees)
        and ``done`` (finished tasks). Tasks are assumed to take 1 CPU each.
        """
        import ray

        target = self.min_workers if until_workers is None else until_workers
        samples: list[dict[str, float]] = []
        start = time.monotonic()
        while True:
            t = time.monotonic() - start
            done = len(ray.wait(refs, num_returns=len(refs), timeout=0)[0]) if refs else 0
            total = ray.cluster_resources().get("CPU", 0.0)
            running = max(0.0, total - ray.available_resources().get("CPU", 0.0))
            running = min(running, len(refs) - done)
            workers = self.workers()
            samples.append(
                {
                    "t": round(t, 2),
                    "workers": workers,
                    "running": running,
                    "queued": max(0.0, len(refs) - done - running),
                    "done": done,
                }
            )
            if (done == len(refs) and workers <= target) or t > timeout:
                return samples
            time.sleep(interval)

    def stop(self) -> None:
        """Disconnect, then stop every process of this cluster (found by its temp directory)."""
        import ray

        try:
            if ray.is_initialized():
                ray.shutdown()
        finally:
            atexit.unregister(self.stop)
            if self.temp_dir:
                raystart.clear(self.temp_dir, self._owner)
            lifecycle.release(self)

    def __enter__(self) -> ElasticCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
