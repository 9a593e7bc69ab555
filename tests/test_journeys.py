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


# ---------------------------------------------------------------- 1. a learner over two days


def _git(*args: str, cwd: Path) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="kit", GIT_AUTHOR_EMAIL="kit@example.invalid",
               GIT_COMMITTER_NAME="kit", GIT_COMMITTER_EMAIL="kit@example.invalid")  # fmt: skip
    out = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert out.returncode == 0, f"git {' '.join(args)}: {out.stderr}"
    return out.stdout


def _learner_clone(upstream: Path, where: Path) -> Path:
    """A learner's clone of ``upstream``, with a ``.venv`` that ``make`` takes as installed: a
    venv of its own whose ``labkit`` is this clone's code and whose other packages are the
    suite's (installing them again would take minutes and the network)."""
    _git("clone", "--quiet", str(upstream), str(where), cwd=upstream.parent)
    venv = where / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    ours = next(Path(sys.prefix).glob("lib/python3*/site-packages"))
    (site / "00-labkit.pth").write_text(f"{where}\n")  # this clone's labkit first ...
    (site / "01-packages.pth").write_text(f"{ours}\n")  # ... then the suite's packages
    for shared in ("share", "etc"):  # JupyterLab's assets and its server extensions' config
        if (Path(sys.prefix) / shared).exists():
            (venv / shared).symlink_to(Path(sys.prefix) / shared)
    (venv / "bin" / "labkit").write_text(
        f"#!{venv}/bin/python\nimport sys\nfrom labkit.tools.cli import main\nsys.exit(main())\n"
    )
    (venv / "bin" / "labkit").chmod(0o755)
    if (ROOT / ".tools").exists():  # lesson 10's Prometheus, as `make tools` left it
        (where / ".tools").symlink_to(ROOT / ".tools")
    (venv / ".installed-stamp").touch()  # newer than pyproject.toml: make installs nothing
    return where


class Lab:
    """``make lab`` (or another command that starts ``labkit lab``), started as a person starts
    it, the server found from the URL it prints, and stopped by its process group."""

    def __init__(self, command: list[str], cwd: Path, env: dict[str, str]):
        self.proc = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True,
        )  # fmt: skip
        self.lines: list[str] = []
        try:
            self._wait_for_the_server(deadline=time.monotonic() + 180)
        except BaseException:
            self.stop()
            raise

    def _wait_for_the_server(self, deadline: float) -> None:
        import select

        url = re.compile(r"JupyterLab on (http://127\.0\.0\.1:\d+)/lab\?token=(\w+)")
        found = None
        while found is None and time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 1.0)
            line = self.proc.stdout.readline() if ready else ""
            if line:
                self.lines.append(line.rstrip())
                found = url.search(line)
            elif self.proc.poll() is not None:
                break
        assert found, "make lab printed no JupyterLab URL:\n" + "\n".join(self.lines[-40:])
        self.url, self.token = found.groups()
        self.headers = {"Authorization": f"token {self.token}"}
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "JupyterLab exited:\n" + "\n".join(self.lines[-40:])
            try:
                if httpx.get(f"{self.url}/api/status", headers=self.headers).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise AssertionError("JupyterLab never answered /api/status")

    def said(self, notebook: str) -> str:
        """The line ``make lab`` printed about a learner copy."""
        return next(line for line in self.lines if line.strip().startswith(f"{notebook}:"))

    def get(self, path: str) -> dict:
        r = httpx.get(f"{self.url}/api/contents/{path}", headers=self.headers, timeout=30)
        r.raise_for_status()
        return r.json()["content"]

    def save(self, path: str, nb: dict) -> None:
        """Save as the browser does: a PUT of the whole notebook to the contents API."""
        body = {"type": "notebook", "format": "json", "content": nb}
        r = httpx.put(f"{self.url}/api/contents/{path}", headers=self.headers, json=body,
                      timeout=30)  # fmt: skip
        r.raise_for_status()

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        except ProcessLookupError:
            pass


def _answer_first_exercise(lab: Lab, copy: str, answer: str) -> None:
    """Write ``answer`` into the copy's first answer cell, as a learner types and saves it."""
    nb = lab.get(copy)
    cell = next(c for c in nb["cells"] if "answer" in c["metadata"].get("tags", []))
    cell["source"] = answer
    lab.save(copy, nb)


