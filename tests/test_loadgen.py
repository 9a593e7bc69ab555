"""The load generator: loopback only, bounded, closed and open loop, a record per request."""

from __future__ import annotations

import asyncio
import threading

import pytest
from aiohttp import web

import labkit
from labkit import loadgen
from labkit.runtime.net import free_port

pytestmark = pytest.mark.network


class Server:
    """A small aiohttp server on 127.0.0.1 in a thread, counting what it received."""

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s
        self.received = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self.bodies: list = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    async def answer(self, request: web.Request) -> web.Response:
        self.received += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if request.can_read_body:
                self.bodies.append(await request.json())
            await asyncio.sleep(self.delay_s)
            if request.path == "/fail":
                return web.Response(status=500, text="boom")
            if request.path == "/text":
                return web.Response(text="plain")
            if request.path == "/stream":  # three lines, 50 ms apart, the first after 100 ms
                resp = web.StreamResponse()
                await resp.prepare(request)
                for k in range(3):
                    await asyncio.sleep(0.1 if k == 0 else 0.05)
                    await resp.write(f'"t{k}"\n'.encode())
                await resp.write_eof()
                return resp
            return web.json_response({"version": "v7", "replica": "r1"})
        finally:
            self.in_flight -= 1

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.answer)
        runner = web.AppRunner(app)
        self._loop.run_until_complete(runner.setup())
        self._loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", self.port).start())
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())

    def __enter__(self) -> Server:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1:8000/",
        "http://192.168.1.5/",
        "http://example.com/",
        "http://0.0.0.0:8000/",
        "http://[2001:db8::1]:80/",
        "http://localhost.example.com/",
    ],
)
def test_refuses_a_host_that_is_not_loopback(url):
    with pytest.raises(ValueError, match="loopback"):
        loadgen.start(url, n_requests=1, duration_s=1, concurrency=1)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8000/x", "http://127.5.0.1/", "http://[::1]:80/", "http://localhost/"]
)
def test_accepts_loopback_hosts(url):
    assert loadgen.check_loopback(url) == url


def test_refuses_other_schemes():
    with pytest.raises(ValueError, match="http"):
        loadgen.check_loopback("ftp://127.0.0.1/")


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(n_requests=0, duration_s=1, concurrency=1),
        dict(n_requests=loadgen.MAX_REQUESTS + 1, duration_s=1, concurrency=1),
        dict(n_requests=1, duration_s=0, concurrency=1),
        dict(n_requests=1, duration_s=loadgen.MAX_DURATION_S + 1, concurrency=1),
        dict(n_requests=1, duration_s=1, concurrency=loadgen.MAX_IN_FLIGHT + 1),
        dict(n_requests=1, duration_s=1),  # neither loop
        dict(n_requests=1, duration_s=1, concurrency=1, rate_per_s=5),  # both
    ],
)
def test_refuses_unbounded_or_ambiguous_runs(kwargs):
    with pytest.raises(ValueError):
        loadgen.start("http://127.0.0.1:1/", **kwargs)


def test_closed_loop_stops_at_n_requests_and_records_each():
    with Server() as server:
        result = loadgen.run(
            server.url + "/",
            n_requests=25,
            duration_s=30,
            concurrency=3,
            payload=lambda i: {"i": i},
        )
    assert result.n_requests == 25 == server.received
    assert result.stopped_by == "n_requests" and result.mode == "closed"
    assert sorted(b["i"] for b in server.bodies) == list(range(25))
    assert server.most_in_flight <= 3
    assert {r.version for r in result.requests} == {"v7"}
    assert {r.replica for r in result.requests} == {"r1"}
    assert result.n_failed == 0 and result.statuses() == {200: 25}
    frame = result.frame()
    assert list(frame["start_s"]) == sorted(frame["start_s"]) and len(frame) == 25
    assert result.latency_ms(50) <= result.latency_ms(99)


def test_closed_loop_keeps_its_clients_busy():
    with Server(delay_s=0.05) as server:
        loadgen.run(server.url, n_requests=40, duration_s=30, concurrency=4)
    assert server.most_in_flight == 4


def test_stops_at_duration_s():
    with Server(delay_s=0.1) as server:
        result = loadgen.run(server.url, n_requests=10_000, duration_s=0.5, concurrency=2)
    assert result.stopped_by == "duration_s"
    assert 0 < result.n_requests < 10_000
    assert result.n_requests == server.received


def test_open_loop_does_not_wait_for_answers():
    # 20 requests at 100/s against a server that takes 0.3 s each: all are in flight together.
    with Server(delay_s=0.3) as server:
        result = loadgen.run(server.url, n_requests=20, duration_s=30, rate_per_s=100)
    assert result.mode == "open" and result.n_requests == 20
    assert server.most_in_flight > 4  # a closed loop of 1 would never exceed 1
    starts = sorted(r.start_s for r in result.requests)
    assert starts == pytest.approx([i / 100 for i in range(20)])  # the schedule, not the answers
    assert min(r.latency_ms for r in result.requests) >= 300


def test_failures_are_recorded_not_raised():
    with Server() as server:
        failed = loadgen.run(server.url + "/fail", n_requests=3, duration_s=10, concurrency=1)
        text = loadgen.run(server.url + "/text", n_requests=2, duration_s=10, concurrency=1)
    assert failed.n_failed == 3 and failed.statuses() == {500: 3}
    assert all(r.error == "boom" for r in failed.requests)
    assert text.n_failed == 0 and text.requests[0].version is None
    port = free_port()  # nothing listens here
    refused = loadgen.run(f"http://127.0.0.1:{port}/", n_requests=2, duration_s=10, concurrency=1)
    assert refused.statuses() == {0: 2} and "Error" in refused.requests[0].error


def test_background_run_can_be_stopped_early():
    with Server(delay_s=0.02) as server:
        running = loadgen.start(server.url, n_requests=100_000, duration_s=60, concurrency=1)
        assert not running.done()
        labkit.wait_until(lambda: len(running.snapshot()) >= 3, timeout=10)
        running.stop()
        result = running.result(timeout=10)
    assert result.stopped_by == "stop()" and 3 <= result.n_requests < 100_000
    assert running.done()


def test_a_streamed_answer_records_its_first_line_and_the_gaps_between_lines():
    with Server() as server:
        result = loadgen.run(
            server.url + "/stream", n_requests=4, duration_s=30, concurrency=2, stream=True
        )
        plain = loadgen.run(server.url + "/stream", n_requests=1, duration_s=30, concurrency=1)
    assert result.n_failed == 0
    for r in result.requests:
        assert len(r.gaps_ms) == 2  # three lines
        assert 0 < r.ttft_ms < r.latency_ms  # the first line came before the end
    assert result.ttft_ms(50) >= 90 and result.gap_ms(50) >= 40  # the server's sleeps
    assert plain.requests[0].ttft_ms is None and plain.requests[0].gaps_ms == ()
    assert "ttft_ms" in result.frame().columns
