import kubernetes_validate
import pytest
import yaml

from claims.kube import manifests

LABELS = {"gpu-portal.io/claim-request": "7"}


def assert_valid(manifest: dict, *k8s_versions: str) -> None:
    for version in k8s_versions:
        kubernetes_validate.validate(manifest, version, strict=True)


def claim(api_version: str, **overrides: object) -> dict:
    arguments = {
        "api_version": api_version,
        "namespace": "dra-test",
        "name": "gpu-claim",
        "device_class": "gpu.nvidia.com",
        "count": None,
        "labels": LABELS,
    }
    arguments.update(overrides)
    return manifests.resource_claim_manifest(**arguments)


def test_it_builds_the_seed_claim_in_v1beta1_shape() -> None:
    manifest = claim("v1beta1")

    assert manifest["apiVersion"] == "resource.k8s.io/v1beta1"
    assert manifest["spec"] == {
        "devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]}
    }
    assert_valid(manifest, "1.33", "1.34")


@pytest.mark.parametrize("version", ["v1", "resource.k8s.io/v1"])
def test_it_wraps_the_request_in_exactly_for_v1(version: str) -> None:
    manifest = claim(version)

    assert manifest["apiVersion"] == "resource.k8s.io/v1"
    request = manifest["spec"]["devices"]["requests"][0]
    assert request == {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    assert_valid(manifest, "1.34")


def test_it_builds_v1beta2_in_the_v1_shape() -> None:
    manifest = claim("v1beta2", count=2)

    assert manifest["apiVersion"] == "resource.k8s.io/v1beta2"
    assert manifest["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    assert_valid(manifest, "1.33", "1.34")


@pytest.mark.parametrize(("version", "k8s"), [("v1beta1", "1.33"), ("v1", "1.34")])
def test_it_puts_count_and_selector_where_the_api_wants_them(version: str, k8s: str) -> None:
    expression = "device.attributes['gpu.nvidia.com'].productName.matches('H100')"
    manifest = claim(version, count=3, selector=f"  {expression} ")

    request = manifest["spec"]["devices"]["requests"][0]
    fields = request if version == "v1beta1" else request["exactly"]
    assert fields["allocationMode"] == "ExactCount"
    assert fields["count"] == 3
    assert fields["selectors"] == [{"cel": {"expression": expression}}]
    assert_valid(manifest, k8s)


@pytest.mark.parametrize(("version", "k8s"), [("v1beta1", "1.33"), ("v1", "1.34")])
def test_it_asks_for_all_devices_without_a_count(version: str, k8s: str) -> None:
    manifest = claim(version, count=4, all_devices=True)

    request = manifest["spec"]["devices"]["requests"][0]
    fields = request if version == "v1beta1" else request["exactly"]
    assert fields["allocationMode"] == "All"
    assert "count" not in fields
    assert_valid(manifest, k8s)


def test_it_refuses_an_unknown_resource_version() -> None:
    with pytest.raises(ValueError, match="v1alpha3"):
        claim("v1alpha3")


def test_it_labels_everything_as_managed_by_the_portal() -> None:
    namespace = manifests.namespace_manifest(name="team-a", labels=LABELS)

    assert namespace["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "gpu-portal",
        "gpu-portal.io/claim-request": "7",
    }
    assert claim("v1")["metadata"]["labels"] == namespace["metadata"]["labels"]
    assert_valid(namespace, "1.33", "1.34")


def test_it_builds_the_seeds_pod1_for_a_claim() -> None:
    pod = manifests.verification_pod_manifest(
        namespace="dra-test", name="pod1", claim_name="gpu-claim", labels=LABELS
    )

    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    assert [(c["name"], c["image"]) for c in spec["containers"]] == [
        ("ctr0", "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"),
        ("ctr1", "nvcr.io/nvidia/k8s/cuda-sample:devicequery"),
    ]
    assert all(c["resources"] == {"claims": [{"name": "gpu"}]} for c in spec["containers"])
    assert pod["metadata"]["namespace"] == "dra-test"
    assert_valid(pod, "1.33", "1.34")


def test_it_gives_a_pod_spec_snippet_that_references_the_claim() -> None:
    snippet = manifests.pod_spec_snippet("gpu-claim")

    assert snippet["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    assert snippet["spec"]["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mine"}, **snippet}
    assert_valid(pod, "1.33", "1.34")


def test_it_renders_yaml_that_reads_back_to_the_same_manifest() -> None:
    manifest = claim("v1", count=2, selector="device.driver == 'gpu.nvidia.com'")

    text = manifests.to_yaml(manifest)

    assert text.startswith("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n")
    assert yaml.safe_load(text) == manifest
    assert manifests.to_yaml(manifest) == text


def test_it_does_not_let_a_selector_inject_yaml() -> None:
    hostile = "true\nkind: Secret"
    manifest = claim("v1", selector=hostile)

    assert yaml.safe_load(manifests.to_yaml(manifest))["kind"] == "ResourceClaim"


def test_it_builds_a_pod_with_a_pull_secret_and_a_deadline() -> None:
    pod = manifests.verification_pod_manifest(
        namespace="dra-test",
        name="pod1",
        claim_name="gpu-claim",
        labels=LABELS,
        images=("registry.example/vectoradd:1", "registry.example/devicequery:1"),
        image_pull_secret="regcred",
        active_deadline_seconds=600,
    )

    spec = pod["spec"]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["activeDeadlineSeconds"] == 600
    assert [(c["name"], c["image"]) for c in spec["containers"]] == [
        ("ctr0", "registry.example/vectoradd:1"),
        ("ctr1", "registry.example/devicequery:1"),
    ]
    assert_valid(pod, "1.33", "1.34")


def test_it_leaves_out_the_pull_secret_and_deadline_unless_given() -> None:
    pod = manifests.verification_pod_manifest(
        namespace="dra-test", name="pod1", claim_name="gpu-claim", labels=LABELS
    )

    assert "imagePullSecrets" not in pod["spec"]
    assert "activeDeadlineSeconds" not in pod["spec"]


def test_it_builds_a_service_account() -> None:
    account = manifests.service_account_manifest(namespace="team-a", name="alice", labels=LABELS)

    assert (account["apiVersion"], account["kind"]) == ("v1", "ServiceAccount")
    assert account["metadata"]["namespace"] == "team-a"
    assert account["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpu-portal"
    assert_valid(account, "1.33", "1.34")


def test_it_binds_a_cluster_role_within_the_namespace() -> None:
    subject = {"kind": "ServiceAccount", "name": "alice", "namespace": "team-a"}
    binding = manifests.role_binding_manifest(
        namespace="team-a",
        name="alice-edit",
        cluster_role="edit",
        subjects=[subject],
        labels=LABELS,
    )

    assert binding["apiVersion"] == "rbac.authorization.k8s.io/v1"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "edit",
    }
    assert binding["subjects"] == [subject]
    assert binding["metadata"]["namespace"] == "team-a"
    assert_valid(binding, "1.33", "1.34")


H100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
A100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-40GB'"
THREE = [
    manifests.Alternative("h100", "gpu.nvidia.com", 2, selector=H100),
    manifests.Alternative("a100", "gpu.nvidia.com", 4, selector=A100),
    manifests.Alternative("mig-1g-10gb", "mig.nvidia.com", None, all_devices=True),
]


@pytest.mark.parametrize(("version", "k8s"), [("v1beta1", "1.33"), ("v1", "1.34")])
def test_it_keeps_one_alternative_as_exactly_as_before(version: str, k8s: str) -> None:
    one = [manifests.Alternative("h100", "gpu.nvidia.com", 2, selector=H100)]
    manifest = claim(version, count=2, selector=H100, alternatives=one)

    assert manifest == claim(version, count=2, selector=H100)
    assert "firstAvailable" not in manifest["spec"]["devices"]["requests"][0]
    assert_valid(manifest, k8s)


@pytest.mark.parametrize(
    ("version", "k8s"), [("v1beta1", "1.33"), ("v1beta1", "1.34"), ("v1", "1.34")]
)
def test_it_writes_alternatives_as_a_prioritized_list(version: str, k8s: str) -> None:
    manifest = claim(version, count=2, selector=H100, alternatives=THREE)

    (request,) = manifest["spec"]["devices"]["requests"]
    assert request == {
        "name": "gpu",
        "firstAvailable": [
            {
                "name": "h100",
                "deviceClassName": "gpu.nvidia.com",
                "selectors": [{"cel": {"expression": H100}}],
                "allocationMode": "ExactCount",
                "count": 2,
            },
            {
                "name": "a100",
                "deviceClassName": "gpu.nvidia.com",
                "selectors": [{"cel": {"expression": A100}}],
                "allocationMode": "ExactCount",
                "count": 4,
            },
            {"name": "mig-1g-10gb", "deviceClassName": "mig.nvidia.com", "allocationMode": "All"},
        ],
    }
    assert_valid(manifest, k8s)