def _check_passes(clone: Path, copy: str, env: dict[str, str]) -> None:
    """Run the learner copy in its clone's kernel up to its first check (and the teardown
    cell): the check must pass."""
    code = f"""
import nbformat, nbclient
nb = nbformat.read({str(clone / copy)!r}, as_version=4)
first = next(i for i, c in enumerate(nb.cells) if "check" in c.metadata.get("tags", []))
nb.cells = nb.cells[: first + 1] + [c for c in nb.cells if c.cell_type == "code"][-1:]
where = {{"metadata": {{"path": {str(clone / "exercises")!r}}}}}
nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources=where).execute()
print("first check passed")
"""
    out = subprocess.run([str(clone / ".venv/bin/python"), "-c", code], cwd=clone, env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, f"{copy}'s first check failed:\n{out.stderr[-3000:]}"


def _lesson_answer(lesson: str) -> str:
    nb = nbformat.read(next((ROOT / "notebooks").glob(f"{lesson}_*.ipynb")), as_version=4)
    return next(c.source for c in nb.cells if "answer" in c.metadata.get("tags", []))


def _change_upstream(upstream: Path, lesson: str, line: str) -> None:
    """A change to a lesson, committed upstream: ``line`` added to its setup cell."""
    path = next((upstream / "notebooks").glob(f"{lesson}_*.ipynb"))
    nb = nbformat.read(path, as_version=4)
    setup = next(c for c in nb.cells if "labkit.setup(" in c.source)
    setup.source += f"\n{line}"
    nbformat.write(nb, path)
    _git("commit", "--quiet", "-am", f"lesson {lesson} changed upstream", cwd=upstream)


@pytest.mark.parametrize("first_lang", ["en", "zh"])
def test_a_learner_over_two_days(tmp_path, first_lang):
    """Day 1: ``make lab`` (``LABKIT_LANG=zh`` for the Chinese reader), an answer saved through
    JupyterLab, its check passes. Day 2: the lesson changed upstream, ``git pull``, a plain
    ``make lab``: the answer is still there, the change reached the copy, the check passes."""
    upstream = tmp_path / "upstream"
    _git("clone", "--quiet", str(ROOT), str(upstream), cwd=tmp_path)
    clone = _learner_clone(upstream, tmp_path / "learner")
    home = tmp_path / "home"
    home.mkdir()
    env = _fresh_env(home, BROWSER="true", LABKIT_SIZE="smoke", RAY_TMPDIR=os.environ["RAY_TMPDIR"])
    # BROWSER=true: JupyterLab "opens" the page with the `true` command, not the box's Chromium;
    # SIZE=smoke: the check runs in CI's time (a learner's default is small).
    day1 = readme.script("readme.zh:set-up" if first_lang == "zh" else "set-up")
    copy = "exercises/01_remote_tasks.ipynb"
    answer = _lesson_answer("01").replace("# ANSWER", "# MY ANSWER", 1)

    lab = Lab(["bash", "-c", day1], clone, env)
    try:
        assert lab.said("01_remote_tasks.ipynb").endswith(f"written: a new copy ({first_lang})")
        _answer_first_exercise(lab, copy, answer)
    finally:
        lab.stop()
    _check_passes(clone, copy, env)

    _change_upstream(upstream, "01", 'print("a change from upstream")')
    _git("pull", "--quiet", "--ff-only", cwd=clone)
    lab = Lab(["bash", "-c", readme.script("set-up")], clone, env)  # a plain make lab
    try:
        said = lab.said("01_remote_tasks.ipynb")
        assert " merged: " in said and ".old/" in said, said
        nb = nbformat.reads(json.dumps(lab.get(copy)), as_version=4)
    finally:
        lab.stop()
    sources = [c.source for c in nb.cells]
    assert answer in sources, "the learner's answer is gone"
    again = subprocess.run(["make", "exercises"], cwd=clone, env=env, capture_output=True,
                           text=True, timeout=300)  # fmt: skip
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "01_remote_tasks.ipynb: up to date: " in again.stdout, again.stdout[-2000:]
    saved = [c.source for c in nbformat.read(clone / copy, as_version=4).cells]
    assert answer in saved, "make exercises lost the learner's answer"
    assert any(s.endswith('print("a change from upstream")') for s in sources), said
    stub = [s for s in sources if s.startswith("# ")]
    if first_lang == "zh":  # the copies stay Chinese after a plain make lab
        assert "kept in zh" in said and any("在这里写你的代码" in s for s in stub), said
        assert "kept in zh" in lab.said("00_welcome_and_setup.ipynb")
    _check_passes(clone, copy, env)
    print(f"\n{first_lang} learner, day 2: {said}")
    if first_lang == "zh":  # the README's Chinese block: copies elsewhere, lesson 00 in Chinese
        script = readme.script("chinese", {"<folder>": str(tmp_path / "zh-copies")})
        out = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True,
                             text=True, timeout=600)  # fmt: skip
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        assert "00_welcome_and_setup.ipynb ok" in out.stdout, out.stdout[-3000:]
        run = next((clone / "runs").glob("*/00_welcome_and_setup.ipynb"))
        assert nbformat.read(run, as_version=4).cells[0].source.startswith("# 00 · ")


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
    machines: dict[str, dict] = {}
    try:
        for name in ("head", "worker"):  # short paths: Ray's Unix sockets live under RAY_TMPDIR
            root = Path(tempfile.mkdtemp(prefix=f"lkj{name[0]}-", dir="/tmp"))
            machines[name] = {"root": root}
            (root / "home").mkdir()
            (root / "tmp").mkdir()
        net = netns.create(tag, 2, lambda n: state.write_text(json.dumps(n)), owner=str(state))
        for m, node in zip(machines.values(), net["nodes"]):
            m.update(ns=node["ns"], ip=node["ip"])
            m["env"] = _fresh_env(m["root"] / "home", RAY_TMPDIR=str(m["root"] / "tmp"))
        _two_machines(machines)
    finally:
        left = _down(machines, state)
    assert not left, f"processes left in the namespaces: {left}"
    assert not [n for n in netns.namespaces() if n.startswith(f"{netns.PREFIX}-{tag}")]


