"""deploy/: the launcher YAML passes Ray's validator; the RayCluster passes the CRD schema."""

import copy

import yaml

from labkit import deploy


def test_cluster_launcher_yaml_passes_rays_validator():
    cfg = deploy.load("cluster-aws.yaml")
    assert deploy.cluster_config_problems(cfg) == []
    assert cfg["head_node_type"] in cfg["available_node_types"]
    assert "0.0.0.0" not in (deploy.deploy_dir() / "cluster-aws.yaml").read_text()
    assert all(
        "RAY_AUTH_MODE=token" in c
        for c in cfg["head_start_ray_commands"] + cfg["worker_start_ray_commands"]
    )
    groups = deploy.autoscaling_summary(cfg)
    assert any(lo < hi for lo, hi in groups.values())  # at least one group really scales


def test_blog_cluster_yaml_fails_validation():
    problems = deploy.cluster_config_problems(deploy.BLOG_CLUSTER_YAML)
    assert len(problems) == 1 and "head_node_type" in problems[0]


def test_validator_catches_a_broken_copy_of_our_yaml():
    cfg = deploy.load("cluster-aws.yaml")
    broken = copy.deepcopy(cfg)
    worker = next(k for k in cfg["available_node_types"] if k != cfg["head_node_type"])
    broken["available_node_types"][worker]["max_workrs"] = 3  # a typo the launcher must refuse
    assert deploy.cluster_config_problems(broken)


def test_raycluster_matches_the_crd_and_has_what_autoscaling_needs():
    manifest = deploy.load("kuberay/raycluster.yaml")
    assert deploy.raycluster_problems(manifest) == []
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
    manifest = deploy.load("kuberay/raycluster.yaml")
    manifest["spec"].update(yaml.safe_load(deploy.BLOG_WORKER_GROUPS))
    problems = deploy.raycluster_problems(manifest)
    assert any("groupName" in p for p in problems) and any("template" in p for p in problems)
    # `resources` is a real field of a worker group, so it is not reported as unknown
    assert not any("resources: not a field" in p for p in problems)


def test_unknown_keys_catches_typos():
    manifest = deploy.load("kuberay/raycluster.yaml")
    manifest["spec"]["enableInTreeAutoscailing"] = True
    assert deploy.raycluster_problems(manifest) == [
        "$.spec.enableInTreeAutoscailing: not a field of RayCluster"
    ]
