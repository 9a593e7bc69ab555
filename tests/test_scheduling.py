import time

import pytest

from labkit import scheduling as sch


def test_percentiles():
    assert sch.percentile([1, 2, 3, 4], 50) == 2.5
    assert sch.percentile([5], 99) == 5
    assert sch.percentile(list(range(101)), 99) == 99
    s = sch.latency_summary([0.001, 0.002, 0.003])
    assert s["p50_ms"] == pytest.approx(2.0) and s["max_ms"] == pytest.approx(3.0)
    with pytest.raises(ValueError):
        sch.percentile([], 50)
    with pytest.raises(ValueError):
        sch.percentile([1], 101)


def test_lanes_makespan_utilization():
    spans = [
        ("a", 0.0, 2.0, "train"),
        ("a", 1.0, 3.0, "train"),
        ("a", 2.0, 4.0, "feat"),
        ("b", 0.0, 1.0, "feat"),
    ]
    lanes = sch.assign_lanes(spans)
    assert [lane for lane, *_ in lanes] == ["a/0", "a/1", "a/0", "b/0"]
    assert sch.makespan(spans) == 4.0
    assert sch.utilization(spans, capacity=2) == pytest.approx(7.0 / 8.0)
    with pytest.raises(ValueError):
        sch.utilization(spans, 0)


@pytest.mark.ray
def test_dispatcher_starts_high_priority_first():
    import ray

    from labkit import session

    s = session.start(num_cpus=2, dashboard=False)
    try:

        @ray.remote(num_cpus=0)
        def work(seconds, tag):
            time.sleep(seconds)
            return tag

        dispatcher = sch.priority_dispatcher(slots=1)
        blocker = dispatcher.run.remote(0, work, 0.5, "first")
        time.sleep(0.2)  # the blocker holds the only slot
        low = [dispatcher.run.remote(1, work, 0.0, f"low{i}") for i in range(3)]
        time.sleep(0.1)
        high = dispatcher.run.remote(10, work, 0.0, "high")
        assert ray.get(low + [high, blocker]) == ["low0", "low1", "low2", "high", "first"]
        assert ray.get(dispatcher.start_order.remote()) == [0, 10, 1, 1, 1]
    finally:
        s.stop()
