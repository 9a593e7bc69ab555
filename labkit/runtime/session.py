"""Start and stop Ray safely from a notebook.

* Local (no ``RAY_ADDRESS``): a new instance with ``address="local"`` (a bare ``ray.init()`` may
  attach to somebody else's Ray), the requested CPUs, logical GPUs only where no real GPU is
  present (``LABKIT_LOGICAL_GPUS=N`` makes a GPU-less machine look like one with N GPUs, whatever
  the lesson asks for, as a GPU box would: ``make test`` runs with 1),
  free ports for the dashboard, metrics and Serve, the dashboard pinned to 127.0.0.1,
  token auth on, quiet logs. Its PIDs are recorded so ``labkit clean`` can stop exactly them.
* Cluster (``RAY_ADDRESS`` set): connect to it, pass no resource arguments, turn on token auth for
  the connection when a token exists, and ship ``labkit`` to the workers in a ``runtime_env``.

Idempotent: a second :func:`start` with the same arguments returns the running session (a
notebook's Run All again), after shutting down the Serve apps an earlier run left running.
:meth:`Session.stop` tears down Serve (if started) and then Ray; it never runs ``ray stop``.

Used in: 00-03, 06-13, lab_data, lab_lm, lab_objects, lab_serve, lab_tasks, lab_train,
lab_yardsticks.
"""

from __future__ import annotations

import atexit
import os
import sys
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit import lang, params
from labkit.runtime import lifecycle, logs, procs, rayprivate
from labkit.runtime.net import LOCALHOST, auth_token, enable_token_auth, free_port, token_path

_current: Session | None = None
HEAD = "node:__internal_head__"  # the resource only the head node has


