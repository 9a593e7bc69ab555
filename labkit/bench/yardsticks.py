"""Ray's own yardsticks, run beside the kit's patterns: a subset of ``ray microbenchmark`` and
Serve's no-op HTTP latency benchmark, each in a subprocess of its own with ``RAY_ADDRESS=local``
(both call a bare ``ray.init()``, which would join any cluster ``RAY_ADDRESS`` names), and the
machine's own yardstick for put/get: a copy into memory already touched.

Used in: lab_yardsticks.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np

#: A line ``ray microbenchmark`` prints for each test: "<name> per second <mean> +- <sd>".
MICRO_LINE = re.compile(r"^(?P<name>.+?) per second (?P<mean>[\d.e+-]+) \+- (?P<sd>[\d.e+-]+)\s*$")
#: A line of the latencies' ``describe()`` table in Serve's benchmark: "50%      1.234".
DESCRIBE_LINE = re.compile(r"^(?P<stat>count|mean|std|min|max|\d+%)\s+(?P<value>[\d.e+-]+)\s*$")


class YardstickError(RuntimeError):
    """A yardstick that did not run: says which, why, and the last lines it printed."""


def _local_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a yardstick: its own local Ray, never a cluster RAY_ADDRESS names."""
    env = dict(os.environ)
    env["RAY_ADDRESS"] = "local"
    env.pop("RAY_API_SERVER_ADDRESS", None)  # the State API reads it before RAY_ADDRESS
    env |= extra or {}
    return env


def _run(cmd: list[str], env: dict[str, str], timeout_s: float, *, what: str) -> str:
    """Run ``cmd`` in a session of its own; past ``timeout_s`` its whole process group (the
    driver and the Ray processes it started) is killed, by its PID. Returns stdout."""
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        tail = "\n".join(out.splitlines()[-5:])
        raise YardstickError(f"{what}: no result within {timeout_s:.0f} s\n{tail}") from None
    except BaseException:  # an interrupted cell: its benchmark and its Ray go with it
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    if proc.returncode != 0:
        tail = "\n".join(out.splitlines()[-8:])
        raise YardstickError(f"{what}: exited with {proc.returncode}\n{tail}")
    return out


#: ``ray microbenchmark`` as a script: the same ``main()``, without the Ray Client benchmarks at
#: its end, which start a client server and a Ray per benchmark whatever ``TESTS_TO_RUN`` says
#: (on 2 cores one of those starts timed out, after the tests asked for had printed).
MICRO_SCRIPT = """
import importlib
perf = importlib.import_module({module!r})
perf.client_microbenchmark_main = lambda results=None: results
perf.main()
"""


def parse_microbenchmark(text: str) -> dict[str, tuple[float, float]]:
    """``{test name: (mean per second, standard deviation)}`` from ``ray microbenchmark``'s
    output."""
    out = {}
    for line in text.splitlines():
        m = MICRO_LINE.match(line.strip())
        if m:
            out[m["name"]] = (float(m["mean"]), float(m["sd"]))
    return out


def ray_microbenchmark(pattern: str, timeout_s: float = 300) -> dict[str, tuple[float, float]]:
    """Run the tests of ``ray microbenchmark`` whose name contains ``pattern`` (its
    ``TESTS_TO_RUN``, a plain substring), in a subprocess with a local Ray of its own. Each test
    sleeps 10 s first, then counts calls for 8 s; the script starts Ray twice."""
    from labkit.runtime.rayprivate import PRIVATE

    env = _local_env({"TESTS_TO_RUN": pattern})
    script = MICRO_SCRIPT.format(module=PRIVATE["ray_perf"][0])
    what = f"ray microbenchmark {pattern!r}"
    found = parse_microbenchmark(_run([sys.executable, "-c", script], env, timeout_s, what=what))
    if not found:
        raise YardstickError(f"ray microbenchmark: no test matches {pattern!r}")
    return found


def parse_describe(text: str) -> dict[str, float]:
    """``{"50%": ..., "mean": ...}`` from a pandas ``describe()`` printed by Serve's benchmark."""
    out = {}
    for line in text.splitlines():
        m = DESCRIBE_LINE.match(line.strip())
        if m:
            out[m["stat"]] = float(m["value"])
    return out


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether nothing listens on ``host:port`` (Serve's benchmark wants 8000)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def serve_noop_latency(num_requests: int = 100, timeout_s: float = 240) -> dict[str, float]:
    """Serve's own no-op HTTP latency benchmark (one replica, one client, 100 warm-up requests
    not counted): the latencies' count, mean, percentiles (``"50%"``...) in ms. Needs port 8000
    on 127.0.0.1 free."""
    from labkit.runtime.rayprivate import PRIVATE

    if not port_free(8000):
        raise YardstickError("Serve's no-op benchmark: port 8000 is taken (it serves there)")
    module = PRIVATE["serve_noop_benchmark"][0]
    cmd = [sys.executable, "-m", module, "--num-requests", str(num_requests)]
    out = _run(cmd, _local_env(), timeout_s, what="Serve's no-op HTTP benchmark")
    stats = parse_describe(out.split("Latency (ms)", 1)[-1])
    if "50%" not in stats:
        raise YardstickError("Serve's no-op HTTP benchmark printed no latencies")
    return stats


def memcpy_gb_s(mb: int, repeats: int = 5) -> float:
    """The machine's yardstick for put/get: GB/s of ``np.copyto`` of ``mb`` MB into an array
    already touched (no page faults), median of ``repeats``."""
    src = np.ones(mb * 2**20 // 8)
    dst = np.empty_like(src)
    dst.fill(0)
    times = []
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    return src.nbytes / 1e9 / float(np.median(times[1:]))
