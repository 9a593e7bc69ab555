"""deploy/: the cluster launcher YAML passes Ray's validator; the RayCluster passes the CRD schema."""

import copy
import functools
from pathlib import Path

import jsonschema
import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"

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

BLOG_WORKER_GROUPS = """
workerGroupSpecs:
  - replicas: 10
    minReplicas: 5
    maxReplicas: 50
    resources: {CPU: 8, GPU: 1}
"""


@functools.cache
def _crd_schema():
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load((DEPLOY / "schemas" / "ray.io_rayclusters.yaml").read_text(), Loader=loader)
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    return version["schema"]["openAPIV3Schema"]


def unknown_keys(instance, schema, path="$"):
    """Keys the schema does not declare (the API server would silently drop them: likely typos)."""
    out = []
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


def test_cluster_launcher_yaml_passes_rays_validator():
    cfg = yaml.safe_load((DEPLOY / "cluster-aws.yaml").read_text())
    validate_config(prepare_config(copy.deepcopy(cfg)))
    assert cfg["head_node_type"] in cfg["available_node_types"]
    assert "0.0.0.0" not in (DEPLOY / "cluster-aws.yaml").read_text()
    assert all(
        "RAY_AUTH_MODE=token" in c
        for c in cfg["head_start_ray_commands"] + cfg["worker_start_ray_commands"]
    )


def test_blog_cluster_yaml_fails_validation():
    cfg = yaml.safe_load(BLOG_CLUSTER_YAML)
    with pytest.raises((ValueError, jsonschema.ValidationError)):
        validate_config(prepare_config(copy.deepcopy(cfg)))


def test_raycluster_matches_the_crd_and_has_what_autoscaling_needs():
    manifest = yaml.safe_load((DEPLOY / "kuberay" / "raycluster.yaml").read_text())
    schema = _crd_schema()
    jsonschema.validate(manifest, schema)
    assert unknown_keys(manifest, schema) == []
    spec = manifest["spec"]
    assert manifest["apiVersion"] == "ray.io/v1" and manifest["kind"] == "RayCluster"
    assert spec["enableInTreeAutoscaling"] is True and spec["authOptions"]["mode"] == "token"
    assert spec["rayVersion"] == "2.60.0"
    groups = {g["groupName"]: g for g in spec["workerGroupSpecs"]}
    assert set(groups) == {"cpu", "gpu"}
    for group in groups.values():
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
        container = group["template"]["spec"]["containers"][0]
        assert {"cpu", "memory"} <= set(container["resources"]["limits"])
    assert (
        "nvidia.com/gpu"
        in groups["gpu"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    )


def test_blog_worker_groups_fail_the_crd():
    manifest = yaml.safe_load((DEPLOY / "kuberay" / "raycluster.yaml").read_text())
    manifest["spec"].update(yaml.safe_load(BLOG_WORKER_GROUPS))
    with pytest.raises(jsonschema.ValidationError, match="groupName|template"):
        jsonschema.validate(manifest, _crd_schema())
    assert "$.spec.workerGroupSpecs[0].resources" not in unknown_keys(
        manifest, _crd_schema()
    )  # a real field


def test_unknown_keys_catches_typos():
    manifest = yaml.safe_load((DEPLOY / "kuberay" / "raycluster.yaml").read_text())
    manifest["spec"]["enableInTreeAutoscailing"] = True
    assert unknown_keys(manifest, _crd_schema()) == ["$.spec.enableInTreeAutoscailing"]
