"""Prometheus for lesson 10: a real server on 127.0.0.1, or a direct scrape when there is none.

``make prometheus`` unpacks Debian's ``prometheus`` package into the git-ignored ``.tools/``
(``apt-get download`` + ``dpkg -x``: no service is installed or started). :func:`binary` finds
that copy, ``$LABKIT_PROMETHEUS``, or a ``prometheus`` on ``PATH``. :class:`Prometheus` runs it
with the lesson's config on a free loopback port, with its data in a temporary folder, records
its PID in the kit's registry (so ``labkit clean`` and the next session's start find it if a
kernel dies) and stops exactly that process. Without a binary, :func:`scrape` reads Ray's
metrics endpoint the way Prometheus would.

Used in: 10.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from labkit.checks import wait_until
from labkit.params import repo_root
from labkit.runtime import procs
from labkit.runtime.net import LOCALHOST, free_port, listening

_running: list[Prometheus] = []  # started by this process and not stopped yet


def tools_binary() -> Path:
    """Where ``make prometheus`` puts the binary: ``.tools/prometheus/usr/bin/prometheus``."""
    return repo_root() / ".tools" / "prometheus" / "usr" / "bin" / "prometheus"


def binary() -> Path | None:
    """A Prometheus server binary: ``$LABKIT_PROMETHEUS``, the kit's ``.tools/`` copy, or one on
    ``PATH``; None if there is none."""
    override = os.environ.get("LABKIT_PROMETHEUS")
    if override:
        path = Path(override)
        return path if path.is_file() and os.access(path, os.X_OK) else None
    if tools_binary().is_file():
        return tools_binary()
    found = shutil.which("prometheus")
    return Path(found) if found else None


class Prometheus:
    """One Prometheus server on ``http://127.0.0.1:<port>``, scraping what ``config`` says.

    ``config`` is the text of a ``prometheus.yml``. Starting a new one stops the ones this
    process started before (a learner re-running the lesson), and says so.
    """

    def __init__(self, config: str, *, start_timeout_s: float = 30.0):
        exe = binary()
        if exe is None:
            raise FileNotFoundError("no prometheus binary: run `make prometheus`")
        for old in list(_running):
            print(f"labkit: stopping the Prometheus started earlier ({old.url})", file=sys.stderr)
            old.stop()
        self.workdir = Path(tempfile.mkdtemp(prefix="labkit-prom-"))
        self.config_path = self.workdir / "prometheus.yml"
        self.config_path.write_text(config)
        self.port = free_port()
        self.url = f"http://{LOCALHOST}:{self.port}"
        self.log_path = self.workdir / "prometheus.log"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [
                    str(exe),
                    f"--config.file={self.config_path}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address={LOCALHOST}:{self.port}",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.owner = f"prometheus:{self.process.pid}"
        procs.remember({"prometheus": [self.process.pid]}, self.owner)
        _running.append(self)
        atexit.register(self.stop)
        up = wait_until(
            lambda: self.process.poll() is not None or listening(self.port), start_timeout_s
        )
        if not up or self.process.poll() is not None:
            tail = self.log_tail()
            self.stop()
            raise RuntimeError(f"Prometheus did not start on {self.url}:\n{tail}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, n_lines: int = 5) -> str:
        """The last lines Prometheus logged."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n_lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop this Prometheus (SIGTERM, then SIGKILL) and delete its data. Safe to call twice."""
        procs.stop_child(self.process)
        procs.forget(self.owner)
        if self in _running:
            _running.remove(self)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Prometheus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.process.poll() is None else "stopped"
        return f"Prometheus({self.url}, pid {self.pid}, {state})"


def parse(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Samples of a Prometheus text exposition: ``(name, labels, value)``, in order."""
    from prometheus_client.parser import text_string_to_metric_families

    return [
        (s.name, dict(s.labels), float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def scrape(url: str, timeout: float = 10.0) -> list[tuple[str, dict[str, str], float]]:
    """GET a ``/metrics`` endpoint, as Prometheus does, and return its samples."""
    import httpx

    resp = httpx.get(url, timeout=timeout)
    resp.raise_for_status()
    return parse(resp.text)
