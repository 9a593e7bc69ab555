"""Ray's yardsticks as the kit reads them: the output of ``ray microbenchmark`` and of Serve's
no-op benchmark parsed (the texts below are what 2.60 prints), and the environment that keeps
them off any cluster. Running them is lab_yardsticks' job (make test)."""

import socket

from labkit.bench import yardsticks

MICRO = """Tip: set TESTS_TO_RUN='pattern' to run a subset of benchmarks
2026-12-05 12:30:01,000 INFO worker.py:1 -- Started a local Ray instance.
single client tasks async per second 2980.0 +- 134.62
1:1 actor calls sync per second 1504.35 +- 20.1
single client put gigabytes per second 10.97 +- 1.2
"""

DESCRIBE = """Latency (ms) for noop HTTP requests (num_replicas=1,num_requests=200):
count    200.000000
mean       2.871000
std        0.412000
min        2.101000
50%        2.790000
90%        3.300000
95%        3.600000
99%        4.100000
max        5.000000
dtype: float64
"""


def test_microbenchmark_lines_are_parsed():
    found = yardsticks.parse_microbenchmark(MICRO)
    assert found == {
        "single client tasks async": (2980.0, 134.62),
        "1:1 actor calls sync": (1504.35, 20.1),
        "single client put gigabytes": (10.97, 1.2),
    }


def test_serve_latencies_are_parsed():
    stats = yardsticks.parse_describe(DESCRIBE.split("Latency (ms)", 1)[-1])
    assert stats["50%"] == 2.79 and stats["99%"] == 4.1 and stats["count"] == 200


def test_a_yardstick_never_joins_the_cluster_ray_address_names(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    env = yardsticks._local_env({"TESTS_TO_RUN": "x"})
    assert env["RAY_ADDRESS"] == "local" and env["TESTS_TO_RUN"] == "x"


def test_port_free_sees_a_listener():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert not yardsticks.port_free(s.getsockname()[1])
