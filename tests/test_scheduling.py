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


def test_link_kind_reads_the_two_addresses():
    from labkit.scheduling import link_kind

    assert link_kind("127.0.0.1", "127.0.0.1") == "loopback"
    assert link_kind("198.18.3.2", "198.18.3.3") == "veth"
    assert link_kind("10.0.0.2", "10.0.0.3") == "network"
    assert link_kind("198.18.3.2", "node-b") == "network"


@pytest.mark.ray
def test_cross_node_read_reads_a_block_made_on_another_node():
    import ray

    from labkit.cluster import LocalCluster
    from labkit.scheduling import cross_node_read

    cluster = LocalCluster(head={"num_cpus": 1}, nodes=[{"num_cpus": 1}], object_store_mb=80)
    cluster.start()
    try:
        a, b = (n["NodeID"] for n in ray.nodes() if n["Alive"])
        out = cross_node_read(a, b, mb=4, repeats=1)
        assert out["link"] == "loopback" and (out["mb"], out["repeats"]) == (4, 1)
        assert all(out[k] > 0 for k in ("same_gbps", "cross_gbps", "copy_gbps"))
    finally:
        cluster.stop()


def test_shares_on_asks_only_for_what_the_node_offers():
    share = {"num_cpus": 0.25, "num_gpus": 0.125, "memory": 1}
    worker = {"NodeID": "w", "Resources": {"CPU": 1.0, "GPU": 2.0}}
    head = {"NodeID": "h", "Resources": {"memory": 8.0}}  # a 0-CPU, 0-GPU head
    assert sch.shares_on(share, worker) == share
    assert sch.shares_on(share, head) == {"num_cpus": 0, "memory": 1}
    assert share == {"num_cpus": 0.25, "num_gpus": 0.125, "memory": 1}  # not changed in place
    assert sch.shares_on({}, head) == {}
