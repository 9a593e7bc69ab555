"""Network namespaces that give a workshop cluster's worker nodes addresses of their own.

On Linux as root with iproute2's ``ip``, :func:`create` makes a bridge in the machine's own
namespace (the head node and every driver stay there, on the bridge's address) and one namespace
per worker node, joined to the bridge by a veth pair, with an address from the 198.18.0.0/15
benchmarking range (RFC 2544: never routed on the internet, so nothing outside the machine is ever
contacted). Traffic between nodes then crosses a link that ``ip link set ... down`` can cut.

Everything made is named with the prefix ``lk`` and a short tag, and written to a state file as it
is made, so :func:`remove` deletes exactly that and :func:`stale` finds what a killed run left.
Deleting a namespace does not stop the processes in it: stop them by PID first
(:func:`pids_in`).
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

RANGE = ipaddress.ip_network("198.18.0.0/15")
PREFIX = "lk"
TAG_LEN = 4
#: One file per cluster tag naming the state file of the kit checkout that made it: a namespace
#: whose owner's state file is gone is stale; one whose owner is still up is somebody's cluster.
MARKERS = Path("/run/labkit-netns")


def unavailable() -> str | None:
    """Why namespaced nodes cannot be made here (None when they can)."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces are Linux-only (this is {sys.platform})"
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not on PATH"
    return None


def ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``ip ARGS`` (inside namespace ``ns`` when given); raise with ip's message on failure."""
    cmd = ["ip", *(["netns", "exec", ns, "ip"] if ns else []), *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip() or out.stdout.strip()}")
    return out


def in_ns(ns: str, argv: list[str]) -> list[str]:
    """``argv`` run inside namespace ``ns``."""
    return ["ip", "netns", "exec", ns, *argv]


def _used_subnets() -> set[ipaddress.IPv4Network]:
    out = ip("-o", "-4", "addr", "show", check=False).stdout
    used = set()
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            used.add(ipaddress.ip_interface(parts[parts.index("inet") + 1]).network)
    return used


def free_subnet() -> ipaddress.IPv4Network:
    """The first /24 of 198.18.0.0/15 that no interface of this machine is on."""
    used = _used_subnets()
    for net in RANGE.subnets(new_prefix=24):
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("every /24 of 198.18.0.0/15 is in use on this machine")


def names(tag: str, i: int) -> dict[str, str]:
    """Names for worker ``i`` of cluster ``tag`` (link names fit Linux's 15 characters)."""
    return {
        "ns": f"{PREFIX}-{tag}-w{i}",
        "host": f"{PREFIX}v{tag}{i}",
        "peer": f"{PREFIX}p{tag}{i}",
    }


def create(tag: str, workers: int, record, owner: str) -> dict[str, Any]:
    """Make the bridge and ``workers`` namespaces; ``record(net)`` is called after each step.
    ``owner`` is the state file of the cluster they belong to (see :data:`MARKERS`).

    Returns ``{"tag", "bridge", "subnet", "head_ip", "nodes": [{"ns", "host", "ip"}, ...]}``.
    """
    if len(tag) != TAG_LEN:
        raise ValueError(f"a cluster tag has {TAG_LEN} characters, not {tag!r}")
    MARKERS.mkdir(parents=True, exist_ok=True)
    (MARKERS / tag).write_text(owner)
    subnet = free_subnet()
    hosts = list(subnet.hosts())
    bridge = f"{PREFIX}br{tag}"
    net: dict[str, Any] = {
        "tag": tag,
        "bridge": None,
        "subnet": str(subnet),
        "head_ip": str(hosts[0]),
        "nodes": [],
    }
    ip("link", "add", bridge, "type", "bridge")
    net["bridge"] = bridge
    record(net)
    ip("addr", "add", f"{hosts[0]}/{subnet.prefixlen}", "dev", bridge)
    ip("link", "set", bridge, "up")
    for i in range(workers):
        n = names(tag, i)
        address = str(hosts[10 + i])
        ip("netns", "add", n["ns"])
        net["nodes"].append({"ns": n["ns"], "host": None, "ip": address})
        record(net)
        ip("link", "add", n["host"], "type", "veth", "peer", "name", n["peer"])
        net["nodes"][-1]["host"] = n["host"]
        record(net)
        ip("link", "set", n["peer"], "netns", n["ns"])
        ip("link", "set", n["host"], "master", bridge)
        ip("link", "set", n["host"], "up")
        ip("link", "set", "lo", "up", ns=n["ns"])
        ip("link", "set", n["peer"], "name", "eth0", ns=n["ns"])
        ip("addr", "add", f"{address}/{subnet.prefixlen}", "dev", "eth0", ns=n["ns"])
        ip("link", "set", "eth0", "up", ns=n["ns"])
    return net