@dataclass
class Session:
    """A running Ray session started (or joined) by the kit."""

    mode: str  # "local" or "cluster"
    address: str
    requested: dict[str, Any]
    dashboard_url: str | None = None
    serve_port: int | None = None  # a free port for Serve's proxy: serve.start(http_options=...)
    metrics_port: int | None = None
    session_dir: str | None = None
    real_gpus: int = 0
    pids: dict[str, list[int]] = field(default_factory=dict)
    init_kwargs: dict[str, Any] = field(default_factory=dict)  # what ray.init was called with
    # RAY_ADDRESS as it was before a local=True session pointed it at itself (put back at stop)
    shadowed_address: str | None = None
    shadowed_api_server: str | None = None  # RAY_API_SERVER_ADDRESS, likewise
    address_pointer: Any = None  # Ray's current-cluster file, naming this session while it runs
    _stopped: bool = False

    @property
    def owner(self) -> str:
        return f"session:{self.session_dir or self.address}"

    @property
    def resources(self) -> dict[str, float]:
        """The cluster's total resources (``ray.cluster_resources()``)."""
        import ray

        return ray.cluster_resources()

    @property
    def gpus_are_logical(self) -> bool:
        """True when Ray's GPUs are bookkeeping only (no CUDA device behind them)."""
        return self.resources.get("GPU", 0) > 0 and self.real_gpus == 0 and self.mode == "local"

    @property
    def logical_gpus(self) -> int | None:
        """The logical GPUs ``LABKIT_LOGICAL_GPUS`` asks a local session on a GPU-less machine
        for (:func:`logical_gpus`); None when it is unset."""
        return logical_gpus()

    def store_stats(self) -> dict[str, int]:
        """The cluster's object store totals now: bytes used, objects, bytes spilled and
        restored (:func:`store_stats`, what ``ray memory --stats-only`` prints)."""
        return store_stats()

    def require_head(self, why: str) -> None:
        """Fail unless this driver runs on the cluster's head node (always so for a local session):
        Serve's proxy on 127.0.0.1, the one a lesson calls, is its own node's. ``why`` is said."""
        import ray

        here = ray.get_runtime_context().get_node_id()
        heads = [n["NodeID"] for n in ray.nodes() if n["Alive"] and HEAD in n["Resources"]]
        if here not in heads:
            raise RuntimeError(
                f"run this lesson from the cluster's head node ({why}); this driver's node is "
                f"{here[:12]}, the head {heads[0][:12] if heads else '(none alive)'}"
            )

    def dashboard_get(self, path: str, timeout: float = 10.0) -> Any:
        """GET a dashboard REST path (e.g. ``/api/version``) with the token, return parsed JSON."""
        import json

        if not self.dashboard_url:
            raise RuntimeError("this session has no dashboard (started with dashboard=False)")
        req = urllib.request.Request(self.dashboard_url.rstrip("/") + path)
        token = auth_token()
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read().decode())

    def describe(self) -> str:
        """What a learner needs to know about the session, as text."""
        res = self.resources
        gpus = res.get("GPU", 0)
        if gpus and self.gpus_are_logical:
            gpu_line = lang.say(
                "{n} logical (no CUDA device behind them: scheduling only)", n=f"{gpus:g}"
            )
        elif gpus and self.mode == "cluster":  # a node's GPUs may be logical: it cannot tell
            gpu_line = lang.say(
                "{n} (the nodes' ray start says whether CUDA is behind them)", n=f"{gpus:g}"
            )
        elif gpus:
            gpu_line = lang.say("{n} real", n=f"{gpus:g}")
        else:
            gpu_line = lang.say("none")
        custom = {
            k: v
            for k, v in res.items()
            if k not in ("CPU", "GPU", "memory", "object_store_memory")
            and not k.startswith("node:")
            and not k.startswith("accelerator_type")
        }
        rows = {
            "mode": f"{self.mode} ({self.address})",
            "CPUs": f"{res.get('CPU', 0):g}",
            "GPUs": gpu_line,
            "object store": f"{res.get('object_store_memory', 0) / 2**30:.2f} GiB",
        }
        if custom:
            rows["custom"] = str(custom)
        if self.dashboard_url:
            rows["dashboard"] = self.dashboard_url
            if auth_token():
                rows["token"] = lang.say(
                    "in {path} (the dashboard asks for it; API clients send "
                    "'Authorization: Bearer <token>')",
                    path=params.shown(token_path()),
                )
        labels = {k: lang.SESSION_LABELS.get(k, k) if lang.is_zh() else k for k in rows}
        width = max(lang.display_width(v) for v in labels.values()) + 1
        pad = {k: " " * (width - lang.display_width(v)) for k, v in labels.items()}
        lines = [f"{labels[k]}{pad[k]}{v}" for k, v in rows.items()]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Session({self.mode}, {self.address})"

    def stop(self) -> None:
        """Tear down Serve (if it was started) and disconnect/stop Ray. Safe to call twice."""
        global _current
        if self._stopped:
            return
        self._stopped = True
        import ray

        try:
            if ray.is_initialized() and "ray.serve" in sys.modules and self._serve_running():
                # On a shared cluster, Serve is not this session's to shut down (lesson 09
                # deletes its own apps there).
                if self.mode == "local":
                    from ray import serve

                    try:
                        serve.shutdown()
                    except Exception as exc:  # noqa: BLE001 - teardown must go on
                        print(f"labkit: serve.shutdown() failed: {exc!r}", file=sys.stderr)
        finally:
            ray.shutdown()
            if self.address_pointer is not None:
                self.address_pointer.restore(self.address)
            if self.mode == "local":
                left = procs.wait_gone([p for plist in self.pids.values() for p in plist])
                if left:
                    procs.stop(self.owner)
                procs.forget(self.owner)
            if self.shadowed_address is not None:
                os.environ["RAY_ADDRESS"] = self.shadowed_address
                self.shadowed_address = None
            if self.shadowed_api_server is not None:
                os.environ["RAY_API_SERVER_ADDRESS"] = self.shadowed_api_server
                self.shadowed_api_server = None
            if _current is self:
                _current = None
            lifecycle.release(self)

    def free_serve(self) -> list[str]:
        """Shut down Serve if an earlier run of the notebook left it running in this local
        session (its apps' replicas hold CPUs that a rerun's tasks would wait for); say so.
        Returns the apps it stopped. A shared cluster's Serve is not the session's to stop."""
        import ray

        if self.mode != "local" or "ray.serve" not in sys.modules or not ray.is_initialized():
            return []
        if not self._serve_running():
            return []
        from ray import serve

        try:
            apps = sorted(serve.status().applications)
            serve.shutdown()
        except Exception as exc:  # noqa: BLE001 - a wedged controller must not stop the setup
            print(f"labkit: Serve from an earlier run did not shut down: {exc!r}", file=sys.stderr)
            return []
        print(
            f"labkit: Serve shut down, with the apps an earlier run left running "
            f"({', '.join(apps) or 'none'}): a rerun starts with every CPU free",
            file=sys.stderr,
        )
        return apps

    @staticmethod
    def _serve_running() -> bool:
        """True if a Serve controller runs in this Ray instance."""
        import ray

        try:
            ray.get_actor("SERVE_CONTROLLER_ACTOR", namespace="serve")
        except ValueError:
            return False
        return True

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _labkit_dir() -> str:
    """The package's folder (``labkit/``), found from this file: runtime never imports the face."""
    return str(Path(__file__).resolve().parents[1])


