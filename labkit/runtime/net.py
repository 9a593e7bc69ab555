"""Where a kit session listens and how it authenticates: 127.0.0.1, free ports, Ray's token.

Everything the kit starts listens on 127.0.0.1 (never 0.0.0.0) on a port the OS says is free,
and keeps Ray's token auth on.

Used in: 00, 10.
"""

from __future__ import annotations

import collections
import os
import secrets
import socket
import tempfile
from pathlib import Path

LOCALHOST = "127.0.0.1"


#: The ports this process handed out lately: the OS may offer a port again as soon as the probe
#: closes it, and two of them given to one ``ray.init`` (the dashboard agent's and the metrics
#: port, once in make test) make Ray refuse to start.
_RECENT: collections.deque[int] = collections.deque(maxlen=256)


#: Ports a Ray on this machine binds without being asked (Ray 2.60's defaults: the GCS, the
#: dashboard, its agent, the client server, the autoscaler's and the dashboard's metrics). The OS
#: may offer one of them as free while another Ray is about to bind it: never hand them out.
RAY_DEFAULT_PORTS = frozenset({6379, 8265, 10001, 44217, 44227, 52365})


def _os_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port that is free on ``host`` right now (the OS picks it), not one this process
    handed out lately, and not one of :data:`RAY_DEFAULT_PORTS`."""
    for _ in range(100):
        port = _os_port(host)
        if port not in _RECENT and port not in RAY_DEFAULT_PORTS:
            break
    _RECENT.append(port)
    return port


def listening(port: int, host: str = LOCALHOST) -> bool:
    """True if something accepts TCP connections on ``host:port`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.3)
        return s.connect_ex((host, port)) == 0


def token_path() -> Path:
    """Where Ray keeps the auth token (``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``)."""
    return Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")


def auth_token() -> str | None:
    """The token Ray would use (``RAY_AUTH_TOKEN`` or the token file), or None if there is none."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return os.environ["RAY_AUTH_TOKEN"].strip()
    path = token_path()
    if path.is_file():
        return path.read_text().strip() or None
    return None


def ensure_token() -> str:
    """Return Ray's auth token, creating the token file first if there is none.

    ``ray.init`` creates one on a machine that has none, but ``ray start --head`` (the kit's
    clusters) refuses to start without one. The file holds what Ray writes (64 hex characters)
    but, unlike Ray's own (``ray get-auth-token --generate`` wrote it 0644 under umask 022, as
    the two-machine journey found), is readable by its owner only; it is never replaced: if two
    processes race, the first file wins and both use it.
    """
    token = auth_token()
    if token:
        return token
    path = token_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".auth_token-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        os.chmod(tmp, 0o600)
        try:
            os.link(tmp, path)  # fails if the file appeared meanwhile: keep that one
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)
    return path.read_text().strip()


def enable_token_auth() -> None:
    """Turn token auth on for this process and its children, as Ray's own default does.

    Setting ``RAY_AUTH_MODE=token`` up front keeps auth on without Ray's warning; Ray caches its
    config at import, so it is refreshed the way Ray itself does it.
    """
    ensure_token()
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    from labkit.runtime import rayprivate

    rayprivate.get("raylet_config").initialize("")


def scope(host: str) -> str:
    """Who can reach a socket bound to ``host``: ``"loopback"`` (this machine only), ``"all
    interfaces"`` (the wildcard address: every network the machine is on) or ``"one address"``
    (one interface's address: whoever reaches that network)."""
    import ipaddress

    addr = ipaddress.ip_address(host.split("%")[0])
    if addr.is_loopback:
        return "loopback"
    if addr.is_unspecified:
        return "all interfaces"
    return "one address"


def kernel_ports() -> set[int]:
    """The ports of the Jupyter kernel this code runs in (its ZMQ sockets: shell, iopub, stdin,
    control, heartbeat); empty outside a kernel."""
    import json

    try:
        from ipykernel.connect import get_connection_info

        info = json.loads(get_connection_info())
    except Exception:  # noqa: BLE001 - not in a kernel, or no ipykernel
        return set()
    return {int(v) for k, v in info.items() if k.endswith("_port") and v}
