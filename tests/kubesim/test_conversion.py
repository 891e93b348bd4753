"""resource.k8s.io objects convert between v1beta1, v1beta2 and v1 from one stored form."""

from kubernetes import client, config

import kubesim
from kubesim.registry.kinds import kind_for
from tests.fixtures.kubesim import api_client, create_namespace

CLAIMS = kind_for("resource.k8s.io", "resourceclaims")
SLICES = kind_for("resource.k8s.io", "resourceslices")
TEMPLATES = kind_for("resource.k8s.io", "resourceclaimtemplates")
CLASSES = kind_for("resource.k8s.io", "deviceclasses")

SELECTOR = [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]
GPU_REQUEST = {"deviceClassName": "gpu.nvidia.com", "selectors": SELECTOR, "count": 2}
ANY_GPU = {"name": "any", "firstAvailable": [{"name": "one", "deviceClassName": "gpu.nvidia.com"}]}


def claim(version: str, gpu_request: dict) -> dict:
    """The same claim as written in `version`: only its gpu request differs between versions."""
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu-claim", "namespace": "dra-test"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", **gpu_request}, ANY_GPU],
                "constraints": [{"matchAttribute": "gpu.nvidia.com/parentUUID"}],
            }
        },
    }


V1BETA1_CLAIM = claim("v1beta1", GPU_REQUEST)
V1_CLAIM = claim("v1", {"exactly": GPU_REQUEST})
STATUS = {
    "allocation": {
        "devices": {
            "results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n", "device": "gpu-0"}
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}
            ]
        },
        "allocationTimestamp": "2026-01-01T00:00:00Z",
    },
    "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}],
}


def test_it_stores_a_v1beta1_claim_in_the_v1_shape() -> None:
    assert CLAIMS.to_storage(V1BETA1_CLAIM, "v1beta1") == V1_CLAIM


def test_it_serves_a_v1_claim_flat_as_v1beta1() -> None:
    assert CLAIMS.from_storage(V1_CLAIM, "v1beta1") == V1BETA1_CLAIM


def test_it_serves_v1beta2_in_the_v1_shape() -> None:
    served = CLAIMS.from_storage(V1_CLAIM, "v1beta2")
    assert served["apiVersion"] == "resource.k8s.io/v1beta2"
    assert served["spec"] == V1_CLAIM["spec"]
    assert CLAIMS.to_storage(served, "v1beta2") == V1_CLAIM


def test_it_serves_status_identically_in_every_version() -> None:
    stored = {**V1_CLAIM, "status": STATUS}
    for version in ("v1", "v1beta2", "v1beta1"):
        assert CLAIMS.from_storage(stored, version)["status"] == STATUS


def test_it_converts_templates_both_ways() -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "dra-test"},
        "spec": {"metadata": {"labels": {"a": "b"}}, "spec": V1BETA1_CLAIM["spec"]},
    }
    stored = TEMPLATES.to_storage(template, "v1beta1")
    assert stored["spec"]["spec"] == V1_CLAIM["spec"]
    assert stored["spec"]["metadata"] == {"labels": {"a": "b"}}
    assert TEMPLATES.from_storage(stored, "v1beta1") == template


def test_it_moves_slice_devices_into_and_out_of_basic() -> None:
    device = {
        "name": "gpu-0",
        "attributes": {"type": {"string": "gpu"}},
        "capacity": {"memory": {"value": "80Gi"}},
    }
    stored = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {"driver": "d", "devices": [device]},
    }
    beta = SLICES.from_storage(stored, "v1beta1")
    assert beta["spec"]["devices"] == [
        {
            "name": "gpu-0",
            "basic": {
                "attributes": {"type": {"string": "gpu"}},
                "capacity": {"memory": {"value": "80Gi"}},
            },
        }
    ]
    assert SLICES.to_storage(beta, "v1beta1") == stored


def test_it_keeps_device_classes_as_they_are() -> None:
    device_class = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "DeviceClass",
        "metadata": {"name": "c"},
        "spec": {"selectors": SELECTOR},
    }
    stored = CLASSES.to_storage(device_class, "v1beta1")
    assert stored["apiVersion"] == "resource.k8s.io/v1"
    assert stored["spec"] == device_class["spec"]


def test_it_does_not_invent_a_missing_spec() -> None:
    bare = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c"},
    }
    assert "spec" not in CLAIMS.to_storage(bare, "v1beta1")


def test_it_reads_a_claim_created_as_v1beta1_in_v1_and_back(
    kubesim_cluster: kubesim.Handle,
) -> None:
    api = api_client(kubesim_cluster)
    namespace = create_namespace(kubesim_cluster, "conv")
    beta = client.ResourceV1beta1Api(api)
    v1 = client.ResourceV1Api(api)
    beta.create_namespaced_resource_claim(
        namespace,
        {
            "apiVersion": "resource.k8s.io/v1beta1",
            "kind": "ResourceClaim",
            "metadata": {"name": "from-beta"},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]}
            },
        },
    )
    v1.create_namespaced_resource_claim(
        namespace,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "from-v1"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2},
                        }
                    ]
                }
            },
        },
    )

    as_v1 = v1.read_namespaced_resource_claim("from-beta", namespace)
    exact = as_v1.spec.devices.requests[0].exactly
    assert (exact.device_class_name, exact.allocation_mode, exact.count) == (
        "gpu.nvidia.com",
        "ExactCount",
        1,
    )
    as_beta = beta.read_namespaced_resource_claim("from-v1", namespace)
    request = as_beta.spec.devices.requests[0]
    assert (request.device_class_name, request.count) == ("gpu.nvidia.com", 2)
    as_beta2 = client.ResourceV1beta2Api(api).read_namespaced_resource_claim("from-beta", namespace)
    assert as_beta2.spec.devices.requests[0].exactly.device_class_name == "gpu.nvidia.com"


def test_it_serves_slices_with_basic_in_v1beta1(kubesim_cluster: kubesim.Handle) -> None:
    api = config.new_client_from_config(kubesim_cluster.kubeconfig)
    beta = client.ResourceV1beta1Api(api).list_resource_slice().items
    v1 = client.ResourceV1Api(api).list_resource_slice().items
    assert beta and v1
    assert beta[0].spec.devices[0].basic.attributes["productName"].string
    assert (
        v1[0].spec.devices[0].attributes["productName"].string
        == beta[0].spec.devices[0].basic.attributes["productName"].string
    )