def start(
    num_cpus: int | None = None,
    num_gpus: float | None = None,
    resources: dict[str, float] | None = None,
    *,
    object_store_memory: int | None = None,
    dashboard: bool = True,
    runtime_env: dict[str, Any] | None = None,
    local: bool = False,
    **ray_kwargs: Any,
) -> Session:
    """Start (or join) Ray for a notebook; see the module docstring for local vs cluster mode.

    ``local=True`` starts a local session even when ``RAY_ADDRESS`` is set, and says so: for a
    lesson whose driver-side parts (a load generator, Serve's proxy, results on local disk) must
    share the driver's machine. While it runs, ``RAY_ADDRESS`` in this process names the local
    session, so every call that reads it (the State API, ``ray`` CLI commands and Jobs run from
    the notebook, their subprocesses) goes to the local Ray, never to the shared cluster;
    :meth:`Session.stop` puts the old value back.
    """
    # Long: the one entry every lesson calls: reuse a live session, join RAY_ADDRESS or start a
    # local Ray, and say which; its branches are the module docstring's cases, read in order.
    global _current
    import ray

    requested = {
        "num_cpus": num_cpus,
        "num_gpus": num_gpus,
        "resources": resources,
        "object_store_memory": object_store_memory,
        "dashboard": dashboard,
        "runtime_env": runtime_env,
        "local": local,
        **ray_kwargs,
    }
    if (
        _current is not None
        and lifecycle.active() is _current
        and ray.is_initialized()
        and _current.requested == requested
    ):
        _current.free_serve()
        return _current
    lifecycle.take_over()
    logs.quiet_ray()
    logs.quiet_data()  # Ray Data's progress bars and notes too: a lesson's output stays its own
    address = os.environ.get("RAY_ADDRESS", "").strip()
    shadowed = api_server = None
    if local and address and address != "local":
        print(
            f"labkit: this lesson runs on a local Ray of its own; RAY_ADDRESS={address} is not "
            "used here",
            file=sys.stderr,
        )
        shadowed = os.environ.pop("RAY_ADDRESS")
        # the State API and Jobs read this one before RAY_ADDRESS: it must not name the cluster
        api_server = os.environ.pop("RAY_API_SERVER_ADDRESS", None)
        if api_server is not None:
            print(f"labkit: RAY_API_SERVER_ADDRESS={api_server} is not used here", file=sys.stderr)
        address = ""
    try:
        if address and address != "local":
            _current = _connect(address, requested, runtime_env, ray_kwargs=ray_kwargs)
        else:
            _current = _start_local(
                requested,
                num_cpus,
                num_gpus,
                resources=resources,
                object_store_memory=object_store_memory,
                dashboard=dashboard,
                ray_kwargs=ray_kwargs,
                runtime_env=runtime_env,
            )
    except BaseException:
        if shadowed is not None:
            os.environ["RAY_ADDRESS"] = shadowed
        if api_server is not None:
            os.environ["RAY_API_SERVER_ADDRESS"] = api_server
        raise
    if shadowed is not None:
        os.environ["RAY_ADDRESS"] = _current.address
        _current.shadowed_address = shadowed
        _current.shadowed_api_server = api_server
    atexit.register(_current.stop)
    lifecycle.claim(_current)
    logs.filter_worker_logs()
    return _current


def _connect(
    address: str, requested: dict[str, Any], runtime_env: dict[str, Any] | None, *, ray_kwargs: dict
) -> Session:
    import ray

    ignored = [
        k for k in ("num_cpus", "num_gpus", "resources", "object_store_memory") if requested[k]
    ]
    if ignored:
        print(
            f"labkit: connected to an existing cluster, so {', '.join(ignored)} are ignored: "
            "the cluster's own resources apply",
            file=sys.stderr,
        )
    if auth_token() and "RAY_AUTH_MODE" not in os.environ:
        enable_token_auth()
    env = dict(runtime_env or {})
    modules = list(env.get("py_modules", []))
    if _labkit_dir() not in modules:
        modules.append(_labkit_dir())
    env["py_modules"] = modules
    init_kwargs = {"address": address, "runtime_env": env, "logging_level": "ERROR", **ray_kwargs}
    ctx = ray.init(**init_kwargs)
    url = ctx.dashboard_url
    return Session(
        mode="cluster",
        address=ctx.address_info.get("address", address),
        requested=requested,
        dashboard_url=f"http://{url}" if url else None,
        serve_port=8000,
        real_gpus=0,
        init_kwargs=init_kwargs,
    )


