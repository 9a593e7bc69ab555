"""Lesson 10's Prometheus: found, started on loopback with the lesson's kind of config, queried,
and stopped by PID; and the direct scrape used when there is no Prometheus."""

import json
import stat
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

import httpx
import psutil
import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app

from labkit import prom
from labkit.checks import wait_until
from labkit.runtime import procs

pytestmark = pytest.mark.network

TEXT = """# HELP ray_orders_total orders
# TYPE ray_orders_total counter
ray_orders_total{size="small"} 3.0
ray_orders_total{size="large"} 5.0
# HELP ray_basket items
# TYPE ray_basket gauge
ray_basket 7.0
"""


def test_parse_reads_samples_with_labels():
    assert prom.parse(TEXT) == [
        ("ray_orders_total", {"size": "small"}, 3.0),
        ("ray_orders_total", {"size": "large"}, 5.0),
        ("ray_basket", {}, 7.0),
    ]


def test_binary_override_must_be_an_executable_file(tmp_path, monkeypatch):
    fake = tmp_path / "prometheus"
    fake.write_text("#!/bin/sh\n")
    monkeypatch.setenv("LABKIT_PROMETHEUS", str(fake))
    assert prom.binary() is None  # not executable
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert prom.binary() == fake
    monkeypatch.setenv("LABKIT_PROMETHEUS", str(tmp_path / "missing"))
    assert prom.binary() is None


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def exporter():
    """A metrics endpoint on 127.0.0.1, as a Ray node's metrics port serves one."""
    registry = CollectorRegistry()
    orders = Counter("ray_orders", "orders", ["size"], registry=registry)
    Gauge("ray_basket", "items", registry=registry).set(7)
    Histogram("ray_order_ms", "latency", buckets=[1, 10], registry=registry).observe(3)
    orders.labels("small").inc(3)
    server = make_server("127.0.0.1", 0, make_wsgi_app(registry), handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_port, orders
    server.shutdown()
    server.server_close()


def test_scrape_reads_an_endpoint(exporter):
    port, orders = exporter
    url = f"http://127.0.0.1:{port}/metrics"
    samples = {(n, tuple(sorted(lb.items()))): v for n, lb, v in prom.scrape(url)}
    assert samples[("ray_orders_total", (("size", "small"),))] == 3.0
    assert samples[("ray_basket", ())] == 7.0
    assert samples[("ray_order_ms_bucket", (("le", "10.0"),))] == 1.0


needs_prometheus = pytest.mark.skipif(
    prom.binary() is None, reason="no prometheus binary (`make prometheus`; CI runs it)"
)


def _config(sd_file) -> str:
    """The lesson's shape: file-based discovery, every target's host rewritten to 127.0.0.1."""
    return f"""
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: ray
    file_sd_configs: [{{files: ['{sd_file}'], refresh_interval: 1s}}]
    relabel_configs:
      - {{source_labels: [__address__], regex: '.*:(\\d+)', target_label: __address__,
          replacement: '127.0.0.1:$1'}}
"""


def _query(server, expr: str) -> list[dict]:
    reply = httpx.get(f"{server.url}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert reply["status"] == "success"
    return reply["data"]["result"]


@needs_prometheus
def test_a_real_prometheus_scrapes_on_loopback_and_is_stopped_by_pid(exporter, tmp_path):
    port, orders = exporter
    sd_file = tmp_path / "sd.json"
    # A routable-looking host (TEST-NET-1) as Ray writes the node's IP: relabelled to loopback.
    sd_file.write_text(json.dumps([{"labels": {"job": "ray"}, "targets": [f"192.0.2.1:{port}"]}]))
    server = prom.Prometheus(_config(sd_file))
    try:
        assert server.url.startswith("http://127.0.0.1:")
        bound = {
            c.laddr.ip
            for c in psutil.Process(server.pid).net_connections("tcp")
            if c.status == psutil.CONN_LISTEN
        }
        assert bound == {"127.0.0.1"}
        assert [e["owner"] for e in procs.alive(server.owner)] == [server.owner]
        orders.labels("large").inc(5)
        total = 'sum(ray_orders_total{job="ray"})'
        assert wait_until(lambda: _query(server, total), 30)
        wait_until(lambda: float(_query(server, total)[0]["value"][1]) == 8.0, 30)
        assert float(_query(server, total)[0]["value"][1]) == 8.0
        (target,) = httpx.get(f"{server.url}/api/v1/targets", timeout=10).json()["data"][
            "activeTargets"
        ]
        assert target["scrapeUrl"] == f"http://127.0.0.1:{port}/metrics"
        # A re-run of the lesson starts a new one: the first is stopped, not left behind.
        second = prom.Prometheus(_config(sd_file))
        assert server.process.poll() is not None
        second.stop()
    finally:
        server.stop()
    assert server.process.poll() is not None and not procs.alive(server.owner)
    assert not server.workdir.exists()
    server.stop()  # twice is fine


@needs_prometheus
def test_a_bad_config_fails_with_prometheus_own_words():
    with pytest.raises(RuntimeError, match="did not start") as err:
        prom.Prometheus("scrape_configs: [{job_name: 1, nonsense: true}]\n")
    assert "nonsense" in str(err.value) or "error" in str(err.value).lower()


def test_no_binary_says_what_to_run(monkeypatch, tmp_path):
    monkeypatch.setenv("LABKIT_PROMETHEUS", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="make prometheus"):
        prom.Prometheus("global: {}\n")
