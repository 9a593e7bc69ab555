"""Quiet notebooks: Ray's own chatter off, expected noise dropped, real errors kept.

* :func:`quiet_ray` and :func:`quiet_data`: Ray's and Ray Data's progress logging off.
* :func:`filter_worker_logs`: teardown lines that are never the learner's business dropped.
* :func:`expected_errors`: a planned failure (a crash drill) reduced to the one line that
  teaches, with a sentence saying it was expected.

Used in: 01, 04, 05, 07-09, 12, 13, lab_lm.
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field


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


# Lines Ray streams to the driver that are expected, not errors of the learner's. Matched per
# log line; a block (a traceback, a warning and its source line) is dropped from its first line
# (a regex) to its last (a prefix).
NOISE = (
    # Ray Data's actor pools are torn down after their workers exited: a failed kill RPC.
    re.compile(r"Failed to kill actor \w+, return status: Invalid: KillActor RPC failed"),
    # Ray's own actors (Train's PreemptionWatcher) warn about their own constructor arguments.
    re.compile(r"has constructor arguments in the object store and max_restarts > 0"),
    # Ray Data's progress notes, in the actors that feed Ray Train.
    re.compile(r"Progress bars disabled\. To enable"),
    re.compile(r"Dataset \S+ execution finished in [\d.]+ seconds"),
    # Ray Train's workers and Tune's trials echo each report and checkpoint (the lesson prints
    # what matters).
    re.compile(r"Reporting training result \d+: TrainingReport\("),
    re.compile(r"Checkpoint successfully created at: Checkpoint\("),
    # Serve's controller is killed at serve.shutdown(); Ray reports its last calls as retried.
    re.compile(r"Task ServeController\.\w+ failed\. There are infinite retries remaining"),
    # torch's c10d on a node whose address has no host name (the kit's namespaced nodes).
    re.compile(r"\[c10d\] The hostname of the client socket cannot be retrieved"),
    # Serve's router on a busy 2-core machine: a replica's queue length came back late.
    re.compile(r"Failed to get queue length from Replica\(id="),
)
#: The raylet starts at most one worker process per CPU at a time and warns at 4x that pending.
#: Noise only while a lesson says it starts many at once (:func:`expect_worker_starts`); at
#: other times it is a useful clue (tasks blocked in ``ray.get``, say).
WORKER_STARTS = re.compile(r"PYTHON worker processes have been started on node: .* startup")
_worker_starts_until = 0.0


def expect_worker_starts(seconds: float = 60.0) -> None:
    """For the next ``seconds``, drop the raylet's warning that many worker processes are
    starting at once: the cell means it (five actors on a 2-CPU session, say) and checks that
    they started."""
    global _worker_starts_until
    _worker_starts_until = time.monotonic() + seconds


NOISY_BLOCKS = (
    # A Ray Data ListFiles thread raises InterruptedError when `limit` or `take` stops early.
    (re.compile(r"^Exception in thread pool-"), "InterruptedError"),
    # Ray Data warns about its own deprecated option, then prints the line that used it.
    (re.compile(r"RayDeprecationWarning: `ExecutionOptions.exclude_resources`"), "self.exclude"),
    # Tune stops a trial's actor with SIGTERM; Ray's handler raises SystemExit, which Python
    # reports as "ignored" when it lands in a weakref callback of the dying process.
    (re.compile(r"^Exception ignored in: <function WeakSet\.__init__"), "SystemExit"),
)


def drop_noise(lines: list[str]) -> list[str]:
    """``lines`` without :data:`NOISE` lines and :data:`NOISY_BLOCKS` blocks.

    A block is dropped only when it ends as expected: a line at the left margin that is neither
    its end nor a traceback's header means it was something else, and it is kept whole.
    """
    out: list[str] = []
    block: list[str] = []
    until: str | None = None
    for line in lines:
        if until is not None:
            block.append(line)
            if line.strip().startswith(until):
                block, until = [], None  # the expected block, whole: dropped
                continue
            # Python 3.11 puts an empty line between a traceback's frames at a signal handler.
            inside = not line.strip() or line[:1].isspace()
            if inside or line.startswith("Traceback (most recent call last)"):
                continue
            out.extend(block[:-1])  # not the expected block: keep it, then read this line anew
            block, until = [], None
        started = next((end for start, end in NOISY_BLOCKS if start.search(line)), None)
        if started is not None:
            block, until = [line], started
            continue
        if WORKER_STARTS.search(line) and time.monotonic() < _worker_starts_until:
            continue
        if not any(pattern.search(line) for pattern in NOISE):
            out.append(line)
    out.extend(block)  # a block the batch cut short is kept
    return out


def filter_worker_logs() -> bool:
    """Keep expected teardown noise out of the notebook; every other worker line still prints.

    Ray prints worker and GCS log lines through one handler in the driver; this wraps it with
    :func:`drop_noise`. It returns False (and changes nothing) where Ray's internals differ.
    """
    from labkit.runtime import rayprivate

    try:
        dispatcher = rayprivate.get("ray_logging").global_worker_stdstream_dispatcher
    except (ImportError, AttributeError):  # pragma: no cover - a Ray without it
        return False
    with dispatcher._lock:
        wrapped = []
        for name, handler in dispatcher.handlers:
            if name == "ray_print_logs" and not getattr(handler, "labkit_filtered", False):
                handler = _filtered(handler)
            wrapped.append((name, handler))
        dispatcher.handlers = wrapped
    _filter_error_messages()
    return any(getattr(h, "labkit_filtered", False) for _, h in dispatcher.handlers)


def _filter_error_messages() -> None:
    """Ray's error messages from the GCS (``(raylet) Task ... failed ...``) bypass the log
    dispatcher: its listener calls ``print_to_stdstream`` directly. Wrap that too."""
    from labkit.runtime import rayprivate

    worker = rayprivate.get("worker")
    original = worker.print_to_stdstream
    if getattr(original, "labkit_filtered", False):
        return

    def print_filtered(data, ignore_prefix):
        lines = drop_noise(list(data.get("lines", [])))
        if lines:
            original({**data, "lines": lines}, ignore_prefix)

    print_filtered.labkit_filtered = True
    worker.print_to_stdstream = print_filtered


#: An autoscaler event repeated within this many seconds is the same event (Ray's monitor
#: reports one decision several times in a row).
AUTOSCALER_REPEAT_S = 10.0


class RepeatFilter:
    """Drops an autoscaler event line seen less than ``window_s`` seconds ago."""

    def __init__(self, window_s: float = AUTOSCALER_REPEAT_S):
        self.window_s = window_s
        self.last_seen: dict[str, float] = {}

    def __call__(self, lines: list[str], now: float) -> list[str]:
        out = []
        for line in lines:
            key = line.split(":event_summary:", 1)[-1].strip()
            last = self.last_seen.get(key)
            self.last_seen[key] = now
            if last is None or now - last >= self.window_s:
                out.append(line)
        return out


def _filtered(handler):
    repeats = RepeatFilter()

    def handle(data):
        lines = drop_noise(list(data.get("lines", [])))
        if data.get("pid") == "autoscaler":
            lines = repeats(lines, time.monotonic())
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


ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the colours Ray puts around "(raylet)" and the like

# What makes a captured line the one that teaches, best first: an exception, then a process or
# node dying, then anything that failed. Ray's INFO-level C++ log lines never teach.
TEACHING = (
    re.compile(r"\b\w+(Error|Exception)\b"),
    re.compile(r"\b(died|terminated|marked dead|was killed|crashed)\b", re.IGNORECASE),
    re.compile(r"\bfailed\b", re.IGNORECASE),
)
INFO_LOG = re.compile(r"\[\d{4}-\d\d-\d\d [\d:,.]+ I \d+ \d+\]")


@dataclass
class Expected:
    """What :func:`expected_errors` hid: the captured lines, and the one that teaches."""

    what: str
    lines: list[str] = field(default_factory=list)

    @property
    def teaching_line(self) -> str | None:
        from labkit.checks import first_line

        candidates = [ln for ln in self.lines if not INFO_LOG.search(ln)]
        for pattern in TEACHING:
            for line in candidates:
                if pattern.search(line):
                    return first_line(line.strip(), 200)
        return None

    def summary(self) -> str:
        n = len(self.lines)
        if not n:  # nothing was hidden: nothing to say
            return ""
        from labkit import lang

        said = dict(what=self.what, n=n, s="s" * (n != 1), line=self.teaching_line)
        if self.teaching_line:
            return lang.say(
                "(expected: {what}; {n} line{s} of Ray's error output hidden; the one that "
                "matters: {line})",
                **said,
            )
        return lang.say("(expected: {what}; {n} line{s} of Ray's error output hidden)", **said)


@contextmanager
def expected_errors(what: str, *, show: bool = True) -> Iterator[Expected]:
    """Run a block whose errors are planned (a crash drill, a killed node) and reduce what Ray
    prints about them to one line, saying they were expected.

    Captures the process's stdout and stderr at the file-descriptor level (Ray's C++ core logs
    there), Python's ``sys.stdout``/``sys.stderr`` (worker logs streamed to the driver, Ray's
    Python loggers) and silences ``ray.*`` loggers; afterwards prints :meth:`Expected.summary`.
    Anything the block raises still propagates: only output is hidden, never an error.
    """
    found = Expected(what)
    sys.stdout.flush()
    sys.stderr.flush()
    loggers = [logging.getLogger(n) for n in ("ray", "ray.train", "ray.data", "ray.tune")]
    levels = [lg.level for lg in loggers]
    buffer = io.StringIO()
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = {fd: os.dup(fd) for fd in (1, 2)}
        try:
            for fd in saved:
                os.dup2(sink.fileno(), fd)
            for lg in loggers:
                lg.setLevel(logging.CRITICAL)
            with redirect_stdout(buffer), redirect_stderr(buffer):
                try:
                    yield found
                finally:
                    time.sleep(0.5)  # let Ray's log threads deliver what the block caused
        finally:
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)
            sink.seek(0)
            raw = sink.read().decode(errors="replace")
            text = ANSI.sub("", buffer.getvalue() + raw)
            found.lines = [ln for ln in text.splitlines() if ln.strip()]
            if show and found.summary():
                print(found.summary())