def _start_local(
    requested: dict[str, Any],
    num_cpus: int | None,
    num_gpus: float | None,
    *,
    resources: dict[str, float] | None,
    object_store_memory: int | None,
    dashboard: bool,
    ray_kwargs: dict,
    runtime_env: dict[str, Any] | None,
) -> Session:
    # Long: every setting a local session gets (CPUs, logical GPUs, the store, the dashboard,
    # token auth, quiet logs) is built in this one place, where a reader can see them all.
    import ray

    from labkit.device import real_gpu_count

    if "RAY_AUTH_MODE" not in os.environ:  # an explicit choice (even "disabled") is respected
        enable_token_auth()
    real = real_gpu_count()
    gpus: float | None
    if real:
        if num_gpus not in (None, real):
            print(
                f"labkit: this machine has {real} real GPU(s); using them instead of "
                f"{num_gpus} logical ones",
                file=sys.stderr,
            )
        gpus = None  # let Ray detect the real ones
    else:
        logical = logical_gpus()
        gpus = (num_gpus or 0) if logical is None else logical
    dash_port = free_port() if dashboard else None
    metrics_port = free_port()
    kwargs: dict[str, Any] = {
        "address": "local",
        "num_cpus": num_cpus if num_cpus is not None else os.cpu_count(),
        "num_gpus": gpus,
        "resources": resources,
        "object_store_memory": object_store_memory,
        "include_dashboard": dashboard,
        "dashboard_host": LOCALHOST,
        "logging_level": "ERROR",
        "_metrics_export_port": metrics_port,
        "runtime_env": runtime_env,
    }
    if dashboard:
        kwargs["dashboard_port"] = dash_port
    kwargs.update(ray_kwargs)
    with _agent_port(free_port()):
        ctx = ray.init(**kwargs)
    node = rayprivate.get("worker")._global_node
    pids = {
        name: [info.process.pid for info in infos if info.process is not None]
        for name, infos in node.all_processes.items()
    }
    session = Session(
        mode="local",
        address=ctx.address_info["address"],
        requested=requested,
        dashboard_url=f"http://{ctx.dashboard_url}" if ctx.dashboard_url else None,
        serve_port=free_port(),
        metrics_port=metrics_port,
        session_dir=ctx.address_info.get("session_dir"),
        real_gpus=real,
        pids=pids,
        init_kwargs=kwargs,
    )
    procs.remember(pids, session.owner)
    # Name this session in Ray's current-cluster file, as `ray start` does: a job submitted to it
    # resolves its driver's address "auto" from that file, and without one it takes any GCS it
    # finds on the machine, which may be another cluster's (seen with a workshop cluster up).
    from labkit.cluster import _AddressPointer

    session.address_pointer = _AddressPointer.save(node.get_temp_dir_path())
    session.address_pointer.claim(session.address)
    return session


LOGICAL_GPUS = "LABKIT_LOGICAL_GPUS"


def logical_gpus() -> int | None:
    """``LABKIT_LOGICAL_GPUS``: how many logical GPUs a local session on a GPU-less machine gets,
    in place of what the lesson asks for (``None`` when unset)."""
    from labkit.params import ParameterError

    raw = os.environ.get(LOGICAL_GPUS, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ParameterError(
            f"{LOGICAL_GPUS}={raw!r}: give a whole number of GPUs >= 1 (e.g. 1 or 2), or unset it"
        )
    return int(raw)


@contextmanager
def _agent_port(port: int):
    """Give the dashboard agent's HTTP server ``port`` during ``ray.init``.

    Ray 2.60's ``ray.init`` has no argument for it, so every local instance takes 52365: a
    second Ray on the machine (another notebook, a test run) then has no job agent, and the
    Jobs API answers "No available agent to submit job". ``ray.init`` builds its parameters
    from ``ray._private.parameter.RayParams``; for the length of the call that name gives a
    subclass whose default is this port.
    """
    parameter = rayprivate.get("parameter")
    original = parameter.RayParams

    class _RayParams(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("dashboard_agent_listen_port", port)
            super().__init__(*args, **kwargs)

    parameter.RayParams = _RayParams
    try:
        yield
    finally:
        parameter.RayParams = original


def store_stats() -> dict[str, int]:
    """Object store totals over all nodes: bytes used, objects, bytes spilled and restored.

    The same figures ``ray memory --stats-only`` prints, read from the raylets (no dashboard
    needed).
    """
    import ray

    internal_api = rayprivate.get("internal_api")
    state = internal_api.get_state_from_address(ray.get_runtime_context().gcs_address)
    stats = internal_api.get_memory_info_reply(state).store_stats
    return {
        "used_bytes": int(stats.object_store_bytes_used),
        "available_bytes": int(stats.object_store_bytes_avail),
        "objects": int(stats.num_local_objects),
        "spilled_bytes": int(stats.spilled_bytes_total),
        "spilled_objects": int(stats.spilled_objects_total),
        "restored_bytes": int(stats.restored_bytes_total),
        "fallback_bytes": int(stats.object_store_bytes_fallback),
    }


def current() -> Session | None:
    """The running session, if any."""
    return _current


def stop() -> None:
    """Stop the running session, if any (Serve first, then Ray)."""
    if _current is not None:
        _current.stop()
