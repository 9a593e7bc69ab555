"""Namespaced worker nodes: names, subnets, the stale sweep (unit), and a real namespace (root)."""

from __future__ import annotations

import ipaddress
import subprocess

import pytest

from labkit.runtime import netns


def test_names_fit_linux_link_names():
    n = netns.names("ab12", 9)
    assert n == {"ns": "lk-ab12-w9", "host": "lkvab129", "peer": "lkpab129"}
    assert all(len(v) <= 15 for v in n.values())


def test_free_subnet_skips_the_ones_in_use(monkeypatch):
    used = {ipaddress.ip_network("198.18.0.0/24"), ipaddress.ip_network("198.18.1.0/25")}
    monkeypatch.setattr(netns, "_used_subnets", lambda: used)
    assert str(netns.free_subnet()) == "198.18.2.0/24"
    monkeypatch.setattr(netns, "_used_subnets", lambda: {ipaddress.ip_network("198.18.0.0/15")})
    with pytest.raises(RuntimeError, match="in use"):
        netns.free_subnet()


def test_free_subnet_is_in_the_benchmarking_range(monkeypatch):
    monkeypatch.setattr(netns, "_used_subnets", lambda: set())
    assert netns.free_subnet().subnet_of(ipaddress.ip_network("198.18.0.0/15"))


def test_stale_is_only_what_the_kit_marked_and_lost(monkeypatch, tmp_path):
    monkeypatch.setattr(netns, "MARKERS", tmp_path / "markers")
    monkeypatch.setattr(netns, "unavailable", lambda: None)
    monkeypatch.setattr(
        netns, "namespaces", lambda: ["lk-ab12-w0", "lk-cd34-w1", "lk-prod-w0", "docker-x"]
    )
    monkeypatch.setattr(
        netns,
        "links",
        lambda: ["lo", "eth0", "lkbrab12", "lkvab120", "lkvcd341", "lkbrcd34", "lkvpn-home"],
    )
    # no markers: nothing is the kit's to touch, whatever the names look like
    assert netns.stale() == {"namespaces": [], "links": []}
    owner = tmp_path / "cluster.json"  # a checkout whose cluster ab12 is up
    owner.write_text("{}")
    netns.MARKERS.mkdir()
    (netns.MARKERS / "ab12").write_text(str(owner))
    (netns.MARKERS / "cd34").write_text(str(tmp_path / "gone.json"))  # its owner went away
    assert netns.stale() == {"namespaces": ["lk-cd34-w1"], "links": ["lkvcd341", "lkbrcd34"]}


def test_only_the_kits_own_name_shapes_have_a_tag():
    kit = ["lk-ab12-w0", "lkbrab12", "lkvab120", "lkpab129"]
    assert [netns.tag_of(n) for n in kit] == ["ab12"] * 4
    assert [netns.tag_of(n) for n in ("lk-main", "lkvpn-home", "lkbrab12x", "eth0")] == [None] * 4


def test_unavailable_says_why(monkeypatch):
    monkeypatch.setattr(netns.sys, "platform", "linux")
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    assert "root" in netns.unavailable()


@pytest.mark.network
@pytest.mark.skipif(netns.unavailable() is not None, reason="needs root and ip netns")
def test_create_ping_cut_remove(tmp_path):
    import secrets

    tag = secrets.token_hex(2)
    owner = tmp_path / "cluster.json"  # a live owner: a concurrent `labkit clean` leaves it be
    owner.write_text("{}")
    made: list = []
    net = {"tag": tag, "nodes": []}
    try:
        net = netns.create(tag, 2, record=lambda n: made.append(dict(n)), owner=str(owner))
        assert made and net["bridge"] == f"lkbr{tag}" and len(net["nodes"]) == 2
        a, b = net["nodes"]
        assert ipaddress.ip_address(a["ip"]) in netns.RANGE
        with pytest.raises(RuntimeError, match="taken"):  # a tag in use is never taken over
            netns.create(tag, 1, record=lambda n: None, owner=str(owner))

        def ping(ns, addr):
            out = subprocess.run(
                netns.in_ns(ns, ["python3", "-c", _CONNECT, addr]),
                capture_output=True,
                text=True,
                timeout=20,
            )
            return out.stdout.strip()

        # node a reaches the head's bridge address and node b over the bridge
        assert ping(a["ns"], net["head_ip"]) == "reached"
        assert ping(a["ns"], b["ip"]) == "reached"
        netns.set_link(net, 1, up=False)
        assert ping(a["ns"], b["ip"]) == "unreachable"
        netns.set_link(net, 1, up=True)
    finally:
        gone = netns.remove(net)
    assert set(gone) >= {f"lkbr{tag}", f"lk-{tag}-w0", f"lk-{tag}-w1"}
    left = netns.namespaces() + netns.links()
    assert not [n for n in left if netns.tag_of(n) == tag]
    assert not (netns.MARKERS / tag).exists()


# A TCP connect to port 9: "refused" proves the address answered, a timeout that it did not.
_CONNECT = """
import socket, sys
s = socket.socket(); s.settimeout(2)
try:
    s.connect((sys.argv[1], 9)); print("reached")
except ConnectionRefusedError:
    print("reached")
except OSError:
    print("unreachable")
"""
