"""Quiet notebooks: Ray's own chatter off, expected teardown noise dropped, real errors kept."""

from __future__ import annotations

import logging
import os
import re
import warnings


def quiet_ray() -> None:
    """Keep Ray's own chatter out of notebook output; errors still show.

    (``ray.widgets`` logs "Missing packages: ['ipywidgets']" where ipywidgets is missing.)
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    for name in (
        "ray",
        "ray.data",
        "ray.train",
        "ray.tune",
        "ray.serve",
        "ray.widgets",
        "filelock",
    ):
        logging.getLogger(name).setLevel(logging.ERROR)


# Lines Ray streams to the driver that are expected, not errors of the learner's: Ray Data's
# actor pools are torn down after their workers have exited (the GCS logs a failed kill RPC,
# "Socket closed"), and a Ray Data ListFiles thread raises InterruptedError when a ``limit`` or
# ``take`` stops reading early. Matched per log line; a traceback is dropped as a block.
NOISE = (re.compile(r"Failed to kill actor \w+, return status: Invalid: KillActor RPC failed"),)
NOISY_TRACEBACKS = (("Exception in thread pool-", "InterruptedError"),)


def drop_noise(lines: list[str]) -> list[str]:
    """``lines`` without :data:`NOISE` lines and :data:`NOISY_TRACEBACKS` blocks."""
    out: list[str] = []
    skipping_until: str | None = None
    for line in lines:
        if skipping_until is not None:
            if line.strip().startswith(skipping_until):
                skipping_until = None
            continue
        started = next((end for start, end in NOISY_TRACEBACKS if line.startswith(start)), None)
        if started is not None:
            skipping_until = started
            continue
        if not any(pattern.search(line) for pattern in NOISE):
            out.append(line)
    return out


def filter_worker_logs() -> bool:
    """Keep expected teardown noise out of the notebook; every other worker line still prints.

    Ray prints worker and GCS log lines through one handler in the driver; this wraps it with
    :func:`drop_noise`. It returns False (and changes nothing) where Ray's internals differ.
    """
    try:
        from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher
    except ImportError:  # pragma: no cover - a Ray without it
        return False
    with dispatcher._lock:
        wrapped = []
        for name, handler in dispatcher.handlers:
            if name == "ray_print_logs" and not getattr(handler, "labkit_filtered", False):
                handler = _filtered(handler)
            wrapped.append((name, handler))
        dispatcher.handlers = wrapped
    return any(getattr(h, "labkit_filtered", False) for _, h in dispatcher.handlers)


def _filtered(handler):
    def handle(data):
        lines = drop_noise(list(data.get("lines", [])))
        if lines:
            handler({**data, "lines": lines})

    handle.labkit_filtered = True
    return handle


def quiet_data() -> None:
    """Keep Ray Data's progress logging out of notebook output (errors still show)."""
    import ray.data

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.enable_operator_progress_bars = False
    ctx.print_on_execution_start = False
    for name in ("ray.data", "ray.train", "ray.tune"):
        logging.getLogger(name).setLevel(logging.ERROR)
    # A small demo dataset gives an actor pool fewer blocks than actors; that is fine here.
    warnings.filterwarnings("ignore", message="The minimum number of concurrent actors")
