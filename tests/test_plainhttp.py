"""The plain FastAPI baseline: a process of its own on loopback, stopped by PID."""

# No `from __future__ import annotations`: FastAPI must see the nested request class itself.

import httpx
import psutil
import pytest
from fastapi import FastAPI
from pydantic import BaseModel

from labkit.plainhttp import PlainServer
from labkit.runtime import procs

pytestmark = pytest.mark.network


def test_serves_a_pickled_app_on_loopback_and_stops():
    offset = 0.5

    def make_app() -> FastAPI:  # defined here, as in a notebook: pickled by value
        class Numbers(BaseModel):
            values: list[float]

        app = FastAPI()

        @app.post("/sum")
        def total(req: Numbers) -> dict:
            return {"sum": sum(req.values) + offset}  # a closure: it travels with the app

        return app

    with PlainServer(make_app) as server:
        assert server.url.startswith("http://127.0.0.1:")
        answer = httpx.post(server.url + "/sum", json={"values": [1, 2]}, timeout=10)
        assert answer.status_code == 200 and answer.json() == {"sum": 3.5}
        bad = httpx.post(server.url + "/sum", json={"values": "x"}, timeout=10)
        assert bad.status_code == 422
        listening = {c.laddr.ip for c in psutil.Process(server.process.pid).net_connections("tcp")}
        assert listening == {"127.0.0.1"}
        assert [e["owner"] for e in procs.alive(server.owner)] == [server.owner]
        pid = server.process.pid
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert procs.alive(server.owner) == []


def test_a_server_that_cannot_start_is_reported_and_cleaned_up():
    with pytest.raises(RuntimeError, match="did not start"):
        PlainServer(lambda: "not an app", start_timeout_s=30)
