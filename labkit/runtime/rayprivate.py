"""Every use the kit makes of Ray's private modules, in one place.

Ray's private modules (``ray._private``, ``ray._raylet``, ``ray._common``,
``ray.autoscaler._private``) change without notice between releases. The kit reaches into them
only where 2.60 has no public way, and only through :func:`get`, so that :data:`PRIVATE` is the
whole list and ``tests/test_rayprivate.py`` checks that each entry still resolves on the pinned
Ray. A lesson's cells never use them (``tests/test_hygiene.py``).

Used in: no lesson or lab report.
"""

from __future__ import annotations

import importlib
from typing import Any

#: name -> (module, attribute or None for the module itself, why the kit needs it)
PRIVATE: dict[str, tuple[str, str | None, str]] = {
    "get_node_ip_address": (
        "ray._private.services",
        "get_node_ip_address",
        "the address `ray start` would pick, for a head started by the kit",
    ),
    "get_ray_address_file": (
        "ray._common.utils",
        "get_ray_address_file",
        "the file a bare ray.init() reads; a kit cluster claims it and puts it back",
    ),
    "worker": (
        "ray._private.worker",
        None,
        "the local node's process list (_global_node) and the GCS error-line printer",
    ),
    "parameter": (
        "ray._private.parameter",
        None,
        "RayParams: ray.init has no argument for the dashboard agent's port",
    ),
    "internal_api": (
        "ray._private.internal_api",
        None,
        "object store totals, as `ray memory --stats-only` reads them",
    ),
    "ray_logging": (
        "ray._private.ray_logging",
        None,
        "the driver's handler of worker log lines, wrapped to drop teardown noise",
    ),
    "raylet_config": (
        "ray._raylet",
        "Config",
        "re-reads RAY_AUTH_MODE after the kit turns token auth on in-process",
    ),
    "prepare_config": (
        "ray.autoscaler._private.util",
        "prepare_config",
        "what `ray up` does to a cluster YAML before validating it",
    ),
    "validate_config": (
        "ray.autoscaler._private.util",
        "validate_config",
        "`ray up`'s own check of a cluster YAML, without launching anything",
    ),
    "ray_perf": (
        "ray._private.ray_perf",
        None,
        "`ray microbenchmark`'s tests, run in a subprocess without its Ray Client section",
    ),
    "serve_noop_benchmark": (
        "ray.serve._private.benchmarks.http_noop_latency",
        None,
        "Serve's own no-op HTTP latency benchmark, run as a script (a yardstick in lab reports)",
    ),
}


def get(name: str) -> Any:
    """The private module or attribute :data:`PRIVATE` lists under ``name``."""
    module, attr, _why = PRIVATE[name]
    loaded = importlib.import_module(module)
    return loaded if attr is None else getattr(loaded, attr)