def pids_in(ns: str) -> list[int]:
    """PIDs of the processes inside namespace ``ns``."""
    out = ip("netns", "pids", ns, check=False)
    return [int(p) for p in out.stdout.split() if p.isdigit()]


def remove(net: dict[str, Any]) -> list[str]:
    """Delete the links, namespaces and bridge of ``net`` (stop their processes first)."""
    gone = []
    for node in net.get("nodes", []):
        if node.get("host") and _link_exists(node["host"]):
            ip("link", "del", node["host"], check=False)  # its peer goes with it
            gone.append(node["host"])
        if node["ns"] in namespaces():
            ip("netns", "del", node["ns"], check=False)
            gone.append(node["ns"])
    if net.get("bridge") and _link_exists(net["bridge"]):
        ip("link", "del", net["bridge"], check=False)
        gone.append(net["bridge"])
    (MARKERS / net["tag"]).unlink(missing_ok=True)
    return gone


def namespaces() -> list[str]:
    out = ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def links() -> list[str]:
    out = ip("-o", "link", "show", check=False).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


def _link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def tag_of(name: str) -> str | None:
    """The cluster tag in one of the kit's namespace or link names (None for other names)."""
    for prefix in (f"{PREFIX}-", f"{PREFIX}br", f"{PREFIX}v"):
        if name.startswith(prefix) and len(name) >= len(prefix) + TAG_LEN:
            return name[len(prefix) : len(prefix) + TAG_LEN]
    return None


def owned(tag: str) -> bool:
    """Whether cluster ``tag`` still has an owner: its marker names a state file that exists."""
    marker = MARKERS / tag
    try:
        return Path(marker.read_text().strip()).is_file()
    except OSError:
        return False


def stale() -> dict[str, list[str]]:
    """The kit's namespaces and links whose cluster has no owner left (a killed run's)."""
    if unavailable():
        return {"namespaces": [], "links": []}
    ns = [n for n in namespaces() if tag_of(n) and not owned(tag_of(n))]
    link = [
        n
        for n in links()
        if n.startswith((f"{PREFIX}br", f"{PREFIX}v")) and tag_of(n) and not owned(tag_of(n))
    ]
    return {"namespaces": ns, "links": link}


def remove_stale() -> list[str]:
    """Stop what runs in the kit's stale namespaces (by PID), then delete them and their links."""
    import psutil

    from labkit import procs

    found = stale()
    gone = []
    for ns in found["namespaces"]:
        inside = []
        for pid in pids_in(ns):
            try:
                inside.append(psutil.Process(pid))
            except psutil.Error:
                continue
        victims = procs.with_children(inside)
        procs.terminate(victims)
        ip("netns", "del", ns, check=False)
        gone.append(ns)
    for link in found["links"]:
        if _link_exists(link):
            ip("link", "del", link, check=False)
            gone.append(link)
    for tag in {tag_of(n) for names in found.values() for n in names}:
        (MARKERS / tag).unlink(missing_ok=True)
    return gone


def set_link(net: dict[str, Any], i: int, up: bool) -> None:
    """Cut (``up=False``) or restore worker ``i``'s link to the bridge."""
    ip("link", "set", net["nodes"][i]["host"], "up" if up else "down")
