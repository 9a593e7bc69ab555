"""Users' journeys, walked end to end as the users take them (issue 39): ``make test-journeys``.

Each journey crosses parts of the kit that have tests of their own, with the commands the README
shows, read from the README (:mod:`labkit.tools.readme`), in a fresh ``HOME``:

1. a learner over two days (``make lab``, an answer saved through JupyterLab, the lesson changed
   upstream, ``make lab`` again), in English and then in Chinese;
2. an instructor with two machines (two network namespaces), the README's "Two real machines"
   steps as written, and every port a Ray process listens on checked against the README;
3. a newcomer on a fresh clone: ``make test-unit``, then ``labkit doctor``;
4. a learner's default size: the day's lesson at ``small`` (``labkit small --rotation``).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import nbformat
import psutil
import pytest

from labkit.runtime import netns, procs
from labkit.tools import readme

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
pytestmark = pytest.mark.journey
REQUIRE = os.environ.get("LABKIT_REQUIRE_JOURNEYS") == "1"


def _fresh_env(home: Path, **extra: str) -> dict[str, str]:
    """A person's shell on a fresh machine: a HOME of its own, no Ray or kit variables."""
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(HOME=str(home), **extra)
    return env


def _skip_or_fail(why: str) -> None:
    if REQUIRE:
        pytest.fail(f"LABKIT_REQUIRE_JOURNEYS=1: {why}")
    pytest.skip(why)


# ---------------------------------------------------------------- 2. two machines


def _listeners(ns: str) -> list[tuple[str, int, int]]:
    """``(address, port, pid)`` of every TCP socket listening inside namespace ``ns``."""
    out = subprocess.run(
        netns.in_ns(ns, ["ss", "-ltnpH"]), capture_output=True, text=True, check=True
    ).stdout
    found = []
    for line in out.splitlines():
        parts = line.split()
        address, _, port = parts[3].rpartition(":")
        for pid in re.findall(r"pid=(\d+)", line):
            found.append((address.strip("[]"), int(port), int(pid)))
    return found


def _name(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline())[:160]
    except psutil.Error:
        return "?"


def _readme_ports(*blocks: str) -> tuple[set[int], range]:
    """The ports the README names: fixed by a ``--*port=N`` flag in ``blocks``, or named as fixed
    by default (in bold) in its "Ports." paragraph; and the workers' range."""
    text = " ".join(readme.block(b).commands()[-1] for b in blocks)
    fixed = {int(p) for p in re.findall(r"--[a-z-]*port=(\d+)", text)}
    low = int(re.search(r"--min-worker-port=(\d+)", text).group(1))
    high = int(re.search(r"--max-worker-port=(\d+)", text).group(1))
    prose = (ROOT / "README.md").read_text().split("* **Ports.**", 1)[1].split("\n* ", 1)[0]
    named = {int(p) for p in re.findall(r"\*\*(\d+)\*\*", prose)}
    assert named, "the README's Ports paragraph names no fixed port"
    return (fixed | named) - {low, high}, range(low, high + 1)


def _run(argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    out = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{argv[-1][:200]}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def test_an_instructor_with_two_machines(tmp_path):
    """The README's "Two real machines", as written, on two namespaces that stand for machines."""
    if why := netns.unavailable():
        _skip_or_fail(why)
    tag = "j" + secrets.token_hex(2)[:3]
    state = tmp_path / "net.json"
    machines = {}
    for name in ("head", "worker"):  # short paths: Ray's Unix sockets live under RAY_TMPDIR
        root = Path(tempfile.mkdtemp(prefix=f"lkj{name[0]}-", dir="/tmp"))
        (root / "home").mkdir()
        (root / "tmp").mkdir()
        machines[name] = {"root": root}
    net = netns.create(tag, 2, lambda n: state.write_text(json.dumps(n)), owner=str(state))
    try:
        for (name, m), node in zip(machines.items(), net["nodes"]):
            m.update(ns=node["ns"], ip=node["ip"])
            m["env"] = _fresh_env(m["root"] / "home", RAY_TMPDIR=str(m["root"] / "tmp"))
        head, worker = machines["head"], machines["worker"]
        for m in machines.values():
            assert not (Path(m["env"]["HOME"]) / ".ray" / "auth_token").exists()
        at = {"<head's address>": head["ip"]}
        bash = ["bash", "-c"]
        _run(netns.in_ns(head["ns"], [*bash, readme.script("two-machines-head", at)]),
             head["env"], 120)  # fmt: skip
        token = Path(head["env"]["HOME"]) / ".ray" / "auth_token"
        assert token.exists() and token.stat().st_mode & 0o077 == 0, "no private token made"
        theirs = Path(worker["env"]["HOME"]) / ".ray" / "auth_token"
        theirs.parent.mkdir()
        shutil.copy(token, theirs)  # the README's scp line
        theirs.chmod(0o600)
        fill = at | {"<this machine's address>": worker["ip"]}
        _run(netns.in_ns(worker["ns"], [*bash, readme.script("two-machines-worker", fill)]),
             worker["env"], 120)  # fmt: skip
        started = time.monotonic()
        run = _run(netns.in_ns(head["ns"], [*bash, readme.script("two-machines-driver", at)]),
                   head["env"], 300)  # fmt: skip
        took = time.monotonic() - started
        assert "01_remote_tasks.ipynb ok" in run.stdout, run.stdout[-2000:]
        print(f"\ntwo machines: labkit run 01 on the cluster in {took:.0f} s")

        fixed, workers = _readme_ports("two-machines-head", "two-machines-worker")
        for name, m in machines.items():
            ray_pids = set(netns.pids_in(m["ns"]))
            found = [(a, p) for a, p, pid in _listeners(m["ns"]) if pid in ray_pids]
            ports = sorted({p for _, p in found})
            print(f"{name} ({m['ip']}): {len(ports)} TCP ports: {ports}")
            stray = {
                p: _name(pid)
                for _, p, pid in _listeners(m["ns"])
                if pid in ray_pids and p not in fixed and p not in workers
            }
            assert not stray, f"{name}: ports the README does not name: {stray} ({found})"
            loopback_only = {8265}  # the dashboard, which the README keeps on 127.0.0.1
            wide = [(a, p) for a, p in found if p in loopback_only and a != "127.0.0.1"]
            assert not wide, f"{name}: the dashboard listens beyond 127.0.0.1: {wide}"
        assert 8265 in {p for _, p, _ in _listeners(head["ns"])}, "the head has no dashboard"
    finally:
        left = []
        for m in machines.values():
            if "ns" in m:
                pids = [psutil.Process(p) for p in netns.pids_in(m["ns"]) if psutil.pid_exists(p)]
                procs.terminate(procs.with_children(pids), timeout=10)
                left += netns.pids_in(m["ns"])
        netns.remove(net)
        for m in machines.values():
            shutil.rmtree(m["root"], ignore_errors=True)
    assert not left, f"processes left in the namespaces: {left}"
    assert not [n for n in netns.namespaces() if n.startswith(f"{netns.PREFIX}-{tag}")]
