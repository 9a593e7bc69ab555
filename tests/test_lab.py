"""`make lab`'s server: starts on 127.0.0.1, answers only with the token, and is stopped."""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import psutil
import pytest

from labkit.runtime import procs
from labkit.runtime.net import free_port

pytestmark = pytest.mark.network


def test_lab_server_is_loopback_only_with_token_auth(tmp_path):
    port = free_port()
    env = dict(
        os.environ,
        LABKIT_LAB_TOKEN="labkit-test-token",
        JUPYTER_CONFIG_DIR=str(tmp_path),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "labkit", "lab", "--no-browser", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        status = None
        while time.monotonic() < deadline:
            try:
                req = urllib.request.Request(
                    base + "/api/status", headers={"Authorization": "token labkit-test-token"}
                )
                status = urllib.request.urlopen(req, timeout=5).status
                break
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None, proc.stdout.read()
                time.sleep(0.5)
        assert status == 200
        # The learner copies were written first, and the server (rooted at the repository)
        # lists them next to the lessons.
        for folder in ("exercises", "notebooks"):
            req = urllib.request.Request(
                f"{base}/api/contents/{folder}",
                headers={"Authorization": "token labkit-test-token"},
            )
            listing = json.loads(urllib.request.urlopen(req, timeout=10).read())
            assert any(i["name"].startswith("01_") for i in listing["content"]), folder
        try:
            urllib.request.urlopen(base + "/api/status", timeout=5)
            raise AssertionError("the server answered without a token")
        except urllib.error.HTTPError as err:
            assert err.code == 403
        listening = set()
        for p in procs.with_children([psutil.Process(proc.pid)]):
            try:  # the server spawns short-lived helpers that may exit while we look
                conns = p.net_connections(kind="inet")
            except psutil.NoSuchProcess:
                continue
            listening |= {
                c.laddr.ip for c in conns if c.status == psutil.CONN_LISTEN and c.laddr.port == port
            }
        assert listening == {"127.0.0.1"}
    finally:
        try:
            tree = procs.with_children([psutil.Process(proc.pid)])
        except psutil.Error:
            tree = []
        procs.terminate(tree, timeout=20)
        proc.wait(timeout=10)
    assert proc.poll() is not None
    assert not [p for p in tree if _running(p)]


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
