"""Bounded HTTP load on loopback addresses, for the Serve lessons.

* **Loopback only.** :func:`check_loopback` refuses any host that is not ``localhost`` or a
  loopback IP literal (``127.0.0.0/8``, ``::1``), before a socket is opened: the kit never
  points load at somebody else's machine. Names are not resolved (no DNS).
* **Bounded.** Every run stops at ``n_requests`` requests or after ``duration_s`` seconds,
  whichever comes first; both are required and capped (:data:`MAX_REQUESTS`,
  :data:`MAX_DURATION_S`), as is the number of requests in flight.
* **Closed or open loop.** ``concurrency=N`` keeps N clients each sending its next request when
  the last one answered (load follows the server); ``rate_per_s=R`` starts requests on a fixed
  schedule whatever the server does (load does not wait: queueing shows up as latency, counted
  from each request's slot in the schedule, so time spent waiting for one of the
  :data:`MAX_IN_FLIGHT` connections counts too).
* **A record per request:** its start (seconds after the run began), latency, HTTP status
  (``0`` when no response came: refused, reset or timed out), the ``version`` and ``replica``
  fields of a JSON answer when present, and the error text.
* **Streams.** With ``stream=True`` the answer is read line by line as it arrives (one token
  per line, as lesson 13's endpoint sends them): each request also records its time to the
  first line (``ttft_ms``) and the gaps between lines (``gaps_ms``); lines that arrive in one
  read count as gaps of 0, which is what the client saw.

Built on ``aiohttp`` (Ray installs it). The event loop runs in a thread of its own, so
:func:`start` returns at once and works inside Jupyter's running loop: a notebook can deploy
a new version while the load runs, then call :meth:`LoadRun.result`.

Used in: 09, 11-13, lab_serve.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np

MAX_REQUESTS = 200_000
MAX_DURATION_S = 900.0
MAX_IN_FLIGHT = 256

Payload = dict[str, Any] | list[Any] | bytes | str | None


def check_loopback(url: str) -> str:
    """Return ``url`` if its host is a loopback address; raise ``ValueError`` otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"only http(s) URLs are load-tested, not {url!r}")
    host = parts.hostname or ""
    if host == "localhost":
        return url
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(
            f"the load generator only targets loopback hosts (127.0.0.1, ::1, localhost), "
            f"not {host!r}"
        )
    return url


@dataclass(frozen=True)
class Request:
    """One request's outcome."""

    start_s: float  # when it was sent, seconds after the run began
    latency_ms: float
    status: int  # HTTP status; 0 when no response came
    version: str | None = None  # the answer's "version" field, if any
    replica: str | None = None  # the answer's "replica" field, if any
    error: str | None = None
    ttft_ms: float | None = None  # stream=True: time to the first line of the answer
    gaps_ms: tuple[float, ...] = ()  # stream=True: time between consecutive lines

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


@dataclass
class LoadResult:
    """All requests of one run, with the summaries the lessons plot and record."""

    requests: list[Request]
    wall_s: float
    mode: str  # "closed" or "open"
    stopped_by: str  # the bound that ended it: "n_requests", "duration_s" or "stop()"

    @property
    def n_requests(self) -> int:
        return len(self.requests)

    @property
    def n_failed(self) -> int:
        return sum(not r.ok for r in self.requests)

    @property
    def requests_per_s(self) -> float:
        return len(self.requests) / self.wall_s if self.wall_s > 0 else 0.0

    def latency_ms(self, q: float, *, ok_only: bool = True) -> float:
        """The ``q``-th percentile (0-100) of latency, over answered requests by default."""
        values = [r.latency_ms for r in self.requests if r.ok or not ok_only]
        return float(np.percentile(values, q)) if values else float("nan")

    def ttft_ms(self, q: float) -> float:
        """The ``q``-th percentile of time to the first streamed line (``stream=True`` runs)."""
        values = [r.ttft_ms for r in self.requests if r.ok and r.ttft_ms is not None]
        return float(np.percentile(values, q)) if values else float("nan")

    def gap_ms(self, q: float) -> float:
        """The ``q``-th percentile of the time between streamed lines, over every answered
        request's gaps (``stream=True`` runs)."""
        values = [g for r in self.requests if r.ok for g in r.gaps_ms]
        return float(np.percentile(values, q)) if values else float("nan")

    def statuses(self) -> dict[int, int]:
        """How many requests ended with each status (0: no response)."""
        counts: dict[int, int] = {}
        for r in self.requests:
            counts[r.status] = counts.get(r.status, 0) + 1
        return dict(sorted(counts.items()))

    def frame(self):
        """One row per request (a pandas DataFrame), sorted by start."""
        import pandas as pd

        rows = [asdict(r) | {"ok": r.ok} for r in self.requests]
        columns = ["start_s", "latency_ms", "status", "version", "replica", "error", "ok"]
        columns += ["ttft_ms", "gaps_ms"]
        return pd.DataFrame(rows, columns=columns).sort_values("start_s", ignore_index=True)

    def summary(self) -> str:
        """One line: count, failures, throughput and latency percentiles."""
        from labkit import lang

        return lang.say(
            "{n} requests in {wall:.1f} s ({rate:.0f}/s), {failed} failed, p50 {p50:.1f} ms, "
            "p99 {p99:.1f} ms",
            n=self.n_requests,
            wall=self.wall_s,
            rate=self.requests_per_s,
            failed=self.n_failed,
            p50=self.latency_ms(50),
            p99=self.latency_ms(99),
        )


