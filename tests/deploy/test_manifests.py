"""Every overlay of deploy/ renders, every object passes kubernetes-validate's strict schemas
of Kubernetes 1.33 (the seed's platform) and 1.34, and the workloads keep the promises
docs/operations.md makes: non-root, read-only, probed, one beat, no secret in git."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy.rendering import (
    CLUSTER_SCOPED,
    DEPLOY,
    OVERLAYS,
    ROOT,
    objects,
    pod_templates,
    rendered,
)

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl binary"),
]
# The newest releases kubernetes-validate ships schemas for reach 1.37; 1.33 and 1.34 are the
# platforms the portal supports (resource.k8s.io v1beta1 and v1).
VERSIONS = ("1.33", "1.34")
SECRETS = {
    "SECRET_KEY",
    "DATABASE_URL",
    "REDIS_URL",
    "CLUSTER_CREDENTIALS_KEYS",
    "METRICS_TOKEN",
    "OIDC_RP_CLIENT_SECRET",
}
NAMESPACE = "gpu-portal"
# The image each overlay's `images:` entry names (autoscaled is production's).
IMAGES = {
    "dev": "gpu-claims-portal:dev",
    "production": "ghcr.io/example/gpu-claims-portal:1.0.0",
    "autoscaled": "ghcr.io/example/gpu-claims-portal:1.0.0",
}


def env_file(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text().splitlines() if "=" in line]
    pairs = (line.split("=", 1) for line in lines if not line.startswith("#"))
    return dict(pairs)


def containers(template: dict[str, Any]) -> list[dict[str, Any]]:
    spec = template["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def test_it_has_the_overlays_the_docs_name() -> None:
    assert OVERLAYS == ["autoscaled", "dev", "production"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_it_renders_objects_valid_in_strict_upstream_schemas(overlay: str, version: str) -> None:
    documents = rendered(overlay)
    assert len(documents) >= 12
    for document in documents:
        # Raises ValidationError naming the field; an unknown kind raises SchemaNotFoundError.
        kubernetes_validate.validate(document, version, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_it_runs_every_container_as_non_root_on_a_read_only_root(overlay: str) -> None:
    templates = pod_templates(overlay)
    assert set(templates) == {
        "gpu-portal-web",
        "gpu-portal-worker",
        "gpu-portal-follower",
        "gpu-portal-beat",
        "gpu-portal-migrate",
    }
    for template in templates.values():
        pod = template["spec"]
        assert pod["serviceAccountName"] == "gpu-portal"
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert isinstance(pod["securityContext"]["runAsUser"], int)
        assert {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}} in pod["volumes"]
        for container in containers(template):
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True
            assert security["allowPrivilegeEscalation"] is False
            assert security["capabilities"] == {"drop": ["ALL"]}
            assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
            assert "memory" in container["resources"]["limits"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_it_gives_every_container_the_settings_and_the_secret_reference(overlay: str) -> None:
    config_maps = objects(overlay, "ConfigMap")
    assert [name.startswith("gpu-portal-config-") for name in config_maps] == [True]
    images = set()
    for template in pod_templates(overlay).values():
        for container in containers(template):
            sources = container["envFrom"]
            assert sources[0]["configMapRef"]["name"] in config_maps
            assert sources[1] == {"secretRef": {"name": "gpu-portal-secrets"}}
            images.add(container["image"])
    assert len(images) == 1  # one image, every process
    # No secret travels in git: the Secret is made in the cluster (docs/operations.md).
    assert not objects(overlay, "Secret")
    for config in config_maps.values():
        assert not SECRETS & set(config["data"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_it_runs_the_image_its_overlay_names(overlay: str) -> None:
    images = {
        container["image"]
        for template in pod_templates(overlay).values()
        for container in containers(template)
    }
    assert images == {IMAGES[overlay]}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_it_puts_every_namespaced_object_in_the_portals_namespace(overlay: str) -> None:
    placed = {
        f"{o['kind']}/{o['metadata']['name']}": o["metadata"].get("namespace")
        for o in rendered(overlay)
    }
    expected = {
        f"{o['kind']}/{o['metadata']['name']}": None if o["kind"] in CLUSTER_SCOPED else NAMESPACE
        for o in rendered(overlay)
    }
    assert placed == expected


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_it_runs_exactly_one_beat_and_probes_the_web_pods(overlay: str) -> None:
    deployments = objects(overlay, "Deployment")
    beat = deployments["gpu-portal-beat"]["spec"]
    assert (beat["replicas"], beat["strategy"]) == (1, {"type": "Recreate"})
    web = deployments["gpu-portal-web"]["spec"]["template"]["spec"]["containers"][0]
    assert web["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert web["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    follower = deployments["gpu-portal-follower"]["spec"]["template"]["spec"]["containers"][0]
    assert follower["args"] == ["python", "manage.py", "follow_clusters"]
    migrate = pod_templates(overlay)["gpu-portal-migrate"]["spec"]["containers"][0]
    assert "manage.py migrate --noinput" in migrate["command"][-1]
    for name, deployment in deployments.items():
        waiting = deployment["spec"]["template"]["spec"]["initContainers"][0]
        assert "migrate --check" in waiting["command"][-1], name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_it_selects_its_own_pods(overlay: str) -> None:
    deployments = objects(overlay, "Deployment")
    for deployment in deployments.values():
        selector = deployment["spec"]["selector"]["matchLabels"]
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items()
    web_labels = deployments["gpu-portal-web"]["spec"]["template"]["metadata"]["labels"]
    service = objects(overlay, "Service")["gpu-portal-web"]["spec"]
    assert service["selector"].items() <= web_labels.items()
    backend = objects(overlay, "Ingress")["gpu-portal"]["spec"]["rules"][0]["http"]
    assert backend["paths"][0]["backend"]["service"] == {
        "name": "gpu-portal-web",
        "port": {"name": "http"},
    }
    for budget in objects(overlay, "PodDisruptionBudget").values():
        matched = [
            name
            for name, d in deployments.items()
            if budget["spec"]["selector"]["matchLabels"].items()
            <= d["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert len(matched) == 1, budget["metadata"]["name"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_it_binds_the_documented_role_to_the_portals_service_account(overlay: str) -> None:
    role = objects(overlay, "ClusterRole")["gpu-portal"]
    binding = objects(overlay, "ClusterRoleBinding")["gpu-portal"]
    account = objects(overlay, "ServiceAccount")["gpu-portal"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpu-portal", "namespace": "gpu-portal"}
    ]
    assert account["metadata"]["namespace"] == "gpu-portal"
    source = yaml.safe_load((DEPLOY / "base" / "clusterrole.yaml").read_text())
    assert role["rules"] == source["rules"]


def test_it_runs_production_with_the_documented_production_settings() -> None:
    config = next(iter(objects("production", "ConfigMap").values()))["data"]
    documented = env_file(ROOT / "docs" / "production.env")
    expected = {key: value for key, value in documented.items() if key not in SECRETS}
    assert expected.items() <= config.items()
    assert config["KUBE_IN_CLUSTER"] == "True"
    assert objects("production", "Ingress")["gpu-portal"]["spec"]["tls"] == [
        {"hosts": ["portal.example.com"], "secretName": "gpu-portal-tls"}
    ]
    assert sorted(objects("production", "PodDisruptionBudget")) == [
        "gpu-portal-follower",
        "gpu-portal-web",
    ]


def test_it_scales_the_workers_by_the_queue_only_where_asked() -> None:
    autoscaler = objects("autoscaled", "HorizontalPodAutoscaler")["gpu-portal-worker"]["spec"]
    assert autoscaler["scaleTargetRef"]["name"] == "gpu-portal-worker"
    metric = autoscaler["metrics"][0]["external"]["metric"]
    assert metric["selector"]["matchLabels"] == {"key": "portal"}  # CELERY_QUEUE's default
    # The autoscaler owns the count: an apply must not reset it.
    assert "replicas" not in objects("autoscaled", "Deployment")["gpu-portal-worker"]["spec"]
    assert not objects("production", "HorizontalPodAutoscaler")