def _two_machines(machines: dict[str, dict]) -> None:
    """The README's three blocks on the head and the worker, then the port check."""
    head, worker = machines["head"], machines["worker"]
    for m in machines.values():
        assert not (Path(m["env"]["HOME"]) / ".ray" / "auth_token").exists()
    at = {"<head-ip>": head["ip"]}
    bash = ["bash", "-c"]
    _run(netns.in_ns(head["ns"], [*bash, readme.script("two-machines-head", at)]),
         head["env"], 120)  # fmt: skip
    token = Path(head["env"]["HOME"]) / ".ray" / "auth_token"
    assert token.exists() and token.stat().st_mode & 0o077 == 0, "no private token made"
    theirs = Path(worker["env"]["HOME"]) / ".ray" / "auth_token"
    theirs.parent.mkdir()
    shutil.copy(token, theirs)  # the README's scp line
    theirs.chmod(0o600)
    fill = at | {"<this-ip>": worker["ip"]}
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


def _down(machines: dict[str, dict], state: Path) -> list[int]:
    """Stop every process in the machines' namespaces by PID, remove the namespaces (from the
    state the namespaces were recorded in as they were made) and the machines' folders.
    Returns the PIDs still there before the namespaces went."""
    left: list[int] = []
    for m in machines.values():
        if "ns" not in m:
            continue
        found = []
        for pid in netns.pids_in(m["ns"]):
            try:
                found.append(psutil.Process(pid))
            except psutil.Error:
                pass
        procs.terminate(procs.with_children(found), timeout=10)
        left += netns.pids_in(m["ns"])
    if state.exists():
        netns.remove(json.loads(state.read_text()))
    for m in machines.values():
        shutil.rmtree(m["root"], ignore_errors=True)
    return left


# ---------------------------------------------------------------- 3. a newcomer


def test_a_newcomer_on_a_fresh_clone(tmp_path):
    """``make test-unit`` on a fresh clone (the fast tier a newcomer runs first), timed; then
    ``labkit doctor`` says what it checked, and with a piece missing (no Chromium on PATH)
    fails with one line naming it, never a traceback."""
    clone = _learner_clone(ROOT, tmp_path / "clone")
    home = tmp_path / "home"
    home.mkdir()
    env = _fresh_env(home, BROWSER="true")
    started = time.monotonic()
    out = subprocess.run(["make", "test-unit"], cwd=clone, env=env, capture_output=True,
                         text=True, timeout=900)  # fmt: skip
    took = time.monotonic() - started
    tail = out.stdout[-3000:] + out.stderr[-2000:]
    assert out.returncode == 0, tail
    summary = [ln for ln in out.stdout.splitlines() if re.search(r"\d+ passed", ln)]
    print(f"\nnewcomer: make test-unit on a fresh clone in {took:.0f} s: {summary[-1:]}")

    labkit = str(clone / ".venv" / "bin" / "labkit")
    doctor = subprocess.run([labkit, "doctor"], cwd=clone, env=env, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    said = doctor.stdout + doctor.stderr
    assert "Traceback" not in said and "ray  " in said, said
    verdict = [ln for ln in doctor.stdout.splitlines() if ln.startswith("labkit doctor:")]
    if doctor.returncode == 0:
        assert verdict == [verdict[-1]] and "checks above, nothing missing" in verdict[-1], said
    else:  # this machine lacks a piece: each named in one line
        assert verdict and all(": PROBLEM: " in ln for ln in verdict), said

    bare = tmp_path / "bin"  # a PATH with no Chromium and no chromedriver on it
    bare.mkdir()
    missing = subprocess.run([labkit, "doctor"], cwd=clone, env=env | {"PATH": str(bare)},
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    said = missing.stdout + missing.stderr
    assert missing.returncode == 1 and "Traceback" not in said, said
    problems = [ln for ln in missing.stdout.splitlines() if ": PROBLEM: " in ln]
    assert any("no Chromium or no chromedriver: `make browser`" in ln for ln in problems), said
