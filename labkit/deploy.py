"""Check the manifests in ``deploy/`` offline: Ray's own validator for the cluster launcher YAML,
the RayCluster CRD's ``openAPIV3Schema`` (copied from KubeRay) for the KubeRay manifest.

Each checker returns a list of problems: empty means valid. Nothing here talks to a cloud or a
Kubernetes API server.

Used in: 05, 12.
"""

from __future__ import annotations

import copy
import functools
import io
import logging
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import yaml

from labkit.params import repo_root

#: The blog's cluster-launcher YAML, as printed (section 4.1).
BLOG_CLUSTER_YAML = """
cluster_name: ray-prod
provider: {type: aws, region: us-west-2}
available_node_types:
  head_node: {resources: {CPU: 16}, node_config: {InstanceType: m5.4xlarge}}
  worker_nodes:
    min_workers: 10
    max_workers: 100
    resources: {CPU: 8, GPU: 1}
    node_config: {InstanceType: g4dn.2xlarge}
"""

#: The blog's KubeRay worker group snippet, as printed.
BLOG_WORKER_GROUPS = """
workerGroupSpecs:
  - replicas: 10
    minReplicas: 5
    maxReplicas: 50
    resources: {CPU: 8, GPU: 1}
"""


def deploy_dir() -> Path:
    return repo_root() / "deploy"


def load(path: str | Path) -> dict[str, Any]:
    """A YAML file from ``deploy/`` (relative paths are taken from there)."""
    path = Path(path)
    if not path.is_absolute():
        path = deploy_dir() / path
    return yaml.safe_load(path.read_text())


def validate_cluster_config(config: dict[str, Any] | str) -> None:
    """Run Ray's own ``validate_config(prepare_config(...))`` on ``config`` (a dict or YAML text),
    exactly what ``ray up`` does before it launches anything: raises what the launcher raises."""
    from labkit.runtime.rayprivate import get

    prepare_config, validate_config = get("prepare_config"), get("validate_config")

    if isinstance(config, str):
        config = yaml.safe_load(config)
    quiet = io.StringIO()
    autoscaler_log = logging.getLogger("ray.autoscaler")
    level = autoscaler_log.level
    autoscaler_log.setLevel(logging.ERROR)
    try:
        with redirect_stdout(quiet), redirect_stderr(quiet):
            validate_config(prepare_config(copy.deepcopy(config)))
    finally:
        autoscaler_log.setLevel(level)


def cluster_config_problems(config: dict[str, Any] | str) -> list[str]:
    """What Ray's cluster launcher would reject in ``config``; ``[]`` means it accepts it."""
    try:
        validate_cluster_config(config)
    except Exception as err:  # the validator raises ValueError or jsonschema's ValidationError
        message = getattr(err, "message", None) or str(err)
        return [f"{type(err).__name__}: {message.splitlines()[0]}"]
    return []


@functools.cache
def raycluster_schema() -> dict[str, Any]:
    """The ``openAPIV3Schema`` of KubeRay's RayCluster CRD, version ``ray.io/v1``."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load((deploy_dir() / "schemas" / "ray.io_rayclusters.yaml").read_text(), loader)
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    return version["schema"]["openAPIV3Schema"]


def unknown_keys(instance: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """Keys the schema does not declare (the API server would silently drop them: likely typos)."""
    out: list[str] = []
    if isinstance(instance, dict) and "properties" in schema:
        if schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("additionalProperties"):
            return out
        for key, value in instance.items():
            if key not in schema["properties"]:
                out.append(f"{path}.{key}")
            else:
                out += unknown_keys(value, schema["properties"][key], f"{path}.{key}")
    elif isinstance(instance, list) and "items" in schema:
        for i, item in enumerate(instance):
            out += unknown_keys(item, schema["items"], f"{path}[{i}]")
    return out


def raycluster_problems(manifest: dict[str, Any] | str) -> list[str]:
    """Schema violations and undeclared keys in a RayCluster manifest; ``[]`` means valid."""
    import jsonschema

    if isinstance(manifest, str):
        manifest = yaml.safe_load(manifest)
    schema = raycluster_schema()
    validator = jsonschema.Draft7Validator(schema)
    problems = [
        f"$.{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in sorted(validator.iter_errors(manifest), key=lambda e: list(e.absolute_path))
    ]
    problems += [f"{key}: not a field of RayCluster" for key in unknown_keys(manifest, schema)]
    return problems


def autoscaling_summary(config: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Node type -> (min_workers, max_workers) of a cluster launcher config."""
    return {
        name: (spec.get("min_workers", 0), spec.get("max_workers", 0))
        for name, spec in config.get("available_node_types", {}).items()
    }
