"""A registry of the processes the kit started, so it can stop exactly those and nothing else.

The kit never calls Ray's own ``ray stop``: it kills every Ray process on the machine, a
colleague's included. Instead each local session and in-kernel cluster records its PIDs with
their creation times here, and ``labkit clean`` stops those still alive, by PID.

Used in: 05, 10.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil

from labkit.params import repo_root


def registry_path() -> Path:
    """The JSON file of recorded processes (``.labkit/pids.json`` in the repo, git-ignored)."""
    override = os.environ.get("LABKIT_STATE_DIR")
    base = Path(override) if override else repo_root() / ".labkit"
    return base / "pids.json"


def _load() -> list[dict[str, Any]]:
    path = registry_path()
    if not path.is_file():
        return []
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, OSError):
        return []


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def _save(entries: list[dict[str, Any]]) -> None:
    write_json(registry_path(), entries)


def remember(pids: dict[str, list[int]], owner: str) -> None:
    """Record ``{name: [pid, ...]}`` as started by ``owner`` (a session or cluster id).

    Each record also names the driver: this process (a notebook's kernel). When the driver is
    gone and the processes are not, :func:`orphans` finds them.
    """
    entries = _load()
    driver = {"pid": os.getpid(), "create_time": psutil.Process().create_time()}
    for name, plist in pids.items():
        for pid in plist:
            try:
                created = psutil.Process(pid).create_time()
            except psutil.Error:
                continue
            entries.append(
                {"pid": pid, "create_time": created, "name": name, "owner": owner, "driver": driver}
            )
    _save(entries)


def forget(owner: str) -> None:
    """Drop every record of ``owner`` (after it stopped its processes itself)."""
    _save([e for e in _load() if e["owner"] != owner])


def live(entry: dict[str, Any]) -> psutil.Process | None:
    """The live process of a ``{"pid", "create_time"}`` record, or None if it exited, is a
    zombie, or its PID now belongs to another process: the kit's one liveness check."""
    try:
        proc = psutil.Process(entry["pid"])
        if abs(proc.create_time() - entry["create_time"]) > 1.0:
            return None
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except psutil.Error:
        return None


def alive(owner: str | None = None) -> list[dict[str, Any]]:
    """Recorded processes that are still running (optionally only ``owner``'s)."""
    return [e for e in _load() if (owner is None or e["owner"] == owner) and live(e) is not None]


def orphans() -> dict[str, list[dict[str, Any]]]:
    """Owner -> its live records, for owners whose driver (the kernel that started them) is gone:
    a kernel restarted, killed or timed out mid-lesson left them running."""
    found: dict[str, list[dict[str, Any]]] = {}
    for entry in alive():
        driver = entry.get("driver")
        if driver and live(driver) is None:
            found.setdefault(entry["owner"], []).append(entry)
    return found


def stop(owner: str | None = None, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Terminate recorded processes still alive (and their children), then forget them."""
    entries = alive(owner)
    running = [proc for proc in map(live, entries) if proc is not None]
    terminate(with_children(running), timeout)
    keep = [e for e in _load() if owner is not None and e["owner"] != owner]
    _save(keep)
    return entries


def with_children(processes: list[psutil.Process]) -> list[psutil.Process]:
    """The processes and all their descendants, each once (descendants first, then parents)."""
    tree: dict[int, psutil.Process] = {}
    for proc in processes:
        try:
            for child in proc.children(recursive=True):
                tree.setdefault(child.pid, child)
        except psutil.Error:
            pass
        tree.setdefault(proc.pid, proc)
    return list(tree.values())


def _zombie(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True  # gone


def terminate(processes: list[psutil.Process], timeout: float = 10.0) -> None:
    """SIGTERM the processes, wait up to ``timeout`` seconds, then SIGKILL what is left."""
    for proc in processes:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    still, deadline = list(processes), time.monotonic() + timeout
    while still and time.monotonic() < deadline:
        _gone, still = psutil.wait_procs(still, timeout=0.2)
        # A zombie has exited; only its parent can reap it (Ray's autoscaler is the parent of
        # the nodes it launched), so waiting for it to vanish would wait out the whole timeout.
        still = [proc for proc in still if not _zombie(proc)]
    for proc in still:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(still, timeout=2)


def stop_child(process: subprocess.Popen, timeout: float = 10.0) -> None:
    """Stop a child this process started (SIGTERM, then SIGKILL) and reap it; nothing if it
    has exited already."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)


def wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    """Wait for processes to exit; return the PIDs still alive after ``timeout``."""
    from labkit.checks import wait_until

    records = []
    for pid in pids:
        try:
            records.append({"pid": pid, "create_time": psutil.Process(pid).create_time()})
        except psutil.Error:
            continue

    def still_alive() -> list[int]:
        return [r["pid"] for r in records if live(r) is not None]

    wait_until(lambda: not still_alive(), timeout, interval=0.2)
    return still_alive()
