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

Used in: no lesson or lab report.
"""

from __future__ import annotations

import ipaddress
import os
import re
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
    """Subnets this machine has an address on or a route to (a VPN may route part of the range)."""
    used = set()
    for line in ip("-o", "-4", "addr", "show", check=False).stdout.splitlines():
        parts = line.split()
        if "inet" in parts:
            used.add(ipaddress.ip_interface(parts[parts.index("inet") + 1]).network)
    for line in ip("-4", "route", "show", check=False).stdout.splitlines():
        first = line.split()[0] if line.split() else ""
        try:
            if first != "default":
                used.add(ipaddress.ip_network(first, strict=False))
        except ValueError:
            continue
    return used


def free_subnet() -> ipaddress.IPv4Network:
    """The first /24 of 198.18.0.0/15 that no address or route of this machine touches."""
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


def create(tag: str, workers: int, record, *, owner: str) -> dict[str, Any]:
    """Make the bridge and ``workers`` namespaces; ``record(net)`` is called after each step.
    ``owner`` is the state file of the cluster they belong to (see :data:`MARKERS`).

    Returns ``{"tag", "bridge", "subnet", "head_ip", "nodes": [{"ns", "host", "ip"}, ...]}``.
    """
    if not re.fullmatch(rf"[a-z0-9]{{{TAG_LEN}}}", tag):
        raise ValueError(f"a cluster tag is {TAG_LEN} lowercase letters or digits, not {tag!r}")
    wanted = [f"{PREFIX}br{tag}"] + [v for i in range(workers) for v in names(tag, i).values()]
    taken = [n for n in wanted if _link_exists(n) or n in namespaces()]
    if taken:
        raise RuntimeError(f"cluster tag {tag!r} is taken: {taken} exist")
    MARKERS.mkdir(parents=True, exist_ok=True)
    with open(MARKERS / tag, "x") as marker:  # exclusive: never take over another's tag
        marker.write(str(Path(owner).resolve()))
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
    record(net)  # from here on, `remove(net)` undoes whatever was made, by the tag's names
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
    """Delete the links, namespaces and bridge of ``net`` (stop their processes first), by the
    names its tag gives, so a step that failed before it was recorded leaves nothing either.
    Returns the names that existed and are gone now."""
    tag = net["tag"]
    count = len(net.get("nodes", [])) + 1  # one more: a node that failed before it was recorded
    candidates = [v for i in range(count) for v in names(tag, i).values()]
    gone = []
    for name in candidates + [f"{PREFIX}br{tag}"]:
        if name.startswith(f"{PREFIX}-") and name in namespaces():
            ip("netns", "del", name, check=False)
            if name not in namespaces():
                gone.append(name)
        elif _link_exists(name):
            ip("link", "del", name, check=False)  # a veth's peer goes with it
            if not _link_exists(name):
                gone.append(name)
    (MARKERS / tag).unlink(missing_ok=True)
    return gone


def namespaces() -> list[str]:
    out = ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def links() -> list[str]:
    out = ip("-o", "link", "show", check=False).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


def _link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


_KIT_NAME = re.compile(
    rf"{PREFIX}-([a-z0-9]{{{TAG_LEN}}})-w\d+|{PREFIX}(?:br|v|p)([a-z0-9]{{{TAG_LEN}}})\d*"
)


def tag_of(name: str) -> str | None:
    """The cluster tag in one of the kit's namespace or link names (None for any other name)."""
    match = _KIT_NAME.fullmatch(name)
    return (match.group(1) or match.group(2)) if match else None


def orphaned(tag: str) -> bool:
    """Whether cluster ``tag`` is the kit's and has lost its owner: a marker exists and the state
    file it names does not. No marker: not the kit's to touch (whatever its name)."""
    marker = MARKERS / tag
    try:
        owner = marker.read_text().strip()
    except OSError:
        return False
    return not Path(owner).is_file()


def stale() -> dict[str, list[str]]:
    """The kit's namespaces and links whose cluster has no owner left (a killed run's)."""
    if unavailable():
        return {"namespaces": [], "links": []}
    ns = [n for n in namespaces() if tag_of(n) and orphaned(tag_of(n))]
    link = [n for n in links() if tag_of(n) and orphaned(tag_of(n))]
    return {"namespaces": ns, "links": link}


def remove_stale() -> list[str]:
    """Stop what runs in the kit's stale namespaces (by PID), then delete them and their links."""
    import psutil

    from labkit.runtime import procs

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
        if ns not in namespaces():
            gone.append(ns)
    for link in found["links"]:
        if _link_exists(link):
            ip("link", "del", link, check=False)
            if not _link_exists(link):
                gone.append(link)
    for tag in {tag_of(n) for found_names in found.values() for n in found_names}:
        (MARKERS / tag).unlink(missing_ok=True)
    return gone


def set_link(net: dict[str, Any], i: int, up: bool) -> None:
    """Cut (``up=False``) or restore worker ``i``'s link to the bridge."""
    ip("link", "set", net["nodes"][i]["host"], "up" if up else "down")
