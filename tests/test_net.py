"""Who can reach a socket: loopback, one address, or every interface."""

import pytest

from labkit.runtime import net


@pytest.mark.parametrize(
    ("host", "scope"),
    [
        ("127.0.0.1", "loopback"),
        ("127.0.1.1", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "all interfaces"),  # as psutil reports a wildcard bind; never bound here
        ("::", "all interfaces"),
        ("192.0.2.7", "one address"),
        ("fe80::1%eth0", "one address"),
    ],
)
def test_scope_of_an_address(host, scope):
    assert net.scope(host) == scope


def test_kernel_ports_are_empty_outside_a_kernel():
    assert net.kernel_ports() == set()


def test_free_port_never_hands_out_the_same_port_twice_in_a_row(monkeypatch):
    """The OS may offer a port again once its probe closes; one ray.init given the same port
    for two of its components refuses to start (seen once in make test)."""
    offered = iter([50001, 50001, 50001, 50002])
    monkeypatch.setattr(net, "_os_port", lambda host: next(offered))
    monkeypatch.setattr(net, "_RECENT", net.collections.deque(maxlen=256))
    assert [net.free_port(), net.free_port()] == [50001, 50002]


def test_free_port_never_hands_out_a_port_ray_binds_by_default(monkeypatch):
    """A LocalCluster's dashboard was once given 44217 while another Ray on the machine was
    binding its autoscaler's metrics there: the dashboard failed to start."""
    offered = iter([44217, 8265, 50003])
    monkeypatch.setattr(net, "_os_port", lambda host: next(offered))
    monkeypatch.setattr(net, "_RECENT", net.collections.deque(maxlen=256))
    assert net.free_port() == 50003
