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