def _bounded(name: str, value: float, cap: float) -> None:
    if not 0 < value <= cap:
        raise ValueError(f"{name} must be in (0, {cap:g}], got {value!r}")


class LoadRun:
    """A load run going on in a background thread; :meth:`result` waits for it."""

    def __init__(self, worker: Callable[[LoadRun], LoadResult]):
        self.started = time.perf_counter()  # every record's start_s counts from here
        self.records: list[Request] = []  # appended to as answers come in
        self.stopping = threading.Event()
        self._outcome: LoadResult | BaseException | None = None

        def body() -> None:
            try:
                self._outcome = worker(self)
            except BaseException as err:  # noqa: BLE001 - handed to the caller by result()
                self._outcome = err

        self._thread = threading.Thread(target=body, name="labkit-loadgen", daemon=True)
        self._thread.start()

    def snapshot(self) -> list[Request]:
        """The requests answered so far (a copy), while the run goes on."""
        return list(self.records)

    def done(self) -> bool:
        return not self._thread.is_alive()

    def stop(self) -> None:
        """Ask the run to stop early; requests in flight still finish."""
        self.stopping.set()

    def result(self, timeout: float | None = None) -> LoadResult:
        """Wait for the run to end and return its requests (re-raises a client error)."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError("the load run is still going")
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome


def start(
    url: str,
    *,
    n_requests: int,
    duration_s: float,
    concurrency: int | None = None,
    rate_per_s: float | None = None,
    payload: Payload | Callable[[int], Payload] = None,
    timeout_s: float = 10.0,
    headers: dict[str, str] | None = None,
    stream: bool = False,
) -> LoadRun:
    """Start a bounded load run against ``url`` in the background; see the module docstring.

    Exactly one of ``concurrency`` (closed loop) and ``rate_per_s`` (open loop) is given.
    ``payload`` is sent as JSON with POST (bytes or str as they are); a callable gets the
    request's index; ``None`` sends GET. ``stream=True`` reads the answer line by line and
    records each request's time to its first line and the gaps between lines.
    """
    check_loopback(url)
    _bounded("n_requests", n_requests, MAX_REQUESTS)
    _bounded("duration_s", duration_s, MAX_DURATION_S)
    _bounded("timeout_s", timeout_s, MAX_DURATION_S)
    if (concurrency is None) == (rate_per_s is None):
        raise ValueError("give exactly one of concurrency (closed loop) and rate_per_s (open loop)")
    if concurrency is not None:
        _bounded("concurrency", concurrency, MAX_IN_FLIGHT)
    else:
        _bounded("rate_per_s", rate_per_s, 10_000)
    plan = _Plan(
        url, int(n_requests), float(duration_s), concurrency, rate_per_s, payload, stream=stream
    )
    return LoadRun(lambda run: asyncio.run(_run(plan, run, timeout_s, headers=headers or {})))


def run(url: str, **kwargs: Any) -> LoadResult:
    """Run a bounded load against ``url`` and wait for it: :func:`start` then ``result()``."""
    return start(url, **kwargs).result()


def _body(payload: Payload | Callable[[int], Payload], i: int) -> tuple[str, dict[str, Any]]:
    value = payload(i) if callable(payload) else payload
    if value is None:
        return "GET", {}
    if isinstance(value, bytes | str):
        return "POST", {"data": value}
    return "POST", {"json": value}


async def _lines(resp, start: float) -> tuple[str, float | None, tuple[float, ...]]:
    """Read a streamed answer line by line: its text, the time to its first non-empty line
    and the gaps between lines (ms)."""
    text, stamps = [], []
    async for line in resp.content:
        stamps.append(time.perf_counter())
        text.append(line.decode("utf-8", errors="replace"))
    stamps = [t for t, line in zip(stamps, text, strict=True) if line.strip()]
    first = (stamps[0] - start) * 1e3 if stamps else None
    return "".join(text), first, tuple((b - a) * 1e3 for a, b in zip(stamps, stamps[1:]))


async def _one(
    session, url: str, i: int, *, payload, t0: float, due: float | None = None, stream=False
) -> Request:
    """Send request ``i``; its latency counts from ``due`` (its slot in an open loop's schedule,
    so waiting for a free connection counts too) or else from when it is sent."""
    import aiohttp

    method, kwargs = _body(payload, i)
    start = time.perf_counter() if due is None else due
    status, version, replica, error, first, gaps = 0, None, None, None, None, ()
    try:
        async with session.request(method, url, **kwargs) as resp:
            status = resp.status
            if stream and 200 <= status < 300:
                text, first, gaps = await _lines(resp, start)
            else:
                text = await resp.text()
        try:
            answer = json.loads(text)
        except ValueError:
            answer = None
        if isinstance(answer, dict):
            version, replica = (
                None if answer.get(k) is None else str(answer[k]) for k in ("version", "replica")
            )
        if not 200 <= status < 300:
            error = text[:200]
    except (TimeoutError, aiohttp.ClientError, OSError) as err:
        error = f"{type(err).__name__}: {err}"[:200]
    end = time.perf_counter()
    return Request(
        start - t0,
        (end - start) * 1e3,
        status,
        version,
        replica,
        error,
        ttft_ms=first,
        gaps_ms=gaps,
    )


@dataclass(frozen=True)
class _Plan:
    url: str
    n_requests: int
    duration_s: float
    concurrency: int | None
    rate_per_s: float | None
    payload: Payload | Callable[[int], Payload]
    stream: bool = False


async def _run(
    plan: _Plan, run: LoadRun, timeout_s: float, *, headers: dict[str, str]
) -> LoadResult:
    import aiohttp

    t0, records, url, payload = run.started, run.records, plan.url, plan.payload
    deadline = t0 + plan.duration_s
    issued = 0
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    connector = aiohttp.TCPConnector(limit=MAX_IN_FLIGHT)

    def more() -> bool:
        return (
            issued < plan.n_requests
            and not run.stopping.is_set()
            and time.perf_counter() < deadline
        )

    async with aiohttp.ClientSession(
        timeout=timeout, connector=connector, headers=headers
    ) as session:

        async def send(i: int, due: float | None = None) -> Request:
            return await _one(session, url, i, payload=payload, t0=t0, due=due, stream=plan.stream)

        if plan.concurrency is not None:

            async def client() -> None:
                nonlocal issued
                while more():
                    i = issued
                    issued += 1
                    records.append(await send(i))

            await asyncio.gather(*(client() for _ in range(plan.concurrency)))
            mode = "closed"
        else:
            gate = asyncio.Semaphore(MAX_IN_FLIGHT)
            tasks = []

            async def sent(i: int, due: float) -> None:
                async with gate:
                    records.append(await send(i, due=due))

            interval = 1.0 / plan.rate_per_s
            while more():
                due = t0 + issued * interval
                wait = due - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(min(wait, max(0.0, deadline - time.perf_counter())))
                    continue
                tasks.append(asyncio.create_task(sent(issued, due)))
                issued += 1
            await asyncio.gather(*tasks)
            mode = "open"
    if issued >= plan.n_requests:
        stopped_by = "n_requests"
    else:
        stopped_by = "stop()" if run.stopping.is_set() else "duration_s"
    return LoadResult(list(records), time.perf_counter() - t0, mode, stopped_by)
